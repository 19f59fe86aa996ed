"""Measure the microbenchmarks `xpusim calibrate` fits, on an NVIDIA GPU with PyTorch.

    python benchmarks/device/measure.py --out h200-measured.csv [--quick]
    xpusim calibrate h200-measured.csv --chip h200-sxm \
        --out src/xpusim/hardware/calibration/h200-sxm.json

Rows (CSV columns kind, dtype, batch, m, n, k, bytes, seconds, source):
* gemm: a sweep of matmul shapes in bf16 (and fp8 through torch._scaled_mm where the GPU has
  it), from 256^3 to 8192^3, including the skinny shapes of decode (m = 1..64);
* copy: device-to-device copies of 256 MB to 4 GB (bytes counts the read and the write);
* attention: scaled_dot_product_attention forward (flash backend), non-causal, 16 heads of
  128, batch x seq = 16k, as in the FlashAttention papers;
* decode: one llama-2-7b-shaped decode step (32 layers of the four projections as GEMVs,
  bf16, random weights); kept for comparison with xpusim's prediction, never fitted.

Times are CUDA-event medians over repeated replays of a CUDA graph of back-to-back launches
(as an engine with CUDA graphs runs them: no host launch gaps between kernels), divided by
the launches in the graph; where a graph cannot be captured, of eager launches. Needs torch
with CUDA; nothing here runs in CI.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import itertools
import math
import statistics
import sys
from collections.abc import Callable

GEMM_SHAPES = [(1, 4096, 4096), (8, 4096, 4096), (16, 4096, 4096), (64, 4096, 11008),
               (256, 2048, 4096), (512, 4096, 4096), (1024, 2048, 2048), (2048, 2048, 2048),
               (4096, 4096, 4096), (8192, 8192, 8192), (4096, 512, 512), (256, 1024, 256),
               # llama-2-70b's projections at decode, ridge and prefill row counts
               (1, 8192, 28672), (16, 8192, 8192), (128, 8192, 28672), (2048, 8192, 8192),
               (4096, 28672, 8192)]  # fmt: skip
COLD_BYTES = 256 << 20  # operands cycled through per GEMM shape: five times the H200's L2
GRAPH_S = 2e-3  # a timed graph replay lasts at least this long: events then cost nothing
COPY_BYTES = [256 << 20, 1 << 30, 4 << 30]
ATTENTION_SEQS = [512, 1024, 2048, 4096, 8192, 16384]


def time_cuda(fn: Callable[[], object], repeats: int) -> float:
    """Seconds one fn() takes on the GPU: the median over replays of a CUDA graph of enough
    back-to-back calls to last GRAPH_S, per call (eager calls where capture fails)."""

    eager = median_replay_s(fn, 1, repeats)
    launches = min(200, int(GRAPH_S / eager))
    if launches < 2:  # a call long enough that host gaps cost nothing: as it runs eagerly
        return eager  # (a captured copy of 1 GB and more ran at 2.7 TB/s, eagerly 4+)
    try:
        graph = captured(fn, launches)
    except RuntimeError as error:  # not capturable: eager launches, host gaps included
        print(f"  no CUDA graph ({error}); eager", file=sys.stderr)
        return eager
    return median_replay_s(graph.replay, launches, repeats)


def captured(fn: Callable[[], object], launches: int):  # -> torch.cuda.CUDAGraph
    """A CUDA graph of `launches` back-to-back calls of fn, warmed up on a side stream as
    capture requires."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(launches):
            fn()
    return graph


def median_replay_s(fn: Callable[[], object], launches: int, repeats: int) -> float:
    """Seconds per launch: the median over `repeats` timed calls of fn, each of which makes
    `launches` launches, after three untimed calls."""
    import torch

    for _ in range(3):
        fn()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / launches)
    return statistics.median(times)


def row(kind: str, dtype: str, batch: int, m: int, n: int, k: int, nbytes: float,
        seconds: float) -> dict:  # fmt: skip
    return dict(kind=kind, dtype=dtype, batch=batch, m=m, n=n, k=k, bytes=nbytes or "",
                seconds=seconds)  # fmt: skip


