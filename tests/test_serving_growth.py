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
    for s in due:
        if cohort.get(s.id) is not s:
            continue
        while not self.kv.take(1):
            members = list(cohort.values())
            victim = members[-1] if members[-1] is not s else None
            if victim is None and self.prefilling:
                victim = self.prefilling[-1]
            self._preempt(victim or s)
            if victim is None:
                break
        if cohort.get(s.id) is s:
            s.blocks += 1
            held = s.blocks * self.kv.block_tokens + s.shared
            s.grows_at = max(s.joined + self._steps_for(held - s.prompt - s.base + 2),
                             self.steps + 1)  # fmt: skip
            self._grow_at.setdefault(s.grows_at, []).append(s)


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


def _holding_the_cohort(decodes):
    """Replica.decodes, first checking that the lane's schedules hold its cohort and no one
    else: each member once in each, under the step it is filed for (the invariant that lets
    a step read its due members without testing them)."""

    def checked(self: Replica) -> bool:
        for at, step_of in ((self._grow_at, "grows_at"), (self._finish_at, "finishes_at")):
            filed = [(s, step) for step, entries in at.items() for s in entries]
            assert sorted(id(s) for s, _ in filed) == sorted(map(id, self.cohort.values()))
            assert all(getattr(s, step_of) == step > self.steps for s, step in filed)
        return decodes(self)

    return checked


SCHEDULES = [*TIGHT,
             dict(concurrency=8, prompt=256, gen=128, requests=24, engine="trtllm"),
             dict(concurrency=8, prompt=256, gen=128, requests=24, scheduler="static"),
             dict(concurrency=4, prompt=256, gen=64, requests=12, speculative="eagle",
                  draft_tokens=2, acceptance=0.6),
             dict(concurrency=16, prompt=256, gen=64, requests=48, prefill_replicas=1,
                  decode_replicas=2, chips=3)]  # fmt: skip


@pytest.mark.parametrize("load", SCHEDULES)
def test_the_schedules_hold_exactly_the_cohort(load, monkeypatch):
    """A sequence leaving the cohort (finished, preempted, handed on) is taken out of both
    schedules: a stale entry left behind would be counted as due and take a block."""
    monkeypatch.setattr(Replica, "decodes", _holding_the_cohort(Replica.decodes))
    assert xpusim.serve("llama-3-8b", "h100-sxm", seed=3, **load).requests > 0
