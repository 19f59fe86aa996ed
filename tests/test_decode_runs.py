"""Runs of plain decode steps (Replica.cruise, StepCost.decode_steps) held equal to the
event loop's one step at a time: every figure of a serving result the same, bit for bit,
across engines and schedulers (CUDA-graph padding, overlapped host time, prefill-first,
whole-length reservation, static batches), MoE, MLA and windowed models, a full cache, an
open loop with a Verdict's early stop, steps bound by the API server's streaming, and the
cases cruise leaves to the event loop (several replicas, pipeline stages, speculative
decoding); the engine gates that count iterations (multi-step scheduling, the attention-DP
balancer) counted through a skip."""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xpusim
from xpusim.errors import UserError
from xpusim.scenarios.llm.inference import chosen_plan
from xpusim.serving import run as serving_run
from xpusim.serving.kv_cache import KVCache
from xpusim.serving.replica import Replica
from xpusim.serving.schedulers import Sequence
from xpusim.serving.simulator import simulate
from xpusim.serving.step_cost import Work, step_cost


def _one_step_at_a_time(self, it, until_s, stop, record, record_run):
    return it


def _counting(counts: list[int], skipped: list[int]):
    """Replica.cruise, counting the steps it runs one at a time and those it skips."""
    cruise = Replica.cruise

    def counted(self, it, until_s, stop, record, record_run):
        def kept(step):
            counts.append(1)
            record(step)

        def kept_run(run):
            skipped.append(len(run.end_s))
            record_run(run)

        return cruise(self, it, until_s, stop, kept, kept_run)

    return counted


LOADS = [
    ("llama-3-8b", dict(concurrency=8, prompt=512, gen=256, requests=32)),
    ("llama-3-8b", dict(concurrency=16, prompt=300, gen=200, spread=0.5, requests=64,
                        engine="trtllm")),  # inflight: whole-length blocks, no padding
    ("llama-3-8b", dict(concurrency=6, prompt=200, gen=300, spread=0.3, requests=24,
                        engine="sglang")),  # prefill-first, overlapped host, blocks of 1
    ("llama-3-8b", dict(concurrency=12, prompt=200, gen=300, spread=0.3, requests=48,
                        engine="sglang", recv_interval=10)),  # cruise counts the receive gate
    ("llama-3-8b", dict(concurrency=8, prompt=256, gen=128, spread=0.4, requests=32,
                        engine="vllm-v0")),  # continuous: whole prompts, decodes paused
    ("llama-3-8b", dict(concurrency=8, prompt=256, gen=100, spread=0.4, requests=24,
                        scheduler="static")),
    ("llama-3-8b", dict(concurrency=32, prompt=512, gen=256, requests=96, kv_blocks=200)),
    ("llama-3-8b", dict(rate=6.0, prompt=400, gen=300, spread=0.5, requests=60, seed=2)),
    ("llama-3-8b", dict(rate=400.0, prompt=400, gen=300, requests=300, find="max-rate",
                        slo_ttft_ms=300, slo_tpot_ms=40)),  # trials stopped by their Verdict
    ("llama-3-8b", dict(prompt=128, gen=1500, requests=80, max_batch=4, find="max-rate",
                        slo_ttft_ms=500, slo_tpot_ms=50)),  # ... while the queue waits
    ("deepseek-v2-lite", dict(concurrency=4, prompt=300, gen=200, requests=12)),  # MoE, MLA
    ("gemma-2-9b", dict(concurrency=4, prompt=5000, gen=200, requests=8)),  # windows
    ("llama-3.2-1b", dict(concurrency=128, prompt=64, gen=300, requests=128)),  # each step
    # bound by one API server streaming its 128 tokens (3.76 ms against the engine's 2.47)
    ("llama-3-8b", dict(concurrency=8, prompt=256, gen=128, requests=32, chips=2, dp=2)),
    ("llama-2-13b", dict(concurrency=2, prompt=256, gen=64, requests=6, chips=2, pp=2)),
    ("llama-3-8b", dict(concurrency=2, prompt=256, gen=64, requests=6, speculative="eagle",
                        draft_tokens=2, acceptance=0.6)),
    ("llama-3-8b", dict(engine="vllm-v0", rate=40, prompt=128, gen=100, requests=40,
                        decode_steps=8)),  # a gate counting iterations, cruise counting it
    ("llama-3-8b", dict(chips=2, tp=2, dp_attention=True, engine="trtllm", rate=20,
                        prompt=256, gen=64, requests=40, adp_balance="3,9")),  # the same
    ("llama-3-8b", dict(engine="vllm-v0", concurrency=12, prompt=128, gen=400, spread=0.5,
                        requests=48, decode_steps=8)),  # long stretches: skips of a run
    ("llama-3-8b", dict(chips=2, tp=2, dp_attention=True, engine="trtllm", concurrency=8,
                        prompt=256, gen=300, requests=24)),  # host time per DP sequence
    ("llama-3-8b", dict(engine="trtllm", concurrency=16, prompt=300, gen=200, spread=0.5,
                        requests=64, batch_wait="6,0.5")),  # cruise only where none is held
    ("llama-3-8b", dict(engine="sglang", concurrency=32, prompt=500, gen=2000, requests=64,
                        kv_blocks=40_000)),  # SGLang's output reservation holds a queue back
    ("llama-3-8b", dict(engine="sglang", concurrency=32, prompt=500, gen=2000, spread=0.3,
                        requests=64, kv_blocks=40_000, radix_cache=False)),  # ... exactly
]
GATED = ("dp", "pp", "speculative")
"""Settings under which cruise leaves every step to the event loop."""


