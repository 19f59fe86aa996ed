"""Prices DeepSeek-R1's decode step on B200 op by op, NVFP4 beside FP8: xpusim's cost of each
op of one decode step under the InferenceX runs' engine settings, beside aiconfigurator's
measured kernel time of that engine at the same shape (docs/validation.md "DeepSeek-R1
NVFP4 on B200 at small batch, op by op"; issue #48). The runs it answers
(published.json inferencex-dsr1-b200-*) read NVFP4 faster than FP8 at one client (5.87
against 7.18 ms TPOT under SGLang), where xpusim had it slower.

    python benchmarks/b200_r1_step.py /path/to/aiconfigurator.git   # a bare mirror

Needs pyarrow (the `parquet` extra), git and xpusim on the path. It changes nothing.

SETUPS are the launches of inferencex-dsr1-b200-sglang-fp4-tp8-ep8-1k1k-c1 (SGLang 0.5.12,
--tp 8 --ep-size 8, --moe-runner-backend flashinfer_trtllm, --attention-backend trtllm_mla,
--enable-flashinfer-allreduce-fusion, FP8 cache), -sglang-fp8-tp8-1k1k-c1 (the same, EP 1,
block-FP8 checkpoint) and -trt-fp4-tp4-1k1k-c4 (TensorRT-LLM 1.3.0rc14, TP 4 with the
experts TP-split, moe_config backend TRTLLM). One decode step: BATCHES sequences, each one
new token over CONTEXT cached tokens, every layer's ops on one GPU. Measured rows
(aiconfigurator at COMMIT, b200_sxm, one GPU, CUDA graphs), interpolated linearly in each
dimension as large_batch_step.Rows does:
- The dense linears (fused qkv_a, q_b_proj, o_proj, the first three layers' gate_up and
  down): gemm_perf at the checkpoint's format (the FP4-V2 checkpoint keeps the attention
  projections but o_proj BF16, zoo deepseek-r1-0528-fp4-v2; FP8's are 128 x 128 block
  scaled), the router and the LM head bfloat16. SGLang 0.5.12's gemm rows are 0.5.14's
  (b200_sxm/gemm/sglang/0.5.12/reuse.yaml).
- q_absorb and v_absorb: mla_bmm_perf mla_gen_pre and mla_gen_post at the GPU's heads, BF16
  (SGLang dequantizes the absorbed kv_b_proj to BF16; the FP4-V2 checkpoint stores it BF16).
- MLA decode attention: generation_mla_perf at the GPU's heads, FP8 cache (both engines'
  rows are the trtllm-gen MLA kernel), linear in sequences and cached tokens (`step`).
- The routed experts: moe_perf NVFP4 or block-FP8 at DeepSeek's shape and the run's moe_tp
  x moe_ep, balanced logits (SGLang 0.5.14 sglang_flashinfer_trtllm_moe, TensorRT-LLM
  1.3.0rc10 moe_torch_flow_min_latency; FP8 through SGLang's flashinfer_trtllm too), against
  xpusim's router_topk, gate_up, silu_mul, down and combine together. The collector routes
  those logits through DeepSeek-V3's group-limited gate: the measured rank ran the pairs and
  experts cost/kernel_tables.gate_load counts (printed beside the busiest rank's that xpusim
  prices: a real gate spreads a token's 8 picks over 4 groups, where the harness's rank 0
  takes 5 of them at EP 8), so a row is the kernel at the harness's load, not the run's.
- The all-reduces: TensorRT-LLM 1.3.0rc20's custom_allreduce_perf (the kernels FlashInfer's
  fusion and TensorRT-LLM run) at the step's BF16 hidden state, message_size in elements.
Norms, RoPE, the sampler, the LM head's all-gather and the embedding have no measured row:
xpusim's figures stand in both sums. Every op with a measured row also pays xpusim's per-op
dispatch (`overhead.per_op_s`, 2 us) on top of its floor.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace

from aiconfigurator_data import Mirror, arguments
from large_batch_step import Engine, columns, gemm_rows, print_ops
from sglang_r1_step import (
    ALL_REDUCES,
    DENSE_INTER,
    EXPERT_OPS,
    EXPERTS,
    HEADS,
    HIDDEN,
    KV_LORA,
    MOE_INTER,
    NOPE,
    Q_LORA,
    ROPE,
    TOP_K,
    V_DIM,
    VOCAB,
    decode_ops,
    table_rows,
)

CHIP, CHIP_DIR, CONTEXT, BATCHES = "b200", "b200_sxm", 1024, (1, 4)
ALL_REDUCE = ("trtllm", "1.3.0rc20")  # the all-reduce rows' engine and version


@dataclass(frozen=True)
class Setup:
    """One run's engine settings and the rows that measure its kernels."""

    label: str
    model: str  # zoo id
    engine: Engine  # the gemm, MLA and BMM rows' engine and version; xpusim's formats
    weight_precision: str | None  # xpusim's
    attention_gemm: str  # gemm_dtype of qkv_a and q_b
    dense_gemm: str  # gemm_dtype of o_proj and the dense MLPs
    tp: int
    ep: int
    moe: tuple[str, str, str, str]  # (engine, version, kernel_source, moe_dtype) of its rows
    fusion: bool  # SGLang's --enable-flashinfer-allreduce-fusion


