"""A full KV cache's block growth (Replica._grow_each: fewer blocks are free than are
due) held equal to its plain form: the loop is every step of an offline burst's steady
state, so it is written for speed (its tests inlined, no list of the cohort per
preemption); this is the form it replaced, run on the same tight caches."""

from __future__ import annotations

import pytest

import xpusim
from xpusim.serving.kv_cache import KVCache
from xpusim.serving.replica import Replica
from xpusim.serving.schedulers import Sequence


def _grow_each_reference(self: Replica, group) -> None:
    """Replica._grow_each as first written: the due members all released from their
    Growing first, then each in turn takes a block, and while none is free the
    latest-admitted sequence is preempted, the member itself last."""
    cohort = self.cohort
    for s in self._dissolve(group):
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
            self._file_growth(s)


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
    else (each member once in each, under the step it is filed for: what lets a step read its
    due members without testing them), and that the members' blocks, counted in from their
    Growing, are what the cache has given out."""

    def checked(self: Replica) -> bool:
        members = sorted(map(id, self.cohort.values()))
        finishing = [(s, step) for step, filed in self._finish_at.items()
                     for s in filed.values()]  # fmt: skip
        assert all(self._finish_at.values())  # no emptied step left (_skip reads the least)
        assert sorted(id(s) for s, _ in finishing) == members
        assert all(s.finishes_at == step > self.steps for s, step in finishing)
        growing = [(s, step, group) for step, group in self._grow_at.items()
                   for s in group.members.values()]  # fmt: skip
        assert sorted(id(s) for s, _, _ in growing) == members
        assert all(s.growing is group and step > self.steps for s, step, group in growing)
        if self.role == "both" and not self.kv.prefix_cached:
            held = sum(s.blocks + s.growing.grown - s.mark for s, _, _ in growing)
            assert held + sum(s.blocks for s in self.prefilling) == self.kv.used
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


def test_a_group_moving_onto_an_earlier_filing_comes_after_it():
    """Blocks of 4: A (7 tokens in 2 blocks) is due at decode steps 3, 7, 11...; B, whose 2
    blocks were taken for 8 tokens, is filed for step 7 first. A's group, moving on at step
    3, joins B's behind it (the order its members were filed in), and both grow from then."""
    kv = KVCache(blocks=100, block_tokens=4)
    r = Replica(0, 0, "decode", None, kv, None, None, 8, 64, 64, [0.0])  # type: ignore[arg-type]
    a, b = Sequence(0, 0.0, 6, 100), Sequence(1, 0.0, 2, 100)
    for s, tokens in ((a, 7), (b, 8)):
        s.done, s.generated = s.target, 1  # prefilled elsewhere
        assert r.admit(s, tokens)
    held = {}
    for step in range(1, 12):
        r.decodes()
        r._decoded(float(step))
        held[step] = [s.blocks + s.growing.grown - s.mark for s in (a, b)]
    assert [held[k] for k in (2, 3, 6, 7, 10, 11)] == [[2, 2], [3, 2], [3, 2], [4, 3], [4, 3],
                                                       [5, 4]]  # fmt: skip
    assert list(r._grow_at[15].members.values()) == [b, a]
    assert kv.used == 9


DRAFTED = [  # speculative cohorts: every member's own blocks at its own step
    dict(concurrency=24, prompt=300, gen=200, spread=0.5, requests=72, speculative="eagle",
         draft_tokens=2, acceptance=0.6),
    dict(concurrency=24, prompt=300, gen=200, spread=0.5, requests=72, speculative="eagle",
         draft_tokens=3, acceptance=0.7, engine="sglang", kv_block=1),  # due every step
    dict(concurrency=32, prompt=400, gen=300, spread=0.4, requests=96, speculative="eagle",
         draft_tokens=2, acceptance=0.6, kv_blocks=300, kv_block=4),  # short: preempts
    dict(rate=30.0, prompt=256, gen=300, spread=0.5, requests=120, speculative="eagle",
         draft_tokens=3, acceptance=0.5, engine="sglang", kv_block=1, kv_blocks=3000),
]


@pytest.mark.parametrize("load", DRAFTED)
def test_drafted_growth_equals_each_members_own(load, monkeypatch):
    """Replica._grow_drafted (the due members of a speculative step in one loop, where the
    cache holds their blocks) gives every figure _grow_each gives them one at a time: the
    blocks each takes, the step each is filed for and the order filed there."""
    grown = []  # the members of each step it grew (a False, _grow_each's, is not counted)

    def counted(self, group):
        members = len(group.members)
        took = grow_drafted(self, group)
        grown.extend([members] if took else [])
        return took

    grow_drafted = Replica._grow_drafted
    monkeypatch.setattr(Replica, "_grow_drafted", counted)
    fast = xpusim.serve("llama-3-8b", "h100-sxm", seed=3, **load)
    monkeypatch.setattr(Replica, "_grow_drafted", lambda self, group: False)
    plain = xpusim.serve("llama-3-8b", "h100-sxm", seed=3, **load)
    assert sum(grown) > 100  # it ran, not only fell back (an always-False passed before)
    assert fast.to_dict() == plain.to_dict()
