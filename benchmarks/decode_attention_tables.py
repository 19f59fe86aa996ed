"""Regenerates src/xpusim/cost/kernel_tables/decode_attention/nvidia-trtllm.toml from
aiconfigurator's measured TensorRT-LLM decode-attention tables (ai-dynamo/aiconfigurator,
Apache-2.0), and prints how far the measured kernels run from the HBM roofline xpusim costs a
decode attention op at (docs/cost.md "Decode attention kernel tables").

    python benchmarks/decode_attention_tables.py /path/to/aiconfigurator.git  # a bare mirror
    python benchmarks/decode_attention_tables.py REPO --report-version h200_sxm=1.3.0rc10

Needs pyarrow (the `parquet` extra) and git; the project reads only the TOML it writes.

aiconfigurator's collector (collector/trtllm/collect_attn.py) runs TensorRT-LLM's attention
module in the generation phase on one GPU: `batch_size` sequences, one new token each, over
a paged KV cache of 64-token blocks holding `step` cached tokens per sequence (`isl` is 1;
its own roofline, perf_database/attention.rs generation_attention_sol, reads kv_len = step);
BF16 queries; 10 warm-ups, the mean of 6 runs. We keep:

- TensorRT-LLM 1.3.0rc20 (VERSIONS). Not 1.3.0rc10, the MoE tables' version: its H100 and
  H200 rows at serving shapes run up to 1.6x faster than the datasheet HBM bandwidth can
  stream their cache, and its B200 rows at 0.1 of it, 6x slower than the H200's at the same
  shape (print them with --report-version); the rc20 rows are consistent across the chips.
- full-context rows (window_size 0) of the zoo's GQA head shapes (SHAPES), the sequence
  counts BATCHES and the cache lengths TOKENS.

Rows are [sequences, cached tokens, heads, kv heads, head_dim, microseconds], one table per
chip and KV format (bfloat16, fp8; TensorRT-LLM runs FP8 attention over an FP8 cache).
"""

from __future__ import annotations

import sys

import numpy as np
from aiconfigurator_data import KERNEL_TABLES, Measured, Mirror, arguments, table_toml, write

OUT = KERNEL_TABLES / "decode_attention/nvidia-trtllm.toml"
# aiconfigurator chip directory -> (xpusim catalog id, datasheet HBM bandwidth in bytes/s as
# the catalog has it, TensorRT-LLM version)
CHIPS = {
    "h100_sxm": ("h100-sxm", 3.35e12, "1.3.0rc20"),
    "h200_sxm": ("h200-sxm", 4.8e12, "1.3.0rc20"),
    "b200_sxm": ("b200", 8.0e12, "1.3.0rc20"),
}
FORMATS = {"bfloat16": ("bf16", "bf16"), "fp8": ("fp8", "fp8")}  # kv -> (compute, cache)
BATCHES = {1, 4, 16, 64, 256, 1024}
TOKENS = {128, 1024, 4096, 16384}
KV_ITEMSIZE = {"bfloat16": 2, "fp8": 1}
ACTIVATION_ITEMSIZE = 2  # Q in and the output out, BF16 (attn_dtype bfloat16 in every row)
MIN_ROOFLINE_S = 50e-6
# (heads, kv heads, head_dim) on one GPU -> the zoo models and tensor-parallel splits it is
SHAPES = {(64, 8, 128): "Llama-3-70B TP1", (32, 4, 128): "Llama-3-70B TP2",
          (8, 1, 128): "Llama-3-70B TP8", (32, 8, 128): "Llama-3-8B TP1",
          (64, 8, 64): "gpt-oss TP1", (8, 1, 64): "gpt-oss TP8"}  # fmt: skip


def roofline_s(row: dict, bandwidth_bytes_per_s: float) -> float:
    """The HBM time of one generation-attention row: Q and output of every head, K and V
    of every KV head over the cached tokens (capped at the window, where one is set)."""
    kv_len = row["step"] if not row["window_size"] else min(row["step"], row["window_size"])
    heads, kv_heads, head_dim = row["num_heads"], row["num_key_value_heads"], row["head_dim"]
    moved = row["batch_size"] * (2 * heads * head_dim * ACTIVATION_ITEMSIZE
                                 + 2 * kv_heads * kv_len * head_dim
                                 * KV_ITEMSIZE[row["kv_cache_dtype"]])  # fmt: skip
    return moved / bandwidth_bytes_per_s


