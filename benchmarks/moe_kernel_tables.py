"""Regenerates src/xpusim/cost/kernel_tables/moe/nvidia-trtllm.toml from aiconfigurator's
measured MoE kernel database (ai-dynamo/aiconfigurator, Apache-2.0).

    python benchmarks/moe_kernel_tables.py /path/to/aiconfigurator.git   # a bare mirror
    python benchmarks/moe_kernel_tables.py REPO --commit 095f58a5...       # another commit

Needs pyarrow (the `parquet` extra) and git; the project reads only the TOML it writes.

aiconfigurator's collector (collector/trtllm/collect_moe.py) times TensorRT-LLM's fused-MoE
module (`moe.forward`: routing, the two grouped GEMMs fc1 = gate_up with the activation
fused and fc2 = down, finalize) on one GPU standing for one rank of an EP x TP group: every
token of the step enters, the rank computes its E / ep local experts' pairs over an
intermediate width of inter / tp; CUDA graphs, 3 warm-ups, the mean of 6 runs. We keep:

- TensorRT-LLM only (the engine of the perf-overview points scored in docs/validation.md),
  one version per chip (VERSIONS);
- `balanced` routing only (collector/helper.py balanced_logits: every expert gets the same
  number of tokens), since xpusim adds its own routing imbalance (compiler/moe_expert.py);
- the throughput kernels (KERNELS) in the default backend's tables. For NVFP4 on SM100 the
  collector also times TensorRT-LLM's min-latency path (kernel_source
  moe_torch_flow_min_latency: moe_backend TRTLLM, the trtllm-gen kernels, which SGLang's
  `--moe-runner-backend flashinfer_trtllm` runs too), and that path routes through
  DeepSeek-V3's group-limited gate whatever the model (collect_moe.py: "FIXME: all use
  deepseek setting for now", n_group 8, topk_group 4), so its balanced logits
  (collector/helper.py balanced_logits: token i's k-th expert in the k-th block of 32, one
  in each of DeepSeek's 8 groups of 32) tie in every group, and the gate, breaking ties by
  index, keeps groups 0-3 and picks each token's 4 hot experts there and 4 tied ones, the
  lowest-numbered of the rest (experts 0-4). The measured rank (rank 0) runs what that
  gives it (cost/kernel_tables.py gate_load): at EP 8, 5 pairs a token, over 5 experts at
  one token and all 32 of its group from 32 tokens; at EP 4, 6 pairs a token; on one GPU
  or a TP-split rank, all 8 picks over the experts of 4 groups (128 of 256 from 32 tokens).
  SGLang's rows of the same kernels show it: 36.6, 37.0 and 36.5 us at one token at EP 8,
  16 and 32 (the same 5 experts on the rank), 25.3 at 64 (4), 19.6 at 128 (2). Read as
  balanced routing the rows of one GPU (moe_ep 1, moe_tp 1) come out up to 1.7x faster than
  streaming the weights balanced routing reads: not kept. Kept (MIN_LATENCY), the table
  marked `routing = "group-limited"` so that each row is counted at its rank's load:
  DeepSeek-V3/R1's own shape, whose gate this is, EP 4 and 8 and TP 4 (the recipe of
  TensorRT-LLM's TP 4 NVFP4 DeepSeek runs), 1-256 tokens (decode steps: the CUDA-graph
  batches of SGLang and TensorRT-LLM end at 256 here): 37 us a layer at one token on a
  B200 at EP 8 (its rank's 5 experts), where the CUTLASS rows take 60 and FP8's 46; SGLang
  0.5.14's flashinfer_trtllm NVFP4 MoE (b200_sxm/moe/sglang/0.5.14) measures 37, 84 and
  169 us at 1, 16 and 64 tokens, as these do (36.6, 84.0, 168.6 there; 42, 85, 164 at
  1.3.0rc20). They are kept because the alternative, the throughput kernels' rows, times
  another kernel than the one the engines launch (1.7x these at 64 tokens, EP 8: 283
  against 164 us). A TRTLLM table prices only the M its rows span (`window`,
  cost/kernel_tables.py) and the default backend's table the larger steps (prefill). A chip
  whose TensorRT-LLM data has no such rows (B300: CUTLASS's alone) takes SGLang's
  (SGLANG_TRTLLM): aiconfigurator's SGLang collector times the same trtllm-gen kernels
  through FlashInfer's trtllm_fp4_block_scale_moe (kernel_source
  sglang_flashinfer_trtllm_moe, SGLang's `--moe-runner-backend flashinfer_trtllm`), routed
  by the same group-limited gate and balanced logits (counted likewise), at the same
  splits and tokens; its
  two rows of each case (two models of DeepSeek's shape) are averaged;
- SGLang's own MoE under `--moe-runner-backend flashinfer_trtllm` (SGLANG_OWN), which the
  engine runs at every step size, prompt chunks included, where TensorRT-LLM switches to its
  throughput kernels past its min-latency batches: aiconfigurator's SGLang 0.5.14 rows of
  sglang_flashinfer_trtllm_moe on B200 and B300, block FP8 (trtllm_fp8_block_scale_moe) and
  NVFP4, DeepSeek-V3/R1's shape on TP-split ranks (moe_tp 4 and 8, moe_ep 1: the splits of
  InferenceX's SGLang TP launches at --ep-size 1), every token count (1-16,384), as the
  engine's own kernel (`kernel`, engines.toml sglang-flashinfer-trtllm-moe) and a window of
  those shapes. The same gate routes them (collector/sglang/collect_moe.py at e23be5a79, the
  commit that added these rows, "upgrade the SGLang collector to 0.5.14": lines 718-729
  build TopK with use_grouped_topk, num_expert_group, topk_group and a zero correction_bias,
  lines 742-746 feed it balanced_logits; collector/cases/models/DeepseekV3ForCausalLM_
  cases.yaml lines 34-35 and 57-58 set sglang_moe_num_expert_group 8, sglang_moe_topk_group
  4 for DeepSeek-V3 and DeepSeek-V3.1-NVFP4), so the rows are marked `routing =
  "group-limited"` and counted by gate_load like the windows above: a TP-split rank runs all
  8 picks a token, over the experts of groups 0-3 (8 at one token, 128 from 32 tokens). EP
  ranks are not kept (past 16 tokens the gate gives the measured rank up to twice its pairs,
  and the TRTLLM windows above price their decode batches);
- SGLang's own INT4 MoE on Hopper (SGLANG_OWN, sglang-marlin-moe): a compressed-tensors
  INT4 weight-only checkpoint (Kimi-K2-Thinking's and Kimi-K2.5's experts, groups of 32)
  runs through Marlin on SM90 (the collector: "SM90 auto resolves to Marlin"), timed by
  aiconfigurator at SGLang 0.5.14 on H100 and H200, Kimi-K2's shape (7168 x 2048, 384
  experts, top 8: one expert group, so balanced logits route it balanced), TP 4 and 8, every
  token count. SGLang's Triton fused MoE rows of block FP8 on the same chips
  (sglang_fused_moe_triton, DeepSeek's shape) are not kept: the collector's group-limited
  gate leaves its rows few experts at small batches (about 36 of 256 at 8 tokens, where
  uniform routing reaches 58), and scaled by the weights an op touches they price SGLang's
  decode MoE at 146 us a layer at 8 sequences on an H200, where InferenceX's measured step
  (11.7 ms at 8 clients, 192 us a layer for everything) leaves about 90 us for it; kept,
  they moved InferenceX's H200 SGLang TPOT without MTP from 1.15x to 1.31x (median of 9;
  docs/validation.md, twenty-fifth session). Whether that kernel's time follows the experts
  it touches at these sizes is not measured;
- the gated (SwiGLU) shapes of the zoo's MoE models (SHAPES);
- TP/EP splits SPLITS, and the token counts TOKENS, where the measured rank holds at
  least one token-expert pair (tokens x topk >= ep);
- vLLM's own MXFP4 MoE kernel on Hopper (VLLM_MXFP4), as an engine's kernel (`kernel`,
  cost/kernel_tables.py "An engine's own kernels"): vLLM 0.10-0.11 runs gpt-oss's MXFP4
  experts on an SM90 GPU through OpenAI's triton_kernels matmul_ogs with BF16 activations
  (model_executor/layers/quantization/mxfp4.py get_mxfp4_backend: Mxfp4Backend.TRITON
  where triton_kernels is installed and torch >= 2.8, as in the vllm-openai images;
  Marlin otherwise; FlashInfer's SM90 path only under VLLM_USE_FLASHINFER_MOE_MXFP4_BF16),
  no FP4 tensor cores: the weights are dequantized to BF16 in the kernel. aiconfigurator
  timed that kernel at vLLM 0.24.0 on an H100 and an H200 (kernel_source
  vllm_gptossmxfp4moe_triton_oaitritonmxfp4expertsmonolithic, the same triton_kernels
  path; no older vLLM's rows of it exist): gpt-oss-20b's and -120b's shapes, SPLITS, every
  token count it measured (1-16384, the decode batches between the powers of two too);
- vLLM's own MXFP4 MoE kernel on Blackwell (VLLM_MXFP4 again, a kernel of its own): on an
  SM100 GPU with FlashInfer (the vllm-openai images ship it) get_mxfp4_backend's default
  is Mxfp4Backend.SM100_FI_MXFP4_BF16, FlashInfer's trtllm-gen MXFP4 x BF16 fused MoE
  (trtllm_fp4_block_scale_moe over BF16 activations; MXFP8 activations only under
  VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8), timed by aiconfigurator at vLLM 0.24.0 on B200,
  B300 and GB200 (kernel_source vllm_gptossmxfp4moe_flashinfer_trtllm_mxfp4_bf16_
  trtllmmxfp4expertsmonolithic): at gpt-oss-120b's layer on one B200, 64 tokens, 382 us,
  where TensorRT-LLM's W4A16 rows (its CUTLASS path, which priced every engine's BF16 x
  MXFP4 experts there before) take 1,256.

Rows are [tokens, hidden, inter, topk, experts, tp, ep, microseconds], one table per chip and
MoE format (FORMATS: how the collector's moe_dtype names TensorRT-LLM's quantization, and the
compute and weight formats xpusim gives the same ops).
"""

