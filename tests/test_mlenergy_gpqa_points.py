"""The ML.ENERGY v3 GPQA serving points (benchmarks/mlenergy_gpqa_points.py; docs/validation.md
"ML.ENERGY's reasoning runs"): the generator turns the leaderboard's per-model data and the
benchmark's launch configs into two points a run (the median inter-token latency, ms to s, and
the output throughput), with the launch's parallelism and the client's request count, and each
model's published output-length histogram as a lengths file; the committed points load, run
under the vllm profile on H100, and score."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from xpusim.validation.points import DATA, load_points
from xpusim.validation.score import validate

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))
try:
    import mlenergy_gpqa_points as gen
finally:
    sys.path.remove(str(BENCH))


def _run(gpu: str, n: int, seqs: int, itl_ms: float, tok_s: float, gen_len: float) -> dict:
    return {"gpu_model": gpu, "num_gpus": n, "max_num_seqs": seqs, "median_itl_ms": itl_ms,
            "output_throughput_tokens_per_sec": tok_s, "avg_output_len": gen_len,
            "avg_batch_size": seqs - 0.5}  # fmt: skip


def test_histogram_rows_are_bin_middles_repeated_by_count():
    assert gen.histogram_rows({"bins": [0, 10, 30], "counts": [2, 1]}) == [5, 5, 20]


def test_runs_become_two_points_with_the_launchs_parallelism_and_the_clients_requests(monkeypatch):
    """The driver launches every GPU as one TP group (experts over them where the config
    enables EP); a sweep's repeats multiply the 198 requests; B200 runs are left out; a run
    the file holds twice keeps both, apart."""
    data = {
        "output_length_distribution": {"bins": [0, 100], "counts": [1]},
        "configurations": [
            _run("H100", 4, 8, 35.1, 227.0, 9047.4), _run("H100", 4, 192, 60.0, 3000.0, 9000),
            _run("H100", 4, 192, 61.0, 2900.0, 9100), _run("B200", 2, 8, 36.9, 216.0, 9525),
        ],
    }  # fmt: skip
    files = {
        gen.data_file("Qwen/Qwen3-235B-A22B-Thinking-2507-FP8"): json.dumps(data),
        "monolithic.config.yaml": "max-num-batched-tokens: 8192\nenable-expert-parallel: true\n"
                                  "# enable-expert-parallel: false  # a comment\n"
                                  "async-scheduling: true\napi-server-count: 3\n",
        "benchmark.py": 'payload = {"messages": messages, "repetition_penalty": 1.1}\n',
        "sweeps.yaml": "sweep:\n  - num_request_repeats: [1]\n    max_num_seqs: [8, 16]\n"
                       "  - num_request_repeats: [2]\n    max_num_seqs: [192]\n",
    }  # fmt: skip
    monkeypatch.setattr(
        gen,
        "show",
        lambda mirror, commit, path: files[path if path in files else path.rsplit("/", 1)[1]],
    )
    monkeypatch.setattr(gen, "MODELS", {"Qwen/Qwen3-235B-A22B-Thinking-2507-FP8":
                                        ("qwen3-235b-a22b-fp8", "fp8", None)})  # fmt: skip
    pts = {p["id"]: p for p in gen.points("lb", "bm", write_lengths=False)}
    base = "mlenergy3-gpqa-qwen3-235b-a22b-fp8-4xh100-s"
    assert sorted(pts) == sorted(f"{base}{s}-{m}" for s in ("8", "192", "192-run2")
                                 for m in ("itl", "tok"))  # fmt: skip
    itl, tok = pts[f"{base}8-itl"], pts[f"{base}8-tok"]
    assert itl["value"] == pytest.approx(0.0351) and itl["stat"] == "p50"
    assert itl["metric"] == "itl_s" and tok["metric"] == "output_tokens_per_s"
    assert tok["value"] == 227.0 and tok["gen"] == 9047
    assert (itl["chips"], itl["tp"], itl["ep"], itl["max_batch"]) == (4, 4, 4, 8)
    assert itl["load"] == {"kind": "concurrency", "value": 8, "requests": 198, "warmup": 0}
    assert pts[f"{base}192-itl"]["load"]["requests"] == 396
    assert pts[f"{base}192-run2-tok"]["value"] == 2900.0
    assert itl["lengths"] == "lengths/mlenergy-gpqa-qwen3-235b-a22b-fp8.csv" and itl["scale_gen"]
    assert "enable-expert-parallel: true" in itl["notes"] and "a comment" not in itl["notes"]
    # the launch's async scheduling and API servers, the client's repetition penalty
    assert (itl["host_overlap"], itl["api_servers"], itl["penalties"]) == (True, 3, True)
    files["monolithic.config.yaml"] = "max-num-batched-tokens: 8192\n"
    files["benchmark.py"] = 'payload = {"messages": messages}\n'
    plain = gen.points("lb", "bm", write_lengths=False)[0]
    assert plain["api_servers"] == 1 and "host_overlap" not in plain and "penalties" not in plain


def test_committed_points_are_h100_vllm_runs_with_both_metrics_and_their_lengths_file():
    pts = [p for p in load_points() if p.id.startswith(gen.PREFIX)]
    assert len(pts) == 132
    runs: dict[str, set[str]] = {}
    for p in pts:
        assert p.chip == "h100-sxm" and p.get("engine_profile") == "vllm-0.11" and p.known_gap
        assert p.get("load")["value"] == p.get("max_batch") and p.get("chips") == p.get("tp")
        assert (DATA.parent / p.get("lengths")).is_file()
        runs.setdefault(p.id.rsplit("-", 1)[0], set()).add(p.metric)
    assert len(runs) == 66 and all(m == {"itl_s", "output_tokens_per_s"} for m in runs.values())


def test_dense_qwen3_at_eight_sequences_scores_near_its_measurement():
    """At eight sequences of 7,000-token answers the step is weights and KV cache read once
    a token: xpusim is within 0.85-1.2x of the measured median ITL and throughput, so a unit
    or mapping error (ms read as s, the TP group read as replicas, ITL scored as TPOT of
    the wrong statistic) breaks this."""
    pts = [p for p in load_points()
           if p.id.startswith(("mlenergy3-gpqa-qwen3-32b-2xh100-s8-",
                               "mlenergy3-gpqa-qwen3-8b-1xh100-s8-"))]  # fmt: skip
    v = validate(pts)
    assert v.n_points == 4
    for s in v.points:
        assert 0.85 <= s.ratio <= 1.2, (s.id, s.ratio)
