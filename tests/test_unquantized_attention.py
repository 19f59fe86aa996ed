"""A checkpoint's unquantized attention projections stay 16-bit in a quantized run
(workloads/checkpoint.py unquantized_module; workloads/transformer.py
unquantized_matmul): NVIDIA's DeepSeek-R1-0528-FP4-V2 keeps MLA's q_a, q_b, kv_a and kv_b
projections BF16 and quantizes o_proj, as Model Optimizer's DeepSeek recipe exports it; and
an MoE router stays 16-bit in any quantized run."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpusim.errors import UserError
from xpusim.ir.dtypes import DType, parse_weight_format
from xpusim.ir.op import OpKind
from xpusim.ir.tensor import Role
from xpusim.workloads.checkpoint import stated_checkpoint, unquantized_module
from xpusim.workloads.transformer import (
    FP8_MLA_ABSORB,
    FUSED_QKV_A,
    MXFP4_MLA_ABSORB,
    WIDE_MLA_ABSORB,
    StepShape,
    build_step,
)
from xpusim.workloads.zoo import zoo_entry

INT4 = ("lm_head", "re:.*self_attn.*", "re:.*shared_experts.*",
        r"re:.*mlp\.(gate|up|gate_up|down)_proj.*")  # Kimi-K2-Thinking's and K2.5's ignore
V2 = ("model.layers.*.self_attn.q_a_proj", "model.layers.*.self_attn.kv_a_proj_with_mqa",
      "model.layers.*.self_attn.q_b_proj", "model.layers.*.self_attn.kv_b_proj")  # fmt: skip


@pytest.mark.parametrize(("excluded", "layer", "op", "kept"), [
    (V2, 5, "q_a_proj", True),
    (V2, 5, "qkv_a_proj", True),  # both fused parts excluded
    (V2[:1], 5, "qkv_a_proj", False),  # only one of them: the fused GEMM is quantized
    (V2, 5, "q_absorb", True),  # kv_b_proj's slice
    (V2, 5, "o_proj", False),
    (("model.layers.3.self_attn*",), 3, "o_proj", True),  # modelopt's per-layer glob
    (("model.layers.3.self_attn*",), 4, "o_proj", False),
    (("model.layers.*.self_attn",), 4, "q_proj", True),  # a module covers its own
    (("lm_head",), 4, "q_a_proj", False),
    (V2, 5, "experts.gate_up", False),  # not an attention matmul
    (INT4, 5, "o_proj", True),  # compressed-tensors' regular expressions
    (INT4, 0, "gate_up", True),  # the dense first layer's MLP
    (INT4, 5, "experts.gate_up", False),  # the routed experts stay INT4
    (("re:self_attn.*",), 5, "o_proj", False),  # re.match: from the name's start
    (("model.layers.0.linear_attn*",), 0, "in_proj_qkvz", True),  # a Gated DeltaNet layer
    (("*linear_attn*",), 4, "out_proj", True),
    (("*self_attn*",), 4, "in_proj_ba", False),
    (("model.language_model.layers.2.linear_attn*",), 2, "in_proj_qkvz", True),  # Qwen3.5
    (("language_model.model.layers.3.self_attn*",), 3, "o_proj", True),  # Kimi-K2.5 NVFP4
    (("model.language_model.layers.2.linear_attn.in_proj_a",), 2, "in_proj_ba", False),
    (INT4, 5, "shared.gate_up", True),  # DeepSeek's shared_experts
    (("*.mlp.shared_expert.*",), 5, "shared.down", True),  # Qwen's one shared_expert
    (("model.layers.5.mlp.shared_expert_gate",), 5, "shared.gate", True),
    (("model.layers.5.mlp.shared_expert.gate_proj",), 5, "shared.gate_up", False),  # half
])  # fmt: skip
def test_which_attention_matmuls_a_checkpoint_keeps(excluded, layer, op, kept):
    assert unquantized_module(excluded, layer, op) is kept


def _matmuls(model: str, precision: DType, kernels: tuple[str, ...] = ()) -> dict:
    cfg = zoo_entry(model).config
    graph = build_step(cfg, StepShape(2, 1, 64, decode=True), precision, kv=DType.FP8,
                       compact=True, kernels=kernels)  # fmt: skip
    return {op.name.split(".", 2)[-1]: op for op in graph.ops
            if op.kind is OpKind.MATMUL and op.name.startswith("layers.3.")}


def _weight(op) -> str:
    return next(t.dtype.value for t in op.inputs if t.role is Role.WEIGHT)


@pytest.mark.parametrize("kernels", [(), (FUSED_QKV_A,)])
def test_fp4_v2_prices_its_bf16_projections_as_bf16(kernels):
    ops = _matmuls("deepseek-r1-0528-fp4-v2", DType.NVFP4, kernels)
    kept = ["q_b_proj", "q_absorb", "v_absorb",
            *(["qkv_a_proj"] if kernels else ["q_a_proj", "kv_a_proj"])]  # fmt: skip
    for name in kept:
        assert (_weight(ops[name]), ops[name].attr("compute")) == ("bf16", "bf16"), name
    for name in ("o_proj", "shared.gate_up", "experts.gate_up"):
        assert (_weight(ops[name]), ops[name].attr("compute")) == ("nvfp4", "nvfp4"), name


def test_a_repo_without_exclusions_quantizes_all_but_its_router():
    """Engines never quantize an MoE router (its weights stay BF16 in the checkpoints):
    every other matmul of a repo that excludes nothing takes the run's format, and a
    16-bit run is 16-bit throughout."""
    for precision in (DType.NVFP4, DType.FP8):
        same = _matmuls("deepseek-r1-0528", precision)
        router = same.pop("router")
        assert (_weight(router), router.attr("compute")) == ("bf16", "bf16")
        assert {_weight(op) for op in same.values()} == {precision.value}
    wide = _matmuls("deepseek-r1-0528-fp4-v2", DType.BF16)
    assert {_weight(op) for op in wide.values()} == {"bf16"}


def test_gpt_oss_keeps_its_attention_bf16():
    """gpt-oss's MXFP4 repo leaves `model.layers.*.self_attn` unconverted
    (modules_to_not_convert, a module for all of its own): its fused qkv and o_proj stay
    BF16 beside MXFP4 experts."""
    cfg = zoo_entry("gpt-oss-20b").config
    graph = build_step(cfg, StepShape(2, 1, 64, decode=True), DType.BF16,
                       parse_weight_format("mxfp4"), compact=True)  # fmt: skip
    ops = {op.name.split(".", 2)[-1]: op for op in graph.ops
           if op.kind is OpKind.MATMUL and op.name.startswith("layers.1.")}
    assert _weight(ops["qkv"]) == _weight(ops["o_proj"]) == "bf16"
    assert _weight(ops["experts.gate_up"]) == "mxfp4"


GOOD = {"method": "modelopt", "weights": "nvfp4", "compute": "nvfp4", "kv": None}


@pytest.mark.parametrize(("stated", "said"), [
    ({**GOOD, "excluded": ["model.layers.*.self_attn.q_zz"]}, "'model.layers.*.self_attn.q_zz'"),
    ({**GOOD, "excluded": "model.layers.*.self_attn.q_a_proj"}, "a list of module names"),
    ({**GOOD, "excluded": [1]}, "a list of module names"),
    ({**GOOD, "unquantized": ["x"]}, "no field 'unquantized'"),
    ({"method": "modelopt", "weights": "nvfp4"}, "method, weights, compute, kv"),
])  # fmt: skip
def test_a_zoo_file_stating_a_bad_checkpoint_is_refused_by_name(stated, said):
    """A misspelt excluded attention module would leave its projection quantized without a
    word, and a string `excluded` would be read letter by letter (its '*' matching every
    module): each is one UserError naming the field or the module."""
    with pytest.raises(UserError, match=re.escape(said)):
        stated_checkpoint(stated, "zoo/x.json")


def test_a_stated_checkpoint_reads_its_exclusions_as_a_tuple():
    stated = {**GOOD, "excluded": ["lm_head", "model.layers.*.self_attn.kv_b_proj",
                                   "model.layers.3.self_attn*", "model.layers.61*"]}  # fmt: skip
    assert stated_checkpoint(stated, "zoo/x.json").excluded == tuple(stated["excluded"])


@pytest.mark.parametrize("dp_attention", [False, True])
def test_the_kept_attention_takes_its_16_bit_bytes_in_memory_too(dp_attention):
    """FP4-V2's q_a, q_b, kv_a and kv_b projections, BF16 in the graph, are stored BF16 in
    the weights' memory too (compiler/partition.py _wide_params): over the same model without
    the exclusions, one chip holds its share of them (the latents' whole, the heads' split by
    tensor parallelism; all of them under attention DP) at 2 bytes instead of NVFP4's. Before,
    both checkpoints held the same bytes (review r4)."""
    from xpusim.compiler.partition import Plan, weight_bytes
    from xpusim.ir.dtypes import weight_parts

    plain, kept = zoo_entry("deepseek-r1-0528").config, zoo_entry("deepseek-r1-0528-fp4-v2").config
    nvfp4 = parse_weight_format("nvfp4")
    plan = Plan(tp=8, ep=8, dp_attention=dp_attention)
    grown = weight_bytes(kept, plan, nvfp4, DType.BF16)[0] - \
        weight_bytes(plain, plan, nvfp4, DType.BF16)[0]
    c = kept
    h, heads, d, v, rope = c.hidden_size, c.num_heads, c.head_dim, c.v_head_dim, \
        c.qk_rope_head_dim
    share = 1 if dp_attention else 1 / 8
    per_layer = (h * c.q_lora_rank + h * (c.kv_lora_rank + rope)
                 + share * heads * (c.q_lora_rank * d + c.kv_lora_rank * (d - rope + v)))
    width = 2 - weight_parts(nvfp4, DType.BF16).body.itemsize
    assert grown == pytest.approx(c.num_layers * per_layer * width, rel=1e-9)


def test_an_int8_run_quantizes_its_router_too_on_a_chip_without_bf16():
    """int8 stores every weight (no KEPT_WIDE checkpoint behind it), so an MoE router stays
    int8: on Groq's LPU, which has no BF16 peak, a BF16 router was refused (a hypothesis draw
    of tests/test_result_table.py found it)."""
    import xpusim

    assert xpusim.simulate("mixtral-8x7b", "groq-lpu", chips=1024, precision="int8").fits


def test_sglang_on_cuda_runs_a_block_fp8_checkpoints_absorbed_products_in_bf16():
    """SGLang dequantizes a 128 x 128 block-FP8 kv_b_proj to BF16 at load on CUDA and runs
    q_absorb and v_absorb as BF16 torch.bmm (WIDE_MLA_ABSORB): the FP8 checkpoint's absorbed
    products then match the FP4-V2 checkpoint's (kv_b_proj excluded, BF16), where before they
    ran FP8; its other linears stay block-FP8, and without the kernel (TensorRT-LLM, ROCm) or
    over a per-tensor FP8 checkpoint the products keep the run's format."""
    cfg = zoo_entry("deepseek-r1-0528").config

    def matmuls(weight: str, kernels: tuple[str, ...]) -> dict:
        graph = build_step(cfg, StepShape(2, 1, 64, decode=True), DType.FP8,
                           parse_weight_format(weight), kv=DType.FP8, compact=True,
                           kernels=kernels)  # fmt: skip
        return {op.name.split(".", 2)[-1]: op for op in graph.ops
                if op.kind is OpKind.MATMUL and op.name.startswith("layers.3.")}

    def formats(op) -> tuple[str, str]:
        return _weight(op), op.attr("compute")

    wide = matmuls("fp8-block", (WIDE_MLA_ABSORB,))
    fp4_v2 = _matmuls("deepseek-r1-0528-fp4-v2", DType.NVFP4)
    for name in ("q_absorb", "v_absorb"):
        assert formats(wide[name]) == formats(fp4_v2[name]) == ("bf16", "bf16"), name
        assert formats(matmuls("fp8-block", ())[name]) == ("fp8-block", "fp8"), name
        assert formats(matmuls("fp8", (WIDE_MLA_ABSORB,))[name]) == ("fp8", "fp8"), name
    assert formats(wide["o_proj"]) == ("fp8-block", "fp8")



