"""serve's default request count grows with a closed loop's clients, so a large concurrency
is served for several rounds, not as its first burst alone (serving/options.default_requests)."""

import pytest

import xpusim
from xpusim.errors import UserError
from xpusim.serving import capacity
from xpusim.serving.options import MAX_REQUESTS, REQUESTS, Load, default_requests


@pytest.mark.parametrize(("load", "expected"), [
    ({"concurrency": 4}, REQUESTS),
    ({"concurrency": 512}, 8 * 512),
    ({"concurrency": 10**6}, MAX_REQUESTS),
    ({"rate": 3.0}, REQUESTS),
    ({"concurrency": 512, "requests": 100}, 100),  # a count given is kept
])
def test_default_count(load, expected):
    assert Load(**load).requests == expected


def test_plan_base_and_bad_concurrency():
    assert default_requests(16, 300) == 300
    assert default_requests(64, 300) == 512
    assert default_requests(None) == REQUESTS
    with pytest.raises(UserError, match="concurrency"):
        Load(concurrency=0)


def test_large_loop_is_not_its_first_burst():
    """At 256 clients the default serves eight rounds: the mean TTFT is the steady state's,
    well under that of the single burst 256 requests make (every prompt queued at once)."""
    common = dict(chip="h100-sxm", concurrency=256, prompt=1024, gen=128, engine="vllm")
    default = xpusim.serve("llama-3-8b", **common)
    burst = xpusim.serve("llama-3-8b", requests=256, **common)
    assert default.requests == 8 * 256
    assert default.ttft_s.mean < 0.5 * burst.ttft_s.mean


@pytest.mark.parametrize(("given", "burst"), [
    ({"concurrency": 100}, 8 * 100),  # clients do not cap a burst: every request at once
    ({"concurrency": 100, "requests": 300}, 300),
])
def test_offline_burst_is_every_request(given, burst):
    """--find offline sends every request at once whatever --concurrency says: fewer clients
    than requests made the burst outrun the step tables sized for the clients (a
    traceback), and the default requests of the placeholder loop made it 4,000."""
    result = xpusim.serve("llama-3-8b", "h100-sxm", find="offline", prompt=128, gen=16,
                          **given)  # fmt: skip
    assert result.search["requests"] == burst


def test_offline_burst_without_requests_is_its_full_rounds():
    """Without --requests the burst is OFFLINE_ROUNDS x the sequences the cache holds (here
    vLLM's 1,024-sequence limit), not a fixed 500 that read 11% under the steady state."""
    common = dict(find="offline", engine="vllm", prompt=128, gen=128)
    result = xpusim.serve("llama-3-8b", "h100-sxm", **common)
    rounds = capacity.OFFLINE_ROUNDS * 1024
    assert result.search["requests"] == rounds
    assert result.output_tokens_per_s > 1.05 * xpusim.serve(
        "llama-3-8b", "h100-sxm", requests=REQUESTS, **common).output_tokens_per_s


@pytest.mark.parametrize("target", ["h100-sxm", "dgx-h100"])
def test_offline_burst_counts_the_lanes_of_chips_given(monkeypatch, target):
    """The default burst counts every replica lane of --chips, on a chip or on a system:
    8 one-chip replicas hold 8 x 1,024 sequences, so 16 rounds of them are drawn (a chip
    given --chips counted one lane, a burst of 2 rounds: 'a burst of 16384 requests, 2 times
    the 8192 sequences the replicas hold at once')."""
    from xpusim.serving import serve as serve_module

    class Drawn(Exception):
        """The load serve would run, stopped before it runs."""

    def stop(workload, target, load, *rest):
        raise Drawn(load)

    monkeypatch.setattr(serve_module, "serve_llm", stop)
    with pytest.raises(Drawn) as drawn:
        xpusim.serve("llama-3-8b", target, chips=8, dp=8, find="offline", engine="vllm")
    assert drawn.value.args[0].requests == capacity.OFFLINE_ROUNDS * 1024 * 8
