"""serve for models whose layers carry a constant-size state (issue #43): linear-attention
hybrids (Qwen3-Next, Qwen3.5's Gated DeltaNet layers beside full attention) and
state-space models (Mamba, Mamba-2). Their scans and carried convolutions are step_cost's
"state" kind: a sequence's work depends on its new tokens alone, whatever its context."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import xpusim
from xpusim.scenarios.llm.inference import chosen_plan
from xpusim.scenarios.llm.request import Request
from xpusim.serving.step_cost import Work, _attention_probe, _op_kinds, step_cost

# (model, chip, plan): a hybrid MoE, its Qwen3.5 siblings (MoE and dense), Mamba's scan,
# Mamba-2's SSD and MiniMax-M1's lightning attention beside softmax attention; each held to
# run at one client in tests/test_serve_run_parity.py
FAMILIES = [
    ("qwen3-next-80b-a3b-instruct", "h100-sxm", {"chips": 4, "tp": 4}),
    ("qwen3.5-35b-a3b", "h100-sxm", {}),
    ("qwen3.5-27b", "h100-sxm", {}),  # dense: Gated DeltaNet beside full attention, no experts
    ("mamba-2.8b", "h100-sxm", {}),
    ("mamba-codestral-7b", "h100-sxm", {}),
    ("minimax-m1-80k", "h200-sxm", {"chips": 8, "tp": 8, "precision": "fp8"}),  # lightning
]


@pytest.mark.parametrize(("model", "chip", "options"), FAMILIES,
                         ids=[f[0] for f in FAMILIES])  # fmt: skip
def test_serves_under_load_with_chunked_prefill(model, chip, options):
    """32 clients, prompts chunked over 512-token steps beside the decodes: every request
    completes, a token comes slower than alone, and the replica outputs more than twice one
    client's tokens per second (prefill-heavy: each request's 2,048-token prompt is most
    of its work)."""
    load = dict(prompt=2048, gen=64, requests=48, warmup=0, token_budget=512, **options)
    busy = xpusim.serve(model, chip, concurrency=32, **load)
    alone = xpusim.serve(model, chip, concurrency=1, **{**load, "requests": 3})
    assert busy.fits and busy.requests == 48
    assert busy.tpot_s.mean > alone.tpot_s.mean
    assert busy.output_tokens_per_s > 2 * alone.output_tokens_per_s


def _cost(model: str, chip: str = "h100-sxm"):
    cfg, target = xpusim.model(model), xpusim.target(chip)
    setup, cand = chosen_plan(cfg, target, {"batch": 8, "prompt": 512, "gen": 64})
    one = replace(cand.plan, dp=1)
    return step_cost(cfg, cand.setup.system, one, setup.req, cand.placement, 2048, 16, 8192)


def test_a_state_models_prefill_chunk_does_not_depend_on_its_context():
    """Mamba has no attention: a chunk of q tokens after any cached prefix costs what a
    whole prompt of q tokens does (run's own prefill graph)."""
    cost = _cost("mamba-2.8b")
    whole = cost(Work.of([], [300], [300], 1))
    for cached in (1, 700, 5000):
        assert cost(Work.of([], [300], [300 + cached], 1)) == whole


def test_a_hybrids_chunk_sums_its_sequences_state_work():
    """Two chunks run as one state kernel over both: no faster than the longer alone, no
    slower than each alone one after the other."""
    cost = _cost("qwen3.5-35b-a3b")
    a, b = cost.state.summed((200,)), cost.state.summed((900,))
    both = cost.state.summed((200, 900))
    assert max(a[0].sum(), b[0].sum()) <= both[0].sum() <= a[0].sum() + b[0].sum()
    assert cost.state.summed(())[1] == 0.0


def test_scans_and_carried_convolutions_are_state_ops():
    cfg = xpusim.model("qwen3-next-80b-a3b-instruct")
    setup, cand = chosen_plan(cfg, xpusim.target("h100-sxm"),
                              {"chips": 4, "tp": 4, "batch": 1, "prompt": 64, "gen": 2})
    plan, req = cand.plan, setup.req

    def requests(batch: np.ndarray, prompt: np.ndarray) -> list[Request]:
        return [req.shaped(int(b), int(p), 1)
                for b, p in zip(batch, prompt, strict=True)]  # fmt: skip

    probe = _attention_probe(cfg, plan.rank, *req.formats)
    kinds = _op_kinds(cfg, requests, plan.rank, probe)
    linear, full = cfg.linear_layers[0], next(i for i in range(cfg.num_layers)
                                              if i not in cfg.linear_layers)  # fmt: skip
    assert kinds[f"layers.{linear}.gated_delta"] == "state"
    assert kinds[f"layers.{linear}.conv"] == "state"
    assert kinds[f"layers.{full}.attention"] == "attention"
    assert kinds[f"layers.{linear}.in_proj_qkvz"] == "token"
    assert kinds["lm_head"] == "sample"
