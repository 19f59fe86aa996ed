"""Replica.outputs (the cohort's outputs so far as arrays, from columns kept between cohort
changes) held to Replica.output of each member, at every step SGLang's admission control
asks: with and without speculation (a gain per step that is not whole), exact admission and
ratio admission, and a tight cache whose retractions change the cohort mid-run."""

from __future__ import annotations

import numpy as np
import pytest

import xpusim
from xpusim.serving.replica import Replica

LOADS = [
    dict(engine="sglang", concurrency=32, prompt=500, gen=2000, spread=0.3, requests=64,
         kv_blocks=40_000, radix_cache=False),  # the exact check, a queue held back
    dict(engine="sglang", concurrency=24, prompt=300, gen=600, spread=0.5, requests=72,
         kv_blocks=6_000),  # the ratio's reservation, retractions
    dict(engine="sglang", concurrency=16, prompt=256, gen=700, spread=0.4, requests=48,
         kv_blocks=30_000, radix_cache=False, speculative="eagle", draft_tokens=2,
         acceptance=0.6),  # 2.6 tokens a step or so: tokens_in's rounding
]


def _checked(outputs):
    calls = []

    def checked(self: Replica):
        got = outputs(self)
        members = list(self.cohort.values())
        want = ([self.output(s) for s in members], [s.gen for s in members],
                [s.prompt for s in members])
        for column, expected in zip(got, want, strict=True):
            assert column.dtype == np.int64
            assert column.tolist() == expected
        calls.append(len(members))
        return got

    return checked, calls


@pytest.mark.parametrize("load", LOADS)
def test_outputs_equal_each_members_output(load, monkeypatch):
    checked, calls = _checked(Replica.outputs)
    monkeypatch.setattr(Replica, "outputs", checked)
    xpusim.serve("llama-3-8b", "h100-sxm", seed=5, **load)
    assert len(calls) > 20 and max(calls) > 8  # asked at many steps, of a full cohort


def _outputs_reference(self: Replica):
    """outputs as first written: each member's output() in turn."""
    members = list(self.cohort.values())
    return tuple(np.array(c, dtype=np.int64).reshape(-1) for c in (
        [self.output(s) for s in members], [s.gen for s in members],
        [s.prompt for s in members]))  # fmt: skip


@pytest.mark.parametrize("load", LOADS)
def test_runs_equal_under_the_plain_outputs(load, monkeypatch):
    fast = xpusim.serve("llama-3-8b", "h100-sxm", seed=5, **load).to_dict()
    monkeypatch.setattr(Replica, "outputs", _outputs_reference)
    assert fast == xpusim.serve("llama-3-8b", "h100-sxm", seed=5, **load).to_dict()
