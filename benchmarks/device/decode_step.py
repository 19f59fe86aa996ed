"""One decode step of a Llama-2-70B-shaped layer stack at large batch, measured on an NVIDIA GPU.

    python benchmarks/device/decode_step.py --out decode-steps.csv       # on the GPU
    python benchmarks/device/decode_step.py --compare decode-steps.csv   # xpusim beside it

The question it answers (docs/validation.md, "The serving engines' published largest
batch"): at the 800-900 sequences MLPerf's engines run, is a decode step's cost what xpusim
charges, or more? Each step is what a plain engine runs per layer, no fusion beyond what
the libraries do: RMSNorm, the activations quantized to FP8 (one scale per tensor), the QKV
projection as an FP8 GEMM (cuBLASLt through `torch._scaled_mm`, BF16 out), rotary
embedding as its elementwise work, attention of each sequence's one new query against its
KV cache (BF16; grouped-query: the 8 query heads sharing a KV head are 8 queries of one
flash-attention call), the output projection, a residual add, RMSNorm, FP8 gate and up
projections, SiLU and product, the FP8 down projection and a residual add. LAYERS distinct
layers (0.86 GB of FP8 weights each, so that weights and caches stream from HBM, not L2)
are captured in one CUDA graph, as engines run decode steps, and the graph replayed; the
median time per layer is written. `--compare` sets xpusim's decode step of the same model,
batch, context and formats beside it (on the H200, any machine): the decode phase's layer
ops, summed over their counts, over the layers. Weights and caches are random; no model is
loaded.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import sys
from pathlib import Path

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, FFN = 8192, 64, 8, 128, 28672  # llama-2-70b
LAYERS = 4
CASES = [(1, 1024), (64, 1024), (256, 1024), (512, 512), (800, 400), (896, 384)]  # batch, ctx


PARTS = ("layer", "attention", "rest")  # a whole layer; its attention alone; all but it


def layer_stack(batch: int, context: int, part: str = "layer"):  # -> runs LAYERS layers
    import torch
    import torch.nn.functional as F

    fp8, bf16, dev = torch.float8_e4m3fn, torch.bfloat16, "cuda"
    one = torch.ones((), device=dev)

    def weight(k: int, n: int):  # column-major, as _scaled_mm takes its second operand
        return torch.randn(n, k, device=dev, dtype=bf16).to(fp8).t()

    layers = [dict(qkv=weight(HIDDEN, (HEADS + 2 * KV_HEADS) * HEAD_DIM),
                   o=weight(HIDDEN, HIDDEN), gate_up=weight(HIDDEN, 2 * FFN),
                   down=weight(FFN, HIDDEN),
                   k=torch.randn(batch, KV_HEADS, context, HEAD_DIM, device=dev, dtype=bf16),
                   v=torch.randn(batch, KV_HEADS, context, HEAD_DIM, device=dev, dtype=bf16),
                   norm1=torch.ones(HIDDEN, device=dev, dtype=bf16),
                   norm2=torch.ones(HIDDEN, device=dev, dtype=bf16))
              for _ in range(LAYERS)]  # fmt: skip
    x = torch.randn(batch, HIDDEN, device=dev, dtype=bf16)
    rope = torch.randn(batch, (HEADS + KV_HEADS) * HEAD_DIM, device=dev, dtype=bf16)
    group = HEADS // KV_HEADS

    def gemm(a, w):
        return torch._scaled_mm(a.to(fp8), w, scale_a=one, scale_b=one, out_dtype=bf16)

    def step():
        h = x
        for lw in layers:
            if part == "attention":
                q = rope[:, : HEADS * HEAD_DIM].reshape(batch, KV_HEADS, group, HEAD_DIM)
                F.scaled_dot_product_attention(q, lw["k"], lw["v"])
                continue
            y = F.rms_norm(h, (HIDDEN,), lw["norm1"])
            qkv = gemm(y, lw["qkv"])
            qk = qkv[:, : (HEADS + KV_HEADS) * HEAD_DIM] * rope  # rotary's multiply-adds
            q = qk[:, : HEADS * HEAD_DIM].reshape(batch, KV_HEADS, group, HEAD_DIM)
            a = q if part == "rest" else F.scaled_dot_product_attention(q, lw["k"], lw["v"])
            h = h + gemm(a.reshape(batch, HIDDEN), lw["o"])
            y = F.rms_norm(h, (HIDDEN,), lw["norm2"])
            gate, up = gemm(y, lw["gate_up"]).chunk(2, dim=-1)
            h = h + gemm(F.silu(gate) * up, lw["down"])
        return h

    return step


def xpusim_layer_s(batch: int, context: int, chip: str, part: str = "layer") -> float:
    """xpusim's time per layer of one decode step at this batch and context, in the formats
    measured: FP8 GEMMs, BF16 attention and KV cache (fitting the memory or not); `part`
    as PARTS says."""
    import xpusim

    result = xpusim.simulate(xpusim.model("llama-2-70b"), xpusim.target(chip), batch=batch,
                             prompt=context, gen=2, precision="fp8",
                             attention_precision="bf16", kv_precision="bf16")  # fmt: skip
    wanted = {"layer": lambda kind: True, "attention": lambda kind: kind == "attention",
              "rest": lambda kind: kind != "attention"}[part]  # fmt: skip
    layers = sum(op.time_s * op.count for op in result.ops if op.phase == "decode"
                 and op.name.startswith("layers.") and wanted(op.kind))  # fmt: skip
    return layers / xpusim.model("llama-2-70b").num_layers


def compare(path: str, chip: str) -> None:
    print(f"{'batch':>5} {'context':>7} {'part':9} {'measured':>10} {'xpusim':>10} {'ratio':>6}")
    with open(path) as f:
        for row in csv.DictReader(f):
            batch, context, part = int(row["batch"]), int(row["context"]), row.get("part", "layer")
            measured = float(row["seconds_per_layer"])
            got = xpusim_layer_s(batch, context, chip, part)
            print(f"{batch:5d} {context:7d} {part:9} {measured * 1e6:8.1f}us {got * 1e6:8.1f}us "
                  f"{got / measured:6.2f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="CSV to write the GPU's times to")
    parser.add_argument("--compare", help="a CSV this wrote: xpusim's times beside its")
    parser.add_argument("--chip", default="h200-sxm", help="with --compare: xpusim's chip")
    args = parser.parse_args()
    if args.compare:
        compare(args.compare, args.chip)
        return
    if not args.out:
        parser.error("give --out (on a GPU) or --compare")
    import torch

    sys.path.insert(0, str(Path(__file__).parent))
    from measure import captured, median_replay_s, source_of, write_rows

    rows = []
    for (batch, context), part in itertools.product(CASES, PARTS):
        step = layer_stack(batch, context, part)
        seconds = median_replay_s(captured(step, 1).replay, 1, 20) / LAYERS
        kv_bytes = 2 * batch * KV_HEADS * context * HEAD_DIM * 2
        rows.append(dict(model="llama-2-70b", batch=batch, context=context, part=part,
                         gemm="fp8", attention="bf16", kv_cache="bf16",
                         seconds_per_layer=seconds, kv_bytes_per_layer=kv_bytes,
                         source=source_of("decode_step.py")))
        print(f"batch {batch:4d} context {context:5d} {part:9s}: {seconds * 1e6:8.1f} us a layer",
              file=sys.stderr)  # fmt: skip
        del step
        torch.cuda.empty_cache()
    write_rows(args.out, rows)  # each the median of 20 replays


if __name__ == "__main__":
    main()
