"""Capacity questions, answered by running the serving simulation repeatedly.

- max-rate: the highest Poisson request rate whose p99 TTFT and p99 TPOT meet the SLOs
  (MLPerf Server's question). The closed loop at every slot full gives a first rate; from
  there rates go up while the SLOs hold or down while they do not (a short step first:
  STEPS_DOWN), and the bracket found is bisected to within RATE_TOLERANCE; a trial whose
  queue keeps growing fails (BACKLOG).
- min-chips: the fewest replicas (times a replica's chips) that serve the given rate within
  the SLOs: doubling, then bisection. p99s fall as replicas are added (more capacity behind
  the same arrivals), which is what makes bisection valid. With no plan given, each replica
  layout (the plan search's tp x pp x ep on 1, 2, 4 ... chips) is tried, and the fewest
  chips overall win: a replica of tp 8 may need fewer chips in all than one of pp 8.
- offline: the throughput of a burst, every request at once and measured to the last token
  (MLPerf Offline, trtllm-bench). Its steady state is the batch the KV cache holds: the
  burst is OFFLINE_ROUNDS times that many requests (at most the load's), so the run
  reaches it and its ramp and drain stay a small share of the makespan.
- pd-split: every split of the replicas into P prefill and D decode replicas, the best by
  goodput (by output tokens/s without SLOs), ties by p99 end-to-end latency. A searched plan
  that fills the system with one replica is first cut into the smallest that fits.

Every trial uses the same seed, so the comparisons are between systems, not between draws.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from xpusim.errors import UserError
from xpusim.hardware.spec import Chip
from xpusim.hardware.system import System
from xpusim.scenarios.llm.plans import candidate_plans
from xpusim.serving.decision import Decision
from xpusim.serving.load import Requests, draw
from xpusim.serving.metrics import Frames, ServingResult
from xpusim.serving.options import MAX_REQUESTS, Engine, Load, Search
from xpusim.serving.run import Prepared, prepare, run
from xpusim.serving.verdict import Verdict
from xpusim.workloads.transformer_config import TransformerConfig

RATE_TOLERANCE = 0.02  # of the answer
SPLIT_TIE = 0.01  # goodputs this close are ties, broken by p99 latency
TRIAL_SLOTS = 4  # a max-rate trial's requests, at least, per slot of the system
MAX_BRACKET = 8  # rates tried (x1.25 up, STEPS_DOWN down) before the search gives up
STEPS_DOWN = (0.8, 0.8, 0.25)
"""Under a failing rate the next: 0.8 of it twice (the up step's inverse, so an answer
down to 0.64 of the probe's rate is bracketed in a ratio of 1.25, four bisections to
RATE_TOLERANCE), then a quarter of the last each time (MAX_BRACKET then reaches 6e-4 of
it). A quarter from the first failure bracketed such answers in a ratio of 4 (six or seven
bisections) and its first trial, at a quarter of the rate, was often the search's slowest:
a trial's steps grow with its span, N requests / rate. The 32 MLPerf v4.1/v5.1 Server
searches: 12 probes fail, 9 of those answers lie in 0.64-1.0 of the probe (0.71-0.95);
111 -> 99 simulations for those 12 (docs/validation.md). A cost choice only: the answer is
the same rate within RATE_TOLERANCE (tests/test_capacity_offline.py)."""
MAX_REPLICAS = 4096


def answer(
    cfg: TransformerConfig, target: Chip | System, load: Load, engine: Engine, search: Search,
    plan_options: dict[str, Any], warmup: int, progress: Callable[[int, int], None] | None,
) -> tuple[ServingResult, Frames | None]:  # fmt: skip
    if search.find in ("max-rate", "min-chips") and search.slo == (None, None):
        raise UserError(f"--find {search.find} needs --slo-ttft-ms and/or --slo-tpot-ms")
    if search.find == "max-rate" and load.trace is not None:
        raise UserError("--find max-rate searches the arrival rate, which a --trace fixes: "
                        "give the file as --lengths to draw the requests' lengths from it")
    if search.find == "offline" and load.closed:  # a burst: every request at once, whatever
        # --concurrency said, and the step tables sized for all of them (_offline)
        load = replace(load, concurrency=load.requests)
    requests = draw(load)
    prepared = prepare(cfg, target, load, requests, engine, plan_options)
    trials: list[dict[str, Any]] = []

    def trial(label: str, value: float, result: ServingResult, stopped: str = "",
              decided: str = "") -> bool:  # fmt: skip
        """Logs a trial; `stopped`: why it ended at its verdict (it fails, unmeasured);
        `decided`: why it passed before its end (its figures the requests served by then)."""
        ok = not stopped and meets(result, search)
        if stopped:
            trials.append({label: value, "ttft_p99_s": None, "tpot_p99_s": None,
                           "output_tokens_per_s": None, "goodput_requests_per_s": None,
                           "meets": False, "stopped": stopped})  # fmt: skip
        else:
            trials.append({label: value, "ttft_p99_s": _p99(result.ttft_s), "tpot_p99_s":
                           _p99(result.tpot_s), "output_tokens_per_s":
                           result.output_tokens_per_s, "goodput_requests_per_s":
                           result.goodput_requests_per_s, "meets": ok})  # fmt: skip
            if decided:  # the rates of a short prefix are not the trial's: not logged
                trials[-1] |= {"output_tokens_per_s": None, "goodput_requests_per_s": None,
                               "decided": decided}  # fmt: skip
        if progress is not None:
            progress(len(trials), 0)
        return ok

    if search.find == "max-rate":
        # the trials must outlast the system's slots (TRIAL_SLOTS): the sequences its batch
        # limit and KV cache hold at once; and the step cost's tables must hold what they
        # draw: prepare on the trials' own sample
        slots = steady_batch(prepared, float(requests.prompt.mean()), float(requests.gen.mean()))
        sample = max(load.requests, TRIAL_SLOTS * slots)
        if sample > len(requests):
            load = replace(load, requests=sample)
            prepared = prepare(cfg, target, load, draw(load), engine, plan_options)
        found = _max_rate(prepared, load, warmup, search, trial, slots)
    elif search.find == "min-chips":
        if load.rate is None and load.trace is None:
            raise UserError("--find min-chips serves a given load: give --rate (or --trace)")
        if engine.disaggregated or any(plan_options.get(k) for k in PLAN_KEYS):
            prepared = _fitting(cfg, target, load, requests, engine, plan_options, prepared)
            found = _min_replicas(prepared, load, warmup, search, trial)
        else:
            found = _min_over_layouts(cfg, target, load, requests, engine, plan_options,
                                      warmup, search, trial)  # fmt: skip
    elif search.find == "offline":
        found = _offline(prepared, load, requests, search)
    else:
        prepared = _split_ready(cfg, target, load, requests, engine, plan_options, prepared)
        found = _pd_split(prepared, load, warmup, search, trial)
    result, frames, value, note = found
    key = {"max-rate": "rate", "min-chips": "chips", "pd-split": "prefill_replicas",
           "offline": "requests"}[search.find]
    result.search = {"find": search.find, key: value, "trials": trials}
    if note:
        result.notes.append(note)
    return result, frames


BACKLOG = 0.1
"""An open-loop trial passes only if its queue of waiting requests grows by less than this
share of the arrivals over the measured window: past capacity the queue grows steadily, and
a finite run's p99 can still pass before the backlog reaches it (MLPerf runs ten minutes
for this reason). The slope, not completions against arrivals, because requests of long
outputs complete after a short run's window and would look like a backlog."""


