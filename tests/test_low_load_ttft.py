"""TTFT at a few clients, part by part (benchmarks/low_load_ttft.py; docs/validation.md,
2026-12-07, t1): the rows are the simulation `validate` scores (adapters.serving_result), and
their parts (front end, wait, prompt steps) add up to its TTFT."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from xpusim.serving.engines import engine
from xpusim.validation.adapters import predict, serving_result

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))
try:
    import low_load_ttft as low
finally:
    sys.path.remove(str(BENCH))


def _gpustack_vllm():
    return low.low_load_ttft_points(["gpustack"], ("vllm",))


def test_selects_the_few_client_ttft_points_of_the_engines_asked():
    points = _gpustack_vllm()
    assert sorted(p.get("load")["value"] for p in points) == [1, 2, 4, 8]
    assert {p.get("engine_profile") for p in points} == {"vllm-0.11"}
    assert all(p.metric == "ttft_s" for p in points)
    assert not low.low_load_ttft_points(["gpustack"], ("vllm",), max_clients=0)
    fewer = low.low_load_ttft_points(["GPUStack"], ("vllm",), max_clients=2)  # any case
    assert sorted(p.get("load")["value"] for p in fewer) == [1, 2]


def test_the_row_is_the_scored_simulation_and_its_parts_add_up():
    point = next(p for p in _gpustack_vllm() if p.get("load")["value"] == 1)
    assert serving_result(point).ttft_s.mean == predict(point).value
    row = low.parts(point)
    assert row["predicted_ms"] == pytest.approx(1e3 * predict(point).value, rel=1e-12)
    assert row["frontend_ms"] == pytest.approx(1e3 * engine("vllm-0.11").frontend_s)
    total = row["frontend_ms"] + row["wait_ms"] + row["prompt_ms"]
    assert total == pytest.approx(row["predicted_ms"], rel=1e-9)  # the stat is the mean
    assert row["left_ms"] == pytest.approx(row["measured_ms"] - row["predicted_ms"])
    assert row["prompt_ms"] > 0 and row["wait_ms"] >= -1e-9


def test_table_prints_a_skipped_point_with_its_reason_and_no_negative_zero_nor_nan():
    rows = [{"id": "a", "engine": "vllm", "clients": 1, "prompt_tokens": 8, "measured_ms": 1.0,
             "skipped": "does not fit"},
            {"id": "b", "engine": "vllm", "clients": 1, "prompt_tokens": 8, "measured_ms": 2.0,
             "predicted_ms": 1.0, "frontend_ms": 0.5, "wait_ms": -1e-12, "prompt_ms": 0.5,
             "left_ms": 1.0, "itl_p99_ms": 7.0},
            {"id": "c", "engine": "vllm", "clients": 1, "prompt_tokens": 8, "measured_ms": 2.0,
             "predicted_ms": 1.0, "frontend_ms": 0.5, "wait_ms": 0.0, "prompt_ms": 0.5,
             "left_ms": 1.0}]  # fmt: skip
    text = low.table(rows)
    assert "skipped: does not fit" in text
    assert "-0.0" not in text and "| 0.0 |" in text
    assert text.splitlines()[-1].endswith("| - |") and "nan" not in text  # one token: no gap
