"""How far aiconfigurator's measured TensorRT-LLM decode-attention kernels run from the HBM
roofline xpusim costs a decode attention op at (issue #48, item 3; docs/cost.md "Decode
attention: measured kernels against the roofline").

    python benchmarks/decode_attention_roofline.py /path/to/aiconfigurator.git
    python benchmarks/decode_attention_roofline.py REPO --version b200_sxm=1.3.0rc20

Needs pyarrow (the `parquet` extra) and git. Prints, per chip, KV format and head size, the
distribution of measured fraction of the roofline over the rows whose roofline is at least
MIN_ROOFLINE_S (serving-step scale: a batch of sequences with long contexts), and the rows
of the zoo's GQA shapes at 64-1024 sequences and 1-4k tokens of context.

aiconfigurator's collector (collector/trtllm/collect_attn.py) runs TensorRT-LLM's attention
module in the generation phase: `batch_size` sequences, one new token each, over a paged KV
cache (64-token blocks) holding `step` cached tokens per sequence (`isl` is 1; its own
roofline, perf_database/attention.rs generation_attention_sol, reads kv_len = step). The
roofline is xpusim's for the same op (ir/op.py ATTENTION with a query of one token): the
bytes of Q and the output (BF16) and of K and V (the KV format) at the chip's datasheet HBM
bandwidth; the FLOPs (4 x heads x head_dim x kv_len per sequence) are far below the tensor
peak at every row, so the bytes decide it.

Nothing here is committed as a kernel table: see docs/cost.md for why (the H100 and H200
rows at serving shapes run at or above the roofline, so a floor from them never binds; the
B200 rows run at 0.1 of it, 6x slower than the H200's at the same shape, a kernel path
serving does not take).
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys

import numpy as np

COMMIT = "095f58a51c4ca8e61b66ec108d86f223f8d559ce"
DATA = "aic-core/src/aiconfigurator_core/systems/data"
# aiconfigurator chip directory -> (datasheet HBM bandwidth, bytes/s, TensorRT-LLM version);
# the bandwidths are the catalog's (hardware/chips: H100 SXM 3.35 TB/s, H200 4.8, B200 8.0)
CHIPS = {
    "h100_sxm": (3.35e12, "1.3.0rc10"),
    "h200_sxm": (4.8e12, "1.3.0rc10"),
    "b200_sxm": (8.0e12, "1.3.0rc10"),
}
KV_ITEMSIZE = {"bfloat16": 2, "fp8": 1}
ACTIVATION_ITEMSIZE = 2  # Q in and the output out, BF16 (attn_dtype bfloat16 in every row)
MIN_ROOFLINE_S = 50e-6
SHAPES = {(64, 8, 128): "Llama-70B TP1", (32, 4, 128): "Llama-70B TP2",
          (8, 1, 128): "Llama-70B TP8", (64, 8, 64): "gpt-oss TP1",
          (8, 1, 64): "gpt-oss TP8"}  # fmt: skip


def read_parquet(repo: str, commit: str, path: str) -> dict[str, list]:
    import pyarrow.parquet as pq

    blob = subprocess.run(["git", "-C", repo, "show", f"{commit}:{path}"], check=True,
                          capture_output=True).stdout  # fmt: skip
    return pq.read_table(io.BytesIO(blob)).to_pydict()


def roofline_s(row: dict, bandwidth_bytes_per_s: float) -> float:
    """The HBM time of one generation-attention row: Q and output of every head, K and V
    of every KV head over the cached tokens (capped at the window, where one is set)."""
    kv_len = row["step"] if not row["window_size"] else min(row["step"], row["window_size"])
    heads, kv_heads, head_dim = row["num_heads"], row["num_key_value_heads"], row["head_dim"]
    moved = row["batch_size"] * (2 * heads * head_dim * ACTIVATION_ITEMSIZE
                                 + 2 * kv_heads * kv_len * head_dim
                                 * KV_ITEMSIZE[row["kv_cache_dtype"]])  # fmt: skip
    return moved / bandwidth_bytes_per_s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", help="a git clone or bare mirror of ai-dynamo/aiconfigurator")
    parser.add_argument("--commit", default=COMMIT)
    parser.add_argument("--version", action="append", default=[],
                        help="chip_dir=VERSION: another TensorRT-LLM version's table")
    args = parser.parse_args()
    versions = {chip: version for chip, (_, version) in CHIPS.items()}
    versions.update(dict(v.split("=", 1) for v in args.version))
    for chip_dir, (bandwidth, _) in CHIPS.items():
        path = (f"{DATA}/{chip_dir}/attention/trtllm/{versions[chip_dir]}/"
                "generation_attention_perf.parquet")  # fmt: skip
        data = read_parquet(args.repo, args.commit, path)
        rows = [dict(zip(data, values, strict=True)) for values in zip(*data.values(),
                                                                      strict=True)]  # fmt: skip
        print(f"{chip_dir} TensorRT-LLM {versions[chip_dir]} ({len(rows)} rows)")
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
                print(f"    {SHAPES[shape]:14s} bf16 KV, {row['batch_size']:4d} seqs x "
                      f"{row['step'] + 1:4d} tokens: {row['latency'] * 1e3:6.0f} us measured, "
                      f"roofline {roof * 1e6:5.0f} us, fraction "
                      f"{roof / (row['latency'] * 1e-3):.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
