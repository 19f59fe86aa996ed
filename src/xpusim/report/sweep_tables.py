"""Rich tables for sweeps and sensitivity rankings. Only formatting."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rich.table import Table

from xpusim.compiler.partition import plan_text
from xpusim.explore.sensitivity import Sensitivity
from xpusim.explore.summary import SweepSummary
from xpusim.report.fit import keyed
from xpusim.report.units import dollars, seconds, si

Row = Mapping[str, Any]


def _number(value: float) -> str:
    return si(value)


METRICS: tuple[tuple[str, str, Callable[[Any], str]], ...] = (
    ("ttft_s", "TTFT", seconds),
    ("tpot_s", "TPOT", seconds),
    ("ttft_s.p50", "TTFT p50", seconds),  # serving runs: percentiles under load
    ("ttft_s.p99", "TTFT p99", seconds),
    ("tpot_s.mean", "TPOT", seconds),
    ("goodput_requests_per_s", "goodput/s", _number),
    ("latency_s.p99", "p99 latency", seconds),
    ("goodput_queries_per_s", "goodput queries/s", _number),
    ("latency_s", "latency", seconds),
    ("step_time_s", "step", seconds),
    ("mfu", "MFU", lambda v: f"{v:.1%}"),
    ("tokens_per_s_per_user", "tok/s/user", _number),
    ("tokens_per_s_per_chip", "tok/s/chip", _number),
    ("queries_per_s_per_chip", "queries/s/chip", _number),
    ("throughput_per_chip", "items/s/chip", _number),
    ("cost.usd_per_million", "$/M", dollars),
    ("usd_per_million_goodput", "$/M in SLOs", dollars),
    ("joules_per_token", "energy/token", lambda v: si(v, "J")),
    ("joules_per_query", "energy/query", lambda v: si(v, "J")),
    ("bottleneck", "bound by", str),
)
"""The columns a front's rows are shown with, where the rows have them."""


def _plan(row: Row) -> str:
    degrees = plan_text({k.removeprefix("plan."): v for k, v in row.items()
                         if k.startswith("plan.")})  # fmt: skip
    chips = row.get("chips", 1)
    return str(chips) if degrees == "1 chip" else f"{chips} ({degrees})"


def front_table(summary: SweepSummary, inputs: Sequence[str], top: int) -> Table:
    """The Pareto front over all targets (evenly thinned to `top` rows)."""
    rows = summary.pareto
    step = max(1, -(-len(rows) // top))
    shown = rows[::step]
    title = (f"{summary.model}: Pareto front of {summary.objectives[0]} vs "
             f"{summary.objectives[1]} ({len(rows)} points"
             f"{f', 1 in {step} shown' if step > 1 else ''})")  # fmt: skip
    table = Table(title=title)
    metrics = [m for m in METRICS if any(row.get(m[0]) is not None for row in rows)]
    headers = ["target", *inputs, "chips", *(m[1] for m in metrics)]
    for header in headers:
        table.add_column(header, justify="left" if header in ("target", "bound by") else "right")
    for row in shown:
        cells = [str(row["target"]), *(_cell(row.get(name)) for name in inputs), _plan(row)]
        cells += [fmt(row[name]) if row.get(name) is not None else "—" for name, _, fmt in metrics]
        table.add_row(*cells)
    return keyed(table, 2 + len(inputs))  # target, the swept inputs and chips name a row


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    return f"{value:g}" if isinstance(value, float) else str(value)


def sensitivity_table(s: Sensitivity) -> Table:
    better = "higher" if s.higher_is_better else "lower"
    fits = "fits" if s.fits else f"does not fit (min_chips {s.min_chips})"
    table = Table(title=f"{s.model} on {s.chip}: {s.metric} = {si(s.baseline)} ({better} is "
                        f"better; {fits}), one change at a time")  # fmt: skip
    for header in ["change", s.metric, "gain", "fits", "min_chips"]:
        table.add_column(header, justify="left" if header == "change" else "right")
    for g in s.changes:
        if g.error:
            table.add_row(g.change, "—", "—", "—", f"not possible: {g.error}")
            continue
        table.add_row(g.change, si(g.value), f"{g.gain:.3f}x", "yes" if g.fits else "no",
                      str(g.min_chips))  # fmt: skip
    return table
