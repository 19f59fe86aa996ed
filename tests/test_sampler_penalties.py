"""Requests with a repetition, frequency or presence penalty (serve's --penalties): vLLM
V1's sampler then runs its penalty ops over every vocabulary entry of every sampled row each
step (workloads/transformer.py SAMPLER_PENALTIES, 85 bytes a logit), on the device after
the LM head."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xpusim
from xpusim.ir.op import OpKind
from xpusim.serving.engines import engine, engines
from xpusim.workloads.resolve import load_model
from xpusim.workloads.transformer import SAMPLER_PENALTIES, StepShape, build_step

LOAD = dict(engine="vllm", concurrency=64, requests=128, prompt=128, gen=64, warmup=0)


def _penalty_bytes(batch: int, vocab_model: str = "qwen3-8b") -> float:
    from xpusim.ir.dtypes import DType

    cfg = load_model(vocab_model)
    graph = build_step(cfg, StepShape(batch, 1, 256, decode=True), DType.BF16,
                       kernels=(SAMPLER_PENALTIES,))  # fmt: skip
    return sum(op.bytes for op in graph if op.name.startswith("penalty."))


def test_the_ops_move_85_bytes_a_logit():
    """vLLM 0.11's apply_penalties: two int64 counts and their masks (17 bytes each), the
    repetition kernel over float32 logits and both masks (10), frequency (24) and presence
    (17) as torch ops; the token ids scattered in, one a row here, are negligible."""
    vocab = load_model("qwen3-8b").vocab_size
    for batch in (1, 64):
        ids = 2 * batch * 8  # the two id tensors, one int64 a row
        assert _penalty_bytes(batch) - ids == pytest.approx(85 * batch * vocab)


def test_without_the_flag_the_graph_has_no_penalty_op():
    from xpusim.ir.dtypes import DType

    graph = build_step(load_model("qwen3-8b"), StepShape(8, 1, 256, decode=True), DType.BF16)
    assert not [op for op in graph if op.name.startswith("penalty.")]
    assert all(op.kind is not OpKind.ELEMENTWISE or not op.name.startswith("penalty")
               for op in graph)  # fmt: skip


def test_penalties_slow_vllm_steps_and_the_serve_notes_say_so():
    """The mechanism: without the ops a penalised run would be as fast as a plain one."""
    plain = xpusim.serve("qwen3-8b", "h100-sxm", **LOAD)
    penalised = xpusim.serve("qwen3-8b", "h100-sxm", **LOAD, penalties=True)
    assert penalised.itl_s.mean > plain.itl_s.mean
    assert penalised.output_tokens_per_s < plain.output_tokens_per_s
    assert any("--penalties" in note for note in penalised.notes)


def test_an_engine_without_a_source_runs_as_before_and_says_so():
    assert not engine("trtllm").penalties_source
    load = dict(LOAD, engine="trtllm")
    plain = xpusim.serve("qwen3-8b", "h100-sxm", **load)
    asked = xpusim.serve("qwen3-8b", "h100-sxm", **load, penalties=True)
    assert asked.itl_s.mean == plain.itl_s.mean
    assert any("not modelled" in note for note in asked.notes)


def test_only_sourced_profiles_model_them():
    assert engine("vllm").penalties_source
    assert {name for name, p in engines().items() if p.penalties_source} == {"vllm",
                                                                              "vllm-0.11"}


@settings(max_examples=6, deadline=None)
@given(st.integers(1, 512), st.integers(1, 512))
def test_more_rows_never_cost_less(batch, more):
    """Physics: a step that samples more rows moves more penalty bytes."""
    assert _penalty_bytes(batch + more) > _penalty_bytes(batch)


def test_ml_energy_points_carry_their_clients_penalty():
    """ML.ENERGY's client sends repetition_penalty 1.1 with every chat request
    (mlenergy/llm/benchmark.py; benchmarks/mlenergy_gpqa_points.py reads it)."""
    from xpusim.validation.points import load_points

    gpqa = [p for p in load_points() if p.id.startswith("mlenergy3-gpqa-")]
    assert gpqa and all(p.get("penalties") is True for p in gpqa)
