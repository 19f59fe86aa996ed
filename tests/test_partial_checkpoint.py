"""Checkpoints quantized in part, layer by layer (workloads/checkpoint.py unquantized_module):
Meta's Llama-3.1-405B FP8 stores FBGEMM FP8 feed-forward layers but keeps every attention
projection and the whole of layers 0 and 125 BF16 ('The Llama 3 Herd of Models', section
6.2). The excluded matmuls are priced in their own format in the graph (bytes and GEMM
rate) and in the weights' memory, and the layers that differ are emitted apart in a compact
graph."""

from __future__ import annotations

import re

import pytest

from xpusim.compiler.partition import Plan, weight_bytes
from xpusim.errors import UserError
from xpusim.ir.dtypes import DType, parse_weight_format
from xpusim.ir.op import OpKind
from xpusim.ir.tensor import Role
from xpusim.workloads.checkpoint import read_checkpoint, stated_checkpoint, unquantized_module
from xpusim.workloads.transformer import StepShape, build_step, emitted_layers
from xpusim.workloads.zoo import zoo_entry

META_405B = ("model.layers.0", "model.layers.125", "model.layers.*.self_attn", "lm_head")
FP8 = parse_weight_format("fp8")


@pytest.mark.parametrize(("excluded", "layer", "op", "kept"), [
    (META_405B, 0, "gate_up", True),  # a whole layer excluded: its MLP too
    (META_405B, 0, "down", True),
    (META_405B, 1, "gate_up", False),
    (META_405B, 125, "down", True),
    (META_405B, 64, "qkv", True),  # every layer's attention
    (META_405B, 64, "o_proj", True),
    (META_405B, 64, "down", False),
    (("model.layers.1",), 12, "gate_up", False),  # layer 1 is not layers 10-19
    (("model.layers.1",), 1, "gate_up", True),
    (("model.layers.0.mlp.gate_proj",), 0, "gate_up", False),  # a fused GEMM needs both parts
    (("model.layers.0.mlp.gate_proj", "model.layers.0.mlp.up_proj"), 0, "gate_up", True),
    (META_405B, 0, "shared.gate_up", True),  # a whole layer excluded: its shared experts too
    (META_405B, 1, "shared.gate_up", False),
])  # fmt: skip
def test_which_matmuls_a_layer_by_layer_checkpoint_keeps(excluded, layer, op, kept):
    assert unquantized_module(excluded, layer, op) is kept


def _matmuls(model: str) -> dict:
    graph = build_step(zoo_entry(model).config, StepShape(4, 1, 512, decode=True), DType.FP8,
                       FP8, compact=True)  # fmt: skip
    return {op.name: op for op in graph.ops if op.kind is OpKind.MATMUL}


def _formats(op) -> tuple[str, str]:
    weight = next(t.dtype.value for t in op.inputs if t.role is Role.WEIGHT)
    return weight, op.attr("compute")


def test_an_excluded_module_class_is_priced_in_its_own_format():
    """Layer 0 and 125 whole, and every attention, are BF16 weights on BF16 GEMMs; the
    FFNs of layers 1-124 FP8 on FP8 GEMMs. The all-FP8 architecture (llama-3-405b at
    --precision fp8) has every linear FP8."""
    ops = _matmuls("llama-3.1-405b-instruct-fp8")
    bf16, fp8 = ("bf16", "bf16"), ("fp8", "fp8")
    for layer in (0, 125):
        for part in ("qkv", "o_proj", "gate_up", "down"):
            assert _formats(ops[f"layers.{layer}.{part}"]) == bf16, (layer, part)
    assert _formats(ops["layers.1.qkv"]) == _formats(ops["layers.1.o_proj"]) == bf16
    assert _formats(ops["layers.1.gate_up"]) == _formats(ops["layers.1.down"]) == fp8
    plain = _matmuls("llama-3-405b")
    assert {_formats(op) for name, op in plain.items() if name.startswith("layers.")} == {fp8}


def test_layers_quantized_differently_are_emitted_apart():
    cfg = zoo_entry("llama-3.1-405b-instruct-fp8").config
    assert emitted_layers(cfg, compact=True) == [(0, 1), (1, 124), (125, 1)]
    assert emitted_layers(zoo_entry("llama-3-405b").config, compact=True) == [(0, 1), (1, 125)]