@given(st.integers(1, 64), st.integers(1, 4), st.integers(1, 9000), st.booleans())
@settings(max_examples=20, deadline=None)
def test_an_op_reading_no_weight_is_built_the_same_whatever_the_weights_format(batch, q, c,
                                                                                 decode):
    """The checkpoint's format reaches the ops that read its weights and no other: at one
    compute format (FP8) over an FP8 cache, DeepSeek-R1's attention, norms' activations,
    rotations and collectives are the same ops (formats, shapes, attributes, hence cost)
    under block-FP8, NVFP4 and MXFP4 weights, with the fused qkv_a or without. The issue #48
    suspicion (an NVFP4 checkpoint's attention taking another format) in property form.
    (WIDE_MLA_ABSORB is left out: it widens v_absorb, and so the attention's output that
    v_absorb reads, over block-FP8 weights alone.)"""
    cfg = zoo_entry("deepseek-r1-0528").config
    step = StepShape(batch, q, c, decode=decode and q <= 4)

    def weightless(weight: str, kernels: tuple[str, ...]) -> dict:
        graph = build_step(cfg, step, DType.FP8, parse_weight_format(weight), kv=DType.FP8,
                           compact=True, kernels=kernels)  # fmt: skip
        return {op.name: op for op in graph.ops
                if all(t.role is not Role.WEIGHT for t in op.inputs)}

    for kernels in ((), (FUSED_QKV_A,)):
        block = weightless("fp8-block", kernels)
        assert any(op.kind is OpKind.ATTENTION for op in block.values())
        for weight in ("nvfp4", "mxfp4"):
            assert weightless(weight, kernels) == block, weight


