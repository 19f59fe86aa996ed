"""Scores every published point: predicted beside measured, and the error statistics.

Error is the absolute percentage error |predicted - measured| / measured, the figure peers
publish (LLMCompass, Calculon, GenZ, Vidur). Which way a prediction misses is kept too:
a simulator that is always optimistic says something different from a noisy one.
"""

from __future__ import annotations

import difflib
import json
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from xpusim.errors import UserError
from xpusim.memo import in_scope
from xpusim.result import Result
from xpusim.validation.adapters import Unexpressible, predict
from xpusim.validation.points import Point, load_points


@dataclass
class ScoredPoint:
    id: str
    chip: str
    workload: str
    metric: str
    measured: float
    predicted: float
    ape: float  # absolute percentage error, as a fraction
    ratio: float  # predicted / measured
    bottleneck: str
    detail: str
    source: str
    notes: str
    known_gap: str = ""


@dataclass
class SkippedPoint:
    id: str
    chip: str
    workload: str
    metric: str
    reason: str


@dataclass
class Validation(Result):
    points: list[ScoredPoint]
    skipped: list[SkippedPoint]
    median_ape: float
    mean_ape: float
    n_points: int
    n_skipped: int
    worst: list[ScoredPoint] = field(default_factory=list)
    groups: dict[str, dict[str, float]] = field(default_factory=dict)  # see group_errors


def ape(predicted: float, measured: float) -> float:
    if measured == 0:
        raise ValueError("a measured value of 0 has no percentage error")
    return abs(predicted - measured) / abs(measured)


def summarize(points: list[ScoredPoint], skipped: list[SkippedPoint], worst: int = 3) -> Validation:
    """The statistics of the scored points; with none scored there are none to give."""
    if not points:
        why = f": {skipped[0].id}: {skipped[0].reason}" if skipped else ""
        raise UserError(f"none of these {len(skipped)} points can be scored yet{why}")
    errors = [p.ape for p in points]
    return Validation(
        points=points,
        skipped=skipped,
        median_ape=statistics.median(errors),
        mean_ape=statistics.fmean(errors),
        n_points=len(points),
        n_skipped=len(skipped),
        worst=sorted(points, key=lambda p: -p.ape)[:worst],
        groups=group_errors(points),
    )


def group_errors(points: list[ScoredPoint]) -> dict[str, dict[str, float]]:
    """Median and mean error per workload, and per metric within serving (TTFT, TPOT and
    throughput answer different questions and miss for different reasons)."""
    groups: dict[str, list[float]] = {}
    for p in points:
        groups.setdefault(p.workload, []).append(p.ape)
        if p.workload == "llm-serving":
            groups.setdefault(f"llm-serving {p.metric}", []).append(p.ape)
    return {name: {"median_ape": statistics.median(e), "mean_ape": statistics.fmean(e),
                   "n_points": len(e)} for name, e in sorted(groups.items())}  # fmt: skip


def score_point(point: Point) -> ScoredPoint:
    prediction = predict(point)
    measured = float(point.value)
    return ScoredPoint(
        id=point.id, chip=point.chip, workload=point.workload, metric=point.metric,
        measured=measured, predicted=prediction.value, ape=ape(prediction.value, measured),
        ratio=prediction.value / measured, bottleneck=prediction.bottleneck,
        detail=prediction.detail, source=point.source, notes=point.notes,
        known_gap=point.known_gap,
    )  # fmt: skip


def validate(
    points: tuple[Point, ...] | None = None, progress: Callable[[int, int], None] | None = None,
    workers: int | None = 1,
) -> Validation:
    """Every point scored or skipped, `progress(done, total)` told as they finish, on
    `workers` processes (None: every core); the published set's answer is kept (a process
    asks for it again: the report, the tests), since its serving points run simulations."""
    if points is None:
        return _validate_published(progress, workers)
    return _validate(points, progress, workers)


_PUBLISHED: list[Validation] = []


def _validate_published(progress: Callable[[int, int], None] | None,
                        workers: int | None) -> Validation:  # fmt: skip
    if not _PUBLISHED:
        _PUBLISHED.append(_validate(load_points(), progress, workers))
    return _PUBLISHED[0]


