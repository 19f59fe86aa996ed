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
tree schedules). The cheaper algorithm wins and is reported.

On a torus a halving-doubling schedule would cross many hops per step, so rings are offered
there: over the group's contiguous chips (p - 1 steps), or, when the group is a sub-torus
(4 x 4 of a 4x4x4 slice, or one whole axis), along each dimension it spans, the
multi-dimensional collectives of TPU pods. Their hops and links are the scaling book's
(Austin, Pope et al., "How to Scale Your Model", jax-ml/scaling-book at 0819a7d, sharding.md
and tpus.md), per axis (`axis_hops`, `axis_links`):
- a wrapped axis (a ring) of d chips: a bidirectional all-gather or reduce-scatter sends each
  shard both ways at once and is done when the shards reach the farthest chip, d // 2 hops
  ("we can do the full gather in only 2 hops" on an axis of 4 of a TPU v4p 4x4x4; it writes
  ceil(d/2), the same on even axes), over the axis's 2 links;
- an axis without wrap-around (a line, as a slice shorter than the torus has: "no
  wraparounds ... typically doubles the time of most communication"): d - 1 hops, and the
  chips at its ends receive everything over their one link ("we have to do 3 hops for data
  from the edges to reach the other edge", 3 x 8.4 MB / 4.5e10 B/s against 8.4 MB x 4 /
  9e10 on a ring; profiled at 680 us, sharding.md Question 1), so 1 link;
- an all-reduce is a reduce-scatter and an all-gather: twice the hops; an all-to-all is
  forwarded along the same rings (it "only has to pass shards part-way around the ring"),
  the same hops as an all-gather, and its bytes pay the ring's mean distance, d/4 an axis,
  which is the book's all-to-all at a quarter of an all-gather's time.
The group's axes run at once, the data split so each share runs them in another order:
their hops add, and every axis's links carry a share. Other topologies are unchanged by
this: a switch or full mesh uses all its links, and pairs chips directly in an all-to-all.

Measured floor. On chips with measured collectives (kernel_tables/collectives/*.toml: one
file per chip; NVIDIA's from aiconfigurator's nccl-tests runs and the engines' own all-reduce
kernels, by benchmarks/collective_tables.py; the MI300X's from a public rccl-tests run, by
hand) an all-reduce, all-gather or reduce-scatter on the first (NVLink, xGMI) level over a
measured group size costs at least the fastest measured way to run it there: the least,
over the tables (NCCL, TensorRT-LLM's, vLLM's, SGLang's all-reduce; RCCL's), of
each table's time interpolated linearly in bytes between its rows (flat below its smallest,
proportional to bytes past its largest). The cost model does not know which engine serves,
so the floor is the best any measured engine does. It only adds time: the analytic line
stands where it is slower, so the cost never beats the bandwidth bound and more bandwidth
is never slower. Rows faster than the bandwidth term alone (bytes over the level's link
bandwidth) are refused. docs/cost.md compares the tables with the analytic line.

An engine's own all-reduce. A serving engine runs its all-reduces with its own kernel, not
NCCL's rings or trees: one-shot and two-shot kernels over peer memory, a single step where
the analytic line counts 2 log2(p) steps of an assumed latency (2 us over NVLink, the
system files' estimate), so the line prices a decode step's 14 KB all-reduce on 8 B200s at
14 us where SGLang's measured kernel takes 7.8 and TensorRT-LLM's 5.9 (aiconfigurator's
rows, kernel_tables/collectives/b200.toml). Such a table names its `kernel`
(`sglang-custom-allreduce`); an all-reduce op stamped with it (the engine profile's
`kernels`, serving/engines.toml, carried from the matmul it reduces, compiler/partition.py
collective) costs that table's time, measured, at its bytes, never under the bandwidth
term (bytes over the links): the measurement replaces the assumed latency, physics still
bounds it, and more bandwidth is never slower. Where the engine runs its kernel only below a
size (the table's `below_bytes` by group: vLLM hands larger tensors to symmetric memory or
NCCL), a tensor of that size or more costs the line and floor above, as without the kernel.
Other ops, and other chips, keep the line and floor above.

A collective op's own HBM pass is not added to these seconds (cost/roofline.py): a measured
time is of the whole kernel (nccl-tests' algbw and busbw are of the complete operation), its
reads and writes of HBM included, and the analytic ring pipelines its HBM traffic with the
links'. The op costs the larger of the two, plus its dispatch.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from pathlib import Path

import numpy as np

from xpusim.cost.op_table import OpTable
from xpusim.hardware.system import Axis, System, TopologyLevel
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


def axis_hops(axes: tuple[Axis, ...]) -> int:
    """Hops a collective along these torus axes takes to reach its farthest chip (module
    docstring): d // 2 on a wrapped axis, d - 1 on a line, summed over the axes."""
    return sum(a.dim // 2 if a.wrapped else a.dim - 1 for a in axes)


def axis_links(axes: tuple[Axis, ...]) -> int:
    """Links each chip's share of a collective along these axes crosses at once, per
    direction: 2 on a wrapped axis, 1 on a line (its end chips' one link is the bound)."""
    return sum(2 if a.wrapped else 1 for a in axes if a.dim > 1)


def group_axes(level: TopologyLevel, group: int) -> tuple[Axis, ...]:
    """The axes a sub-torus group of a torus level runs its collectives along: of its
    placements (TopologyLevel.group_placements), the one with the most links, then the
    fewest hops; () when the group is no sub-torus or the level no torus."""
    if level.kind != "torus":
        return ()
    placements = level.group_placements(group)
    return min(placements, key=lambda axes: (-axis_links(axes), axis_hops(axes)), default=())


def injection_bytes_per_s(level: TopologyLevel, group: int) -> float:
    """Bandwidth one chip can push into a collective over `group` chips, per direction.

    A switch or a full mesh lets a chip use all its links at once; on a torus a collective
    uses the links of each dimension the group spans (`axis_links`), two for a group of
    contiguous chips that is no sub-torus (a ring along them).
    """
    if level.kind != "torus":
        return level.all_links_bytes_per_s
    axes = group_axes(level, group)
    links = axis_links(axes) if axes else 2 * level.torus_dims_spanned(group)
    return min(max(links, 1), level.links_per_chip.value) * level.bandwidth_bytes_per_s.value


def all_to_all_distance(dims: list[int] | tuple[int, ...]) -> float:
    """Links an all-to-all's byte crosses on average along torus axes of these sizes: d/4 an
    axis, at least 1. On a bidirectional ring of d that is the scaling book's all-to-all at
    a quarter of an all-gather (sharding.md, Question 10: each chip's d^2/4 chunks of a
    shard of a shard, ceil(d/2) the farthest); on a line of d over its 1 link the same d/4
    loads its middle link as its d^2/4 crossing chunks do."""
    return max(1.0, sum(d / 4 for d in dims))


def _mean_hops(level: TopologyLevel, group: int) -> float:
    if level.kind != "torus":
        return 1.0
    spanned = [a.dim for a in group_axes(level, group)] or \
        level.dims[: level.torus_dims_spanned(group)]
    return all_to_all_distance(spanned)


def _torus_name(axes: tuple[Axis, ...]) -> str:
    """A sub-torus schedule's name: a ring along one axis, or one per dimension."""
    if len(axes) == 1:
        return "ring"
    return f"torus {len(axes)}D ({'x'.join(str(a.dim) for a in axes)})"


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
    per_byte = 1.0 / injection_bytes_per_s(level, p)
    a = level.latency_s.value
    if kind is Collective.SEND_RECV:
        return CollectiveLine(a, per_byte, "p2p", level.name)
    axes = group_axes(level, p)
    if kind is Collective.ALL_TO_ALL:  # forwarded along a sub-torus's rings, else pairwise
        algorithm, steps_a2a = (_torus_name(axes), axis_hops(axes)) if axes else \
            ("pairwise", p - 1)
        return CollectiveLine(
            steps_a2a * a, (p - 1) / p * per_byte * _mean_hops(level, p), algorithm, level.name
        )
    passes = 2 if kind is Collective.ALL_REDUCE else 1
    steps = {"ring": passes * (p - 1)}
    if level.kind != "torus" and p & (p - 1) == 0:  # halving-doubling needs a power of two
        steps["tree"] = passes * math.ceil(math.log2(p))
    if axes:  # along each spanned dimension, every dimension's links busy
        name = _torus_name(axes)
        steps[name] = min(steps.get(name, math.inf), passes * axis_hops(axes))
    algorithm = min(steps, key=steps.__getitem__)
    return CollectiveLine(steps[algorithm] * a, passes * (p - 1) / p * per_byte, algorithm,
                          level.name)  # fmt: skip


MEASURED_DIR = Path(__file__).parent / "kernel_tables" / "collectives"
MEASURED_KINDS = (Collective.ALL_REDUCE, Collective.ALL_GATHER, Collective.REDUCE_SCATTER)


@dataclass(frozen=True)
class MeasuredCurve:
    """One table's measured times of one collective on one chip over `gpus` chips."""

    name: str  # the table's name, its source and date in its file
    nbytes: np.ndarray  # bytes of the whole tensor, ascending
    seconds: np.ndarray
    kernel: str = ""  # the engine's own kernel it timed (engines.toml `kernels`), if one
    # the engine runs that kernel only on tensors of fewer bytes (its table's below_bytes at
    # these gpus); a larger one costs what it would without the kernel
    below_bytes: float = math.inf

    def at(self, nbytes: np.ndarray) -> np.ndarray:
        """Seconds at these bytes: linear between rows, flat below, proportional above."""
        inside = np.interp(nbytes, self.nbytes, self.seconds)
        return np.where(nbytes > self.nbytes[-1],
                        self.seconds[-1] * nbytes / self.nbytes[-1], inside)  # fmt: skip


@cache
def measured_curves(chip_id: str) -> dict[tuple[Collective, int], tuple[MeasuredCurve, ...]]:
    """The chip's measured curves by (collective, gpus), from its own file if it has one;
    read on first use, so that `run` on one chip, or on chips without a file, never reads
    them."""
    path = MEASURED_DIR / f"{chip_id}.toml"
    if not path.exists():
        return {}
    found: dict[tuple[Collective, int], list[MeasuredCurve]] = {}
    with path.open("rb") as f:
        for table in tomllib.load(f)["table"]:
            rows = np.array(table["rows"], dtype=float)
            below = {int(g): float(b) for g, b in table.get("below_bytes", [])}
            for gpus in sorted({int(g) for g in rows[:, 0]}):
                mine = rows[rows[:, 0] == gpus]
                mine = mine[np.argsort(mine[:, 1])]
                curve = MeasuredCurve(table["name"], mine[:, 1], mine[:, 2] * 1e-6,
                                      table.get("kernel", ""),
                                      below.get(gpus, math.inf))  # fmt: skip
                found.setdefault((Collective(table["scope"]), gpus), []).append(curve)
    return {key: tuple(curves) for key, curves in found.items()}


def measured_floor(
    system: System, kind: Collective, group: int, span: int | None = None
) -> tuple[MeasuredCurve, ...]:
    """The measured curves that floor this collective on the system (module docstring):
    those of its chip, kind and group size, where the group sits on the first level."""
    if kind not in MEASURED_KINDS or group <= 1:
        return ()
    if system.level_for(span or group) is not system.levels[0]:
        return ()
    return measured_curves(system.chip.id).get((kind, group), ())


FLASHINFER_ALLREDUCE = "trtllm-allreduce"
"""The all-reduce kernel SGLang runs under --enable-flashinfer-allreduce-fusion (serve's
--allreduce-fusion): FlashInfer's trtllm_allreduce_fusion (flashinfer/comm/trtllm_ar.py),
TensorRT-LLM's one-shot and two-shot kernels with the residual add and RMSNorm fused in,
which SGLang calls for steps of 1-2,048 tokens (python/sglang/srt/layers/communicator.py
apply_flashinfer_allreduce_fusion, FUSE_ALLREDUCE_MAX_BATCH_SIZE 2048); priced by
TensorRT-LLM's measured all-reduce alone, as no timing of the fused kernel is published.
The norms it runs (RMSNorm.forward_with_allreduce_fusion, python/sglang/srt/layers/
layernorm.py, code index copy 16378834876) are no ops of their own in a decode step
(serving/run.py adds transformer.ALLREDUCE_NORM_DECODE with it)."""


def engine_curve(system: System, kind: Collective, group: int, span: int | None,
                 kernels: tuple[str, ...]) -> MeasuredCurve | None:  # fmt: skip
    """The measured curve of the first of `kernels` that is the engine's own kernel for
    this collective on the system, if its chip has one (module docstring, "An engine's own
    all-reduce")."""
    if not kernels:
        return None
    curves = {c.kernel: c for c in measured_floor(system, kind, group, span) if c.kernel}
    return next((curves[k] for k in kernels if k in curves), None)


def bandwidth_bound_s(system: System, kind: Collective, nbytes: np.ndarray | float, group: int,
                      span: int | None = None) -> np.ndarray | float:  # fmt: skip
    """The line's bandwidth term alone: the least time the bytes take over the links."""
    return collective_line(system, kind, group, span).s_per_byte * nbytes


def floored_seconds(
    system: System, kind: Collective, nbytes: np.ndarray, group: int,
    span: int | None = None, kernels: tuple[str, ...] = (),
) -> np.ndarray:  # fmt: skip
    """Seconds of the collective at these bytes (0 where none): the analytic line, at
    least the fastest measured way to run it; or, where `kernels` names the engine's own
    kernel for it, that kernel's measured time, at least the bandwidth term (module
    docstring)."""
    return _floored(system, kind, nbytes, group, span,
                    engine_curve(system, kind, group, span, kernels))  # fmt: skip


def _floored(system: System, kind: Collective, nbytes: np.ndarray, group: int,
             span: int | None, own: MeasuredCurve | None) -> np.ndarray:  # fmt: skip
    """floored_seconds with the engine's own curve (engine_curve) already found."""
    nbytes = np.asarray(nbytes, dtype=float)
    line = collective_line(system, kind, group, span)
    if line.algorithm == "none":
        return np.zeros_like(nbytes)
    seconds = line.fixed_s + line.s_per_byte * nbytes
    curves = measured_floor(system, kind, group, span)
    if curves:
        seconds = np.maximum(seconds, np.min([c.at(nbytes) for c in curves], axis=0))
    if own is not None:  # the engine's kernel, on the tensors it runs it on
        seconds = np.where(nbytes < own.below_bytes,
                           np.maximum(line.s_per_byte * nbytes, own.at(nbytes)), seconds)
    return np.where(nbytes > 0, seconds, 0.0)


def collective_time(
    system: System, kind: Collective, nbytes: float, group: int, span: int | None = None
) -> CollectiveCost:
    """Time of one collective over `group` chips that sit `span` contiguous chips apart:
    the analytic line, floored by measurement where there is one (module docstring)."""
    return _at_least_measured(collective_line(system, kind, group, span).cost(nbytes), system,
                              kind, nbytes, group, span)  # fmt: skip


def _at_least_measured(cost: CollectiveCost, system: System, kind: Collective, nbytes: float,
                       group: int, span: int | None) -> CollectiveCost:  # fmt: skip
    """A line's cost, or the measured floor where that is slower (module docstring)."""
    if cost.algorithm != "none" and measured_floor(system, kind, group, span):
        seconds = float(floored_seconds(system, kind, np.array(nbytes), group, span))
        if seconds > cost.time_s:
            return CollectiveCost(seconds, "measured", cost.level)
    return cost


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
    """A collective op's line on the system, its group spanning `span` chips; an MoE
    dispatch or combine no faster than its measured kernels (cost/ep_alltoall.py)."""
    line = collective_line(system, Collective(str(op.attr("collective"))), int(op.attr("size")),
                           span)  # fmt: skip
    if op.attr("step") is None:
        return line
    from xpusim.cost.ep_alltoall import floor_line

    return floor_line(line, op, system, span)


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


def comm_seconds(table: OpTable, system: System, span: int, nbytes: np.ndarray) -> np.ndarray:
    """Seconds of each collective op at its bytes (`nbytes`, ops on the last axis; zero for
    other ops), each group spanning `span` chips: comm_lines' lines, floored by measurement
    where the system's chip has one (module docstring)."""
    fixed_s, s_per_byte = comm_lines(table, system, span)
    seconds = np.where(nbytes > 0, fixed_s + s_per_byte * nbytes, 0.0)
    for i, op in table.collectives[0]:
        kind, group = Collective(str(op.attr("collective"))), int(op.attr("size"))
        if measured_floor(system, kind, group, span):
            seconds[..., i] = floored_seconds(system, kind, nbytes[..., i], group, span,
                                              op.attr("kernels") or ())  # fmt: skip
    return seconds


def collective_algorithms(
    table: OpTable, system: System, span: int, nbytes: np.ndarray | None = None
) -> list[dict]:
    """The algorithm and level chosen for each distinct collective, for reports; `nbytes`
    gives each op's bytes where its tensors hold a shape axis (ShapeGraphs.collective_bytes)."""
    found = []
    for i, op in enumerate(table.ops):
        if op.kind is OpKind.COLLECTIVE:
            sent = float(op.inputs[0].nbytes if nbytes is None else nbytes[i])
            kind, group = Collective(str(op.attr("collective"))), int(op.attr("size"))
            cost = _at_least_measured(_op_line(op, system, span).cost(sent), system, kind,
                                      sent, group, span)  # fmt: skip
            own = engine_curve(system, kind, group, span, op.attr("kernels") or ())
            if own is not None and sent < own.below_bytes:
                seconds = _floored(system, kind, np.array(sent), group, span, own)
                cost = CollectiveCost(float(seconds), f"measured: {own.name}", cost.level)
            found.append({
                "op": op.name, "collective": op.attr("collective"), "group": op.attr("group"),
                "size": op.attr("size"), "bytes": sent,
                "algorithm": cost.algorithm, "level": cost.level, "time_s": cost.time_s,
            })  # fmt: skip
    return found
