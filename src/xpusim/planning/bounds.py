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

from xpusim.planning.space import Config, mtp_options

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


def run_key(config: Config, batch: int) -> tuple[Any, ...]:
    """The `run` job a bound needs: one replica's plan at a batch."""
    lay = config.layout
    return (config.chip, lay.replica_chips, lay.tp, lay.pp, lay.ep, lay.dp_attention,
            config.precision, config.knobs.mtp, batch)  # fmt: skip


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


GRID = tuple(1 << i for i in range(9))
"""Batches (1-256) at which an open loop's decode step is costed, to find the batch its
offered load keeps in flight (loaded_tpot)."""


def batches(config: Config, concurrency: int | None, rate: float | None) -> list[int]:
    """The batches whose `run` results the bound needs."""
    need = {1, decode_batch(config, concurrency)}
    if rate is not None:
        need |= {b for b in GRID if b <= config.knobs.max_batch}
    return sorted(need)


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
    config: Config, runs: dict[int, Any], profile: Any, gen: int, concurrency: int | None,
    rate: float | None, offered_tokens_per_s: float | None = None,
) -> Bound:  # fmt: skip
    """The configuration's bound from its replica's `run` results by batch (batches()).
    With speculative decoding `run`'s TPOT is a step's time over the tokens it is expected to
    add, and the engine's host time per step, which this bound would add per token, is left
    out (a bound may only be lower). `offered_tokens_per_s` caps an open loop's tokens (a
    trace's, whose `gen` is its shortest output; else `rate` x `gen`)."""
    alone = runs[1]
    if not alone.fits:
        return Bound(False, alone.reason, math.inf, math.inf, 0.0, None)
    b = decode_batch(config, concurrency)
    full = runs[b]
    ttft = alone.ttft_s + profile.exposed_s(1, alone.ttft_s)

    def host(n: int, step_s: float) -> float:
        return 0.0 if config.knobs.mtp else profile.exposed_s(n, step_s)

    tpot = alone.tpot_s + host(1, alone.tpot_s)
    step = full.tpot_s + host(b, full.tpot_s)
    tokens = config.layout.decoders * b / step
    loaded = tpot
    if concurrency is not None:
        tokens = min(tokens, concurrency * gen / (ttft + (gen - 1) * tpot))
    if rate is not None:
        tokens = min(tokens, offered_tokens_per_s or rate * gen)
        steps = {n: r.tpot_s + host(n, r.tpot_s) for n, r in runs.items()}
        loaded = loaded_tpot(steps, rate / config.layout.decoders, gen, config.knobs.max_batch)
    cost = alone.cost
    usd = None if cost is None else cost.usd_per_chip_hour * config.chips
    return Bound(True, "", ttft, max(tpot, loaded), tokens, usd)
