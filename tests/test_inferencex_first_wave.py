"""benchmarks/inferencex_first_wave.py: the same run's 1k/1k and 1k/8k rows are paired and
others are not (comparing runs compares images), and the first-wave split recombines to the
run's mean (docs/validation.md, fifteenth session, q5)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))
try:
    import inferencex_first_wave as fw
finally:
    sys.path.remove(str(BENCH))

CONFIG = {"hardware": "h200", "framework": "sglang", "precision": "fp8", "decode_tp": 8,
          "decode_ep": 1, "decode_dp_attention": False, "spec_method": "none", "conc": 4,
          "isl": 1024}  # fmt: skip


def _row(osl: int, date: str, run: str, mean: float, median: float) -> dict[str, Any]:
    return {**CONFIG, "osl": osl, "date": date, "run_url": run,
            "metrics": {"mean_ttft": mean, "median_ttft": median}}  # fmt: skip


def test_only_one_runs_lengths_are_paired():
    rows = [_row(1024, "2026-03-25", "a", 0.260, 0.156),
            _row(8192, "2026-03-25", "a", 0.259, 0.157),
            _row(1024, "2026-05-17", "b", 0.158, 0.085)]  # fmt: skip
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
