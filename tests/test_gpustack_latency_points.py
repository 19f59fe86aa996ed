"""The GPUStack Qwen3-8B latency-page serving points (benchmarks/gpustack_latency_points.py;
docs/validation.md, twelfth session, j3): the generator reads each serving command and the
results printed after it (a '# label' naming a flag's value), leaves out speculative runs and
reprints, and the committed BF16 runs' decode scores near the measurement."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from xpusim.validation.points import load_points
from xpusim.validation.score import validate

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))
try:
    import gpustack_latency_points as lat
finally:
    sys.path.remove(str(BENCH))

_RESULT = """    ============ Serving Benchmark Result ============
    Successful requests:                     100
    Maximum request concurrency:             {c}
    Total input tokens:                      23260
    Total generated tokens:                  22061
    Output token throughput (tok/s):         {tok}
    Mean TTFT (ms):                          {ttft}
    Median TTFT (ms):                        {median}
    P99 TTFT (ms):                           {p99}
    Mean TPOT (ms):                          7.38
    =================================================="""
PAGE = f"""### 1. Choosing the Inference Engine

??? info "Serving script"
    ```bash
    vllm serve Qwen/Qwen3-8B
    ```
??? info "Benchmark result"
    ```
{_RESULT.format(c=4, tok=496.88, ttft=64.0, median=60.26, p99=98.59)}
    ```

### 4. Attention Backend

??? info "Serving script"
    ```bash
    python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B-FP8 \\
      --attention-backend triton
    ```
??? info "Benchmark result"
    ```
    # triton
{_RESULT.format(c=4, tok=635.15, ttft=60.18, median=43.84, p99=493.14)}

    # flashinfer
{_RESULT.format(c=4, tok=556.61, ttft=269.33, median=40.7, p99=5700.99)}
    ```

### 5. Speculative Decoding

??? info "Serving script"
    ```bash
    python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B-FP8 --speculative-algorithm EAGLE3
    ```
??? info "Benchmark result"
    ```
{_RESULT.format(c=4, tok=900.0, ttft=50.7, median=43.71, p99=368.54)}
    ```

### Other Benchmark Cases

??? info "Baseline serving script"
    ```bash
    vllm serve Qwen/Qwen3-8B
    ```
??? info "Baseline benchmark results"
    ```bash
    # BS=1
{_RESULT.format(c=1, tok=132.86, ttft=59.01, median=60.38, p99=73.49)}
    # BS=4
{_RESULT.format(c=4, tok=496.88, ttft=64.0, median=60.26, p99=98.59)}
    ```
"""


def test_gpustack_page_blocks_become_three_points_a_run_without_drafts_or_reprints():
    """A result block's '# label' names the flag's value; the speculative runs are left out
    (their acceptance is not published); a run the page prints twice counts once; ShareGPT's
    lengths are the run's means."""
    pts = {p["id"]: p for p in lat.points(PAGE)}
    runs = sorted({i.rsplit("-", 1)[0] for i in pts})
    assert runs == [
        "gpustack-lat-qwen3-8b-h100-sglang-fp8-c4-s4-flashinfer",
        "gpustack-lat-qwen3-8b-h100-sglang-fp8-c4-s4-triton",
        "gpustack-lat-qwen3-8b-h100-vllm-bf16-c1-sweep",
        "gpustack-lat-qwen3-8b-h100-vllm-bf16-c4-s1",
    ]  # fmt: skip
    flash = pts["gpustack-lat-qwen3-8b-h100-sglang-fp8-c4-s4-flashinfer-ttft"]
    assert flash["value"] == pytest.approx(0.26933) and flash["engine_profile"] == "sglang-0.5.6"
    assert (flash["precision"], flash["weight_precision"]) == ("fp8", "fp8-block")
    assert "attention backend (flashinfer)" in flash["xpusim_setup"]
    one = pts["gpustack-lat-qwen3-8b-h100-vllm-bf16-c1-sweep-tok"]
    assert one["value"] == 132.86 and (one["prompt"], one["gen"]) == (233, 221)
    assert one["load"] == {"kind": "concurrency", "value": 1, "requests": 100}


def test_gpustack_ttft_points_state_the_runs_median_and_what_held_up_requests_added():
    """A TTFT point's known gap carries the run's median and p99 (the page prints them beside
    the mean): FlashInfer's FP8 run waits out first-use compiles, 228.6 ms a request of mean
    over its median, 22.86 s in all; where the mean is under the median nothing is held up.
    The TPOT and throughput points do not carry it."""
    pts = {p["id"]: p for p in lat.points(PAGE)}
    flash = pts["gpustack-lat-qwen3-8b-h100-sglang-fp8-c4-s4-flashinfer-ttft"]["known_gap"]
    assert "median TTFT is 40.7 ms and its p99 5700.99 ms" in flash
    assert "exceeds the median by 228.6 ms, 22.86 s over its 100 requests" in flash
    one = pts["gpustack-lat-qwen3-8b-h100-vllm-bf16-c1-sweep-ttft"]["known_gap"]
    assert one.endswith("median TTFT is 60.38 ms and its p99 73.49 ms")
    assert all("median TTFT" not in p["known_gap"] for i, p in pts.items()
               if not i.endswith("-ttft"))


def test_gpustack_latency_points_are_committed_and_decode_scores_near_measurement():
    """The committed runs: at 1-8 clients a BF16 decode step is weights read once a token, so
    every engine's TPOT is within 0.9-1.1x (a unit or mapping error breaks this)."""
    pts = [p for p in load_points() if p.id.startswith(lat.PREFIX)]
    assert len(pts) == 30
    bf16 = [p for p in pts if p.metric == "tpot_s" and "-bf16-" in p.id]
    v = validate(bf16)
    assert v.n_points == 7
    for s in v.points:
        assert 0.9 <= s.ratio <= 1.1, (s.id, s.ratio)
