"""Plan search: every feasible way to spread a model over N chips.

Candidates are all (tp, pp, ep, dp) whose product is N and that the model allows (tp divides
the heads, pp at most the layers, ep divides the experts). A rank's graphs depend on tp and
ep only, so they are built once per pair (memoized in rank_costs.py) and every pipeline depth
reuses them. The search itself is part of every simulation (llm_inference.simulate_many):
a plan that does not fit is never costed while one that fits exists (its memory is checked
first, cheaply), and the plans that are costed share one array computation per depth with
every other job's.
"""

from __future__ import annotations

from xpusim.compiler.partition import Plan
from xpusim.memo import scoped
from xpusim.workloads.transformer_config import TransformerConfig

OBJECTIVES = ("latency", "throughput")


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


@scoped(maxsize=64)
def candidate_plans(cfg: TransformerConfig, chips: int) -> list[Plan]:
    plans = []
    for tp in _divisors(chips):
        if cfg.num_heads % tp or (cfg.ssm and tp > 1):  # check_plan says why
            continue
        for ep in _divisors(chips // tp):
            if ep > 1 and (not cfg.is_moe or cfg.num_experts % ep):
                continue
            for pp in _divisors(chips // (tp * ep)):
                if pp <= cfg.num_layers and not (cfg.is_encoder_decoder and pp > 1):
                    plans.append(Plan(tp=tp, pp=pp, dp=chips // (tp * ep * pp), ep=ep))
    return plans
