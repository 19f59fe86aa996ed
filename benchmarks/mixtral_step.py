"""Prices Mixtral-8x7B FP8's serving step under TensorRT-LLM op by op: xpusim's cost of each op
of one iteration at the batch MLPerf's harness ran on one H100 or H200 (TP1, one replica a
GPU), beside aiconfigurator's measured TensorRT-LLM kernel time at the same shape
(docs/validation.md "Mixtral-8x7B at large batch under TensorRT-LLM, op by op"; issue #48).
large_batch_step.py does the same for Llama-2-70B's dense step and gpt_oss_step.py for
gpt-oss's; this reads the dense rows as large_batch_step does and adds Mixtral's MoE layer.

    python benchmarks/mixtral_step.py /path/to/aiconfigurator.git   # a bare mirror

Needs pyarrow (the `parquet` extra), git and xpusim on the path. It changes nothing.

The engine (mlcommons/inference_results_v4.1 198fc467 closed/NVIDIA): TensorRT-LLM's C++
runtime at 2d234357c6e6 (Makefile.build TRTLLM_PUBLIC_HASH, "7/16/2024 Github main"),
engines built by code/mixtral-8x7b/tensorrt/builder.py (gpt_attention_plugin float16,
context_fmha, paged KV cache, no use_fp8_context_fmha: FP16 context attention over the FP8
cache) from a modelopt FP8 checkpoint (per-tensor FP8 weights and activations, FP8 KV
cache; the router and LM head 16-bit). configs/mixtral-8x7b: gpu_batch_size 3,072 (H200
Offline), 896 (H100), 1,200 (H200 Server); max_num_tokens 16,384 (8,192: H100 Offline,
H200 Server); kvcache_free_gpu_mem_frac 0.90 (Offline); use_graphs False.

The batch: a Server setup's is Little's law on the submission's own log (the points' rate
per replica x mean TPOT sequences decode; rate x TPOT prompts prefill each step), its step
the mean TPOT, as large_batch_step's Server setups; an Offline setup's is the batch the KV
cache holds, every request in flight (H100: the engine's 896 slots; H200: its 3,072 slots do
not fit the cache, so xpusim's own run's, 2,400: its output tokens/s per replica x mean ITL),
one prompt entering for every GEN tokens a sequence makes, the step the output tokens a step
over the replica's measured tokens/s. Decodes attend PROMPT + GEN // 2 keys on the mean.

Measured rows (aiconfigurator at COMMIT, one GPU, CUDA graphs), interpolated linearly in each
dimension as large_batch_step.Rows does:
- QKV and O projections, the LM head, decode and context attention: as
  large_batch_step.measured_us reads them (TensorRT-LLM 1.3.0rc20: per-tensor FP8 GEMMs less
  the dynamic-amax pass, the LM head BF16; the FP8 cache's generation kernel, 32 heads, 8 KV
  heads of 128; context attention BF16, standing for the engine's FP16). Decode attention
  past the collector's most sequences (2,048) is that row times the sequences' ratio: its
  rows are linear in sequences from 256 up (178 us at 2,048 x 63 keys, 92 at 1,024).
- The MoE layer: moe_perf.parquet at MOE_VERSION, FP8 per-tensor (QuantAlgo.FP8), hidden
  4,096, intermediate 14,336, 8 experts, top 2, one rank (moe_tp 1, moe_ep 1), linear in
  tokens; balanced routing in the sum, the collector's power law (alpha 1.2, aiconfigurator's
  MoE family default, sdk/models/moe.py) printed beside it. Its `moe.forward` holds the top-k
  routing, both expert GEMMs with the SwiGLU and the finalize: xpusim's EXPERT_OPS together.
Norms, RoPE, the router GEMM (8 columns, under the grid's narrowest), the sampler and the
host's per-iteration time have no measured row: xpusim's figures stand in both sums.
"""

from __future__ import annotations

import sys
from typing import Any

from aiconfigurator_data import Mirror, arguments
from large_batch_step import Engine, Model, Setup, columns, print_ops
from large_batch_step import measured_us as dense_measured_us
from sglang_r1_step import decode_ops, table_rows

