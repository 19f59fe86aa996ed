"""Regenerates the AMD Instinct kernel tables src/xpusim/cost/kernel_tables/amd-aiter.toml
(dense GEMMs) and kernel_tables/moe/amd-aiter.toml (fused MoE) from AMD's own kernel
library, ROCm/aiter (MIT): its tuned-config CSVs, each row one shape with the tuner's best
kernel time in microseconds on the GPU it names (`gfx`, `cu_num`).

    python benchmarks/amd_kernel_tables.py /path/to/aiter.git   # a clone or bare mirror

Needs git only. Each table reads one or more (commit, file) pairs, pinned in TABLES: AITER
rewrites its CSVs as it retunes, and the MI300X (gfx942, 304 CUs) rows of several files
were dropped from later commits, so each file is read at the last commit that holds the
rows kept. Which rows:

- the GPU: cu_num 304 (gfx942: MI300X; the MI325X is the same die and CU count) or cu_num
  256 (gfx950: MI355X). cu_num 80 rows are the MI308X, which the catalog does not hold;
- a time above zero (failed tunes are written as 0);
- one row per shape, the fastest when a file tunes a shape twice (bias or output variants);
- GEMMs whose weights (B x K x N) hold at least MIN_WEIGHT_BYTES: a smaller GEMM has too
  few output tiles to fill the chip's 256-304 CUs at small M (AITER's 64 x 1536 x 5120 INT8
  GEMM, 7.9 MB, runs 48 workgroups and streams at 0.47 TB/s of 5.3), so its time is set by
  its tile count, not by M, and pooled into the curve in M it priced Llama-2-70B's 470 MB
  gate-up projection at 64 rows at 0.25 of the weight stream; the projections the tables
  price (the zoo's dense models at their serving TP) are 16 MiB and larger;
- batched GEMMs (B independent M x K by K x N products) as the dense GEMM of the same rows
  per weight, M x (B x N) x K: the same FLOPs, weight bytes and outputs, and the same M, the
  rows each weight byte meets, which sets where on the curve a kernel is (a grouped row's
  total B x M would place 16 products of 16 rows, bandwidth-bound, beside a dense GEMM of
  256 rows); its activations count once instead of B times, which lowers its roofline only
  where the weights bind (M of 64 or fewer: by at most M / N, 5% at 64 x 1280);
- fused MoE rows as [tokens, model_dim, inter_dim, topk, experts, 1, 1, us]: the kernel as
  the tuner ran it (its `expert` and `topk` may count a fused shared expert, and its
  inter_dim is already one rank's width), so tp = ep = 1. The tuners route each token to
  the top k of random scores (csrc/ck_gemm_moe_2stages_codegen/gemm_moe_tune.py
  generate_data: `score = torch.randn((token, expert))`, `fused_topk`), so the tables say
  `routing = "random"`: the rows touch the experts uniform routing reaches, not balanced
  routing's min(experts, tokens x topk).

The loader (cost/kernel_tables.py) refuses a row faster than its chip's datasheet roofline;
check() here applies the same test before writing, and names what it drops.

Not kept: the MI355X fused-MoE rows of tuned_fmoe.csv (cu_num 256, at a5be7be6c0, the last
commit holding them): at 1-8 tokens each shape repeats one time (108.5 us for DeepSeek-V3's
7168 x 256 experts at TP 8, FP8), 10-20x the time to stream the 8 experts those tokens
touch, and later commits drop the rows. The gfx950 rows of a8w8_blockscale_tuned_fmoe_ds_v3
.csv do the same for two of its three shapes (DeepSeek's at TP 8: 77.5 us at 1-8 tokens and
359.5 us at 1,024-32,768; 4096 x 384 x 128 experts: 101.8 us at 1-16 tokens, 597.8 at
4,096-32,768), so only its third, DeepSeek's experts at TP 4, is kept: fourteen distinct
times from 56.8 us at 1 token to 2.3 ms at 8,192. The MI355X's MXFP4 experts have their own
table (dsv3_fp4_tuned_fmoe.csv, 2026-08; 18.9 us at 1 token to 137 us at 64 for DeepSeek's
experts at TP 8).
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from functools import partial

from aiconfigurator_data import KERNEL_TABLES, full_commit, git, toml_table, write

GEMM_OUT = KERNEL_TABLES / "amd-aiter.toml"
MOE_OUT = KERNEL_TABLES / "moe/amd-aiter.toml"
URL = "https://github.com/ROCm/aiter/blob/{commit}/{path}"
ROUTING = "random"  # how AITER's tuners route the fused-MoE rows (docstring): their `routing`
CONFIGS = "aiter/configs"
MIN_WEIGHT_BYTES = 16 * 2**20
"""The smallest weight a gemm row may have (module docstring): Mixtral-8x7B's attention
projections in FP8 (4096 x 6144, 24 MiB) and Llama-3.1-405B's at TP 8 in BF16 (16384 x
2304, 72 MiB) are above it."""

MI300X = ("mi300x", ["mi300x", "mi325x"], "304", "MI300X (gfx942, 304 CUs)",
          "; MI325X has the same gfx942 die and 304 CUs, its fraction of its own roofline "
          "assumed equal (AITER publishes no MI325X rows)")  # fmt: skip
MI355X = ("mi355x", ["mi355x"], "256", "MI355X (gfx950, 256 CUs)", "")

# Each table: name, kind, compute dtype, scope, chip, what was measured, and its sources:
# (commit, file, row filter on the CSV's own columns).
QWEN3_BF16_FMOE = [("ca781d8197cc85240111093f8c796ecbc2af6294",
                    f"{CONFIGS}/model_configs/qwen3_235b_bf16_tuned_fmoe.csv", {})]
"""AITER's tuned BF16 fused MoE of Qwen3-235B-A22B: its cu_num 304 rows (TP 4 and 8) and its
cu_num 256 rows (TP 4) give one table each."""

TABLES = [
    ("aiter-bf16-gemm-mi300x", "gemm", "bf16", "bf16", MI300X,
     "AITER BF16 GEMMs: CK batched GEMMs of 16 x (M x 1280 x 8192) and 16 x (M x 8192 x "
     "1024) (bf16_tuned_batched_gemm), and the Triton GEMMs tuned for gpt-oss's projections "
     "(M 1-128)",
     [("727253aef3b646e2acbe9b0b2e127a99649ea87b", f"{CONFIGS}/bf16_tuned_batched_gemm.csv", {}),
      ("e010caf524550eb04e68145df19653927ef00bd5",
       f"{CONFIGS}/model_configs/gptoss_bf16_tuned_gemm.csv", {})]),
    ("aiter-int8-gemm-mi300x", "gemm", "int8", "int8", MI300X,
     "AITER's per-token INT8 GEMMs (a8w8: CK batched GEMMs of 16 x (M x 1280 x 8192) and "
     "16 x (M x 8192 x 1024); the file's asm GEMMs over pre-shuffled weights are under the "
     "16 MiB floor), for INT8 matmuls only: per-tensor FP8 runs hipBLASLt's kernels under "
     "vLLM, another library and format, and keeps the chip's model",
     [("1ba09a4743280a8c2a2ae1ebfbd99fafb1804b1d", f"{CONFIGS}/a8w8_bpreshuffle_tuned_gemm.csv",
       {}),
      ("727253aef3b646e2acbe9b0b2e127a99649ea87b", f"{CONFIGS}/a8w8_tuned_batched_gemm.csv", {})]),
    ("aiter-bf16-gemm-mi355x", "gemm", "bf16", "bf16", MI355X,
     "AITER BF16 GEMMs (asm, hipBLASLt, Triton, FlyDSL; the tuner's best) at Llama-3 70B "
     "and 405B projection shapes at TP 1-8",
     [("e4048607a535ace3a2b51ded31b1c8c2d45c0879",
       f"{CONFIGS}/model_configs/llama70B_bf16_tuned_gemm.csv", {}),
      ("e4048607a535ace3a2b51ded31b1c8c2d45c0879",
       f"{CONFIGS}/model_configs/llama405B_bf16_tuned_gemm.csv", {})]),
    ("aiter-fp8-gemm-mi355x", "gemm", "fp8", "fp8", MI355X,
     "AITER per-token FP8 (e4m3fn) GEMMs over pre-shuffled weights (CK, CK-tile, FlyDSL; "
     "the tuner's best), taken for per-tensor FP8 (one scale per row and column instead of "
     "one per tensor: the same MFMA work and operand bytes)",
     [("e4048607a535ace3a2b51ded31b1c8c2d45c0879", f"{CONFIGS}/a8w8_bpreshuffle_tuned_gemm.csv",
       {"q_dtype_w": "torch.float8_e4m3fn"})]),
    ("aiter-fp8-blockscale-fmoe-mi300x", "moe", "fp8", "fp8-block", MI300X,
     "AITER fused MoE (2-stage CK / asm), FP8 activations and weights with 1 x 128 / 128 x "
     "128 block scales, SiLU gate-up; DeepSeek-V3's experts under EP 8 (33 local experts "
     "with the shared one, top 9) and GLM-5.1's",
     [("84493f0e5b083b02c9ff3d60961f58bae547045a",
       f"{CONFIGS}/model_configs/a8w8_blockscale_tuned_fmoe_ds_v3.csv", {}),
      ("c16d44b93a528b2a4bfd6d8d3409116d465872a9",
       f"{CONFIGS}/model_configs/a8w8_blockscale_tuned_fmoe_glm5_1.csv", {})]),
    ("aiter-fp8-blockscale-fmoe-mi355x", "moe", "fp8", "fp8-block", MI355X,
     "AITER fused MoE (2-stage CK / asm), FP8 activations and weights with 1 x 128 / 128 x "
     "128 block scales, SiLU gate-up; DeepSeek-V3/R1's experts at TP 4 (inter 512 of 256 "
     "experts with the shared one fused, top 9), the one shape of the file whose gfx950 "
     "times move with the tokens (the script's docstring says why the others are left out)",
     [("84493f0e5b083b02c9ff3d60961f58bae547045a",
       f"{CONFIGS}/model_configs/a8w8_blockscale_tuned_fmoe_ds_v3.csv", {"inter_dim": "512"})]),
    ("aiter-mxfp4-fmoe-mi355x", "moe", "mxfp4", "mxfp4", MI355X,
     "AITER fused MoE (2-stage: FlyDSL or CK stage 1, CK stage 2), MXFP4 (E2M1, one E8M0 "
     "scale per 32) activations and weights, SiLU gate-up; DeepSeek-V3/R1's experts at TP 8 "
     "and 4 (inter 256 and 512 of 256 experts, top 8; the same times with the shared expert "
     "fused, 257 experts, top 9) and under EP 8 (32-64 local experts of inter 2048)",
     [("aa220405821c2b706f72d71884c3d79ba0440c95",
       f"{CONFIGS}/model_configs/dsv3_fp4_tuned_fmoe.csv", {})]),
    ("aiter-bf16-fmoe-mi300x", "moe", "bf16", "bf16", MI300X,
     "AITER fused MoE (2-stage CK), BF16, SiLU gate-up; Qwen3-235B-A22B's experts at TP 4 "
     "and 8 (inter 384 and 192)",
     QWEN3_BF16_FMOE),
    ("aiter-a16w4-fmoe-mi355x", "moe", "bf16", "mxfp4", MI355X,
     "AITER fused MoE (CK-tile), MXFP4 weights (an E8M0 scale per 32) under BF16 "
     "activations, gpt-oss's SwiGLU gate-up: gpt-oss-120b's experts (128, top 4) as AITER "
     "pads them (hidden 3072, inter 3072, 1536 and 512 a rank), 1-128 tokens",
     [("c2b69b9b876144433fe12042719d7abc922fae70",
       f"{CONFIGS}/model_configs/gptoss_a16w4_tuned_fmoe.csv", {})]),
    ("aiter-bf16-fmoe-mi355x", "moe", "bf16", "bf16", MI355X,
     "AITER fused MoE (2-stage CK), BF16, SiLU gate-up; Qwen3-235B-A22B's experts at TP 4 "
     "(inter 384)",
     QWEN3_BF16_FMOE),
]


def read_rows(repo: str, commit: str, path: str, cu_num: str, where: dict) -> list[dict]:
    """The CSV's rows of the GPU with `cu_num` CUs that match `where` and have a time."""
    text = git(repo, "show", f"{commit}:{path}")
    kept = []
    for row in csv.DictReader(io.StringIO(text)):
        if row.get("cu_num") != cu_num or any(row.get(k) != v for k, v in where.items()):
            continue
        if row.get("gfx") and row["gfx"] != {"304": "gfx942", "256": "gfx950"}[cu_num]:
            continue
        try:
            us = float(row["us"])
        except (KeyError, ValueError):
            continue
        if us > 0:
            kept.append(row | {"us": us})
    return kept


