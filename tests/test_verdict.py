"""A max-rate trial stopped at its verdict (serving/verdict.py): the same answer as trials
run to their end, and a stop only where the run's p99 must miss the objective."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xpusim
from xpusim.errors import UserError
from xpusim.serving.schedulers import Sequence
from xpusim.serving.verdict import P99, Verdict, _need


def _search(trials: str, **options):
    given = {"prompt": 512, "gen": 128, "requests": 300, "slo_ttft_ms": 100, "slo_tpot_ms": 12}
    return xpusim.serve("llama-3-8b", "h100-sxm", find="max-rate", trials=trials,
                        **given | options)  # fmt: skip


@pytest.mark.parametrize("options", [{}, {"slo_ttft_ms": None, "spread": 0.5, "seed": 3}])
def test_stopping_failing_trials_keeps_the_answer_and_its_figures(options):
    """Fixed lengths under both objectives, and spread ones under TPOT's alone."""
    full, judged = _search("full", **options), _search("verdict", **options)
    assert any("stopped" in t for t in judged.search["trials"])
    assert judged.search["rate"] == full.search["rate"]
    assert judged.to_dict() | {"search": None} == full.to_dict() | {"search": None}
    rows = {t["rate"]: t for t in full.search["trials"]}
    for t in judged.search["trials"]:  # the same trials, each with the same verdict
        assert t["meets"] == rows[t["rate"]]["meets"]
        if "stopped" in t:
            assert not t["meets"] and t["ttft_p99_s"] is None
            assert "over the objective" in t["stopped"]
        else:
            assert t == rows[t["rate"]]


def test_unknown_trials_mode_is_refused():
    with pytest.raises(UserError, match="--trials"):
        _search("some")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(0, 10, allow_nan=False), min_size=1, max_size=400),
       st.floats(0.01, 10))  # fmt: skip
def test_need_late_values_put_the_p99_over_the_bound(values, bound):
    """However the rest fall, _need(n) values above the bound put numpy's p99 above it."""
    n = len(values)
    late = _need(n)
    if late > n:
        return
    arr = np.array(values)
    arr[:late] = np.maximum(arr[:late], np.nextafter(bound, math.inf))
    assert np.percentile(arr, 100 * P99) > bound


def test_waiting_past_the_objective_counts_as_late():
    seqs = [Sequence(i, 0.01 * i, 10, 10) for i in range(200)]
    verdict = Verdict(seqs, 100, 0.5, None)  # 100 measured: 2 + 1 late decide the p99
    assert _need(100) == 3
    assert verdict.missed(1.5) == ""  # requests 100-100 (arrived 1.0) waited 0.5: not over
    assert "3 of 100" in verdict.missed(1.5 + 0.021)  # 100, 101 and 102 waited past 0.5 s


def test_trials_mode_without_a_max_rate_search_is_refused(capsys):
    """--trials only decides max-rate's trials: asked of any other run it would be ignored
    silently, so serve refuses it with one line naming what it needs."""
    from cli_run import refused

    line = refused(capsys, "serve", "llama-3-8b", "--chip", "h100-sxm", "--rate", "2",
                   "--requests", "20", "--trials", "decided")
    assert "--find max-rate" in line


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 5, allow_nan=False), st.booleans()), min_size=1,
                max_size=120),
       st.integers(0, 30), st.floats(0.05, 2), st.floats(0, 5, allow_nan=False),
       st.lists(st.floats(0, 3, allow_nan=False), min_size=1, max_size=40))  # fmt: skip
def test_first_missed_is_where_missed_would_first_say_so(requests, warmup, ttft_s, asked_s,
                                                         gaps_s):  # fmt: skip
    """Replica._skip asks first_missed over a run of step times at once, where the event
    loop asks missed at each: the same step, and missed at the last time asked leaves the
    count where missed at every one of them does. Requests with and without a first token,
    a count already part-way (missed asked once before)."""
    seqs = []
    for i, (arrival_s, served) in enumerate(requests):
        s = Sequence(i, arrival_s, 10, 10)
        if served:
            s.first_token_s = arrival_s + ttft_s / 2
        seqs.append(s)
    warmup = min(warmup, len(seqs) - 1)
    times = asked_s + np.cumsum(gaps_s)
    one_by_one, at_once = Verdict(seqs, warmup, ttft_s, None), Verdict(seqs, warmup, ttft_s, None)
    one_by_one.missed(asked_s)
    at_once.missed(asked_s)
    first = next((k for k, t in enumerate(times.tolist()) if one_by_one.missed(t)), len(times))
    assert at_once.first_missed(times) == first
    at_once.missed(float(times[min(first, len(times) - 1)]))
    assert (at_once.reason, at_once._late_first, at_once._next) == \
        (one_by_one.reason, one_by_one._late_first, one_by_one._next)
