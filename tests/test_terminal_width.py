"""Tables fit the terminal and print every number whole (report/fit.py): each command that
prints results is rendered at 80 and 120 columns and checked against its `--wide` rendering,
cell by cell."""

from __future__ import annotations

import re

import pytest
from cli_run import run_cli
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console
from rich.table import Table

from xpusim.report.fit import fit, keyed
from xpusim.report.units import si, watts

BORDER = re.compile(r"[│┃]")


def cells(out: str) -> set[str]:
    """Every cell of every table row printed (the text between vertical borders)."""
    found = set()
    for line in out.splitlines():
        if BORDER.search(line):
            found.update(c.strip() for c in BORDER.split(line)[1:-1] if c.strip())
    return found


COMMANDS = {
    "demo": ["demo"],
    "run": ["run", "llama-2-70b", "--chip", "h100-sxm", "--chips", "8"],
    "run-ops": ["run", "llama-2-70b", "--chip", "h100-sxm", "--chips", "8", "--pp", "4",
                "--tp", "2", "--overlap", "--ops"],
    "run-training": ["run", "llama-2-7b", "--chip", "h100-sxm", "--mode", "training",
                     "--chips", "8"],
    "compare": ["compare", "llama-2-7b", "--chip", "h100-sxm", "--chip", "mi300x",
                "--chip", "tpu-v5p", "--price", "2"],
    "serve": ["serve", "llama-2-7b", "--chip", "h100-sxm", "--concurrency", "4",
              "--requests", "20"],
    "sweep": ["sweep", "llama-2-7b", "--chip", "h100-sxm", "--chip", "mi300x", "--batch",
              "1,8", "--precision", "fp8,bf16", "--no-plots", "--workers", "1"],
    "validate": ["validate", "--chip", "tpu-v4"],
}  # fmt: skip


@pytest.mark.parametrize("name", COMMANDS)
@pytest.mark.parametrize("columns", [80, 120])
def test_every_cell_prints_whole_at_80_and_120_columns(capsys, monkeypatch, tmp_path, name,
                                                       columns):  # fmt: skip
    argv = list(COMMANDS[name])
    if name in ("sweep", "validate"):
        argv += ["--out", str(tmp_path / "out")]
    monkeypatch.setenv("COLUMNS", str(columns))
    code, out, err = run_cli(capsys, *argv)
    assert code == 0, err
    assert "…" not in out
    assert max(map(len, out.splitlines())) <= columns
    monkeypatch.setenv("COLUMNS", "1000")
    if name == "sweep":  # the second run would resume the first: a new folder
        argv[-1] = str(tmp_path / "wide")
    code, wide, err = run_cli(capsys, *argv, "--wide")
    assert code == 0, err
    assert cells(wide) and cells(wide) <= cells(out), cells(wide) - cells(out)


def test_key_columns_repeat_in_every_part():
    table = keyed(Table(title="t"), 2)
    for header in ["chip", "precision", *(f"metric {i}" for i in range(12))]:
        table.add_column(header)
    table.add_row("h100-sxm", "fp8", *(si(1234.5 * i, "B") for i in range(12)))
    console = Console(width=60, record=True)
    console.print(fit(console, table))
    out = console.export_text()
    headers = [line for line in out.splitlines() if "chip" in line]
    assert len(headers) > 1 and all("precision" in line for line in headers)
    assert max(map(len, out.splitlines())) <= 60


@pytest.mark.parametrize(("value", "unit", "shown"), [
    (55_850, "", "55.8 k"), (999.96, "", "1 k"), (0.686, "", "0.686"), (0.00412, "J", "4.12 mJ"),
    (1.979e15, "OPS", "1.98 POPS"), (2.5e-5, "J", "25 µJ"),
])  # fmt: skip
def test_one_number_style(value, unit, shown):
    assert si(value, unit) == shown


EXPONENT = re.compile(r"\de[+-]\d")
"""A number in Python's exponent form ('1e+03'), which no table or line should print."""


@given(tdp=st.floats(0.5, 20_000), share=st.floats(0, 1))
def test_power_over_tdp_prints_without_an_exponent(tdp, share):
    """A B200's 1 kW TDP read '312/1e+03 W' in run, compare and demo."""
    shown = watts(share * tdp, tdp)
    assert re.fullmatch(r"[\d.]+/[\d.]+ W", shown), shown
    assert float(shown.split("/")[1].removesuffix(" W")) == pytest.approx(tdp, rel=5e-3)


def test_serve_prints_a_thousand_waiting_in_the_one_number_style(capsys, monkeypatch):
    """A queue past a thousand requests read '1.38e+03 waiting'."""
    monkeypatch.setenv("COLUMNS", "100")
    code, out, err = run_cli(capsys, "serve", "llama-3.2-1b", "--chip", "h100-sxm", "--rate",
                             "1e5", "--requests", "2500", "--max-batch", "4", "--gen", "2",
                             "--prompt", "16", "--engine", "ideal")  # fmt: skip
    assert code == 0, err
    assert re.search(r"batch 4 sequences \(mean over iterations\), 1\.\d+ k requests "
                     r"waiting \(mean over time\)", out), out
    assert not EXPONENT.search(out), out


def _continues(previous: str, piece: str) -> bool:
    """Whether `piece` of a figure's name goes on from the line above (report/tables.py
    field_lines breaks a name after a '.' or before an '@')."""
    return previous.endswith(".") or piece.startswith("@")


@pytest.mark.parametrize("columns", [80, 120])
def test_chip_fits_with_each_figure_whole_and_in_the_one_number_style(capsys, monkeypatch,
                                                                      columns):  # fmt: skip
    """`xpusim chip` printed '2.75e+14' and broke 'peak_ops_per_s.int8' inside its words."""
    from xpusim.hardware.catalog import load_chip

    monkeypatch.setenv("COLUMNS", str(columns))
    code, out, err = run_cli(capsys, "chip", "h100-sxm")
    assert code == 0, err
    assert "…" not in out and max(map(len, out.splitlines())) <= columns
    rows: list[list[str]] = []  # [name, value] of each row, their lines joined
    for line in out.splitlines():
        cells = [c.strip() for c in BORDER.split(line)[1:-1]]
        if len(cells) != 3 or (not cells[0] and not cells[1]) or cells[0] == "field":
            continue
        if rows and (not cells[0] or _continues(rows[-1][0], cells[0])):
            rows[-1] = [rows[-1][0] + cells[0], f"{rows[-1][1]} {cells[1]}".strip()]
        else:
            rows.append(cells[:2])
    shown = dict(rows)
    assert {path for path, _ in load_chip("h100-sxm").figure_items()} <= shown.keys()
    assert shown["clock_hz"] == "1.98 GHz" and shown["tdp_w"] == "700 W"
    assert shown["peak_ops_per_s.bf16"] == "989.5 TOPS"
    assert shown["memory[1].bandwidth_bytes_per_s"] == "3.35 TB/s"
    assert shown["chip_to_chip.latency_s"] == "1 µs"
    assert not [v for v in shown.values() if EXPONENT.search(v)]
