"""The engine: per-op time and energy of a rank's graphs for many configurations at once.

Every (request, system, plan) of one format and rank split (Plan.rank) is costed by one
array call with a leading configuration axis: the plans of a search, or the chips, what-ifs
and shapes of a sweep. A chip's, placement's or topology's figures are worked out once
and spread by index.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from xpusim.compiler.memory_plan import Placement
from xpusim.compiler.partition import Plan
from xpusim.cost.aux_stream import overlapped_streams
from xpusim.cost.collectives import comm_seconds
from xpusim.cost.gemm_allreduce import overlapped
from xpusim.cost.op_table import OpTable
from xpusim.cost.ordered_sum import ordered_sum
from xpusim.cost.roofline import HardwareArrays, OpCosts, evaluate, placement_onehot
from xpusim.hardware.spec import Chip
from xpusim.hardware.system import System
from xpusim.memo import distinct, remembered
from xpusim.scenarios.llm.graphs import ShapeGraphs

_EVERY = slice(None)


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
    step_weights: np.ndarray = field(default_factory=lambda: np.ones((1, 1)))  # (K, steps)
    def stage_sums(self, name: str, comm_only: bool = False) -> np.ndarray:
        """A cost (an OpCosts field) summed over each stage's op instances: (..., pp), with
        the step axis where the phase has one."""
        return self._summed(name, self.comm_counts if comm_only else self.counts)

    def totals(self, name: str, comm_only: bool = False) -> np.ndarray:
        """A cost summed over every stage's op instances: (K, steps). The counts summed
        over the stages first (integers: exact) spare the per-stage products."""
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

    @cached_property
    def _steps(self) -> np.ndarray:
        """(K,) each configuration's decode steps (the weights' sum)."""
        return ordered_sum(self.step_weights, axis=-1)

    def step_mean(self, values: np.ndarray) -> np.ndarray:
        """Mean over every step of a per-step quantity (K, steps): an ordered sum, so the
        steps of weight 0 that pad a short generation beside longer ones change nothing."""
        return ordered_sum(values * self.step_weights, axis=-1) / self._steps

    def op_mean(self, name: str, ks: np.ndarray | slice = _EVERY) -> np.ndarray:
        """A cost of each op averaged over the steps: (K, ..., ops), or of configurations
        `ks` only (each configuration's mean is its own: the same either way)."""
        values = getattr(self.costs, name)[ks, 0].copy()
        if self.steps is not None and len(self.varying):
            moving = getattr(self.steps, name)[ks]
            inner = (1,) * (moving.ndim - 2)
            weights = self.step_weights[ks]
            w = weights.reshape(*weights.shape, *inner)
            mean = ordered_sum(moving * w, axis=1) / self._steps[ks].reshape(-1, *inner)
            values[..., self.varying] = mean
        return values

    def config(self, k: int) -> OpCosts:
        """Configuration k's per-op costs, averaged over the steps."""
        return OpCosts(*(self.op_mean(f)[k] for f in OpCosts.__dataclass_fields__))


def cost_phases(
    graphs: ShapeGraphs,
    rows: np.ndarray,
    systems: Sequence[System],
    placements: Sequence[Placement],
    plan: Plan,
    pp: np.ndarray,
    phases: tuple[int, ...] = (0, 1),
    streams: np.ndarray | None = None,
) -> tuple[PhaseCosts, ...]:
    """(prefill, decode) costs of one rank under K configurations: the request at rows[k]
    on system k with placement k and a pipeline of pp[k] stages, all with `plan`'s tp and
    ep; `phases` (0 prefill, 1 decode) only those (serving costs prefill graphs alone).
    `streams`: per configuration, whether the engine runs an MoE layer's shared experts on
    their second stream there (cost/aux_stream.py; None: wherever the graph marks them)."""
    each_system, system_of = distinct(systems)
    chips, chip_of = distinct([s.chip for s in each_system])
    homes, home_of = distinct(placements)
    # link times depend on a system's topology levels only, which its copies share
    topologies, topology_of = distinct(each_system, key=lambda s: id(s.levels))
    chip_of, topology_of = chip_of[system_of], topology_of[system_of]
    # plans that differ only in their pipeline depth run the same ops at the same cost: each
    # distinct (request, chip, placement, topology) is evaluated once and spread by index
    key = ((rows * len(chips) + chip_of) * len(homes) + home_of) * len(topologies) + topology_of
    _, once, spread = np.unique(key, return_index=True, return_inverse=True)
    if len(once) == len(key):  # all distinct (a sweep of shapes): costed in their own order
        once = spread = slice(None)
    rows, chip_of, home_of, topology_of = (a[once] for a in (rows, chip_of, home_of, topology_of))
    streams = None if streams is None else streams[once]
    if len(rows) == len(graphs.requests) and np.array_equal(rows, np.arange(len(rows))):
        rows = slice(None)  # the graphs' requests in order: their tables as they are
    found = []
    for phase in phases:
        values = graphs.phase_values[phase]
        first = values.first.subset(steps=rows)
        hw = stacked_hardware(chips, first)
        if len(chips) > 1:  # one chip's arrays broadcast over the configurations as they are
            hw = hw.take_configs(chip_of)
        levels = hw.level_rate.shape[-2]
        where = placement_onehot(values.activation_peak[rows], homes, levels, home_of)[:, None]
        nbytes = graphs.collective_bytes[phase][rows]
        by_topology = [comm_seconds(graphs.tables[phase], s, plan.tp, nbytes) for s in topologies]
        comm = by_topology[0] if len(topologies) == 1 else \
            np.stack(by_topology)[topology_of, np.arange(len(topology_of))]
        comm = comm[:, None]
        costs = evaluate(first, hw, where, comm)
        costs = overlapped_streams(first, overlapped(first, costs, hw.static_w), hw.static_w,
                                   streams)  # fmt: skip
        costs = _spread(costs, spread)
        steps, v, weights = None, values.varying, values.weights[rows][spread]
        if len(v):
            moving = values.moving.subset(steps=rows)
            steps = _spread(evaluate(moving, hw.take(v), where[..., v], comm[..., v]), spread)
        found.append(PhaseCosts(first, costs, *graphs.depth_counts(phase, pp), v, steps,
                                weights))  # fmt: skip
    return tuple(found)


def _spread(costs: OpCosts, which: np.ndarray | slice) -> OpCosts:
    """Per-configuration costs from those of the distinct configurations they index."""
    if isinstance(which, slice):
        return costs
    return OpCosts(*(getattr(costs, name)[which] for name in OpCosts.__dataclass_fields__))


def stacked_hardware(chips: list[Chip], table: OpTable) -> HardwareArrays:
    """HardwareArrays.stack of these chips, kept: every shape of a sweep's chunk has them."""
    return remembered("stacked hardware", tuple(chips), table.structure,
                      lambda: HardwareArrays.stack([HardwareArrays.of(c, table) for c in chips]))
