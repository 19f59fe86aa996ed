"""A replica's step table is tabulated once per plan call and sliced per token budget
(serving/run.py _step_table, StepCost.within): a slice equals a table tabulated at its size,
bit for bit, and a plan answers exactly as it does with every table built afresh."""

from __future__ import annotations

from dataclasses import fields, replace

import numpy as np
import pytest

import xpusim
import xpusim.serving.run as serving_run
from xpusim.scenarios.llm.inference import chosen_plan
from xpusim.serving.lazy_rows import Rows
from xpusim.serving.step_cost import StepCost, Work, step_cost

LARGEST, SEQUENCES, LONGEST = 4096, 24, 1200


def _arrays(cost: StepCost) -> dict[str, np.ndarray]:
    found = {f.name: getattr(cost, f.name) for f in fields(cost)
             if isinstance(getattr(cost, f.name), np.ndarray)}  # fmt: skip
    found |= {f.name: getattr(cost, f.name).array() for f in fields(cost)
              if isinstance(getattr(cost, f.name), Rows)}  # fmt: skip
    found |= {f"state.{k}": getattr(cost.state, k) for k in ("matrix", "vector", "roles")}
    return found


@pytest.mark.parametrize("model, chip, plan", [
    ("llama-3-8b", "h100-sxm", {}),
    ("llama-3-8b", "h100-sxm", {"chips": 4, "tp": 2, "pp": 2}),  # stages and their sends
    # experts tabulated apart from the rest under attention data parallelism
    ("deepseek-v2-lite", "h100-sxm", {"chips": 2, "tp": 2, "ep": 2, "dp_attention": True}),
    ("mamba-130m", "a100-sxm-80gb", {}),  # state ops: a chunk's work for every q
])  # fmt: skip
def test_a_table_sliced_to_fewer_tokens_equals_one_tabulated_there(model, chip, plan):
    cfg, target = xpusim.model(model), xpusim.target(chip)
    setup, cand = chosen_plan(cfg, target, {"batch": 8, "prompt": 512, "gen": 64, **plan})
    one = replace(cand.plan, dp=1)

    def tabulated(tokens: int) -> StepCost:
        return step_cost(cfg, cand.setup.system, one, setup.req, cand.placement, tokens,
                         SEQUENCES, LONGEST)  # fmt: skip

    largest = tabulated(LARGEST)
    for tokens in (LARGEST, 2048, 1283, 1):  # 1283: no power of two, nor a multiple of 4
        fresh, cut = tabulated(tokens), largest.within(tokens)
        got, want = _arrays(cut), _arrays(fresh)
        assert got.keys() == want.keys()
        unequal = [k for k in want if not np.array_equal(got[k], want[k])]
        assert not unequal, f"{tokens} tokens: {unequal} differ"
        works = [Work.of([], [tokens], [tokens], 1)]  # a whole prompt
        if tokens > 5:  # decodes alone, and beside a prefill chunk
            works += [Work.of([700] * 5, [], [], 5),
                      Work.of([700] * 5, [min(tokens - 5, 300)], [400], 6)]
        assert [cut(w) for w in works] == [fresh(w) for w in works]
    with pytest.raises(ValueError, match="tabulated"):
        largest.within(LARGEST + 1)


def test_a_plan_tabulates_each_replica_once_and_answers_as_with_every_table_afresh(monkeypatch):
    options = dict(slo_ttft_ms=400, slo_tpot_ms=25, num_chips=2, concurrency=16, prompt=512,
                   gen=32, requests=60)  # fmt: skip
    built: list[int] = []
    make = serving_run.step_cost

    def counted(*args):
        built.append(args[5])
        return make(*args)

    monkeypatch.setattr(serving_run, "step_cost", counted)
    kept = xpusim.plan("llama-3.1-8b", ["h100-sxm"], **options)
    served = sum(o.simulated for p in kept.chips for o in p.outcomes)
    assert 0 < len(built) < served  # the budgets of one replica share its table

    monkeypatch.setattr(serving_run, "_step_table", lambda *args: make(*args))  # each afresh
    afresh = xpusim.plan("llama-3.1-8b", ["h100-sxm"], **options)
    got, want = kept.to_dict(), afresh.to_dict()
    got.pop("seconds"), want.pop("seconds")
    assert got == want
