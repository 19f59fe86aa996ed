"""A full KV cache's block growth (Replica._grow_each: fewer blocks are free than are
due) held equal to its plain form: the loop is every step of an offline burst's steady
state, so it is written for speed (its tests inlined, no list of the cohort per
preemption); this is the form it replaced, run on the same tight caches."""

from __future__ import annotations

import pytest

import xpusim
from xpusim.serving.replica import Replica


def _grow_each_reference(self: Replica, due: list) -> None:
    """Replica._grow_each as first written: each due member in turn takes a block, and
    while none is free the latest-admitted sequence is preempted, the member itself last."""
    cohort = self.cohort
    for s, joined in due:
        if not self._current(s, joined):
            continue
        while not self.kv.take(1):
            members = list(cohort.values())
            victim = members[-1] if members[-1] is not s else None
            if victim is None and self.prefilling:
                victim = self.prefilling[-1]
            self._preempt(victim or s)
            if victim is None:
                break
        if self._current(s, joined):
            s.blocks += 1
            held = s.blocks * self.kv.block_tokens + s.shared
            at = s.joined + self._steps_for(held - s.prompt - s.base + 2)
            self._file(self._grow_at, max(at, self.steps + 1), s)


TIGHT = [  # caches of a few requests' worth, so that growth preempts every few steps
    dict(concurrency=32, prompt=512, gen=256, requests=128, kv_blocks=200),
    dict(concurrency=48, prompt=300, gen=400, spread=0.5, requests=160, kv_blocks=150,
         scheduler="continuous"),
    dict(concurrency=24, prompt=700, gen=300, spread=0.3, requests=96, kv_blocks=4000,
         scheduler="prefill-first", kv_block=1),
    dict(rate=40.0, prompt=256, gen=512, spread=0.4, requests=200, kv_blocks=180, kv_block=32,
         engine="trtllm", scheduler="chunked"),
]


@pytest.mark.parametrize("load", TIGHT)
def test_full_cache_growth_equals_its_plain_form(load, monkeypatch):
    fast = xpusim.serve("llama-3-8b", "h100-sxm", seed=3, **load)
    monkeypatch.setattr(Replica, "_grow_each", _grow_each_reference)
    plain = xpusim.serve("llama-3-8b", "h100-sxm", seed=3, **load)
    assert fast.preemptions > 0
    assert fast.to_dict() == plain.to_dict()
