"""SGLang's fused shared expert (workloads/transformer.py FUSED_SHARED_EXPERT): DeepSeek-R1's
shared expert run by the routed MoE kernel as its 257th expert, every token's ninth, where
SGLang's determine_num_fused_shared_experts allows it (serving/engines.toml
fused_shared_expert_*). The layer does the same FLOPs in one kernel: no shared-expert
linears, top-k + 1 pairs a token priced by the same moe kernel table."""

from __future__ import annotations

from dataclasses import replace

import pytest

import xpusim
from xpusim.compiler.partition import Plan, partition
from xpusim.cost.op_table import kernel_shapes
from xpusim.ir.dtypes import DType
from xpusim.ir.op import OpKind
from xpusim.ir.tensor import Role
from xpusim.serving.engines import engine, engines
from xpusim.workloads.transformer import (
    FUSED_SHARED_EXPERT,
    SHARED_EXPERTS_STREAM,
    StepShape,
    build_step,
)

R1 = xpusim.model("deepseek-r1-0528")


def _decode(kernels: tuple[str, ...], batch: int = 4):
    return build_step(R1, StepShape(batch, 1, 1024, decode=True), DType.FP8, kernels=kernels)


def _weight_bytes(graph) -> float:
    return sum(op.bytes_by_role().get(Role.WEIGHT, 0.0) * graph.copies(op) for op in graph.ops)


def test_the_shared_expert_is_one_more_expert_of_the_routed_kernel():
    """No shared-expert op is built; each routed expert GEMM runs 9 pairs a token (top 8 +
    the shared one) over 257 experts, as SGLang's FusedMoE(top_k = 8 + 1); the step's
    matrix FLOPs are unchanged (the shared expert's work moves into the routed GEMMs)."""
    plain, fused = _decode(()), _decode((FUSED_SHARED_EXPERT,))
    assert any(".shared." in op.name for op in plain.ops)
    assert not any(".shared." in op.name for op in fused.ops)
    experts = [op for op in fused.ops if op.name.endswith("experts.gate_up")]
    assert experts and all(op.attr("shared_experts") == 1 for op in experts)
    assert experts[0].inputs[0].shape[1] == 4 * 9
    assert fused.matrix_flops == pytest.approx(plain.matrix_flops, rel=1e-9)
    rank = next(op for op in partition(fused, Plan(tp=8)).ops if op.name == experts[0].name)
    (shape,) = [s for kind, s in kernel_shapes(rank) if kind == "moe"]
    assert shape[2:4] == (9.0, 257.0)  # the table's DeepSeek rows (top 8 of 256) within SNAP


def test_the_shared_experts_weights_are_read_once_either_way():
    """At 4 sequences the shared expert's weights are read once, fused (one more expert
    always touched) or not (its own linears): the step's weight bytes agree."""
    plain, fused = _decode(()), _decode((FUSED_SHARED_EXPERT,))
    assert _weight_bytes(fused) == pytest.approx(_weight_bytes(plain), rel=1e-9)


def test_the_fused_layer_has_no_second_stream():
    """Fused, there is no shared path to run beside the routed one: the second stream's
    kernel marks nothing."""
    graph = _decode((FUSED_SHARED_EXPERT, SHARED_EXPERTS_STREAM))
    assert not any(op.attr("stream") for op in graph.ops)


def test_r1_fp8_on_8_h200_under_sglang_fuses_and_its_step_changes():
    """DeepSeek-R1 FP8 on 8 H200s at TP 8 (InferenceX's SGLang launch): the profile fuses
    the shared expert; the decode step of 64 sequences differs from the unfused form's
    (the routed kernel's 9 pairs a token against two linears on the second stream)."""
    from xpusim.scenarios.llm.inference import chosen_plan
    from xpusim.serving.step_cost import step_cost

    sglang = engine("sglang")
    own = sglang.kernels_on("NVIDIA", R1, 1, "")
    assert FUSED_SHARED_EXPERT in own and SHARED_EXPERTS_STREAM in own
    setup, cand = chosen_plan(R1, xpusim.target("h200-sxm"),
                              {"chips": 8, "tp": 8, "batch": 1, "prompt": 64, "gen": 2,
                               "precision": "fp8"})  # fmt: skip
    plan = replace(cand.plan, dp=1)

    def step(kernels: tuple[str, ...]) -> float:
        req = replace(setup.req, kernels=kernels)
        cost = step_cost(R1, cand.setup.system, plan, req, cand.placement, 64, 64, 64,
                         aux_tokens=sglang.aux_stream_tokens())  # fmt: skip
        return float(cost.step_stage_s[63][0])

    unfused = tuple(k for k in own if k != FUSED_SHARED_EXPERT)
    assert step(own) != pytest.approx(step(unfused), rel=1e-4)


