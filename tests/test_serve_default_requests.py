"""serve's default request count grows with a closed loop's clients, so a large concurrency
is served for several rounds, not as its first burst alone (serving/options.default_requests)."""

import pytest

import xpusim
from xpusim.errors import UserError
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
    ({}, REQUESTS),  # the placeholder burst is REQUESTS, not 8 per client of that many
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