from __future__ import annotations

import sys
from typing import NamedTuple

import numpy as np
from aiconfigurator_data import KERNEL_TABLES, Measured, Mirror, arguments, table_toml, write

OUT = KERNEL_TABLES / "moe/nvidia-trtllm.toml"

# aiconfigurator chip directory -> (xpusim catalog id, TensorRT-LLM version it was measured with)
VERSIONS = {
    "h100_sxm": ("h100-sxm", "1.3.0rc10"),
    "h200_sxm": ("h200-sxm", "1.3.0rc10"),
    "b200_sxm": ("b200", "1.3.0rc10"),
    "b300_sxm": ("b300", "1.3.0rc10"),
    "gb200": ("gb200", "1.3.0rc10"),
}
# Not kept: a100_sxm (TensorRT-LLM 1.0.0: power-law routing only, no balanced rows); gb300
# and the rest (no such chip in the catalog).
# moe_dtype -> (compute format, weight format as xpusim names them, what TensorRT-LLM runs)
FORMATS = {
    "bfloat16": ("bf16", "bf16", "BF16 weights and activations"),
    "fp8": ("fp8", "fp8", "FP8 per-tensor (QuantAlgo.FP8)"),
    "fp8_block": ("fp8", "fp8-block", "FP8 with 128 x 128 block scales (FP8_BLOCK_SCALES)"),
    "w4a16_mxfp4": ("bf16", "mxfp4", "MXFP4 weights, BF16 activations (W4A16_MXFP4)"),
    "w4a8_mxfp4_mxfp8": ("fp8", "mxfp4", "MXFP4 weights, MXFP8 activations (W4A8_MXFP4_MXFP8)"),
    "nvfp4": ("nvfp4", "nvfp4", "NVFP4 weights and activations (QuantAlgo.NVFP4: E2M1 with an "
              "FP8 scale per 16 elements), CUTLASS grouped GEMMs"),
    "int4_wo": ("bf16", "int4-g32", "INT4 weights in groups of 32 (compressed-tensors "
                "pack-quantized, Kimi-K2's checkpoint format), BF16 activations"),
}
# kernel_source of the rows kept (the docstring says why the NVFP4 min-latency rows are not)
KERNELS = {"moe_torch_flow_cutlass", "moe_torch_flow", "deepgemm"}
# The TRTLLM backend's NVFP4 rows kept (the docstring says why): kernel_source, the shape
# whose group-limited gate the collector routes by, the moe_ep splits and the token counts
MIN_LATENCY = ("moe_torch_flow_min_latency", (7168, 2048, 256, 8),
               {(1, 4), (1, 8), (4, 1)}, {1, 2, 4, 8, 16, 32, 64, 128, 256})