MIXTRAL = Model("mixtral-8x7b", 4096, 32, 8, 128, 14336, 32000)
EXPERTS, TOP_K = 8, 2
PROMPT, GEN = 427, 145  # the points' mean input and output tokens (published.json)
MOE_VERSION = "1.3.0rc10"  # the version of xpusim's own moe table (kernel_tables/moe)
TRTLLM_FP8 = Engine("trtllm", "1.3.0rc20", "fp8", "fp8", "fp8", "bfloat16", "fp8")
"""Per-tensor FP8 GEMMs over an FP8 cache; context attention in 16 bits (the engine's
FP16 context FMHA: BF16's rows, one tensor-core rate)."""
EXPERT_OPS = ("layers.0.router_topk", "layers.0.experts.gate_up",
              "layers.0.experts.silu_mul", "layers.0.experts.down", "layers.0.combine")
EXPERTS_LABEL = "MoE layer (top-k, gate_up, SwiGLU, down, finalize)"


def _server(chip: str, chip_dir: str, rate_per_s: float, tpot_s: float, point: str) -> Setup:
    """A Server setup by Little's law on the log: rate x GEN x TPOT decodes, rate x TPOT
    prompts a step, the step the mean TPOT (rate: the replica's requests a second)."""
    return Setup(chip, chip_dir, 1, round(rate_per_s * GEN * tpot_s), PROMPT + GEN // 2,
                 rate_per_s * tpot_s, PROMPT, 1e3 * tpot_s, point, MIXTRAL, TRTLLM_FP8)


def _offline(chip: str, chip_dir: str, decodes: int, tokens_per_s: float, point: str) -> Setup:
    """An Offline setup: `decodes` in flight, one prompt a GEN tokens, the step the output
    tokens a step over the replica's measured `tokens_per_s`."""
    return Setup(chip, chip_dir, 1, decodes, PROMPT + GEN // 2, decodes / GEN, PROMPT,
                 1e3 * (decodes + decodes / GEN) / tokens_per_s, point, MIXTRAL, TRTLLM_FP8)


SETUPS = (
    _offline("h200-sxm", "h200_sxm", 2400, 59022.3 / 8,
             "mlperf41-nvidia-h200-sxm-141gbx8-trt-mixtral-8x7b-offline-tok"),
    _offline("h100-sxm", "h100_sxm", 896, 52415.9 / 8,
             "mlperf41-nvidia-dgx-h100-h100-sxm-80gbx8-trt-mixtral-8x7b-offline-tok"),
    _server("h200-sxm", "h200_sxm", 392.18 / 8, 0.138389,
            "mlperf41-nvidia-h200-sxm-141gbx8-trt-mixtral-8x7b-server-tpot-mean"),
    _server("h100-sxm", "h100_sxm", 348.37 / 8, 0.10259,
            "mlperf41-nvidia-dgx-h100-h100-sxm-80gbx8-trt-mixtral-8x7b-server-tpot-mean"),
    # MLPerf v5.1 (ASUSTeK, NVIDIA's 2025 harness and TensorRT-LLM): the same model and data
    _server("h200-sxm", "h200_sxm", 409.87 / 8, 0.16658,
            "mlperf51-asustek-esc-n8-h200x8-mixtral-8x7b-server-tpot-mean"),
)  # fmt: skip


def moe_rows(mirror: Mirror, chip_dir: str, distribution: str) -> Any:
    """Mixtral's FP8 MoE layer on one rank under `distribution`, keyed by tokens (us)."""
    d = columns(mirror, f"{chip_dir}/moe/trtllm/{MOE_VERSION}/moe_perf.parquet")
    return table_rows(d, (d["moe_dtype"] == "fp8") & (d["hidden_size"] == MIXTRAL.hidden)
                      & (d["inter_size"] == MIXTRAL.inter) & (d["num_experts"] == EXPERTS)
                      & (d["topk"] == TOP_K) & (d["moe_tp_size"] == 1) & (d["moe_ep_size"] == 1)
                      & (d["distribution"] == distribution), "num_tokens")  # fmt: skip


def measured_us(mirror: Mirror, s: Setup) -> dict[str, float]:
    """Measured microseconds of each op with a row: the dense ones as large_batch_step reads
    them (its gate_up and down, a dense model's, dropped), the MoE layer balanced."""
    ops = dense_measured_us(mirror, s)
    del ops["layers.0.gate_up"], ops["layers.0.down"]
    tokens = s.decodes + s.prompts * s.prompt
    ops[EXPERTS_LABEL] = moe_rows(mirror, s.chip_dir, "balanced").at((tokens,))
    return ops


