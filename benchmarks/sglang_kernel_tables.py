"""Defines the tables of SGLang's own NVFP4 linear layer that gemm_kernel_tables.py files in
the Blackwell chips' gemm/<chip>.toml, from aiconfigurator's measured SGLang kernel database
(ai-dynamo/aiconfigurator, Apache-2.0): SGLang's own kernel, which prices only the ops of
runs whose engine lists it (serving/engines.toml `kernels`; cost/kernel_tables.py "An
engine's own kernels").

Why: an SGLang NVFP4 run's dense projections (DeepSeek-R1-FP4's o_proj, shared experts and
first three MLPs) ran at TensorRT-LLM's rows, which time TensorRT-LLM's `Linear` without its
autotuner (collector/trtllm/collect_gemm.py never enters `autotune()`, so its nvfp4_gemm runs
the default tactic; served TensorRT-LLM tunes at warm-up: llmapi/llm_args.py
enable_autotuner, default True, code index copy 1520735490). On a B200, at the 255 (N, K) of
N and K 1024-65536 that both collected, TensorRT-LLM 1.3.0rc10's rows are a median 1.41x
SGLang 0.5.9's at M 1, 1.42x at 16, 1.38x at 128 (SGLang 0.5.14's cute-dsl kernel: 1.58-1.67x;
vLLM 0.24's: 1.37-1.41x); DeepSeek-R1's o_proj at TP 8 (7168 x 2048), M 1: 9.60 us against
SGLang's 7.32.

Rows kept: SGLang VERSION (the release of the scored InferenceX images v0.5.9-cu130; their
v0.5.12 runs take it too, aiconfigurator reusing 0.5.14's rows for 0.5.12), gemm_dtype
nvfp4 (collector/sglang/collect_gemm.py: the BF16 input quantized to NVFP4 with FlashInfer's
fp4_quantize, then FlashInfer's mm_fp4 as SGLang's ModelOptFp4LinearMethod calls it; the
0.5.9 rows are the collector's legacy ones, whose kernel_source names no backend), at the
(N, K) of the NVFP4 projections of MODELS at TP 1, 2, 4, 8 (DeepSeek-R1's o_proj, shared
experts and dense MLPs: the zoo's shapes snapped to the measured grid) and at M_KEPT, each
row at most as fast as its roofline on the measuring chip's catalog figures
(cost/kernel_tables.py repeats the check on loading).

And SGLang's block-FP8 linear on Hopper (2026-12-06, sixteenth session, s5): a 128 x 128
block-scaled checkpoint's linear (Qwen3-*-FP8) runs SGLang's per-token-group activation
quantization, then DeepGEMM's gemm_nt_f8f8bf16 (collector/sglang/collect_gemm.py
'fp8_block': sglang_per_token_group_quant_fp8, group 128, then the DeepGEMM kernel, SGLang's
path on SM90 with its JIT DeepGEMM on, the default; the same calls at 293ca13 of 2026-06,
before the collector's 0.5.14 upgrade, so in the 0.5.9 rows, whose kernel_source says only
'sglang'). Before these rows SGLang's block-FP8
linears on H100 and H200 took DeepGEMM's README table (DeepSeek's shapes, M 64 and up, the
kernel alone): at decode sizes a Qwen3-8B-FP8 step came out at 0.65x BF16's where GPUStack's
runs measure 0.79x (TPOT 5.65 against 7.19 ms). SGLang 0.5.9's rows time a 4096 x 4096
linear at M 4 at 13.5 us and the 4096 x 12288 down projection at 27.1 us (BF16's rows: 16.4
and 40.3), the quantization kernel and a launch floor included. Rows kept: gemm_dtype
fp8_block at VERSION on the Hopper chips (HOPPER), at the (N, K) of FP8_MODELS' projections
at TP 1, 2, 4, 8 (gemm_kernel_tables.zoo_shapes) and of MLA_FP8_MODELS' (DeepSeek-R1's MLA
projections, dense MLPs and shared expert: mla_shapes; 2026-12-07, seventeenth session, t2), and
at M_ROWS, each at most as fast as its roofline. Not on Blackwell, where TensorRT-LLM's
measured fp8_block rows already price them.
"""

