"""What benchmarks/inferencex_points.py states beside a point from the run's own records
(docs/validation.md, "Which image ran"): a run older than the runs behind its configuration's
other lengths says what it measured at those lengths and what the newer runs did (a run's
streamed tokens a step: test_published_serving's unspeculated-gap test); what each TTFT
point states of its first wave, and benchmarks/inferencex_first_wave.py's split and same-run
pairs (docs/validation.md, fifteenth session, q5)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from xpusim.validation.points import load_points

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))
try:
    import inferencex_first_wave as fw
    import inferencex_points as gen
finally:
    sys.path.remove(str(BENCH))

CONFIG = {"hardware": "mi300x", "framework": "sglang", "precision": "fp8", "decode_tp": 8,
          "decode_ep": 1, "decode_dp_attention": False, "spec_method": "none"}  # fmt: skip
OLD, NEW = "runs/1", "runs/2"


def _row(isl: int, osl: int, conc: int, date: str, run: str, tpot_ms: float) -> dict[str, Any]:
    return {**CONFIG, "isl": isl, "osl": osl, "conc": conc, "date": date, "run_url": run,
            "image": f"sglang:{run}", "metrics": {"median_tpot": tpot_ms / 1e3}}  # fmt: skip


HISTORY = [
    _row(1024, 8192, 4, "2026-02-27", OLD, 25.2),
    _row(1024, 1024, 4, "2026-02-27", OLD, 24.4),
    _row(1024, 1024, 16, "2026-02-27", OLD, 30.5),
    _row(1024, 1024, 4, "2026-05-18", NEW, 14.6),
    _row(1024, 1024, 16, "2026-05-18", NEW, 21.0),
]


def test_a_run_older_than_the_other_lengths_runs_states_both():
    gap = gen.older_run_gap(HISTORY[0], HISTORY)
    assert gap is not None and "2026-02-27, sglang:runs/1" in gap
    assert "1k/1k 24.4/30.5 ms at 4/16 clients in this run" in gap
    assert "14.6/21.0 ms at 4/16 clients on 2026-05-18" in gap


def test_the_newest_run_and_a_run_alone_state_nothing():
    assert gen.older_run_gap(HISTORY[3], HISTORY) is None  # newest at every length
    alone = [_row(1024, 8192, 4, "2026-02-27", OLD, 25.2), *HISTORY[3:]]
    assert gen.older_run_gap(alone[0], alone) is None  # its run ran no other length
    other = [{**h, "hardware": "mi325x"} if h["run_url"] == NEW else h for h in HISTORY]
    assert gen.older_run_gap(other[0], other) is None  # another chip's newer run is not its own


def test_the_committed_mi30x_1k8k_points_name_their_image_and_its_other_lengths():
    """The MI300X and MI325X 1k/8k points ran lmsysorg/sglang:v0.5.9 on 2026-02-27, the others
    v0.5.12 on 2026-05-18: each 1k/8k point says so with the same run's 1k/1k median, TTFT
    for a TTFT point and TPOT for the others, and no 1k/1k or 8k/1k point of those chips
    claims an older run."""
    mi30x = ("inferencex-dsr1-mi300x-sglang", "inferencex-dsr1-mi325x-sglang")
    pts = [p for p in load_points() if p.id.startswith(mi30x)]
    long = [p for p in pts if "-1k8k-" in p.id]
    assert len(long) == 30
    for p in long:
        assert "(2026-02-27, lmsysorg/sglang:v0.5.9-rocm700-mi30x) is older" in p.known_gap, p.id
        if p.metric == "ttft_s":
            assert "median TTFT 1k/1k 0.167/0.168/0.199 s" in p.known_gap or (
                "median TTFT 1k/1k 0.115/0.124/0.148 s" in p.known_gap), p.id
        else:
            assert "1k/1k 24.4/30.5/51.3 ms" in p.known_gap or "1k/1k 23.9/" in p.known_gap, p.id
    assert not any("is older than the runs" in p.known_gap for p in pts if p not in long)


def test_a_ttft_point_compares_the_older_run_by_median_ttft():
    """The H200 SGLang 1k/8k points ran v0.5.9 on 2026-03-25, the 1k/1k ones v0.5.12 on
    2026-05-17: the TTFT point states both runs' 1k/1k median TTFT (0.156 s at 4 clients in
    its own run, 0.085 in the newer one), which is why its mean TTFT reads higher than the
    1k/1k point's (docs/validation.md, fifteenth session, q5)."""
    pts = {p.id: p for p in load_points()}
    gap = pts["inferencex-dsr1-h200-sglang-fp8-tp8-1k8k-c4-ttft"].known_gap
    assert "median TTFT 1k/1k 0.156/0.153/0.178 s at 4/16/64 clients in this run, " in gap
    assert "0.085/0.094/0.127 s at 4/16/64 clients on 2026-05-17" in gap
    assert "median TPOT" in pts["inferencex-dsr1-h200-sglang-fp8-tp8-1k8k-c4-tpot"].known_gap


def test_the_first_wave_is_what_the_mean_holds_beyond_the_rest():
    """benchmark_serving measures WAVES x C requests, the first C sent together: the mean is
    (first + (WAVES - 1) x rest) / WAVES, so the first wave follows from the mean and the
    median; no note where the mean does not exceed the median or one client runs alone."""
    assert gen.WAVES == 10
    assert abs(gen.first_wave(0.158, 0.085) - 0.815) < 1e-9  # H200 SGLang 1k/1k, 4 clients
    assert abs((gen.first_wave(0.3, 0.1) + 9 * 0.1) / 10 - 0.3) < 1e-12
    m = {"mean_ttft": 0.16, "median_ttft": 0.08, "p90_ttft": 0.166, "p99_ttft": 0.811}
    gap = gen.first_wave_gap(m, 4)
    assert gap is not None and "the first 4 of its 40 prompts together" in gap
    assert "median TTFT is 0.080 s, its mean 0.160 s, p90 0.166 s, p99 0.811 s" in gap
    assert "the first 4 average 0.88 s" in gap
    assert gen.first_wave_gap(m, 1) is None
    assert gen.first_wave_gap({**m, "mean_ttft": 0.080}, 4) is None
    assert "p90" not in gen.first_wave_gap({"mean_ttft": 0.3, "median_ttft": 0.1}, 8)


