"""The graphs one tensor-parallel rank runs in a training step, and their stash and liveness.

Built once per (tp, ep, microbatch size) and shared by every pipeline depth and data-parallel
width of a plan search, like the inference ranks of scenarios/llm/graphs.py: the forward
pass of one microbatch (workloads/transformer.py, training form), its backward pass with
recomputation (compiler/autodiff.py), both partitioned (compiler/partition.py), and with
explicit transposes on chips whose matrix unit needs them (compiler/transpose.py).

A rank is kept across simulations too (`build_rank`): the points of a training sweep (other chip
counts, batches that give the same microbatch, other chips and what-ifs) and repeated plan
searches share its graphs, its liveness peaks and, per chip object, its op costs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from xpusim.compiler.autodiff import Recompute, differentiate
from xpusim.compiler.memory_plan import Placement, peak_activation_bytes
from xpusim.compiler.optimizer import OptimizerSpec, update_ops
from xpusim.compiler.partition import Plan, op_stage_counts, partition, stage_spread
from xpusim.compiler.transpose import materialize_transposes
from xpusim.cost.op_table import OpTable, distinct_stage_counts, op_table
from xpusim.cost.roofline import HardwareArrays, OpCosts, evaluate
from xpusim.hardware.spec import Chip
from xpusim.ir.dtypes import DType
from xpusim.ir.graph import Graph
from xpusim.ir.op import OpKind
from xpusim.ir.tensor import Role
from xpusim.memo import ByIdentity, remembered
from xpusim.workloads.transformer import StepShape, build_step
from xpusim.workloads.transformer_config import TransformerConfig


@dataclass
class RankTraining:
    """One rank's forward and backward graphs for one microbatch, all pipeline stages."""

    cfg: TransformerConfig
    forward: Graph
    backward: Graph
    stash_by_layer: dict[int, float]  # bytes one rank stashes per microbatch, by layer
    _peaks: dict[int, list[float]] = field(default_factory=dict)
    # Kept for every plan of a search that shares this rank (its pipeline depths, widths):
    _tables: dict[int, OpTable] = field(default_factory=dict)  # by graph identity
    _op_counts: dict[tuple[int, int], np.ndarray] = field(default_factory=dict)  # per op
    _counts: dict[tuple, np.ndarray] = field(default_factory=dict)  # per distinct op
    _updates: dict[tuple, Graph] = field(default_factory=dict)
    _stage_peaks: dict[frozenset[int], float] = field(default_factory=dict)
    # by chip identity: the rank outlives a simulation, and a chip's id may be reused
    _op_costs: ByIdentity[OpCosts] = field(default_factory=lambda: ByIdentity(maxsize=1024))

    def op_costs(
        self, graph: Graph, chip: Chip, placement: Placement, comm_s: np.ndarray
    ) -> OpCosts:
        """Each distinct op's cost on the chip (cost/roofline.py). Plans of a search that
        differ only in their pipeline depth or data-parallel width run the same ops where
        the same memory holds them, with the same collective times: costed once."""
        where = (tuple(sorted(placement.home.items())), placement.onchip_level,
                 placement.onchip_bytes, comm_s.tobytes())  # fmt: skip

        def costed() -> OpCosts:
            table = self.table(graph)
            return evaluate(table, HardwareArrays.of(chip, table), placement, comm_s)

        return self._op_costs.get((graph, chip), where, costed)

    def table(self, graph: Graph) -> OpTable:
        """op_table of one of this rank's graphs (forward, backward or an update)."""
        if id(graph) not in self._tables:
            self._tables[id(graph)] = op_table(graph)
        return self._tables[id(graph)]

    def update(self, spec: OptimizerSpec, act: DType, zero: int, dp: int) -> Graph:
        """The optimizer's update graph for a data-parallel width (compiler/optimizer.py)."""
        key = (spec, act, zero, dp if zero >= 1 else 1)  # without ZeRO dp changes nothing
        if key not in self._updates:
            self._updates[key] = update_ops(self.forward, spec, act, zero, dp)
        return self._updates[key]

    def stage_counts(self, graph: Graph, pp: int, which: str = "all") -> np.ndarray:
        """(distinct ops of the graph's table, pp): instances each stage runs, of all ops,
        of its collectives ("comm") or of its recomputed ops ("recompute")."""
        key = (id(graph), pp, which)
        if key not in self._counts:
            picked = {"all": lambda op: True, "comm": lambda op: op.kind is OpKind.COLLECTIVE,
                      "recompute": lambda op: bool(op.attr("recompute"))}[which]  # fmt: skip
            mask = np.array([picked(op) for op in graph], dtype=float)
            if (id(graph), pp) not in self._op_counts:
                self._op_counts[id(graph), pp] = op_stage_counts(graph, self.cfg.num_layers, pp)
            per_op = self._op_counts[id(graph), pp]
            self._counts[key] = distinct_stage_counts(self.table(graph), per_op, mask)
        return self._counts[key]

    def stash_per_stage(self, pp: int) -> list[float]:
        """Bytes one microbatch stashes on each stage (a stand-in layer's once per layer it
        stands for)."""
        found = [0.0] * pp
        for layer, nbytes in self.stash_by_layer.items():
            for stage, copies in self._stages_of(layer, pp).items():
                found[stage] += nbytes * copies
        return found

    def peak_per_stage(self, pp: int) -> list[float]:
        """Peak live activations of one microbatch's forward and backward on each stage.

        The graphs are compact: one layer stands for k identical ones. On a stage running k
        copies of it, layer j's passes see what the layers before it in the stage keep live
        into the backward and their own tensors, so the peak is at the last copy: the peak
        of the stage's ops with the layer run once, plus what the other k - 1 copies keep
        (a test holds it equal to the liveness of the full graphs)."""
        if pp not in self._peaks:
            kept = self._kept_into_backward
            spreads = {layer: self._stages_of(layer, pp) for layer in self._layer_ids}
            peaks = []
            for s in range(pp):
                runs = {layer: spread.get(s, 0) for layer, spread in spreads.items()}
                others = sum(nbytes * (runs[layer] - 1) for layer, nbytes in kept.items()
                             if runs.get(layer, 0) > 1)  # fmt: skip
                peaks.append(self._peak_of(frozenset(k for k, n in runs.items() if n)) + others)
            self._peaks[pp] = peaks
        return self._peaks[pp]

    @cached_property
    def _layer_ids(self) -> tuple[int, ...]:
        return tuple(dict.fromkeys(op.layer for op in self.forward))

    def _peak_of(self, layers: frozenset[int]) -> float:
        """Liveness peak of the forward and backward ops of these layer ids (each once):
        the inner stages of a deep pipeline all run the same ones."""
        if layers not in self._stage_peaks:
            ops = [op for g in (self.forward, self.backward) for op in g if op.layer in layers]
            self._stage_peaks[layers] = peak_activation_bytes(Graph("stage", ops))
        return self._stage_peaks[layers]

    @cached_property
    def _kept_into_backward(self) -> dict[int, float]:
        """Bytes of the activations each layer's forward writes that stay live into the
        backward pass, as the liveness analysis sees them (the stash, and anything else a
        backward op reads by the same name)."""
        forward = self.forward.ops
        last: dict[str, int] = {}
        for i, op in enumerate([*forward, *self.backward.ops]):
            for t in op.inputs + op.outputs:
                last[t.name] = i
        seen: set[str] = set()
        kept: dict[int, float] = {}
        for op in forward:
            for t in op.inputs + op.outputs:
                if t.role is Role.ACTIVATION and t.name not in seen:
                    seen.add(t.name)
                    if last[t.name] >= len(forward):
                        kept[op.layer] = kept.get(op.layer, 0.0) + t.nbytes
        return kept

    def _stages_of(self, layer: int, pp: int) -> dict[int, int]:
        """{stage: how many of the layers this layer id stands for it runs}; the ops
        before the first layer run on the first stage, those after the last on the last."""
        layers = self.cfg.num_layers
        if layer < 0 or layer >= layers:
            return {0 if layer < 0 else pp - 1: 1}
        spread = stage_spread(layers, pp, layer, self.forward.layer_copies.get(layer, 1))
        return {int(stage): int(n) for stage, n in enumerate(spread) if n}

    @cached_property  # every plan of a search that shares the rank asks
    def matrix_flops(self) -> float:
        return self.forward.matrix_flops + self.backward.matrix_flops