def meets(result: ServingResult, search: Search) -> bool:
    """p99 TTFT and p99 TPOT within their SLOs (an SLO not given holds), with the arrivals
    kept up with."""
    if not result.fits:
        return False
    growing = result.queue_growth_per_s > BACKLOG * result.arrivals_per_s
    if result.load["kind"] == "rate" and growing:
        return False
    ttft, tpot = search.slo
    return ((ttft is None or _p99(result.ttft_s) <= ttft / 1e3)
            and (tpot is None or _p99(result.tpot_s) <= tpot / 1e3))  # fmt: skip


def _p99(p: Any) -> float:
    return 0.0 if p is None else p.p99


Trial = Callable[[str, float, ServingResult], bool]


def _max_rate(prepared: Prepared, load: Load, warmup: int, search: Search, trial: Trial,
              slots: int):  # fmt: skip
    """`load` holds TRIAL_SLOTS requests per slot at least (see answer): a trial must outlast
    the slots' worth of requests, or an overload would be absorbed by empty slots before any
    queue formed. Every trial draws the same lengths (one seed, one count)."""
    # every slot full for long enough to leave the ramp behind: four rounds of requests
    closed = replace(load, concurrency=slots, rate=None, trace=None, hold_s=None)  # a harness
    # batcher (--hold-s) holds arrivals: the open-loop trials below have them, this probe none
    saturated, _ = run(prepared, closed, draw(closed), warmup, search.slo)
    if not saturated.fits:
        return saturated, None, 0.0, "does not fit: no rate is served"
    top = saturated.requests_per_s

    def at(rate: float, trials: str = search.trials) -> tuple[
            bool, ServingResult, Frames | None, bool]:  # fmt: skip
        """One trial: (meets, result, frames, run whole). It runs to its end (full), to its
        verdict (verdict), or also to a statistically settled outcome either way (decided,
        serving/decision.py): its figures are then those of the requests served by then."""
        open_ = replace(load, rate=rate, concurrency=None, trace=None)
        ttft, tpot = (None if x is None else x / 1e3 for x in search.slo)
        verdicts: list[Verdict] = []
        decisions: list[Decision] = []

        def verdict(sequences: list) -> Verdict:
            verdicts.append(Verdict(sequences, warmup, ttft, tpot))
            return verdicts[-1]

        def decision(sequences: list) -> Decision:
            decisions.append(Decision(sequences, warmup, ttft, tpot, BACKLOG))
            return decisions[-1]

        result, frames = run(prepared, open_, draw(open_), warmup, search.slo,
                             verdict=verdict if trials != "full" else None,
                             decision=decision if trials == "decided" else None)  # fmt: skip
        if verdicts and verdicts[0].reason:  # stopped: it fails, with no figures to log
            return trial("rate", rate, result, verdicts[0].reason), result, frames, False
        if decisions and decisions[0].outcome == "fail":
            return trial("rate", rate, result, decisions[0].reason), result, frames, False
        early = decisions[0].reason if decisions and decisions[0].outcome else ""
        return trial("rate", rate, result, decided=early), result, frames, not early

    def last(rate: float, high: float) -> str:
        """A trial whose pass would end the search (its figures then the answer's) runs
        whole, to its verdict."""
        ends = high and high - rate <= RATE_TOLERANCE * rate
        return "verdict" if ends and search.trials == "decided" else search.trials

    # bracket the answer: from the saturation rate up while the SLOs hold (a closed loop's
    # throughput understates what arrivals can be served) or down while they do not
    low, high, rate = 0.0, 0.0, top
    passed: dict[float, tuple[ServingResult, Frames | None, bool]] = {}
    for k in range(MAX_BRACKET):
        ok, result, fr, whole = at(rate, last(rate, high))
        if ok:
            low, passed[rate] = rate, (result, fr, whole)
            if high:
                break
            rate *= 1.25
        else:
            high = rate
            if low:
                break
            rate *= STEPS_DOWN[min(k, len(STEPS_DOWN) - 1)]
    while passed:
        while high and high - low > RATE_TOLERANCE * low:
            mid = (low + high) / 2
            ok, result, fr, whole = at(mid, last(mid, high))
            if ok:
                low, passed[mid] = mid, (result, fr, whole)
            else:
                high = mid
        best, frames, whole = passed[low]
        if not whole:  # decided before its end: the answer's figures are a whole run's
            ok, result, fr, whole = at(low, "verdict")
            best, frames, rate = result, fr, low
            if not ok:  # the decision was wrong: a failure, and the search goes on below it
                high = low
                del passed[low]
                low = max(passed, default=0.0)
                continue
        if not high:
            return best, frames, low, f"the SLOs hold up to {low:.3g}/s, the highest rate tried"
        return best, frames, low, ""
    if not whole:  # the last trial stopped before its end: its figures, run to the end
        _, result, fr, _ = at(rate, "full")
    return result, fr, 0.0, "no rate meets the SLOs: even a near-idle system misses them"


