"""Regenerates src/xpusim/cost/kernel_tables/prefill_attention/<chip>.toml and
kernel_tables/mla_prefill/<chip>.toml (one file a chip, so that a run parses its own chip's
alone: kernel_tables.CHIP_FILES) from aiconfigurator's measured TensorRT-LLM
context (prefill) attention tables (ai-dynamo/aiconfigurator, Apache-2.0), and prints how
far the measured kernels run from the roofline, by sequence length, next to the fraction
xpusim's calibrations assume (docs/cost.md "Prefill attention kernel tables").

    python benchmarks/prefill_attention_tables.py /path/to/aiconfigurator.git  # a bare mirror

Needs pyarrow (the `parquet` extra) and git; the project reads only the TOML it writes.

aiconfigurator's collectors run TensorRT-LLM's attention module in the context phase on one
GPU: `batch_size` prompts of `isl` tokens each, causal, no cached prefix (`step` 0 in every
row); GQA in collector/trtllm/collect_attn.py, DeepSeek's MLA in collect_mla.py (the
decompressed form: `num_heads` query and key heads per GPU, keys 128 + 64 rope wide, values
128). We keep, of TensorRT-LLM 1.3.0rc20 (the decode tables' version):

- GQA: full-context rows (window_size 0) of the zoo's head shapes per GPU (SHAPES), BF16
  attention over a BF16 cache and FP8 over FP8 (TensorRT-LLM's FP8 context FMHA; the BF16
  x FP8-cache rows, which run past the BF16 peak, are that kernel too, and are left out),
  the prompt counts BATCHES and lengths TOKENS;
- MLA: BF16 rows (the only mla_dtype measured) over a BF16 and over an FP8 cache at
  DeepSeek-V3/R1's heads per GPU (128/64/32/16: TP1 or attention DP, TP2, TP4, TP8),
  BATCHES and MLA_TOKENS. Both judged at the BF16 peak: the FP8-cache rows run 7-20%
  faster than the BF16 ones but never past that peak (at most 0.74 of it), so an FP8
  prefill MLA (the decompressed keys in FP8) is priced by them at the BF16 peak.

Every kept row is checked against its roofline (kernel_tables.roofline_seconds refuses one
faster); rows of the whole files that run faster than it are counted and printed.
"""

from __future__ import annotations

import sys

import numpy as np
from aiconfigurator_data import KERNEL_TABLES, Mirror, arguments, table_toml, write

VERSION = "1.3.0rc20"
# aiconfigurator chip directory -> (catalog id, datasheet dense BF16 and FP8 peaks in FLOP/s
# and HBM bandwidth in bytes/s as the catalog has them; the loader re-judges every row on
# the catalog's own figures)
CHIPS = {
    "h100_sxm": ("h100-sxm", 989e12, 1979e12, 3.35e12),
    "h200_sxm": ("h200-sxm", 989e12, 1979e12, 4.8e12),
    "b200_sxm": ("b200", 2250e12, 4500e12, 7.7e12),
}
FORMATS = {("bfloat16", "bfloat16"): ("bf16", "bf16"),
           ("fp8", "fp8"): ("fp8", "fp8")}  # (attn, kv) -> (compute, cache)  # fmt: skip
ITEMSIZE = {"bfloat16": 2, "fp8": 1}
BATCHES = {1, 4, 16}
TOKENS = {128, 512, 1024, 2048, 4096, 8192, 16384}
MLA_TOKENS = TOKENS | {32768}
# (heads, kv heads, head_dim) on one GPU -> the zoo models and tensor-parallel splits it is
SHAPES = {(64, 8, 128): "Llama-3-70B/Qwen3-32B TP1", (32, 4, 128): "Llama-3-70B TP2",
          (16, 2, 128): "Llama-3-70B TP4", (8, 1, 128): "Llama-3-70B TP8",
          (32, 8, 128): "Llama-3-8B/Mixtral TP1", (16, 1, 128): "Llama-3-405B TP8",
          (64, 4, 128): "Qwen3-235B TP1", (64, 8, 64): "gpt-oss TP1",
          (8, 1, 64): "gpt-oss TP8", (32, 32, 128): "Llama-2-7B TP1",
          (16, 16, 256): "GPT-J TP1"}  # fmt: skip
MLA_HEADS = {128: "TP1/DP", 64: "TP2", 32: "TP4", 16: "TP8"}
MLA_QK, MLA_V = 192, 128  # DeepSeek-V3: qk_nope 128 + rope 64; v_head_dim 128
MAX_FP8_SLOWDOWN = 2.0
"""An FP8-cache MLA row this many times slower than the BF16-cache row of its shape is a
glitch of the measurement, left out: the others run 0.77-1.69x theirs (H100), and one row
of 25x (4 prompts x 1,024 tokens x 16 heads on the H100) set its FLOPs node's fraction
alone."""
ASSUMED = {"h100-sxm": 0.381, "h200-sxm": 0.352, "b200": 0.776}
"""The attention efficiency xpusim's calibrations fit (hardware/calibration/*.json
`attention`: FlashAttention-3 Fig. 5 on the H100, measured H200 rows; the B200 has no
attention fit and takes its matmul efficiency, catalog b200.toml), beside the data."""


