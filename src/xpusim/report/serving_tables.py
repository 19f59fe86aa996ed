"""Rich tables of a serving run. Only formatting: every number comes from the result."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rich.console import Group
from rich.table import Table

from xpusim.compiler.partition import plan_text
from xpusim.hardware.spec import display_id
from xpusim.report.units import dollars, seconds, si


def serving_view(result: Any) -> Any:
    """The latency table and the throughput/energy lines of an LLM or a query serving run
    (recommendation models, CNNs)."""
    if type(result).__name__ == "QueryServingResult":
        return _queries(result)
    load = result.load
    shape = (f"{_load(load)}, {result.requests} requests of "
             f"{result.prompt_mean:.0f} -> {result.gen_mean:.0f} tokens")  # fmt: skip
    plan = plan_text(result.plan)
    split = (f", {result.prefill_replicas}P{result.decode_replicas}D" if result.prefill_replicas
             else "")  # fmt: skip
    if result.decode_plan:
        split += f" (decode: {plan_text(result.decode_plan)})"
    title = (f"{result.model} on {result.chips} {display_id(result.chip)} "
             f"({result.replicas} x {plan}{split}; {result.scheduler}, engine {result.engine}): "
             f"{shape}")  # fmt: skip
    if not result.fits:
        return Group(title)
    table = _percentiles([("TTFT", result.ttft_s), *_queue_rows(result),
                          ("TPOT", result.tpot_s),
                          ("ITL", result.itl_s), ("end to end", result.e2e_s)])  # fmt: skip
    lines = [
        f"{_requests_per_s(result)}, {si(result.output_tokens_per_s)} output "
        f"tokens/s ({si(result.tokens_per_s_per_chip)} per chip, "
        f"{si(result.tokens_per_s_per_user)} per user)",
        f"energy {si(result.joules_per_token, 'J')} a token, {si(result.avg_power_w, 'W')} per "
        f"chip (TDP {si(result.tdp_w, 'W')})" + _cost(result),
        f"batch {si(result.mean_batch)} sequences (mean over iterations), "
        f"{si(result.mean_waiting)} requests waiting (mean over time); KV cache "
        f"{result.kv_cache.mean_used:.0%} used on average "
        f"(peak {result.kv_cache.peak_used:.0%} of {si(result.kv_cache.capacity_tokens)} "
        f"tokens); {result.preemptions} preemptions",
    ]
    if result.goodput_requests_per_s is not None:
        lines.append(f"goodput {si(result.goodput_requests_per_s)} requests/s "
                     f"({result.slo_met:.1%} within the SLOs)")  # fmt: skip
    if result.search:
        found = {k: v for k, v in result.search.items() if k not in ("find", "trials")}
        lines.append(f"--find {result.search['find']}: " + ", ".join(
            f"{k} {si(v)}" if isinstance(v, float) else f"{k} {v}" for k, v in found.items())
            + (f" ({len(result.search['trials'])} trials)" if result.search["trials"]
               else ""))  # fmt: skip  (an offline burst is one run, no trials)
    return Group(title, table, *lines)


def _queries(result: Any) -> Any:
    title = (f"{result.model} on {result.chips} {display_id(result.chip)}: "
             f"{result.rate_qps:g} queries/s, "
             f"batches up to {result.max_batch} within {result.window_ms:g} ms")  # fmt: skip
    if not result.fits:
        return Group(title)
    table = _percentiles([("latency", result.latency_s)])
    lines = [f"{si(result.queries_per_s)} queries/s served, mean batch {si(result.mean_batch)}, "
             f"chip busy {result.utilization:.0%}",
             f"energy {si(result.joules_per_query, 'J')} a query, {si(result.avg_power_w, 'W')} "
             f"per chip (TDP {si(result.tdp_w, 'W')})" + _cost(result)]  # fmt: skip
    if result.goodput_queries_per_s is not None:
        lines.append(f"goodput {si(result.goodput_queries_per_s)} queries/s "
                     f"({result.sla_met:.1%} within {result.sla_ms:g} ms)")  # fmt: skip
    return Group(title, table, *lines)


def _requests_per_s(result: Any) -> str:
    """Completed requests a second over the measured window, or, where every request outlives
    the window (a short burst of long requests), that instead of a rate of 0: the tokens/s
    beside it are real, and '0 requests/s' would read as a system doing nothing."""
    if result.requests_per_s > 0 or result.output_tokens_per_s == 0:
        return f"{si(result.requests_per_s)} requests/s"
    return (f"no request finished within the {seconds(result.duration_s)} arrival window "
            "(each outlives it)")  # fmt: skip


def _load(load: dict[str, Any]) -> str:
    """The load as a person reads it: 'rate 14.6 requests/s', 'concurrency 32', 'trace X'."""
    value = load["value"]
    if load["kind"] == "rate":
        return f"rate {si(value)} requests/s"
    return f"{load['kind']} {value}"


def _cost(result: Any) -> str:
    cost = result.cost
    if cost is None:
        return ""
    goodput = getattr(result, "usd_per_million_goodput", None)
    within = "" if goodput is None else f", {dollars(goodput)} per million within the SLOs"
    return f"; {dollars(cost.usd_per_million)} per million {cost.per}{within} ({cost.basis})"


def _queue_rows(result: Any) -> list[tuple[str, Any]]:
    """TTFT's wait before its prompt's first step, the API server's time per request
    (engines.toml frontend_s, in `queue_s`) in a row of its own: as one figure, a run with
    nothing waiting showed 15 ms queued. A fixed time shifts every percentile by itself; what
    is left under RESOLUTION_S is the two sums' rounding (5.55e-17 s), so none."""
    queue, api_s = result.queue_s, result.frontend_s
    if queue is None or not api_s:
        return [("of it, queued", queue)]
    fixed = replace(queue, mean=api_s, p50=api_s, p90=api_s, p99=api_s)
    engine = replace(queue, **{k: _past(getattr(queue, k) - api_s)
                               for k in ("mean", "p50", "p90", "p99")})  # fmt: skip
    return [("of it, API server", fixed), ("of it, queued", engine)]


RESOLUTION_S = 1e-9
"""Times closer than this to zero print as zero: far under any step of any engine."""


def _past(value_s: float) -> float:
    return value_s if value_s >= RESOLUTION_S else 0.0


def _percentiles(rows: list[tuple[str, Any]]) -> Table:
    """Mean, p50, p90 and p99 of each figure (a Percentiles; None rows are left out)."""
    table = Table()
    for col in ("", "mean", "p50", "p90", "p99"):
        table.add_column(col, justify="left" if not col else "right")
    for label, p in rows:
        if p is not None:
            table.add_row(label, *(seconds(v) for v in (p.mean, p.p50, p.p90, p.p99)))
    return table
