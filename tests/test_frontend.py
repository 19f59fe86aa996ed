"""An engine's time outside its steps for each request (engines.toml frontend_s; serve's
--frontend-ms): a request reaches the engine that long after it arrives, so each TTFT and
end-to-end latency holds it once, the steps stay as they were, and a closed loop's clients
wait it before each request."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xpusim
from xpusim.errors import UserError
from xpusim.serving.engines import engine, engines

ONE_CLIENT = dict(concurrency=1, requests=12, prompt=233, gen=64, warmup=0)


def _serve(**options):
    return xpusim.serve("qwen3-8b", "h100-sxm", **options)


def test_every_profile_states_its_frontend_time():
    for profile in engines().values():
        assert profile.frontend_s >= 0 and profile.frontend_source, profile.name
    assert engine("ideal").frontend_s == 0.0  # the bound has none
    assert engine("vllm").frontend_s > engine("sglang").frontend_s > 0


@pytest.mark.parametrize("load", [ONE_CLIENT, dict(rate=0.5, requests=12, prompt=233, gen=64,
                                                   warmup=0)], ids=["closed", "open"])
def test_one_request_at_a_time_pays_it_once_in_ttft_and_e2e(load):
    """Alone in the engine a request's steps are the same: TTFT and end-to-end latency grow
    by the front end's time exactly, TPOT not at all."""
    none = _serve(**load, frontend_ms=0.0)
    some = _serve(**load, frontend_ms=25.0)
    assert some.ttft_s.mean == pytest.approx(none.ttft_s.mean + 0.025, abs=1e-9)
    assert some.e2e_s.p99 == pytest.approx(none.e2e_s.p99 + 0.025, abs=1e-9)
    assert some.tpot_s.mean == pytest.approx(none.tpot_s.mean, rel=1e-12)


def test_the_engine_profiles_own_time_is_the_default():
    default = _serve(**ONE_CLIENT, engine="sglang")
    given_ = _serve(**ONE_CLIENT, engine="sglang", frontend_ms=engine("sglang").frontend_s * 1e3)
    assert default.ttft_s.mean == given_.ttft_s.mean


def test_a_closed_loops_clients_wait_it_before_each_request():
    """One client: each request starts a front end after the last one ended, so the
    requests come slower (what a real client sees), by exactly that time each."""
    none = _serve(**ONE_CLIENT, frontend_ms=0.0)
    some = _serve(**ONE_CLIENT, frontend_ms=25.0)
    per_request = lambda r: r.duration_s / (r.requests - 1)  # noqa: E731  (arrival to arrival)
    assert per_request(some) == pytest.approx(per_request(none) + 0.025, rel=1e-6)


@settings(max_examples=8, deadline=None)
@given(st.floats(0.0, 200.0), st.floats(0.0, 200.0))
def test_more_frontend_time_never_makes_a_request_faster(a_ms, b_ms):
    """Physics: a delay before the engine adds to every latency, never removes from one
    (four clients, their requests batched together or not)."""
    low, high = sorted((a_ms, b_ms))
    load = dict(concurrency=4, requests=16, prompt=233, gen=16, warmup=0)
    fast, slow = _serve(**load, frontend_ms=low), _serve(**load, frontend_ms=high)
    assert slow.ttft_s.mean >= fast.ttft_s.mean + (high - low) / 1e3 * 0.999
    assert slow.e2e_s.mean >= fast.e2e_s.mean


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_a_bad_frontend_time_is_refused(bad):
    with pytest.raises(UserError, match="frontend_ms"):
        _serve(**ONE_CLIENT, frontend_ms=bad)
