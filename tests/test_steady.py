"""The steady-state stopping rule (serving/steady.py): a stationary open loop stops before its
end, within the stated width of the whole run's figures; a run still filling does not stop."""

from __future__ import annotations

import numpy as np
import pytest

import xpusim
from xpusim.errors import UserError
from xpusim.serving.schedulers import Sequence
from xpusim.serving.steady import MIN_MEASURED, REL_WIDTH, Steady


def _open_loop(n: int, ttft_s, seed: int = 0) -> list[Sequence]:
    """n requests of Poisson arrivals, each finished with the given TTFT (an array) and a
    TPOT drawn around 20 ms."""
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(0.01, n))
    seqs = []
    for i in range(n):
        s = Sequence(i, float(arrival[i]), 256, 64)
        s.first_token_s = s.arrival_s + float(ttft_s[i])
        s.finish_s = s.first_token_s + 63 * float(rng.gamma(20.0, 0.001))
        seqs.append(s)
    return seqs


def _feed(judge: Steady, seqs: list[Sequence]) -> int | None:
    """Finishes the requests in arrival order; the count finished when the judge stopped."""
    for k, s in enumerate(seqs, 1):
        judge.finished(s)
        if judge.settled():
            return k
    return None


def test_a_stationary_open_loop_stops_early_within_its_width():
    n, warmup = 16_000, 4_000
    rng = np.random.default_rng(1)
    seqs = _open_loop(n, rng.gamma(4.0, 0.05, n))
    judge = Steady(seqs, warmup)
    stopped = _feed(judge, seqs)
    assert stopped is not None and warmup + MIN_MEASURED <= stopped < n
    assert judge.upto == stopped
    kept = seqs[warmup:stopped]
    whole = seqs[warmup:]

    def ttft(group):
        return np.array([s.first_token_s - s.arrival_s for s in group])

    for stat in (np.mean, lambda v: np.percentile(v, 99)):
        assert stat(ttft(kept)) == pytest.approx(stat(ttft(whole)), rel=2 * REL_WIDTH)


def test_an_open_loop_still_filling_does_not_stop():
    """TTFT rising through the run (a queue growing past capacity, or a system filling):
    however narrow each batch, the halves differ."""
    n = 16_000
    rng = np.random.default_rng(2)
    rising = np.linspace(0.1, 0.4, n) * rng.gamma(50.0, 0.02, n)
    seqs = _open_loop(n, rising)
    assert _feed(Steady(seqs, 1_000), seqs) is None


def test_serve_until_steady_stops_a_light_open_loop_near_the_full_run():
    """A real run: far under capacity the statistics settle long before 12,000 requests, and
    the stopped run's figures are the full one's within the rule's width (twice it, for the
    p99s, whose batch estimate is the coarsest)."""
    options = {"rate": 20.0, "requests": 12_000, "prompt": 256, "gen": 32, "spread": 0.5}
    full = xpusim.serve("llama-3-8b", "h100-sxm", **options)
    steady = xpusim.serve("llama-3-8b", "h100-sxm", until="steady", **options)
    assert steady.requests < full.requests
    assert any("steady after" in n for n in steady.notes)
    for name in ("ttft_s", "tpot_s"):
        a, b = getattr(steady, name), getattr(full, name)
        assert a.mean == pytest.approx(b.mean, rel=2 * REL_WIDTH)
        assert a.p99 == pytest.approx(b.p99, rel=2 * REL_WIDTH)


def test_an_unknown_until_is_refused():
    with pytest.raises(UserError, match="until"):
        xpusim.serve("llama-3-8b", "h100-sxm", rate=1.0, until="forever")
