"""Per-op time and energy of the graph one chip runs, for a prefill and for every decode step.

A rank's graph (one tensor/expert-parallel rank, all pipeline stages) is built and costed
once; pipeline stages are then contiguous slices of its ops, so any pipeline depth costs a
few array sums. That is what makes a plan search over hundreds of chips cheap.

A rank's graphs depend on the model, the request and the plan's tp and ep only, never on the
chip: they are memoized by exactly that, so a plan search, a sweep over chips or what-if
specs, and repeated API calls build each one once and reuse its op tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property, lru_cache

import numpy as np

from xpusim.compiler.memory_plan import Placement, peak_activation_bytes
from xpusim.compiler.partition import Plan, op_stages, partition
from xpusim.cost.collectives import Collective, CollectiveCost, collective_time
from xpusim.cost.op_table import OpTable, op_table
from xpusim.cost.roofline import HardwareArrays, OpCosts, evaluate
from xpusim.hardware.spec import Chip
from xpusim.hardware.system import System
from xpusim.ir.dtypes import DType
from xpusim.ir.graph import Graph
from xpusim.ir.op import Op, OpKind
from xpusim.workloads.transformer import StepShape, build_step
from xpusim.workloads.transformer_config import TransformerConfig


@dataclass(frozen=True)
class Request:
    """What is asked of the system: shapes and formats of one batch of sequences."""

    batch: int  # sequences per microbatch
    prompt: int
    gen: int
    act: DType
    weight: DType

    @property
    def decode_kv(self) -> tuple[int, int]:
        """KV length of the first and last decode step (one step when gen == 1)."""
        return self.prompt + 1, self.prompt + max(self.gen - 1, 1)

    @property
    def decode_steps(self) -> int:
        return max(self.gen - 1, 1)


@dataclass(frozen=True)
class RankGraphs:
    """The graphs one rank runs; they depend on the plan's tp and ep only."""

    prefill: Graph
    decode_first: Graph
    decode_last: Graph

    @cached_property
    def tables(self) -> tuple[OpTable, OpTable]:
        return op_table(self.prefill), op_table(self.decode_first)

    decode_steps: int

    @cached_property
    def decode_table(self) -> OpTable:
        """Every decode step's op counts, interpolated (they are affine in the KV length)."""
        n = self.decode_steps
        fraction = np.arange(n) / (n - 1) if n > 1 else np.zeros(n)
        return self.tables[1].lerp(op_table(self.decode_last), fraction)

    @cached_property
    def activation_bytes(self) -> float:
        return max(peak_activation_bytes(self.prefill), peak_activation_bytes(self.decode_last))

    @cached_property
    def flops(self) -> tuple[float, float]:
        """FLOPs of the prefill and of the first decode step (a sum over every op: kept)."""
        return self.prefill.flops, self.decode_first.flops

    _stages: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _hardware: dict[int, tuple[Chip, tuple[HardwareArrays, HardwareArrays]]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def hardware(self, chip: Chip) -> tuple[HardwareArrays, HardwareArrays]:
        """A chip's figures aligned with the prefill and decode tables; every plan of a
        search on one chip shares them (keyed by the chip object, which the entry holds so
        that its id cannot be reused)."""
        if id(chip) not in self._hardware:
            built = (
                HardwareArrays.build(chip, self.tables[0]),
                HardwareArrays.build(chip, self.tables[1]),
            )
            self._hardware[id(chip)] = (chip, built)
        return self._hardware[id(chip)][1]

    def stages(self, phase: int, num_layers: int, pp: int) -> tuple[np.ndarray, np.ndarray]:
        """(stage of each op, 1.0 where the op is a collective) of the prefill (phase 0) or
        the decode graph (1), per pipeline depth: plans of one search share them."""
        key = (phase, pp)
        if key not in self._stages:
            graph = (self.prefill, self.decode_first)[phase]
            is_comm = [op.kind is OpKind.COLLECTIVE for op in graph.ops]
            self._stages[key] = (
                np.array(op_stages(graph, num_layers, pp)),
                np.array(is_comm, dtype=float),
            )
        return self._stages[key]


def rank_graphs(cfg: TransformerConfig, req: Request, plan: Plan) -> RankGraphs:
    return _rank_graphs(cfg, req, plan.tp, plan.ep)


@lru_cache(maxsize=8)  # the three steps of the last shapes: every (tp, ep) of a search shares them
def _model_step(cfg: TransformerConfig, step: StepShape, act: DType, weight: DType) -> Graph:
    """The unpartitioned step; partition() builds new graphs and never changes this one."""
    return build_step(cfg, step, act, weight)


@lru_cache(maxsize=16)  # a search over 576 chips needs 7 (tp, ep) pairs; a sweep goes in order
def _rank_graphs(cfg: TransformerConfig, req: Request, tp: int, ep: int) -> RankGraphs:
    plan = Plan(tp=tp, ep=ep)

    def step(q: int, kv: int) -> Graph:
        return partition(_model_step(cfg, StepShape(req.batch, q, kv), req.act, req.weight), plan)

    first, last = req.decode_kv
    return RankGraphs(step(req.prompt, req.prompt), step(1, first), step(1, last), req.decode_steps)


@dataclass(frozen=True)
class PhaseCosts:
    """One phase's costs: per distinct op (for reports) and per op in execution order."""

    table: OpTable
    costs: OpCosts  # (..., distinct ops)
    stage_of_op: np.ndarray  # (ops,)
    is_comm: np.ndarray  # (ops,) collective ops

    def stage_sums(self, values: np.ndarray, pp: int, mask: np.ndarray | None = None) -> np.ndarray:
        """Sum of a per-distinct-op quantity over each pipeline stage: (..., pp).

        Each distinct op is weighted by how many of its instances (where `mask` is set, if
        given) each stage runs, so the sum never expands to every op of every decode step.
        """
        n = len(self.table)
        cell = self.table.index * pp + self.stage_of_op
        counts = np.bincount(cell, weights=mask, minlength=n * pp).reshape(n, pp)
        return values @ counts


def _collective_cost(op: Op, system: System, plan: Plan) -> CollectiveCost:
    """A collective op on the system; tp groups span tp chips, ep groups tp x ep (tp inner)."""
    span = {"tp": plan.tp, "ep": plan.tp * plan.ep}[str(op.attr("group"))]
    kind = Collective(str(op.attr("collective")))
    return collective_time(system, kind, op.inputs[0].nbytes, int(op.attr("size")), span)


def _comm_times(table: OpTable, system: System, plan: Plan) -> np.ndarray:
    """Link time of each collective op in the table (zero for other ops)."""
    return np.array([
        _collective_cost(op, system, plan).time_s if op.kind is OpKind.COLLECTIVE else 0.0
        for op in table.ops
    ])  # fmt: skip


def collective_algorithms(table: OpTable, system: System, plan: Plan) -> list[dict]:
    """The algorithm and level chosen for each distinct collective, for reports."""
    found = []
    for op in table.ops:
        if op.kind is OpKind.COLLECTIVE:
            cost = _collective_cost(op, system, plan)
            found.append({
                "op": op.name, "collective": op.attr("collective"), "group": op.attr("group"),
                "size": op.attr("size"), "bytes": op.inputs[0].nbytes,
                "algorithm": cost.algorithm, "level": cost.level, "time_s": cost.time_s,
            })  # fmt: skip
    return found


def cost_phases(
    graphs: RankGraphs, cfg: TransformerConfig, system: System, plan: Plan, placement: Placement
) -> tuple[PhaseCosts, PhaseCosts]:
    """(prefill, decode) costs of one rank under a placement; decode has a leading step axis."""
    chip = system.chip
    prefill_table, decode_table = graphs.tables
    phases = []
    for phase, (table, values) in enumerate(
        ((prefill_table, prefill_table), (decode_table, graphs.decode_table))
    ):
        hw = graphs.hardware(chip)[phase]
        costs = evaluate(values, hw, placement, _comm_times(table, system, plan))
        stages, is_comm = graphs.stages(phase, cfg.num_layers, plan.pp)
        phases.append(PhaseCosts(table, costs, stages, is_comm))
    return phases[0], phases[1]
