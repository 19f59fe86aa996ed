"""The graphs one tensor-parallel rank runs in a training step, and their stash and liveness.

Built once per (tp, ep, microbatch size) and shared by every pipeline depth and data-parallel
width of a plan search, like the inference ranks of scenarios/rank_costs.py: the forward
pass of one microbatch (workloads/transformer.py, training form), its backward pass with
recomputation (compiler/autodiff.py), both partitioned (compiler/partition.py), and with
explicit transposes on chips whose matrix unit needs them (compiler/transpose.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from xpusim.compiler.autodiff import Recompute, differentiate
from xpusim.compiler.memory_plan import peak_activation_bytes
from xpusim.compiler.optimizer import OptimizerSpec, update_ops
from xpusim.compiler.partition import Plan, op_stage_counts, op_stages, partition, stage_of_layer
from xpusim.compiler.transpose import materialize_transposes
from xpusim.cost.op_table import OpTable, distinct_stage_counts, op_table
from xpusim.ir.dtypes import DType
from xpusim.ir.graph import Graph
from xpusim.ir.op import OpKind
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
    _counts: dict[tuple, np.ndarray] = field(default_factory=dict)
    _updates: dict[tuple, Graph] = field(default_factory=dict)

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

    def stages(self, graph: Graph, pp: int) -> np.ndarray:
        return np.array(op_stages(graph, self.cfg.num_layers, pp))

    def stage_counts(self, graph: Graph, pp: int, which: str = "all") -> np.ndarray:
        """(distinct ops of the graph's table, pp): instances each stage runs, of all ops,
        of its collectives ("comm") or of its recomputed ops ("recompute")."""
        key = (id(graph), pp, which)
        if key not in self._counts:
            picked = {"all": lambda op: True, "comm": lambda op: op.kind is OpKind.COLLECTIVE,
                      "recompute": lambda op: bool(op.attr("recompute"))}[which]  # fmt: skip
            mask = np.array([picked(op) for op in graph], dtype=float)
            if (id(graph), pp) not in self._counts:
                self._counts[id(graph), pp] = op_stage_counts(graph, self.cfg.num_layers, pp)
            per_op = self._counts[id(graph), pp]
            self._counts[key] = distinct_stage_counts(self.table(graph), per_op, mask)
        return self._counts[key]

    def stash_per_stage(self, pp: int) -> list[float]:
        layers = stage_of_layer(self.cfg.num_layers, pp)
        found = [0.0] * pp
        for layer, nbytes in self.stash_by_layer.items():
            stage = 0 if layer < 0 else pp - 1 if layer >= self.cfg.num_layers else layers[layer]
            found[stage] += nbytes
        return found

    def peak_per_stage(self, pp: int) -> list[float]:
        """Peak live activations of one microbatch's forward and backward on each stage."""
        if pp not in self._peaks:
            ops = [(op, s) for g in (self.forward, self.backward)
                   for op, s in zip(g, self.stages(g, pp), strict=True)]  # fmt: skip
            self._peaks[pp] = [
                peak_activation_bytes(Graph(f"stage{s}", [op for op, t in ops if t == s]))
                for s in range(pp)
            ]
        return self._peaks[pp]

    @property
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
) -> RankTraining:
    step = build_step(cfg, StepShape(micro_batch, seq, seq), act, training=True)
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
