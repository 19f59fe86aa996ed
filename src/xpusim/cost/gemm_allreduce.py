"""A row-parallel GEMM fused with its all-reduce: TensorRT-LLM's gemm_allreduce_plugin.

Under tensor parallelism each chip's o_proj and down projection (the row-split linear
layers) produce partial sums that are all-reduced before the next op. Built with
`gemm_allreduce_plugin`, TensorRT-LLM runs each such GEMM and its all-reduce as one kernel
(tensorrt_llm/layers/linear.py RowLinear, tensorrt_llm/quantization/layers.py FP8RowLinear
and FP4RowLinear forward: `gemm_allreduce(...)` in place of the GEMM then `allreduce`; the
GemmAllReduce plugin, a CUTLASS GEMM whose epilogue stores each finished output tile to
NVLink SHARP multicast memory, where the switch reduces it), so the reduction of the tiles
already done runs while later tiles are computed. MLPerf Inference v5.1's Llama-3.1-405B
configs build it (mlcommons/inference_results_v5.1 965182b0, closed/NVIDIA/configs/
B200-SXM-180GBx8/{Server,Interactive}/llama3_1-405b.py line 34, closed/Nebius/configs/
H200-SXM-141GBx8/{Server,Interactive}/llama3_1-405b.py line 34: 'gemm_allreduce_plugin':
'float16'); their Llama-2-70B and Mixtral configs run TP1, with nothing to reduce.

How it is costed. No timing of TensorRT-LLM's fused kernel against its GEMM and all-reduce
apart is published at these shapes (aiconfigurator times the all-reduce alone), so a fused
pair costs the longer of its two parts, each as cost/ prices it alone (the GEMM at its
measured kernel floor, the all-reduce at its measured one): max(GEMM, all-reduce), the
ideal-overlap bound. What it leaves out, and so under-prices: the last tiles' reduction,
which nothing overlaps, and the GEMM's slowdown from the SMs and memory traffic the
reduction shares. Fused GEMM + all-reduce kernels elsewhere reach part of the bound (FlagTree
PR #861, Triton multimem on 8 H800s: 1.20-1.57x over the GEMM then the all-reduce at M
1,024-16,384, N 8,192), so the fused time is a lower bound: docs/validation.md shows the
error left.

The pairs are found in the graph (`fused_pairs`): an all-reduce that directly follows the
matmul it reduces (partition.collective names it after it), that matmul stamped with the
engine kernel KERNEL (Request.kernels). An op table row may hold all-reduces of several
roles (the embedding's, o_proj's and down's share a signature), so `overlapped` takes off
each row the mean time its instances hide.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from xpusim.ir.op import Op, OpKind

if TYPE_CHECKING:
    from xpusim.cost.op_table import OpTable
    from xpusim.cost.roofline import OpCosts

KERNEL = "trtllm-gemm-allreduce"
"""The engine kernel (Request.kernels) that fuses each row-parallel GEMM with its all-reduce."""

Pair = tuple[int, int, float]
"""(GEMM row, all-reduce row, instances of the pair) of an op table."""


def fused_pairs(ops: tuple[Op, ...] | list[Op], rows: np.ndarray,
                copies: list[float]) -> tuple[Pair, ...]:  # fmt: skip
    """The fused (GEMM, all-reduce) pairs of a graph's ops, in execution order, by their op
    table rows (`rows`), with how many instances each stands for (`copies`)."""
    found: dict[tuple[int, int], float] = {}
    for i in range(1, len(ops)):
        gemm, reduce = ops[i - 1], ops[i]
        if (reduce.kind is OpKind.COLLECTIVE and reduce.attr("collective") == "all_reduce"
                and gemm.kind is OpKind.MATMUL and KERNEL in (gemm.attr("kernels") or ())
                and reduce.name == f"{gemm.name}.all_reduce"):  # fmt: skip
            key = (int(rows[i - 1]), int(rows[i]))
            found[key] = found.get(key, 0.0) + float(copies[i])
    return tuple((g, a, n) for (g, a), n in found.items())


def overlapped(table: OpTable, costs: OpCosts, static_w: np.ndarray | float) -> OpCosts:
    """Costs with each fused pair at the longer of its GEMM and its all-reduce: the shorter
    part's time taken off the all-reduce's row (its instances' mean), with the static
    energy of that time. Never under the row's power-limited time (power_s)."""
    if not table.fused:
        return costs
    time_s = costs.time_s
    hidden = np.zeros_like(time_s)
    for gemm, reduce, instances in table.fused:
        hidden[..., reduce] += instances * np.minimum(time_s[..., gemm], time_s[..., reduce])
    hidden = hidden / np.maximum(table.count, 1.0)
    fused_s = np.maximum(time_s - hidden, costs.power_s)
    saved = time_s - fused_s
    return replace(costs, time_s=fused_s, comm_s=np.maximum(costs.comm_s - saved, 0.0),
                   energy_j=costs.energy_j - static_w * saved)  # fmt: skip
