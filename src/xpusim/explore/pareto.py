"""Pareto fronts: the points no other point beats on every objective at once.

A sweep of thousands of configurations is read through its front: for LLM serving, the
configurations that give the most tokens per second per chip at each per-user speed (the
industry's throughput-versus-interactivity chart). Only points that fit and ran are
candidates; a point that needs memory the chips do not have is never on a front.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

DIGITS = 9  # objectives equal to this many significant digits are ties


@dataclass(frozen=True)
class Objective:
    column: str  # a column of the sweep's rows
    maximize: bool
    label: str  # for tables and plot axes


OBJECTIVES: tuple[tuple[Objective, Objective], ...] = (
    (  # LLM inference: per-user speed (1 / TPOT) against throughput per chip
        Objective("tokens_per_s_per_user", True, "tokens/s per user (1/TPOT)"),
        Objective("tokens_per_s_per_chip", True, "tokens/s per chip"),
    ),
    (  # a training step: time per step against training throughput per chip
        Objective("step_time_s", False, "step time (s)"),
        Objective("tokens_per_s_per_chip", True, "tokens/s per chip"),
    ),
    (  # recommendation inference: one batch
        Objective("latency_s", False, "latency (s)"),
        Objective("queries_per_s_per_chip", True, "queries/s per chip"),
    ),
    (  # recommendation serving under load (xpusim serve): tail latency against throughput
        Objective("latency_s.p99", False, "p99 latency (s)"),
        Objective("queries_per_s_per_chip", True, "queries/s per chip"),
    ),
    (  # one pass of an imported graph
        Objective("latency_s", False, "latency (s)"),
        Objective("throughput_per_chip", True, "items/s per chip"),
    ),
)
"""Per workload kind, the (x, y) trade-off a front is taken over; the first pair whose
columns a sweep's rows have is used."""


COST = Objective("cost.usd_per_million", False, "$ per million (cost)")
"""`--rank cost`: what a front trades against when money, not chips, is what is scarce."""
GOODPUT_COST = Objective("usd_per_million_goodput", False, "$ per million within the SLOs")
"""`--rank cost` where serving points have SLOs: only what was delivered within them counts
(a chip that misses the TTFT objective is not cheap however many tokens it makes)."""


def objectives_for(
    columns: Sequence[str], rank: str = "throughput", rows: Sequence[Mapping[str, Any]] = ()
) -> tuple[Objective, Objective]:
    """The workload's (x, y) pair; ranked by cost, y is dollars per million of its output,
    of its output within the SLOs where any of `rows` has that (serving with SLOs)."""
    pair = next((p for p in OBJECTIVES if all(o.column in columns for o in p)), OBJECTIVES[0])
    if rank == "cost" and GOODPUT_COST.column in columns and any(
            row.get(GOODPUT_COST.column) is not None for row in rows):  # fmt: skip
        return pair[0], GOODPUT_COST
    if rank == "cost":
        if COST.column not in columns:
            from xpusim.errors import UserError

            raise UserError("--rank cost: no point has a price (the catalog prices none of "
                            "these chips); give --price USD_PER_CHIP_HOUR")  # fmt: skip
        return pair[0], COST
    return pair


def best(rows: Sequence[Mapping[str, Any]], indices: Sequence[int], objective: Objective) -> int:
    """The index of the row best on `objective`."""
    sign = 1 if objective.maximize else -1
    return max(indices, key=lambda i: sign * rows[i][objective.column])


def front_mask(values: np.ndarray, maximize: Sequence[bool]) -> np.ndarray:
    """Which rows of `values` (points x objectives) are non-dominated.

    Row a dominates b when it is at least as good on every objective and better on one.
    Of rows with equal objectives (to DIGITS significant digits, so that float rounding
    cannot pick between them) only the first is kept: 64 chips giving per chip what 8 give
    adds nothing to a front. Sorted best-first on the objectives in order (stable, so ties
    keep row order), a point can only be dominated by one before it, and if by any then by
    one already on the front, so each point is checked against the front found so far:
    O(points x front size).
    """
    signs = np.where(np.asarray(maximize), 1.0, -1.0)
    scores = _rounded(np.asarray(values, dtype=float)) * signs  # every objective maximized
    order = np.lexsort(tuple(-scores[:, k] for k in reversed(range(scores.shape[1]))))
    mask = np.zeros(len(scores), dtype=bool)
    if scores.shape[1] == 2:
        # Two objectives (a sweep's front): everything before a point is at least as good
        # on the first, so it is dominated (or equalled) exactly when one before it is at
        # least as good on the second: a running maximum, not a loop over the points.
        second = scores[order, 1]
        best_before = np.maximum.accumulate(np.r_[-np.inf, second[:-1]])
        mask[order] = second > best_before
        return mask
    front = np.empty((0, scores.shape[1]))
    for i in order:
        p = scores[i]
        if (front >= p).all(axis=1).any():  # dominated, or equal to a point kept
            continue
        mask[i] = True
        front = np.vstack([front, p])
    return mask


def _rounded(values: np.ndarray) -> np.ndarray:
    """The values to DIGITS significant digits; one too small for its scale to be a float
    (a subnormal: 1e-310 needs 10^317) is left as it is, not made NaN."""
    nonzero = np.where(values == 0, 1.0, np.abs(values))
    with np.errstate(over="ignore", invalid="ignore"):
        scale = 10.0 ** (DIGITS - 1 - np.floor(np.log10(nonzero)))
        rounded = np.round(values * scale) / scale
    return np.where(np.isfinite(rounded), rounded, values)


def eligible(row: Mapping[str, Any], objectives: Sequence[Objective]) -> bool:
    """A row may be on a front: it ran, it fits, and its objectives are finite numbers."""
    if row.get("error") or row.get("fits") is not True:
        return False
    values = [row.get(o.column) for o in objectives]
    return all(isinstance(v, int | float) and math.isfinite(v) for v in values)


def front(
    rows: Sequence[Mapping[str, Any]],
    objectives: Sequence[Objective],
    among: Sequence[int] | None = None,
) -> list[int]:
    """Indices of the rows (of those `among`, if given) on the front, ordered along the first
    objective, worst first."""
    indices = range(len(rows)) if among is None else among
    candidates = [i for i in indices if eligible(rows[i], objectives)]
    if not candidates:
        return []
    values = np.array([[rows[i][o.column] for o in objectives] for i in candidates], float)
    mask = front_mask(values, [o.maximize for o in objectives])
    chosen = [i for i, keep in zip(candidates, mask, strict=True) if keep]
    first = objectives[0]
    return sorted(chosen, key=lambda i: rows[i][first.column] * (1 if first.maximize else -1))