from __future__ import annotations

from aiconfigurator_data import Mirror, table_toml
from gemm_kernel_tables import M_KEPT, TPS, engine_rows, zoo_shapes

VERSION = "0.5.9"
CHIPS = {"b200_sxm": "b200", "b300_sxm": "b300"}
"""aiconfigurator chip directory -> xpusim catalog id: the chips SGLang's NVFP4 points run."""
GEMM_KERNEL = "sglang-nvfp4-gemm"
HOPPER = {"h100_sxm": "h100-sxm", "h200_sxm": "h200-sxm"}
"""aiconfigurator chip directory -> xpusim catalog id: the chips whose SGLang block-FP8 linear
had no measured rows at decode sizes."""
FP8_KERNEL = "sglang-w8a8-block-fp8"
FP8_MODELS = ("qwen3-8b", "qwen3-14b", "qwen3-32b", "qwen3-30b-a3b", "qwen3-235b-a22b",
              "llama-3.1-8b", "llama-3.1-70b")  # fmt: skip
"""Zoo models with block-FP8 checkpoints SGLang serves (Qwen3-*-FP8), and Llama's shapes for
the others (vllm_kernel_tables.MODELS)."""
MLA_FP8_MODELS = ("deepseek-r1-0528",)
"""Zoo models with MLA whose block-FP8 checkpoints SGLang serves (deepseek-ai/DeepSeek-R1-0528,
InferenceX's H200 runs): their projections' own rows (mla_shapes), where the pooled curve of
the others' rows priced them at TP 8 on an H200 0.76-1.17x their rows at M 4-64 (q_b_proj
5.95 us at M 4 against 7.85, 8.20 at M 32 against 6.99; the fused qkv_a 0.77-0.90x, o_proj
0.89-0.94x; benchmarks/sglang_r1_step.py)."""
MODELS = ("deepseek-r1-0528-fp4-v2",)
"""Zoo models SGLang serves in NVFP4 in the scored points (nvidia/DeepSeek-R1-0528-FP4-V2)."""
M_ROWS = tuple(sorted(set(M_KEPT) | {4, 16, 64}))
"""M kept: gemm_kernel_tables' grid, and 4, 16 and 64 between its decode rows."""


