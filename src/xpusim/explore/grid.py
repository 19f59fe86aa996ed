"""The points of a sweep: comma lists of option values, crossed with chips and what-if specs.

Every option of `xpusim run` takes a comma list (`--batch 1,2,4`), and a list may be a
progression written with an ellipsis: `1,2,4,...,256` (geometric) or `128,256,...,1024`
(arithmetic). A point is one `run`: a target (`--chip`), its what-if overrides and the options
typed, exactly as they will be passed to `xpusim.simulate`.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from xpusim.errors import UserError

ELLIPSIS = "..."

PLAN_OPTIONS = frozenset(
    {"chips", "tp", "pp", "dp", "ep", "microbatches", "virtual_stages", "objective", "overlap",
     "sharding"}
)
"""Options that change how a model is spread over hardware, not the shapes of its graphs:
points that differ only in these (and in the chip) reuse the same built graphs."""

FORMAT_OPTIONS = ("precision", "weight_precision", "attention_precision", "kv_precision",
                  "moe_backend", "mode")
"""Options that change a graph's structure: points that share them (and tp, ep) share one
graph over all their shapes (shapes as arrays: scenarios/llm/graphs.py)."""


def split(text: str) -> list[str]:
    """'1,2,4,...,32' -> ['1', '2', '4', '8', '16', '32']; a list without '...' as written."""
    items = [item.strip() for item in text.split(",")]
    if any(not item for item in items):
        raise UserError(f"{text!r}: an empty item in a comma list")
    if ELLIPSIS not in items:
        return items
    where = items.index(ELLIPSIS)
    if where < 2 or where != len(items) - 2:
        raise UserError(f"{text!r}: write a progression as A,B,...,END (two values first)")
    try:
        start = [float(item) for item in items[:where]]
        end = float(items[-1])
    except ValueError:
        raise UserError(f"{text!r}: a progression needs numbers") from None
    if not all(math.isfinite(v) for v in [*start, end]):
        raise UserError(f"{text!r}: a progression needs finite numbers")
    values = _progression(start, end, text)
    integral = all(_is_int(item) for item in [*items[:where], items[-1]])
    return [str(round(v)) if integral else repr(v) for v in values]


def _is_int(item: str) -> bool:
    return item.lstrip("-").isdigit()


def _progression(start: list[float], end: float, text: str) -> list[float]:
    """Arithmetic if the given values step evenly to the end, else geometric if they scale
    evenly to it (`8,4,...,1`)."""
    first = start[0]
    steps = {b - a for a, b in itertools.pairwise(start)}
    ratios = {b / a if a else 0.0 for a, b in itertools.pairwise(start)}
    candidates = []
    if len(steps) == 1 and (step := steps.pop()) != 0:
        candidates.append(((end - first) / step, lambda i: first + i * step))
    if len(ratios) == 1 and (ratio := ratios.pop()) > 0 and ratio != 1 and end / first > 0:
        candidates.append((math.log(end / first) / math.log(ratio), lambda i: first * ratio**i))
    for count, value in candidates:
        if not math.isfinite(count):  # a step too small for the span: past any count
            raise UserError(f"{text!r}: more than 100,000 values")
        n = round(count)
        if n >= len(start) - 1 and math.isclose(count, n, abs_tol=1e-9):
            if n >= 100_000:
                raise UserError(f"{text!r}: more than 100,000 values")
            return [value(i) for i in range(n + 1)]
    raise UserError(f"{text!r}: the values before '...' do not step or scale evenly to {end:g}")


@dataclass(frozen=True)
class Point:
    """One run of a sweep: a target, its what-if overrides and the options typed."""

    target: str  # what --chip named: a catalog chip or system id, or a chip TOML path
    sets: tuple[tuple[str, float], ...]  # (field path, value) what-if overrides, in order
    options: tuple[tuple[str, Any], ...]  # (option, value) as passed to xpusim.simulate

    @cached_property
    def key(self) -> str:
        """A stable text identity: the results file stores it to resume a sweep."""
        return json.dumps([self.target, self.sets, self.options], separators=(",", ":"))

    @classmethod
    def from_key(cls, key: str) -> Point:
        """The point a results row's key names (the inverse of `key`)."""
        target, sets, options = json.loads(key)
        return cls(target, tuple(map(tuple, sets)), tuple(map(tuple, options)))

    @cached_property
    def spec_key(self) -> str:
        """The identity of its target with its what-if values: points sharing it share a
        resolved chip or system."""
        return json.dumps([self.target, self.sets])

    @property
    def order(self) -> tuple[str, ...]:
        """Sort key that keeps points sharing graphs together, so that a worker builds each
        once and costs every shape, chip, what-if and plan of it in one pass: formats first
        (one graph serves all shapes of a format), then the shape with its batch last, target,
        what-ifs, plan. A training rank's graphs are a sequence length's (the batch only picks
        the microbatch), so the points of one length stay together: the two workers of a
        360-point training sweep did a third less work than with the batch first.
        Not kept: a sort asks once per point, and a million points would hold it for good."""
        formats = [(k, v) for k, v in self.options if k in FORMAT_OPTIONS]
        shape = sorted(((k, v) for k, v in self.options
                        if k not in PLAN_OPTIONS and k not in FORMAT_OPTIONS),
                       key=lambda option: option[0] == "batch")  # fmt: skip
        plan = [(k, v) for k, v in self.options if k in PLAN_OPTIONS]
        # repr, not json: 4.0 us a point against 12.8 (measured on this machine)
        return tuple(map(repr, (formats, shape, self.target, self.sets, plan)))


def cross(
    targets: Sequence[str],
    sets: Sequence[tuple[str, Sequence[float]]],
    axes: dict[str, Sequence[Any]],
    counts: dict[str, tuple[int, ...]] | None = None,
) -> list[Point]:
    """Every combination of targets, what-if values (one axis per --set path) and options; a
    target in `counts` (its `--chip ID:N`) at those chip counts (target_axes)."""
    set_axes = [[(path, v) for v in values] for path, values in sets]
    option_axes = {target: [[(name, v) for v in values] for name, values in
                            target_axes(axes, counts or {}, target).items()]
                   for target in targets}  # fmt: skip
    return [
        Point(target, tuple(chosen_sets), tuple(chosen_options))
        for target in targets
        for chosen_sets in itertools.product(*set_axes)
        for chosen_options in itertools.product(*option_axes[target])
    ]


def target_axes(axes: dict[str, Sequence[Any]], counts: dict[str, tuple[int, ...]],
                target: str) -> dict[str, Sequence[Any]]:  # fmt: skip
    """The option axes of one target: `--chip ID:N`'s counts as its chips axis, as `compare`
    gives each chip its own count (8 H100s against 4 MI300Xs); else the sweep's axes."""
    return {**axes, "chips": counts[target]} if target in counts else axes