def build_rank(
    cfg: TransformerConfig,
    plan: Plan,
    micro_batch: int,
    seq: int,
    act: DType,
    recompute: Recompute,
    explicit_transpose: bool,
    sequence_parallel: bool,
    compact: bool = True,
) -> RankTraining:
    """The rank of `plan`'s tp and ep, kept per model object and the other arguments.

    `compact` builds layer 0 and one layer standing for the others (as inference does:
    workloads/transformer.py); the full graphs, every layer emitted, are what tests hold
    the compact ones' counts, stash and peaks against."""
    rest = (micro_batch, seq, act, recompute, explicit_transpose, sequence_parallel, compact)
    return remembered("training rank", (cfg,), (plan.tp, plan.ep, *rest),
                      lambda: _build(cfg, Plan(tp=plan.tp, ep=plan.ep), *rest),
                      _MAX_RANKS)  # fmt: skip


_MAX_RANKS = 512  # ranks one scope keeps
"""A Llama-2-70B rank and what a search keeps on it took about 0.2 MB (tracemalloc, a
512-chip search's seven ranks); 512 bound what a long sweep keeps to some 100 MB, and hold
the 331 distinct ranks of benchmarks/bench_sweep.py's 360-point training grid (2 formats,
3 sequence lengths, 6 batches, 8-128 chips, two chips)."""


def _build(
    cfg: TransformerConfig, plan: Plan, micro_batch: int, seq: int, act: DType,
    recompute: Recompute, explicit_transpose: bool, sequence_parallel: bool, compact: bool,
) -> RankTraining:  # fmt: skip
    step = build_step(cfg, StepShape(micro_batch, seq, seq), act, training=True, compact=compact)
    trained = differentiate(step, "loss", recompute, range(cfg.num_layers))
    forward = partition(trained.forward, plan, sequence_parallel)
    backward = partition(trained.backward, plan, sequence_parallel)
    if explicit_transpose:
        backward = materialize_transposes(backward)
    # one rank's shards, as their producers write them (graph inputs as their readers do)
    sizes = {t.name: t.nbytes for op in forward for t in op.inputs}
    sizes |= {t.name: t.nbytes for op in forward for t in op.outputs}
    stash: dict[int, float] = {}
    for s in trained.stash:
        stash[s.layer] = stash.get(s.layer, 0.0) + sizes[s.tensor.name]
    return RankTraining(cfg, forward, backward, stash)
