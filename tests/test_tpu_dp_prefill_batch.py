"""tpu-inference's DP scheduler batching of new requests (serve --dp-prefill-batch;
serving/replica.py Replica._release; engines.toml vllm-0.11 tpu_dp_prefill_source): new
requests wait until as many pend as the engine has attention-DP ranks, the timeout passes,
or as many ranks are idle as requests pend."""

from __future__ import annotations

import pytest

import xpusim
from xpusim.errors import UserError

RUN = dict(chips=4, tp=4, ep=4, dp_attention=True, engine="vllm-0.11", concurrency=32,
           prompt=1024, gen=256, requests=96, spread=0.5)  # fmt: skip


def _served(chip: str = "tpu-v7", **more):
    return xpusim.serve("qwen3-30b-a3b", chip, **{**RUN, **more})


def test_new_requests_wait_for_as_many_as_the_ranks():
    """32 clients of random lengths finish one at a time: with 8 ranks a new request waits
    for 7 more to pend (every rank busy, none idle), so TTFT grows; a gate of one rank
    releases each request as it comes, as no gate does."""
    free, gated, one = _served(), _served(dp_prefill_batch=8), _served(dp_prefill_batch=1)
    assert gated.ttft_s.mean > 2 * free.ttft_s.mean
    assert (one.ttft_s.mean, one.tpot_s.mean) == (free.ttft_s.mean, free.tpot_s.mean)
    assert any("DP_SCHED_BATCH_PREFILL" in n and "8 pend" in n for n in gated.notes)
    assert any("--dp-prefill-batch N" in n for n in free.notes)  # on a TPU: how to ask


@pytest.mark.parametrize(("more", "why"), [
    ({"chip": "h100-sxm"}, "Google TPU"),
    ({"dp_attention": False}, "--dp-attention"),
    ({"engine": "sglang"}, "engine vllm"),
])  # fmt: skip
def test_the_gate_is_refused_where_the_engine_has_none(more, why):
    with pytest.raises(UserError, match=why):
        _served(**{"dp_prefill_batch": 8, **more})
