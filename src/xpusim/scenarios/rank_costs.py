"""Per-op time and energy of the graph one chip runs, for many configurations at once.

A rank's graphs (one tensor/expert-parallel rank, all pipeline stages) depend on the model,
the request and the plan's tp and ep only, never on the chip: they are built once, compact
(one layer standing for the identical others), and memoized by exactly that. Costing them is
then array arithmetic with a leading configuration axis: every (system, plan) of one plan
depth is costed by one call, whether they are the plans of a search or the chips, what-if
specs and chip counts of a sweep. Pipeline stages are (distinct ops x stages) count
matrices, so any depth costs a few array sums.

Decode steps: op counts are affine in the KV length, so a decode step's costs are piecewise
affine in its index (a max of affine compute and memory times). They are evaluated at up to
DECODE_NODES + 1 steps and summed with weights that are exact wherever the costs are affine
between nodes; the error is confined to the few intervals where an op crosses from one bound
to another, and a test holds it against evaluating every step.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import TypeVar

import numpy as np

from xpusim.compiler.memory_plan import Placement, peak_activation_bytes
from xpusim.compiler.partition import Plan, op_stage_counts, partition
from xpusim.cost.collectives import Collective, CollectiveLine, collective_line
from xpusim.cost.op_table import OpTable, distinct_stage_counts, op_table
from xpusim.cost.roofline import HardwareArrays, OpCosts, evaluate, placement_onehot
from xpusim.hardware.spec import Chip
from xpusim.hardware.system import System
from xpusim.ir.dtypes import DType
from xpusim.ir.graph import Graph
from xpusim.ir.op import Op, OpKind
from xpusim.memo import ByIdentity
from xpusim.workloads.transformer import StepShape, build_step
from xpusim.workloads.transformer_config import TransformerConfig

T = TypeVar("T")

DECODE_NODES = 32
"""Intervals the decode steps are cut into; gen <= 34 evaluates every step."""


@dataclass(frozen=True)
class Request:
    """What is asked of the system: shapes and formats of one batch of sequences."""

    batch: int  # sequences per microbatch
    prompt: int
    gen: int
    act: DType
    weight: DType
    attention: DType | None = None  # attention's compute format when not act's

    @property
    def decode_kv(self) -> tuple[int, int]:
        """KV length of the first and last decode step (one step when gen == 1)."""
        return self.prompt + 1, self.prompt + max(self.gen - 1, 1)

    @property
    def decode_steps(self) -> int:
        return max(self.gen - 1, 1)


def step_nodes(steps: int, intervals: int = DECODE_NODES) -> tuple[np.ndarray, np.ndarray]:
    """Step indices to evaluate and the weights that sum any piecewise-affine quantity
    over all `steps` from them: over integers a..b an affine f sums to (b - a + 1) x the
    mean of f(a) and f(b); neighbouring intervals share their end node."""
    nodes = np.unique(np.round(np.linspace(0, steps - 1, min(steps, intervals + 1))))
    if len(nodes) == 1:
        return nodes, np.ones(1)
    span = np.diff(nodes) + 1  # integers in each closed interval
    weights = np.zeros(len(nodes))
    weights[:-1] += span / 2
    weights[1:] += span / 2
    weights[1:-1] -= 1  # an interior node was counted by both its intervals
    return nodes, weights


def ordered_sum(values: np.ndarray, axis: int) -> np.ndarray:
    """A sum whose order of additions depends only on the length of the axis, as a tree:
    the axis is padded with zeros to a power of two and halved, first half plus second,
    until one term is left. numpy's own sum groups terms differently with the shape of the
    array around them (pairwise, unrolled); a configuration's result must not depend on
    how many others were costed beside it. Zeros appended past the last term change
    nothing: a pipeline of 3 stages padded to 16 sums exactly as it does alone."""
    values = np.moveaxis(values, axis, 0)
    size = 1 << max(len(values) - 1, 0).bit_length()
    if size != len(values):
        values = np.concatenate([values, np.zeros((size - len(values), *values.shape[1:]))])
    while len(values) > 1:
        half = len(values) // 2
        values = values[:half] + values[half:]
    return values[0]


@dataclass(frozen=True)
class PhaseValues:
    """A phase's op counts at the steps it is costed at, split into the ops that do the
    same at every step and those that do not (attention over a growing KV cache): only
    the latter are costed per step, which is what keeps long generations cheap."""

    table: OpTable  # counts on a leading step axis
    weights: np.ndarray  # (steps,) how many steps each costed one stands for

    @cached_property
    def varying(self) -> np.ndarray:
        """Positions of the ops whose counts differ between steps."""
        t = self.table
        moves = [np.ptp(a, axis=0) > 0 for a in (t.matrix_flops, t.vector_flops)]
        moves.append((np.ptp(t.role_bytes, axis=0) > 0).any(axis=0))
        return np.flatnonzero(np.logical_or.reduce(moves))

    @cached_property
    def first(self) -> OpTable:
        return self.table.subset(steps=np.arange(1))

    @cached_property
    def moving(self) -> OpTable:
        return self.table.subset(ops=self.varying)


@dataclass(frozen=True)
class RankGraphs:
    """The compact graphs one rank runs; they depend on the plan's tp and ep only."""

    prefill: Graph
    decode_first: Graph
    decode_last: Graph
    decode_steps: int
    num_layers: int

    @cached_property
    def tables(self) -> tuple[OpTable, OpTable]:
        return table_of(self.prefill), table_of(self.decode_first)

    @cached_property
    def phase_values(self) -> tuple[PhaseValues, PhaseValues]:
        """Each phase's op counts at the steps costed: the prefill as one step, decode at
        its nodes (counts interpolated: they are affine in the KV length)."""
        prefill, first = self.tables
        nodes, weights = step_nodes(self.decode_steps)
        fraction = nodes / (self.decode_steps - 1) if self.decode_steps > 1 else nodes
        decode = first.lerp(table_of(self.decode_last), fraction)
        return PhaseValues(prefill.lerp(prefill, np.zeros(1)), np.ones(1)), PhaseValues(
            decode, weights
        )

    @cached_property
    def activation_bytes(self) -> float:
        return max(_peak_activations(self.prefill), _peak_activations(self.decode_last))

    @cached_property
    def flops(self) -> tuple[float, float]:
        """FLOPs of the prefill and of the first decode step."""
        return self.prefill.flops, self.decode_first.flops

    def depth_counts(self, phase: int, pp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """stage_counts for each configuration's depth: (K, 1, ops, deepest), the stages a
        shallower pipeline lacks running nothing (so sums and maxima over stages hold)."""
        depths, which = np.unique(pp, return_inverse=True)
        deepest = int(depths[-1])
        found = []
        for part in (0, 1):
            padded = np.zeros((len(depths), len(self.tables[phase]), deepest))
            for i, d in enumerate(depths):
                padded[i, :, :d] = self.stage_counts(phase, int(d))[part]
            found.append(padded[which][:, None])
        return found[0], found[1]

    def stage_counts(self, phase: int, pp: int) -> tuple[np.ndarray, np.ndarray]:
        """(distinct ops, pp) instances each stage runs, of all ops and of collectives, for
        the prefill (phase 0) or decode (1)."""
        graph = (self.prefill, self.decode_first)[phase]
        return _stage_counts(self.layouts[phase], graph, self.tables[phase], self.num_layers, pp)

    @cached_property
    def layouts(self) -> tuple[tuple, tuple]:
        """What stage counts depend on, per phase: each op's layer, copies, whether it is a
        collective, and its distinct-op row. Every shape of one model, plan and format has
        the same, so the counts are shared between them."""
        return tuple(  # type: ignore[return-value]
            (tuple((op.layer, graph.copies(op), op.kind is OpKind.COLLECTIVE) for op in graph.ops),
             table.index.tobytes())
            for graph, table in zip((self.prefill, self.decode_first), self.tables, strict=True)
        )  # fmt: skip


def _stage_counts(
    layout: tuple, graph: Graph, table: OpTable, num_layers: int, pp: int
) -> tuple[np.ndarray, np.ndarray]:
    """Kept by layout (not by graph: the graphs of other shapes share it)."""

    def make() -> tuple[np.ndarray, np.ndarray]:
        per_op = op_stage_counts(graph, num_layers, pp)
        is_comm = np.array([op.kind is OpKind.COLLECTIVE for op in graph.ops], dtype=float)
        return distinct_stage_counts(table, per_op), distinct_stage_counts(table, per_op, is_comm)

    return _STAGES.get((), (layout, num_layers, pp), make)


_STAGES: ByIdentity[tuple[np.ndarray, np.ndarray]] = ByIdentity()


@lru_cache(maxsize=1024)  # requests that differ in gen only share their prefill and first step
def _rank_step(
    cfg: TransformerConfig, step: StepShape, act: DType, weight: DType, attention: DType | None,
    tp: int, ep: int,
) -> Graph:  # fmt: skip
    return partition(_model_step(cfg, step, act, weight, attention), Plan(tp=tp, ep=ep))


def table_of(graph: Graph) -> OpTable:
    """op_table, kept per graph object (_rank_step hands out the same one for a shape)."""
    return _TABLES.get((graph,), None, lambda: op_table(graph))


def _peak_activations(graph: Graph) -> float:
    return _PEAKS.get((graph,), None, lambda: peak_activation_bytes(graph))


_TABLES: ByIdentity[OpTable] = ByIdentity()
_PEAKS: ByIdentity[float] = ByIdentity()


def rank_graphs(cfg: TransformerConfig, req: Request, plan: Plan) -> RankGraphs:
    return _rank_graphs(cfg, req, plan.tp, plan.ep)


@lru_cache(maxsize=8)  # the three steps of the last shapes: every (tp, ep) of a search shares them
def _model_step(
    cfg: TransformerConfig, step: StepShape, act: DType, weight: DType,
    attention: DType | None = None,
) -> Graph:  # fmt: skip
    """The unpartitioned compact step; partition() builds new graphs and never changes it."""
    return build_step(cfg, step, act, weight, compact=True, attention=attention)


@lru_cache(maxsize=512)  # compact graphs are small; a chunk of a sweep may hold many shapes
def _rank_graphs(cfg: TransformerConfig, req: Request, tp: int, ep: int) -> RankGraphs:
    def step(q: int, kv: int) -> Graph:
        return _rank_step(cfg, StepShape(req.batch, q, kv), req.act, req.weight, req.attention,
                          tp, ep)  # fmt: skip

    first, last = req.decode_kv
    return RankGraphs(step(req.prompt, req.prompt), step(1, first), step(1, last),
                      req.decode_steps, cfg.num_layers)  # fmt: skip


@dataclass(frozen=True)
class PhaseCosts:
    """One phase's per-op costs. `costs` holds every op at the phase's first step: (K, 1,
    ops) for K inference configurations, (ops,) for a training pass. The ops whose work
    changes from step to step (`varying`) also have `steps`: (K, steps, varying ops)."""

    table: OpTable  # the distinct ops and their counts
    costs: OpCosts
    counts: np.ndarray  # (..., ops, pp) instances of each distinct op each stage runs
    comm_counts: np.ndarray  # (..., ops, pp) the same, of collectives only
    varying: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))
    steps: OpCosts | None = None
    step_weights: np.ndarray = field(default_factory=lambda: np.ones(1))  # steps per node
    _sums: dict[tuple[str, bool], np.ndarray] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def stage_sums(self, name: str, comm_only: bool = False) -> np.ndarray:
        """A cost (an OpCosts field) summed over each stage's op instances: (..., pp), with
        the step axis where the phase has one. Kept: the timeline asks for some twice."""
        if (name, comm_only) not in self._sums:
            counts = self.comm_counts if comm_only else self.counts
            self._sums[name, comm_only] = self._summed(name, counts)
        return self._sums[name, comm_only]

    def totals(self, name: str, comm_only: bool = False) -> np.ndarray:
        """A cost summed over every stage's op instances, without the stage axis: (K,
        steps). Energy and link time are wanted only in total, and summing each op's count
        over the stages first (integers: exact) spares the per-stage products."""
        counts = self.comm_counts if comm_only else self.counts
        return self._summed(name, counts.sum(axis=-1, keepdims=True))[..., 0]

    def _summed(self, name: str, counts: np.ndarray) -> np.ndarray:
        """Σ over ops of the cost times `counts` (..., ops, stages); the ops that vary by
        step are taken from `steps`, the others from the first step's costs."""
        values = getattr(self.costs, name)
        if self.steps is None or not len(self.varying):
            return ordered_sum(values[..., None] * counts, axis=-2)
        fixed = values.copy()
        fixed[..., self.varying] = 0.0
        moving = getattr(self.steps, name)[..., None] * np.take(counts, self.varying, axis=-2)
        return ordered_sum(fixed[..., None] * counts, axis=-2) + ordered_sum(moving, axis=-2)

    def step_mean(self, values: np.ndarray) -> np.ndarray:
        """Mean over every step of a per-step quantity (steps on the last axis)."""
        return (values * self.step_weights).sum(axis=-1) / self.step_weights.sum()

    def op_mean(self, name: str) -> np.ndarray:
        """A cost of each op averaged over the steps: (K, ..., ops)."""
        values = getattr(self.costs, name)[:, 0].copy()
        if self.steps is not None and len(self.varying):
            moving = getattr(self.steps, name)
            w = self.step_weights.reshape(1, -1, *(1,) * (moving.ndim - 2))
            values[..., self.varying] = (moving * w).sum(axis=1) / self.step_weights.sum()
        return values

    def config(self, k: int) -> OpCosts:
        """Configuration k's per-op costs, averaged over the steps."""
        return OpCosts(*(self.op_mean(f)[k] for f in OpCosts.__dataclass_fields__))