def table_text(chip_dir: str, kv: str, rows: list[list], measured: Measured) -> str:
    chip_id, _, version = CHIPS[chip_dir]
    dtype, cache = FORMATS[kv]
    return table_toml(
        f"aiconfigurator-trtllm-decode-attention-{kv}-{chip_id}", "decode_attention", dtype,
        cache, chip_id, version, f"kv_cache_dtype {kv}, window_size 0", measured,
        f"{chip_id}, TensorRT-LLM {version} PyTorch attention module, generation "
        f"phase: one new BF16 token per sequence over a paged {kv} KV cache of 64-token "
        f"blocks, one GPU; 10 warm-ups, mean of 6 runs (collector/trtllm/collect_attn.py); "
        f'head shapes of {", ".join(sorted(set(SHAPES.values())))}', rows)


def report(chip_dir: str, version: str, rows: list[dict]) -> None:
    """The measured fraction of the roofline, per KV format and head size, over the rows of
    serving-step scale, and the rows of the zoo's shapes at 64-1024 sequences."""
    bandwidth = CHIPS[chip_dir][1]
    print(f"{chip_dir} TensorRT-LLM {version} ({len(rows)} rows)")
    groups: dict[tuple, list[float]] = {}
    for row in rows:
        roof = roofline_s(row, bandwidth)
        gqa = row["num_heads"] != row["num_key_value_heads"]
        if gqa and not row["window_size"] and roof >= MIN_ROOFLINE_S:
            key = (row["kv_cache_dtype"], row["head_dim"])
            groups.setdefault(key, []).append(roof / (row["latency"] * 1e-3))
    for (kv, head_dim), fractions in sorted(groups.items()):
        f = np.array(fractions)
        print(f"  {kv:8s} head_dim {head_dim:3d}: {len(f):3d} rows, fraction of roofline "
              f"p10 {np.percentile(f, 10):.2f} median {np.median(f):.2f} "
              f"p90 {np.percentile(f, 90):.2f}")  # fmt: skip
    for row in rows:
        shape = (row["num_heads"], row["num_key_value_heads"], row["head_dim"])
        if (shape in SHAPES and row["batch_size"] in (64, 256, 1024)
                and row["step"] + 1 in (1024, 4096) and not row["window_size"]
                and row["kv_cache_dtype"] == "bfloat16"):  # fmt: skip
            roof = roofline_s(row, bandwidth)
            print(f"    {SHAPES[shape]:16s} bf16 KV, {row['batch_size']:4d} seqs x "
                  f"{row['step'] + 1:4d} tokens: {row['latency'] * 1e3:6.0f} us measured, "
                  f"roofline {roof * 1e6:5.0f} us, fraction "
                  f"{roof / (row['latency'] * 1e-3):.2f}")  # fmt: skip


def load(mirror: Mirror, chip_dir: str, version: str) -> Measured:
    return mirror.read(f"{chip_dir}/attention/trtllm/{version}/generation_attention_perf.parquet")


def main() -> int:
    parser = arguments(__doc__, OUT)
    parser.add_argument("--report-version", action="append", default=[],
                        help="chip_dir=VERSION: also report another TensorRT-LLM version")
    args = parser.parse_args()
    mirror = Mirror.of(args)
    header = (
        "# Measured decode-attention kernel times of TensorRT-LLM on NVIDIA chips, from\n"
        "# aiconfigurator's kernel database (Apache-2.0), written by\n"
        "# benchmarks/decode_attention_tables.py (its docstring says which rows are kept); do\n"
        "# not edit by hand.\n"
        "# Rows: [sequences, cached tokens, heads, kv heads, head_dim, microseconds]: one\n"
        "# generation step's attention on one GPU. Scope: the KV cache's format.\n"
        f"# Source commit {mirror.commit}.\n"
    )
    tables = []
    for chip_dir, (_, _, version) in CHIPS.items():
        measured = load(mirror, chip_dir, version)
        rows = measured.records()
        report(chip_dir, version, rows)
        by_kv: dict[str, dict[tuple, float]] = {}
        for row in rows:
            shape = (row["num_heads"], row["num_key_value_heads"], row["head_dim"])
            if (row["window_size"] or shape not in SHAPES or row["batch_size"] not in BATCHES
                    or row["step"] + 1 not in TOKENS or row["attn_dtype"] != "bfloat16"
                    or row["kv_cache_dtype"] not in FORMATS):  # fmt: skip
                continue
            key = (row["batch_size"], row["step"], *shape)
            by_kv.setdefault(row["kv_cache_dtype"], {})[key] = row["latency"] * 1e3
        for kv in FORMATS:
            found = by_kv.get(kv)
            if found:
                table = [[*key, us] for key, us in sorted(found.items(), key=lambda kv_: (
                    kv_[0][2:], kv_[0][:2]))]  # fmt: skip
                tables.append(table_text(chip_dir, kv, table, measured))
    for spec in args.report_version:
        chip_dir, version = spec.split("=", 1)
        report(chip_dir, version, load(mirror, chip_dir, version).records())
    write(args.out, header, tables)
    return 0


if __name__ == "__main__":
    sys.exit(main())