def test_the_committed_ttft_points_state_their_first_wave():
    """Every InferenceX TTFT point past one client whose mean exceeds its median says what its
    first wave averaged; TPOT and throughput points say nothing of it."""
    pts = [p for p in load_points() if p.id.startswith("inferencex-")]
    waves = [p for p in pts if "the mean holds a first wave" in p.known_gap]
    assert all(p.metric == "ttft_s" for p in waves)
    assert len(waves) >= 140
    h200 = next(p for p in waves if p.id == "inferencex-dsr1-h200-sglang-fp8-tp8-1k1k-c4-ttft")
    assert "the first 4 average 0.82 s" in h200.known_gap  # median 0.085 s, mean 0.158


def test_sglang_attention_runs_in_the_format_aiter_has_on_each_amd_chip():
    """AITER's FP8 prefill attention is gfx950's alone: SGLang computes attention in BF16 on
    MI300X/MI325X whatever the checkpoint, in FP8 on MI355X for the MXFP4 checkpoint too, and
    in the checkpoint's format elsewhere (no field)."""
    row = {**CONFIG, "isl": 1024, "osl": 1024, "conc": 4}
    assert gen.attention_format(row) == "bf16"
    assert gen.attention_format({**row, "hardware": "mi325x"}) == "bf16"
    assert gen.attention_format({**row, "hardware": "mi355x", "precision": "fp4"}) == "fp8"
    assert gen.attention_format({**row, "hardware": "mi355x"}) is None  # FP8 already
    assert gen.attention_format({**row, "hardware": "mi355x", "framework": "atom"}) is None
    assert gen.attention_format({**row, "hardware": "h200"}) is None


def test_the_committed_amd_sglang_points_state_their_attention_format():
    pts = [p for p in load_points() if p.id.startswith("inferencex-dsr1-")]
    for p in pts:
        sglang = p.get("engine_profile") == "sglang"
        want = None
        if sglang and p.chip in ("mi300x", "mi325x"):
            want = "bf16"
        elif sglang and p.chip == "mi355x" and p.get("precision") == "mxfp4":
            want = "fp8"
        assert p.get("attention_precision") == want, p.id
    assert sum(p.get("attention_precision") == "bf16" for p in pts) >= 60


def _ttft_row(osl: int, date: str, run: str, mean: float, median: float) -> dict[str, Any]:
    return {**CONFIG, "hardware": "h200", "conc": 4, "isl": 1024, "osl": osl, "date": date,
            "run_url": run, "metrics": {"mean_ttft": mean, "median_ttft": median}}  # fmt: skip


def test_only_one_runs_lengths_are_paired():
    rows = [_ttft_row(1024, "2026-03-25", "a", 0.260, 0.156),
            _ttft_row(8192, "2026-03-25", "a", 0.259, 0.157),
            _ttft_row(1024, "2026-05-17", "b", 0.158, 0.085)]  # fmt: skip
    (line,) = fw.same_run_pairs(rows)
    assert "2026-03-25  mean 0.260 0.259 (x1.00)  median 0.156 0.157" in line
    assert fw.same_run_pairs(rows[1:]) == []  # 1k/8k of one run, 1k/1k of another


@given(st.floats(0.01, 10), st.floats(0.01, 10), st.floats(0.5, 2))
def test_xpusim_with_the_measured_first_wave_and_the_median_as_its_rest_is_the_mean(
    first: float, rest: float, scale: float
):
    """The split is exact: if xpusim's rest were the run's median, putting the measured first
    wave in place of its own gives the measured mean back; a rest `scale` times the median
    moves the result by at most that factor."""
    mean = (first + (fw.WAVES - 1) * rest) / fw.WAVES
    split = {"measured": mean, "first": fw.first_wave(mean, rest), "rest_xpusim": rest}
    assert abs(fw.with_measured_first(split) - 1) < 1e-9
    ratio = fw.with_measured_first({**split, "rest_xpusim": rest * scale})
    assert min(1, scale) - 1e-9 <= ratio <= max(1, scale) + 1e-9


def test_points_state_the_clients_warm_up_which_counts_only_with_a_cold_start(monkeypatch):
    """Every InferenceX point states its client's warm-up, 2 x C copies of the first prompt
    (benchmark_lib.sh --num-warmups), and no point a cold start: the runners at the runs'
    dates mounted the user's home with no per-job TRITON_CACHE_DIR (docs/validation.md,
    fifteenth session, q6). The adapter passes the warm-up to serve only with a cold start."""
    from dataclasses import replace

    from test_frontend import _serve_options

    points = [p for p in load_points() if p.id.startswith("inferencex-")]
    assert points and gen.WARMUP_WAVES == 2
    for p in points:
        assert p.get("load")["client_warmup"] == gen.WARMUP_WAVES * p.get("load")["value"]
        assert not p.get("cold_start")
    c4 = next(p for p in points if p.chip == "mi300x" and p.id.endswith("1k1k-c4-ttft"))
    assert "cold_start" not in _serve_options(c4, monkeypatch)
    cold = replace(c4, setup={**c4.setup, "cold_start": True})
    seen = _serve_options(cold, monkeypatch)
    assert seen["cold_start"] is True and seen["client_warmup"] == 8