def _collective_line(op: Op, system: System, plan: Plan) -> CollectiveLine:
    """A collective op's line on the system; tp groups span tp chips, ep groups tp x ep
    (tp inner)."""
    span = {"tp": plan.tp, "ep": plan.tp * plan.ep}[str(op.attr("group"))]
    kind = Collective(str(op.attr("collective")))
    return collective_line(system, kind, int(op.attr("size")), span)


def comm_times(table: OpTable, system: System, plan: Plan) -> np.ndarray:
    """Link time of each collective op in the table (zero for other ops). A collective's
    time is a line in its bytes (cost/collectives.py) whose terms depend on the topology and
    the collective only, so the lines are kept per topology and the table's collectives and
    shared by every shape; only the bytes are the request's."""
    collectives, signature, nbytes = _TABLE_COLLECTIVES.get(
        (table,), None, lambda: _table_collectives(table)
    )
    fixed_s, s_per_byte = _COMM_LINES.get(
        tuple(system.levels), (signature, len(table), plan.tp, plan.ep),
        lambda: _comm_lines(collectives, len(table), system, plan),
    )  # fmt: skip
    return np.where(nbytes > 0, fixed_s + s_per_byte * nbytes, 0.0)


def _table_collectives(table: OpTable) -> tuple[tuple[tuple[int, Op], ...], tuple, np.ndarray]:
    """A table's collectives (position, op), what their lines depend on, and their bytes."""
    collectives = tuple((i, op) for i, op in enumerate(table.ops) if op.kind is OpKind.COLLECTIVE)
    signature = tuple((i, op.attr("collective"), op.attr("group"), op.attr("size"))
                      for i, op in collectives)  # fmt: skip
    nbytes = np.zeros(len(table))
    for i, op in collectives:
        nbytes[i] = op.inputs[0].nbytes
    return collectives, signature, nbytes