OFFLINE_ROUNDS = 16
"""Requests of an offline burst per sequence the replicas hold at once. An offline run's
output rate is its steady state's (every slot busy), taken between two moments with
sequences in flight in a like mix (metrics.summarize's `steady`), so neither the first
prompts' ramp nor the drain is in it; what is left is how far the run is from its long-run
mix, which falls as 1/rounds. Fixed lengths settle slowest (a whole batch admitted at its
prompts' size grows in step and preempts): at 8 rounds such points read up to 7% under the
long run's rate (trtllm-bench's Llama-3-70B, 128 in and 4,096 out, on one H200), at 16
within about 1% (tests/test_capacity_offline.py). That is a tenth to a hundredth of the
requests the engines' default batch limits sized before (TensorRT-LLM's 2,048 sequences
per replica, where an H100's cache holds a few hundred)."""


def offline_requests(max_batch: int, lanes: int) -> int:
    """Requests to draw for an offline burst whose size is not given: OFFLINE_ROUNDS per
    sequence the engine's batch limit lets `lanes` replica lanes hold (chips / tp), the most
    steady_batch can be, so that _offline's burst of OFFLINE_ROUNDS x the steady batch is drawn
    whole. A fixed count fell short where the cache holds many: Llama-3-8B, 128 -> 128 tokens
    on one H100 under vLLM, 16.3 k output tokens/s from 500 requests against 18.4 k from
    16 x its 1,024 sequences."""
    return min(OFFLINE_ROUNDS * max_batch * max(lanes, 1), MAX_REQUESTS)


