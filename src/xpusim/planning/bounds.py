"""A cheap bound on each configuration from `run`'s costs of one batch, before any serving
simulation: the unloaded TTFT and TPOT (no request is served faster than alone), and the
most output tokens/s the configuration could deliver, hence the least it could cost per
million tokens. The search (search.py) simulates a configuration only while its bound can
still beat the best found.

Why these bound the simulation: a request's TTFT under load is its prefill alone plus any
wait, and its TPOT is a decode step with at least itself in the batch plus the engine's
host time per step that the device waits for (serving/engines.py's exposed_s). Each
decode replica emits at most b tokens per step of b
sequences, b no more than max_batch nor (closed loop) its share of the clients, and a step
of b takes at least `run`'s decode step at batch b; a closed loop's client has one request
at a time, each at least its unloaded latency long; an open loop delivers no more than it
is offered. In an open loop the decode batch the offered load keeps in flight sets a least
mean TPOT (loaded_tpot); a p99 below the mean needs a tail this search does not expect
(preemptions), which is why the search's answer is checked against the exhaustive one.
Serving and `run` cost a step from the same op costs (serving/step_cost.py
tabulates them), which tests/test_plan.py holds by comparing the pruned search's answer to
the exhaustive one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from xpusim.planning.space import Config, ReplicaPlan, mtp_options

SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True)
class Bound:
    fits: bool
    reason: str  # why it does not fit
    ttft_s: float  # unloaded, a lower bound
    tpot_s: float  # unloaded (and, in an open loop, under the offered load): a lower bound
    tokens_per_s: float  # output tokens/s, an upper bound
    usd_per_hour: float | None  # the whole system's; None where no price is known

    @property
    def usd_per_million(self) -> float | None:
        """The least a million delivered tokens can cost (goodput never exceeds throughput)."""
        if self.usd_per_hour is None or not self.tokens_per_s > 0:
            return None
        return self.usd_per_hour / (self.tokens_per_s * SECONDS_PER_HOUR) * 1e6


def run_key(chip: str, plan: ReplicaPlan, precision: str, mtp: Any, batch: int) -> tuple:
    """The `run` job of one replica plan at a batch (what bounds and side fronts read)."""
    return (chip, plan.chips, plan.tp, plan.pp, plan.ep, plan.dp_attention, precision, mtp,
            batch)  # fmt: skip


def run_options(key: tuple[Any, ...], prompt: int, gen: int) -> dict[str, Any]:
    _, chips, tp, pp, ep, dp_attention, precision, mtp, batch = key
    return {"batch": batch, "prompt": prompt, "gen": gen, "chips": chips, "tp": tp, "pp": pp,
            "ep": ep, "dp_attention": dp_attention, "dp": 1, "precision": precision,
            **mtp_options(mtp)}  # fmt: skip


def decode_batch(config: Config, concurrency: int | None) -> int:
    """The largest batch a decode replica can run: max_batch, or its share of the clients."""
    b = config.knobs.max_batch
    if concurrency is not None:
        b = min(b, math.ceil(concurrency / config.layout.decoders))
    return b


def prefill_batch(max_batch: int, token_budget: int, prompt: int) -> int:
    """The most prompts a prefill-only replica prefills in one step: its whole prompts
    (serve's continuous scheduler) within the token budget, at least one."""
    return max(1, min(max_batch, token_budget // prompt))


GRID = tuple(1 << i for i in range(9))
"""Batches (1-256) at which an open loop's decode step is costed, to find the batch its
offered load keeps in flight (loaded_tpot)."""


def batches(
    config: Config, concurrency: int | None, rate: float | None, prompt: int
) -> list[tuple[ReplicaPlan, int]]:
    """The replica plans and batches whose `run` results the bound needs: the prefilling
    plan alone (and, disaggregated, at a step of whole prompts), the decoding plan alone
    and at its fullest batch (and, in an open loop, at the grid's)."""
    lay, k = config.layout, config.knobs
    need = {(lay.plan, 1), (lay.decode_plan, 1),
            (lay.decode_plan, decode_batch(config, concurrency))}
    if lay.decode is not None:
        need.add((lay.plan, prefill_batch(k.max_batch, k.token_budget, prompt)))
    if rate is not None:
        need |= {(lay.decode_plan, b) for b in GRID if b <= k.max_batch}
    return sorted(need, key=lambda pb: (pb[0].label(), pb[1]))


def loaded_tpot(steps: dict[int, float], arrivals_per_s: float, gen: int, max_batch: int) -> float:
    """The least mean TPOT a decode replica can have under an open loop's offered load. By
    Little's law it holds n = arrivals x gen x TPOT sequences decoding, and a step of n
    sequences takes at least step(n) (interpolated between the costed batches), so the mean
    TPOT is at least the least fixed point of t = step(min(arrivals x gen x t, max_batch)),
    reached by iterating from the unloaded step (step is increasing)."""
    import numpy as np

    xs = np.array(sorted(steps), dtype=float)
    ys = np.array([steps[int(x)] for x in xs])
    t = float(ys[0])
    for _ in range(100):
        n = min(max(arrivals_per_s * gen * t, 1.0), float(max_batch))
        nxt = float(np.interp(n, xs, ys))
        if nxt <= t * (1 + 1e-9):
            return max(t, nxt)
        t = nxt
    return t


def bound(
    config: Config, runs: dict[tuple[ReplicaPlan, int], Any], profile: Any, prompt: int,
    gen: int, concurrency: int | None, rate: float | None,
    offered_tokens_per_s: float | None = None,
) -> Bound:  # fmt: skip
    """The configuration's bound from its replica plans' `run` results (batches()). With
    speculative decoding `run`'s TPOT is a step's time over the tokens it is expected to
    add, and the engine's host time per step, which this bound would add per token, is left
    out (a bound may only be lower). `offered_tokens_per_s` caps an open loop's tokens (a
    trace's, whose `prompt` and `gen` are its shortest; else `rate` x `gen`).

    Disaggregated, the TTFT is the prefill plan's and the TPOT the decode plan's, and the
    prefill replicas bound the requests served: a step prefills at most k whole prompts
    (prefill_batch) in no less than `run`'s prefill of k, so P replicas start at most
    P x k / prefill(k) requests a second (prefill time grows at least in step with the
    prompts, so fewer a step start no more)."""
    lay = config.layout
    alone, alone_decode = runs[(lay.plan, 1)], runs[(lay.decode_plan, 1)]
    for r in (alone, alone_decode):
        if not r.fits:
            return Bound(False, r.reason, math.inf, math.inf, 0.0, None)
    b = decode_batch(config, concurrency)
    full = runs[(lay.decode_plan, b)]
    ttft = alone.ttft_s + profile.exposed_s(1, alone.ttft_s)

    def host(n: int, step_s: float) -> float:
        return 0.0 if config.knobs.mtp else profile.exposed_s(n, step_s)

    tpot = alone_decode.tpot_s + host(1, alone_decode.tpot_s)
    step = full.tpot_s + host(b, full.tpot_s)
    tokens = lay.decoders * b / step
    loaded = tpot
    if lay.decode is not None:
        k = prefill_batch(config.knobs.max_batch, config.knobs.token_budget, prompt)
        prefill_s = runs[(lay.plan, k)].ttft_s
        per_request = (offered_tokens_per_s / rate) if offered_tokens_per_s and rate else gen
        tokens = min(tokens, (lay.prefill_replicas or 0) * k
                     / (prefill_s + profile.exposed_s(k, prefill_s)) * per_request)  # fmt: skip
    if concurrency is not None:
        tokens = min(tokens, concurrency * gen / (ttft + (gen - 1) * tpot))
    if rate is not None:
        tokens = min(tokens, offered_tokens_per_s or rate * gen)
        steps = {n: r.tpot_s + host(n, r.tpot_s) for (plan, n), r in runs.items()
                 if plan == lay.decode_plan}  # fmt: skip
        loaded = loaded_tpot(steps, rate / lay.decoders, gen, config.knobs.max_batch)
    cost = alone.cost
    usd = None if cost is None else cost.usd_per_chip_hour * config.chips
    return Bound(True, "", ttft, max(tpot, loaded), tokens, usd)