def test_the_mxfp4_preview_keeps_mla_bf16_and_the_engines_requantize_its_absorbed_products():
    """amd/DeepSeek-R1-0528-MXFP4-Preview excludes '*self_attn*' (its Quark command): every
    MLA projection is a BF16 GEMM in an MXFP4 run (fused qkv_a or not), the dense and
    expert MLPs stay MXFP4; the absorbed products over the BF16 kv_b_proj run as each engine
    runs them: ATOM in FP8 (FP8_MLA_ABSORB, in any run but an FP8 one), SGLang on gfx950
    back in MXFP4 (MXFP4_MLA_ABSORB), and BF16 where neither kernel is listed."""
    cfg = zoo_entry("deepseek-r1-0528-mxfp4").config

    def formats(kernels: tuple[str, ...], precision: DType = DType.MXFP4) -> dict:
        graph = build_step(cfg, StepShape(2, 1, 64, decode=True), precision, kv=DType.FP8,
                           compact=True, kernels=kernels)  # fmt: skip
        return {op.name.split(".", 2)[-1]: (_weight(op), op.attr("compute")) for op in graph.ops
                if op.kind is OpKind.MATMUL and op.name.startswith("layers.3.")}

    bf16, fp8, mxfp4 = ("bf16", "bf16"), ("fp8", "fp8"), ("mxfp4", "mxfp4")
    for kernels in ((), (FUSED_QKV_A,)):
        plain = formats(kernels)
        projections = ["q_b_proj", "o_proj",
                       *(["qkv_a_proj"] if kernels else ["q_a_proj", "kv_a_proj"])]  # fmt: skip
        for name in projections:
            assert plain[name] == bf16, name
        assert plain["experts.gate_up"] == plain["shared.down"] == mxfp4
    absorbed = ("q_absorb", "v_absorb")
    assert {formats(())[n] for n in absorbed} == {bf16}
    assert {formats((FP8_MLA_ABSORB,))[n] for n in absorbed} == {fp8}
    assert {formats((MXFP4_MLA_ABSORB,))[n] for n in absorbed} == {mxfp4}
    # an FP8 run of the same repo's shapes keeps ATOM's products in its own FP8
    assert formats((FP8_MLA_ABSORB,), DType.FP8)["q_absorb"] == fp8
    dense = build_step(cfg, StepShape(2, 1, 64, decode=True), DType.MXFP4, kv=DType.FP8,
                       compact=True)  # fmt: skip
    assert {_weight(op) for op in dense.ops if op.name.startswith("layers.0.mlp.")} <= {"mxfp4"}


