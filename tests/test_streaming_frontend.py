"""The API server's streaming of output tokens (engines.toml frontend_token_s; serve's
--api-servers): a stage beside each iteration, each chunk (a sequence's tokens of a step)
taking one API server process its measured time, so an iteration lasts at least its chunks'
streaming over the processes;
0 processes (a client in-process) stream nothing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xpusim
from xpusim.errors import UserError
from xpusim.serving.engines import engine, engines

FAST = dict(engine="vllm", concurrency=256, requests=512, prompt=64, gen=64, warmup=0)
"""A 1B model's short requests on an H100: the engine alone emits about 59k tokens/s,
past what one API server streams at vLLM's measured 29.3 us a token (34k/s)."""


def _serve(**options):
    return xpusim.serve("llama-3.2-1b", "h100-sxm", **(FAST | options))


def test_every_profile_states_its_streaming_cost_or_none():
    for profile in engines().values():
        assert profile.frontend_token_s >= 0, profile.name
        assert bool(profile.frontend_token_source) == (profile.frontend_token_s > 0), profile.name
    assert engine("ideal").frontend_token_s == 0.0
    assert engine("vllm").frontend_token_s == pytest.approx(153.85 / 5_242_880, rel=1e-3)


def test_one_api_server_caps_the_tokens_it_streams():
    """The mechanism: without it one API server would not slow the engine at all."""
    alone = _serve(api_servers=0)
    one = _serve(api_servers=1)
    two = _serve(api_servers=2)
    ceiling = 1 / engine("vllm").frontend_token_s
    assert alone.output_tokens_per_s > ceiling  # the engine alone is faster than one server
    assert one.output_tokens_per_s <= ceiling * (1 + 1e-9)
    assert one.output_tokens_per_s < two.output_tokens_per_s <= alone.output_tokens_per_s


def test_a_slow_engine_never_waits_on_the_front_end():
    """Where each step outlasts its tokens' streaming the front end is hidden: one client
    of a 1B model emits a token a step, 29.3 us of streaming against a step of ~2 ms."""
    load = dict(concurrency=1, requests=4)
    alone = _serve(**load, api_servers=0).itl_s.mean  # (no front-end delay: clocks differ
    assert _serve(**load, api_servers=1).itl_s.mean == pytest.approx(alone, rel=1e-12)  # in ulps)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4096), st.integers(0, 4096), st.floats(1e-5, 0.5),
       st.integers(0, 8), st.sampled_from(sorted(engines())), st.booleans())
def test_more_sequences_never_make_a_step_cheaper(n, more, device_s, servers, name, overlap):
    """Physics: an iteration over more sequences, each streaming its token, never costs less
    host time, nor does streaming over fewer API server processes."""
    from dataclasses import replace

    profile = replace(engine(name), overlapped=overlap)
    small = profile.exposed_s(n, device_s, 1, n, servers)
    large = profile.exposed_s(n + more, device_s, 1, n + more, servers)
    assert 0 <= small <= large
    if servers > 1:
        assert profile.exposed_s(n, device_s, 1, n, servers - 1) >= small


@pytest.mark.parametrize(("options", "field"), [
    (dict(api_servers=-1), "api_servers"),
    (dict(api_servers=1.5), "api_servers"),
    (dict(api_servers=0, frontend_ms=5.0), "frontend_ms"),
    (dict(frontend_token_us=-1.0), "frontend_token_us"),
    (dict(frontend_token_us=float("inf")), "frontend_token_us"),
    (dict(api_servers=0, frontend_token_us=30.0), "frontend_token_us"),
])  # fmt: skip
def test_a_bad_api_server_count_is_refused(options, field):
    with pytest.raises(UserError, match=field):
        _serve(**options)


def test_no_api_server_means_no_front_end_delay_either():
    assert _serve(concurrency=1, requests=3, api_servers=0).ttft_s.mean \
        == _serve(concurrency=1, requests=3, api_servers=0, frontend_ms=0.0).ttft_s.mean


def test_pipeline_lanes_share_the_replicas_api_servers():
    """A replica's pp lanes (vLLM's virtual engines) are one server: their tokens go through
    the same API server processes, so two lanes stream no more than one server's ceiling
    (each lane streaming through all of them gave 42.7k tokens/s against 34.1k)."""
    ceiling = 1 / engine("vllm").frontend_token_s
    lanes = _serve(chips=2, pp=2, api_servers=1)
    assert _serve(chips=2, pp=2, api_servers=0).output_tokens_per_s > ceiling
    assert lanes.output_tokens_per_s <= ceiling * (1 + 1e-9)


def test_a_server_count_an_engine_cannot_use_says_so():
    """SGLang has no measured streaming cost: --api-servers 4 changes nothing, and says it."""
    load = dict(engine="sglang", concurrency=2, requests=4)
    four = _serve(**load, api_servers=4)
    assert four.itl_s.mean == _serve(**load, api_servers=1).itl_s.mean
    assert any("--api-servers 4" in note and "changes nothing" in note for note in four.notes)
    assert not any("--api-servers" in note for note in _serve(**load).notes)


def test_a_verify_steps_accepted_tokens_stream_as_one_chunk():
    """vLLM V1 sends a request's new tokens of a step as one chunk, and chunks are what
    bound the front end: speculating 3 tokens a step, one API server streams more tokens a
    second than its one-token-a-chunk ceiling (charged per token, it could not)."""
    ceiling = 1 / engine("vllm").frontend_token_s
    spec = _serve(speculative="eagle", draft_tokens=3, accept_length=3.0, api_servers=1)
    assert _serve(speculative="eagle", draft_tokens=3, accept_length=3.0,
                  api_servers=0).output_tokens_per_s > ceiling  # fmt: skip
    assert spec.output_tokens_per_s > ceiling


def test_a_what_if_streaming_cost_caps_an_engine_that_has_none():
    """serve's --frontend-token-us prices the chunks of an engine whose front end nobody
    measured (SGLang's here, NIM 1.0's in docs/validation.md) the way a measured one is: one
    API server streams at most 1 / cost chunks a second, and the run says where it came
    from."""
    load = dict(engine="sglang")
    alone = _serve(**load)
    cost_us = 2e6 / alone.output_tokens_per_s  # a ceiling at half the engine's own pace
    priced = _serve(**load, frontend_token_us=cost_us)
    assert priced.output_tokens_per_s <= 1e6 / cost_us * (1 + 1e-9)
    assert any("--frontend-token-us" in note for note in priced.notes)


def test_the_measured_streaming_cost_given_again_changes_nothing():
    given_ = _serve(frontend_token_us=engine("vllm").frontend_token_s * 1e6)
    assert given_.output_tokens_per_s == _serve().output_tokens_per_s


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4096), st.floats(1e-5, 0.5), st.floats(0, 1e-3), st.floats(0, 1e-3),
       st.sampled_from(sorted(engines())))
def test_a_costlier_chunk_never_makes_a_step_cheaper(n, device_s, cost_s, more_s, name):
    """Physics: pricing a streamed chunk higher (--frontend-token-us) never shortens a step."""
    from dataclasses import replace

    cheap = replace(engine(name), frontend_token_s=cost_s).exposed_s(n, device_s, 1, n, 1)
    dear = replace(engine(name), frontend_token_s=cost_s + more_s).exposed_s(n, device_s, 1, n, 1)
    assert 0 <= cheap <= dear