def gemm_row(row: dict, itemsize: int) -> tuple[tuple, float]:
    batch = int(row.get("B") or 1)
    m, n, k = int(row["M"]), int(row["N"]), int(row["K"])
    if batch * k * n * itemsize < MIN_WEIGHT_BYTES:
        return (), 0.0
    return (m, batch * n, k), row["us"]


GATED = ("ActivationType.Silu", "ActivationType.Swiglu")
"""The gate-up activations a moe row may have: SiLU-and-multiply, or gpt-oss's clamped
SwiGLU, one more elementwise pass in the same fused kernel."""


def moe_row(row: dict) -> tuple[tuple, float]:
    if row.get("act_type") not in GATED or row.get("use_g1u1") != "1":
        return (), 0.0
    return (int(row["token"]), int(row["model_dim"]), int(row["inter_dim"]), int(row["topk"]),
            int(row["expert"]), 1, 1), row["us"]  # fmt: skip


def check(kind: str, dtype: str, scope: str, chip_id: str, rows: list[list]) -> list[list]:
    """The rows at or below the chip's roofline (the loader's own test); the others named."""
    import numpy as np

    from xpusim.cost.kernel_tables import _ROWS, _moe_rows
    from xpusim.hardware.catalog import load_chip
    from xpusim.ir.dtypes import DType

    array = np.array(rows, dtype=float)
    convert = partial(_moe_rows, routing=ROUTING) if kind == "moe" else _ROWS[kind][0]
    _, roof_s, micros = convert(array, DType(dtype), scope, load_chip(chip_id), "check")
    ok = roof_s <= micros * 1e-6
    for row, fine, r in zip(rows, ok, roof_s, strict=True):
        if not fine:
            print(f"dropped (faster than the {chip_id} roofline {r * 1e6:.3g} us): {row}",
                  file=sys.stderr)  # fmt: skip
    return [row for row, fine in zip(rows, ok, strict=True) if fine]


