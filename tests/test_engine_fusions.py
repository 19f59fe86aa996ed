"""Engine kernels that change the graph (workloads/transformer.py GRAPH_KERNELS): MLA's
q_a and kv_a projections as one GEMM (FUSED_QKV_A), and an MoE layer's shared experts on a
second stream beside its routed experts (SHARED_EXPERTS_STREAM, cost/aux_stream.py). The
graph does the same work in fewer kernels or two streams, so a decode step costs less,
never less than its roofline nor more than in series."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xpusim
from xpusim.compiler.memory_plan import Footprint, place
from xpusim.compiler.partition import Plan, partition
from xpusim.cost.aux_stream import overlapped_streams
from xpusim.cost.roofline import OpCosts
from xpusim.hardware.system import load_system
from xpusim.ir.dtypes import DType
from xpusim.ir.op import OpKind
from xpusim.ir.tensor import Role
from xpusim.scenarios.llm.engine import cost_phases
from xpusim.scenarios.llm.graphs import shape_graphs
from xpusim.scenarios.llm.request import Request
from xpusim.workloads.transformer import (
    ALLREDUCE_NORM,
    FUSED_MOE,
    FUSED_MOE_ACTIVATION,
    FUSED_QKV_A,
    SHARED_EXPERTS_STREAM,
    StepShape,
    build_step,
)

R1 = xpusim.model("deepseek-r1-0528")


def _decode(kernels: tuple[str, ...]):
    return build_step(R1, StepShape(4, 1, 1024, decode=True), DType.FP8, kernels=kernels)


def _weight_bytes(graph) -> float:
    return sum(op.bytes_by_role().get(Role.WEIGHT, 0.0) * graph.copies(op) for op in graph.ops)


def test_fused_qkv_a_is_one_matmul_of_both_projections():
    """Every MLA layer's q_a_proj (1,536 wide) and kv_a_proj (576) become one qkv_a_proj of
    2,112 outputs, as SGLang's fused_qkv_a_proj_with_mqa; FLOPs and weights unchanged."""
    plain, fused = _decode(()), _decode((FUSED_QKV_A,))
    names = [op.name for op in fused.ops]
    assert not any(n.endswith((".q_a_proj", ".kv_a_proj")) for n in names)
    both = [op for op in fused.ops if op.name.endswith(".qkv_a_proj")]
    assert len(both) == len([op for op in plain.ops if op.name.endswith(".q_a_proj")]) > 0
    assert all(op.kind is OpKind.MATMUL and op.outputs[0].shape[-1] == 2112 for op in both)
    matmuls = [op for op in plain.ops if op.kind is OpKind.MATMUL]
    assert len([op for op in fused.ops if op.kind is OpKind.MATMUL]) == len(matmuls) - len(both)
    assert fused.matrix_flops == pytest.approx(plain.matrix_flops, rel=1e-12)
    assert _weight_bytes(fused) == pytest.approx(_weight_bytes(plain), rel=1e-12)


def test_a_model_without_a_query_latent_is_built_as_before():
    """DeepSeek-V2-Lite has no q_lora_rank (q_proj straight from the hidden state): nothing
    to fuse."""
    lite = xpusim.model("deepseek-v2-lite")
    step = StepShape(1, 1, 64, decode=True)
    plain = build_step(lite, step, DType.BF16)
    fused = build_step(lite, step, DType.BF16, kernels=(FUSED_QKV_A,))
    assert [op.name for op in plain.ops] == [op.name for op in fused.ops]


def _decode_cost(kernels: tuple[str, ...], streams: np.ndarray | None = None):
    """DeepSeek-R1's decode step of one sequence on 8 B200s (TP 8, FP8)."""
    request = Request(1, 1024, 2, DType.FP8, DType.FP8, kernels=kernels)
    graphs = shape_graphs(R1, [request], 8, 1)
    system = load_system("dgx-b200")
    placement = place(system.chip, Footprint(0.0, 0.0, 0.0))
    (decode,) = cost_phases(graphs, np.array([0]), [system], [placement], Plan(tp=8),
                            np.array([1]), phases=(1,), streams=streams)  # fmt: skip
    return decode