def pairs(tokens: float) -> float:
    """Causal query-key pairs of one prompt (ir/op.attention_pairs, no prefix)."""
    return tokens * (tokens + 1) / 2


def gqa_roofline_s(row: dict, chip_dir: str) -> float:
    _, bf16, fp8, bandwidth = CHIPS[chip_dir]
    b, s, h, kvh, d = (row[k] for k in ("batch_size", "isl", "num_heads",
                                        "num_key_value_heads", "head_dim"))  # fmt: skip
    flops = 4 * b * h * d * pairs(s)
    moved = b * s * d * (2 * h * ITEMSIZE[row["attn_dtype"]]
                         + 2 * kvh * ITEMSIZE[row["kv_cache_dtype"]])  # fmt: skip
    return max(flops / (fp8 if row["attn_dtype"] == "fp8" else bf16), moved / bandwidth)


def mla_roofline_s(row: dict, chip_dir: str) -> float:
    _, bf16, _, bandwidth = CHIPS[chip_dir]
    b, s, h = row["batch_size"], row["isl"], row["num_heads"]
    flops = 2 * b * h * (MLA_QK + MLA_V) * pairs(s)
    moved = b * s * h * (2 * MLA_QK + 2 * MLA_V) * ITEMSIZE["bfloat16"]
    return max(flops / bf16, moved / bandwidth)


def report(chip_dir: str, label: str, rows: list[dict], roofline, shape_of) -> None:
    """Rows past the roofline, and the fraction of it by prompt length at one prompt, per
    kept shape (the model's flash attention efficiency beside it)."""
    full = [r for r in rows if not r.get("window_size")]  # a window's pairs are fewer
    fast = [r for r in full if gqa_or_mla_fraction(r, chip_dir, roofline) > 1]
    print(f"{chip_dir} {label}: {len(full)} full-context rows, {len(fast)} faster than the "
          "roofline (left out)")
    for r in fast[:5]:
        print(f"    refused: {[r[k] for k in r if k not in ('framework', 'version', 'device')]}"
              f" at {gqa_or_mla_fraction(r, chip_dir, roofline):.2f}")  # fmt: skip
    by_shape: dict[str, dict[int, float]] = {}
    for r in rows:
        name = shape_of(r)
        if name and r["batch_size"] == 1 and r["isl"] in (1024, 4096, 8192, 16384, 32768):
            by_shape.setdefault(name, {})[r["isl"]] = gqa_or_mla_fraction(r, chip_dir, roofline)
    assumed = ASSUMED.get(CHIPS[chip_dir][0])
    for name, fractions in sorted(by_shape.items()):
        cells = ", ".join(f"{s // 1024}k {f:.2f}" for s, f in sorted(fractions.items()))
        print(f"    {name:40s} one prompt: {cells}"
              + (f" (xpusim assumes {assumed})" if assumed else ""))  # fmt: skip


def gqa_or_mla_fraction(row: dict, chip_dir: str, roofline) -> float:
    return roofline(row, chip_dir) / (row["latency"] * 1e-3)


def gqa_shape(row: dict) -> str | None:
    shape = (row["num_heads"], row["num_key_value_heads"], row["head_dim"])
    if (row["window_size"] or (row["attn_dtype"], row["kv_cache_dtype"]) not in FORMATS
            or row["kernel_source"] != "torch_flow"):  # fmt: skip
        return None
    name = SHAPES.get(shape)
    return name and f"{name} {FORMATS[row['attn_dtype'], row['kv_cache_dtype']][0]}"


def mla_shape(row: dict) -> str | None:
    if row["mla_dtype"] != "bfloat16" or row["kv_cache_dtype"] not in ITEMSIZE:
        return None
    name = MLA_HEADS.get(row["num_heads"])
    return name and f"DeepSeek MLA {row['num_heads']} heads ({name}) {row['kv_cache_dtype']}"


