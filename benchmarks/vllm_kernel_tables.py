"""Regenerates src/xpusim/cost/kernel_tables/moe/engine-vllm.toml (block-FP8 fused MoE), and
defines the tables of vLLM's block-FP8 linear layers that gemm_kernel_tables.py files in the
chips' own gemm/<chip>.toml (parsed by a run of that chip alone), from aiconfigurator's
measured vLLM kernel database (ai-dynamo/aiconfigurator, Apache-2.0): vLLM's own kernels, which
price only the ops of runs whose engine lists them (serving/engines.toml `kernels`;
cost/kernel_tables.py "An engine's own kernels").

    python benchmarks/vllm_kernel_tables.py /path/to/aiconfigurator.git   # a bare mirror

Needs pyarrow (the `parquet` extra), git and xpusim on the path; the project reads only the
TOML it writes.

Why: vLLM's block-FP8 linear layer (a 128 x 128 block-scaled checkpoint: Qwen3-*-FP8,
DeepSeek) is not DeepGEMM's kernel at decode sizes on Hopper. aiconfigurator's vLLM 0.14.0
rows time its `RowParallelLinear` with `Fp8Config(weight_block_size=[128, 128])` (the
dynamic 1 x 128 activation quantization, then whichever GEMM vLLM's dispatch picks in the
collector's image; its kernel_source says only `vllm_default`) at 34-38 us for 4096 x 4096
and 6144 x 4096 at M 1-64 on an H100, where vLLM's BF16 layer takes 15-23 us and DeepGEMM's
README times 64 x 4096 x 7168, a larger FP8 weight, at 13.1 us (kernel_tables/
nvidia-hopper.toml). vLLM's fused MoE (`fused_experts`, the Triton kernels at these token
counts) is timed the same way.

Rows kept, at each of VERSIONS, one table of each kind per version, its kernel named with
the version (kernel_name: `vllm-0.19-w8a8-block-fp8`), so that an engine profile names the
release whose timings price it (serving/engines.toml `kernels`):

- 0.14.0, the oldest vLLM aiconfigurator collected, for the profile of the scored points
  that ran 0.11.0-0.11.1 (`vllm-0.11`), whose block-FP8 dispatch (DeepGEMM where installed,
  else CUTLASS on Hopper, else Triton: vllm/model_executor/layers/quantization/utils/
  fp8_utils.py W8A8BlockFp8LinearOp) is the same code path: the nearest timed version;
- 0.19.0 for the `vllm` profile, the vLLM a user deploys now as far as timed kernels reach:
  the newest release whose block-FP8 linears were timed under CUDA graphs. The collector
  graphed every format until ai-dynamo/aiconfigurator PR #999 (4bed48d, 2026-05-11) set
  `use_cuda_graph=gemm_type != "fp8_block"` in collector/vllm/collect_gemm.py; the H100 and
  H200 0.19.0 rows came from the pipeline of 2026-04-15 (ce6521f, a77af1b), before it, and
  the 0.18.0 (H200, 2026-05-27), 0.22.0 (H200) and 0.24.0 (2026-07-12) rows after it, so
  theirs time the host's launches: 1 x 4096 x 4096 on an H100 reads 34.1 us at 0.14.0,
  22.2 at 0.19.0 and 59.2 at 0.24.0 (H200: 35.7, 21.9, 68.6 at 0.18.0, 50.9 at 0.22.0,
  61.1 at 0.24.0). The fused-MoE collector graphs every format at every version
  (collector/vllm/collect_moe.py).

Both from collector/vllm/collect_gemm.py and collect_moe.py of their time, every format
under CUDA graphs (collector/helper.py benchmark_with_power), GEMMs over 6 copies of the
weight so that none sits in the L2, 3 warm-ups, the mean of 6 runs:

- gemm_dtype fp8_block at the (N, K) of MODELS' projections at TP 1, 2, 4, 8 (the zoo's
  shapes snapped to the measured grid, gemm_kernel_tables.zoo_shapes), M in
  gemm_kernel_tables.M_KEPT;
- moe_dtype fp8_block, balanced routing, the shapes and tokens moe_kernel_tables keeps of
  TensorRT-LLM's (SHAPES, TOKENS), at the splits vLLM runs (SPLITS);
- every row at most as fast as its roofline on the measuring chip's catalog figures
  (cost/kernel_tables.py repeats the check on loading).
"""

from __future__ import annotations

import sys

from aiconfigurator_data import KERNEL_TABLES, Mirror, arguments, table_toml, write
from gemm_kernel_tables import engine_rows, zoo_shapes
from moe_kernel_tables import SHAPES, TOKENS

OUT = KERNEL_TABLES / "moe/engine-vllm.toml"
VERSIONS = ("0.14.0", "0.19.0")
"""The vLLM releases whose rows are kept (module docstring)."""
CHIPS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200-sxm"}
"""aiconfigurator chip directory -> xpusim catalog id: the chips with vLLM block-FP8 rows."""
GEMM_KERNEL = "w8a8-block-fp8"
MOE_KERNEL = "fused-moe"
MODELS = ("qwen3-8b", "qwen3-14b", "qwen3-32b", "qwen3-30b-a3b", "qwen3-235b-a22b",
          "llama-3.1-8b", "llama-3.1-70b")  # fmt: skip