def test_fusing_saves_a_kernels_fixed_time_and_keeps_the_roofline():
    """The fused step is faster by about one GEMM's fixed time a layer, and every op still
    costs at least its FLOPs at peak and its bytes at the bandwidth."""
    plain, fused = _decode_cost(()), _decode_cost((FUSED_QKV_A,))
    saved = plain.totals("time_s")[0, 0] - fused.totals("time_s")[0, 0]
    layers = R1.num_layers
    assert 2e-6 * layers < saved < 20e-6 * layers
    costs = fused.costs
    floor = np.maximum(costs.compute_s, costs.memory_s)
    assert np.all(costs.time_s >= floor * (1 - 1e-12))


def test_each_moe_layer_runs_its_shared_experts_beside_its_routed_ones():
    """With the kernel, each of R1's 58 MoE layers pairs its router, top-k and routed
    experts (main) with its shared experts (aux); its all-reduce and combine wait for both.
    Without it, no pairs."""
    table = _decode_cost((SHARED_EXPERTS_STREAM,)).table
    (group,) = table.streams
    main, aux, layers = group
    assert layers == R1.num_layers - R1.dense_layers
    names = table.labels
    assert {names[r].split(".", 2)[-1] for r in aux} == {"shared.gate_up", "shared.silu_mul",
                                                          "shared.down"}  # fmt: skip
    assert {names[r].split(".", 2)[-1] for r in main} == {
        "router", "router_topk", "experts.gate_up", "experts.silu_mul", "experts.down"}
    assert _decode_cost(()).table.streams == ()


def test_a_decode_step_hides_the_shared_experts_behind_the_routed_ones():
    """At one sequence the shared experts' small GEMMs are nearly all fixed time: the step
    saves nearly all of them (what the TDP's time for their energy leaves), and no more."""
    plain, two = _decode_cost(()), _decode_cost((SHARED_EXPERTS_STREAM,))
    (group,) = two.table.streams
    _, aux, layers = group
    aux_s = plain.costs.time_s[0, 0][list(aux)].sum() * layers
    saved = plain.totals("time_s")[0, 0] - two.totals("time_s")[0, 0]
    assert 0.9 * aux_s < saved <= aux_s * (1 + 1e-12)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1e-3), st.floats(0, 1.0), st.floats(0, 1.0)),
                min_size=2, max_size=6),
       st.integers(1, 3), st.integers(1, 100))  # fmt: skip
def test_two_paths_cost_the_longer_and_their_joint_roofline_at_least(ops, split, n):
    """Physics: rows of time t, compute_s and memory_s fractions of t; the first `split`
    on the main stream, the rest aux, n instances. After: the layer costs max(main, aux,
    max(Σ compute_s, Σ memory_s)), between the longer path and the two in series."""
    split = min(split, len(ops) - 1)
    time = np.array([t for t, _, _ in ops])
    compute, memory = time * [c for _, c, _ in ops], time * [m for _, _, m in ops]
    count = np.full(len(ops), float(n))
    table = SimpleNamespace(count=count, streams=(
        (tuple(range(split)), tuple(range(split, len(ops))), float(n)),))
    zero = np.zeros_like(time)
    costs = OpCosts(compute, memory, zero, zero, time.copy(), time * 700.0,
                    np.zeros((1, len(time))), zero)
    after = overlapped_streams(table, costs, 700.0)
    main_s, aux_s = time[:split].sum(), time[split:].sum()
    whole = max(compute.sum(), memory.sum())
    np.testing.assert_allclose(after.time_s.sum(), max(main_s, aux_s, whole), atol=1e-15)
    assert max(main_s, aux_s) - 1e-15 <= after.time_s.sum() <= main_s + aux_s + 1e-15
    np.testing.assert_array_equal(after.time_s[:split], time[:split])  # the main path whole
    assert (after.energy_j >= -1e-12).all()


def test_sglang_runs_its_shared_experts_on_a_second_stream_on_nvidia_alone():
    """SGLang makes its second stream on CUDA only: an MI300X run keeps the shared experts
    in line, a B200 run overlaps them; the other kernels are the same on both, but its
    NVFP4 linear (NVIDIA's format), its block-FP8 linear (DeepGEMM, CUDA's), its BF16
    absorbed MLA products (a dequantization on CUDA alone: WIDE_MLA_ABSORB) and its
    flashinfer_trtllm MoE and MXFP4 x BF16 MoE (FlashInfer's trtllm-gen kernels, CUDA's),
    its Marlin INT4 MoE (timed on Hopper alone) and, on no chip named, the MXFP8 input to
    MXFP4 experts it runs on Blackwell alone."""
    from xpusim.serving.engines import engine

    sglang = engine("sglang")
    assert SHARED_EXPERTS_STREAM in sglang.kernels_on("NVIDIA")
    assert SHARED_EXPERTS_STREAM not in sglang.kernels_on("AMD")
    assert set(sglang.kernels_on("AMD", R1)) == set(sglang.kernels) - {
        SHARED_EXPERTS_STREAM, "sglang-nvfp4-gemm", "sglang-w8a8-block-fp8", "wide-mla-absorb",
        "sglang-flashinfer-trtllm-moe", "flashinfer-mxfp4-bf16-moe", "mxfp8-moe-input",
        "sglang-marlin-moe"}
    assert engine("vllm").kernels_on("AMD") == ()