def _recording(runs: list) -> object:
    """simulate, keeping what each run produced: every iteration's row, the totals, where
    a Verdict stopped it, and each request's times (as text: nan is nan)."""
    def recorded(*args, **kwargs):
        run = simulate(*args, **kwargs)
        runs.append((run.timeline, run.energy_j, run.busy_chip_s, run.stopped, run.upto,
                     run.itl_s, run.itl_count, repr([(s.first_token_s, s.last_token_s,
                     s.finish_s, s.preemptions) for s in run.sequences])))  # fmt: skip
        return run

    return recorded


class Served(NamedTuple):
    fast_runs: list  # each simulation's records, cruise on
    plain_runs: list  # and one step at a time
    counts: list[int]  # steps cruise ran one at a time
    skipped: list[int]  # steps of each skip
    preemptions: int


def _served_both_ways(model: str, load: dict) -> Served:
    """One serve with cruise and with the event loop's one step at a time: the same
    result, and what each simulation of the two recorded."""
    counts: list[int] = []
    skipped: list[int] = []
    fast_runs: list = []
    plain_runs: list = []
    with pytest.MonkeyPatch.context() as m:
        m.setattr(Replica, "cruise", _counting(counts, skipped))
        m.setattr(serving_run, "simulate", _recording(fast_runs))
        fast = xpusim.serve(model, "h100-sxm", **load)
        m.setattr(Replica, "cruise", _one_step_at_a_time)
        m.setattr(serving_run, "simulate", _recording(plain_runs))
        plain = xpusim.serve(model, "h100-sxm", **load)
    assert fast.to_dict() == plain.to_dict()
    return Served(fast_runs, plain_runs, counts, skipped, fast.preemptions)


@pytest.mark.parametrize(("model", "load"), LOADS, ids=[f"{m}-{i}" for i, (m, _) in
                                                         enumerate(LOADS)])
def test_cruise_equals_the_event_loop(model, load):
    served = _served_both_ways(model, load)
    assert served.fast_runs == served.plain_runs
    assert bool(served.counts) == (not set(GATED) & set(load))  # cruised where it may only
    assert bool(served.skipped) == bool(served.counts)  # and skipped the rest of its stretches