"""Zoo models with block-FP8 checkpoints that vLLM serves (Qwen3-*-FP8), and Llama's shapes
for the others; DeepSeek's MLA projections take the pooled curve."""
SPLITS = {(1, 1), (2, 1), (4, 1), (8, 1), (1, 4), (1, 8)}
"""(moe_tp, moe_ep) kept: vLLM's MoE under tensor parallelism alone (the experts split over
TP, moe_tp = TP) at TP 1-8, and under --enable-expert-parallel at EP 4 and 8 (the scored
points' layouts). Not EP 2 and 16-128, whose rows pooled with these fit no one curve."""
COLLECTED = "CUDA graphs, 3 warm-ups, mean of 6 runs (collector/vllm/collect_{}.py)"


def kernel_name(kernel: str, version: str) -> str:
    """The name of vLLM's `kernel` as `version` timed it, as a profile lists it:
    `vllm-0.19-w8a8-block-fp8` (major.minor: no two timed releases share one)."""
    return f"vllm-{'.'.join(version.split('.')[:2])}-{kernel}"


def gemm_table(mirror: Mirror, chip_dir: str, version: str) -> str:
    chip_id = CHIPS[chip_dir]
    measured, rows = engine_rows(mirror, f"{chip_dir}/gemm/vllm/{version}/gemm_perf.parquet",
                                 chip_id, "fp8_block", zoo_shapes(MODELS))  # fmt: skip
    return table_toml(
        f"aiconfigurator-vllm-{version}-gemm-fp8-block-{chip_id}", "gemm", "fp8",
        "fp8-block-scaled", chip_id, version, "gemm_dtype fp8_block", measured,
        f"{chip_id}, vLLM {version} RowParallelLinear with Fp8Config(weight_block_size=[128, "
        "128], activation_scheme dynamic): the 1 x 128 activation quantization and vLLM's "
        "default block-FP8 GEMM; BF16 input and output; one GPU, 6 weight copies, "
        f"{COLLECTED.format('gemm')}; the projections' (N, K) of {', '.join(MODELS)} at TP 1, "
        "2, 4, 8, snapped to the measured grid", rows,
        engine=("vllm", "vLLM"), kernel=kernel_name(GEMM_KERNEL, version))  # fmt: skip


def moe_table(mirror: Mirror, chip_dir: str, version: str) -> str:
    chip_id = CHIPS[chip_dir]
    measured = mirror.read(f"{chip_dir}/moe/vllm/{version}/moe_perf.parquet")
    found = {}
    for r in measured.records():
        shape = (r["hidden_size"], r["inter_size"], r["num_experts"], r["topk"])
        if (r["moe_dtype"], r["distribution"]) != ("fp8_block", "balanced") \
                or shape not in SHAPES or r["num_tokens"] not in TOKENS \
                or (r["moe_tp_size"], r["moe_ep_size"]) not in SPLITS \
                or r["num_tokens"] * r["topk"] < r["moe_ep_size"]:  # fmt: skip
            continue
        found[(r["num_tokens"], shape[0], shape[1], shape[3], shape[2], r["moe_tp_size"],
               r["moe_ep_size"])] = r["latency"] * 1e3  # fmt: skip
    rows = [[*key, us] for key, us in sorted(found.items(), key=lambda kv: (kv[0][1:], kv[0][0]))]
    models = sorted({SHAPES[(r[1], r[2], r[4], r[3])] for r in rows})
    print(f"{chip_id} {version}: {len(rows)} fp8_block MoE rows kept")
    return table_toml(
        f"aiconfigurator-vllm-{version}-moe-fp8-block-{chip_id}", "moe", "fp8", "fp8-block",
        chip_id, version, "moe_dtype fp8_block, balanced routing", measured,
        f"{chip_id}, vLLM {version} fused_experts (the Triton fused-MoE kernels: the two "
        "grouped expert GEMMs with SwiGLU and the 1 x 128 activation quantization; routing "
        "given), FP8 weights with 128 x 128 block scales; one GPU as one rank of the TP x EP "
        f"group, all tokens entering; {COLLECTED.format('moe')}; shapes of "
        f"{', '.join(models)}", rows, engine=("vllm", "vLLM"),
        kernel=kernel_name(MOE_KERNEL, version))  # fmt: skip


def main() -> int:
    args = arguments(__doc__, OUT).parse_args()
    mirror = Mirror.of(args)
    header = (
        "# Measured block-FP8 fused-MoE times of vLLM on NVIDIA Hopper, from aiconfigurator's\n"
        "# kernel database (Apache-2.0), written by benchmarks/vllm_kernel_tables.py (its\n"
        "# docstring says which rows are kept); do not edit by hand. vLLM's own kernel: it\n"
        "# prices only the ops of runs whose engine lists it (serving/engines.toml `kernels`).\n"
        "# Rows: [tokens, hidden, inter, topk, experts, moe_tp, moe_ep, microseconds]: one MoE\n"
        "# layer on one rank.\n"
        f"# Source commit {mirror.commit}.\n"
    )
    write(args.out, header, [moe_table(mirror, c, v) for c in CHIPS for v in VERSIONS])
    return 0


if __name__ == "__main__":
    sys.exit(main())