def select(points: tuple[Point, ...], chips: Sequence[str] = (), sources: Sequence[str] = (),
           workloads: Sequence[str] = ()) -> tuple[Point, ...]:  # fmt: skip
    """The points on any of `chips`, of any of `workloads` (exact ids), whose source holds any
    of `sources` (case-insensitive: 'mlcommons', 'tensorrt-llm'); a name matching no point is
    refused, naming the closest one that does."""
    for option, wanted, have in (("--chip", chips, {p.chip for p in points}),
                                 ("--workload", workloads, {p.workload for p in points})):
        for name in wanted:
            if name not in have:
                close = difflib.get_close_matches(name, sorted(have), n=1)
                hint = (f"; did you mean {close[0]}?" if close
                        else f" (one of: {', '.join(sorted(have))})")  # fmt: skip
                raise UserError(f"{option} {name}: no published point has it{hint}")
    chosen = tuple(
        p for p in points
        if (not chips or p.chip in chips) and (not workloads or p.workload in workloads)
        and (not sources or any(s.lower() in p.source.lower() for s in sources))
    )  # fmt: skip
    if not chosen:
        raise UserError(f"--source {', '.join(sources)}: no published point of these chips and "
                        "workloads cites it")  # fmt: skip
    return chosen


def _validate(points: tuple[Point, ...], progress: Callable[[int, int], None] | None = None,
              workers: int | None = 1) -> Validation:  # fmt: skip
    """Points are scored in groups that share a simulation (a serving run's mean and p99, TTFT
    and TPOT are four points of one run, cached per process by the adapter): the groups run
    on a process pool, costliest first (_cost_rank), so no run is done twice and no core
    is left with a long search at the end while the others wait."""
    from xpusim.explore.executor import choose

    groups = sorted(_groups(points), key=lambda g: (_cost_rank(g[0]), -len(g)))
    found: dict[str, ScoredPoint | SkippedPoint] = {}
    executor = choose(1 if len(groups) < 2 else workers, False, None, blas_threads=1)
    for outcomes in executor.map(_score_group, groups):
        found.update((o.id, o) for o in outcomes)
        if progress:
            progress(len(found), len(points))
    ordered = [found[p.id] for p in points]
    return summarize([o for o in ordered if isinstance(o, ScoredPoint)],
                     [o for o in ordered if isinstance(o, SkippedPoint)])  # fmt: skip


def _groups(points: tuple[Point, ...]) -> list[tuple[Point, ...]]:
    """Points that one simulation answers, together: same workload and setup, any metric."""
    groups: dict[str, list[Point]] = {}
    for p in points:
        setup = {k: v for k, v in p.setup.items() if k != "stat"}
        key = json.dumps([p.workload, p.chip, setup], sort_keys=True, default=str)
        groups.setdefault(key, []).append(p)
    return [tuple(g) for g in groups.values()]


COSTLIEST_LOADS = ("max-rate", "offline", "rate", "concurrency", "burst")
"""Serving loads, costliest first: a max-rate search runs about eight simulations of
thousands of requests each, an offline burst several rounds of the KV cache's batch, an
open loop 2,000 requests, a closed loop eight per client, a burst one per client. Every
other workload is one analytical call (milliseconds to a second)."""


def _cost_rank(point: Point) -> int:
    """Where a group of this point's setup runs in the pool's queue (0 first)."""
    if point.workload != "llm-serving":
        return len(COSTLIEST_LOADS)
    kind = (point.get("load") or {}).get("kind")
    return COSTLIEST_LOADS.index(kind) if kind in COSTLIEST_LOADS else len(COSTLIEST_LOADS)


@in_scope  # a group's serving points share one run (adapters._served)
def _score_group(points: tuple[Point, ...]) -> list[ScoredPoint | SkippedPoint]:
    outcomes: list[ScoredPoint | SkippedPoint] = []
    for point in points:
        try:
            outcomes.append(score_point(point))
        except (Unexpressible, UserError) as why:
            outcomes.append(SkippedPoint(point.id, point.chip, point.workload, point.metric,
                                         str(why)))  # fmt: skip
    return outcomes


def _is_time(metric: str) -> bool:
    """A time (ttft_s, tpot_s, itl_s, latency_s, time_to_train_min), where predicting less
    is the optimistic side; a rate (output_tokens_per_s) is the other way round."""
    return metric.endswith(("_s", "_min")) and "_per_" not in metric


def reason(point: ScoredPoint) -> str:
    """A one-line account of a miss: its direction, the predicted bottleneck, the setup notes."""
    faster = point.ratio < 1 if _is_time(point.metric) else point.ratio > 1
    direction = "optimistic" if faster else "pessimistic"
    notes = f"; measured: {point.notes}" if point.notes else ""
    gap = f"; known gap: {point.known_gap}" if point.known_gap else ""
    return f"{direction} by {point.ape:.0%}, predicted {point.bottleneck}-bound{notes}{gap}"
