"""Serving queries in batches under load: queries arrive, the server batches them, p99 comes
out. For recommendation models and CNNs, whose query is one forward pass.

As production recommendation servers (and MLPerf's DLRM and ResNet-50 Server scenarios) do:
queries arrive in a Poisson process; when the chip is free the server runs a batch of every
waiting query up to `max_batch`, or waits for more until the oldest has waited `window_ms`.
A batch's time and energy are the model's one-pass scenario's for that batch size
(scenarios/recsys.py, scenarios/cnn_inference.py), costed once per size seen. A query's
latency runs from its arrival to its batch's end; goodput counts queries within `sla_ms`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from xpusim.cost.dollars import Cost
from xpusim.errors import UserError, check_positive
from xpusim.hardware.spec import Chip
from xpusim.hardware.system import System
from xpusim.result import Result
from xpusim.serving.metrics import Percentiles
from xpusim.serving.options import default_warmup
from xpusim.workloads.cnn import ResNetConfig
from xpusim.workloads.dlrm_config import DLRMConfig


@dataclass
class QueryServingResult(Result):
    PRICED_BY: ClassVar[tuple[str, str]] = ("queries_per_s", "queries")

    model: str
    chip: str
    chips: int
    rate_qps: float
    queries: int
    max_batch: int
    window_ms: float
    sla_ms: float | None
    fits: bool
    reason: str
    latency_s: Percentiles | None = None
    queries_per_s: float = 0.0
    goodput_queries_per_s: float | None = None
    sla_met: float | None = None
    mean_batch: float = 0.0
    utilization: float = 0.0  # of the chip's time spent running batches
    energy_j: float = 0.0
    joules_per_query: float = 0.0
    avg_power_w: float = 0.0
    tdp_w: float = 0.0
    cost: Cost | None = None  # cost/dollars.py: filled where a price is known
    notes: list[str] = field(default_factory=list)


def serve_queries(
    cfg: DLRMConfig | ResNetConfig, target: Chip | System, *, rate: float | None,
    requests: int = 20000, seed: int = 0, max_batch: int = 256, window_ms: float = 1.0,
    sla_ms: float | None = None, warmup: int | None = None, **options: Any,
) -> QueryServingResult:  # fmt: skip
    if isinstance(cfg, ResNetConfig):
        from xpusim.scenarios.cnn_inference import simulate
    else:
        from xpusim.scenarios.recsys import simulate

    if rate is None or not (np.isfinite(rate) and rate > 0):
        raise UserError(f"serving queries in batches needs --rate, a positive number of "
                        f"queries/s, got {rate!r}")  # fmt: skip
    check_positive(requests=requests, max_batch=max_batch)
    if not (np.isfinite(window_ms) and window_ms >= 0):
        raise UserError(f"window_ms must be a non-negative number, got {window_ms!r}")
    if sla_ms is not None and not (np.isfinite(sla_ms) and sla_ms > 0):
        raise UserError(f"sla_ms must be a positive number of milliseconds, got {sla_ms!r}")
    costs: dict[int, Any] = {}

    def batch(b: int) -> Any:
        if b not in costs:
            costs[b] = simulate(cfg, target, batch=b, **options)
        return costs[b]

    probe = batch(1)
    result = QueryServingResult(cfg.name, probe.chip, probe.chips, rate, requests, max_batch,
                                 window_ms, sla_ms, probe.fits, probe.reason,
                                 tdp_w=probe.tdp_w, notes=list(probe.notes))  # fmt: skip
    if not probe.fits:
        return result
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1.0 / rate, size=requests))
    done = np.empty(requests)
    sizes, energy, busy = [], 0.0, 0.0
    free_s, head, window = 0.0, 0, window_ms / 1e3
    while head < requests:
        start = max(free_s, arrival[head])
        # wait for a full batch or the oldest query's window, whichever is first
        full_at = arrival[min(head + max_batch, requests) - 1]
        start = max(start, min(full_at, arrival[head] + window))
        end_q = min(int(np.searchsorted(arrival, start, side="right")), head + max_batch)
        b = end_q - head
        cost = batch(b)
        free_s = start + cost.latency_s
        done[head:end_q] = free_s
        sizes.append(b)
        energy += cost.energy_j
        busy += cost.latency_s
        head = end_q
    skip = default_warmup(requests) if warmup is None else warmup
    latency = (done - arrival)[skip:]
    window_s = done[skip:].max() - arrival[skip:].min()
    result.latency_s = Percentiles.of(latency)
    result.queries_per_s = float(len(latency) / window_s)
    if sla_ms is not None:
        ok = latency <= sla_ms / 1e3
        result.sla_met = float(ok.mean())
        result.goodput_queries_per_s = float(ok.sum() / window_s)
    duration = float(done.max())
    static_w = _static_w(target) * probe.chips  # every chip, while no batch runs
    result.energy_j = energy + static_w * max(duration - busy, 0.0)
    result.joules_per_query = result.energy_j / requests
    result.avg_power_w = result.energy_j / duration / probe.chips
    result.mean_batch = float(np.mean(sizes))
    result.utilization = busy / duration
    return result


def _static_w(target: Chip | System) -> float:
    chip = target.chip if isinstance(target, System) else target
    return chip.energy.static_power_w.value
