"""A max-rate trial decided before its end (serving/decision.py, --trials decided): a trial
well clear of the objectives stops either way, one whose p99 is heading for them or whose
queue grows does not, and the search finds what full trials find."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xpusim
from xpusim.serving import capacity
from xpusim.serving.decision import Decision, RowBuffer
from xpusim.serving.schedulers import Sequence

N, WARMUP, GEN = 6000, 500, 50
RATE = 100.0  # arrivals per second: the last at 60 s


def _trial(ttft_s, tpot_s: float = 0.01, known: float = 0.5) -> Decision:
    """A trial of N requests whose first `known` share (arrival order) has finished, with
    the TTFTs given (an array over the requests) and a fixed TPOT; the rest unfinished."""
    seqs = [Sequence(i, i / RATE, 100, GEN) for i in range(N)]
    decision = Decision(seqs, WARMUP, 2.0, 0.2, capacity.BACKLOG)
    for s, ttft in zip(seqs[: int(known * N)], ttft_s, strict=False):
        s.first_token_s = s.arrival_s + ttft
        s.finish_s = s.first_token_s + tpot_s * (GEN - 1)
        decision.finished(s)
    return decision


def _noise(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).exponential(1.0, N)


def test_a_trial_far_under_the_objectives_passes_early_and_keeps_its_prefix():
    decision = _trial(0.05 * _noise())
    assert decision.settled()
    assert decision.outcome == "pass"
    assert decision.upto == N // 2
    assert "pass" in decision.reason


def test_a_trial_far_over_an_objective_fails_early():
    decision = _trial(0.05 * _noise(), tpot_s=0.5)
    assert decision.settled()
    assert decision.outcome == "fail"


def test_a_p99_rising_towards_the_objective_by_the_last_arrival_does_not_pass():
    """Under the objective now (the p99 of the latest batch about 1.4 s), over it at the last
    arrival on its line (about 2.3 s), the slope under BACKLOG's: no pass."""
    arrival = np.arange(N) / RATE
    decision = _trial(0.1 * _noise() + 0.03 * arrival)
    assert not decision.settled()
    assert decision.outcome == ""


def test_a_growing_queue_does_not_pass_under_a_loose_objective():
    """Waits growing by 0.2 s a second (twice BACKLOG's share): the p99s are far under a
    100 s objective, yet the queue is not kept up with."""
    arrival = np.arange(N) / RATE
    seqs = [Sequence(i, i / RATE, 100, GEN) for i in range(N)]
    decision = Decision(seqs, WARMUP, 100.0, None, capacity.BACKLOG)
    for s, ttft in zip(seqs[: N // 2], 0.05 * _noise() + 0.2 * arrival, strict=False):
        s.first_token_s = s.finish_s = s.arrival_s + ttft
        decision.finished(s)
    assert not decision.settled()


def test_too_few_measured_requests_are_never_decided():
    decision = _trial(0.05 * _noise(), known=0.3)  # 1,300 measured: under MIN_MEASURED
    assert not decision.settled()


@pytest.mark.parametrize("slo_ttft_ms, slo_tpot_ms", [(200, 20), (None, 9.0)])
def test_decided_trials_find_the_answer_full_trials_find(slo_ttft_ms, slo_tpot_ms):
    """The reference is every trial run to its end. Decided trials stop some of them early
    (both ways) and find the same rate within RATE_TOLERANCE, and the answer's figures are
    a whole run's: equal to the full search's where the rates agree."""
    setup = dict(prompt=256, gen=64, spread=0.5, requests=3000, max_batch=32,
                 slo_ttft_ms=slo_ttft_ms, slo_tpot_ms=slo_tpot_ms)  # fmt: skip
    full = xpusim.serve("llama-3-8b", "h100-sxm", find="max-rate", trials="full", **setup)
    fast = xpusim.serve("llama-3-8b", "h100-sxm", find="max-rate", trials="decided", **setup)
    assert any("decided" in t for t in fast.search["trials"])
    assert fast.search["rate"] == pytest.approx(full.search["rate"],
                                                rel=capacity.RATE_TOLERANCE)  # fmt: skip
    if fast.search["rate"] == full.search["rate"]:
        assert fast.to_dict() | {"search": None} == full.to_dict() | {"search": None}
    rows = {t["rate"]: t for t in full.search["trials"]}
    for t in fast.search["trials"]:  # each decision is the full trial's outcome
        if t["rate"] in rows:
            assert t["meets"] == rows[t["rate"]]["meets"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.tuples(st.floats(-1e6, 1e6), st.floats(-1e6, 1e6)), max_size=30),
                max_size=8))
