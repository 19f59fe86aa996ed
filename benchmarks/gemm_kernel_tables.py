"""Regenerates src/xpusim/cost/kernel_tables/gemm/<chip>.toml from aiconfigurator's
measured TensorRT-LLM GEMM tables (ai-dynamo/aiconfigurator, Apache-2.0), checks every row
against the measuring chip's roofline, and prints how far the measured kernels run from it
(docs/cost.md "GEMM kernel tables from aiconfigurator").

    python benchmarks/gemm_kernel_tables.py /path/to/aiconfigurator.git   # a bare mirror

Needs pyarrow (the `parquet` extra), git and xpusim on the path (the catalog's peaks and
bandwidths judge the rows); the project reads only the TOML it writes.

aiconfigurator's collector (collector/trtllm/collect_gemm.py) times TensorRT-LLM's `Linear`
module (the layer an engine's projection runs, activation quantization included) on one
GPU: a BF16 input of M x K against an N x K weight, BF16 output; CUDA graphs, 3 warm-ups,
the mean of 6 runs; weights under the L2's size are rotated over up to 5 copies. Formats
(FORMATS): BF16; FP8 per-tensor (QuantAlgo.FP8); FP8 with 128 x 128 block scales
(FP8_BLOCK_SCALES: DeepGEMM on Blackwell, CUTLASS on Hopper); NVFP4 (W4A4, 16-element
blocks). We keep:

- TensorRT-LLM 1.3.0rc20 (VERSION), the newest collection (1.3.0rc23 reuses it).
- The FP8 per-tensor rows less the `compute_scale` table's time at the same (M, K): the
  collector's FP8 Linear has no input scale, so each row includes a dynamic amax pass over
  the activations, which engines with static scales (MLPerf, the FP8 checkpoints) do not run;
  aiconfigurator derives its `fp8_static` GEMM the same way (rust operators/gemm.rs).
- The (N, K) of the zoo's projections (MODELS at TP 1, 2, 4, 8: QKV, output, gate-up,
  down), each dimension snapped to the nearest measured value in log2 (the grid is
  32-16384, then 51200 and 65536), at the M in M_KEPT. Not the LM head's (13 more shapes, one
  GEMM of a step): a table's curve pools its rows by M, and the head takes that curve.
- Every row at most as fast as its roofline on the measuring chip's catalog figures
  (max(2MNK / peak, bytes / DRAM bandwidth), bytes of A, B and the BF16 output; the check
  cost/kernel_tables.py repeats on loading). Rows faster are rejected and printed: they
  are rows whose weight and activations sit in the L2 across the timed calls.

Chips: B200, B300 and GB200 in every format; H100 and H200 in BF16 only (their FP8 GEMMs
are priced by DeepGEMM's table, nvidia-hopper.toml, which TensorRT-LLM's static FP8 rows
match at large M), and vLLM's and SGLang's own block-FP8 linears
(vllm_kernel_tables.gemm_table, sglang_kernel_tables.gemm_tables: each prices its engine's
runs alone). Not the L40S: 6,736 of its 35,700 BF16 rows, 3,297 FP8 and 1,837 FP8
block-scaled ones run faster than its 864 GB/s GDDR6 allows (up to 4.2x: its 96 MB L2 holds
the rotated weights), some FP8 rows read 0 ms, and the rows that pass are survivors of the
same effect. Not the A100: its newest TensorRT-LLM collection is 1.0.0, and it has a
calibration file.
"""

from __future__ import annotations

import math
import sys

import numpy as np
from aiconfigurator_data import KERNEL_TABLES, Measured, Mirror, arguments, table_toml, write

