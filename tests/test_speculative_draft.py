"""The draft's passes in a speculative step, and where its weights and KV cache sit."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xpusim
from xpusim.compiler.partition import Plan
from xpusim.errors import UserError
from xpusim.ir.dtypes import DType, parse_weight_format
from xpusim.scenarios.llm.request import Request
from xpusim.serving.engines import engines
from xpusim.serving.speculative import Speculator, draft_formats, draft_memory
from xpusim.serving.step_cost import StepTime, Work
from xpusim.workloads.resolve import load_model


class _Passes:
    """A draft StepCost that records the work of each pass it is asked to cost."""

    stages = 1

    def __init__(self) -> None:
        self.works: list[Work] = []

    def __call__(self, work: Work) -> StepTime:
        self.works.append(work)
        return StepTime([1.0], 0.0, 1.0)


def test_the_draft_extends_over_the_verified_tokens_then_drafts_k_minus_one_alone():
    """SGLang's EAGLE worker (draft_forward breaks before its last pass; its draft extend
    runs speculative_num_steps + 1 tokens a request), TensorRT-LLM's MTP Eagle worker and
    ATOM's proposer: one pass over each sequence's K + 1 tokens, then K - 1 of one token."""
    passes = _Passes()
    spec = Speculator(drafts=3, tokens_per_step=2.5, draft=passes)  # type: ignore[arg-type]
    took = spec.draft_s(decodes=4, decode_context=4000, prefill=None)
    first, *rest = passes.works
    assert first == spec.verify(4, 4000, None) and first.prefill_tokens == 4 * 4
    assert first.verify_basis and first.sampled == 4
    assert [(w.decodes, w.prefill_tokens) for w in rest] == [(4, 0), (4, 0)]
    assert took.stage_s == [3.0]
    Speculator(drafts=1, tokens_per_step=1.5, draft=passes).draft_s(2, 100, None)  # type: ignore[arg-type]
    assert passes.works[-1].prefill_tokens == 2 * 2  # K = 1: the extend alone


def _dsr1_fp8() -> tuple[object, Request]:
    cfg = load_model("deepseek-r1-0528")
    return cfg, Request(1, 1, 1, DType.FP8, parse_weight_format("fp8-block"), None, DType.FP8)


def test_deepseeks_mtp_layer_holds_a_61st_of_the_kv_and_its_own_weights_not_the_table():
    """One MLA layer's latent per token beside the target's 61 (576 B in FP8: 512 + 64), and
    the MTP layer's ~11.5B parameters (an MoE layer of 256 experts) over 8 chips in FP8
    blocks, the embedding table it shares (0.93B) left out: about 1.45 GB a chip."""
    cfg, req = _dsr1_fp8()
    weights, per_token = draft_memory("mtp", cfg, Plan(tp=8, ep=8), req)  # type: ignore[arg-type]
    assert per_token == 576
    assert 1.3e9 < weights < 1.6e9


def _kv(engine: str, spec: bool, **options) -> int:
    more = {"speculative": "mtp", "draft_tokens": 2, "acceptance": 0.875} if spec else {}
    result = xpusim.serve("deepseek-r1-0528", "b200", chips=8, tp=8, precision="fp8",
                          kv_precision="fp8", engine=engine, concurrency=8, prompt=256, gen=16,
                          requests=8, warmup=0, **options, **more)  # fmt: skip
    return result.kv_cache.capacity_tokens


def test_tensorrt_llm_sizes_its_cache_with_the_draft_layer_and_its_weights():
    """free_gpu_memory_fraction of what the weights (the MTP layer's too) leave, over the
    cache of 62 layers a token: fewer tokens by more than 1/62."""
    plain, spec = _kv("trtllm", False), _kv("trtllm", True)
    assert spec < plain * 61 / 62


def test_sglang_holds_the_draft_outside_its_static_fraction():
    """A given mem_fraction_static sizes the target's pool alone, draft or not; SGLang's own
    rule reserves 2 GiB more for an EAGLE/MTP draft, of nvidia-smi's total: its fraction is
    that much smaller, of the memory free at start (CUDA's total less what the process holds
    then), 61 layers a token."""
    assert _kv("sglang", True, kv_utilization=0.82) == _kv("sglang", False, kv_utilization=0.82)
    fewer = _kv("sglang", False) - _kv("sglang", True)
    b200 = xpusim.chip("b200")
    free_at_start = b200.runtime_capacity_bytes - engines()["sglang"].runtime_bytes(8)
    assert abs(fewer - 2 * 2**30 / b200.capacity_bytes * free_at_start / (61 * 576)) <= 2


@settings(max_examples=20, deadline=None)
@given(gib=st.floats(20, 300), budget=st.sampled_from([2048, 8192, 16384]),
       graph=st.integers(8, 512), ranks=st.sampled_from([1, 4, 8]))
def test_speculation_never_leaves_sglang_more_memory_for_the_target(gib, budget, graph, ranks):
    sglang = engines()["sglang"]
    plain = sglang.static_fraction(gib * 2**30, budget, graph, ranks)
    assert sglang.static_fraction(gib * 2**30, budget, graph, ranks, True) <= plain


def test_a_draft_kept_unquantized_is_priced_and_held_in_its_own_format():
    """nvidia's NVFP4 DeepSeek-R1 leaves its MTP layer bf16 (--draft-precision bf16): the
    layer's weights take 2 bytes each, over FP8 blocks' ~1.008, and its matmuls run bf16;
    its KV stays in the target's format."""
    cfg, req = _dsr1_fp8()
    fp8, kv8 = draft_memory("mtp", cfg, Plan(tp=8, ep=8), req)  # type: ignore[arg-type]
    own = draft_formats(req, "bf16")
    assert own.act == own.weight == DType.BF16 and own.kv == DType.FP8
    bf16, kv16 = draft_memory("mtp", cfg, Plan(tp=8, ep=8), own)  # type: ignore[arg-type]
    assert kv16 == kv8 and 1.9 < bf16 / fp8 < 2.0
    assert draft_formats(req, None) is req


@pytest.mark.parametrize(("options", "says"), [
    ({"draft_precision": "bf16"}, "--speculative"),
    ({"speculative": "mtp", "acceptance": 0.8, "draft_precision": "bf17"}, "bf16"),
])  # fmt: skip
def test_a_draft_precision_is_refused_without_a_draft_or_misspelt(options, says):
    with pytest.raises(UserError, match=says):
        xpusim.serve("deepseek-r1-0528", "b200", chips=8, tp=8, concurrency=2, requests=2,
                     **options)  # fmt: skip


def test_the_nvfp4_checkpoints_mtp_runs_draft_in_bf16_and_no_other_does():
    from xpusim.validation.points import load_points

    points = [p for p in load_points() if (p.get("speculative") or {}).get("kind") == "mtp"]
    for p in points:
        kept = p.get("speculative").get("precision")
        assert kept == ("bf16" if "FP4-V2" in p.notes else None), p.id
    assert any(p.get("speculative").get("precision") for p in points)
