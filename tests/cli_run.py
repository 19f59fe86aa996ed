"""Runs the `xpusim` command in-process, as the tests of every command need."""

from __future__ import annotations

from xpusim.cli import main


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    """`xpusim argv...` in this process: (exit status, stdout, stderr)."""
    try:
        main(list(argv))
        code = 0
    except SystemExit as e:
        code = e.code or 0
    out, err = capsys.readouterr()
    return code, out, err
