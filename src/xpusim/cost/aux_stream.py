"""An MoE layer's shared experts on a second CUDA stream, beside its routed experts.

Engines run DeepSeek's shared experts on an auxiliary stream while the router and the
routed experts run on the main one, and the layer's all-reduce waits for both:
- SGLang (python/sglang/srt/models/deepseek_v2.py DeepseekV2MoE.forward): with no shared
  expert fused into the routed kernel, under CUDA-graph capture (decode), it calls
  forward_normal_dual_stream, the shared experts on `alt_stream` (read in the code index's
  copy 161203363, which takes any batch up to 1,024 tokens; glm4_moe.py's copy 8060500011,
  the same forward, under CUDA-graph capture). SGLang creates that stream on CUDA alone, so
  on ROCm the profile leaves the kernel out (engines.toml `nvidia_only`). Where
  SGLang fuses the shared expert into the routed MoE kernel instead (its
  num_fused_shared_experts, on by default where determine_num_fused_shared_experts allows:
  workloads/transformer.py FUSED_SHARED_EXPERT), there is no second path: the kernel runs
  one expert more per token.
- TensorRT-LLM (tensorrt_llm/_torch/models/modeling_deepseekv3.py Deepseekv3MoE.forward):
  `maybe_execute_in_parallel(_compute_routed_output, _compute_shared_output, ...,
  self.aux_stream)`, then one all-reduce of their sum (copies 2891600299 and 227015512).
- aiconfigurator prices the same layer as OverlapOp(routed, shared): the longer of the two
  (aic-core sdk/models/deepseek.py, generation_moe_overlap, at 095f58a).

How it is costed. The layer builder marks the ops of each path (`stream`: "main" for the
router, its top-k and the routed experts; "aux" for the shared experts,
workloads/transformer.py SHARED_EXPERTS_STREAM) where the engine lists the kernel. The two
paths of a layer cost the longer of the two, and at least the roofline of both together,
since they share the chip's SMs and HBM: max(main, aux, max(Σ compute_s, Σ memory_s)). So
a decode step, whose small GEMMs are mostly fixed time, hides the shorter path; a prefill,
compute bound, costs about the sum; never less than FLOPs at peak and bytes at bandwidth
of the whole, never more than the two in series. What it leaves out: the slowdown of each
path from the other's traffic beyond that roofline, and the event waits between streams,
neither measured for these kernels.

Engine gates: the engines run the second stream at some steps only (serving/engines.toml
aux_stream_*): SGLang at steps of at most DUAL_STREAM_TOKEN_THRESHOLD (1,024) tokens,
TensorRT-LLM under CUDA graphs alone, its decode-only steps; a serving step outside them
costs the two paths in series (serving/step_cost.py passes each configuration's gate).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from xpusim.ir.op import AUX_STREAM, Op, OpKind

if TYPE_CHECKING:
    from xpusim.cost.op_table import OpTable
    from xpusim.cost.roofline import OpCosts

Group = tuple[tuple[int, ...], tuple[int, ...], float]
"""(main rows, aux rows, instances) of an op table: one layer's two paths, and how many
layers run them."""


def stream_groups(ops: tuple[Op, ...] | list[Op], rows: np.ndarray,
                  copies: list[float]) -> tuple[Group, ...]:  # fmt: skip
    """Each layer's (main, aux) op table rows of a graph whose ops carry `stream`, with the
    layers that share them counted together (`copies`: how many each op stands for)."""
    layers: dict[int, tuple[list[int], list[int], float]] = {}
    for i, op in enumerate(ops):
        stream = op.attr("stream")
        if stream is None or op.kind is OpKind.COLLECTIVE:
            continue
        main, aux, _ = layers.setdefault(op.layer, ([], [], float(copies[i])))
        (aux if stream == AUX_STREAM else main).append(int(rows[i]))
    found: dict[tuple[tuple[int, ...], tuple[int, ...]], float] = {}
    for main, aux, n in layers.values():
        if main and aux:
            key = (tuple(main), tuple(aux))
            found[key] = found.get(key, 0.0) + n
    return tuple((m, a, n) for (m, a), n in found.items())


def overlapped_streams(table: OpTable, costs: OpCosts, static_w: np.ndarray | float,
                       within: np.ndarray | None = None) -> OpCosts:  # fmt: skip
    """Costs with each layer's two paths at max(main, aux, their joint roofline): the time
    hidden taken off the aux rows in proportion to their times (each row's instances'
    mean), with the static energy of that time. Never under a row's power_s. `within`:
    per configuration (the costs' first axis), whether the engine runs the two streams
    at that step at all (module docstring, last paragraph); None: every one."""
    if not table.streams or (within is not None and not within.any()):
        return costs
    time_s = costs.time_s
    gate = 1.0 if within is None else within.reshape(-1, *(1,) * (time_s.ndim - 2))
    hidden = np.zeros_like(time_s)
    for main, aux, instances in table.streams:
        both = [*main, *aux]
        main_s, aux_s = time_s[..., main].sum(-1), time_s[..., aux].sum(-1)
        whole_s = np.maximum(costs.compute_s[..., both].sum(-1), costs.memory_s[..., both].sum(-1))
        hide_s = (main_s + aux_s - np.maximum(np.maximum(main_s, aux_s), whole_s)) * gate
        share = time_s[..., aux] / np.where(aux_s > 0, aux_s, 1.0)[..., None]
        hidden[..., list(aux)] += instances * hide_s[..., None] * share  # rows distinct
    hidden = hidden / np.maximum(table.count, 1.0)
    kept_s = np.maximum(time_s - hidden, costs.power_s)
    saved = time_s - kept_s
    return replace(costs, time_s=kept_s, energy_j=costs.energy_j - static_w * saved)