# (hidden, inter, experts, topk) of the zoo's gated MoE models that the database measured
# chips without TensorRT-LLM's min-latency rows -> the SGLang version whose
# sglang_flashinfer_trtllm_moe NVFP4 rows stand for them (the docstring says why)
SGLANG_TRTLLM = {"b300_sxm": "0.5.14"}
SGLANG_KERNEL = "sglang_flashinfer_trtllm_moe"


class SglangOwn(NamedTuple):
    """One of SGLang's own MoE kernels kept (the docstring says why each)."""

    kernel: str  # the engines.toml kernel name it prices
    source: str  # the collector's kernel_source
    tag: str  # its tables' name part
    backend: str | None  # the MoE backend it runs under (None: the default runner)
    formats: tuple[str, ...]  # moe_dtype of the tables written
    shape: tuple[int, int, int, int]  # (hidden, inter, experts, topk) kept
    model: str  # whose shape that is
    routing: str  # the harness's routing of that shape's rows
    what: str  # what it runs, for the table's conditions


_FLASHINFER_TRTLLM = SglangOwn(
    "sglang-flashinfer-trtllm-moe", SGLANG_KERNEL, "trtllm-tp", "TRTLLM", ("fp8_block", "nvfp4"),
    MIN_LATENCY[1], "DeepSeek-V3/R1", "group-limited",
    "fused MoE through FlashInfer's {entry} (--moe-runner-backend flashinfer_trtllm: routing, "
    "the trtllm-gen grouped GEMMs, finalize)")