def test_a_step_the_engine_runs_in_line_costs_both_paths_in_series():
    """A configuration the engine does not run on two streams (`streams` False: an SGLang
    step over 1,024 tokens, a TensorRT-LLM step with a prompt chunk) costs what the step
    without the kernel costs; one it does, less."""
    plain = _decode_cost(()).totals("time_s")[0, 0]
    serial = _decode_cost((SHARED_EXPERTS_STREAM,), np.array([False])).totals("time_s")[0, 0]
    both = _decode_cost((SHARED_EXPERTS_STREAM,), np.array([True])).totals("time_s")[0, 0]
    assert serial == pytest.approx(plain, rel=1e-12)
    assert both < plain


def test_the_engines_run_the_second_stream_at_their_own_steps():
    """SGLang (PR #9405): graphed decode steps at any size, steps costed from the prefill
    graph at most DUAL_STREAM_TOKEN_THRESHOLD (1,024) tokens; TensorRT-LLM: CUDA-graphed
    steps, its decode-only ones, at any batch; other profiles list no second stream and
    gate nothing."""
    from xpusim.serving.engines import engine

    assert engine("sglang").aux_stream_tokens() == (1024, None)
    assert engine("trtllm").aux_stream_tokens() == (0, None)
    assert engine("vllm").aux_stream_tokens() == (None, None)


def test_a_serving_step_over_the_threshold_runs_its_shared_experts_in_line():
    """SGLang's table of DeepSeek-R1's token steps on 8 B200s: at 1,024 tokens the shared
    experts hide behind the routed ones; at 1,025 they run in series, as without the
    kernel; TensorRT-LLM's gate runs no prefill-graph step on two streams."""
    from dataclasses import replace

    from xpusim.scenarios.llm.inference import chosen_plan
    from xpusim.serving.step_cost import step_cost

    setup, cand = chosen_plan(R1, xpusim.target("b200"),
                              {"chips": 8, "tp": 8, "batch": 1, "prompt": 64, "gen": 2,
                               "precision": "fp8"})  # fmt: skip
    plan = replace(cand.plan, dp=1)

    def rows(kernels, aux):
        req = replace(setup.req, kernels=kernels)
        cost = step_cost(R1, cand.setup.system, plan, req, cand.placement, 1025, 1, 64,
                         aux_tokens=aux)
        return cost.token_stage_s[1023][0], cost.token_stage_s[1024][0]

    plain = rows((), (None, None))
    sglang = rows((SHARED_EXPERTS_STREAM,), (1024, 1024))
    assert sglang[0] < plain[0] and sglang[1] == pytest.approx(plain[1], rel=1e-12)
    trtllm = rows((SHARED_EXPERTS_STREAM,), (0, None))
    assert trtllm == pytest.approx(plain, rel=1e-12)


def _rank_norms(plan: Plan, act: DType = DType.FP8) -> set[str]:
    """The norms one rank of `plan` runs in R1's decode step under ALLREDUCE_NORM."""
    graph = build_step(R1, StepShape(4, 1, 1024, decode=True), act, kernels=(ALLREDUCE_NORM,))
    return {op.name for op in partition(graph, plan).ops if op.kind is OpKind.NORM}


def test_the_all_reduce_runs_the_norms_after_it_where_tp_splits_attention():
    """TensorRT-LLM's DeepseekV3DecoderLayer runs the post-attention norm of an MoE layer
    and every next layer's input norm inside the all-reduce before it (RESIDUAL_RMS_NORM):
    at TP 8 those norms are gone; layer 0's input norm (after the embedding, no residual)
    and MLA's own latent norms stay, and a dense layer's post-attention norm stays with FP8
    weights (fused for NVFP4 alone). At TP 1 (no all-reduce) and under attention data
    parallelism (enable_fusion off) every norm stays."""
    every = _rank_norms(Plan(tp=1))
    fused = _rank_norms(Plan(tp=8))
    gone = every - fused
    moe = [f"layers.{i}" for i in range(R1.num_layers) if R1.is_expert_layer(i)]
    assert gone == ({f"{p}.norm_mlp" for p in moe} | {"final_norm"}
                    | {f"layers.{i}.norm_attn" for i in range(1, R1.num_layers)})  # fmt: skip
    assert {"layers.0.norm_attn", "layers.0.norm_mlp", "layers.5.q_a_norm"} <= fused
    assert "layers.0.norm_mlp" not in _rank_norms(Plan(tp=8), DType.NVFP4)
    assert _rank_norms(Plan(tp=8, ep=8, dp_attention=True)) == every


