"""The vLLM spot-check serving points (benchmarks/vllm_spotcheck_points.py; docs/validation.md,
nineteenth session, w3): each `benchmark_serving.py` result JSON of simon-mo/vLLM-Benchmark
becomes two points (median TTFT and TPOT) at its own fixed lengths, with the launch's engine
settings, and the committed set is whole."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from xpusim.validation.points import load_points

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))
try:
    import vllm_spotcheck_points as spot
finally:
    sys.path.remove(str(BENCH))

H200, H100 = spot.RUNS  # the commits, in the order RUNS lists them


def _run(model: str, isl: int, osl: int, **fields: float) -> dict:
    """A result JSON as benchmark_serving.py saves it (the fields the writer reads)."""
    return {"model_id": model, "num_prompts": 50, "completed": 50, "request_rate": 10.0,
            "burstiness": 1.0, "max_concurrency": None, "input_lens": [isl] * 50,
            "output_lens": [osl] * 50, "median_ttft_ms": 37.25, "mean_ttft_ms": 40.9,
            "median_tpot_ms": 9.015, "mean_tpot_ms": 8.98, "median_itl_ms": 9.01,
            "output_throughput": 4528.547, **fields}  # fmt: skip


def test_each_result_json_is_two_points_at_its_own_lengths_and_launch():
    """The JSON's lengths are the point's; ms become s; vLLM's runs carry the 8192-token
    budget of its H100/H200 default, SGLang's the radix cache the launch disables and
    mem_fraction_static by tp (0.88 at 1, 0.87 at 2); the whole-run throughput is no point."""
    runs = {
        (H200, "v0.8.2/h200-brewster/llama-8b/vllm-1000-2000.json"):
            _run("neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8", 1000, 2000),
        (H100, "v0.8.2/h100-flow-matic/qwq-32b/sgl-5000-1000.json"):
            _run("Qwen/QwQ-32B", 5000, 1000, median_ttft_ms=6979.8),
    }  # fmt: skip
    pts = {p["id"]: p for p in spot.points(runs)}
    assert len(pts) == 4
    ttft = pts["vllmspot-llama31-8b-fp8-h200x1-vllm-1000-2000-ttft"]
    assert ttft["value"] == pytest.approx(0.03725) and ttft["stat"] == "p50"
    assert (ttft["model"], ttft["precision"], ttft["chip"]) == ("llama-3.1-8b", "fp8", "h200-sxm")
    assert ttft["engine_profile"] == "vllm-0.11" and "kv_utilization" not in ttft
    assert ttft["token_budget"] == 8192 and "PR #12369" in ttft["xpusim_setup"]
    assert ttft["load"] == {"kind": "rate", "value": 10.0, "requests": 50, "warmup": 0}
    assert pts["vllmspot-llama31-8b-fp8-h200x1-vllm-1000-2000-tpot"]["value"] == 0.009015
    assert "output throughput 4528.5 tokens/s over the whole run" in ttft["notes"]
    sgl = pts["vllmspot-qwq-32b-h100x2-sglang-5000-1000-ttft"]
    assert (sgl["model"], sgl["tp"], sgl["chips"], sgl["prompt"], sgl["gen"]) == (
        "qwen2.5-32b", 2, 2, 5000, 1000)
    assert sgl["radix_cache"] is False and sgl["kv_utilization"] == 0.87
    assert sgl["value"] == pytest.approx(6.9798)
    assert "--disable-radix-cache" in sgl["notes"] and "sglang-0.4" in sgl["xpusim_setup"]


def test_a_run_of_mixed_lengths_or_not_all_completed_is_refused():
    """The points take one prompt and one answer length a run: a JSON whose requests differ,
    or one where requests failed, is not silently averaged."""
    path = (H200, "v0.8.2/h200-brewster/llama-8b/sgl-1000-2000.json")
    mixed = _run("neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8", 1000, 2000)
    mixed["output_lens"] = [2000] * 49 + [17]
    with pytest.raises(ValueError):
        spot.points({path: mixed})
    short = _run("neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8", 1000, 2000, completed=48)
    with pytest.raises(AssertionError):
        spot.points({path: short})


def test_vllm_spotcheck_points_are_committed_whole():
    """24 runs (Llama 3.1 8B on one H200, QwQ-32B on two H200 and two H100; vLLM and SGLang;
    four length pairs), two points each, every one citing its JSON and field."""
    pts = [p for p in load_points() if p.id.startswith(spot.PREFIX)]
    assert len(pts) == 48
    assert {p.metric for p in pts} == {"ttft_s", "tpot_s"}
    assert {(p.chip, p.setup["model"]) for p in pts} == {
        ("h200-sxm", "llama-3.1-8b"), ("h200-sxm", "qwen2.5-32b"), ("h100-sxm", "qwen2.5-32b")}
    assert all(p.source.startswith(spot.REPO) and "field '" in p.source for p in pts)