_MARLIN = SglangOwn(
    "sglang-marlin-moe", "sglang_marlin_moe", "marlin-tp", None, ("int4_wo",),
    (7168, 2048, 384, 8), "Kimi-K2", "balanced",
    "fused MoE of INT4 weight-only experts through the Marlin kernels "
    "(CompressedTensorsWNA16MoE: routing, the two grouped W4A16 GEMMs, the weighted sum)")
# per chip directory, the SGLang version measured and its own kernels kept
SGLANG_OWN = {"b200_sxm": ("0.5.14", (_FLASHINFER_TRTLLM,)),
              "b300_sxm": ("0.5.14", (_FLASHINFER_TRTLLM,)),
              "h100_sxm": ("0.5.14", (_MARLIN,)),
              "h200_sxm": ("0.5.14", (_MARLIN,))}
SGLANG_OWN_SPLITS = {(4, 1), (8, 1)}  # (moe_tp, moe_ep)
SHAPES = {
    (2048, 768, 128, 8): "Qwen3-30B-A3B",
    (2880, 2880, 32, 4): "gpt-oss-20b",
    (2880, 2880, 128, 4): "gpt-oss-120b",
    (4096, 1536, 128, 8): "Qwen3-235B-A22B",
    (4096, 14336, 8, 2): "Mixtral-8x7B",
    (7168, 2048, 256, 8): "DeepSeek-V3/R1",
}
SPLITS = {(1, 1), (1, 4), (1, 8), (4, 1)}  # (moe_tp, moe_ep)
TOKENS = {1, 16, 64, 256, 1024, 2048, 4096, 16384}


# chip directory -> (vLLM version, kernel_source, moe_dtype, the engines.toml kernel name
# they price) of vLLM's MXFP4 MoE rows kept (the docstring says why), and what each kernel runs
_TRITON = ("0.24.0", "vllm_gptossmxfp4moe_triton_oaitritonmxfp4expertsmonolithic",
           "w4a16_mxfp4", "vllm-triton-mxfp4-moe")
_FLASHINFER = ("0.24.0",
               "vllm_gptossmxfp4moe_flashinfer_trtllm_mxfp4_bf16_trtllmmxfp4expertsmonolithic",
               "w4a16_mxfp4", "flashinfer-mxfp4-bf16-moe")
VLLM_MXFP4 = {"h100_sxm": _TRITON, "h200_sxm": _TRITON, "b200_sxm": _FLASHINFER,
              "b300_sxm": _FLASHINFER, "gb200": _FLASHINFER}
MARLIN = ("0.24.0", "vllm_compressedtensorsw4a4mxfp4moe_marlin_marlinexperts_situ_as_silu",
          (3584, 3072, 896, 16))
"""vLLM's Marlin MXFP4 MoE on Hopper (VLLM_MXFP4_USE_MARLIN=1): the version, kernel_source
and shape (hidden, inter, experts, topk) of the only Marlin MXFP4 rows aiconfigurator timed on
an H100 and an H200 (a compressed-tensors MXFP4 checkpoint, which vLLM runs through the same
MarlinExperts on SM90), from which marlin_table takes Marlin's compute rate."""
MARLIN_SPLITS = ((1, 1), (2, 1), (4, 1), (8, 1))
"""(moe_tp, moe_ep) of the Marlin rows: vLLM's experts split over TP alone, as the InferenceMAX
launches that set VLLM_MXFP4_USE_MARLIN ran them (TP 1-8, no --enable-expert-parallel)."""
MARLIN_COMPUTE_FROM = 4096
"""Tokens from which the Marlin rows of MARLIN's shape are compute bound: their 896 experts'
15.7 GB of MXFP4 weights stream in 4.7 ms on an H100 at one rank, and from 4,096 tokens (73
tokens an expert) their time grows with the tokens at 150-230 TFLOP/s (28.9 ms at 4,096, 75.4
at 16,384), where below it the time follows the weights (5.8 ms from 64 to 384 tokens)."""
VLLM_KERNELS = {
    "vllm-triton-mxfp4-moe": "OpenAI's triton_kernels matmul_ogs (routing, gate_up + SwiGLU, "
                             "down, the weights dequantized to BF16 in the kernel)",
    "flashinfer-mxfp4-bf16-moe": "FlashInfer's trtllm-gen MXFP4 x BF16 kernels "
                                 "(Mxfp4Backend.SM100_FI_MXFP4_BF16: routing, gate_up + "
                                 "SwiGLU, down on FP4 tensor cores)",
}