SGLANG = Engine("sglang", "0.5.14", "nvfp4", "fp8", "nvfp4", "bfloat16", "fp8")
SETUPS = (
    Setup("SGLang NVFP4 TP 8 EP 8", "deepseek-r1-0528-fp4-v2", SGLANG, None, "bfloat16", "nvfp4",
          8, 8, ("sglang", "0.5.14", "sglang_flashinfer_trtllm_moe", "nvfp4"), True),
    Setup("SGLang FP8 TP 8", "deepseek-r1-0528", replace(SGLANG, precision="fp8"), "fp8-block",
          "fp8_block", "fp8_block", 8, 1,
          ("sglang", "0.5.14", "sglang_flashinfer_trtllm_moe", "fp8_block"), True),
    Setup("TensorRT-LLM NVFP4 TP 4", "deepseek-r1-0528-fp4-v2",
          Engine("trtllm", "1.3.0rc20", "nvfp4", "fp8", "nvfp4", "bfloat16", "fp8"), None,
          "bfloat16", "nvfp4", 4, 1,
          ("trtllm", "1.3.0rc10", "moe_torch_flow_min_latency", "nvfp4"), False),
)  # fmt: skip


def xpusim_us(s: Setup, batch: int) -> dict[str, tuple[int, float]]:
    """xpusim's ops of one decode step under the setup's kernels, as `serve` stamps them
    (serving/run.py prepare): (count, microseconds each)."""
    import xpusim
    from xpusim.cost.collectives import FLASHINFER_ALLREDUCE
    from xpusim.scenarios.llm.inference import chosen_plan
    from xpusim.serving.engines import engine
    from xpusim.workloads.transformer import ALLREDUCE_NORM_DECODE

    cfg = xpusim.model(s.model)
    setup, cand = chosen_plan(cfg, xpusim.target(CHIP), {
        "chips": s.tp, "tp": s.tp, "ep": s.ep, "batch": batch, "prompt": CONTEXT, "gen": 2,
        "precision": s.engine.precision, "weight_precision": s.weight_precision,
        "kv_precision": s.engine.kv_precision, "moe_backend": "TRTLLM"})  # fmt: skip
    kernels = engine(s.engine.name).kernels_on("NVIDIA", cfg, s.ep, "TRTLLM")
    if s.fusion:
        kernels = (FLASHINFER_ALLREDUCE, *kernels, ALLREDUCE_NORM_DECODE)
    return decode_ops(cfg, setup, cand, kernels)