def nvfp4_shapes(models: tuple[str, ...] = MODELS) -> set[tuple[int, int]]:
    """(N, K) of the `models`' NVFP4 dense projections at each TP in TPS: MLA's o_proj
    (heads x v_head_dim in, row-parallel), the shared experts' and the dense MLPs' gate_up
    (column-parallel) and down (row-parallel); the checkpoint keeps MLA's other projections
    BF16 (zoo deepseek-r1-0528-fp4-v2)."""
    from xpusim.workloads.zoo import zoo_file

    shapes = set()
    for name in models:
        c = zoo_file(name)[1]
        hidden = c["hidden_size"]
        widths = (c["intermediate_size"], c["moe_intermediate_size"] * c["n_shared_experts"])
        for tp in TPS:
            shapes.add((hidden, c["num_attention_heads"] * c["v_head_dim"] // tp))
            for width in widths:
                shapes |= {(2 * width // tp, hidden), (hidden, width // tp)}
    return shapes


def mla_shapes(models: tuple[str, ...] = MLA_FP8_MODELS) -> set[tuple[int, int]]:
    """(N, K) of the `models`' block-FP8 projections at each TP in TPS as SGLang runs them
    (models/deepseek_v2.py): the fused q_a and kv_a projection (fused_qkv_a_proj_with_mqa,
    replicated), q_b_proj (column-parallel), kv_b_proj of a prefill (column-parallel),
    o_proj (row-parallel), and the dense MLPs' and shared experts' gate_up (column) and down
    (row)."""
    from xpusim.workloads.zoo import zoo_file

    shapes = set()
    for name in models:
        c = zoo_file(name)[1]
        hidden, heads, rank = c["hidden_size"], c["num_attention_heads"], c["kv_lora_rank"]
        nope, rope, v = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
        shapes.add((c["q_lora_rank"] + rank + rope, hidden))
        widths = (c["intermediate_size"], c["moe_intermediate_size"] * c["n_shared_experts"])
        for tp in TPS:
            shapes |= {(heads * (nope + rope) // tp, c["q_lora_rank"]),
                       (heads * (nope + v) // tp, rank), (hidden, heads * v // tp)}
            for width in widths:
                shapes |= {(2 * width // tp, hidden), (hidden, width // tp)}
    return shapes


def gemm_tables(mirror: Mirror, chip_dir: str) -> list[str]:
    """SGLang's own linear tables of a chip: NVFP4 on Blackwell (CHIPS), block-FP8 on Hopper
    (HOPPER); none elsewhere."""
    if chip_dir in HOPPER:
        return [fp8_block_table(mirror, chip_dir)]
    return [nvfp4_table(mirror, chip_dir)] if chip_dir in CHIPS else []


def nvfp4_table(mirror: Mirror, chip_dir: str) -> str:
    return linear_table(
        mirror, chip_dir, CHIPS[chip_dir], ("nvfp4", "nvfp4", "nvfp4"), nvfp4_shapes(), MODELS,
        "NVFP4 linear (W4A4, FP8 scales per 16 elements): the BF16 input quantized by "
        "FlashInfer's fp4_quantize, then FlashInfer's mm_fp4", GEMM_KERNEL,
        projections="NVFP4 projections'")


def fp8_block_table(mirror: Mirror, chip_dir: str) -> str:
    return linear_table(
        mirror, chip_dir, HOPPER[chip_dir], ("fp8_block", "fp8", "fp8-block-scaled"),
        zoo_shapes(FP8_MODELS) | mla_shapes(), FP8_MODELS + MLA_FP8_MODELS,
        "block-FP8 linear (128 x 128 weight scales): the BF16 input quantized per 1 x 128 "
        "group by sglang_per_token_group_quant_fp8, then DeepGEMM's gemm_nt_f8f8bf16",
        FP8_KERNEL)


def linear_table(mirror: Mirror, chip_dir: str, chip_id: str, formats: tuple[str, str, str],
                 shapes: set[tuple[int, int]], models: tuple[str, ...], what: str,
                 kernel: str, projections: str = "projections'") -> str:  # fmt: skip
    """One table of SGLang's own linear layer: `formats` (aiconfigurator's gemm_dtype,
    xpusim's dtype and scope) at the (N, K) of `shapes` (`models`' `projections`), `what` the
    layer runs."""
    gemm_dtype, dtype, scope = formats
    measured, rows = engine_rows(mirror, f"{chip_dir}/gemm/sglang/{VERSION}/gemm_perf.parquet",
                                 chip_id, gemm_dtype, shapes, M_ROWS)  # fmt: skip
    return table_toml(
        f"aiconfigurator-sglang-gemm-{gemm_dtype.replace('_', '-')}-{chip_id}", "gemm", dtype,
        scope, chip_id, VERSION, f"gemm_dtype {gemm_dtype}", measured,
        f"{chip_id}, SGLang {VERSION} {what}; BF16 output; one GPU, CUDA graphs, mean of the "
        f"collector's runs (collector/sglang/collect_gemm.py); the {projections} (N, K) of "
        f"{', '.join(models)} at TP {', '.join(map(str, TPS))}, snapped to the measured grid",
        rows, engine=("sglang", "SGLang"), kernel=kernel)  # fmt: skip

