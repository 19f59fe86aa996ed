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