def _where(where: dict) -> str:
    return f" ({', '.join(f'{k} {v}' for k, v in where.items())})" if where else ""


def _value(v: float) -> str:
    return str(v) if isinstance(v, int) else f"{v:.6g}"


def table_text(repo: str, spec: tuple) -> tuple[str, str]:
    name, kind, dtype, scope, chip, what, sources = spec
    chip_id, chips, cu_num, gpu, also = chip
    found: dict[tuple, float] = {}
    for commit, path, where in sources:
        for row in read_rows(repo, commit, path, cu_num, where):
            key, us = gemm_row(row, 2 if dtype == "bf16" else 1) if kind == "gemm" else moe_row(row)
            if key and (key not in found or us < found[key]):
                found[key] = us
    ordered = sorted(found.items(), key=lambda kv: (kv[0][1:], kv[0][0]))  # shape, then M
    if kind == "gemm":
        rows = [[m, n, k, us] for (m, n, k), us in ordered]
    else:
        rows = [[*key, us] for key, us in ordered]
    rows = check(kind, dtype, scope, chip_id, rows)
    full = [(full_commit(repo, c), p, w) for c, p, w in sources]
    dates = sorted(git(repo, "log", "-1", "--format=%cs", c) for c, _, _ in full)
    source = "; ".join(f"ROCm/aiter {p} at {c[:10]}" + _where(w) for c, p, w in full)
    return kind, toml_table({
        "name": name, "kind": kind, "dtype": dtype, "scope": scope, "measured_on": chip_id,
        "chips": chips, "engine": "aiter", "source": f"{source} (rows cu_num {cu_num})",
        "url": URL.format(commit=full[0][0], path=full[0][1]), "date": dates[-1],
        "conditions": f"{gpu}, ROCm, {what}; the tuner's best kernel per shape{also}",
        **({"routing": ROUTING} if kind == "moe" else {}),
    }, [", ".join(_value(v) for v in r) for r in rows])  # fmt: skip