TRTLLM_GEN = ("NVFP4 weights and activations, moe_backend TRTLLM (trtllm-gen kernels, "
              "min-latency mode), routed by DeepSeek-V3's group-limited gate (n_group 8, "
              "topk_group 4), each row counted at the pairs and experts its rank ran "
              "(cost/kernel_tables.py gate_load); EP 4 and 8, 1-256 tokens "
              "(benchmarks/moe_kernel_tables.py)")
TP_SPLIT = "; TP 4 (EP 1) too"



def table_text(chip_dir: str, moe_dtype: str, rows: list[list], measured: Measured,
               trtllm: bool = False) -> str:  # fmt: skip
    """The table of the default backend's rows of one format, or of the TRTLLM backend's
    (MIN_LATENCY)."""
    chip_id, version = VERSIONS[chip_dir]
    dtype, weight, what = FORMATS[moe_dtype]
    models = sorted({SHAPES[(r[1], r[2], r[4], r[3])] for r in rows})
    return table_toml(
        f'aiconfigurator-trtllm-moe-{moe_dtype.replace("_", "-")}{"-trtllm" * trtllm}-{chip_id}',
        "moe", dtype, weight, chip_id, version,
        f"moe_dtype {moe_dtype}, {MIN_LATENCY[0] + ', ' if trtllm else ''}balanced routing",
        measured,
        f"{chip_id}, TensorRT-LLM {version} PyTorch fused MoE "
        f"(moe.forward: routing, fc1 gate_up + SwiGLU, fc2 down, finalize), "
        f"{TRTLLM_GEN + TP_SPLIT if trtllm else what}; one GPU as one rank of the TP x EP "
        f"group, all tokens entering; CUDA graphs, mean of 6 runs "
        f"(collector/trtllm/collect_moe.py); "
        f'shapes of {", ".join(models)}', rows,
        backend="TRTLLM" if trtllm else None, window=trtllm,
        routing="group-limited" if trtllm else None)  # fmt: skip


def sglang_table(chip_dir: str, mirror: Mirror) -> str:
    """The TRTLLM backend's NVFP4 table of a chip from SGLang's rows of the same kernels
    (SGLANG_TRTLLM): DeepSeek-V3/R1's shape, MIN_LATENCY's splits and tokens, each case's
    rows averaged."""
    chip_id = VERSIONS[chip_dir][0]
    version = SGLANG_TRTLLM[chip_dir]
    measured = mirror.read(f"{chip_dir}/moe/sglang/{version}/moe_perf.parquet")
    data = measured.columns
    found: dict[tuple, list[float]] = {}
    for i in range(len(data["latency"])):
        shape = (data["hidden_size"][i], data["inter_size"][i], data["num_experts"][i],
                 data["topk"][i])  # fmt: skip
        if (data["kernel_source"][i], data["moe_dtype"][i], shape, data["distribution"][i],
                data["moe_tp_size"][i]) != (SGLANG_KERNEL, "nvfp4", MIN_LATENCY[1],
                                            "balanced", 1) \
                or (1, data["moe_ep_size"][i]) not in MIN_LATENCY[2] \
                or data["num_tokens"][i] not in MIN_LATENCY[3]:  # fmt: skip
            continue
        key = (data["num_tokens"][i], shape[0], shape[1], shape[3], shape[2], 1,
               data["moe_ep_size"][i])  # fmt: skip
        found.setdefault(key, []).append(data["latency"][i] * 1e3)
    rows = [[*key, sum(us) / len(us)] for key, us in sorted(found.items(), key=lambda kv: (
        kv[0][1:], kv[0][0]))]  # fmt: skip
    return table_toml(
        f"aiconfigurator-sglang-moe-nvfp4-trtllm-{chip_id}", "moe", "nvfp4", "nvfp4", chip_id,
        version, f"moe_dtype nvfp4, {SGLANG_KERNEL}, balanced routing", measured,
        f"{chip_id}, SGLang {version} fused MoE through FlashInfer's trtllm_fp4_block_scale_moe "
        f"(--moe-runner-backend flashinfer_trtllm: routing, the trtllm-gen grouped GEMMs, "
        f"finalize), {TRTLLM_GEN}; one GPU as one rank of the EP group, all tokens entering; "
        f"CUDA graphs (collector/sglang/collect_moe.py); the two rows of each case averaged; "
        f"shape of DeepSeek-V3/R1", rows, engine=("sglang", "SGLang"), backend="TRTLLM",
        window=True, routing="group-limited")  # fmt: skip


