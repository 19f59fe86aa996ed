"""The SGLang cookbook's serving points (benchmarks/sgl_cookbook_points.py; docs/validation.md,
nineteenth and twenty-fifth sessions): each bench_serving command and the result printed after
it become two points at the run's mean lengths with the client's uniform spread, read with
the test environment and launch above it; a run serve cannot run as stated (its own range
ratio, speculative decoding, a chip line naming several chips) is left out; the committed set
is whole."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from xpusim.validation.points import load_points

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))
try:
    import sgl_cookbook_points as cook
finally:
    sys.path.remove(str(BENCH))

_LAUNCH = """```shell
python -m sglang.launch_server \\
  --model Qwen/Qwen3-235B-A22B-Instruct-2507 \\
  --tp 8
```"""
_RUN = """##### {section}

- Benchmark Command:

```shell
python3 -m sglang.bench_serving \\
  --backend sglang \\
  --dataset-name random{extra} \\
  --random-input-len {il} \\
  --random-output-len {ol} \\
  --num-prompts {n} \\
  --max-concurrency {c}
```

- Test Results:

```
============ Serving Benchmark Result ============
Backend:                                 sglang
Max request concurrency:                 {c}
Successful requests:                     {n}
Total input tokens:                      {tin}
Total generated tokens:                  {tout}
Output token throughput (tok/s):         832.04
Mean TTFT (ms):                          215.70
Median TTFT (ms):                        88.82
P99 TTFT (ms):                           727.08
Mean TPOT (ms):                          16.36
Median TPOT (ms):                        16.12
==================================================
```
"""


QWEN3 = "docs/autoregressive/Qwen/Qwen3.md"


def _page(extra: str = "", hardware: str = "- Hardware: NVIDIA B200 GPU (8x)",
          version: str = "0.5.6", launch: str = _LAUNCH) -> str:
    runs = [_RUN.format(section="5.1.1.2 Medium Concurrency", il=1000, ol=1000, n=80, c=16,
                        tin=39668, tout=40725, extra=extra),
            _RUN.format(section="5.1.3.3 High Concurrency", il=8000, ol=1000, n=320, c=64,
                        tin=1273893, tout=169680, extra="")]  # fmt: skip
    return (f"# Qwen3\n\n## 5. Benchmark\n\n### 5.1 Speed Benchmark\n\n{hardware}\n"
            f"- Tensor Parallelism: 8\n- sglang version: {version}\n\n#### 5.1.1 Standard\n\n"
            f"{launch}\n\n{runs[0]}\n#### 5.1.2 Reasoning\n\n{launch}\n\n#### 5.1.3 "
            f"Summarization\n\n{runs[1]}\n### 5.2 Accuracy Benchmark\n")  # fmt: skip


def test_each_printed_run_is_two_points_at_its_mean_lengths_in_a_closed_loop():
    """The run's totals over its requests are the point's lengths, spread as the client's
    uniform draws from 1; its requests and clients are the load; ms become s."""
    pts = {p["id"]: p for p in cook.page_points(QWEN3, _page())}
    assert len(pts) == 4
    ttft = pts["sglcook-qwen3-235b-b200x8-sglang-1000-1000-c16-ttft"]
    assert ttft["value"] == pytest.approx(0.08882) and ttft["stat"] == "p50"
    assert (ttft["prompt"], ttft["gen"], ttft["spread"]) == (496, 509, 0.998)
    assert ttft["load"] == {"kind": "concurrency", "value": 16, "requests": 80, "warmup": 0}
    assert (ttft["chip"], ttft["tp"], ttft["engine_profile"]) == ("b200", 8, "sglang-0.5.6")
    assert "section '5.1.1.2 Medium Concurrency'" in ttft["source"]
    long = pts["sglcook-qwen3-235b-b200x8-sglang-8000-1000-c64-tpot"]
    assert (long["prompt"], long["gen"], long["value"]) == (3981, 530, 0.01612)


def test_a_run_serve_cannot_run_as_stated_is_left_out():
    """Its own range ratio (a spread that is not the default's), a launch under speculative
    decoding (no acceptance printed), a hardware line naming several chips: none is read as
    if it were not so. The other run of the same page stays."""
    assert len(cook.page_points(QWEN3, _page(extra=" \\\n  --random-range-ratio 1"))) == 2
    spec = _LAUNCH.replace("--tp 8", "--tp 8 \\\n  --speculative-algorithm EAGLE")
    assert cook.page_points(QWEN3, _page(launch=spec)) == []
    several = "- Hardware: NVIDIA B200 GPU (8x), AMD MI300X (8x)"
    assert cook.page_points(QWEN3, _page(hardware=several)) == []


def test_the_release_names_the_profile_and_the_launch_the_plan():
    """Releases before piecewise CUDA graphs became SGLang's default (0.5.9) take the
    sglang-0.5.6 profile; --ep runs the experts over the same chips; --mem-fraction-static is
    the memory fraction; a multi-word chip keeps its family in the id."""
    assert cook.profile("0.5.8") == "sglang-0.5.6"
    assert cook.profile("0.5.6.post1") == "sglang-0.5.6"
    assert cook.profile("0.5.9") == "sglang"
    ep = _LAUNCH.replace("--tp 8", "--tp 8 --ep 8 --mem-fraction-static 0.85")
    pts = cook.page_points(QWEN3, _page(launch=ep, hardware="- Hardware: NVIDIA H100 80GB "
                                        "HBM3 GPU (8x)", version="0.5.9"))  # fmt: skip
    assert {(p["chip"], p["ep"], p["kv_utilization"], p["engine_profile"]) for p in pts} == {
        ("h100-sxm", 8, 0.85, "sglang")}
    assert pts[0]["id"].startswith("sglcook-qwen3-235b-h100x8-sglang-")


def test_sgl_cookbook_points_are_committed_whole():
    """62 runs of eight pages, two points each, on NVIDIA and AMD chips."""
    pts = [p for p in load_points() if p.id.startswith(cook.PREFIX)]
    assert len(pts) == 124
    assert {p.chip for p in pts} == {"b200", "h100-sxm", "h200-sxm", "mi300x"}
    assert {p.setup["load"]["value"] for p in pts} == {1, 16, 64, 100}
    assert all(p.source.startswith("github.com/sgl-project/sgl-cookbook") for p in pts)
