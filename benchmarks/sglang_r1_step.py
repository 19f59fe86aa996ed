"""Prices DeepSeek-R1 FP8's decode step under SGLang on 8 H200 (TP 8) op by op: xpusim's cost
of each op of one decode step, with SGLang's own kernels stamped as `serve --engine sglang`
stamps them (engines.toml `kernels`), beside aiconfigurator's measured SGLang kernel time at
the same shape (docs/validation.md "DeepSeek-R1 under SGLang on 8 H200, op by op"; issue
#48). The InferenceX runs it answers (published.json inferencex-dsr1-h200-sglang-fp8-tp8-*)
launch `--tensor-parallel-size 8 --attention-backend flashinfer`, a BF16 cache, no EP, and
read a TPOT of 1.05-1.25x the measured without MTP.

    python benchmarks/sglang_r1_step.py /path/to/aiconfigurator.git   # a bare mirror

Needs pyarrow (the `parquet` extra), git and xpusim on the path. It changes nothing.

One decode step: BATCHES sequences, each one new token over CONTEXTS cached tokens, every
layer's ops on one of the 8 GPUs (SGLang replays a CUDA graph of the padded batch; each
of BATCHES is a captured size). Measured rows (aiconfigurator at COMMIT, h200_sxm, SGLang
sglang_kernel_tables.VERSION but the MoE's, one GPU, CUDA graphs), interpolated linearly in
each dimension as large_batch_step.Rows does:
- The dense linears (fused qkv_a, q_b_proj, o_proj, the first three layers' gate_up and
  down): gemm_perf fp8_block (SGLang's per-token-group quantization, then DeepGEMM:
  sglang_kernel_tables.py); the router and the LM head gemm_perf bfloat16 (both BF16).
- q_absorb and v_absorb: mla_bmm_perf mla_gen_pre and mla_gen_post at 16 heads a GPU, the
  BF16 rows: on CUDA a 128 x 128 block-FP8 checkpoint's kv_b_proj is dequantized to BF16 at
  load and the absorbed BMMs run torch.bmm in BF16 (deepseek_v2.py post_load_weights:
  block_quant_dequant(..., torch.bfloat16) unless SGL_USE_DEEPGEMM_BMM, off by default).
- MLA decode attention: generation_mla_perf at 16 heads, BF16 cache, linear in sequences
  and in cached tokens (`step`); its kernel_source is flash_attention, where the runs
  launch `--attention-backend flashinfer` (no FlashInfer MLA rows were collected).
- The routed experts: moe_perf fp8_block at MOE_VERSION (SGLang's
  Triton fused MoE: the top-k and both grouped GEMMs), hidden 7168, inter 2048 at moe TP 8,
  256 experts top 8, against xpusim's router_topk, gate_up, silu_mul, down and combine
  together (SGLang fuses the shared expert as a ninth of 257: the row of 8 of 256 is scaled
  by the 9/8 of its token-expert pairs, an assumption the table prints beside the unscaled
  row). The collector routes DeepSeek's balanced logits through its group-limited gate
  (collector/cases/models/DeepseekV3ForCausalLM_cases.yaml: num_expert_group 8, topk_group
  4), so a row reads fewer experts than balanced routing would (the experts of 4 groups:
  cost/kernel_tables.py gate_load counts them): a lower bound of the kernel's time at
  xpusim's routing.
- The all-reduces: custom_allreduce_perf, 8 GPUs, the graph rows, at the step's BF16 hidden
  state (tokens x 7168 x 2 bytes).
Norms, RoPE, the sampler, the LM head's all-gather and the embedding have no measured row:
xpusim's figures stand in both sums. SGLang's host time is overlapped (engines.toml
`overlapped`): not in the step. Every op with a measured row also pays xpusim's per-op
dispatch (the chip's `overhead.per_op_s`, 2 us on an H200) on top of its floor; the rows
were timed per call inside CUDA graphs (collector/helper.py benchmark_with_power). The step
line says how much of xpusim's step that dispatch is.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Any

import numpy as np
from aiconfigurator_data import Mirror, arguments
from large_batch_step import Engine, Rows, columns, gemm_rows, print_ops
from sglang_kernel_tables import VERSION

MODEL, CHIP, CHIP_DIR, TP = "deepseek-r1-0528", "h200-sxm", "h200_sxm", 8
MOE_VERSION = "0.5.14"
"""SGLang release of the MoE rows: the one aiconfigurator's 0.5.12 database reuses
(h200_sxm/moe/sglang/0.5.12/reuse.yaml); its 0.5.9 rows of the same kernel and shape read
1.5-1.8x these at 16-64 tokens (458 us at 32 tokens against 250)."""
BATCHES = (4, 8, 16, 32, 64)
CONTEXTS = (1024, 8192)
HIDDEN, Q_LORA, KV_LORA, ROPE, HEADS, NOPE, V_DIM = 7168, 1536, 512, 64, 128, 128, 128
DENSE_INTER, MOE_INTER, EXPERTS, TOP_K, VOCAB = 18432, 2048, 256, 8, 129280
SHARED = 1  # fused into the routed kernel (engines.toml fused_shared_expert_source)
SGLANG = Engine("sglang", VERSION, "fp8", "bf16", "fp8_block", "bfloat16", "bfloat16")
EXPERT_OPS = ("layers.3.router_topk", "layers.3.experts.gate_up", "layers.3.experts.silu_mul",
              "layers.3.experts.down", "layers.3.combine")  # fmt: skip
ALL_REDUCES = ("all_reduce after embed, o_proj, down", "layers.3.experts.down.all_reduce")


def xpusim_us(batch: int, context: int, chip: str = CHIP, vendor: str = "NVIDIA",
              kv_precision: str = SGLANG.kv_precision) -> dict[str, tuple[int, float]]:  # fmt: skip
    """xpusim's ops of one decode step under SGLang's kernels on `chip` (TP 8), as SGLang
    stamps them on a `vendor` GPU, over a `kv_precision` cache: (count, microseconds each)."""
    import xpusim
    from xpusim.scenarios.llm.inference import chosen_plan
    from xpusim.serving.engines import engine

    cfg = xpusim.model(MODEL)
    setup, cand = chosen_plan(cfg, xpusim.target(chip), {
        "chips": TP, "tp": TP, "batch": batch, "prompt": context, "gen": 2,
        "precision": SGLANG.precision, "weight_precision": "fp8-block",
        "kv_precision": kv_precision})  # fmt: skip
    return decode_ops(cfg, setup, cand, engine("sglang").kernels_on(vendor, cfg, 1, ""))


def decode_ops(cfg: Any, setup: Any, cand: Any, kernels: tuple[str, ...]
               ) -> dict[str, tuple[int, float]]:  # fmt: skip
    """The decode step of `chosen_plan`'s `setup` and `cand` under the engine's `kernels`,
    as `serve` stamps them (serving/run.py prepare): (count, microseconds each) by label."""
    from xpusim.scenarios.llm.engine import cost_phases
    from xpusim.scenarios.llm.graphs import shape_graphs

    req, plan = replace(setup.req, kernels=kernels), cand.plan
    graphs = shape_graphs(cfg, [req], plan.tp, plan.ep, plan.dp_attention)
    (decode,) = cost_phases(graphs, np.array([0]), [setup.system], [cand.placement], plan,
                            np.array([1]), phases=(1,))  # fmt: skip
    each_s = decode.config(0).time_s
    return {label: (int(n), float(s) * 1e6) for label, n, s in
            zip(decode.table.labels, decode.table.count, each_s, strict=True)}  # fmt: skip


def table_rows(d: dict[str, np.ndarray], keep: np.ndarray, *keys: str) -> Rows:
    """The kept rows of a database's columns `d`, keyed by `keys`, in microseconds."""
    return Rows({tuple(float(d[k][i]) for k in keys): float(d["latency"][i]) * 1e3
                 for i in np.flatnonzero(keep)})  # fmt: skip


