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
"""

from __future__ import annotations

from aiconfigurator_data import Mirror, table_toml
from gemm_kernel_tables import M_KEPT, TPS, engine_rows

VERSION = "0.5.9"
CHIPS = {"b200_sxm": "b200", "b300_sxm": "b300"}
"""aiconfigurator chip directory -> xpusim catalog id: the chips SGLang's NVFP4 points run."""
GEMM_KERNEL = "sglang-nvfp4-gemm"
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


def gemm_table(mirror: Mirror, chip_dir: str) -> str:
    chip_id = CHIPS[chip_dir]
    measured, rows = engine_rows(mirror, f"{chip_dir}/gemm/sglang/{VERSION}/gemm_perf.parquet",
                                 chip_id, "nvfp4", nvfp4_shapes(), M_ROWS)  # fmt: skip
    return table_toml(
        f"aiconfigurator-sglang-gemm-nvfp4-{chip_id}", "gemm", "nvfp4", "nvfp4", chip_id,
        VERSION, "gemm_dtype nvfp4", measured,
        f"{chip_id}, SGLang {VERSION} NVFP4 linear (W4A4, FP8 scales per 16 elements): the "
        "BF16 input quantized by FlashInfer's fp4_quantize, then FlashInfer's mm_fp4; BF16 "
        "output; one GPU, CUDA graphs, mean of the collector's runs (collector/sglang/"
        f"collect_gemm.py); the NVFP4 projections' (N, K) of {', '.join(MODELS)} at TP "
        f"{', '.join(map(str, TPS))}, snapped to the measured grid", rows,
        engine=("sglang", "SGLang"), kernel=GEMM_KERNEL)  # fmt: skip