def steady_batch(prepared: Prepared, prompt: float, gen: float) -> int:
    """Sequences the replicas hold at once when every slot is busy: each replica's batch
    limit (per pipeline lane), or the KV cache's room for sequences halfway through their
    output (prompt + gen / 2 tokens, in whole blocks), whichever is fewer."""
    block = prepared.engine.kv_block
    blocks_each = max(math.ceil((prompt + gen / 2) / block), 1)
    per_replica = min(prepared.engine.max_batch * prepared.plan.pp,
                      prepared.kv.blocks // blocks_each)  # fmt: skip
    return max(per_replica, 1) * prepared.replicas


def _offline(prepared: Prepared, load: Load, requests: Requests, search: Search):
    """An offline burst of OFFLINE_ROUNDS x the steady batch (at most the load's requests,
    the first of them: `prepared` was sized for them all, so its tables hold these), every
    request measured."""
    if not prepared.fits:
        result, frames = run(prepared, load, requests, 0, search.slo)
        return result, frames, 0, "does not fit: no burst is served"
    slots = steady_batch(prepared, float(requests.prompt.mean()), float(requests.gen.mean()))
    n = min(OFFLINE_ROUNDS * slots, len(requests))
    burst = Requests(requests.prompt[:n], requests.gen[:n], None)
    at_once = replace(load, concurrency=n, rate=None, trace=None, requests=n)
    result, frames = run(prepared, at_once, burst, 0, search.slo, steady=slots)
    return result, frames, n, (f"offline: a burst of {n} requests, {n / slots:.3g} times the "
                               f"{slots} sequences the replicas hold at once")


def _smallest_replica(cfg, target, load, requests, engine, plan_options, first: int,
                      most: int) -> Prepared | None:  # fmt: skip
    """The replica of fewest chips (powers of two from `first` to `most`) that fits."""
    chips = first
    while chips <= most:
        found = prepare(cfg, target, load, requests, engine, {**plan_options, "chips": chips})
        if found.fits:
            return found
        chips *= 2
    return None


def _fitting(cfg, target, load, requests, engine, plan_options, prepared: Prepared) -> Prepared:
    """A replica plan that fits: the given one, else the smallest chip count that does."""
    if prepared.fits or plan_options.get("chips") or plan_options.get("tp"):
        return prepared
    found = _smallest_replica(cfg, target, load, requests, engine, plan_options, 2, 64)
    return prepared if found is None else replace(found, replicas=1)


def _split_ready(cfg, target, load, requests, engine, plan_options, prepared: Prepared) -> Prepared:
    """Replicas to split: the plan's, or, when the plan was searched and fills the system
    with one replica, the smallest replica that fits, as many times as the system holds."""
    given = any(plan_options.get(k) for k in ("tp", "pp", "dp", "ep"))
    if prepared.replicas >= 2 or given:
        return prepared
    system = prepared.system
    found = _smallest_replica(cfg, target, load, requests, engine, plan_options, 1,
                              system.chips // 2)  # fmt: skip
    if found is None:
        return prepared
    return replace(found, replicas=system.chips // found.plan.chips, system=system)


PLAN_KEYS = ("chips", "tp", "pp", "dp", "ep")
MAX_REPLICA_CHIPS = 64  # the largest replica min-chips tries when it searches layouts


def _min_over_layouts(cfg, target, load, requests, engine, plan_options, warmup: int,
                      search: Search, trial: Trial):  # fmt: skip
    """min-chips over replica layouts: every one-replica plan of the plan search
    (scenarios/llm/plans.candidate_plans) on 1, 2, 4 ... chips that fits, each at its fewest
    replicas; the fewest chips in all win, ties to the smaller replica, then the search's
    order. Replicas of as many chips as the best answer are not tried (they cannot beat it),
    nor more replicas of a layout than would."""
    best, first_failure, chips = None, None, 1
    while chips <= MAX_REPLICA_CHIPS and (best is None or chips < best[2]):
        for p in candidate_plans(cfg, chips):
            if p.dp != 1:
                continue
            layout = {**plan_options, "chips": chips, "tp": p.tp, "pp": p.pp, "ep": p.ep, "dp": 1}
            prepared = prepare(cfg, target, load, requests, engine, layout)
            if not prepared.fits:
                continue
            found = _min_replicas(prepared, load, warmup, search, trial,
                                  below=None if best is None else best[2])  # fmt: skip
            if found[2] and (best is None or found[2] < best[2]):
                best = found
            first_failure = first_failure or found
        chips *= 2
    if best is not None:
        return best
    if first_failure is not None:
        return first_failure
    prepared = _fitting(cfg, target, load, requests, engine, plan_options,
                        prepare(cfg, target, load, requests, engine, plan_options))  # fmt: skip
    return _min_replicas(prepared, load, warmup, search, trial)


def _min_replicas(prepared: Prepared, load: Load, warmup: int, search: Search, trial: Trial,
                  below: int | None = None):  # fmt: skip
    """The fewest replicas of this plan that meet the SLOs, as (result, frames, chips,
    note); with `below`, only counts of fewer chips than that are tried."""
    requests = draw(load)
    chips = prepared.plan.chips
    results: dict[int, tuple[bool, ServingResult, Frames | None]] = {}

    def at(k: int) -> bool:
        result, frames = run(prepared, load, requests, warmup, search.slo, replicas=k)
        results[k] = (trial("chips", k * chips, result), result, frames)
        return results[k][0]

    most = MAX_REPLICAS if below is None else min(MAX_REPLICAS, (below - 1) // chips)
    k, low = 1, 0  # low: the last count that failed (0: none yet)
    while not at(k):
        _, result, frames = results[k]
        if k >= most or not prepared.fits:
            return result, frames, 0, f"not met with {k * chips} chips"
        if low and not _lower(result, results[low][1]):
            return result, frames, 0, (f"not met: {k * chips} chips give the p99s of "
                                       f"{low * chips}; even an idle replica misses the SLOs")
        low, k = k, min(2 * k, most)
    high = k  # low fails (or is 0), high meets
    while high - low > 1:
        mid = (low + high) // 2
        if at(mid):
            high = mid
        else:
            low = mid
    _, result, frames = results[high]
    return result, frames, high * chips, ""


def _lower(result: ServingResult, before: ServingResult) -> bool:
    """More replicas lowered a p99 (TTFT or TPOT) by more than a run's noise (1%): the
    load, not one replica's own speed, is what still misses the SLOs."""
    return (_p99(result.ttft_s) < 0.99 * _p99(before.ttft_s)
            or _p99(result.tpot_s) < 0.99 * _p99(before.tpot_s))  # fmt: skip


def _pd_split(prepared: Prepared, load: Load, warmup: int, search: Search, trial: Trial):
    total = prepared.replicas
    if total < 2:
        raise UserError(f"--find pd-split needs at least 2 replicas; the plan has {total} "
                        f"(give more --chips, or a smaller --tp)")  # fmt: skip
    requests = draw(load)
    tried = []
    for p in range(1, total):
        engine = replace(prepared.engine, prefill_replicas=p, decode_replicas=total - p)
        result, frames = run(replace(prepared, engine=engine), load, requests, warmup,
                             search.slo)  # fmt: skip
        trial("prefill_replicas", p, result)
        score = (result.goodput_requests_per_s if result.goodput_requests_per_s is not None
                 else result.output_tokens_per_s)  # fmt: skip
        tried.append((score, result, frames, p))
    # the best score; among splits within SPLIT_TIE of it (a run's noise), the lowest p99
    # end-to-end latency
    top = max(t[0] for t in tried)
    near = [t for t in tried if t[0] >= (1 - SPLIT_TIE) * top]
    _, result, frames, p = min(near, key=lambda t: t[1].e2e_s.p99 if t[1].e2e_s else math.inf)
    return result, frames, p, f"best split: {p} prefill and {total - p} decode replicas"
