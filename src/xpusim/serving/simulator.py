"""The event loop: requests arrive, replicas run iterations, tokens come out.

Events are kept in a heap ordered by (time, kind, sequence number), a total order, so one
seed gives one answer. Everything that happens at one instant is processed before any
replica chooses its next batch, so a request that arrives as an iteration ends joins the
next one. Requests go to the replica of their role holding the fewest (join the shortest
queue); with disaggregation a prompt is prefilled on a prefill replica, which emits the
first token, then its KV cache crosses the system's links to a decode replica.
"""

from __future__ import annotations

import functools
import gc
import heapq
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from xpusim.serving.load import Requests
from xpusim.serving.replica import DecodeRun, Iteration, Replica
from xpusim.serving.schedulers import Sequence
from xpusim.serving.steady import ArrivalPrefix
from xpusim.serving.verdict import Verdict

# event kinds, in the order they are handled at one instant
_END, _FREE, _TRANSFER, _ARRIVAL = range(4)
_load = operator.attrgetter("load")  # Replica.load, for route's min
_queued = operator.attrgetter("queued")  # the same, counted (the reference loop's)
_tokens = operator.itemgetter(1)  # a prefill chunk's (sequence, tokens)


@dataclass
class Timeline:
    """One row per iteration (all replicas)."""

    start_s: list[float] = field(default_factory=list)
    end_s: list[float] = field(default_factory=list)
    replica: list[int] = field(default_factory=list)
    decodes: list[int] = field(default_factory=list)
    prefills: list[int] = field(default_factory=list)  # sequences running a prefill chunk
    prefill_tokens: list[int] = field(default_factory=list)
    sampled: list[int] = field(default_factory=list)  # tokens emitted
    waiting: list[int] = field(default_factory=list)  # requests queued, all replicas, as
    # the iteration starts (after its scheduler admitted what it could)
    kv_used: list[float] = field(default_factory=list)  # the replica's cache, a fraction
    energy_j: list[float] = field(default_factory=list)  # of its ops
    busy_chip_s: list[float] = field(default_factory=list)

    def add(self, r: Replica, it: Iteration, waiting: int) -> None:
        self.start_s.append(it.start_s)
        self.end_s.append(it.end_s)
        self.replica.append(r.replica)
        self.decodes.append(it.decodes)
        self.prefills.append(len(it.batch.chunks))
        self.prefill_tokens.append(sum(map(_tokens, it.batch.chunks)))
        self.sampled.append(it.sampled)
        self.waiting.append(waiting)
        self.kv_used.append(r.kv.used / r.kv.blocks)
        self.energy_j.append(it.energy_j)
        self.busy_chip_s.append(it.busy_chip_s)

    def add_run(self, r: Replica, run: DecodeRun, waiting: int) -> None:
        """The rows of `run`'s iterations, as add gives each."""
        steps = len(run.end_s)
        self.start_s += run.start_s.tolist()
        self.end_s += run.end_s.tolist()
        self.replica += [r.replica] * steps
        self.decodes += [run.decodes] * steps
        self.prefills += [0] * steps
        self.prefill_tokens += [0] * steps
        self.sampled += [run.decodes] * steps
        self.waiting += [waiting] * steps
        self.kv_used += (run.kv_used / r.kv.blocks).tolist()
        self.energy_j += run.energy_j.tolist()
        self.busy_chip_s += run.busy_chip_s.tolist()


def _added(total: float, values: np.ndarray) -> float:
    """total + values[0] + values[1] + ..., added one at a time as Timeline.add's caller
    adds each iteration's (np.add.accumulate, unlike sum, adds in that order)."""
    return float(np.add.accumulate(np.append(total, values))[-1])


@dataclass
class Run:
    """What one simulation produced, for metrics.py to summarize."""

    sequences: list[Sequence]
    timeline: Timeline
    energy_j: float  # of the iterations' ops
    busy_chip_s: float
    preemptions: int
    itl_s: list[float]  # gaps between measured requests' tokens
    itl_count: list[int]  # how many had each
    stopped: str = ""  # why a Verdict ended the run early (then only partly served)
    upto: int = 0  # a Steady or Decision stop: the requests (arrival order) kept; 0: all