def test_a_dense_models_norms_are_fused_in_any_format():
    """Llama's decoder layers fuse the post-attention norm too (no NVFP4 condition): at TP
    2 only layer 0's input norm is left."""
    llama = xpusim.model("llama-3-8b")
    graph = build_step(llama, StepShape(4, 1, 1024, decode=True), DType.FP8,
                       kernels=(ALLREDUCE_NORM,))  # fmt: skip
    norms = {op.name for op in partition(graph, Plan(tp=2)).ops if op.kind is OpKind.NORM}
    assert norms == {"layers.0.norm_attn"}


def test_the_fused_moe_runs_routing_and_activation_inside_its_kernels():
    """Under FUSED_MOE no router_topk or experts.silu_mul op is built (the moe tables time
    TensorRT-LLM's fused-MoE forward with both inside); the expert GEMMs' FLOPs and bytes
    are unchanged."""
    plain, fused = _decode(()), _decode((FUSED_MOE,))
    names = {op.name.split(".", 2)[-1] for op in fused.ops}
    assert not names & {"router_topk", "experts.silu_mul"}
    assert {"router_topk", "experts.silu_mul"} <= {op.name.split(".", 2)[-1] for op in plain.ops}

    def experts(graph) -> list[tuple[float, dict]]:
        return [(op.matrix_flops, op.bytes_by_role()) for op in graph.ops
                if op.name.endswith((".experts.gate_up", ".experts.down"))]  # fmt: skip

    assert experts(fused) == experts(plain)


def test_the_fused_moe_finalizes_a_layer_without_shared_experts_inside_its_kernels():
    """Its forward ends with the finalize, the top-k weighted sum back to each token: a layer
    without shared experts (gpt-oss) builds no combine op under FUSED_MOE, one with them
    (DeepSeek-R1, whose shared expert's output is added outside) keeps it, as does a run
    without the kernel."""
    gpt_oss = xpusim.model("gpt-oss-120b")

    def combines(cfg, kernels: tuple[str, ...]) -> int:
        graph = build_step(cfg, StepShape(4, 1, 1024, decode=True), DType.BF16,
                           kernels=kernels)  # fmt: skip
        return sum(op.name.endswith(".combine") for op in graph.ops)

    assert combines(gpt_oss, (FUSED_MOE,)) == 0 < combines(gpt_oss, ())
    assert combines(R1, (FUSED_MOE,)) == combines(R1, ()) > 0


def test_vllms_fused_experts_hold_the_activation_and_the_sum_but_not_the_routing():
    """vLLM's FusedMoE routes (select_experts) before fused_experts, which runs silu_and_mul
    and moe_sum inside: under FUSED_MOE_ACTIVATION no experts.silu_mul op and no combine of a
    layer without shared experts, the router_topk kept; the vLLM V1 profiles list it on
    NVIDIA chips, whose tables timed fused_experts so."""
    from xpusim.serving.engines import engines

    gpt_oss = xpusim.model("gpt-oss-120b")
    graph = build_step(gpt_oss, StepShape(4, 1, 1024, decode=True), DType.BF16,
                       kernels=(FUSED_MOE_ACTIVATION,))  # fmt: skip
    names = {op.name.split(".", 2)[-1] for op in graph.ops}
    assert "router_topk" in names and not names & {"experts.silu_mul", "combine"}
    for name in ("vllm", "vllm-0.11"):
        assert FUSED_MOE_ACTIVATION in engines()[name].kernels_on("NVIDIA")
        assert FUSED_MOE_ACTIVATION not in engines()[name].kernels_on("AMD")


def test_the_trtllm_profile_lists_both_fusions():
    from xpusim.serving.engines import engines

    kernels = engines()["trtllm"].kernels
    assert ALLREDUCE_NORM in kernels and FUSED_MOE in kernels