OUT = KERNEL_TABLES / "gemm"
"""One file a chip (kernel_tables.CHIP_FILES), so that a run parses only its own chip's."""
VERSION = "1.3.0rc20"
BLACKWELL = ("bfloat16", "fp8", "fp8_block", "nvfp4")
# aiconfigurator chip directory -> (xpusim catalog id, gemm_dtypes kept)
CHIPS = {
    "b200_sxm": ("b200", BLACKWELL),
    "b300_sxm": ("b300", BLACKWELL),
    "gb200": ("gb200", BLACKWELL),
    "h100_sxm": ("h100-sxm", ("bfloat16",)),
    "h200_sxm": ("h200-sxm", ("bfloat16",)),
}
# gemm_dtype -> (compute format, kernel scope as xpusim names them (op_table.kernel_scope),
# A and B bytes per element, what TensorRT-LLM runs)
FORMATS = {
    "bfloat16": ("bf16", "bf16", 2.0, "BF16 weights and activations"),
    "fp8": ("fp8", "fp8", 1.0, "FP8 per-tensor (QuantAlgo.FP8), static input scale: the "
            "row less the compute_scale table's dynamic amax pass"),
    "fp8_block": ("fp8", "fp8-block-scaled", 1.0, "FP8 with 1 x 128 activation and 128 x 128 "
                  "weight block scales (FP8_BLOCK_SCALES; DeepGEMM on Blackwell)"),
    "nvfp4": ("nvfp4", "nvfp4", 4.5 / 8, "NVFP4 weights and activations (W4A4, FP8 scales per "
              "16 elements), the BF16 input quantized in the module"),
}
OUTPUT_ITEMSIZE = 2
M_KEPT = (1, 32, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
TPS = (1, 2, 4, 8)
MODELS = ("llama-3.1-8b", "llama-3.1-70b", "llama-3-405b", "qwen3-32b",
          "mixtral-8x7b", "qwen3-30b-a3b", "qwen3-235b-a22b", "gpt-oss-120b")
"""Zoo models the scored NVIDIA serving points run (the dense ones' every projection; the
MoE ones' attention projections and LM head: their experts are the moe tables')."""


def zoo_shapes(models: tuple[str, ...] = MODELS) -> set[tuple[int, int]]:
    """(N, K) of the `models`' projections at each TP in TPS (column-parallel layers split N,
    row-parallel ones K)."""
    from xpusim.workloads.zoo import zoo_file

    shapes = set()
    for name in models:
        c = zoo_file(name)[1]
        hidden, heads, kv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
        head_dim = c.get("head_dim") or hidden // heads
        dense = "num_local_experts" not in c and "num_experts" not in c
        for tp in TPS:
            shapes |= {((heads + 2 * kv) * head_dim // tp, hidden),
                       (hidden, heads * head_dim // tp)}
            if dense:
                inter = c["intermediate_size"]
                shapes |= {(2 * inter // tp, hidden), (hidden, inter // tp)}
    return shapes


def snap(value: int, grid: list[int]) -> int:
    return min(grid, key=lambda g: abs(math.log2(g) - math.log2(value)))


def roofline_s(m, n, k, gemm_dtype: str, chip) -> np.ndarray:
    """max(2MNK / peak, (A + B + BF16 C bytes) / DRAM bandwidth) on the catalog's figures,
    as cost/kernel_tables.py computes a gemm row's."""
    from xpusim.cost.calibration import dram_bytes_per_s
    from xpusim.ir.dtypes import DType

    dtype, _, itemsize, _ = FORMATS[gemm_dtype]
    moved = (m * k + n * k) * itemsize + m * n * OUTPUT_ITEMSIZE
    return np.maximum(2 * m * n * k / chip.peak(DType(dtype)), moved / dram_bytes_per_s(chip))


def engine_rows(mirror: Mirror, path: str, chip_id: str, gemm_dtype: str,
                shapes: set[tuple[int, int]], m_kept: tuple[int, ...] = M_KEPT,
                ) -> tuple[Measured, list[list]]:  # fmt: skip
    """An engine's own GEMM rows [M, N, K, microseconds] of `gemm_dtype` from aiconfigurator's
    table at `path`: at the (N, K) of `shapes` snapped to its measured grid and at
    `m_kept`, each at most as fast as its roofline on `chip_id`'s catalog figures (prints
    how many are kept and refused); for vllm_ and sglang_kernel_tables."""
    from xpusim.hardware.catalog import load_chip

    measured = mirror.read(path)
    d = {key: np.array(values) for key, values in measured.columns.items()}
    grid = sorted(set(d["n"].tolist()) | set(d["k"].tolist()))
    wanted = {(snap(n, grid), snap(k, grid)) for n, k in shapes}
    m, n, k = (d[x].astype(float) for x in "mnk")
    us = d["latency"].astype(float) * 1e3
    fraction = roofline_s(m, n, k, gemm_dtype, load_chip(chip_id)) / (us * 1e-6)
    every = d["gemm_dtype"] == gemm_dtype
    keep = every & (fraction <= 1) & np.isin(m, m_kept)
    keep &= np.array([(a, b) in wanted for a, b in zip(d["n"], d["k"], strict=True)])
    print(f"{chip_id}: {keep.sum()} {gemm_dtype} GEMM rows kept, "
          f"{(every & (fraction > 1)).sum()} faster than the roofline")
    rows = sorted(([int(a), int(b), int(c), t] for a, b, c, t in
                   zip(m[keep], n[keep], k[keep], us[keep], strict=True)),
                  key=lambda r: (r[1], r[2], r[0]))  # fmt: skip
    return measured, rows


def load(mirror: Mirror, chip_dir: str, kind: str, name: str) -> tuple[Measured, dict]:
    measured = mirror.read(f"{chip_dir}/{kind}/trtllm/{VERSION}/{name}.parquet")
    return measured, {key: np.array(values) for key, values in measured.columns.items()}


def rows_of(mirror: Mirror, chip_dir: str, chip, shapes) -> tuple[Measured, dict]:
    """Per kept format, the kept rows [M, N, K, microseconds] that pass the roofline check;
    prints the rejected ones and the formats' fractions of the roofline."""
    measured, d = load(mirror, chip_dir, "gemm", "gemm_perf")
    _, scale = load(mirror, chip_dir, "quantize", "computescale_perf")
    scale_ms = {(m, k): t for m, k, t in zip(scale["m"], scale["k"], scale["latency"],
                                             strict=True)}  # fmt: skip
    grid = sorted(set(d["n"].tolist()) | set(d["k"].tolist()))
    wanted = {(snap(n, grid), snap(k, grid)) for n, k in shapes}
    m, n, k = (d[x].astype(float) for x in "mnk")
    out = {}
    print(f"{chip_dir} ({chip.id}) TensorRT-LLM {VERSION}: {len(wanted)} (N, K) of the zoo")
    for gemm_dtype in CHIPS[chip_dir][1]:
        every = d["gemm_dtype"] == gemm_dtype
        ms = d["latency"].astype(float)
        if gemm_dtype == "fp8":
            ms = ms - np.array([scale_ms.get((a, b), np.nan) for a, b in
                                zip(d["m"], d["k"], strict=True)])  # fmt: skip
        fraction = roofline_s(m, n, k, gemm_dtype, chip) / (ms * 1e-3)
        bad = every & ~((fraction > 0) & (fraction <= 1))
        print(f"  {gemm_dtype:9s} {every.sum():6d} rows, {bad.sum()} faster than the roofline "
              f"(rejected; largest {np.nanmax(np.where(bad, fraction, 0)):.2f})")  # fmt: skip
        for i in np.flatnonzero(bad)[:6]:
            print(f"      M {m[i]:.0f} N {n[i]:.0f} K {k[i]:.0f}: {ms[i] * 1e3:.2f} us, "
                  f"{fraction[i]:.2f} of the roofline")  # fmt: skip
        big = every & ~bad & (n >= 4096) & (k >= 4096) & (n <= 16384) & (k <= 16384)
        for at in (1, 64, 1024, 4096, 16384):
            sel = big & (m == at)
            if sel.any():
                print(f"      M {at:5d}, N and K 4096-16384: fraction of the roofline median "
                      f"{np.median(fraction[sel]):.2f}, best {fraction[sel].max():.2f}")
        keep = every & ~bad & np.isin(m, M_KEPT)
        keep &= np.array([(a, b) in wanted for a, b in zip(d["n"], d["k"], strict=True)])
        found = {(int(a), int(b), int(c)): t * 1e3
                 for a, b, c, t in zip(m[keep], n[keep], k[keep], ms[keep], strict=True)}
        out[gemm_dtype] = [[*key, us] for key, us in sorted(found.items(), key=lambda r: (
            r[0][1], r[0][2], r[0][0]))]  # fmt: skip
    return measured, out


def table_text(chip_dir: str, gemm_dtype: str, rows: list[list], measured: Measured) -> str:
    chip_id = CHIPS[chip_dir][0]
    dtype, scope, _, what = FORMATS[gemm_dtype]
    return table_toml(
        f"aiconfigurator-trtllm-gemm-{gemm_dtype.replace('_', '-')}-{chip_id}", "gemm", dtype,
        scope, chip_id, VERSION, f"gemm_dtype {gemm_dtype}", measured,
        f"{chip_id}, TensorRT-LLM {VERSION} PyTorch Linear module, {what}; BF16 input and "
        "output; one GPU, CUDA graphs, 3 warm-ups, mean of 6 runs "
        "(collector/trtllm/collect_gemm.py); the projections' (N, K) of "
        f"{', '.join(MODELS)} at TP {', '.join(map(str, TPS))}, snapped to the measured grid",
        rows)


def main() -> int:
    import sglang_kernel_tables  # SGLang's NVFP4 (Blackwell) and block-FP8 (Hopper) linears
    import vllm_kernel_tables  # its tables of vLLM's block-FP8 linear go in the chips' files

    from xpusim.hardware.catalog import load_chip

    args = arguments(__doc__, OUT).parse_args()
    mirror = Mirror.of(args)
    shapes = zoo_shapes()
    header = (
        "# Measured GEMM kernel times of TensorRT-LLM (and of vLLM's block-FP8 linear and\n"
        "# SGLang's NVFP4 and block-FP8 linears, their own kernels: benchmarks/\n"
        "# vllm_kernel_tables.py, sglang_kernel_tables.py) on NVIDIA chips, from aiconfigurator's\n"
        "# kernel database (Apache-2.0), written by benchmarks/gemm_kernel_tables.py (its\n"
        "# docstring says which rows are kept and which were rejected); do not edit by hand.\n"
        "# Rows: [M, N, K, microseconds]: one Linear of an M x K BF16 input against an N x K\n"
        "# weight on one GPU. Scope: the kernel family (op_table.kernel_scope).\n"
        f"# Source commit {mirror.commit}.\n"
    )
    for chip_dir, (chip_id, _) in CHIPS.items():
        measured, tables = rows_of(mirror, chip_dir, load_chip(chip_id), shapes)
        write(args.out / f"{chip_id}.toml", header, [
            *(table_text(chip_dir, gemm_dtype, rows, measured)
              for gemm_dtype, rows in tables.items() if rows),
            *(vllm_kernel_tables.gemm_table(mirror, chip_dir, version)
              for version in vllm_kernel_tables.VERSIONS if chip_dir in vllm_kernel_tables.CHIPS),
            *sglang_kernel_tables.gemm_tables(mirror, chip_dir)])  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
