"""Runs the `xpusim` command in-process, as the tests of every command need."""

from __future__ import annotations

import json
from pathlib import Path

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


def config_file(tmp_path: Path, config: dict) -> str:
    """`config` written as tmp_path's config.json (a model a command reads): its path."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return str(path)


def refused(capsys, *argv: str) -> str:
    """`xpusim argv...` refused as bad input: exit status 2 and one line; the line."""
    code, _, err = run_cli(capsys, *argv)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1, err
    return err