_TABLE_COLLECTIVES: ByIdentity[tuple[tuple[tuple[int, Op], ...], tuple, np.ndarray]] = ByIdentity()


def _comm_lines(
    collectives: tuple[tuple[int, Op], ...], n: int, system: System, plan: Plan
) -> tuple[np.ndarray, np.ndarray]:
    fixed_s, s_per_byte = np.zeros(n), np.zeros(n)
    for i, op in collectives:
        line = _collective_line(op, system, plan)
        if line.algorithm != "none":
            fixed_s[i], s_per_byte[i] = line.fixed_s, line.s_per_byte
    return fixed_s, s_per_byte


_COMM_LINES: ByIdentity[tuple[np.ndarray, np.ndarray]] = ByIdentity()


def collective_algorithms(table: OpTable, system: System, plan: Plan) -> list[dict]:
    """The algorithm and level chosen for each distinct collective, for reports."""
    found = []
    for op in table.ops:
        if op.kind is OpKind.COLLECTIVE:
            cost = _collective_line(op, system, plan).cost(op.inputs[0].nbytes)
            found.append({
                "op": op.name, "collective": op.attr("collective"), "group": op.attr("group"),
                "size": op.attr("size"), "bytes": op.inputs[0].nbytes,
                "algorithm": cost.algorithm, "level": cost.level, "time_s": cost.time_s,
            })  # fmt: skip
    return found