def test_the_405b_fp8_weights_per_gpu_are_what_vllm_loaded():
    """vLLM 0.6.3 logged 56.7677 GiB of weights a GPU loading meta-llama/Llama-3.1-405B-FP8
    at TP8 (dstackai/benchmarks comparison/h100sxm5_vs_mi300x raw_data/gpu-usage.md), a
    checkpoint fact; every linear in FP8 would be 47.7 GiB."""
    gib = 2**30
    cfg = zoo_entry("llama-3.1-405b-instruct-fp8").config
    held = sum(weight_bytes(cfg, Plan(tp=8), FP8, DType.FP8)) / gib
    assert held == pytest.approx(56.7677, rel=0.01)
    plain = sum(weight_bytes(zoo_entry("llama-3-405b").config, Plan(tp=8), FP8, DType.FP8))
    assert plain / gib == pytest.approx(47.74, rel=0.01)


def test_memory_holds_what_the_graph_reads():
    """The weights' memory (compiler/partition.py _wide_params) and the graph's weight
    tensors (the layer builder) agree on one chip: a BF16 matmul is stored BF16."""
    cfg = zoo_entry("llama-3.1-405b-instruct-fp8").config
    graph = build_step(cfg, StepShape(1, 1, 16, decode=True), DType.FP8, FP8, compact=True)
    read = sum(t.nbytes * graph.layer_copies.get(op.layer, 1)
               for op in graph.ops for t in op.inputs if t.role is Role.WEIGHT)
    assert read == pytest.approx(sum(weight_bytes(cfg, Plan(), FP8, DType.FP8)), rel=1e-3)


def test_fbgemm_fp8_reads_its_full_path_exclusions():
    """config.json's quantization_config as Meta writes it (quant_method fbgemm_fp8,
    modules_to_not_convert by full path: the OME operator's copy of the 405B repo's, an
    excerpt), read as FP8 weights on FP8 GEMMs; a fused qkv is kept only with all of its
    parts named."""
    q = {"activation_scale_ub": 1200.0, "quant_method": "fbgemm_fp8", "modules_to_not_convert": [
        "model.layers.0.mlp.down_proj", "model.layers.0.mlp.gate_proj",
        "model.layers.0.mlp.up_proj", "model.layers.125.mlp.down_proj",
        "model.layers.125.mlp.gate_proj", "model.layers.125.mlp.up_proj",
        "model.layers.0.self_attn.k_proj", "model.layers.0.self_attn.o_proj",
        "model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.v_proj"]}  # fmt: skip
    cp = read_checkpoint({"quantization_config": q}, None, "config.json")
    assert (cp.method, cp.weights, cp.compute, cp.kv) == ("fbgemm_fp8", "fp8", "fp8", None)
    assert unquantized_module(cp.excluded, 0, "qkv") and unquantized_module(cp.excluded, 125,
                                                                            "gate_up")
    assert not unquantized_module(cp.excluded, 125, "qkv")


def test_a_misspelt_mlp_projection_is_refused_by_name():
    stated = {"method": "fbgemm_fp8", "weights": "fp8", "compute": "fp8", "kv": None,
              "excluded": ["model.layers.0.mlp.gate_prj"]}  # fmt: skip
    with pytest.raises(UserError, match=re.escape("'model.layers.0.mlp.gate_prj'")):
        stated_checkpoint(stated, "zoo/x.json")
    fine = {**stated, "excluded": ["model.layers.3.mlp.shared_experts.gate_proj",
                                   "model.layers.3.mlp.gate"]}  # fmt: skip
    assert stated_checkpoint(fine, "zoo/x.json").excluded == tuple(fine["excluded"])


def test_a_run_says_which_layers_the_checkpoint_keeps_whole():
    cp = zoo_entry("llama-3.1-405b-instruct-fp8").config.checkpoint
    assert cp.kept_layers == [0, 125]
    assert cp.describe().endswith("attention, layers 0 and 125 and LM head unquantized")
