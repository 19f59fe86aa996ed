"""Prices gpt-oss-20b's serving step under trtllm-bench op by op: xpusim's cost of each op of
one iteration at the batch TensorRT-LLM's max-load run settles at on one H200 (the
perf-overview 1.x point trtllm-perfov10-gpt-oss-20b-h200-sxm-tp1-1024-1024), beside
aiconfigurator's measured TensorRT-LLM kernel time at the same shape (docs/validation.md
"gpt-oss under trtllm-bench, op by op"; issue #48). large_batch_step.py does the same for
Llama-2-70B's dense step; this adds the MoE layer and the sliding-window layers.

    python benchmarks/gpt_oss_step.py /path/to/aiconfigurator.git   # a bare mirror

Needs pyarrow (the `parquet` extra), git and xpusim on the path. It changes nothing.

The batch: trtllm-bench gives an MXFP4 checkpoint TensorRT-LLM's default max_batch_size,
2,048 (tensorrt_llm/bench/build/build.py: its tuning heuristic covers TUNED_QUANTS, NVFP4,
FP8, FP8 block scales and unquantized, not W4A16_MXFP4), and the KV cache holds that many
sequences of 2,048 tokens (the 12 windowed layers keep 128). DECODES is the mean batch
xpusim's own run of the point holds (serve's mean_batch, 2,006); each request prefills once
in its `gen` steps, so a step also prefills DECODES / GEN prompts, and the decodes attend
PROMPT + GEN / 2 keys on the mean.

Measured rows (aiconfigurator at COMMIT, one H200, CUDA graphs, BF16 activations):
- GEMMs (QKV, O, router, LM head): gemm_perf.parquet at 1.3.0rc20, bfloat16, interpolated
  as large_batch_step.gemm_rows does; the LM head's 201,088 columns are past the grid's
  65,536: the row at 65,536 times the columns' ratio (a GEMM's work is linear in N).
- The MoE layer: moe_perf.parquet at 1.3.0rc10, w4a16_mxfp4 (MXFP4 weights, BF16
  activations: Hopper has no FP4 tensor cores), 32 experts, top-4, hidden and
  intermediate 2,880, one rank; balanced routing and the collector's power law (alpha
  1.2), linear in tokens. Its `moe.forward` holds the top-k routing, both expert GEMMs with
  the SwiGLU and the finalize: xpusim's router_topk, gate_up, silu_mul, down and combine.
- Decode attention: generation_attention_perf.parquet at 1.3.0rc20, BF16 cache (Hopper
  runs gpt-oss's cache in BF16: the perf overview's llm_options "Hopper: use auto"), 64
  heads, 8 KV heads of 64; the full layers window_size 0, the sliding ones 128, linear in
  sequences and in keys, a corner past the collector's total filled as large_batch_step
  does (keys_ratio).
- Context attention: context_attention_perf.parquet at 1.3.0rc20, BF16, the same heads,
  window_size 0 and 128, linear in prompts.
Norms, RoPE, the sampler and the host's per-iteration time have no measured row: their
xpusim figures stand in both sums.
"""

from __future__ import annotations

import sys

from aiconfigurator_data import Mirror, arguments
from large_batch_step import Engine, Rows, attention_rows, columns, gemm_rows, keys_ratio, print_ops

MODEL, CHIP, CHIP_DIR = "gpt-oss-20b", "h200-sxm", "h200_sxm"
HIDDEN, HEADS, KV_HEADS, HEAD_DIM, VOCAB = 2880, 64, 8, 64, 201088
EXPERTS, TOPK, WINDOW = 32, 4, 128
PROMPT, GEN, DECODES = 1024, 1024, 2006
MEASURED_TOKENS_PER_S = 13890  # the point's output tokens/s (published.json)
ATTENTION_VERSION, MOE_VERSION = "1.3.0rc20", "1.3.0rc10"
BF16_KERNELS = Engine("trtllm", ATTENTION_VERSION, "bf16", "bf16", "bfloat16", "bfloat16",
                      "bfloat16")  # fmt: skip
"""TensorRT-LLM's BF16 GEMM rows at the attention tables' version (the dense projections)."""
EXPERT_OPS = ("router_topk", "experts.gate_up", "experts.silu_mul", "experts.down", "combine")


def _moe_rows(mirror: Mirror, distribution: str) -> Rows:
    d = columns(mirror, f"{CHIP_DIR}/moe/trtllm/{MOE_VERSION}/moe_perf.parquet")
    keep = ((d["moe_dtype"] == "w4a16_mxfp4") & (d["hidden_size"] == HIDDEN)
            & (d["num_experts"] == EXPERTS) & (d["topk"] == TOPK) & (d["moe_tp_size"] == 1)
            & (d["moe_ep_size"] == 1) & (d["distribution"] == distribution)
            & (d["kernel_source"] == "moe_torch_flow"))  # fmt: skip
    return Rows({(n,): t * 1e3 for n, t in zip(d["num_tokens"][keep], d["latency"][keep],
                                               strict=True)})  # fmt: skip


def _attention_rows(mirror: Mirror, name: str, window: int, length: str) -> Rows:
    d = columns(mirror, f"{CHIP_DIR}/attention/trtllm/{ATTENTION_VERSION}/{name}")
    return attention_rows(d, length, heads=HEADS, kv_heads=KV_HEADS, head_dim=HEAD_DIM,
                          kv_dtype="bfloat16", window=window, attn_dtype="bfloat16")


