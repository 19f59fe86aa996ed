"""Prices the large-batch Hopper serving step op by op: xpusim's cost of each op of one
iteration at an engine's measured batch, beside aiconfigurator's measured kernel time of that
engine at the same shape: Llama-2-70B FP8 at the batch TensorRT-LLM ran in MLPerf v4.1 Server
(docs/validation.md "The large-batch Hopper step, op by op"; issue #48), and GPUStack's
one-GPU bursts, Qwen3-14B BF16 under vLLM and Qwen3-32B FP8 under TensorRT-LLM, against each
engine's own kernels (docs/validation.md "GPUStack's one-GPU runs, step by step"), and the
Qwen3-32B BF16 32K burst's batch-one step and NIM's FP16 Llama-3-70B/8B at 250 clients
(docs/validation.md "The dense decode step at large batch, op by op").

    python benchmarks/large_batch_step.py /path/to/aiconfigurator.git   # a bare mirror

Needs pyarrow (the `parquet` extra), git and xpusim on the path. It changes nothing: the
question it answers is which op, if any, xpusim prices below its measured kernel at the
engine's own batch, where the Server points' TPOT and TTFT read 0.2-0.6x and GPUStack's
one-GPU runs' about 0.55x.

An MLPerf setup's batch is Little's law on the submission's own logs (published.json's
known_gap of the points in SETUPS): decodes = output tokens/s per replica x mean TPOT, beside
the prompt tokens the same replica must prefill per step at its request rate; a GPUStack
setup's is what xpusim's KV cache holds (SETUPS says which). One iteration is then: every
token op (the four GEMMs of each layer, TP all-reduces, norms, SwiGLU, RoPE) over decodes +
prompt tokens rows, paged decode attention over `decodes` sequences of `keys` cached tokens,
context attention over the step's prompts, and the LM head and sampler over the sequences
that produce a token.

Measured rows (aiconfigurator at COMMIT, the setup's engine and version, one GPU):
- GEMMs: gemm_perf.parquet in the setup's format. TensorRT-LLM's FP8 is gemm_dtype fp8
  (per-tensor FP8, the format of MLPerf's engines) less computescale_perf's dynamic-amax pass
  at the same (M, K), as benchmarks/gemm_kernel_tables.py keeps them: MLPerf's engines use
  static scales. Each (M, N, K) is interpolated linearly in each dimension between the
  measured grid values around it (a GEMM's work is linear in each); an N past the grid (a
  152k-token vocabulary's LM head) is the widest row's time scaled by N.
- Decode attention: generation_attention_perf.parquet, the setup's KV cache, the replica's
  heads per GPU, head_dim 128, linear in sequences and in keys. The collector records no row
  past a total of cached tokens (none at 512 sequences of 511 keys on H200): such a corner is
  the row of as many sequences at fewer keys times the keys' ratio at the most sequences
  measured at both (keys_ratio); past the most sequences measured (2,048), that row times
  the sequences' ratio (decode_attention_us).
- Context attention: context_attention_perf.parquet, attention in the setup's format over
  its cache, linear in prompts (from none, under one) and in prompt length.
- TP all-reduce: xpusim's own table (cost/kernel_tables/collectives, TensorRT-LLM's
  all-reduce from the same database), so xpusim's figure is the measured one by construction.
Norms, SwiGLU, RoPE, the sampler and the host's per-iteration time have no measured row here:
their xpusim figures stand in both sums.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from itertools import product
from typing import Any

import numpy as np
from aiconfigurator_data import Mirror, arguments


@dataclass(frozen=True)
class Model:
    """A dense zoo model's shapes, the GEMMs' and attention's (Llama's layer layout)."""

    name: str  # zoo id
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    inter: int
    vocab: int


LLAMA_2_70B = Model("llama-2-70b", 8192, 64, 8, 128, 28672, 32000)
QWEN3_14B = Model("qwen3-14b", 5120, 40, 8, 128, 17408, 151936)
QWEN3_32B = Model("qwen3-32b", 5120, 64, 8, 128, 25600, 151936)
LLAMA_3_70B = Model("llama-3-70b", 8192, 64, 8, 128, 28672, 128256)
LLAMA_3_8B = Model("llama-3-8b", 4096, 32, 8, 128, 14336, 128256)


@dataclass(frozen=True)
class Engine:
    """The engine whose kernels aiconfigurator timed, and the formats of its run: xpusim's
    `precision` and `kv_precision`, and aiconfigurator's names of the kernels' formats."""

    name: str  # aiconfigurator's folder, and serving/engines.toml's profile
    version: str  # aiconfigurator's version folder
    precision: str  # xpusim's
    kv_precision: str  # xpusim's
    gemm: str  # aiconfigurator's gemm_dtype
    attention: str  # its context attention's attn_dtype
    kv: str  # its kv_cache_dtype


TRTLLM_FP8 = Engine("trtllm", "1.3.0rc20", "fp8", "fp8", "fp8", "fp8", "fp8")
# a block-scaled FP8 checkpoint (Qwen's -FP8 repos: 128 x 128) over the default BF16 cache,
# whose context attention TensorRT-LLM runs in BF16
TRTLLM_FP8_BLOCK = Engine("trtllm", "1.3.0rc20", "fp8", "bf16", "fp8_block", "bfloat16",
                          "bfloat16")  # fmt: skip
VLLM_BF16 = Engine("vllm", "0.14.0", "bf16", "bf16", "bfloat16", "bfloat16", "bfloat16")
"""aiconfigurator's vLLM nearest to 0.11, the version GPUStack ran."""
# NIM for LLMs 1.0's TensorRT-LLM 0.10 engines (the trtllm-cpp profile): FP16 weights and cache
# against the nearest kernels timed, TensorRT-LLM 1.3.0rc20's BF16 (one tensor-core rate)
TRTLLM_FP16 = Engine("trtllm", "1.3.0rc20", "fp16", "fp16", "bfloat16", "bfloat16", "bfloat16")