@pytest.mark.parametrize(("vendor", "ep", "backend", "model", "fuses"), [
    ("NVIDIA", 1, "", "deepseek-r1-0528", True),
    ("AMD", 1, "", "deepseek-r1-0528", True),  # ROCm gfx942+
    ("NVIDIA", 8, "", "deepseek-r1-0528", False),  # expert parallelism on CUDA
    ("AMD", 8, "", "deepseek-r1-0528", False),  # ROCm under EP: not modelled
    ("NVIDIA", 1, "TRTLLM", "deepseek-r1-0528", False),  # --moe-runner-backend flashinfer_trtllm
    ("Google", 1, "", "deepseek-r1-0528", False),
    ("NVIDIA", 1, "", "kimi-k2-instruct", False),  # 384 routed experts
    ("NVIDIA", 1, "", "glm-5", True),  # GlmMoeDsaForCausalLM: its own hook
    ("NVIDIA", 1, "", "deepseek-v3.2", False),  # DeepseekV32ForCausalLM: not V3's architecture
    ("NVIDIA", 1, "", "deepseek-v4-flash", False),  # DeepSeek-V4: not V3's architecture
    ("NVIDIA", 1, "", "deepseek-v2-lite", False),  # two shared experts' width
    ("NVIDIA", 1, "", "qwen2-57b-a14b", False),  # a gated shared expert
    ("NVIDIA", 1, "", "qwen3-30b-a3b", False),  # none
])  # fmt: skip
def test_sglang_fuses_where_its_conditions_hold(vendor, ep, backend, model, fuses):
    sglang = engine("sglang")
    assert sglang.fuses_shared_expert(xpusim.model(model), vendor, ep, backend) is fuses
    own = sglang.kernels_on(vendor, xpusim.model(model), ep, backend)
    assert (FUSED_SHARED_EXPERT in own) is fuses


def test_other_engines_never_fuse():
    """Only SGLang 0.5's profiles list the kernel (sglang, and sglang-0.5.6 its base's):
    vLLM, TensorRT-LLM, SGLang 0.4 (before the fusion) and the others keep DeepSeek's
    shared expert as its own linears."""
    for name, profile in engines().items():
        fused = profile.fuses_shared_expert(R1, "NVIDIA", 1, "")
        assert fused is (name in ("sglang", "sglang-0.5.6")), name
        assert profile.kernels_on("NVIDIA", R1, 1, "") == tuple(
            k for k in profile.kernels_on("NVIDIA") if k != FUSED_SHARED_EXPERT) \
            or name in ("sglang", "sglang-0.5.6")  # fmt: skip


def test_the_routed_kernel_counts_the_shared_expert_as_always_touched():
    """One sequence: the rank reads its 8 routed experts and the shared one, 9 experts'
    weights; the ops stay matmuls."""
    graph = partition(_decode((FUSED_SHARED_EXPERT,), batch=1), Plan(tp=8))
    gate_up = next(op for op in graph.ops if op.name.endswith("experts.gate_up"))
    assert gate_up.kind is OpKind.MATMUL and gate_up.inputs[1].shape[0] == pytest.approx(9)


def test_serve_says_where_it_fuses():
    """serve notes the fusion on 8 H200s under sglang; not under flashinfer_trtllm's MoE
    (InferenceX's B200 launches: moe_backend TRTLLM), nor under vLLM."""
    kw = dict(chips=8, tp=8, precision="fp8", concurrency=1, requests=2, prompt=64, gen=4)

    def noted(chip: str, **more) -> bool:
        run = xpusim.serve("deepseek-r1-0528", chip, **kw, **more)
        return any("one more expert of the routed MoE kernel: top 8 + 1 of 257" in n
                   for n in run.notes)  # fmt: skip

    assert noted("h200-sxm", engine="sglang")
    assert not noted("b200", engine="sglang", moe_backend="TRTLLM")
    assert not noted("h200-sxm", engine="vllm")