def main() -> int:
    args = arguments(__doc__, KERNEL_TABLES).parse_args()  # --out: the kernel_tables folder
    mirror = Mirror.of(args)
    header = ("# Measured {what} kernel times of TensorRT-LLM on NVIDIA chips, from\n"
              "# aiconfigurator's kernel database (Apache-2.0), written by\n"
              "# benchmarks/prefill_attention_tables.py (its docstring says which rows are "
              "kept); do\n# not edit by hand.\n# Rows: {rows}:\n# one causal prefill of "
              "`sequences` prompts of `tokens` each, no cached prefix, on one GPU.\n"
              f"# Scope: {{scope}}.\n# Source commit {mirror.commit}.\n")  # fmt: skip
    for chip_dir, (chip_id, *_) in CHIPS.items():
        gqa_header = header.format(what="prefill (context) attention",
                                   rows="[sequences, tokens, heads, kv heads, head_dim, "
                                        "microseconds]",
                                   scope="the attention kernel's format (BF16 over a "
                                         "BF16 cache, FP8 over FP8)")  # fmt: skip
        mla_header = header.format(what="MLA prefill (context) attention",
                                   rows="[sequences, tokens, heads, qk head_dim, v head_dim, "
                                        "microseconds]",
                                   scope="the decompressed keys' and values' format")  # fmt: skip
        gqa_tables, mla_tables = [], []
        measured = mirror.read(
            f"{chip_dir}/attention/trtllm/{VERSION}/context_attention_perf.parquet")
        rows = measured.records()
        report(chip_dir, "context attention", rows, gqa_roofline_s, gqa_shape)
        for (attn, kv), (dtype, cache) in FORMATS.items():
            table = [[r["batch_size"], r["isl"], r["num_heads"], r["num_key_value_heads"],
                      r["head_dim"], r["latency"] * 1e3] for r in rows
                     if gqa_shape(r) and (r["attn_dtype"], r["kv_cache_dtype"]) == (attn, kv)
                     and r["batch_size"] in BATCHES and r["isl"] in TOKENS
                     and gqa_or_mla_fraction(r, chip_dir, gqa_roofline_s) <= 1]  # fmt: skip
            table.sort(key=lambda r: (r[2:5], r[:2]))
            gqa_tables.append(table_toml(
                f"aiconfigurator-trtllm-prefill-attention-{kv}-{chip_id}", "prefill_attention",
                dtype, cache, chip_id, VERSION, f"attn_dtype {attn}, kv_cache_dtype {kv}, "
                "window_size 0", measured,
                f"{chip_id}, TensorRT-LLM {VERSION} PyTorch attention module, context phase: "
                f"causal {attn} attention over prompts written to a paged {kv} KV cache, no "
                "cached prefix, one GPU (collector/trtllm/collect_attn.py); head shapes of "
                f'{", ".join(sorted(set(SHAPES.values())))}', table))
        measured = mirror.read(f"{chip_dir}/mla/trtllm/{VERSION}/context_mla_perf.parquet")
        rows = measured.records()
        report(chip_dir, "context MLA", rows, mla_roofline_s, mla_shape)
        bf16_ms = {(r["batch_size"], r["isl"], r["num_heads"]): r["latency"] for r in rows
                   if mla_shape(r) and r["kv_cache_dtype"] == "bfloat16"}  # fmt: skip
        for kv, cache in (("bfloat16", "bf16"), ("fp8", "fp8")):
            table = [[r["batch_size"], r["isl"], r["num_heads"], MLA_QK, MLA_V,
                      r["latency"] * 1e3] for r in rows
                     if mla_shape(r) and r["kv_cache_dtype"] == kv and r["batch_size"] in BATCHES
                     and r["isl"] in MLA_TOKENS
                     and gqa_or_mla_fraction(r, chip_dir, mla_roofline_s) <= 1]  # fmt: skip
            glitches = [row for row in table
                        if row[-1] > MAX_FP8_SLOWDOWN * 1e3 * bf16_ms.get(tuple(row[:3]), np.inf)]
            for row in glitches:
                print(f"    left out, {MAX_FP8_SLOWDOWN}x slower than its BF16-cache row: {row}")
            table = [row for row in table if row not in glitches]
            table.sort(key=lambda r: (r[2], r[:2]))
            mla_tables.append(table_toml(
                f"aiconfigurator-trtllm-mla-prefill-{kv}-{chip_id}", "mla_prefill", "bf16",
                cache, chip_id, VERSION, f"mla_dtype bfloat16, kv_cache_dtype {kv}", measured,
                f"{chip_id}, TensorRT-LLM {VERSION} MLA attention module, context phase: "
                "causal attention of the decompressed keys (128 + 64 rope) and values (128) "
                f"of DeepSeek-V3's MLA, BF16 module over a {kv} latent cache, judged at the "
                "BF16 peak, no cached prefix, one GPU (collector/trtllm/collect_mla.py); "
                "128/64/32/16 heads per GPU", table))
        write(args.out / "prefill_attention" / f"{chip_id}.toml", gqa_header, gqa_tables)
        write(args.out / "mla_prefill" / f"{chip_id}.toml", mla_header, mla_tables)
    return 0


if __name__ == "__main__":
    sys.exit(main())