@dataclass(frozen=True)
class Setup:
    """One replica of a scored serving point at the engine's batch."""

    chip: str  # xpusim catalog id
    chip_dir: str  # aiconfigurator's
    tp: int
    decodes: int  # sequences decoding a token each step
    keys: int  # mean cached tokens each attends
    prompts: float  # prompts prefilled per step (prompt tokens / the dataset's mean prompt)
    prompt: int  # their mean length
    engine_step_ms: float  # the engine's measured step at this batch
    point: str  # the published.json point whose known_gap derives the batch
    model: Model = LLAMA_2_70B
    engine: Engine = TRTLLM_FP8


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
    # GPUStack's Qwen3-14B 4000/200 burst of 500 under vLLM 0.11 on one H100: the batch
    # xpusim's KV cache holds (55 sequences of about 4,100 keys; the engine's own is not
    # published), a decode-only step beside the run's median ITL (43.93 ms) and a step of the
    # 8,192-token budget (55 decodes beside 8,137 prompt tokens, two prompts at once) beside
    # its P99 ITL (656.79 ms): such steps are about a seventh of the run's
    Setup("h100-sxm", "h100_sxm", 1, 55, 4100, 0.0, 4000, 43.93,
          "gpustack-qwen3-14b-h100-base-vllm-4k-tpot", QWEN3_14B, VLLM_BF16),
    Setup("h100-sxm", "h100_sxm", 1, 55, 4100, 8137 / 4000, 4000, 656.79,
          "gpustack-qwen3-14b-h100-base-vllm-4k-tpot", QWEN3_14B, VLLM_BF16),
    # the same run on GPUStack's 'single NVIDIA A100 SXM' page (qwen3-14b/a100.md, not a
    # scored point): vLLM's 2,048-token budget on an A100 puts part of a prompt beside the
    # decodes in nearly every step (xpusim: 57 decodes beside 1,973 prompt tokens, its
    # median step), the run's median ITL 369.00 ms (P99 377.42)
    Setup("a100-sxm-80gb", "a100_sxm", 1, 57, 4100, 1973 / 4000, 4000, 369.0,
          "gpustack-qwen3-14b-h100-base-vllm-4k-tpot", QWEN3_14B, VLLM_BF16),
    # GPUStack's Qwen3-32B-FP8 4000/200 burst under TensorRT-LLM 1.2.0rc1 (chunked prefill)
    # on one H100, at xpusim's median steps (its KV cache holds 153 k tokens): 37 decodes
    # alone beside the run's median ITL (45.37 ms), 34 beside 8,158 prompt tokens beside its
    # P99 ITL (1,254.20 ms)
    Setup("h100-sxm", "h100_sxm", 1, 37, 4100, 0.0, 4000, 45.37,
          "gpustack-qwen3-32b-h100-opt-trtllm-4k-tpot", QWEN3_32B, TRTLLM_FP8_BLOCK),
    Setup("h100-sxm", "h100_sxm", 1, 34, 4100, 8158 / 4000, 4000, 1254.2,
          "gpustack-qwen3-32b-h100-opt-trtllm-4k-tpot", QWEN3_32B, TRTLLM_FP8_BLOCK),
    # the same page's 2000/100 burst under TensorRT-LLM at xpusim's batch (71 sequences of
    # about 2,050 keys, its mean; the run's peak output 1,529 tokens/s at its median ITL is 75):
    # decodes alone beside the median ITL (49.40 ms), and beside 8,121 prompt tokens (the
    # 8,192-token budget) beside its P99 ITL (1,216.32 ms)
    Setup("h100-sxm", "h100_sxm", 1, 71, 2050, 0.0, 2000, 49.40,
          "gpustack-qwen3-32b-h100-opt-trtllm-2k-tpot", QWEN3_32B, TRTLLM_FP8_BLOCK),
    Setup("h100-sxm", "h100_sxm", 1, 71, 2050, 8121 / 2000, 2000, 1216.32,
          "gpustack-qwen3-32b-h100-opt-trtllm-2k-tpot", QWEN3_32B, TRTLLM_FP8_BLOCK),
    # the same page's Qwen3-32B BF16 32000/100 burst under vLLM 0.11: one sequence decodes at a
    # time (the run's peak output 24 tokens/s at a median ITL of 43.30 ms), so its step is the
    # weights' stream at batch one, no large batch at all
    Setup("h100-sxm", "h100_sxm", 1, 1, 32050, 0.0, 32000, 43.30,
          "gpustack-qwen3-32b-h100-base-vllm-32k-tpot", QWEN3_32B, VLLM_BF16),
    # NIM for LLMs (2024, TensorRT-LLM 0.10) on a DGX H100, Llama-3-70B FP16 at TP4, 250
    # clients of 200 in and 1,000 out: 235 sequences decoding (the run's output tokens/s x its
    # mean ITL, Little's law) of about 200 + 500 keys, one 200-token prompt every 1,000 / 235
    # steps, beside the run's mean ITL (41.07 ms)
    Setup("h100-sxm", "h100_sxm", 4, 235, 700, 235 / 1000, 200, 41.07,
          "nimdli-llama-3-70b-4xh100-fp16-200-1000-c250-itl", LLAMA_3_70B, TRTLLM_FP16),
    # the same with Llama-3-8B FP16 on one H100 (242 decoding; mean ITL 29.02 ms)
    Setup("h100-sxm", "h100_sxm", 1, 242, 700, 242 / 1000, 200, 29.02,
          "nimdli-llama-3-8b-1xh100-fp16-200-1000-c250-itl", LLAMA_3_8B, TRTLLM_FP16),
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