@pytest.fixture(scope="module")
def costs():
    found = {}
    for model, chip in (("llama-3-8b", "h100-sxm"), ("deepseek-v2-lite", "h100-sxm"),
                        ("gemma-2-9b", "h200-sxm")):
        cfg, target = xpusim.model(model), xpusim.target(chip)
        setup, cand = chosen_plan(cfg, target, {"batch": 8, "prompt": 512, "gen": 64})
        found[model] = step_cost(cfg, cand.setup.system, replace(cand.plan, dp=1), setup.req,
                                 cand.placement, 2048, 64, 20000)  # fmt: skip
    return found


@settings(max_examples=60, deadline=None)
@given(model=st.sampled_from(["llama-3-8b", "deepseek-v2-lite", "gemma-2-9b"]),
       n=st.integers(1, 64), first=st.integers(1, 20000), steps=st.integers(1, 80))
def test_decode_steps_equal_one_call_each(costs, model, n, first, steps):
    cost = costs[model]
    contexts = first + n * np.arange(steps)  # n sequences' keys, n more a step
    stage_s, energy_j = cost.decode_steps(n, contexts)
    for c, stage, energy in zip(contexts.tolist(), stage_s.tolist(), energy_j.tolist(),
                                strict=True):  # fmt: skip
        one = cost(Work(n, c, 0, 0, 0, 0, 0, n))
        assert ([stage], energy) == (one.stage_s, one.energy_j)
        assert cost.decode_step(n, c) == one  # cruise's single steps, without the Work


def test_a_decode_step_outside_the_table_is_refused(costs):
    cost = costs["llama-3-8b"]
    for n in (0, cost.max_sampled + 1):
        with pytest.raises(ValueError, match="outside"):
            cost.decode_step(n, 1000)


def test_cruise_stops_where_a_verdict_says(monkeypatch):
    """A Verdict's miss falls due with time, not with an event: cruise asks at each step's
    end, and runs no step past one where it is told to stop."""
    cruise, asked = Replica.cruise, []

    class Stopping:
        """A Verdict that says the run must miss whenever it is asked."""

        def missed(self, now_s):
            asked.append(now_s)
            return "told to"

        def first_missed(self, times_s):
            return 0

    def told(self, it, until_s, stop, record, record_run):
        return cruise(self, it, until_s, Stopping(), lambda step: pytest.fail("ran on"),
                      lambda run: pytest.fail("ran on"))

    monkeypatch.setattr(Replica, "cruise", told)
    xpusim.serve("llama-3-8b", "h100-sxm", concurrency=4, prompt=128, gen=64, requests=8)
    assert asked


@settings(max_examples=40, deadline=None)
@given(engine=st.sampled_from(["vllm", "sglang", "trtllm", "vllm-v0"]),
       clients=st.integers(1, 12), rate=st.sampled_from([None, 2.0, 20.0]),
       prompt=st.integers(8, 700), gen=st.integers(1, 300), spread=st.sampled_from([0, 0.5]),
       requests=st.integers(1, 30), kv_block=st.sampled_from([None, 1, 4, 16]),
       kv_blocks=st.sampled_from([None, 60, 150, 400]), seed=st.integers(0, 3),
       recv_interval=st.sampled_from([1, 3, 10]), radix_cache=st.booleans())
def test_skips_equal_the_event_loop(engine, clients, rate, prompt, gen, spread,
                                    requests, kv_block, kv_blocks, seed, recv_interval,
                                    radix_cache):
    """Random small closed and open loops, tight caches (stretches cut where the blocks
    run out, preemptions after), blocks of 1 to 16 tokens, SGLang's receive gate counting
    the skipped steps and its admission control holding a queue through them: the same
    runs bit for bit."""
    load = dict(engine=engine, prompt=prompt, gen=gen, spread=spread, requests=requests,
                seed=seed, recv_interval=recv_interval if engine == "sglang" else 1,
                **({"rate": rate} if rate else {"concurrency": clients}))
    load |= {k: v for k, v in (("kv_block", kv_block), ("kv_blocks", kv_blocks)) if v}
    if engine == "sglang" and not radix_cache:  # SGLang's exact admission check
        load["radix_cache"] = False
    try:
        served = _served_both_ways("llama-3-8b", load)
    except UserError:  # a cache too small for one request: refused either way
        return
    assert served.fast_runs == served.plain_runs


