"""Prices the large-batch Hopper serving step op by op: xpusim's cost of each op of one
iteration of Llama-2-70B FP8 at the batch TensorRT-LLM ran in MLPerf v4.1 Server, beside
aiconfigurator's measured TensorRT-LLM kernel time at the same shape (docs/validation.md
"The large-batch Hopper step, op by op"; issue #48).

    python benchmarks/large_batch_step.py /path/to/aiconfigurator.git   # a bare mirror

Needs pyarrow (the `parquet` extra), git and xpusim on the path. It changes nothing: the
question it answers is which op, if any, xpusim prices below its measured kernel at the
engine's own batch, where the Server points' TPOT and TTFT read 0.2-0.6x.

The engine's batch is Little's law on the submission's own logs (published.json's known_gap
of the points in SETUPS): decodes = output tokens/s per replica x mean TPOT, beside the
prompt tokens the same replica must prefill per step at its request rate. One iteration is
then: every token op (the four GEMMs of each layer, TP all-reduces, norms, SwiGLU, RoPE) over
decodes + prompt tokens rows, paged decode attention over `decodes` sequences of `keys`
cached FP8 tokens, context attention over the step's prompts, and the LM head and sampler
over the sequences that produce a token.

Measured rows (aiconfigurator at COMMIT, TensorRT-LLM VERSION, one GPU, CUDA graphs):
- GEMMs: gemm_perf.parquet, gemm_dtype fp8 (per-tensor FP8, the format of MLPerf's engines),
  less computescale_perf's dynamic-amax pass at the same (M, K), as
  benchmarks/gemm_kernel_tables.py keeps them: MLPerf's engines use static scales. Each
  (M, N, K) is interpolated linearly in each dimension between the measured grid values
  around it (a GEMM's work is linear in each).
- Decode attention: generation_attention_perf.parquet, FP8 KV cache, the replica's heads per
  GPU, head_dim 128, linear in sequences and in keys. The collector records no row past a
  total of cached tokens (none at 512 sequences of 511 keys on H200): such a corner is the row
  of as many sequences at fewer keys times the keys' ratio at the most sequences measured at
  both (_keys_ratio).
- Context attention: context_attention_perf.parquet, FP8 attention over an FP8 cache,
  linear in prompts and in prompt length.
- TP all-reduce: xpusim's own table (cost/kernel_tables/collectives, TensorRT-LLM's
  all-reduce from the same database), so xpusim's figure is the measured one by construction.
Norms, SwiGLU, RoPE, the sampler and the host's per-iteration time have no measured row here:
their xpusim figures stand in both sums.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from itertools import product

import numpy as np
from aiconfigurator_data import Mirror, arguments

VERSION = "1.3.0rc20"
MODEL = "llama-2-70b"
HIDDEN, HEADS, KV_HEADS, HEAD_DIM, INTER, VOCAB = 8192, 64, 8, 128, 28672, 32000


@dataclass(frozen=True)
class Setup:
    """One replica of a scored MLPerf v4.1 Server point at the engine's Little's-law batch."""

    chip: str  # xpusim catalog id
    chip_dir: str  # aiconfigurator's
    tp: int
    decodes: int  # sequences decoding a token each step
    keys: int  # mean cached tokens each attends
    prompts: float  # prompts prefilled per step (prompt tokens / the dataset's mean prompt)
    prompt: int  # their mean length
    engine_step_ms: float  # the submission's mean TPOT: the engine's step at this batch
    point: str  # the published.json point whose known_gap derives the batch


SETUPS = (
    Setup("h200-sxm", "h200_sxm", 1, 450, 370, 346 / 222, 222, 123.0,
          "mlperf41-nvidia-h200-sxm-141gbx8-trt-llama-2-70b-server-tpot-mean"),
    Setup("h100-sxm", "h100_sxm", 2, 837, 370, 646 / 222, 222, 155.0,
          "mlperf41-nvidia-dgx-h100-h100-sxm-80gbx8-trt-llama-2-70b-server-tpot-mean"),
    # Offline: every slot of the engine's batch busy (max_batch, the submitter's
    # gpu_batch_size), one prompt finishing for every `gen` tokens a sequence makes (222 in,
    # 291 and 290 out), the step the output tokens a step over the replica's tokens/s
    Setup("h200-sxm", "h200_sxm", 1, 806, 222 + 291 // 2, 806 / 291, 222,
          1e3 * (806 + 806 / 291) / (31302.7 / 8),
          "mlperf41-nvidia-h200-sxm-141gbx8-trt-llama-2-70b-offline-tok"),
    Setup("h100-sxm", "h100_sxm", 2, 896, 222 + 290 // 2, 896 / 290, 222,
          1e3 * (896 + 896 / 290) / (24524.9 / 4),
          "mlperf41-nvidia-dgx-h100-h100-sxm-80gbx8-trt-llama-2-70b-offline-tok"),
)


def _around(grid: np.ndarray, x: float) -> tuple[float, float]:
    """The grid values at and around x (both x where measured; the ends where outside)."""
    if x in grid:
        return x, x
    above = grid[grid > x]
    below = grid[grid < x]
    if not len(below):
        return above[0], above[0]
    if not len(above):
        return below[-1], below[-1]
    return below[-1], above[0]


def _weight(lo: float, hi: float, x: float) -> float:
    return 0.0 if hi == lo else (x - lo) / (hi - lo)


class Rows:
    """Measured times keyed by a shape tuple, interpolated multilinearly over its grid."""

    def __init__(self, times: dict[tuple[float, ...], float]):
        self.times = times
        keys = np.array(list(times))
        self.grids = [np.unique(keys[:, i]) for i in range(keys.shape[1])]

    def at(self, x: tuple[float, ...], fill=None) -> float:
        """The time at shape x; `fill(corner, times)` supplies a missing corner."""
        brackets = [_around(g, v) for g, v in zip(self.grids, x, strict=True)]
        total = 0.0
        for corner in product(*(sorted({lo, hi}) for lo, hi in brackets)):
            w = np.prod([(_weight(lo, hi, v) if c == hi else 1 - _weight(lo, hi, v))
                         if lo != hi else 1.0
                         for c, (lo, hi), v in zip(corner, brackets, x, strict=True)])  # fmt: skip
            if w == 0:
                continue
            t = self.times.get(corner)
            if t is None:
                t = fill(corner, brackets, self.times) if fill else None
            if t is None:
                raise KeyError(f"no measured row at {corner}")
            total += w * t
        return total


def _columns(mirror: Mirror, path: str) -> dict[str, np.ndarray]:
    return {k: np.array(v) for k, v in mirror.read(path).columns.items()}


def gemm_rows(mirror: Mirror, chip_dir: str, gemm_dtype: str) -> Rows:
    """`gemm_dtype`'s rows (M, N, K) -> microseconds; FP8's less the dynamic-amax pass."""
    d = _columns(mirror, f"{chip_dir}/gemm/trtllm/{VERSION}/gemm_perf.parquet")
    amax_ms = {}
    if gemm_dtype == "fp8":
        scale = _columns(mirror, f"{chip_dir}/quantize/trtllm/{VERSION}/computescale_perf.parquet")
        amax_ms = {(m, k): t for m, k, t in zip(scale["m"], scale["k"], scale["latency"],
                                                strict=True)}  # fmt: skip
    keep = d["gemm_dtype"] == gemm_dtype
    return Rows({(m, n, k): (t - amax_ms.get((m, k), 0.0)) * 1e3 for m, n, k, t in zip(
        d["m"][keep], d["n"][keep], d["k"][keep], d["latency"][keep], strict=True)
        if gemm_dtype != "fp8" or (m, k) in amax_ms})  # fmt: skip


def _attention(d: dict[str, np.ndarray], tp: int, length: str) -> Rows:
    keep = ((d["num_heads"] == HEADS // tp) & (d["num_key_value_heads"] == KV_HEADS // tp)
            & (d["head_dim"] == HEAD_DIM) & (d["window_size"] == 0)
            & (d["kv_cache_dtype"] == "fp8"))  # fmt: skip
    if "attn_dtype" in d and length == "isl":
        keep &= d["attn_dtype"] == "fp8"
    return Rows({(b, n): t * 1e3 for b, n, t in zip(
        d["batch_size"][keep], d[length][keep], d["latency"][keep], strict=True)})  # fmt: skip


def _keys_ratio(corner, brackets, times):
    """A missing (sequences, keys) corner: the row of as many sequences at the next fewer keys
    (itself filled the same way where missing) times the keys' ratio at the most sequences
    measured at both (decode attention's time is the bytes of its keys; the collector records
    no row past a total of keys)."""
    del brackets
    if corner in times:
        return times[corner]
    b, k = corner
    fewer = sorted({kk for _, kk in times if kk < k})
    if not fewer:
        return None
    kp = fewer[-1]
    both = [bb for bb, kk in times if kk == k and bb < b and (bb, kp) in times]
    base = _keys_ratio((b, kp), None, times)
    if not both or base is None:
        return None
    b0 = max(both)
    return base * times[b0, k] / times[b0, kp]


def measured_us(mirror: Mirror, s: Setup) -> dict[str, float]:
    """Measured microseconds of each op with a row, at the setup's shapes."""
    gemm = gemm_rows(mirror, s.chip_dir, "fp8")
    base = f"{s.chip_dir}/attention/trtllm/{VERSION}"
    tokens = s.decodes + s.prompts * s.prompt
    qkv = (HEADS + 2 * KV_HEADS) * HEAD_DIM // s.tp
    decode = _attention(_columns(mirror, f"{base}/generation_attention_perf.parquet"), s.tp,
                        "step")  # fmt: skip
    context = _attention(_columns(mirror, f"{base}/context_attention_perf.parquet"), s.tp, "isl")
    # TensorRT-LLM's FP8 checkpoints keep the LM head BF16 (so does xpusim: KEPT_WIDE)
    head = gemm_rows(mirror, s.chip_dir, "bfloat16")
    return {
        "layers.0.qkv": gemm.at((tokens, qkv, HIDDEN)),
        "layers.0.o_proj": gemm.at((tokens, HIDDEN, HEADS * HEAD_DIM // s.tp)),
        "layers.0.gate_up": gemm.at((tokens, 2 * INTER // s.tp, HIDDEN)),
        "layers.0.down": gemm.at((tokens, HIDDEN, INTER // s.tp)),
        "lm_head": head.at((s.decodes, VOCAB // s.tp, HIDDEN)),
        "decode attention": decode.at((s.decodes, s.keys), _keys_ratio),
        "context attention": context.at((s.prompts, s.prompt)),
    }


def xpusim_us(s: Setup) -> tuple[dict[str, tuple[int, float]], float]:
    """xpusim's ops of one step at the setup's work: (count, microseconds each), and the
    engine's per-iteration host time (serving/engines.toml trtllm)."""
    import xpusim
    from xpusim.serving.engines import engine

    def decode_ops(batch: int, prompt: int) -> dict[str, tuple[int, float]]:
        r = xpusim.simulate(MODEL, s.chip, batch=batch, prompt=prompt, gen=2, precision="fp8",
                            tp=s.tp, chips=s.tp)  # fmt: skip
        return {o.name: (o.count, o.time_s * 1e6) for o in r.ops if o.phase == "decode"}

    def prefill_attention(prompts: int) -> float:
        r = xpusim.simulate(MODEL, s.chip, batch=prompts, prompt=s.prompt, gen=2,
                            precision="fp8", tp=s.tp, chips=s.tp)  # fmt: skip
        return next(o.time_s for o in r.ops
                    if o.phase == "prefill" and o.name == "layers.0.attention") * 1e6

    tokens = round(s.decodes + s.prompts * s.prompt)
    ops = decode_ops(tokens, s.keys)
    attention = ops.pop("layers.0.attention")[0]
    # the ops over the sequences (decode attention, the LM head, the sampler) at the decodes
    at_decodes = decode_ops(s.decodes, s.keys)
    ops["decode attention"] = (attention, at_decodes["layers.0.attention"][1])
    for name in ("lm_head", "lm_head.all_gather", "sample"):
        if name in at_decodes:
            ops[name] = at_decodes[name]
    lo, hi = int(s.prompts), int(s.prompts) + 1  # linear in prompts, as the measured rows
    f = s.prompts - lo
    ops["context attention"] = (attention, (1 - f) * prefill_attention(lo)
                                + f * prefill_attention(hi))  # fmt: skip
    return ops, engine("trtllm").per_iteration_s * 1e6


def print_ops(ops: dict[str, tuple[int, float]], measured: dict[str, float],
              host_us: float) -> tuple[float, float]:  # fmt: skip
    """Each op's count, xpusim's and the measured microseconds, largest first, and the
    step's two sums (microseconds, the host's time in both): xpusim's, and with the measured
    rows in place of xpusim's where there are some."""
    print(f"  {'op':38s} {'count':>5s} {'xpusim us':>10s} {'measured us':>12s} {'meas/xp':>8s}")
    ours = theirs = host_us
    for name, (count, us) in sorted(ops.items(), key=lambda kv: -kv[1][0] * kv[1][1]):
        got = measured.get(name)
        ours += count * us
        theirs += count * (us if got is None else got)
        shown = "" if got is None else f"{got:12.1f} {got / us:8.2f}"
        print(f"  {name:38s} {count:5d} {us:10.1f} {shown}")
    print(f"  host per iteration (engines.toml trtllm) {host_us:.0f} us")
    return ours, theirs


def report(s: Setup, mirror: Mirror) -> None:
    ops, host_us = xpusim_us(s)
    measured = measured_us(mirror, s)
    tokens = s.decodes + s.prompts * s.prompt
    print(f"\n{s.chip} TP{s.tp}: {s.decodes} decodes of {s.keys} keys + {s.prompts:.2f} prompts "
          f"of {s.prompt} ({tokens:.0f} token rows); engine step {s.engine_step_ms:g} ms "
          f"({s.point})")  # fmt: skip
    ours, theirs = print_ops(ops, measured, host_us)
    print(f"  step: xpusim {ours / 1e3:.1f} ms; with the measured rows {theirs / 1e3:.1f} ms; "
          f"engine {s.engine_step_ms:g} ms (xpusim {ours / 1e3 / s.engine_step_ms:.2f}x, "
          f"measured kernels {theirs / 1e3 / s.engine_step_ms:.2f}x)")  # fmt: skip


def main() -> int:
    args = arguments(__doc__, None).parse_args()
    mirror = Mirror.of(args)
    for s in SETUPS:
        report(s, mirror)
    return 0


if __name__ == "__main__":
    sys.exit(main())