def _collector_paused(run: Callable[..., Run]) -> Callable[..., Run]:
    """`run` with CPython's cyclic garbage collector off, back as it was after (an error
    too). A run keeps hundreds of thousands of small objects alive to its end (sequences,
    the growth and finish schedules' tuples, iterations), which the collector rescans over
    and over without finding garbage among them: 10% of a max-rate search's CPU (MLPerf
    v4.1 Llama-2-70B Server on 8 H100: 2.2 of 21.7 CPU-s, 805 young, 73 middle and 6 full
    collections, timed by gc.callbacks). Reference counting still frees what the loop
    drops; the cycles a run makes (its closures, once per run) wait for the next
    collection after it. Nothing the run computes depends on it (tests/test_simulator_gc.py)."""

    @functools.wraps(run)
    def paused(*args: object, **kwargs: object) -> Run:
        if not gc.isenabled():
            return run(*args, **kwargs)
        gc.disable()
        try:
            return run(*args, **kwargs)
        finally:
            gc.enable()

    return paused


@_collector_paused
def simulate(
    requests: Requests,
    concurrency: int | None,
    replicas: list[Replica],
    transfer_s: Callable[[int], float],
    progress: Callable[[int], None] | None = None,
    verdict: Callable[[list[Sequence]], Verdict] | None = None,
    steady: Callable[[list[Sequence]], ArrivalPrefix] | None = None,
    reference: bool = False,
    frontend_s: float = 0.0,
) -> Run:
    """Serves every request; `concurrency` clients in a closed loop, or the requests'
    arrival times. `transfer_s(tokens)`: moving a prompt's KV cache between replicas.
    `verdict(sequences)`: a Verdict of an open loop's SLOs, which stops the run (its Run
    then partial) once the run must miss them. `steady(sequences)`: a Steady, which stops an
    open loop once its statistics have settled (a Decision, once a max-rate trial's outcome
    has); Run.upto then says how many requests count.

    An open loop's arrivals wait in a list sorted by time (ties in request order), a cursor
    merged with the heap, not in the heap itself: a max-rate trial holds some 44,000, and
    every push and pop would climb past them. A closed loop's first requests (one a client,
    all at one instant) come from the same cursor: an offline burst is a client a request,
    up to 348,000 of them (MLPerf v4.1 Mixtral Offline on 8 H200). An instant handles the
    heap's events first and then its arrivals, the order the heap itself gives them
    (_ARRIVAL is the last kind, and arrivals were pushed first, in request order). Only at
    an instant with an end can `steady` change its mind (first tokens and finishes happen
    there), so it is asked only then. `reference`: every arrival in the heap, `steady` asked
    at every instant and each replica's load counted at each arrival (Replica.queued), the
    plain loop the fast one must equal (tests/test_simulator_arrivals.py).

    `frontend_s`: the engine's time outside its steps for each request (engines.toml
    frontend_s): a request reaches the engine that long after it arrives, and its latencies
    still count from its arrival, so each TTFT and end-to-end latency holds it once and a
    closed loop's client waits it before each request."""
    heap: list[tuple[float, int, int, object]] = []
    order = 0

    def push(time_s: float, kind: int, payload: object) -> None:
        nonlocal order
        heapq.heappush(heap, (time_s, kind, order, payload))
        order += 1

    # the lengths read as Python ints (tolist): numpy scalars one at a time were half this
    # list's CPU, and a max-rate trial holds up to 121,280 requests
    sequences = [Sequence(i, 0.0, int(p), int(g)) for i, (p, g) in
                 enumerate(zip(requests.prompt.tolist(), requests.gen.tolist(), strict=True))]
    issued = 0
    coming: list[Sequence] = []  # arrivals not yet handled (an open loop's; a closed
    # loop's first requests), in time order
    coming_s: list[float] = []  # their times
    if concurrency is None:
        assert requests.arrival_s is not None
        sent = requests.arrival_s if requests.dispatch_s is None else requests.dispatch_s
        for s, t, at in zip(sequences, requests.arrival_s.tolist(), sent.tolist(), strict=True):
            s.arrival_s = t  # its latencies count from here, a harness's hold included
            if reference:
                push(at + frontend_s, _ARRIVAL, s)
            else:
                coming_s.append(at + frontend_s)
        if not reference:
            in_order = sorted(range(len(sequences)), key=coming_s.__getitem__)  # stable
            coming = [sequences[i] for i in in_order]
            coming_s = [coming_s[i] for i in in_order]
        issued = len(sequences)
    else:
        first = sequences[:concurrency]  # every client's first request, at one instant
        if reference:
            for s in first:
                push(frontend_s, _ARRIVAL, s)
        else:
            coming, coming_s = first, [frontend_s] * len(first)
        issued = min(concurrency, len(sequences))
    judge = None if verdict is None or concurrency is not None else verdict(sequences)
    settle = None if steady is None or concurrency is not None else steady(sequences)
    prefill = [r for r in replicas if r.role in ("both", "prefill")]
    decode = [r for r in replicas if r.role in ("both", "decode")]
    timeline = Timeline()
    energy = busy = 0.0
    finished = 0
    holding: dict[int, Replica] = {}  # sequence id -> prefill replica holding its cache
    queues = [q for r in replicas for q in (r.inbox, r.waiting)]

    batch = None if requests.batch is None else requests.batch.tolist()
    load = _queued if reference else _load

    def route(s: Sequence, pool: list[Replica]) -> None:
        if batch is not None and pool is prefill:  # a harness's batch: whole to one, in turn
            pool[batch[s.id] % len(pool)].arrive(s)
            return
        # the least loaded, the lowest index of those (pool is in index order; min keeps
        # the first of equals)
        min(pool, key=load).arrive(s)

    def complete(s: Sequence, r: Replica, now: float) -> None:
        nonlocal finished, issued
        r.free(s)
        s.finish_s = now
        finished += 1
        if judge is not None:
            judge.finished(s)
        if settle is not None:
            settle.finished(s)
        if progress is not None:
            progress(finished)
        if concurrency is not None and issued < len(sequences):
            nxt = sequences[issued]
            nxt.arrival_s = now
            push(now + frontend_s, _ARRIVAL, nxt)
            issued += 1

    def record(r: Replica, it: Iteration, waiting: int) -> None:
        nonlocal energy, busy
        energy += it.energy_j
        busy += it.busy_chip_s
        timeline.add(r, it, waiting)

    def record_run(r: Replica, run: DecodeRun, waiting: int) -> None:
        nonlocal energy, busy
        energy = _added(energy, run.energy_j)
        busy = _added(busy, run.busy_chip_s)
        timeline.add_run(r, run, waiting)

    # one replica runs stretches of plain decode steps without an event each (Replica.cruise:
    # with more, the others' events would interleave with its steps)
    alone = len(replicas) == 1

    cursor, arrivals = 0, len(coming)

    def next_event_s() -> float:
        first = heap[0][0] if heap else math.inf
        return min(first, coming_s[cursor]) if cursor < arrivals else first

    while heap or cursor < arrivals:
        now = next_event_s()
        ended = reference  # what a Steady judges (first tokens, finishes) changes at an end
        while heap and heap[0][0] == now:
            _, kind, _, payload = heapq.heappop(heap)
            if kind == _ARRIVAL:
                route(payload, prefill)  # type: ignore[arg-type]
            elif kind == _END:
                ended = True
                r, it = payload  # type: ignore[misc]
                for s in r.finish(it):
                    if s.generated >= s.gen:
                        complete(s, r, now)
                    else:  # prefilled on a prefill replica: its blocks stay until sent
                        holding[s.id] = r
                        push(now + transfer_s(s.context), _TRANSFER, s)
            elif kind == _TRANSFER:
                s = payload  # type: ignore[assignment]
                source = holding.pop(s.id)
                source.kv.give(s.blocks)
                s.blocks = s.shared = 0
                route(s, decode)
        while cursor < arrivals and coming_s[cursor] == now:
            route(coming[cursor], prefill)
            cursor += 1
        if judge is not None and judge.missed(now):
            break
        if ended and settle is not None and settle.settled():
            break
        for r in replicas:
            if r.busy or r.stage_free_s[0] > now:  # Replica.start's own test, without a call
                continue
            while (it := r.start(now)) is not None:
                # the queue the iteration leaves behind (what it admitted is not waiting)
                waiting = sum(map(len, queues))
                record(r, it, waiting)
                if alone:
                    it = r.cruise(it, next_event_s(), judge,
                                  lambda step, r=r, w=waiting: record(r, step, w),
                                  lambda run, r=r, w=waiting: record_run(r, run, w))  # fmt: skip
                push(it.end_s, _END, (r, it))
                if it.stage0_free_s < it.end_s and r.cost.stages > 1:  # another lane's turn
                    push(it.stage0_free_s, _FREE, None)
                if it.stage0_free_s > now or r.busy:
                    break
    stopped = (judge is not None and judge.reason) or (settle is not None and settle.upto)
    if finished < len(sequences) and not stopped:
        raise RuntimeError(f"{len(sequences) - finished} requests never finished")
    return Run(sequences, timeline, energy, busy, sum(r.preemptions for r in replicas),
               [g for r in replicas for g in r.itl_s], [n for r in replicas for n in r.itl_count],
               judge.reason if judge is not None else "",
               settle.upto if settle is not None else 0)  # fmt: skip