def trtllm_step_us(chip: str, batch: int, keys: int) -> dict[str, tuple[int, float]]:
    """xpusim's decode step of `batch` sequences of `keys` cached tokens on one `chip` under
    TensorRT-LLM's kernels, as `serve --engine trtllm` stamps them (serving/run.py prepare):
    (count, microseconds each) by label; the routed experts' ops folded into one,
    EXPERTS_LABEL (TensorRT-LLM's fused MoE runs the top-k and the SwiGLU inside)."""
    import xpusim
    from xpusim.scenarios.llm.inference import chosen_plan
    from xpusim.serving.engines import engine

    cfg = xpusim.model(MIXTRAL.name)
    setup, cand = chosen_plan(cfg, xpusim.target(chip), {
        "chips": 1, "tp": 1, "batch": batch, "prompt": keys, "gen": 2,
        "precision": TRTLLM_FP8.precision, "kv_precision": TRTLLM_FP8.kv_precision})  # fmt: skip
    ops = decode_ops(cfg, setup, cand, engine("trtllm").kernels_on("NVIDIA", cfg, 1, ""))
    folded = [ops.pop(name) for name in EXPERT_OPS if name in ops]
    ops[EXPERTS_LABEL] = (folded[0][0], sum(us for _, us in folded))
    return ops


def xpusim_us(s: Setup) -> tuple[dict[str, tuple[int, float]], float]:
    """xpusim's ops of one step (count, microseconds each): the token ops at the step's
    tokens, decode attention, the LM head and the sampler at its decodes, context attention
    linear in prompts; and the engine's per-iteration host time (engines.toml trtllm)."""
    import xpusim
    from xpusim.serving.engines import engine

    def context_us(prompts: int) -> float:
        if not prompts:
            return 0.0
        r = xpusim.simulate(s.model.name, s.chip, batch=prompts, prompt=s.prompt, gen=2,
                            precision=s.engine.precision, kv_precision=s.engine.kv_precision)
        return next(o.time_s for o in r.ops
                    if o.phase == "prefill" and o.name == "layers.0.attention") * 1e6

    ops = trtllm_step_us(s.chip, round(s.decodes + s.prompts * s.prompt), s.keys)
    at_decodes = trtllm_step_us(s.chip, s.decodes, s.keys)
    layers = ops.pop("layers.0.attention")[0]
    ops["decode attention"] = (layers, at_decodes["layers.0.attention"][1])
    for name in ("lm_head", "sample"):
        ops[name] = at_decodes[name]
    lo, f = int(s.prompts), s.prompts - int(s.prompts)  # linear in prompts, as the rows
    ops["context attention"] = (layers, (1 - f) * context_us(lo) + f * context_us(lo + 1))
    return ops, engine("trtllm").per_iteration_s * 1e6


def report(mirror: Mirror, s: Setup) -> None:
    ops, host_us = xpusim_us(s)
    measured = measured_us(mirror, s)
    tokens = s.decodes + s.prompts * s.prompt
    power_law = moe_rows(mirror, s.chip_dir, "power_law_1.2").at((tokens,))
    print(f"\n{s.model.name} fp8 on {s.chip} TP1 ({s.engine.name} {s.engine.version} kernels, "
          f"MoE {MOE_VERSION}): {s.decodes} decodes of {s.keys} keys + {s.prompts:.2f} "
          f"prompts of {s.prompt} ({tokens:.0f} token rows); engine step "
          f"{s.engine_step_ms:.1f} ms ({s.point})")  # fmt: skip
    ours, theirs = print_ops(ops, measured, host_us, s.engine.name)
    expert_us = ops[EXPERTS_LABEL][1]
    print(f"  MoE layer under the power law 1.2: {power_law:.1f} us "
          f"({power_law / expert_us:.2f}x xpusim's)")
    missing_ms = s.engine_step_ms - theirs / 1e3
    print(f"  step: xpusim {ours / 1e3:.1f} ms; with the measured rows {theirs / 1e3:.1f} ms; "
          f"engine {s.engine_step_ms:.1f} ms (xpusim {ours / 1e3 / s.engine_step_ms:.2f}x, "
          f"measured kernels {theirs / 1e3 / s.engine_step_ms:.2f}x); outside the rows "
          f"{missing_ms:.1f} ms, {1e3 * missing_ms / s.decodes:.1f} us a sequence, "
          f"{1e3 * missing_ms / tokens:.1f} us a token row")  # fmt: skip


def main() -> int:
    mirror = Mirror.of(arguments(__doc__, None).parse_args())
    for s in SETUPS:
        report(mirror, s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
