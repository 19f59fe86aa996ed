"""DeepSeek-V4 (model_type deepseek_v4): its compressed attention's cache and reads as its
public inference code (model.py) runs them. Its counts equal transformers' DeepseekV4
built on the meta device (test_zoo.test_count_equals_what_transformers_builds)."""

from __future__ import annotations

import json

import pytest

from xpusim.errors import UserError
from xpusim.ir.dtypes import DType
from xpusim.ir.op import OpKind
from xpusim.workloads.resolve import load_model
from xpusim.workloads.transformer import StepShape, build_step
from xpusim.workloads.transformer_config import config_from_hf
from xpusim.workloads.zoo import zoo_file

PRO = "deepseek-ai/DeepSeek-V4-Pro"


def test_pro_caches_9_62_gib_a_sequence_at_a_million_tokens_in_bf16():
    """Each layer's 128-token window, its 1/ratio compressed entries (512 wide) and on
    ratio-4 layers the indexer's compressed keys (128 wide): the release's 9.62 GiB."""
    cfg = load_model(PRO)
    assert cfg.cache_bytes(2**20, 2) / 2**30 == pytest.approx(9.62, abs=0.005)


def _attention_flops(ratio_of_layer: int, kv_len: int, model: str = PRO) -> dict[str, float]:
    cfg = load_model(model)
    layer = cfg.compress_ratios.index(ratio_of_layer)
    graph = build_step(cfg, StepShape(1, 1, kv_len, decode=True), DType.BF16)
    return {op.name.split(".", 2)[2]: op.matrix_flops for op in graph.ops
            if op.layer == layer and op.kind == OpKind.ATTENTION}  # fmt: skip


def test_a_decode_attends_its_window_and_its_layers_compressed_entries():
    """At a million tokens of context a decode's query scores 128 window keys, and the
    index_topk (1024) entries its indexer picks on a ratio-4 layer or all 8192 entries on
    a ratio-128 layer: 2 x heads x (key + value width) FLOPs a key."""
    cfg = load_model(PRO)
    per_key = 2 * cfg.num_heads * 2 * cfg.head_dim
    for ratio, keys in ((4, cfg.index_topk), (128, 2**20 // 128)):
        flops = _attention_flops(ratio, 2**20)
        assert flops["attention"] == pytest.approx(per_key * 128)
        assert flops["compressed_attention"] == pytest.approx(per_key * keys)
    # V4-Flash's first two layers: the window alone (V4-Pro has none such)
    assert set(_attention_flops(0, 2**20, "deepseek-ai/DeepSeek-V4-Flash")) == {"attention"}


def _v4(**changes) -> dict:
    data = dict(zoo_file("deepseek-v4-flash")[1])
    return json.loads(json.dumps(data | changes))


def test_a_compress_ratio_its_code_does_not_build_is_refused():
    with pytest.raises(UserError, match=r"'compress_ratios'.*0, 4, 128"):
        config_from_hf(_v4(compress_ratios=[8] * 43), "x", "config.json")


def test_a_layer_past_the_ratios_list_has_none():
    """As its code reads it (ratios[layer] if layer < len(ratios) else 0)."""
    cfg = config_from_hf(_v4(compress_ratios=[4]), "x", "config.json")
    assert cfg.compress_ratios == (4,) + (0,) * 42


def test_training_it_is_refused_in_one_line():
    cfg = load_model(PRO)
    with pytest.raises(UserError, match="training a model with DeepSeek-V4's attention"):
        build_step(cfg, StepShape(1, 8, 8), DType.BF16, training=True)


def test_its_experts_are_read_as_fp4_beside_fp8_blocks():
    """expert_dtype fp4 beside quantization_config's fp8 blocks: the run stores MXFP4 (97%
    of the weights) and says the rest is kept in fp8-block."""
    checkpoint = load_model(PRO).checkpoint
    assert checkpoint.weights == "mxfp4" and checkpoint.compute == "fp8"
    assert checkpoint.describe().endswith("attention in fp8-block")
