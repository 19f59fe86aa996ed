"""The SGLang cookbook's Qwen3-235B B200 serving points (benchmarks/sgl_cookbook_points.py;
docs/validation.md, nineteenth session, w3): each bench_serving command and the result printed
after it become two points at the run's mean lengths with the client's uniform spread, a
command that sets its own range ratio is refused, and the committed set is whole."""

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


def _page(extra: str = "") -> str:
    runs = [_RUN.format(section="5.1.1.2 Medium Concurrency", il=1000, ol=1000, n=80, c=16,
                        tin=39668, tout=40725, extra=extra),
            _RUN.format(section="5.1.3.3 High Concurrency", il=8000, ol=1000, n=320, c=64,
                        tin=1273893, tout=169680, extra="")]  # fmt: skip
    return (f"# Qwen3\n\n## 5. Benchmark\n\n### 5.1 Speed Benchmark\n\n#### 5.1.1 Standard\n\n"
            f"{_LAUNCH}\n\n{runs[0]}\n#### 5.1.2 Reasoning\n\n{_LAUNCH}\n\n#### 5.1.3 "
            f"Summarization\n\n{runs[1]}\n### 5.2 Accuracy Benchmark\n")  # fmt: skip


def test_each_printed_run_is_two_points_at_its_mean_lengths_in_a_closed_loop():
    """The run's totals over its requests are the point's lengths, spread as the client's
    uniform draws from 1; its requests and clients are the load; ms become s."""
    pts = {p["id"]: p for p in cook.points(_page())}
    assert len(pts) == 4
    ttft = pts["sglcook-qwen3-235b-b200x8-sglang-1000-1000-c16-ttft"]
    assert ttft["value"] == pytest.approx(0.08882) and ttft["stat"] == "p50"
    assert (ttft["prompt"], ttft["gen"], ttft["spread"]) == (496, 509, 0.998)
    assert ttft["load"] == {"kind": "concurrency", "value": 16, "requests": 80, "warmup": 0}
    assert (ttft["chip"], ttft["tp"], ttft["engine_profile"]) == ("b200", 8, "sglang-0.5.6")
    assert "section '5.1.1.2 Medium Concurrency'" in ttft["source"]
    long = pts["sglcook-qwen3-235b-b200x8-sglang-8000-1000-c64-tpot"]
    assert (long["prompt"], long["gen"], long["value"]) == (3981, 530, 0.01612)


def test_a_run_with_its_own_range_ratio_is_refused():
    """The spread is the default range ratio's: a command that sets one is not read as if
    it had not."""
    with pytest.raises(AssertionError):
        cook.points(_page(extra=" \\\n  --random-range-ratio 1"))


def test_sgl_cookbook_points_are_committed_whole():
    """Nine runs (three scenarios, three concurrencies each), two points each."""
    pts = [p for p in load_points() if p.id.startswith(cook.PREFIX)]
    assert len(pts) == 18
    assert {p.setup["load"]["value"] for p in pts} == {1, 16, 64, 100}
    assert all(p.chip == "b200" and p.source.startswith("github.com/sgl-project/sgl-cookbook")
               for p in pts)  # fmt: skip