HEADERS = {
    "gemm": "# Measured dense GEMM kernel times on AMD Instinct, from AMD's kernel library\n"
            "# AITER's tuned configs (ROCm/aiter, MIT), written by\n"
            "# benchmarks/amd_kernel_tables.py (its docstring says which rows are kept); do not\n"
            "# edit by hand.\n"
            "# Rows: [M, N, K, microseconds]: A = M x K, B = K x N, C = M x N BF16; a batched\n"
            "# GEMM of B products as M x (B x N) x K (the script's docstring says why).\n",
    "moe": "# Measured fused-MoE kernel times on AMD Instinct, from AMD's kernel library\n"
           "# AITER's tuned configs (ROCm/aiter, MIT), written by\n"
           "# benchmarks/amd_kernel_tables.py (its docstring says which rows are kept); do not\n"
           "# edit by hand.\n"
           "# Rows: [tokens, hidden, inter, topk, experts, tp, ep, microseconds]: the fused-MoE\n"
           "# kernel (sorting, stage 1 gate-up + SiLU, stage 2 down) as AITER's tuner ran it.\n",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", help="a git clone or bare mirror of ROCm/aiter")
    args = parser.parse_args()
    tables: dict[str, list[str]] = {"gemm": [], "moe": []}
    for spec in TABLES:
        kind, text = table_text(args.repo, spec)
        tables[kind].append(text)
    for kind, out in (("gemm", GEMM_OUT), ("moe", MOE_OUT)):
        write(out, HEADERS[kind], tables[kind])
    return 0


if __name__ == "__main__":
    sys.exit(main())