def test_a_skip_stops_where_the_blocks_run_out():
    """A closed loop whose cache runs out mid-stretch (the cohort preempted, readmitted):
    skips cut short by the free blocks, the runs still equal."""
    load = dict(concurrency=12, prompt=100, gen=400, requests=24, kv_block=4, kv_blocks=700)
    served = _served_both_ways("llama-3-8b", load)
    assert served.fast_runs == served.plain_runs
    assert served.skipped and served.preemptions


def _two_members(first_blocks_tokens: tuple[int, int]) -> tuple[Replica, list[Sequence]]:
    """A decode lane with blocks of 4 tokens and two members, prefilled elsewhere, their
    blocks taken for these many tokens each (tests/test_serving_growth.py's case)."""
    kv = KVCache(blocks=100, block_tokens=4)
    r = Replica(0, 0, "decode", None, kv, None, None, 8, 64, 64, [0.0])  # type: ignore[arg-type]
    members = [Sequence(0, 0.0, 6, 100), Sequence(1, 0.0, 2, 100)]
    for s, tokens in zip(members, first_blocks_tokens, strict=True):
        s.done, s.generated = s.target, 1
        assert r.admit(s, tokens)
    return r, members


def _filed(r: Replica) -> dict[int, list[tuple[int, int]]]:
    """Each growth step's members in order, with the blocks each holds."""
    return {step: [(s.id, s.blocks + group.grown - s.mark) for s in group.members.values()]
            for step, group in r._grow_at.items() if group.members}  # fmt: skip


def test_a_skip_grants_blocks_as_the_steps_do():
    """Replica._grow_run against decodes a step at a time over steps 1-11: A is due at 3, 7,
    11; B, filed for 7 first, is joined there by A's group behind it, and both move to 15
    (the case no serving load of this file reaches: a skip's groups merging). Granting the
    groups earliest first (A ahead of B) or filing a group over the one there fails it."""
    stepped, _ = _two_members((7, 8))
    for step in range(1, 12):
        stepped.decodes()
        stepped._decoded(float(step))
    skipped, _ = _two_members((7, 8))
    growing = sorted(skipped._grow_at.items())
    skipped._grow_run(0, 11, growing, stepped.kv.used - skipped.kv.used)
    assert _filed(skipped) == _filed(stepped) == {15: [(1, 4), (0, 5)]}
    assert skipped.kv.used == stepped.kv.used == 9


@settings(max_examples=30, deadline=None)
@given(gate=st.sampled_from(["decode_steps", "adp_balance"]), steps=st.sampled_from([2, 5, 8]),
       balance=st.sampled_from(["0,2", "1,3", "3,9"]), clients=st.integers(2, 12),
       rate=st.sampled_from([None, 5.0, 40.0]), prompt=st.integers(8, 500),
       gen=st.integers(1, 300), requests=st.integers(1, 30),
       kv_blocks=st.sampled_from([None, 80, 300]), seed=st.integers(0, 3))
def test_gated_skips_equal_the_event_loop(gate, steps, balance, clients, rate, prompt, gen,
                                          requests, kv_blocks, seed):  # fmt: skip
    """The gates that count iterations, counted by cruise and its skips step by step and
    handing back the step where they would let a waiting prompt in: vLLM V0's multi-step
    runs and TensorRT-LLM's attention-DP balancer (held prompts waiting through a skip),
    the same runs bit for bit."""
    load = dict(prompt=prompt, gen=gen, spread=0.5, requests=requests, seed=seed,
                **({"rate": rate} if rate else {"concurrency": clients}))
    if gate == "decode_steps":
        load |= dict(engine="vllm-v0", decode_steps=steps)
    else:
        load |= dict(engine="trtllm", chips=2, tp=2, dp_attention=True, adp_balance=balance)
    if kv_blocks:
        load["kv_blocks"] = kv_blocks
    try:
        served = _served_both_ways("llama-3-8b", load)
    except UserError:  # a cache too small for one request: refused either way
        return
    assert served.fast_runs == served.plain_runs