Times = dict[tuple[float, ...], float]
Fill = Callable[[tuple[float, ...], Any, Times], float | None]
"""fill(corner, brackets, times): a missing corner's time, or None (keys_ratio)."""


class Rows:
    """Measured times keyed by a shape tuple, interpolated multilinearly over its grid."""

    def __init__(self, times: Times):
        self.times = times
        keys = np.array(list(times))
        self.grids = [np.unique(keys[:, i]) for i in range(keys.shape[1])]

    def at(self, x: tuple[float, ...], fill: Fill | None = None) -> float:
        """The time at shape x; `fill(corner, brackets, times)` supplies a missing corner."""
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


def columns(mirror: Mirror, path: str) -> dict[str, np.ndarray]:
    """A parquet file of the mirror, as numpy columns (what the row filters compare)."""
    return {k: np.array(v) for k, v in mirror.read(path).columns.items()}


class Gemms(Rows):
    """GEMM rows (M, N, K) -> microseconds; an N past the widest measured, that row's time
    scaled by N (a GEMM's work is linear in N, and one that wide fills the chip)."""

    def at(self, x: tuple[float, ...], fill: Fill | None = None) -> float:
        m, n, k = x
        widest = self.grids[1][-1]
        return super().at((m, min(n, widest), k), fill) * max(n / widest, 1.0)


