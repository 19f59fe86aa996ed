"""Scores every published point: predicted beside measured, and the error statistics.

Error is the absolute percentage error |predicted - measured| / measured, the figure peers
publish (LLMCompass, Calculon, GenZ, Vidur). Which way a prediction misses is kept too:
a simulator that is always optimistic says something different from a noisy one.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
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
    points: tuple[Point, ...] | None = None, progress: Callable[[int, int], None] | None = None
) -> Validation:
    """Every point scored or skipped, `progress(done, total)` told after each; the published
    set's answer is kept (a process asks for it again: the report, the tests), since its
    serving points run simulations."""
    if points is None:
        return _validate_published(progress)
    return _validate(points, progress)


_PUBLISHED: list[Validation] = []


def _validate_published(progress: Callable[[int, int], None] | None) -> Validation:
    if not _PUBLISHED:
        _PUBLISHED.append(_validate(load_points(), progress))
    return _PUBLISHED[0]


@in_scope  # a source's serving points share one run (adapters._served)
def _validate(
    points: tuple[Point, ...], progress: Callable[[int, int], None] | None = None
) -> Validation:
    scored, skipped = [], []
    for done, point in enumerate(points, 1):
        try:
            scored.append(score_point(point))
        except (Unexpressible, UserError) as why:
            skipped.append(SkippedPoint(point.id, point.chip, point.workload, point.metric,
                                        str(why)))  # fmt: skip
        if progress:
            progress(done, len(points))
    return summarize(scored, skipped)


def reason(point: ScoredPoint) -> str:
    """A one-line account of a miss: its direction, the predicted bottleneck, the setup notes."""
    direction = "optimistic" if point.ratio > 1 else "pessimistic"
    if point.metric == "ttft_s":  # a shorter time is the optimistic side
        direction = "optimistic" if point.ratio < 1 else "pessimistic"
    notes = f"; measured: {point.notes}" if point.notes else ""
    gap = f"; known gap: {point.known_gap}" if point.known_gap else ""
    return f"{direction} by {point.ape:.0%}, predicted {point.bottleneck}-bound{notes}{gap}"
