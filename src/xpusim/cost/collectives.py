"""Time of collective communication on a system's topology, in closed form.

For a group of p chips on one level, with per-chip injection bandwidth B (bytes/s per
direction) and per-step latency a, and S the bytes of the full tensor:

    ring all-reduce          2 (p-1)/p S/B + 2 (p-1) a
    halving-doubling (tree)  2 (p-1)/p S/B + 2 log2(p) a   (switch or full mesh, p a power of 2)
    all-gather, reduce-scatter: half of the above (one pass instead of two)
    all-to-all               (p-1)/p S/B x mean hops + (p-1) a   (S: what one chip sends)
    send/recv                S/B + a

These are the standard alpha-beta costs (Thakur, Rabenseifner and Gropp, "Optimization of
Collective Communication Operations in MPICH", IJHPCA 2005; NCCL uses the same ring and
tree schedules). The cheaper algorithm wins and is reported. On a torus a halving-doubling
schedule would cross many hops per step, so rings are offered there: over the group's
contiguous chips, or, when the group is a sub-torus spanning several dimensions (4 x 4 of a
4x4x4 slice), one ring per dimension in turn, 2 sum(d_i - 1) steps for an all-reduce, the
multi-dimensional all-reduce of TPU pods. Its volume is the ring's and every spanned
dimension's two links carry a share of it at once (the data split so each share runs the
dimensions in another order), which is the injection bandwidth below; an all-to-all pays
the torus's mean hop count (k/4 per spanned ring of k chips).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from xpusim.cost.op_table import OpTable
from xpusim.hardware.system import System, TopologyLevel
from xpusim.ir.op import Op, OpKind
from xpusim.memo import remembered


class Collective(StrEnum):
    ALL_REDUCE = "all_reduce"
    ALL_GATHER = "all_gather"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_TO_ALL = "all_to_all"
    SEND_RECV = "send_recv"


@dataclass(frozen=True)
class CollectiveCost:
    time_s: float
    algorithm: str
    level: str


def _mean_hops(level: TopologyLevel, group: int) -> float:
    if level.kind != "torus":
        return 1.0
    spanned = level.dims[: level.torus_dims_spanned(group)]
    return max(1.0, sum(k / 4 for k in spanned))


@dataclass(frozen=True)
class CollectiveLine:
    """A collective's time as a line in its bytes: fixed_s + s_per_byte x bytes.

    Every schedule above moves the same volume and differs only in its step latencies, so
    which one wins does not depend on the bytes: one line per (topology, kind, group, span)
    prices every tensor size, which is what lets a sweep cost thousands of configurations
    of one plan without calling this module per op.
    """

    fixed_s: float
    s_per_byte: float
    algorithm: str
    level: str

    def cost(self, nbytes: float) -> CollectiveCost:
        if nbytes <= 0 or self.algorithm == "none":
            return CollectiveCost(0.0, "none", self.level)
        return CollectiveCost(self.fixed_s + self.s_per_byte * nbytes, self.algorithm, self.level)


def collective_line(
    system: System, kind: Collective, group: int, span: int | None = None
) -> CollectiveLine:
    """The line of one collective over `group` chips that sit `span` contiguous chips apart.

    `span` is how many consecutive chips the group stretches over (a pipeline's stages are
    tp chips apart, so its sends span tp x pp chips); it picks the level, and defaults to
    the group itself. Memoized by the system's topology: what-if copies of a chip and
    systems of other sizes share their catalog system's levels.
    """
    level = system.level_for(span or group)
    return remembered("collective line", (level,), (kind, group),
                      lambda: _line(level, kind, group))


def _line(level: TopologyLevel, kind: Collective, p: int) -> CollectiveLine:
    if p <= 1:
        return CollectiveLine(0.0, 0.0, "none", level.name)
    per_byte = 1.0 / level.injection_bytes_per_s(p)
    a = level.latency_s.value
    if kind is Collective.SEND_RECV:
        return CollectiveLine(a, per_byte, "p2p", level.name)
    if kind is Collective.ALL_TO_ALL:
        return CollectiveLine(
            (p - 1) * a, (p - 1) / p * per_byte * _mean_hops(level, p), "pairwise", level.name
        )
    passes = 2 if kind is Collective.ALL_REDUCE else 1
    steps = {"ring": passes * (p - 1)}
    if level.kind != "torus" and p & (p - 1) == 0:  # halving-doubling needs a power of two
        steps["tree"] = passes * math.ceil(math.log2(p))
    shape = level.group_shape(p) if level.kind == "torus" else ()
    if len(shape) > 1:  # a ring per spanned dimension in turn, every dimension's links busy
        steps[f"torus {len(shape)}D ({'x'.join(map(str, shape))})"] = passes * sum(
            d - 1 for d in shape)
    algorithm = min(steps, key=steps.__getitem__)
    return CollectiveLine(steps[algorithm] * a, passes * (p - 1) / p * per_byte, algorithm,
                          level.name)  # fmt: skip


def collective_time(
    system: System, kind: Collective, nbytes: float, group: int, span: int | None = None
) -> CollectiveCost:
    """Time of one collective over `group` chips that sit `span` contiguous chips apart."""
    return collective_line(system, kind, group, span).cost(nbytes)


def hierarchical_time(
    system: System, kind: Collective, nbytes: float, group: int, stride: int = 1
) -> CollectiveCost:
    """A reduction over `group` chips `stride` apart (data-parallel replicas sit tp x pp
    chips apart), run level by level as NCCL's and XLA's multi-level schedules do: a
    reduce-scatter among the members inside each innermost group, then among those groups
    on the next level over 1/f of the bytes, and so on outwards; an all-gather runs the
    same steps in reverse, an all-reduce is both. Members that all sit on one level (a
    data-parallel group spread over InfiniBand, or one TPU pod) get the flat collective.
    """
    if kind not in (Collective.ALL_REDUCE, Collective.REDUCE_SCATTER, Collective.ALL_GATHER):
        raise ValueError(f"no hierarchical schedule for {kind.value}")
    factors: list[int] = []
    below = 1
    for level in system.levels:
        inside = max(1, min(group, level.size // stride))
        if inside > below:
            factors.append(inside // below)
            below = inside
    if len(factors) <= 1:
        return collective_time(system, kind, nbytes, group, group * stride)
    passes = (Collective.REDUCE_SCATTER, Collective.ALL_GATHER)
    if kind is not Collective.ALL_REDUCE:
        passes = (kind,)
    time, steps, size, spanned = 0.0, [], nbytes, 1
    for f in factors:
        spanned *= f
        for one in passes:
            cost = collective_time(system, one, size, f, spanned * stride)
            time += cost.time_s
        steps.append(f"{cost.algorithm} {f} on {cost.level}")
        size /= f
    return CollectiveCost(time, "hierarchical: " + ", then ".join(steps), steps[-1].split()[-1])


def _op_line(op: Op, system: System, span: int) -> CollectiveLine:
    """A collective op's line on the system, its group spanning `span` chips."""
    return collective_line(system, Collective(str(op.attr("collective"))), int(op.attr("size")),
                           span)  # fmt: skip


