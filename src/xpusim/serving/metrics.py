"""What users see under load, from one simulation's requests and iterations.

Per request, as the serving benchmarks (vLLM's benchmark_serving, genai-perf) compute them:
TTFT = first token - arrival; TPOT = (end-to-end - TTFT) / (output tokens - 1), over
requests of more than one output token; inter-token latency (ITL) is every gap between a
request's tokens; end-to-end latency = last token - arrival. Each with mean, p50, p90, p99
(numpy's linear percentiles) over the measured requests: all but the first `warmup` issued.
Throughput is steady state's: tokens emitted and requests completed within the measured
window over its length. It opens at the first measured arrival (in an open loop, one
90th-percentile request lifetime later: by then nearly every sequence in flight is the
measured load's, not the ramp from an empty system; a closed loop is full from its start)
and closes at the last arrival (after it the load only drains); a burst (every request at
once) is measured from its start to its last finish. Energy is
the whole run's: the iterations' ops, and every chip's static power while it waits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from xpusim.cost.dollars import Cost
from xpusim.result import Result
from xpusim.serving.simulator import Run
from xpusim.serving.verdict import P99

QUANTILES = (0.5, 0.9, P99)  # p50, p90 and the p99 the SLOs hold (verdict.P99)


@dataclass
class Percentiles:
    mean: float
    p50: float
    p90: float
    p99: float

    @classmethod
    def of(cls, values: np.ndarray) -> Percentiles | None:
        if not len(values):
            return None
        p50, p90, p99 = np.quantile(values, QUANTILES)
        return cls(float(values.mean()), float(p50), float(p90), float(p99))

    @classmethod
    def weighted(cls, values: np.ndarray, counts: np.ndarray) -> Percentiles | None:
        """`of(np.repeat(values, counts))` (numpy's linear percentiles) without building the
        repeat: a run's inter-token gaps are kept as (gap, how many sequences had it), and
        their repeat is one float per token generated (tens of millions in a long burst)."""
        values, counts = np.asarray(values, dtype=float), np.asarray(counts, dtype=np.int64)
        order = np.argsort(values, kind="stable")
        values, counts = values[order], counts[order]
        ends = np.cumsum(counts)  # the sorted repeat's element k is values[first end > k]
        n = int(ends[-1]) if len(ends) else 0
        if n == 0:
            return None
        rank = (n - 1) * np.array(QUANTILES)
        low = np.floor(rank)
        a = values[np.searchsorted(ends, low, side="right")]
        b = values[np.searchsorted(ends, np.minimum(low + 1, n - 1), side="right")]
        p50, p90, p99 = a + (rank - low) * (b - a)
        return cls(float(values @ counts / n), float(p50), float(p90), float(p99))


@dataclass
class KVUse:
    blocks: int  # per replica
    block_tokens: int
    capacity_tokens: int  # per replica
    bytes_per_token: float  # one chip of the fullest stage
    mean_used: float  # fraction of the blocks, time-averaged over iterations
    peak_used: float


@dataclass
class ServingResult(Result):
    PRICED_BY: ClassVar[tuple[str, str]] = ("output_tokens_per_s", "output tokens")
    GOODPUT_BY: ClassVar[str] = "goodput_tokens_per_s"  # priced into usd_per_million_goodput

    model: str
    chip: str
    chips: int
    system: str
    plan: dict[str, int]  # one replica's (with disaggregation, a prefill replica's)
    replicas: int
    prefill_replicas: int  # with disaggregation (0 without)
    decode_replicas: int
    scheduler: str
    engine: str
    load: dict[str, Any]  # kind and value
    requests: int
    warmup: int
    prompt_mean: float
    gen_mean: float
    precision: str
    weight_precision: str
    fits: bool
    reason: str
    ttft_s: Percentiles | None = None
    queue_s: Percentiles | None = None  # of TTFT, the wait before its prompt's first step
    # of queue_s (and TTFT), each request's time in the API server before the engine has it
    # (engines.toml frontend_s; --frontend-ms), the same for every request
    frontend_s: float = 0.0
    tpot_s: Percentiles | None = None
    itl_s: Percentiles | None = None
    e2e_s: Percentiles | None = None
    requests_per_s: float = 0.0  # completed
    arrivals_per_s: float = 0.0  # offered, over the same window
    queue_growth_per_s: float = 0.0  # of the requests waiting, over the window (a fit)
    output_tokens_per_s: float = 0.0
    tokens_per_s_per_chip: float = 0.0
    tokens_per_s_per_user: float = 0.0  # 1 / mean TPOT
    slo_ttft_ms: float | None = None
    slo_tpot_ms: float | None = None
    slo_met: float | None = None  # fraction of measured requests within both SLOs
    goodput_requests_per_s: float | None = None
    # output tokens/s times the share of requests within both SLOs (as `plan` ranks by), and
    # what a million of those cost (cost/dollars.py: filled where a price is known)
    goodput_tokens_per_s: float | None = None
    usd_per_million_goodput: float | None = None
    energy_j: float = 0.0
    joules_per_token: float = 0.0
    avg_power_w: float = 0.0  # per chip
    tdp_w: float = 0.0
    kv_cache: KVUse | None = None
    preemptions: int = 0
    mean_batch: float = 0.0  # sequences per iteration
    mean_waiting: float = 0.0  # queued requests, time-averaged
    mean_in_system: float = 0.0  # requests arrived and not finished, time-averaged
    duration_s: float = 0.0  # the measured window
    search: dict[str, Any] | None = None  # --find's answer and its trials
    decode_plan: dict[str, int] | None = None  # disaggregation: a decode replica's, if its own
    cost: Cost | None = None  # cost/dollars.py: filled where a price is known
    # how far serve has been from measured runs of this engine on this chip
    # (validation/error_bands.py measured_error)
    measured_error: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Frames:
    """Per-request rows and the timeline, as columns (for --out)."""

    requests: dict[str, np.ndarray]
    timeline: dict[str, np.ndarray]


def summarize(run: Run, result: ServingResult, chips: int, static_w: float,
              steady: int = 0) -> Frames:  # fmt: skip
    """Fills the result's figures from the run; returns its rows for --out. A burst's
    rates are over its whole makespan, or, given `steady` (the sequences the system holds
    at once), over its steady state (an offline run's throughput, serving/capacity.py):
    from when that many requests have finished (the ramp of the first prompts, all at
    once, behind) to the end of the last iteration that left requests waiting (after it
    the batch only drains). Arrivals that no step ends between are a burst too: their
    window would hold no token. Sequences are in flight at both ends, in a like mix, so the
    work begun and the tokens counted balance. Its power and energy per token are the
    window's too (energy_j stays the whole run's)."""
    seqs = run.sequences
    if run.upto:  # an open loop stopped once steady (serving/steady.py) or decided
        # (serving/decision.py): the first to arrive
        keep = np.argsort([s.arrival_s for s in seqs], kind="stable")[:run.upto]
        seqs = [seqs[i] for i in sorted(keep.tolist())]
        result.notes.append(f"steady after {len(seqs)} of {result.requests} requests "
                            "(--until steady, or a max-rate trial's --trials decided)")
        result.requests = len(seqs)
    arrival = np.array([s.arrival_s for s in seqs])
    first = np.array([s.first_token_s for s in seqs])
    finish = np.array([s.finish_s for s in seqs])
    gen = np.array([s.gen for s in seqs])
    ttft, e2e = first - arrival, finish - arrival
    queue = np.array([s.admitted_s for s in seqs]) - arrival
    several = gen > 1
    tpot = np.where(several, (e2e - ttft) / np.maximum(gen - 1, 1), np.nan)
    measured = np.array([s.id for s in seqs]) >= result.warmup
    window_start, window_end = arrival[measured].min(), arrival.max()
    t = run.timeline
    end = np.array(t.end_s)
    arriving = (end > window_start) & (end <= window_end)
    if window_end <= window_start or not arriving.any():  # a burst: every request arrived
        # at once, or within one step (--rate 1e9): no step ended while they arrived
        window_end = finish.max()
        queued = end[np.array(t.waiting) > 0]
        if steady and len(queued) and steady < len(seqs):
            ramp = float(np.partition(finish, steady - 1)[steady - 1])
            if queued.max() > ramp:
                window_start, window_end = ramp, float(queued.max())
    elif result.load["kind"] != "concurrency":  # open loop: let the system fill first
        filled = window_start + float(np.percentile(e2e[measured], 90))
        window_start = filled if filled < window_end - 0.25 * (window_end - window_start) \
            else window_start
    window = max(window_end - window_start, 1e-12)
    inside = (end > window_start) & (end <= window_end)
    completed = (finish > window_start) & (finish <= window_end)  # any request: the system's
    result.ttft_s = Percentiles.of(ttft[measured])
    result.queue_s = Percentiles.of(queue[measured])
    result.tpot_s = Percentiles.of(tpot[measured & several])
    result.itl_s = Percentiles.weighted(np.array(run.itl_s), np.array(run.itl_count))
    result.e2e_s = Percentiles.of(e2e[measured])
    result.requests_per_s = float(completed.sum() / window)
    arrived = (arrival >= window_start) & (arrival <= window_end)
    result.arrivals_per_s = float(arrived.sum() / window) if arrived.sum() > 1 else 0.0
    result.output_tokens_per_s = float(np.array(t.sampled)[inside].sum() / window)
    result.tokens_per_s_per_chip = result.output_tokens_per_s / chips
    if result.tpot_s is not None and result.tpot_s.mean > 0:
        result.tokens_per_s_per_user = 1.0 / result.tpot_s.mean
    if result.slo_ttft_ms is not None or result.slo_tpot_ms is not None:
        ok = np.ones(len(seqs), dtype=bool)
        if result.slo_ttft_ms is not None:
            ok &= ttft <= result.slo_ttft_ms / 1e3
        if result.slo_tpot_ms is not None:
            ok &= ~several | (tpot <= result.slo_tpot_ms / 1e3)
        result.slo_met = float((ok & measured).sum() / measured.sum())
        result.goodput_requests_per_s = float((ok & completed).sum() / window)
        result.goodput_tokens_per_s = result.output_tokens_per_s * result.slo_met
    duration = float(finish.max())
    idle_chip_s = max(chips * duration - run.busy_chip_s, 0.0)
    result.energy_j = run.energy_j + static_w * idle_chip_s
    result.joules_per_token = result.energy_j / float(gen.sum())
    result.avg_power_w = result.energy_j / duration / chips
    if steady and window_end < duration:  # the steady state's power and energy per token
        busy_s = float(np.array(t.busy_chip_s)[inside].sum())
        energy_j = float(np.array(t.energy_j)[inside].sum())
        energy_j += static_w * max(chips * window - busy_s, 0.0)
        result.avg_power_w = energy_j / window / chips
        tokens = float(np.array(t.sampled)[inside].sum())
        result.joules_per_token = energy_j / tokens if tokens else result.joules_per_token
    result.preemptions = run.preemptions
    start = np.array(t.start_s)
    span = end - start
    result.mean_batch = float(np.mean(np.array(t.decodes) + np.array(t.prefills)))
    result.mean_waiting = float(np.average(t.waiting, weights=span)) if span.sum() > 0 else 0.0
    times = end[inside]
    if len(times) > 2 and np.ptp(times) > 0:  # past capacity the queue grows steadily
        result.queue_growth_per_s = float(np.polyfit(times - times[0],
                                                     np.array(t.waiting)[inside], 1)[0])
    if result.kv_cache is not None:
        used = np.array(t.kv_used)
        result.kv_cache.mean_used = float(np.average(used, weights=span)) if span.sum() else 0.0
        result.kv_cache.peak_used = float(used.max())
    m = measured
    overlap = np.minimum(finish[m], window_end) - np.maximum(arrival[m], window_start)
    result.mean_in_system = float(np.maximum(overlap, 0.0).sum() / window)
    result.duration_s = float(window)
    return Frames(
        requests={"id": np.arange(len(seqs)), "arrival_s": arrival, "prompt":
                  np.array([s.prompt for s in seqs]), "gen": gen, "ttft_s": ttft,
                  "queue_s": queue, "tpot_s": tpot, "e2e_s": e2e, "preemptions":
                  np.array([s.preemptions for s in seqs]), "measured": measured},
        timeline={"start_s": start, "end_s": end, "replica": np.array(t.replica),
                  "decodes": np.array(t.decodes), "prefills": np.array(t.prefills),
                  "prefill_tokens": np.array(t.prefill_tokens),
                  "waiting": np.array(t.waiting), "kv_used": np.array(t.kv_used)},
    )  # fmt: skip
