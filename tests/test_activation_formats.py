"""Activations of quantized inference as the engines keep them (workloads/transformer.py
quantized_at_matmuls): an FP8 or FP4 model quantizes the inputs of its GEMMs alone; the
residual stream, its norms, the activation function's input, the all-reduces and the
logits stay 16-bit. And every collective's bytes are its whole tensor's (the LM head's
all-gather was costed on the rank's shard)."""

from __future__ import annotations

import pytest

import xpusim
from xpusim.ir.dtypes import DType, stream_format
from xpusim.ir.op import OpKind
from xpusim.ir.tensor import Role
from xpusim.workloads.resolve import load_model
from xpusim.workloads.transformer import StepShape, build_step


def _graph(precision: DType, **kw):
    return build_step(load_model("llama-2-7b"), StepShape(4, 1, 64, decode=True), precision, **kw)


def _tensor(graph, name: str):
    return next(t for op in graph.ops for t in (*op.inputs, *op.outputs) if t.name == name)


@pytest.mark.parametrize("precision", [DType.FP8, DType.NVFP4, DType.MXFP4])
def test_gemm_inputs_are_quantized_and_the_rest_is_16_bit(precision):
    graph = _graph(precision)
    for op in graph.ops:
        if op.kind is OpKind.MATMUL and op.attr("compute") == precision.value:
            assert op.inputs[0].dtype == precision, op.name  # written quantized by its producer
            assert op.outputs[0].dtype == DType.BF16, op.name  # a GEMM writes 16 bits
    for name in ("layers.0.norm_attn.out", "layers.1.norm_attn.out", "layers.0.silu_mul.out"):
        assert _tensor(graph, name).dtype == precision  # a GEMM's input: the fused quantize
    for name in ("embed.out", "layers.1.norm_attn.residual", "layers.0.gate_up.out",
                 "layers.0.o_proj.out", "logits"):  # fmt: skip
        assert _tensor(graph, name).dtype == DType.BF16, name
    assert _tensor(graph, "layers.0.k_cache").dtype == precision  # the cache keeps its format


def test_integer_models_are_unchanged():
    """Nothing is retyped under int8 (edge compilers keep integer activations throughout:
    stream_format), nor where activations are 16-bit already."""
    assert stream_format(DType.INT8) == DType.INT8 and stream_format(DType.BF16) == DType.BF16
    graph = _graph(DType.INT8)
    assert not any(t.dtype == DType.BF16 for op in graph.ops for t in (*op.inputs, *op.outputs)
                   if t.role is Role.ACTIVATION)  # fmt: skip


def test_16_bit_attention_reads_16_bit_inputs():
    """TensorRT-LLM's FP8 engines with FP16 attention: the rotary kernel writes Q 16-bit for
    it, where FP8 attention's is quantized; the FP8 KV cache is the same either way."""
    fp8 = next(op for op in _graph(DType.FP8).ops if op.kind is OpKind.ATTENTION)
    mixed = next(op for op in _graph(DType.FP8, attention=DType.FP16).ops
                 if op.kind is OpKind.ATTENTION)  # fmt: skip
    assert fp8.inputs[3].dtype == DType.FP8 and mixed.inputs[3].dtype == DType.BF16
    assert fp8.inputs[1] == mixed.inputs[1]


def test_an_fp8_model_all_reduces_and_gathers_what_a_bf16_one_does():
    """Tensor parallelism's all-reduces sum 16-bit GEMM outputs whatever the GEMMs compute
    in, and the LM head gathers every rank's logits: its bytes are the whole logits (tp x
    the rank's shard), as nccl-tests and cost/collectives.py count an all-gather's."""
    run = dict(chips=2, tp=2, batch=8, prompt=64, gen=2)
    found = {p: {c["collective"]: c["bytes"] for c in xpusim.simulate(
        "llama-2-7b", "h100-sxm", precision=p, **run).collectives} for p in ("fp8", "bf16")}
    assert found["fp8"] == found["bf16"]
    assert found["fp8"]["all_reduce"] == 8 * 4096 * 2  # tokens x hidden, 16-bit
    assert found["fp8"]["all_gather"] == 8 * 32000 * 2  # every sequence's whole logits


def test_an_fp8_decode_step_all_reduces_16_bit_activations():
    """The step at MLPerf's batch (837 sequences of Llama-2-70B on two H100s): its
    all-reduces move 16-bit bytes, and the norms, rotary and SiLU stream 16-bit ones. A
    regression to FP8 activations drops the all-reduce back to half its time."""
    result = xpusim.simulate("llama-2-70b", "h100-sxm", chips=2, tp=2, batch=837, prompt=370,
                             gen=2, precision="fp8")  # fmt: skip
    ar = next(o for o in result.ops if o.phase == "decode" and o.kind == "collective"
              and "all_reduce" in o.name)  # fmt: skip
    assert ar.bytes == pytest.approx(2 * 837 * 8192 * 2)  # read and written, 16-bit


def test_a_pipeline_sends_16_bit_hidden_states_under_fp8():
    """The hidden state a pipeline stage sends the next is the 16-bit residual stream: the
    same bytes and time under FP8 GEMMs as under BF16 (timeline.py and step_cost.py price
    it, inference.py reports it)."""
    run = dict(chips=2, pp=2, tp=1, batch=8, prompt=64, gen=2)
    sends = {p: [(o.bytes, o.time_s) for o in xpusim.simulate(
        "llama-2-7b", "h100-sxm", precision=p, **run).ops if o.kind == "send"]
        for p in ("fp8", "bf16")}  # fmt: skip
    assert sends["fp8"] == sends["bf16"] and sends["fp8"][1][0] == 8 * 4096 * 2


@pytest.mark.parametrize("model", ["llama-2-7b", "deepseek-r1-0528"])
def test_fp8_attention_beside_fp4_gemms_reads_what_an_fp8_runs_does(model):
    """Attention's format is its op's, not the checkpoint's: beside NVFP4 GEMMs over an FP8
    cache attention computes FP8 (resolve_attention_format), and its query and keys are
    written FP8 for it as in an FP8 run, where they were 16-bit (DeepSeek-R1's NVFP4 MLA
    verify cost 1.8% more than its FP8 checkpoint's at the same shape; issue #48)."""
    step = StepShape(4, 3, 700, decode=True)

    def attention(precision: DType, **kw):
        graph = build_step(load_model(model), step, precision, kv=DType.FP8, **kw)
        return next(op for op in graph.ops if op.kind is OpKind.ATTENTION)

    fp4 = attention(DType.NVFP4, attention=DType.FP8)
    fp8 = attention(DType.FP8)
    assert fp4.inputs == fp8.inputs
    assert {t.dtype for t in fp4.inputs} == {DType.FP8}