def comm_lines(table: OpTable, system: System, span: int) -> tuple[np.ndarray, np.ndarray]:
    """(fixed_s, s_per_byte) of each collective op's line on the system (zero for other
    ops), each group spanning `span` chips (a plan stage's tp chips: tp and ep groups
    alike, experts being spread over the chips attention runs on, as engines place them).
    Their terms do not depend on the request, so every request shares them."""
    fixed_s, s_per_byte = np.zeros(len(table)), np.zeros(len(table))
    for i, op in table.collectives[0]:
        line = _op_line(op, system, span)
        if line.algorithm != "none":
            fixed_s[i], s_per_byte[i] = line.fixed_s, line.s_per_byte
    return fixed_s, s_per_byte


def collective_algorithms(
    table: OpTable, system: System, span: int, nbytes: np.ndarray | None = None
) -> list[dict]:
    """The algorithm and level chosen for each distinct collective, for reports; `nbytes`
    gives each op's bytes where its tensors hold a shape axis (ShapeGraphs.collective_bytes)."""
    found = []
    for i, op in enumerate(table.ops):
        if op.kind is OpKind.COLLECTIVE:
            sent = float(op.inputs[0].nbytes if nbytes is None else nbytes[i])
            cost = _op_line(op, system, span).cost(sent)
            found.append({
                "op": op.name, "collective": op.attr("collective"), "group": op.attr("group"),
                "size": op.attr("size"), "bytes": sent,
                "algorithm": cost.algorithm, "level": cost.level, "time_s": cost.time_s,
            })  # fmt: skip
    return found
