"""The large-batch Hopper step, op by op (benchmarks/large_batch_step.py; docs/validation.md
"The large-batch Hopper step, op by op" and "GPUStack's one-GPU runs, step by step"): the
script's interpolation of measured kernel rows is exact on what it claims to be exact on, and
xpusim's FP8 GEMMs of Llama-2-70B at the MLPerf Server batch and BF16 GEMMs of Qwen3-14B at
GPUStack's vLLM batches are not priced below the engine's own measured kernels, the
decompositions' finding (so the steps' missing 20-26%, and GPUStack's one-GPU runs' missing
half, lie outside the kernels, issue #48)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xpusim

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))
try:
    from large_batch_step import Gemms, Rows, keys_ratio
finally:
    sys.path.remove(str(BENCH))

GRID_M, GRID_N = (1.0, 32.0, 256.0, 1024.0), (512.0, 4096.0, 8192.0)


def _bilinear(m: float, n: float) -> float:
    return 3.0 + 0.5 * m + 0.25 * n + 1e-3 * m * n


@settings(max_examples=60, deadline=None)
@given(st.floats(1.0, 1024.0), st.floats(512.0, 8192.0))
def test_rows_interpolate_a_multilinear_time_exactly(m, n):
    """Inside the grid a time linear in each dimension is reproduced exactly, whether a
    dimension falls on a grid value or between two (an exact dimension counted once: a
    corner repeated would double it)."""
    rows = Rows({(a, b): _bilinear(a, b) for a in GRID_M for b in GRID_N})
    assert rows.at((m, n)) == pytest.approx(_bilinear(m, n), rel=1e-9)
    assert rows.at((GRID_M[2], n)) == pytest.approx(_bilinear(GRID_M[2], n), rel=1e-9)
    assert rows.at((GRID_M[1], GRID_N[1])) == _bilinear(GRID_M[1], GRID_N[1])


def test_a_missing_corner_takes_the_keys_ratio_of_fewer_sequences():
    """Decode attention's (more sequences, more keys) corner, unrecorded: the corner of more
    sequences and fewer keys, times the keys' ratio at fewer sequences."""
    times = {(256, 255): 53.3, (256, 511): 84.0, (512, 255): 95.8}
    filled = {**times, (512, 511): 95.8 * 84.0 / 53.3}
    assert Rows(times).at((450, 370), keys_ratio) == pytest.approx(Rows(filled).at((450, 370)))
    with pytest.raises(KeyError):
        Rows(times).at((450, 370))


# aiconfigurator (ai-dynamo/aiconfigurator at 095f58a) TensorRT-LLM 1.3.0rc20 gemm_perf.parquet,
# gemm_dtype fp8 (per-tensor FP8, the format of MLPerf's Llama-2-70B engines) less
# computescale_perf's dynamic-amax pass at the same (M, K), microseconds: Llama-2-70B's QKV and
# output projections, H200 at TP1 and H100 at TP2, M spanning the Server points' 796-1,483 rows
MEASURED_US = {
    ("h200-sxm", 1, 512): (67.9, 56.9), ("h200-sxm", 1, 1024): (129.4, 105.7),
    ("h200-sxm", 1, 2048): (248.8, 203.7),
    ("h100-sxm", 2, 512): (41.3, 31.6), ("h100-sxm", 2, 1024): (74.3, 58.6),
    ("h100-sxm", 2, 2048): (135.8, 125.0),
}  # fmt: skip


@pytest.mark.parametrize("chip,tp,m", list(MEASURED_US))
def test_fp8_gemms_at_the_server_batch_are_not_priced_below_the_measured_kernel(chip, tp, m):
    """xpusim's QKV and output projections at M rows are at most 5% faster than TensorRT-LLM's
    measured kernel (so they are not why the step is too cheap) and at most a third slower
    (0.83-1.02 of the measured time at this commit: DeepGEMM's curve, docs/validation.md)."""
    r = xpusim.simulate("llama-2-70b", chip, batch=m, prompt=370, gen=2, precision="fp8",
                        tp=tp, chips=tp)  # fmt: skip
    ours = {o.name: o.time_s * 1e6 for o in r.ops if o.phase == "decode"}
    for name, measured in zip(("layers.0.qkv", "layers.0.o_proj"), MEASURED_US[chip, tp, m],
                              strict=True):  # fmt: skip
        assert 0.75 <= measured / ours[name] <= 1.05, (name, measured, ours[name])


def test_a_corner_past_two_missing_keys_chains_the_ratios():
    """No row at 1,024 sequences past 127 keys: 511 keys is the 127-key row times the 255/127
    and 511/255 ratios at 256 sequences, which is its 511/127 ratio."""
    times = {(256, 127): 39.5, (256, 255): 53.3, (256, 511): 84.0, (1024, 127): 130.3}
    assert keys_ratio((1024, 511), None, times) == pytest.approx(130.3 * 84.0 / 39.5)
    assert keys_ratio((1024, 1023), None, times) is None


def test_a_gemm_wider_than_the_grid_scales_with_its_width():
    """A 152k-token vocabulary's LM head past the widest measured N (65,536) is that row's
    time times N / 65,536; inside the grid the rows stand."""
    rows = Gemms({(m, n, 4096.0): 1.0 + m * n / 1e6 for m in (1.0, 64.0) for n in (512.0, 65536.0)})
    assert rows.at((64.0, 151936.0, 4096.0)) == pytest.approx(
        (1.0 + 64 * 65536 / 1e6) * 151936 / 65536)
    assert rows.at((1.0, 512.0, 4096.0)) == 1.0 + 512 / 1e6


# aiconfigurator (ai-dynamo/aiconfigurator at 095f58a) h100_sxm/gemm/vllm/0.14.0/gemm_perf.parquet,
# gemm_dtype bfloat16, microseconds at grid points (no interpolation): Qwen3-14B's QKV (N 7,168)
# and output (N 5,120) projections at K 5,120, at a decode batch (64) and GPUStack's 8,192-token
# vLLM step (two prompts of 4,096)
VLLM_BF16_US = {64: (27.91, 24.05), 8192: (747.31, 537.07)}


@pytest.mark.parametrize("rows", list(VLLM_BF16_US))
def test_bf16_gemms_of_gpustacks_steps_are_not_priced_below_vllms_kernels(rows):
    """xpusim's Qwen3-14B BF16 projections on an H100 are at most 5% faster than vLLM's
    measured kernels and at most a third slower (0.82-0.99 of the measured time at this
    commit): GPUStack's one-GPU steps, 1.9x these kernels' sum, are not slow in them."""
    batch, prompt, phase = (rows, 128, "decode") if rows < 4096 else (rows // 4096, 4096, "prefill")
    r = xpusim.simulate("qwen3-14b", "h100-sxm", batch=batch, prompt=prompt, gen=2,
                        precision="bf16")  # fmt: skip
    ours = {o.name: o.time_s * 1e6 for o in r.ops if o.phase == phase}
    for name, measured in zip(("layers.0.qkv", "layers.0.o_proj"), VLLM_BF16_US[rows],
                              strict=True):  # fmt: skip
        assert 0.75 <= measured / ours[name] <= 1.05, (name, measured, ours[name])