def test_the_fp8_absorb_kernel_leaves_a_block_fp8_run_as_it_was():
    """ATOM's FP8 requantization of kv_b_proj is left out over FP8 weights: its FP8 runs of
    DeepSeek-R1's block-FP8 repo are built as before the kernel was listed."""
    cfg = zoo_entry("deepseek-r1-0528").config

    def ops(kernels: tuple[str, ...]) -> list:
        graph = build_step(cfg, StepShape(2, 1, 64, decode=True), DType.FP8,
                           parse_weight_format("fp8-block"), kv=DType.FP8, compact=True,
                           kernels=kernels)  # fmt: skip
        return [(op.name, [t.dtype for t in op.inputs], op.attr("compute")) for op in graph.ops]

    assert ops((FP8_MLA_ABSORB,)) == ops(())


def test_sglang_requantizes_the_absorbed_products_on_amd_chips_alone():
    """mxfp4-mla-absorb is gated by AITER on gfx950: SGLang lists it on AMD chips only."""
    from xpusim.serving.engines import engines

    sglang = engines()["sglang"]
    assert MXFP4_MLA_ABSORB in sglang.kernels_on("AMD")
    assert MXFP4_MLA_ABSORB not in sglang.kernels_on("NVIDIA")
    assert FP8_MLA_ABSORB in engines()["atom"].kernels_on("AMD")