def sglang_own_table(chip_dir: str, own: SglangOwn, moe_dtype: str, mirror: Mirror) -> str:
    """One of SGLang's own MoE kernels of `moe_dtype` on a chip (SGLANG_OWN): its shape on a
    TP-split rank (SGLANG_OWN_SPLITS), every token count measured, each case's rows averaged,
    as the engine's kernel it names; a window, so that an op of another split (an EP rank,
    whose rows the group-limited gate makes upper bounds past 16 tokens) keeps the tables it
    took before. Rows of DeepSeek-V3/R1's shape were routed by its group-limited gate
    (collector/sglang/collect_moe.py at e23be5a79 lines 718-729: TopK use_grouped_topk,
    n_group 8, topk_group 4, zero correction bias, over balanced_logits), counted by
    cost/kernel_tables.py gate_load (`routing`); Kimi-K2's (one expert group) by its
    balanced logits alone."""
    chip_id = VERSIONS[chip_dir][0]
    version = SGLANG_OWN[chip_dir][0]
    measured = mirror.read(f"{chip_dir}/moe/sglang/{version}/moe_perf.parquet")
    found: dict[tuple, list[float]] = {}
    for r in measured.records():
        shape = (r["hidden_size"], r["inter_size"], r["num_experts"], r["topk"])
        split = (r["moe_tp_size"], r["moe_ep_size"])
        if (r["kernel_source"], r["moe_dtype"], shape, r["distribution"]) == (
                own.source, moe_dtype, own.shape, "balanced") \
                and split in SGLANG_OWN_SPLITS:  # fmt: skip
            key = (r["num_tokens"], shape[0], shape[1], shape[3], shape[2], *split)
            found.setdefault(key, []).append(r["latency"] * 1e3)
    rows = [[*key, sum(us) / len(us)] for key, us in sorted(found.items(), key=lambda kv: (
        kv[0][1:], kv[0][0]))]  # fmt: skip
    dtype, weight, fmt = FORMATS[moe_dtype]
    entry = "trtllm_fp8_block_scale_moe" if moe_dtype == "fp8_block" else \
        "trtllm_fp4_block_scale_moe"
    gate = ("routed by DeepSeek-V3's group-limited gate (n_group 8, topk_group 4; "
            "collector/sglang/collect_moe.py TopK use_grouped_topk, zero correction bias): on "
            "these TP-split ranks (TP 4 and 8, EP 1) all 8 picks a token, over the experts of the "
            "gate's 4 groups (cost/kernel_tables.py gate_load: 8 at one token, 128 from 32)"
            if own.routing == "group-limited" else "balanced routing (every expert the same "
            "number of tokens)")  # fmt: skip
    return table_toml(
        f"aiconfigurator-sglang-moe-{moe_dtype.replace('_', '-')}-{own.tag}-{chip_id}", "moe",
        dtype, weight, chip_id, version,
        f"moe_dtype {moe_dtype}, {own.source}, balanced routing, moe_ep_size 1", measured,
        f"{chip_id}, SGLang {version} {own.what.format(entry=entry)}, {fmt.split(' (')[0]}, "
        f"{gate}; one GPU as one rank of the TP group, all tokens entering; CUDA graphs; the "
        f"rows of each case averaged; shape of {own.model}; every token count measured, the "
        f"engine running this kernel at every step size",
        rows, engine=("sglang", "SGLang"), backend=own.backend, window=True,
        kernel=own.kernel, routing=None if own.routing == "balanced" else own.routing)  # fmt: skip


def vllm_table(chip_dir: str, mirror: Mirror) -> str:
    """vLLM's MXFP4 MoE kernel on a chip (VLLM_MXFP4): balanced rows of SHAPES and SPLITS,
    every token count, as the engine's own kernel it names."""
    chip_id = VERSIONS[chip_dir][0]
    version, kernel_source, moe_dtype, kernel = VLLM_MXFP4[chip_dir]
    measured = mirror.read(f"{chip_dir}/moe/vllm/{version}/moe_perf.parquet")
    found = {}
    for r in measured.records():
        shape = (r["hidden_size"], r["inter_size"], r["num_experts"], r["topk"])
        split = (r["moe_tp_size"], r["moe_ep_size"])
        if (r["kernel_source"], r["moe_dtype"], r["distribution"]) == (
                kernel_source, moe_dtype, "balanced") and shape in SHAPES \
                and split in SPLITS and r["num_tokens"] * shape[3] >= split[1]:  # fmt: skip
            key = (r["num_tokens"], shape[0], shape[1], shape[3], shape[2], *split)
            found[key] = r["latency"] * 1e3
    rows = [[*key, us] for key, us in sorted(found.items(), key=lambda kv: (
        kv[0][1:], kv[0][0]))]  # fmt: skip
    models = sorted({SHAPES[(r[1], r[2], r[4], r[3])] for r in rows})
    dtype, weight, _ = FORMATS[moe_dtype]
    return table_toml(
        f"aiconfigurator-vllm-moe-{moe_dtype.replace('_', '-')}-{chip_id}", "moe", dtype,
        weight, chip_id, version, f"moe_dtype {moe_dtype}, {kernel_source}, balanced routing",
        measured,
        f"{chip_id}, vLLM {version} fused MoE of gpt-oss's MXFP4 experts through "
        f"{VLLM_KERNELS[kernel]}, BF16 activations; one GPU as one rank of the TP x EP group, "
        f"all tokens entering (collector/vllm/collect_moe.py); shapes of {', '.join(models)}",
        rows, engine=("vllm", "vLLM"), kernel=kernel)  # fmt: skip


