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
@given(st.floats(0.0, 200.0), st.integers(16, 4096), st.sampled_from(["vllm", "sglang", "trtllm"]))
def test_alone_a_request_pays_exactly_the_delay(delay_ms, prompt, name):
    """Physics: one client's request meets no other, so the front end's time before the
    engine adds to its TTFT exactly, whatever the prompt or engine. (With several clients
    the delay shifts when each request meets the others' steps, so a closed loop's TTFT may
    move either way by the steps it then waits behind.)"""
    load = dict(ONE_CLIENT, prompt=prompt, requests=3, engine=name)
    none, some = _serve(**load, frontend_ms=0.0), _serve(**load, frontend_ms=delay_ms)
    assert some.ttft_s.p99 == pytest.approx(none.ttft_s.p99 + delay_ms / 1e3, abs=1e-9)
    assert some.ttft_s.mean >= delay_ms / 1e3


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_a_bad_frontend_time_is_refused(bad):
    with pytest.raises(UserError, match="frontend_ms"):
        _serve(**ONE_CLIENT, frontend_ms=bad)


def test_mlperf_harness_points_run_without_a_front_end(monkeypatch):
    """MLPerf's harnesses hand LoadGen's pre-tokenized samples to the engine in-process: the
    points that run the vllm-0.11 profile say frontend_ms 0 and api_servers 0 (no token streamed
    through an API server), and the adapter passes both to serve."""
    from xpusim.validation.points import load_points

    mlperf = [p for p in load_points() if "mlcommons" in p.source
              and p.get("engine_profile") == "vllm-0.11"]  # fmt: skip
    assert mlperf and all(p.get("frontend_ms") == 0 and p.get("api_servers") == 0
                          for p in mlperf)  # fmt: skip
    seen = _serve_options(next(p for p in mlperf if p.get("load")["kind"] == "rate"),
                          monkeypatch)  # fmt: skip
    assert seen["frontend_ms"] == 0.0 and seen["api_servers"] == 0


def test_ml_energy_points_run_their_launchs_api_servers_and_async_scheduling(monkeypatch):
    """ML.ENERGY's vLLM launches set --api-server-count 3 and --async-scheduling
    (benchmarks/mlenergy_gpqa_points.py reads both from the configs): the points say so and
    the adapter passes them to serve."""
    from xpusim.validation.points import load_points

    gpqa = [p for p in load_points() if p.id.startswith("mlenergy3-gpqa-")]
    assert gpqa and all(p.get("api_servers") == 3 and p.get("host_overlap") for p in gpqa)
    seen = _serve_options(gpqa[0], monkeypatch)
    assert seen["api_servers"] == 3 and seen["host_overlap"] is True


def _serve_options(point, monkeypatch) -> dict:
    """The options the adapter gives serve for `point`, the simulation not run."""
    from xpusim.validation import adapters

    seen: list[dict] = []

    class Asked(Exception):
        """Raised in place of the simulation, once serve's options are seen."""

    def served(*args):
        seen.append(dict(args[3]))
        raise Asked

    monkeypatch.setattr(adapters, "_served", served)
    with pytest.raises(Asked):
        adapters._llm_serving(point)
    return seen[0]