def gemms(repeats: int) -> list[dict]:
    """Each shape's GEMM, in bf16 and fp8. Successive launches take successive copies of
    the operands, enough copies to hold COLD_BYTES, so that each reads its operands from
    HBM as a model's layers do, not from the L2 the last launch left them in (a 4096 x 4096
    bf16 weight is 34 MB; the H200's L2 holds 50 MB)."""
    import torch

    rows = []
    for m, n, k in GEMM_SHAPES:
        copies = max(1, math.ceil(COLD_BYTES / (2 * (m * k + k * n + m * n))))
        a = [torch.randn(m, k, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
        b = [torch.randn(k, n, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
        pairs = itertools.cycle(zip(a, b, strict=True))

        def bf16(pairs=pairs):
            x, w = next(pairs)
            return x @ w

        rows.append(row("gemm", "bf16", 1, m, n, k, 0, time_cuda(bf16, repeats)))
        if hasattr(torch, "_scaled_mm") and torch.cuda.get_device_capability() >= (8, 9):
            one = torch.ones((), device="cuda")
            if m % 16 == 0:  # _scaled_mm needs dimensions divisible by 16
                # the second operand column-major, as _scaled_mm takes it
                pairs8 = itertools.cycle([(x.to(torch.float8_e4m3fn),
                                           w.t().contiguous().to(torch.float8_e4m3fn).t())
                                          for x, w in zip(a, b, strict=True)])  # fmt: skip

                def fp8(pairs=pairs8, one=one):
                    x, w = next(pairs)
                    return torch._scaled_mm(x, w, scale_a=one, scale_b=one,
                                            out_dtype=torch.bfloat16)  # fmt: skip

                rows.append(row("gemm", "fp8", 1, m, n, k, 0, time_cuda(fp8, repeats)))
        del a, b, pairs
    return rows


def copies(repeats: int) -> list[dict]:
    """Copies (read + write) and BabelStream's triad (a = b + s x c: two reads, one write),
    the latter an elementwise kernel on the SMs whatever the copy's path."""
    import torch

    rows = []
    for nbytes in COPY_BYTES:
        src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        seconds = time_cuda(lambda src=src, dst=dst: dst.copy_(src), repeats)
        rows.append(row("copy", "", 1, 0, 0, 0, 2 * nbytes, seconds))  # read + write
        del src, dst
        a, b, c = (torch.ones(nbytes // 4, dtype=torch.float32, device="cuda") for _ in range(3))
        seconds = time_cuda(lambda a=a, b=b, c=c: torch.add(b, c, alpha=0.4, out=a), repeats)
        rows.append(row("copy", "", 1, 0, 0, 0, 3 * nbytes, seconds))
        del a, b, c
    return rows


def attention(repeats: int) -> list[dict]:
    import torch
    import torch.nn.functional as F

    rows = []
    for seq in ATTENTION_SEQS:
        batch = 16384 // seq
        q, k, v = (torch.randn(batch, 16, seq, 128, device="cuda", dtype=torch.bfloat16)
                   for _ in range(3))  # fmt: skip
        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
            seconds = time_cuda(lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v),
                                repeats)  # fmt: skip
        rows.append(row("attention", "bf16", batch * 16, seq, seq, 128, 0, seconds))
    return rows


def decode_step(repeats: int) -> list[dict]:
    """One llama-2-7b decode step's projections: 32 x (QKV, O, gate+up, down) GEMVs."""
    import torch

    hidden, ffn, layers = 4096, 11008, 32
    shapes = [(hidden, 3 * hidden), (hidden, hidden), (hidden, 2 * ffn), (ffn, hidden)]
    weights = [[torch.randn(k, n, device="cuda", dtype=torch.bfloat16) for k, n in shapes]
               for _ in range(layers)]  # fmt: skip
    x = torch.randn(1, hidden, device="cuda", dtype=torch.bfloat16)
    xf = torch.randn(1, ffn, device="cuda", dtype=torch.bfloat16)

    def step() -> None:
        for qkv, o, gate_up, down in weights:
            x @ qkv
            x @ o
            x @ gate_up
            xf @ down

    nbytes = sum(w.numel() * 2 for layer in weights for w in layer)
    return [row("decode", "bf16", 1, 1, hidden, hidden, nbytes, time_cuda(step, repeats))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="CSV file to write")
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        sys.exit("measure.py needs PyTorch with CUDA (pip install torch)")
    if not torch.cuda.is_available():
        sys.exit("measure.py needs an NVIDIA GPU: torch.cuda.is_available() is False")
    repeats = 5 if args.quick else 20
    rows = []
    for name, part in (("gemm", gemms), ("copy", copies), ("attention", attention),
                       ("decode", decode_step)):  # fmt: skip
        print(f"measuring {name} on {torch.cuda.get_device_name()}...", file=sys.stderr)
        rows += part(repeats)
    source = source_of("measure.py") + ", CUDA-graph replays of back-to-back launches"
    write_rows(args.out, [{**r, "source": source} for r in rows])


def source_of(script: str) -> str:
    """What a row measured here came from: the script, the day, the GPU and torch."""
    import torch

    return (f"benchmarks/device/{script}, {dt.date.today().isoformat()}, "
            f"{torch.cuda.get_device_name()}, torch {torch.__version__}")  # fmt: skip


def write_rows(path: str, rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {len(rows)} rows to {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
