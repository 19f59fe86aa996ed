"""The NIM course-data serving points (benchmarks/nim_dli_points.py; docs/validation.md "NVIDIA's
NIM course data"): the generator turns GenAI-Perf rows into points in published.json's
layout (nanoseconds to seconds, repeated runs averaged, each metric's gap stated), puts them
where inferencex_points.py's rewrite of the array's end leaves them alone, and the committed
points load, run closed loops on H100 under the trtllm-cpp profile, and score."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from xpusim.validation.points import load_points
from xpusim.validation.score import validate

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))
try:
    import nim_dli_points as gen
finally:
    sys.path.remove(str(BENCH))


def _row(conc: int, ttft_ns: float, itl_ns: float, tok_s: float) -> dict[str, str]:
    return {
        "task_inputs-model": "meta-llama3-8b-instruct", "task_inputs-GPU": "H100_80GB_HBM3",
        "task_inputs-n_gpus": "1", "task_inputs-precision": "fp8",
        "input_config-synthetic_input_tokens_mean": "200",
        "input_config-output_tokens_mean": "1000", "input_config-concurrency": str(conc),
        "num_input_token-avg": "199.6", "num_output_token-avg": "1000.0",
        "time_to_first_token-avg": str(ttft_ns), "inter_token_latency-avg": str(itl_ns),
        "output_token_throughput-avg": str(tok_s),
    }  # fmt: skip


def test_rows_become_three_points_a_run_with_repeats_averaged_and_units_converted():
    pts = gen.points([
        _row(1, 10e6, 5e6, 190.0),
        _row(5, 20e6, 6e6, 800.0), _row(5, 30e6, 7e6, 900.0),  # one setting measured twice
        _row(2, 15e6, 5e6, 380.0),  # a concurrency the set leaves out
    ])  # fmt: skip
    by_id = {p["id"]: p for p in pts}
    assert len(pts) == 6 and len(by_id) == 6
    c5 = "nimdli-llama-3-8b-1xh100-fp8-200-1000-c5"
    assert by_id[f"{c5}-ttft"]["value"] == pytest.approx(0.025)
    assert by_id[f"{c5}-itl"]["value"] == pytest.approx(0.0065)
    assert by_id[f"{c5}-tok"]["value"] == pytest.approx(850.0)
    assert "2 runs of this setting" in by_id[f"{c5}-ttft"]["notes"]
    assert (
        "runs of this setting"
        not in by_id["nimdli-llama-3-8b-1xh100-fp8-200-1000-c1-ttft"]["notes"]
    )
    assert by_id[f"{c5}-ttft"]["load"] == {"kind": "concurrency", "value": 5, "warmup": 0}
    assert by_id[f"{c5}-ttft"]["known_gap"] == gen.LOCKSTEP_GAP
    assert by_id["nimdli-llama-3-8b-1xh100-fp8-200-1000-c1-ttft"]["known_gap"] == gen.IDLE_GAP
    assert by_id[f"{c5}-itl"]["known_gap"] == gen.DECODE_GAP
    assert gen.QUEUE_GAP in gen.gap("ttft_s", 100) and gen.QUEUE_GAP not in gen.gap("ttft_s", 25)


def test_the_points_go_before_the_inferencex_block_and_a_rerun_replaces_them(tmp_path, monkeypatch):
    def point(pid: str) -> dict[str, str]:
        return {"id": pid, "load": {"kind": "burst"}}

    doc = {"about": "x", "points": [point("a"), point("inferencex-b")], "calibration": {"k": 1}}
    path = tmp_path / "published.json"
    path.write_text(json.dumps(doc, indent=1))  # published.json's layout: points at 2 spaces
    monkeypatch.setattr(gen, "PUBLISHED", path)
    gen.write([point("nimdli-1"), point("nimdli-2")])
    once = path.read_text()
    assert [p["id"] for p in json.loads(once)["points"]] == [
        "a", "nimdli-1", "nimdli-2", "inferencex-b",
    ]  # fmt: skip
    assert json.loads(once)["calibration"] == {"k": 1}
    gen.write([point("nimdli-1"), point("nimdli-2")])
    assert path.read_text() == once
    gen.write([point("nimdli-3")])
    assert [p["id"] for p in json.loads(path.read_text())["points"]] == [
        "a", "nimdli-3", "inferencex-b",
    ]  # fmt: skip


def test_committed_points_are_h100_closed_loops_with_every_metric_and_a_stated_gap():
    pts = [p for p in load_points() if p.id.startswith(gen.PREFIX)]
    assert len(pts) >= 300
    runs: dict[str, set[str]] = {}
    for p in pts:
        assert p.chip == "h100-sxm" and p.get("engine_profile") == "trtllm-cpp"
        assert p.get("load")["kind"] == "concurrency"
        assert p.get("load")["value"] in gen.CONCURRENCY
        assert p.get("load")["warmup"] == 0  # GenAI-Perf's statistics hold the first wave
        assert p.get("chips") == p.get("tp") and p.known_gap
        runs.setdefault(p.id.rsplit("-", 1)[0], set()).add(p.metric)
    assert all(m == {"ttft_s", "tpot_s", "output_tokens_per_s"} for m in runs.values())


def test_one_client_points_score_near_their_measurement():
    """At one client of 200-token prompts there is no queue and no batch: xpusim's step is
    within 0.6-1.25x of NIM's (the DECODE_GAP and IDLE_GAP bands), so a unit or mapping
    error (ns read as ms, TP read as replicas) breaks this."""
    pts = [
        p for p in load_points()
        if p.id.startswith("nimdli-llama-3-8b-1xh100-fp16-200-200-c1-")
    ]  # fmt: skip
    v = validate(pts)
    assert v.n_points == 3
    for s in v.points:
        assert 0.6 <= s.ratio <= 1.25, (s.id, s.ratio)


def test_long_context_one_client_decode_is_priced_without_multi_block_mode():
    """With 7000-token prompts the 2024 build's decode attention streams each KV head's cache
    on one thread block (trtllm-cpp): xpusim's TPOT is within 0.8-1.45x of NIM's (the
    DECODE_GAP band, FP16 over, FP8 under), where the split-KV trtllm profile gave 0.46-0.75x;
    losing the floor breaks this."""
    pts = [p for p in load_points()
           if p.id.startswith("nimdli-llama-3-70b-8xh100-") and p.id.endswith("-7000-1000-c1-itl")]
    v = validate(pts)
    assert v.n_points == 2
    for s in v.points:
        assert 0.8 <= s.ratio <= 1.45, (s.id, s.ratio)


def test_the_cold_first_wave_counts_and_lengthens_a_long_prompt_ttft():
    """GenAI-Perf counts every request from the first (gen.WARMUP): five 7000-token prompts
    sent at once queue behind one another, so counting that wave gives a longer mean TTFT
    than leaving serve's default tenth out as warm-up; dropping the point's warmup breaks
    this."""
    from dataclasses import replace

    (point,) = [p for p in load_points()
                if p.id == "nimdli-llama-3-8b-1xh100-fp16-7000-1000-c5-ttft"]  # fmt: skip
    load = {k: v for k, v in point.get("load").items() if k != "warmup"}
    default = replace(point, id=f"{point.id}-default", setup=point.setup | {"load": load})
    got = {s.id: s.predicted for s in validate([point, default]).points}
    assert got[point.id] > 1.05 * got[default.id]
