"""The rows of `--ops`: one report per distinct op of a phase, with its count, its work,
its time by roof and its energy, and its share of the phase. Every scenario's result holds
them (LLM and graph inference, recommendation, training), each built from its costed ops.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from xpusim.cost.op_table import OpTable
from xpusim.cost.roofline import Bottleneck, OpCosts


@dataclass
class OpReport:
    phase: str
    name: str
    kind: str
    count: int  # in the graph one chip group runs, all pipeline stages together
    flops: float
    bytes: float
    time_s: float
    compute_s: float
    memory_s: float
    overhead_s: float
    comm_s: float
    energy_j: float
    bottleneck: str
    share: float  # of the phase's critical path, all instances included


def op_reports(
    phase: str, table: OpTable, costs: OpCosts, phase_s: float, weights: np.ndarray | None = None
) -> list[OpReport]:
    """One report per distinct op; a table with a leading step axis (decode) is averaged
    over it with `weights`, as `costs` already are."""
    w = np.ones(1) if weights is None else weights
    flops = np.average(np.atleast_2d(table.matrix_flops + table.vector_flops), axis=0, weights=w)
    moved = np.average(np.atleast_2d(table.role_bytes.sum(axis=-2)), axis=0, weights=w)
    labels = costs.bottleneck
    return [
        OpReport(
            phase=phase,
            name=table.labels[i],
            kind=op.kind.value,
            count=int(table.count[i]),
            flops=float(flops[i]),
            bytes=float(moved[i]),
            time_s=float(costs.time_s[i]),
            compute_s=float(costs.compute_s[i]),
            memory_s=float(costs.memory_s[i]),
            overhead_s=float(costs.overhead_s[i]),
            comm_s=float(costs.comm_s[i]),
            energy_j=float(costs.energy_j[i]),
            bottleneck=Bottleneck(int(labels[i])).label,
            share=float(table.count[i] * costs.time_s[i] / phase_s) if phase_s else 0.0,
        )
        for i, op in enumerate(table.ops)
    ]