def gemm_rows(mirror: Mirror, chip_dir: str, engine: Engine, gemm_dtype: str) -> Gemms:
    """`gemm_dtype`'s rows of the engine; TensorRT-LLM's FP8 less the dynamic-amax pass."""
    base = f"{chip_dir}/{{}}/{engine.name}/{engine.version}"
    d = columns(mirror, f"{base.format('gemm')}/gemm_perf.parquet")
    amax_ms = {}
    static = engine.name == "trtllm" and gemm_dtype == "fp8"  # MLPerf's static scales
    if static:
        scale = columns(mirror, f"{base.format('quantize')}/computescale_perf.parquet")
        amax_ms = {(m, k): t for m, k, t in zip(scale["m"], scale["k"], scale["latency"],
                                                strict=True)}  # fmt: skip
    keep = d["gemm_dtype"] == gemm_dtype
    return Gemms({(m, n, k): (t - amax_ms.get((m, k), 0.0)) * 1e3 for m, n, k, t in zip(
        d["m"][keep], d["n"][keep], d["k"][keep], d["latency"][keep], strict=True)
        if not static or (m, k) in amax_ms})  # fmt: skip


def attention_rows(d: dict[str, np.ndarray], length: str, *, heads: int, kv_heads: int,
                   head_dim: int, kv_dtype: str, window: int = 0,
                   attn_dtype: str | None = None) -> Rows:
    """One attention layout's rows of an aiconfigurator attention table (per-rank heads, a
    window of 0 for full attention), keyed (sequences, `length`) in microseconds."""
    keep = ((d["num_heads"] == heads) & (d["num_key_value_heads"] == kv_heads)
            & (d["head_dim"] == head_dim) & (d["kv_cache_dtype"] == kv_dtype))  # fmt: skip
    if "window_size" in d:
        keep &= d["window_size"] == window
    if attn_dtype is not None and "attn_dtype" in d:
        keep &= d["attn_dtype"] == attn_dtype
    return Rows({(b, n): t * 1e3 for b, n, t in zip(
        d["batch_size"][keep], d[length][keep], d["latency"][keep], strict=True)})  # fmt: skip


def _attention(d: dict[str, np.ndarray], s: Setup, length: str) -> Rows:
    m = s.model
    return attention_rows(d, length, heads=m.heads // s.tp, kv_heads=m.kv_heads // s.tp,
                          head_dim=m.head_dim, kv_dtype=s.engine.kv,
                          attn_dtype=s.engine.attention if length == "isl" else None)


def keys_ratio(corner: tuple[float, ...], brackets: Any, times: Times) -> float | None:
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
    base = keys_ratio((b, kp), None, times)
    if not both or base is None:
        return None
    b0 = max(both)
    return base * times[b0, k] / times[b0, kp]


def decode_attention_us(rows: Rows, sequences: float, keys: float) -> float:
    """Decode attention of `sequences` of `keys` each; past the most sequences measured, that
    row times the sequences' ratio (a generation kernel's rows are linear in sequences from
    256 up: the FP8 cache's 32 x 8 x 128 layout on H200, 178 us at 2,048 x 63 keys, 92 at
    1,024)."""
    most = rows.grids[0][-1]
    return rows.at((min(sequences, most), keys), keys_ratio) * max(sequences / most, 1.0)