def measured_us(mirror: Mirror, s: Setup, batch: int) -> dict[str, float]:
    """Measured microseconds of each op with a row at the step's shapes; the routed
    experts' under EXPERT_OPS[1] (the layer whole)."""
    e, tp, heads = s.engine, s.tp, HEADS // s.tp
    base = f"{CHIP_DIR}/{{}}/{e.name}/{e.version}/{{}}.parquet"
    attn, dense = (gemm_rows(mirror, CHIP_DIR, e, d) for d in (s.attention_gemm, s.dense_gemm))
    wide = gemm_rows(mirror, CHIP_DIR, e, "bfloat16")
    bmm = columns(mirror, base.format("mla_bmm", "mla_bmm_perf"))
    bf16 = (bmm["num_heads"] == heads) & (bmm["bmm_dtype"] == "bfloat16")
    mla = columns(mirror, base.format("mla", "generation_mla_perf"))
    attention = table_rows(mla, (mla["num_heads"] == heads) & (mla["kv_cache_dtype"] == e.kv),
                      "batch_size", "step")  # fmt: skip
    name, version, kernel, dtype = s.moe
    moe = columns(mirror, f"{CHIP_DIR}/moe/{name}/{version}/moe_perf.parquet")
    layer = table_rows(moe, (moe["kernel_source"] == kernel) & (moe["moe_dtype"] == dtype)
                  & (moe["hidden_size"] == HIDDEN) & (moe["inter_size"] == MOE_INTER)
                  & (moe["num_experts"] == EXPERTS) & (moe["topk"] == TOP_K)
                  & (moe["moe_tp_size"] == (tp if s.ep == 1 else 1))
                  & (moe["moe_ep_size"] == s.ep) & (moe["distribution"] == "balanced"),
                  "num_tokens")  # fmt: skip
    comm = columns(mirror, f"{CHIP_DIR}/comm/{ALL_REDUCE[0]}/{ALL_REDUCE[1]}/"
                           "custom_allreduce_perf.parquet")  # fmt: skip
    reduce = table_rows(comm, comm["num_gpus"] == tp, "message_size")
    return {
        "layers.0.qkv_a_proj": attn.at((batch, Q_LORA + KV_LORA + ROPE, HIDDEN)),
        "layers.0.q_b_proj": attn.at((batch, HEADS * (NOPE + ROPE) // tp, Q_LORA)),
        "layers.0.q_absorb": table_rows(bmm, bf16 & (bmm["op_name"] == "mla_gen_pre"),
                                   "num_tokens").at((batch,)),
        "layers.0.attention": attention.at((batch, CONTEXT - 1)),
        "layers.0.v_absorb": table_rows(bmm, bf16 & (bmm["op_name"] == "mla_gen_post"),
                                   "num_tokens").at((batch,)),
        "layers.0.o_proj": dense.at((batch, HIDDEN, HEADS * V_DIM // tp)),
        "layers.0.gate_up": dense.at((batch, 2 * DENSE_INTER // tp, HIDDEN)),
        "layers.0.down": dense.at((batch, HIDDEN, DENSE_INTER // tp)),
        "layers.3.router": wide.at((batch, EXPERTS, HIDDEN)),
        EXPERT_OPS[1]: layer.at((batch,)),
        "lm_head": wide.at((batch, VOCAB // tp, HIDDEN)),
        **dict.fromkeys(ALL_REDUCES, reduce.at((batch * HIDDEN,))),
    }


def report(mirror: Mirror, s: Setup, batch: int) -> tuple[float, float]:
    """Prints one step's ops; returns its two sums (microseconds)."""
    from xpusim.compiler.moe_expert import busiest_rank_pairs
    from xpusim.cost.kernel_tables import gate_load
    from xpusim.workloads.transformer_config import expected_active_experts

    ops = xpusim_us(s, batch)
    layer = [name for name in EXPERT_OPS if name in ops]  # TensorRT-LLM's fused MoE: no
    # router_topk, silu_mul
    ops[EXPERT_OPS[1]] = (ops[EXPERT_OPS[1]][0], sum(ops.pop(name)[1] for name in layer))
    pairs = busiest_rank_pairs(batch, TOP_K, EXPERTS, s.ep, 1.01) if s.ep > 1 \
        else batch * TOP_K  # DeepSeek's routing_alpha (compiler/moe_expert.py)
    experts = expected_active_experts(pairs, EXPERTS // s.ep, 1) if s.ep > 1 \
        else expected_active_experts(batch, EXPERTS, TOP_K)
    row_pairs, row_experts = gate_load(batch, EXPERTS, TOP_K, s.ep)
    print(f"\n{s.model} on {s.tp} {CHIP}, {s.label} ({s.engine.name} {s.engine.version} "
          f"kernels, MoE {s.moe[0]} {s.moe[1]}): {batch} decodes of {CONTEXT} keys; routed "
          f"experts = {' + '.join(layer)}; xpusim's busiest rank {pairs} pairs over "
          f"{experts} experts, the row's rank {row_pairs} over {row_experts}")  # fmt: skip
    ours, theirs = print_ops(ops, measured_us(mirror, s, batch), 0.0, f"{s.engine.name}")
    print(f"  step: xpusim {ours / 1e3:.2f} ms; with the measured rows {theirs / 1e3:.2f} ms "
          f"(xpusim {ours / theirs:.3f}x)")  # fmt: skip
    return ours, theirs


def main() -> int:
    args = arguments(__doc__, None).parse_args()
    mirror = Mirror.of(args)
    for s in SETUPS:
        for batch in BATCHES:
            report(mirror, s, batch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