def expert_flops(tokens: int, hidden: int, inter: int, topk: int, tp: int) -> float:
    """A MoE layer's two expert GEMMs on one rank: gate_up (hidden x 2 inter / tp) and down
    (inter / tp x hidden) over every token-expert pair."""
    return 2 * tokens * topk * 3 * hidden * inter / tp


def marlin_rate(chip_dir: str, mirror: Mirror) -> dict[tuple[int, int], float]:
    """Marlin's compute rate (FLOP/s) on a chip, per (moe_tp, moe_ep) of MARLIN_SPLITS: the
    median over MARLIN's balanced rows from MARLIN_COMPUTE_FROM tokens of the two expert GEMMs'
    FLOPs (expert_flops) over the measured time."""
    version, kernel_source, (hidden, inter, experts, topk) = MARLIN
    rates: dict[tuple[int, int], list[float]] = {}
    for r in mirror.read(f"{chip_dir}/moe/vllm/{version}/moe_perf.parquet").records():
        split = (r["moe_tp_size"], r["moe_ep_size"])
        if (r["kernel_source"], r["distribution"], (r["hidden_size"], r["inter_size"],
                r["num_experts"], r["topk"])) == (kernel_source, "balanced",
                (hidden, inter, experts, topk)) and split in MARLIN_SPLITS \
                and r["num_tokens"] >= MARLIN_COMPUTE_FROM:  # fmt: skip
            flops = expert_flops(r["num_tokens"], hidden, inter, topk, split[0])
            rates.setdefault(split, []).append(flops / (r["latency"] * 1e-3))
    return {split: float(np.median(found)) for split, found in rates.items()}


def marlin_table(chip_dir: str, mirror: Mirror) -> str:
    """vLLM's Marlin MXFP4 MoE at gpt-oss's shapes on a Hopper chip, backend MARLIN: rows
    derived, not measured, as no one timed Marlin at those shapes. Each row is the Triton
    kernel's measured row of the same tokens, shape and split (VLLM_MXFP4), or the two expert
    GEMMs' FLOPs at Marlin's measured compute rate on that chip and split (marlin_rate),
    whichever is longer: Marlin streams the weights as fast as Triton (at 16-128 token-expert
    pairs, where both are bound by the experts' bytes, Marlin's rows of MARLIN's shape reach
    0.51-0.76 of the H100's bandwidth roofline and Triton's of gpt-oss-120b's 0.52-0.74), and
    computes at its own rate, about 0.2 of the BF16 peak where Triton reaches 0.55 (Marlin's
    mma.sync tiles, Ampere's, against Triton's Hopper ones)."""
    chip_id = VERSIONS[chip_dir][0]
    version, kernel_source, moe_dtype, _ = VLLM_MXFP4[chip_dir]
    rate = marlin_rate(chip_dir, mirror)
    measured = mirror.read(f"{chip_dir}/moe/vllm/{version}/moe_perf.parquet")
    rows = []
    for r in measured.records():
        shape = (r["hidden_size"], r["inter_size"], r["num_experts"], r["topk"])
        split = (r["moe_tp_size"], r["moe_ep_size"])
        if (r["kernel_source"], r["moe_dtype"], r["distribution"]) == (
                kernel_source, moe_dtype, "balanced") and shape in SHAPES \
                and split in rate:  # fmt: skip
            flops = expert_flops(r["num_tokens"], shape[0], shape[1], shape[3], split[0])
            us = max(r["latency"] * 1e3, flops / rate[split] * 1e6)
            rows.append([r["num_tokens"], shape[0], shape[1], shape[3], shape[2], *split, us])
    rows.sort(key=lambda row: (row[1:-1], row[0]))
    marlin_shape = ", ".join(map(str, MARLIN[2]))
    rates = "; ".join(f"TP {tp}: {rate[(tp, ep)] / 1e12:.0f}" for tp, ep in sorted(rate))
    return table_toml(
        f"derived-vllm-moe-w4a16-mxfp4-marlin-{chip_id}", "moe", "bf16", "mxfp4", chip_id,
        version, f"moe_dtype w4a16_mxfp4, {kernel_source} and {MARLIN[1]}, balanced routing",
        measured,
        f"{chip_id}, vLLM {version} fused MoE of gpt-oss's MXFP4 experts through Marlin "
        f"(VLLM_MXFP4_USE_MARLIN=1: MarlinExperts, the weights dequantized to BF16 in the "
        f"kernel, BF16 activations). DERIVED, NOT MEASURED at these shapes: each row is the "
        f"longer of the Triton kernel's measured row ({kernel_source}) and the two expert "
        f"GEMMs' FLOPs at Marlin's compute rate, the median TFLOP/s of Marlin's rows of "
        f"(hidden, inter, experts, topk) = ({marlin_shape}) from {MARLIN_COMPUTE_FROM} tokens "
        f"on this chip ({rates}); benchmarks/moe_kernel_tables.py marlin_table says why",
        rows, engine=("vllm", "vLLM"), backend="MARLIN", window=True,
        extra={"derived": True})  # fmt: skip


