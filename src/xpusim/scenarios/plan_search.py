"""Plan search: every feasible way to spread a model over N chips, costed, best one chosen.

Candidates are all (tp, pp, ep, dp) whose product is N and that the model allows (tp divides
the heads, pp at most the layers, ep divides the experts). A rank's graphs depend on tp and
ep only, so they are built once per pair (memoized in rank_costs.py) and every pipeline depth
reuses them; that keeps a search over 576 chips to a few dozen graph builds. A plan that does
not fit is never costed while one that fits exists (its memory is checked first, cheaply).
"""

from __future__ import annotations

import time

from xpusim.compiler.partition import Plan
from xpusim.errors import UserError
from xpusim.hardware.system import System
from xpusim.scenarios.llm_inference import (
    LLMInferenceResult,
    Request,
    run_plan,
    stage_footprints,
)
from xpusim.scenarios.rank_costs import rank_graphs
from xpusim.workloads.transformer_config import TransformerConfig

OBJECTIVES = ("latency", "throughput")


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def candidate_plans(cfg: TransformerConfig, chips: int) -> list[Plan]:
    plans = []
    for tp in _divisors(chips):
        if cfg.num_heads % tp:
            continue
        for ep in _divisors(chips // tp):
            if ep > 1 and (not cfg.is_moe or cfg.num_experts % ep):
                continue
            for pp in _divisors(chips // (tp * ep)):
                if pp <= cfg.num_layers:
                    plans.append(Plan(tp=tp, pp=pp, dp=chips // (tp * ep * pp), ep=ep))
    return plans


def _score(result: LLMInferenceResult, objective: str) -> tuple:
    """Smaller is better: fitting first, then the objective, then the other one.

    When nothing fits, the plan closest to fitting is the useful answer, not the fastest.
    """
    if not result.fits:
        return (True, result.per_chip_memory_bytes.total)
    if objective == "latency":
        return (not result.fits, result.tpot_s, result.ttft_s, -result.tokens_per_s)
    return (not result.fits, -result.tokens_per_s, result.tpot_s)


def search(
    cfg: TransformerConfig,
    system: System,
    req: Request,
    microbatches: int | None,
    objective: str,
    overlap: bool,
    notes: list[str],
) -> LLMInferenceResult:
    if objective not in OBJECTIVES:
        raise UserError(f"unknown objective {objective!r}; choose latency or throughput")
    start = time.perf_counter()
    candidates = candidate_plans(cfg, system.chips)
    if not candidates:
        raise UserError(f"no parallelism plan splits {cfg.name} over {system.chips} chips")
    needs = {plan: _fullest_chip_bytes(cfg, req, plan, microbatches) for plan in candidates}
    capacity = system.chip.capacity_bytes
    feasible = [plan for plan in candidates if needs[plan] <= capacity]
    # Only plans that fit are worth costing; when none does, the one closest to fitting is.
    costed = feasible or [min(candidates, key=needs.__getitem__)]
    results = [run_plan(cfg, system, plan, req, microbatches, overlap, list(notes))
               for plan in costed]  # fmt: skip
    results.sort(key=lambda r: _score(r, objective))
    best = results[0]
    runner_up = results[1] if len(results) > 1 else None
    best.plan_search = {
        "objective": objective,
        "candidates": len(candidates),
        "feasible": len(feasible),
        "chosen": best.plan,
        "runner_up": runner_up and {
            "plan": runner_up.plan, "fits": runner_up.fits, "tpot_s": runner_up.tpot_s,
            "ttft_s": runner_up.ttft_s, "tokens_per_s": runner_up.tokens_per_s,
        },
        "search_s": time.perf_counter() - start,
    }  # fmt: skip
    return best


def _fullest_chip_bytes(
    cfg: TransformerConfig, req: Request, plan: Plan, microbatches: int | None
) -> float:
    """What the fullest chip of a plan must hold: the same figure run_plan's `fits` tests."""
    graphs = rank_graphs(cfg, req, plan)
    stages = stage_footprints(cfg, plan, req, microbatches or plan.pp, graphs.activation_bytes)
    return max(stage.total for stage in stages)