def cost_phases(
    graphs: RankGraphs,
    systems: Sequence[System],
    placements: Sequence[Placement],
    plan: Plan,
    pp: np.ndarray,
) -> tuple[PhaseCosts, PhaseCosts]:
    """(prefill, decode) costs of one rank under K configurations: system k with placement
    k (where its fullest chip keeps what) and a pipeline of pp[k] stages, all with `plan`'s
    tp and ep.

    The K configurations of a sweep share a few chips, placements and topologies: each
    figure is worked out once per distinct object and spread to the configurations by index.
    """
    chips, chip_of = distinct([s.chip for s in systems])
    homes, home_of = distinct(placements)
    # link times depend on a system's topology levels only, which its copies share
    topologies, topology_of = distinct(systems, key=lambda s: id(s.levels))
    phases = []
    for phase, values in enumerate(graphs.phase_values):
        hw = stacked_hardware(chips, values.first).take_configs(chip_of)
        where = placement_onehot(values.table, homes, hw.level_rate.shape[-2])[home_of][:, None]
        comm = np.stack([comm_times(graphs.tables[phase], s, plan) for s in topologies])
        comm = comm[topology_of][:, None]
        costs = evaluate(values.first, hw, where, comm)
        steps, v = None, values.varying
        if len(values.weights) > 1 and len(v):
            steps = evaluate(values.moving, hw.take(v), where[..., v], comm[..., v])
        phases.append(PhaseCosts(values.first, costs, *graphs.depth_counts(phase, pp), v, steps,
                                 values.weights))  # fmt: skip
    return phases[0], phases[1]


def stacked_hardware(chips: list[Chip], table: OpTable) -> HardwareArrays:
    """HardwareArrays.stack of these chips, kept: every shape of a sweep's chunk has them."""
    return _STACKED.get(tuple(chips), table.structure, lambda: HardwareArrays.stack(
        [HardwareArrays.of(c, table) for c in chips]))  # fmt: skip


_STACKED: ByIdentity[HardwareArrays] = ByIdentity()


def distinct(
    objects: Sequence[T], key: Callable[[T], Hashable] = id
) -> tuple[list[T], np.ndarray]:
    """The distinct objects (by identity, or by `key`; in first-seen order) and each one's
    position among them."""
    first: dict[Hashable, int] = {}
    found: list[T] = []
    where = np.empty(len(objects), dtype=np.intp)
    for k, obj in enumerate(objects):
        i = first.setdefault(key(obj), len(found))
        if i == len(found):
            found.append(obj)
        where[k] = i
    return found, where
