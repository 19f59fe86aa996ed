"""Regenerates src/xpusim/cost/kernel_tables/engine-trtllm-hopper.toml: TensorRT-LLM's own
block-FP8 linear on the H100 and H200, from aiconfigurator's measured TensorRT-LLM kernel
database (ai-dynamo/aiconfigurator, Apache-2.0). TensorRT-LLM's own kernel: it prices only
the ops of runs whose engine lists it (serving/engines.toml `kernels`; cost/kernel_tables.py
"An engine's own kernels").

    python benchmarks/trtllm_kernel_tables.py /path/to/aiconfigurator.git   # a bare mirror

Needs pyarrow (the `parquet` extra), git and xpusim on the path; the project reads only the
TOML it writes.

Why: on Hopper xpusim prices a block-scaled FP8 matmul (a 128 x 128 block-scaled checkpoint:
Qwen3-*-FP8, DeepSeek) by DeepGEMM's table (kernel_tables/nvidia-hopper.toml), and
gemm_kernel_tables.py keeps H100/H200 BF16 rows alone. TensorRT-LLM's Linear with
FP8_BLOCK_SCALES runs its own kernel on Hopper (tensorrt_llm/_torch/modules/linear.py: on
SM100 DeepGEMM's fp8_swap_ab_gemm, elsewhere fp8_quantize_1x128 then
torch.ops.trtllm.fp8_block_scaling_gemm), which at
serving batches takes longer than DeepGEMM's curve: Qwen3-32B's four projections of one layer
at M 512 take 562 us on an H100 (526 on an H200) against xpusim's 475 (407), 1.18x (1.29x),
the down projection (5120 x 25600) 1.25-1.49x at M 512-1024 (docs/validation.md "The dense
decode step at large batch, op by op").

Rows kept (collector/trtllm/collect_gemm.py, as gemm_kernel_tables.py reads them: the
Linear module with its activation quantization, BF16 input and output, CUDA graphs, 3
warm-ups, the mean of 6 runs, weights under the L2's size rotated over up to 5 copies):
gemm_dtype fp8_block of TensorRT-LLM VERSION at the (N, K) of MODELS' projections at TP 1,
2, 4, 8 (the zoo's shapes snapped to the measured grid, gemm_kernel_tables.zoo_shapes), M in
gemm_kernel_tables.M_KEPT, each row at most as fast as its roofline on the measuring chip's
catalog figures (cost/kernel_tables.py repeats the check on loading). 1.2.0rc5's rows, the
collection nearest the 1.0-1.2 builds the points ran, agree with these within 10% a layer
of Qwen3-32B at M 1-2048 (the same report).
"""

from __future__ import annotations

import sys

from aiconfigurator_data import KERNEL_TABLES, Mirror, arguments, table_toml, write
from gemm_kernel_tables import VERSION, engine_rows, zoo_shapes

OUT = KERNEL_TABLES / "engine-trtllm-hopper.toml"
CHIPS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200-sxm"}
"""aiconfigurator chip directory -> xpusim catalog id: Hopper, where TensorRT-LLM's block-FP8
linear is not DeepGEMM's."""
KERNEL = "trtllm-fp8-block-gemm"
MODELS = ("qwen3-8b", "qwen3-14b", "qwen3-32b", "qwen3-30b-a3b", "qwen3-235b-a22b",
          "llama-3.1-8b", "llama-3.1-70b")  # fmt: skip
"""Zoo models with block-FP8 checkpoints (Qwen3-*-FP8; the MoE ones' attention projections),
and Llama's shapes; DeepSeek's MLA projections take the nearest shape or the pooled curve."""


def gemm_table(mirror: Mirror, chip_dir: str) -> str:
    chip_id = CHIPS[chip_dir]
    measured, rows = engine_rows(mirror, f"{chip_dir}/gemm/trtllm/{VERSION}/gemm_perf.parquet",
                                 chip_id, "fp8_block", zoo_shapes(MODELS))  # fmt: skip
    return table_toml(
        f"aiconfigurator-trtllm-gemm-fp8-block-{chip_id}", "gemm", "fp8", "fp8-block-scaled",
        chip_id, VERSION, "gemm_dtype fp8_block", measured,
        f"{chip_id}, TensorRT-LLM {VERSION} PyTorch Linear module, FP8 with 1 x 128 activation "
        "and 128 x 128 weight block scales (FP8_BLOCK_SCALES: fp8_block_scaling_gemm on Hopper); "
        "BF16 input and output; one GPU, CUDA graphs, 3 warm-ups, mean of 6 runs "
        f"(collector/trtllm/collect_gemm.py); the projections' (N, K) of {', '.join(MODELS)} "
        "at TP 1, 2, 4, 8, snapped to the measured grid", rows, kernel=KERNEL)  # fmt: skip


def main() -> int:
    args = arguments(__doc__, OUT).parse_args()
    mirror = Mirror.of(args)
    header = (
        "# Measured block-FP8 GEMM times of TensorRT-LLM's own Linear on NVIDIA Hopper, from\n"
        "# aiconfigurator's kernel database (Apache-2.0), written by\n"
        "# benchmarks/trtllm_kernel_tables.py (its docstring says which rows are kept); do not\n"
        "# edit by hand. TensorRT-LLM's own kernel: it prices only the ops of runs whose engine\n"
        "# lists it (serving/engines.toml `kernels`).\n"
        "# Rows: [M, N, K, microseconds]: one Linear of an M x K BF16 input against an N x K\n"
        "# block-scaled FP8 weight on one GPU.\n"
        f"# Source commit {mirror.commit}.\n"
    )
    write(args.out, header, [gemm_table(mirror, c) for c in CHIPS])
    return 0


if __name__ == "__main__":
    sys.exit(main())