def measured_us(mirror: Mirror, s: Setup) -> dict[str, float]:
    """Measured microseconds of each op with a row, at the setup's shapes."""
    m, e = s.model, s.engine
    gemm = gemm_rows(mirror, s.chip_dir, e, e.gemm)
    base = f"{s.chip_dir}/attention/{e.name}/{e.version}"
    tokens = s.decodes + s.prompts * s.prompt
    qkv = (m.heads + 2 * m.kv_heads) * m.head_dim // s.tp
    decode = _attention(columns(mirror, f"{base}/generation_attention_perf.parquet"), s, "step")
    # FP8 checkpoints keep the LM head BF16 (so does xpusim: KEPT_WIDE)
    head = gemm_rows(mirror, s.chip_dir, e, "bfloat16")
    ops = {
        "layers.0.qkv": gemm.at((tokens, qkv, m.hidden)),
        "layers.0.o_proj": gemm.at((tokens, m.hidden, m.heads * m.head_dim // s.tp)),
        "layers.0.gate_up": gemm.at((tokens, 2 * m.inter // s.tp, m.hidden)),
        "layers.0.down": gemm.at((tokens, m.hidden, m.inter // s.tp)),
        "lm_head": head.at((s.decodes, m.vocab // s.tp, m.hidden)),
        "decode attention": decode_attention_us(decode, s.decodes, s.keys),
    }
    if s.prompts:
        context = _attention(columns(mirror, f"{base}/context_attention_perf.parquet"), s, "isl")
        # under one prompt (a chunk of one), linear from none: the rows start at one
        ops["context attention"] = context.at((max(s.prompts, 1), s.prompt)) * min(s.prompts, 1)
    return ops


def xpusim_us(s: Setup) -> tuple[dict[str, tuple[int, float]], float]:
    """xpusim's ops of one step at the setup's work: (count, microseconds each), and the
    engine's per-iteration host time (serving/engines.toml)."""
    import xpusim
    from xpusim.serving.engines import engine

    def run(batch: int, prompt: int) -> Any:
        return xpusim.simulate(s.model.name, s.chip, batch=batch, prompt=prompt, gen=2,
                               precision=s.engine.precision,
                               kv_precision=s.engine.kv_precision, tp=s.tp,
                               chips=s.tp)  # fmt: skip

    def decode_ops(batch: int, prompt: int) -> dict[str, tuple[int, float]]:
        return {o.name: (o.count, o.time_s * 1e6) for o in run(batch, prompt).ops
                if o.phase == "decode"}  # fmt: skip

    def prefill_attention(prompts: int) -> float:
        return next(o.time_s for o in run(prompts, s.prompt).ops
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
    if s.prompts:
        lo, hi = int(s.prompts), int(s.prompts) + 1  # linear in prompts, as the measured rows
        f = s.prompts - lo
        ops["context attention"] = (attention, (1 - f) * (lo and prefill_attention(lo))
                                    + f * prefill_attention(hi))  # fmt: skip
    return ops, engine(s.engine.name).per_iteration_s * 1e6


def print_ops(ops: dict[str, tuple[int, float]], measured: dict[str, float],
              host_us: float, engine_name: str = "trtllm") -> tuple[float, float]:  # fmt: skip
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
    print(f"  host per iteration (engines.toml {engine_name}) {host_us:.0f} us")
    return ours, theirs


def report(s: Setup, mirror: Mirror) -> None:
    ops, host_us = xpusim_us(s)
    measured = measured_us(mirror, s)
    tokens = s.decodes + s.prompts * s.prompt
    print(f"\n{s.model.name} {s.engine.precision} on {s.chip} TP{s.tp} ({s.engine.name} "
          f"{s.engine.version} kernels): {s.decodes} decodes of {s.keys} keys + "
          f"{s.prompts:.2f} prompts of {s.prompt} ({tokens:.0f} token rows); engine step "
          f"{s.engine_step_ms:g} ms "
          f"({s.point})")  # fmt: skip
    ours, theirs = print_ops(ops, measured, host_us, s.engine.name)
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
