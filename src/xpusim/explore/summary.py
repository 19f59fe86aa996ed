"""What a finished sweep says: its Pareto fronts, counts and timing, and the files beside the
CSV (a Parquet copy and the PNG plots).

Both optional writers degrade to a note: without pyarrow the results stay in CSV only, and
without matplotlib there are no plots; the sweep itself never depends on either.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xpusim import api
from xpusim.errors import UserError
from xpusim.explore import pareto
from xpusim.explore.grid import Point
from xpusim.explore.store import SPEC_HASH, Row, column
from xpusim.explore.sweep import Grid, SweepRun, resolve_specs
from xpusim.files import atomic_path
from xpusim.hardware.system import System
from xpusim.result import Result

PARQUET_FILE = "results.parquet"
PLOTS = ("pareto.png", "roofline.png", "breakdown.png")


@dataclass
class SweepSummary(Result):
    model: str
    n_points: int
    n_simulated: int  # by this run; the rest were resumed from the results file
    n_fit: int
    n_errors: int
    objectives: list[str]  # the front's (x, y) columns
    pareto: list[Row]  # the front over every target, along x
    best: dict[str, Row]  # per target: its front point of highest y
    simulate_s: float
    simulate_cpu_s: float
    executor: str
    workers: int
    files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def summarize(
    grid: Grid, run: SweepRun, out: Path, plots: bool = True, rank: str = "throughput"
) -> SweepSummary:
    """Fronts per target on the workload's objectives (`rank` "cost": against dollars per
    million instead of throughput per chip)."""
    rows = run.rows
    objectives = pareto.objectives_for(run.columns, rank, rows)
    fronts = {}
    for target in grid.targets:
        mine = [i for i, row in enumerate(rows) if row["target"] == target]
        fronts[target] = pareto.front(rows, objectives, mine)
    best = {t: rows[pareto.best(rows, f, objectives[1])] for t, f in fronts.items() if f}
    summary = SweepSummary(
        model=getattr(grid.workload, "name", str(grid.workload)),
        n_points=len(rows),
        n_simulated=run.n_simulated,
        n_fit=sum(r.get("fits") is True for r in rows),
        n_errors=sum(bool(r.get("error")) for r in rows),
        objectives=[o.column for o in objectives],
        pareto=[_public(rows[i]) for i in pareto.front(rows, objectives)],
        best={t: _public(r) for t, r in best.items()},
        simulate_s=run.simulate_s,
        simulate_cpu_s=run.simulate_cpu_s,
        executor=run.executor,
        workers=run.workers,
        files=[str(run.results_path)],
        notes=list(run.notes),
    )
    _write_parquet(run, out / PARQUET_FILE, summary)
    if plots:
        _write_plots(grid, rows, fronts, objectives, best, out, summary)
    return summary


def _public(row: Row) -> Row:
    return {k: v for k, v in row.items() if k not in ("key", SPEC_HASH)}


def _write_parquet(run: SweepRun, path: Path, summary: SweepSummary) -> None:
    """The grid's rows, column by column (a million rows never become a million dicts)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        summary.notes.append("pyarrow is not installed: wrote CSV only (pip install pyarrow)")
        return
    rows = run.rows
    columns = {}
    for c in run.columns:
        try:
            columns[c] = pa.array(column(rows, c))
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # a row read back from an edited file
            raise UserError(f"{run.results_path}: column {c!r} mixes numbers and text (was the "
                            "file edited?); remove the file to simulate afresh") from None
    table = pa.table(columns)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)
    summary.files.append(str(path))


def _write_plots(
    grid: Grid,
    rows: list[Row],
    fronts: dict[str, list[int]],
    objectives: tuple[pareto.Objective, pareto.Objective],
    best: dict[str, Row],
    out: Path,
    summary: SweepSummary,
) -> None:
    from xpusim.report import plots

    if plots.pyplot_or_none() is None:
        summary.notes.append("matplotlib is not installed: no plots (pip install 'xpusim[plot]')")
        return
    varied = [name for name, values in grid.axes.items() if len(values) > 1]
    varied += [f"set.{path}" for path, values in grid.sets if len(values) > 1]
    if not summary.n_fit:
        summary.notes.append("no point fits: nothing to plot")
        return
    title = f"{summary.model}: {summary.n_fit} of {summary.n_points} points fit"
    paths = [out / name for name in PLOTS]
    plots.pareto_plot(rows, fronts, objectives, varied, title, paths[0])
    chosen = _resimulate(grid, best)
    if chosen and all(getattr(result, "ops", None) for _, result, _ in chosen):
        plots.roofline_plot(chosen, paths[1])
        plots.breakdown_plot([(label, result) for label, result, _ in chosen], paths[2])
    summary.files += [str(p) for p in paths if p.exists()]


def _resimulate(grid: Grid, best: dict[str, Row]) -> list[tuple[str, Any, Any]]:
    """Each target's best point in full (its ops), for the roofline and the breakdown."""
    points = [Point.from_key(str(row["key"])) for row in best.values()]
    specs = resolve_specs(points)
    chosen = []
    for point in points:
        spec = specs[point.spec_key]  # a point on a front ran, so its spec is valid
        result = api.simulate(grid.workload, spec, **dict(point.options))
        chip = spec.chip if isinstance(spec, System) else spec
        chosen.append((f"{point.target} {_label(result)}", result, chip))
    return chosen


def _label(result: Any) -> str:
    """'(batch 8, bf16, tp2)'; a serving run names its load instead of a batch, and a
    query server (recommendation models, CNNs) its rate."""
    plan = getattr(result, "plan", None) or {}
    degrees = " x ".join(f"{k}{v}" for k, v in plan.items() if v > 1)
    load = getattr(result, "load", None)
    if load:
        shape = f"{load['kind']} {load['value']}"
    elif getattr(result, "rate_qps", None) is not None:
        shape = f"rate {result.rate_qps:g}/s"
    else:
        shape = f"batch {result.batch}"
    parts = [shape, getattr(result, "precision", None), degrees]
    return f"({', '.join(p for p in parts if p)})"
