"""serve's offline burst (--find offline) and the max-rate search's bracketing: the burst is
sized by the KV cache's steady batch and its rate is the steady state's; the bracketing
finds the rate a fine scan finds."""

from __future__ import annotations

import math

import pytest

import xpusim
from xpusim.serving import capacity
from xpusim.serving.options import Search


def test_an_offline_burst_is_sized_by_the_kv_cache_not_the_engines_batch_limit():
    """TensorRT-LLM's default limit on an H100 is 2,048 sequences; llama-3-8b's KV cache at
    2,048 + 128 tokens each holds a few hundred, and the burst is OFFLINE_ROUNDS of those
    (it was 16 x 2,048 per replica), far fewer than the --requests cap."""
    result = xpusim.serve("llama-3-8b", "h100-sxm", find="offline", engine="trtllm",
                          prompt=2048, gen=256, requests=40_000)  # fmt: skip
    kv = result.kv_cache
    held = kv.blocks // math.ceil((2048 + 128) / kv.block_tokens)
    assert 0 < held < 2048
    assert result.requests == result.search["requests"] == capacity.OFFLINE_ROUNDS * held
    assert any("offline: a burst of" in n for n in result.notes)


def test_the_burst_never_exceeds_the_requests_given():
    result = xpusim.serve("llama-3-8b", "h100-sxm", find="offline", prompt=256, gen=64,
                          max_batch=64, requests=100)  # fmt: skip
    assert result.requests == 100


def test_the_offline_rate_is_the_steady_states_at_a_few_rounds(monkeypatch):
    """Lengths spread +-50%: a burst's makespan holds a drain at a falling batch, which the
    steady-state window leaves out; OFFLINE_ROUNDS give the rate of three times as many
    within 2%."""
    def rate(rounds: int) -> float:
        monkeypatch.setattr(capacity, "OFFLINE_ROUNDS", rounds)
        result = xpusim.serve("llama-3-8b", "h100-sxm", find="offline", prompt=512, gen=256,
                              spread=0.5, max_batch=32, requests=10_000)  # fmt: skip
        assert result.requests == rounds * 32
        return result.output_tokens_per_s

    rounds = capacity.OFFLINE_ROUNDS
    assert rate(rounds) == pytest.approx(rate(3 * rounds), rel=0.02)


@pytest.mark.parametrize("slo_ttft_ms, slo_tpot_ms", [(100, 12), (60, None), (None, 11)])
def test_max_rate_bracketing_finds_the_rate_a_fine_scan_finds(slo_ttft_ms, slo_tpot_ms):
    """The search's answer meets the SLOs, and scanning up from it in 1% steps fails within
    RATE_TOLERANCE (plus a step): the bracketing and bisection skipped no passing rate a fine
    scan would have found above it, nor stopped short of one."""
    setup = dict(prompt=512, gen=128, requests=300, max_batch=16, slo_ttft_ms=slo_ttft_ms,
                 slo_tpot_ms=slo_tpot_ms)  # fmt: skip
    found = xpusim.serve("llama-3-8b", "h100-sxm", find="max-rate", **setup).search["rate"]
    assert found > 0
    search = Search(slo_ttft_ms=slo_ttft_ms, slo_tpot_ms=slo_tpot_ms)

    def meets(rate: float) -> bool:
        return capacity.meets(xpusim.serve("llama-3-8b", "h100-sxm", rate=rate, **setup), search)

    assert meets(found)
    step, first_failure = 1.01, None
    for k in range(1, 12):
        if not meets(found * step**k):
            first_failure = found * step**k
            break
    assert first_failure is not None
    assert first_failure <= found * (1 + capacity.RATE_TOLERANCE) * step


NEAR = dict(prompt=1024, gen=128, requests=300, max_batch=16, slo_ttft_ms=500)  # 0.95 of
# the probe's rate
FAR = dict(prompt=512, gen=128, requests=300, max_batch=16, slo_ttft_ms=100, slo_tpot_ms=12)
# 0.68 of it: under the first step, over the second


@pytest.mark.parametrize("setup", [NEAR, FAR], ids=["near", "far"])
def test_short_steps_down_find_the_quarter_steps_answer_in_fewer_trials(setup, monkeypatch):
    """The reference is the search stepping down by a quarter from the first failure
    (STEPS_DOWN (0.25,), as it was). Steps of 0.8 find the same rate within RATE_TOLERANCE,
    and where the answer lies within two of them, in fewer trials."""
    fast = xpusim.serve("llama-3-8b", "h100-sxm", find="max-rate", **setup).search
    monkeypatch.setattr(capacity, "STEPS_DOWN", (0.25,))
    plain = xpusim.serve("llama-3-8b", "h100-sxm", find="max-rate", **setup).search
    probe = fast["trials"][0]["rate"]
    assert not fast["trials"][0]["meets"] and fast["trials"][1]["rate"] == 0.8 * probe
    assert fast["rate"] == pytest.approx(plain["rate"], rel=capacity.RATE_TOLERANCE)
    assert fast["rate"] >= 0.64 * probe
    assert len(fast["trials"]) < len(plain["trials"])


def test_slos_met_nowhere_give_no_rate_after_the_bracket_is_spent():
    """A 1 ms TTFT objective no prompt meets: every rate tried fails, down to the last of
    MAX_BRACKET steps, and the answer is no rate, said so."""
    result = xpusim.serve("llama-3-8b", "h100-sxm", find="max-rate", prompt=512, gen=128,
                          requests=300, max_batch=16, slo_ttft_ms=1)  # fmt: skip
    trials = result.search["trials"]
    assert result.search["rate"] == 0.0
    assert len(trials) == capacity.MAX_BRACKET and not any(t["meets"] for t in trials)
    assert [t["rate"] for t in trials] == sorted((t["rate"] for t in trials), reverse=True)
    assert any("no rate meets the SLOs" in n for n in result.notes)

def test_max_rate_with_clients_is_refused_in_one_line(capsys):
    """The search's trials are open loops: a --concurrency beside it sized the step tables
    for that many sequences, which the trials overran (a traceback, ValueError)."""
    from cli_run import refused

    err = refused(capsys, "serve", "llama-3-8b", "--chip", "h100-sxm", "--find", "max-rate",
                  "--concurrency", "64", "--slo-ttft-ms", "500")  # fmt: skip
    assert "give no --concurrency" in err
