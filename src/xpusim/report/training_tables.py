"""Tables of training results: one row per chip, then where each chip's step goes."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from xpusim.hardware.spec import display_id
from xpusim.report.fit import keyed
from xpusim.report.units import cost_cell, cost_column, gigabytes, seconds, si, watts
from xpusim.scenarios.training import TrainingResult


def _plan(r: TrainingResult) -> str:
    degrees = " x ".join(f"{k}{v}" for k, v in r.plan.items() if v > 1)
    return f"{r.chips} ({degrees})" if degrees else str(r.chips)


def training_table(results: Sequence[TrainingResult], title: str) -> Table:
    """Step time, throughput, utilization and each chip's memory split, side by side.

    Timings show even when the model does not fit: they say how the step would run if the
    memory existed, which is half of the answer to "can this chip train it at all?".
    """
    table = Table(title=title)
    money = cost_column(results)
    columns = ["chip", "chips", "precision", "fits", "step", "tok/s", *money, "MFU", "HFU",
               "weights+grads+opt / chip", "activations / chip", "capacity", "power/chip",
               "bound by"]  # fmt: skip
    for col in columns:
        table.add_column(col, justify="left" if col in ("chip", "precision", "fits") else "right")
    for r in results:
        mem = r.per_chip_memory_bytes
        fits = "yes" if r.fits else f"no: needs {r.min_chips}+ chips"
        table.add_row(
            display_id(r.chip), _plan(r), r.precision, fits, seconds(r.step_time_s),
            si(r.tokens_per_s),
            *cost_cell(r, money), f"{r.mfu:.1%}", f"{r.hfu:.1%}",
            f"{gigabytes(mem.weights)}+{gigabytes(mem.gradients)}+"
            f"{gigabytes(mem.optimizer_state)}", gigabytes(mem.activations),
            gigabytes(mem.capacity), watts(r.avg_power_w, r.tdp_w), r.bottleneck,
        )  # fmt: skip
    return keyed(table, 3)


def breakdown_table(results: Sequence[TrainingResult]) -> Table:
    """Where the step goes on each chip, as shares of its step time."""
    parts = list(results[0].time_breakdown_s)
    table = Table(title="where the step goes (share of the step, slowest pipeline stage)")
    table.add_column("chip")
    for part in parts:
        table.add_column(part.replace("_", " "), justify="right")
    for r in results:
        shares = [r.time_breakdown_s[p] / r.step_time_s for p in parts]
        table.add_row(display_id(r.chip), *(f"{s:.0%}" if s >= 0.005 else "—" for s in shares))
    return table