def main() -> int:
    args = arguments(__doc__, OUT).parse_args()
    mirror = Mirror.of(args)
    header = (
        "# Measured MoE layer times of TensorRT-LLM (and SGLang's where it stands in or runs\n"
        "# its own; vLLM's own MXFP4 kernel) on NVIDIA\n"
        "# chips, from aiconfigurator's kernel database (Apache-2.0), written by\n"
        "# benchmarks/moe_kernel_tables.py (its\n"
        "# docstring says which rows are kept); do not edit by hand.\n"
        "# Rows: [tokens, hidden, inter, topk, experts, moe_tp, moe_ep, microseconds]: one MoE\n"
        "# layer on one rank (cost/kernel_tables.py converts each to the rank's token-expert\n"
        "# pairs and the roofline of its two expert GEMMs). Scope: the expert weights' format.\n"
        f"# Source commit {mirror.commit}.\n"
    )
    tables = []
    for chip_dir, (_, version) in VERSIONS.items():
        measured = mirror.read(f"{chip_dir}/moe/trtllm/{version}/moe_perf.parquet")
        data = measured.columns
        by_dtype: dict[str, dict[tuple, float]] = {}
        for i in range(len(data["latency"])):
            shape = (data["hidden_size"][i], data["inter_size"][i], data["num_experts"][i],
                     data["topk"][i])  # fmt: skip
            split = (data["moe_tp_size"][i], data["moe_ep_size"][i])
            tokens = data["num_tokens"][i]
            trtllm = (data["kernel_source"][i], shape, data["moe_dtype"][i]) == (
                *MIN_LATENCY[:2], "nvfp4")  # fmt: skip
            if (data["distribution"][i] != "balanced" or shape not in SHAPES
                    or split not in SPLITS or tokens * shape[3] < split[1]
                    or data["moe_dtype"][i] not in FORMATS
                    or (trtllm and (split not in MIN_LATENCY[2]
                                    or tokens not in MIN_LATENCY[3]))
                    or not (trtllm or (tokens in TOKENS
                                       and data["kernel_source"][i] in KERNELS))):
                continue
            key = (tokens, shape[0], shape[1], shape[3], shape[2], *split)
            kept = by_dtype.setdefault(("trtllm" if trtllm else "", data["moe_dtype"][i]), {})
            kept[key] = data["latency"][i] * 1e3
        for backend, moe_dtype in (*(("", f) for f in FORMATS), ("trtllm", "nvfp4")):
            found = by_dtype.get((backend, moe_dtype))
            if found:
                rows = [[*key, us] for key, us in sorted(found.items(), key=lambda kv: (
                    kv[0][1:], kv[0][0]))]  # fmt: skip
                tables.append(table_text(chip_dir, moe_dtype, rows, measured, bool(backend)))
        if chip_dir in SGLANG_TRTLLM:
            tables.append(sglang_table(chip_dir, mirror))
        if chip_dir in SGLANG_OWN:
            tables += [sglang_own_table(chip_dir, own, f, mirror)
                       for own in SGLANG_OWN[chip_dir][1] for f in own.formats]
        if chip_dir in VLLM_MXFP4:
            tables.append(vllm_table(chip_dir, mirror))
        if VLLM_MXFP4.get(chip_dir) == _TRITON:
            tables.append(marlin_table(chip_dir, mirror))
    write(args.out, header, tables)
    return 0


if __name__ == "__main__":
    sys.exit(main())
