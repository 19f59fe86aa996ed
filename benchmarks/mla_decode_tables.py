"""Regenerates src/xpusim/cost/kernel_tables/mla_decode/nvidia-trtllm.toml from aiconfigurator's
measured TensorRT-LLM MLA generation kernels (ai-dynamo/aiconfigurator, Apache-2.0), and
prints how far they run from the roofline xpusim costs an absorbed MLA decode op at.

    python benchmarks/mla_decode_tables.py /path/to/aiconfigurator.git   # a bare mirror

Needs pyarrow (the `parquet` extra) and git; the project reads only the TOML it writes.

aiconfigurator's collector (collector/trtllm/collect_mla.py) runs TensorRT-LLM's MLA
attention (TrtllmAttention with MLA parameters) in the generation phase on one GPU:
`batch_size` sequences, one new token each, attending in the absorbed form over a paged
cache of `step` cached latents per sequence (kv_lora_rank 512 + qk_rope_head_dim 64 per
token, one KV head), `num_heads` query heads on that GPU (the model's heads over its tensor
parallelism), BF16 queries (mla_dtype), the cache in `kv_cache_dtype`; CUDA graphs, the mean
of the runs (collector/helper.py benchmark_with_power). We keep:

- TensorRT-LLM 1.3.0rc20, the version of the decode-attention tables (VERSIONS);
- the heads per GPU of the zoo's DeepSeek-V3/R1 (128 heads of latent 512 + rope 64) at
  tensor parallelism 1 (attention data parallelism runs it whole), 2, 4 and 8 (HEADS). The
  collector logs heads per GPU, and its two MLA models (DeepSeek-V3, Kimi-K2: 64 heads, the
  same latent and rope widths) run the same kernel at the same heads per GPU;
- the sequence counts BATCHES and cache lengths TOKENS.

Rows are [sequences, cached tokens, heads, kv_lora_rank, rope_dim, microseconds], one table
per chip and cache format (bfloat16, fp8; the table's compute format is the cache's, as the
decode_attention tables have it: TensorRT-LLM's FP8-cache MLA kernels on Blackwell run faster
than the BF16 peak allows at 128 heads).
"""

from __future__ import annotations

import sys

import numpy as np
from aiconfigurator_data import KERNEL_TABLES, Measured, Mirror, arguments, table_toml, write

OUT = KERNEL_TABLES / "mla_decode/nvidia-trtllm.toml"
# aiconfigurator chip directory -> (xpusim catalog id, TensorRT-LLM version)
VERSIONS = {
    "h200_sxm": ("h200-sxm", "1.3.0rc20"),
    "b200_sxm": ("b200", "1.3.0rc20"),
}
FORMATS = {"bfloat16": ("bf16", "bf16"), "fp8": ("fp8", "fp8")}  # kv -> (compute, cache)
LATENT, ROPE = 512, 64  # collect_mla.py's scenario (kv_lora_rank, qk_rope_head_dim)
HEADS = {128: "DeepSeek-V3/R1 TP1 or attention DP", 64: "DeepSeek-V3/R1 TP2",
         32: "DeepSeek-V3/R1 TP4", 16: "DeepSeek-V3/R1 TP8"}  # fmt: skip
BATCHES = {1, 4, 16, 64, 256, 1024}
TOKENS = {128, 1024, 4096, 16384}  # step + 1


def table_text(chip_dir: str, kv: str, rows: list[list], measured: Measured) -> str:
    chip_id, version = VERSIONS[chip_dir]
    dtype, cache = FORMATS[kv]
    return table_toml(
        f"aiconfigurator-trtllm-mla-decode-{kv}-{chip_id}", "mla_decode", dtype, cache,
        chip_id, version, f"kv_cache_dtype {kv}", measured,
        f"{chip_id}, TensorRT-LLM {version} MLA attention (TrtllmAttention), generation "
        f"phase, absorbed: one new BF16 query per sequence over a paged {kv} cache of "
        f"{LATENT} + {ROPE} latents a token, one GPU; CUDA graphs "
        f"(collector/trtllm/collect_mla.py); heads per GPU of "
        f'{", ".join(HEADS[h] for h in sorted(HEADS, reverse=True))}', rows)


def report(chip_dir: str, kv: str, rows: list[list]) -> None:
    """Each kept row's fraction of its roofline at 128 heads and 64-1024 sequences, as
    cost/kernel_tables.py judges it."""
    from xpusim.cost.kernel_tables import roofline_seconds
    from xpusim.hardware.catalog import load_chip
    from xpusim.ir.dtypes import DType

    chip_id, _ = VERSIONS[chip_dir]
    dtype = DType.parse(FORMATS[kv][0], "dtype")
    array = np.array(rows, dtype=float)
    _, roof_s, measured_s = roofline_seconds(array, dtype, load_chip(chip_id), chip_dir,
                                             "mla_decode", FORMATS[kv][1])  # fmt: skip
    for row, fraction in zip(rows, roof_s / measured_s, strict=True):
        if row[2] == 128 and row[0] >= 64:
            print(f"  {chip_id} {kv:8s} {row[0]:4d} seqs x {row[1] + 1:5d} tokens: "
                  f"{row[-1]:8.1f} us, fraction {fraction:.2f}")  # fmt: skip


def main() -> int:
    args = arguments(__doc__, OUT).parse_args()
    mirror = Mirror.of(args)
    header = (
        "# Measured MLA decode (generation) attention kernel times of TensorRT-LLM on NVIDIA\n"
        "# chips, from aiconfigurator's kernel database (Apache-2.0), written by\n"
        "# benchmarks/mla_decode_tables.py (its docstring says which rows are kept); do not\n"
        "# edit by hand.\n"
        "# Rows: [sequences, cached tokens, heads, kv_lora_rank, rope_dim, microseconds]: one\n"
        "# generation step's absorbed MLA attention on one GPU. Scope: the cache's format.\n"
        f"# Source commit {mirror.commit}.\n"
    )
    tables = []
    for chip_dir, (_, version) in VERSIONS.items():
        measured = mirror.read(f"{chip_dir}/mla/trtllm/{version}/generation_mla_perf.parquet")
        data = measured.columns
        by_kv: dict[str, dict[tuple, float]] = {}
        for i in range(len(data["latency"])):
            heads, seqs, step = data["num_heads"][i], data["batch_size"][i], data["step"][i]
            if (heads not in HEADS or seqs not in BATCHES or step + 1 not in TOKENS
                    or data["mla_dtype"][i] != "bfloat16" or data["isl"][i] != 1
                    or data["kv_cache_dtype"][i] not in FORMATS):  # fmt: skip
                continue
            key = (seqs, step, heads, LATENT, ROPE)
            by_kv.setdefault(data["kv_cache_dtype"][i], {})[key] = data["latency"][i] * 1e3
        for kv in FORMATS:
            found = by_kv.get(kv)
            if found:
                rows = [[*key, us] for key, us in sorted(found.items(), key=lambda kv_: (
                    -kv_[0][2], kv_[0][:2]))]  # fmt: skip
                report(chip_dir, kv, rows)
                tables.append(table_text(chip_dir, kv, rows, measured))
    write(args.out, header, tables)
    return 0


if __name__ == "__main__":
    sys.exit(main())