def test_rows_read_as_the_plain_array_bit_for_bit(appends):
    """RowBuffer.array after any interleaving of appends and reads: the plain np.array of every
    row so far, element for element (bits) and stride for stride."""
    rows = RowBuffer(sum(map(len, appends)))
    for chunk in appends:
        for row in chunk:
            rows.append(row)
        fast, plain = rows.array(), rows.reference()
        if len(rows):
            assert fast.tobytes() == plain.tobytes()
            assert fast.strides == plain.strides and fast.flags.c_contiguous
        assert fast.shape == (len(rows), 2)


class _EveryCall(Decision):
    """Decision without its shortcut: the rows filed at every call, as before it."""

    def _may_check(self) -> bool:
        return True


@pytest.mark.parametrize("tpot_s", [0.01, 0.039, 0.5])
def test_the_shortcut_answers_every_call_as_filing_rows_at_every_call_does(tpot_s):
    """Decision._may_check skips settled's filing while no check can fall due: requests
    finishing out of arrival order, settled asked after each, it answers every call (and
    sets its outcome, prefix and reason) as the Decision that files rows at each does,
    at its first check, at a later one (0.039 s: a p99 of about 0.18 s) and failing."""
    ttft = 0.05 * _noise()
    _assert_answers_equal(ttft, np.arange(N) / RATE + ttft + tpot_s * (GEN - 1) * _noise(1), GEN)


def _assert_answers_equal(ttft_s: np.ndarray, finish_s: np.ndarray, gen: int) -> None:
    """Requests finishing in the order of `finish_s`, settled asked after each: Decision's
    answers (each call's, and its outcome, prefix and reason) equal _EveryCall's."""
    answers = []
    for kind in (Decision, _EveryCall):
        seqs = [Sequence(i, i / RATE, 100, gen) for i in range(N)]
        decision = kind(seqs, WARMUP, 2.0, 0.2, capacity.BACKLOG)
        said = []
        for i in np.argsort(finish_s, kind="stable").tolist():
            s = seqs[i]
            s.first_token_s, s.finish_s = s.arrival_s + ttft_s[i], finish_s[i]
            decision.finished(s)
            said.append(decision.settled())
            if said[-1]:
                break
        answers.append((said, decision.outcome, decision.upto, decision.reason))
    assert answers[0] == answers[1]


def test_the_shortcut_decides_every_trial_as_filing_rows_at_every_call_does():
    """Decision._may_check skips settled's filing while no check can fall due: each trial
    of a decided search (its outcome, where it stopped, why, and its figures) equals the
    one with the rows filed at every call."""
    setup = dict(prompt=256, gen=64, spread=0.5, requests=3000, max_batch=32,
                 slo_ttft_ms=200, slo_tpot_ms=20, find="max-rate", trials="decided")  # fmt: skip
    fast = xpusim.serve("llama-3-8b", "h100-sxm", **setup)
    original = capacity.Decision
    capacity.Decision = _EveryCall
    try:
        plain = xpusim.serve("llama-3-8b", "h100-sxm", **setup)
    finally:
        capacity.Decision = original
    assert any("decided" in t for t in fast.search["trials"])
    assert fast.to_dict() == plain.to_dict()


@pytest.mark.parametrize("ttft_scale_s", [0.05, 0.3, 0.8])
def test_the_shortcut_answers_in_arrival_order_as_filing_rows_at_every_call_does(ttft_scale_s):
    """The same with requests finishing in arrival order, so the finished prefix grows by
    one a call and reaches each check's bound exactly (out of order it jumps by hundreds and
    an off-by-one in _may_check's bounds would pass): passing at the first check, at the
    seventh (a TTFT p99 of about 1.4 s against 2 s), and failing at the second."""
    gen = 500  # TPOTs near 0.024 s, far under their 0.2 s objective
    _assert_answers_equal(ttft_scale_s * _noise(), np.arange(N) / RATE + 12.0, gen)