def measured_us(mirror: Mirror) -> dict[str, float]:
    """Measured microseconds of each op with a row, at the step's shapes."""
    prompts = DECODES / GEN
    tokens = DECODES + prompts * PROMPT
    keys = PROMPT + GEN // 2
    gemm = gemm_rows(mirror, CHIP_DIR, BF16_KERNELS, "bfloat16")
    decode = {w: _attention_rows(mirror, "generation_attention_perf.parquet", w, "step")
              for w in (0, WINDOW)}  # fmt: skip
    context = {w: _attention_rows(mirror, "context_attention_perf.parquet", w, "isl")
               for w in (0, WINDOW)}  # fmt: skip
    return {
        "qkv": gemm.at((tokens, (HEADS + 2 * KV_HEADS) * HEAD_DIM, HIDDEN)),
        "o_proj": gemm.at((tokens, HIDDEN, HEADS * HEAD_DIM)),
        "router": gemm.at((tokens, EXPERTS, HIDDEN)),
        "lm_head": gemm.at((DECODES, VOCAB, HIDDEN)),  # past the grid: scaled by N (Gemms)
        "experts (balanced)": _moe_rows(mirror, "balanced").at((tokens,)),
        "experts (power law 1.2)": _moe_rows(mirror, "power_law_1.2").at((tokens,)),
        "decode attention, full": decode[0].at((DECODES, keys), keys_ratio),
        "decode attention, window": decode[WINDOW].at((DECODES, WINDOW - 1), keys_ratio),
        "context attention, full": context[0].at((prompts, PROMPT)),
        "context attention, window": context[WINDOW].at((prompts, PROMPT)),
    }


def xpusim_us() -> tuple[dict[str, tuple[int, float]], float]:
    """xpusim's ops of one step (count, microseconds each), as `run` costs them with the
    point's formats (BF16 compute, MXFP4 weights), and the engine's per-iteration host time
    (serving/engines.toml trtllm)."""
    import xpusim
    from xpusim.serving.engines import engine

    def ops(phase: str, batch: int, prompt: int) -> dict[str, tuple[int, float]]:
        r = xpusim.simulate(MODEL, CHIP, batch=batch, prompt=prompt, gen=2, precision="bf16",
                            weight_precision="mxfp4")  # fmt: skip
        return {o.name: (o.count, o.time_s * 1e6) for o in r.ops if o.phase == phase}

    prompts = DECODES / GEN
    tokens = round(DECODES + prompts * PROMPT)
    keys = PROMPT + GEN // 2
    at_tokens, at_decodes = ops("decode", tokens, keys), ops("decode", DECODES, keys)
    out = {name: at_tokens[f"layers.0.{name}"] for name in ("qkv", "o_proj", "router")}
    out["lm_head"] = at_decodes["lm_head"]
    out["sample"] = at_decodes["sample"]
    out["norms, rope"] = (1, sum(c * t for n, (c, t) in at_tokens.items()
                                 if "norm" in n or n.endswith("rope") or n == "embed"))
    layers = at_tokens["layers.0.experts.gate_up"][0]
    out["experts"] = (layers, sum(at_tokens[f"layers.0.{n}"][1] for n in EXPERT_OPS))
    windowed = [(c, t) for n, (c, t) in at_decodes.items()
                if n.endswith(".attention") and n != "layers.1.attention"]
    out["decode attention, full"] = at_decodes["layers.1.attention"]
    out["decode attention, window"] = (sum(c for c, _ in windowed), windowed[0][1])
    lo, f = int(prompts), prompts - int(prompts)  # linear in prompts, as the measured rows
    prefill = [ops("prefill", n, PROMPT) for n in (lo, lo + 1)]
    for label, name in (("full", "layers.1.attention"), ("window", "layers.0.attention")):
        count = out[f"decode attention, {label}"][0]
        out[f"context attention, {label}"] = (count, (1 - f) * prefill[0][name][1]
                                              + f * prefill[1][name][1])  # fmt: skip
    return out, engine("trtllm").per_iteration_s * 1e6


def main() -> int:
    mirror = Mirror.of(arguments(__doc__, None).parse_args())
    ops, host_us = xpusim_us()
    measured = measured_us(mirror)
    measured["experts"] = measured.pop("experts (balanced)")
    power_law = measured.pop("experts (power law 1.2)")
    engine_ms = 1e3 * DECODES / MEASURED_TOKENS_PER_S
    print(f"{CHIP} TP1 {MODEL}: {DECODES} decodes of {PROMPT + GEN // 2} keys + "
          f"{DECODES / GEN:.2f} prompts of {PROMPT}; the engine's step at that batch "
          f"{engine_ms:.0f} ms ({MEASURED_TOKENS_PER_S} output tokens/s)")  # fmt: skip
    ours, theirs = print_ops(ops, measured, host_us)
    layers = ops["experts"][0]
    print(f"  experts under the power law 1.2: {power_law:.1f} us "
          f"({power_law / ops['experts'][1]:.2f}x xpusim's)")
    print(f"  step: xpusim {ours / 1e3:.1f} ms; with the measured rows {theirs / 1e3:.1f} ms "
          f"(power-law experts {(theirs + layers * (power_law - measured['experts'])) / 1e3:.1f}"
          f" ms); engine {engine_ms:.0f} ms")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