def measured_us(mirror: Mirror, batch: int, context: int) -> dict[str, float]:
    """Measured microseconds of each op with an SGLang row at the step's shapes; the routed
    experts' under EXPERT_OPS[1] (the layer whole), the rest of EXPERT_OPS none."""
    base = f"{CHIP_DIR}/{{}}/sglang/{VERSION}/{{}}.parquet"
    gemm = gemm_rows(mirror, CHIP_DIR, SGLANG, "fp8_block")
    wide = gemm_rows(mirror, CHIP_DIR, SGLANG, "bfloat16")
    bmm = columns(mirror, base.format("mla_bmm", "mla_bmm_perf"))
    at16 = (bmm["num_heads"] == HEADS // TP) & (bmm["bmm_dtype"] == "bfloat16")
    mla = columns(mirror, base.format("mla", "generation_mla_perf"))
    attention = table_rows(mla, (mla["num_heads"] == HEADS // TP)
                      & (mla["kv_cache_dtype"] == SGLANG.kv), "batch_size", "step")
    moe = columns(mirror, f"{CHIP_DIR}/moe/sglang/{MOE_VERSION}/moe_perf.parquet")
    layer = table_rows(moe, (moe["moe_dtype"] == "fp8_block") & (moe["hidden_size"] == HIDDEN)
                  & (moe["inter_size"] == MOE_INTER) & (moe["num_experts"] == EXPERTS)
                  & (moe["topk"] == TOP_K) & (moe["moe_tp_size"] == TP)
                  & (moe["moe_ep_size"] == 1) & (moe["distribution"] == "balanced"),
                  "num_tokens")  # fmt: skip
    comm = columns(mirror, base.format("comm", "custom_allreduce_perf"))
    reduce = table_rows(comm, (comm["num_gpus"] == TP) & (comm["backend"] == "sglang_graph"),
                   "message_size")
    all_reduce = reduce.at((batch * HIDDEN * 2.0,))
    return {
        "layers.0.qkv_a_proj": gemm.at((batch, Q_LORA + KV_LORA + ROPE, HIDDEN)),
        "layers.0.q_b_proj": gemm.at((batch, HEADS * (NOPE + ROPE) // TP, Q_LORA)),
        "layers.0.q_absorb": table_rows(bmm, at16 & (bmm["op_name"] == "mla_gen_pre"),
                                   "num_tokens").at((batch,)),
        "layers.0.attention": attention.at((batch, context)),
        "layers.0.v_absorb": table_rows(bmm, at16 & (bmm["op_name"] == "mla_gen_post"),
                                   "num_tokens").at((batch,)),
        "layers.0.o_proj": gemm.at((batch, HIDDEN, HEADS * V_DIM // TP)),
        "layers.0.gate_up": gemm.at((batch, 2 * DENSE_INTER // TP, HIDDEN)),
        "layers.0.down": gemm.at((batch, HIDDEN, DENSE_INTER // TP)),
        "layers.3.router": wide.at((batch, EXPERTS, HIDDEN)),
        EXPERT_OPS[1]: layer.at((batch * (TOP_K + SHARED) / TOP_K,)),
        "routed experts, 8 of 256 unscaled": layer.at((batch,)),
        "lm_head": wide.at((batch, VOCAB // TP, HIDDEN)),
        **dict.fromkeys(ALL_REDUCES, all_reduce),
    }


def report(mirror: Mirror, batch: int, context: int) -> tuple[float, float]:
    """Prints one step's ops; returns its two sums (microseconds)."""
    from xpusim.hardware.catalog import load_chip

    ops = xpusim_us(batch, context)
    measured = measured_us(mirror, batch, context)
    # xpusim's ops that a row times (the expert layer's five together), each with its dispatch
    timed = sum(count for name, (count, _) in ops.items() if name in measured or name in
                EXPERT_OPS)  # fmt: skip
    # the routed experts' layer as one op, as the measured row times it
    layer = [ops.pop(name) for name in EXPERT_OPS]
    ops[EXPERT_OPS[1]] = (layer[0][0], sum(us for _, us in layer))
    print(f"\n{MODEL} fp8 on {CHIP} TP{TP} (SGLang {VERSION} kernels, MoE {MOE_VERSION}): "
          f"{batch} decodes of "
          f"{context} keys; routed experts = {' + '.join(EXPERT_OPS)}; unscaled MoE row "
          f"{measured['routed experts, 8 of 256 unscaled']:.1f} us")  # fmt: skip
    ours, theirs = print_ops(ops, measured, 0.0, "sglang, overlapped")
    dispatch_us = load_chip(CHIP).overhead.per_op_s.value * 1e6 * timed
    print(f"  step: xpusim {ours / 1e3:.2f} ms; with the measured rows {theirs / 1e3:.2f} ms "
          f"(xpusim {ours / theirs:.3f}x); the dispatch of the {timed} ops a row times "
          f"{dispatch_us / 1e3:.2f} ms of xpusim's")  # fmt: skip
    return ours, theirs


def main() -> int:
    args = arguments(__doc__, None).parse_args()
    mirror = Mirror.of(args)
    for context in CONTEXTS:
        for batch in BATCHES:
            report(mirror, batch, context)
    return 0


if __name__ == "__main__":
    sys.exit(main())
