"""Which replica plans each side of a disaggregated layout is searched with. Pairing every
prefill plan with every decode plan at every xPyD split would multiply the configurations
by the square of the plans (hundreds for an MoE model), so each side keeps, per chip
count, only the plans no other of that count beats on both of its side's measures, from
`run`'s costs of one replica:

- prefill: the unloaded TTFT (a lower bound on the TTFT under load) and the chip-seconds a
  prompt takes in a step of whole prompts (prefill_batch at the largest token budget and
  batch limit searched): what the prefill replicas' share of the chips buys;
- decode: the unloaded TPOT and the chip-seconds an output token takes at the decode
  side's fullest batch (the largest limit searched, or every client): what the decode
  replicas' share buys.

A plan slower unloaded than the objective is dropped from its side (every configuration
with it would miss). The xPyD splits then match the sides' rates: the bound of each
(bounds.py) counts the requests its prefill replicas can start. The fronts are per chip,
precision and speculative setting; the engines' host time, the same for every plan of a
side, is left out.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from xpusim.planning.bounds import prefill_batch, run_key
from xpusim.planning.space import MAX_BATCHES, TOKEN_BUDGETS, ReplicaPlan, max_batches


def side_batches(concurrency: int | None, prompt: int) -> tuple[int, int]:
    """The batches each side is measured at: a prefill step's whole prompts and the
    decode side's fullest batch."""
    prefill = prefill_batch(max(MAX_BATCHES), max(TOKEN_BUDGETS), prompt)
    decode = max(max_batches(concurrency))
    if concurrency is not None:
        decode = min(decode, concurrency)
    return prefill, decode


def side_keys(
    chip: str, plans: Iterable[ReplicaPlan], precision: str, mtp: Any, batches: tuple[int, int]
) -> set[tuple]:
    """The `run` jobs the fronts read: each plan alone and at its side's batch."""
    keys = set()
    for plan in plans:
        keys |= {run_key(chip, plan, precision, mtp, b) for b in (1, *batches)}
    return keys


def front(
    chip: str, plans: Iterable[ReplicaPlan], precision: str, mtp: Any, runs: dict[tuple, Any],
    batches: tuple[int, int], slo_ttft_s: float, slo_tpot_s: float,
) -> tuple[dict[int, list[ReplicaPlan]], dict[int, list[ReplicaPlan]]]:  # fmt: skip
    """Per chip count, the prefill plans and the decode plans (one pipeline stage, as
    serve's decode replicas run) that no other plan of the count beats on both of its
    side's measures."""
    prefill_at, decode_at = batches
    prefill: dict[int, list[tuple[float, float, ReplicaPlan]]] = {}
    decode: dict[int, list[tuple[float, float, ReplicaPlan]]] = {}
    for plan in plans:
        alone = runs[run_key(chip, plan, precision, mtp, 1)]
        if isinstance(alone, Exception) or not alone.fits:
            continue
        step = runs[run_key(chip, plan, precision, mtp, prefill_at)]
        if alone.ttft_s <= slo_ttft_s and not isinstance(step, Exception) and step.fits:
            prefill.setdefault(plan.chips, []).append(
                (alone.ttft_s, plan.chips * step.ttft_s / prefill_at, plan))
        full = runs[run_key(chip, plan, precision, mtp, decode_at)]
        if plan.pp == 1 and alone.tpot_s <= slo_tpot_s:
            at, t = (decode_at, full.tpot_s) if not isinstance(full, Exception) and full.fits \
                else (1, alone.tpot_s)  # fmt: skip
            decode.setdefault(plan.chips, []).append((alone.tpot_s, plan.chips * t / at, plan))
    return _pareto(prefill), _pareto(decode)


def _pareto(
    measured: dict[int, list[tuple[float, float, ReplicaPlan]]],
) -> dict[int, list[ReplicaPlan]]:
    """Per chip count, the plans no other beats on both measures (the first of equals)."""
    kept: dict[int, list[ReplicaPlan]] = {}
    for chips, rows in measured.items():
        rows = sorted(rows, key=lambda r: (r[0], r[1], r[2].label()))
        best_second = float("inf")
        for _, second, plan in rows:
            if second < best_second:  # faster on the second than every faster-first one
                kept.setdefault(chips, []).append(plan)
                best_second = second
    return kept
