"""Attention kinds beyond softmax over a full cache: linear attention with a constant state
(Gated DeltaNet: Qwen3-Next, Qwen3.5), hybrid layer schedules, and windowed layers whose
cache is bounded by their window, in run's memory and in serve's KV blocks; and the cost
rule every op kind must have."""

from __future__ import annotations

import dataclasses
import enum
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xpusim
from xpusim.compiler.partition import Plan, partition, weights_per_chip_bytes
from xpusim.errors import UserError
from xpusim.ir.dtypes import DType
from xpusim.ir.op import RULES, OpKind, check_rules
from xpusim.workloads.transformer import StepShape, build_step, emitted_layers
from xpusim.workloads.transformer_config import config_from_hf
from xpusim.workloads.zoo import zoo_entry

ZOO = Path(xpusim.__file__).parent / "workloads" / "zoo"
# A small Qwen3-Next: d_k != d_v, so that no formula can swap them unnoticed
QWEN3_NEXT = dict(model_type="qwen3_next", hidden_size=256, intermediate_size=512,
                  moe_intermediate_size=64, shared_expert_intermediate_size=64,
                  num_hidden_layers=8, num_attention_heads=4, num_key_value_heads=2,
                  head_dim=64, num_experts=8, num_experts_per_tok=2, vocab_size=1000,
                  linear_num_key_heads=4, linear_num_value_heads=8, linear_key_head_dim=32,
                  linear_value_head_dim=48, linear_conv_kernel_dim=4,
                  full_attention_interval=4)  # fmt: skip
NEW_FAMILIES = ["qwen3-next-80b-a3b-instruct", "qwen3.5-397b-a17b", "qwen3.5-27b"]


def test_every_op_kind_has_a_cost_rule():
    assert set(RULES) == set(OpKind)


def test_a_kind_without_a_rule_is_refused_at_import():
    extra = enum.StrEnum("Kinds", {**{k.name: k.value for k in OpKind}, "NEW": "new"})
    with pytest.raises(ImportError, match="'new'"):
        check_rules(extra)  # type: ignore[arg-type]


@pytest.mark.parametrize("model_type", ["qwen3_next", "qwen3_5_moe_text", "qwen3_5_text"])
def test_counts_what_transformers_builds(model_type):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    moe = {"num_experts", "num_experts_per_tok", "moe_intermediate_size",
           "shared_expert_intermediate_size"}
    dense = model_type == "qwen3_5_text"  # Qwen3.5-27B's: an MLP in every layer
    rest = {k: v for k, v in QWEN3_NEXT.items()
            if k != "model_type" and not (dense and k in moe)}  # fmt: skip
    hf = transformers.AutoConfig.for_model(model_type, **rest)
    with torch.device("meta"):
        built = sum(p.numel() for p in transformers.AutoModelForCausalLM.from_config(hf)
                    .parameters())  # fmt: skip
    assert config_from_hf(hf.to_dict(), model_type, "config.json").param_count == built


@pytest.mark.parametrize("model_id", NEW_FAMILIES)
def test_published_total_and_active_counts(model_id):
    """Totals within 1%; active counts within the rounding of the published name ("A17B":
    to the billion), where they reproduce (see the zoo file's params_source)."""
    entry = zoo_entry(model_id)
    assert entry.config.param_count == pytest.approx(entry.published_params, rel=0.01)
    if model_id == "qwen3.5-397b-a17b":
        assert abs(entry.config.active_param_count - entry.published_active) <= 0.5e9


def test_the_hybrid_schedule_reads_layer_types_or_the_interval():
    by_interval = config_from_hf(QWEN3_NEXT, "q", "c")
    assert by_interval.linear_layers == (0, 1, 2, 4, 5, 6)
    types = ["full_attention", "linear_attention"] * 4
    listed = config_from_hf({**QWEN3_NEXT, "layer_types": types}, "q", "c")
    assert listed.linear_layers == (1, 3, 5, 7)
    with pytest.raises(UserError, match="'layer_types'"):
        config_from_hf({**QWEN3_NEXT, "layer_types": ["mamba"] * 8}, "q", "c")


def test_linear_layers_are_their_own_op_kind_and_full_layers_keep_the_cache():
    """Qwen3.5-397B on 8 H200s: 45 Gated DeltaNet layers as linear_attention ops, a KV
    cache for the 15 full-attention layers only, and a constant state per sequence."""
    cfg = xpusim.model("qwen3.5-397b-a17b")
    batch, tokens = 2, 8192 + 256
    r = xpusim.simulate(cfg, "h200-sxm", chips=8, batch=batch, prompt=8192, gen=256)
    kinds = {}
    for op in r.ops:
        if op.phase == "decode":
            kinds[op.kind] = kinds.get(op.kind, 0) + op.count
    assert kinds["linear_attention"] == 45 and kinds["attention"] == 15
    tp = r.plan["tp"]
    kv_heads, state_heads = max(1, 2 // tp), 64 // tp
    full = 15 * 2 * kv_heads * 256 * tokens
    state = 45 * (state_heads * 128 * 128 + (2 * 16 * 128 + 64 * 128) // tp * 3)
    per_chip = 2 * batch * (full + state)  # bf16
    assert r.memory_bytes.kv_cache == pytest.approx(per_chip * r.chips, rel=1e-9)


@settings(max_examples=25, deadline=None)
@given(context=st.integers(2, 1_000_000))
def test_linear_attention_decode_is_the_same_at_any_context(context):
    cfg = config_from_hf(QWEN3_NEXT, "q", "c")
    ops = {}
    for kv_len in (1 + 1, context):
        graph = build_step(cfg, StepShape(3, 1, kv_len), DType.BF16)
        ops[kv_len] = [(op.matrix_flops, op.vector_flops, op.bytes) for op in graph
                       if op.kind is OpKind.LINEAR_ATTENTION]  # fmt: skip
    assert ops[2] == ops[context] and len(ops[2]) == 6


def test_the_chunked_scan_counts_its_algorithms_steps():
    """Gated DeltaNet's chunkwise form (ir/op.py): per token and value head
    6 C d_k + 4 C d_v + 6 d_k d_v + 2 C^2 / 3 matrix FLOPs, C = 64 or the prompt if
    shorter; a decode step 7 vector FLOPs per state element."""
    cfg = config_from_hf(QWEN3_NEXT, "q", "c")
    heads, dk, dv = 8, 32, 48
    for tokens in (40, 1000):
        c = min(64, tokens)
        (op, *_) = [op for op in build_step(cfg, StepShape(2, tokens, tokens), DType.BF16)
                    if op.kind is OpKind.LINEAR_ATTENTION]  # fmt: skip
        per_token = 6 * c * dk + 4 * c * dv + 6 * dk * dv + 2 * c * c / 3
        assert op.matrix_flops == pytest.approx(2 * tokens * heads * per_token, rel=1e-12)
    (decode, *_) = [op for op in build_step(cfg, StepShape(2, 1, 500), DType.BF16)
                    if op.kind is OpKind.LINEAR_ATTENTION]  # fmt: skip
    assert decode.matrix_flops == 0
    assert decode.vector_flops == 2 * heads * (7 * dk * dv + 8 + 6 * dk)


def test_tensor_parallelism_splits_linear_attention_by_heads():
    cfg = config_from_hf(QWEN3_NEXT, "q", "c")
    graph = build_step(cfg, StepShape(2, 300, 300), DType.BF16)
    ranks = partition(graph, Plan(tp=2))

    def linear(g):
        return [op for op in g if op.kind is OpKind.LINEAR_ATTENTION]

    for whole, split in zip(linear(graph), linear(ranks), strict=True):
        assert split.matrix_flops == whole.matrix_flops / 2
        assert split.bytes == whole.bytes / 2
    one, two = (sum(weights_per_chip_bytes(cfg, Plan(tp=tp), 2)) for tp in (1, 2))
    assert one == cfg.param_count * 2
    assert two < one * 0.6


def test_a_whole_head_qk_norm_all_reduces_its_sums_under_tensor_parallelism():
    """MiniMax-M2 normalizes all of q (of k) at once: split by heads, each layer all-reduces
    two FP32 sums of squares a token (vLLM's forward_qk, SGLang's MiniMaxM2QKRMSNorm); a
    per-head norm (Qwen3) needs nothing from the other ranks."""
    cfg = zoo_entry("minimax-m2.5").config
    assert cfg.qk_norm_whole
    per_head = dataclasses.replace(cfg, qk_norm_whole=False)
    for tokens in (1, 300):
        for c, sums in ((cfg, 1), (per_head, 0)):
            graph = build_step(c, StepShape(2, tokens, tokens), DType.BF16)
            norm_all_reduces = [op for op in partition(graph, Plan(tp=4))
                                if op.kind is OpKind.COLLECTIVE and "qk_norm" in op.name]
            assert len(norm_all_reduces) == sums * cfg.num_layers
            for op in norm_all_reduces:
                assert op.inputs[0].nbytes == 2 * tokens * 2 * 4
            assert not [op for op in partition(graph, Plan(tp=1))
                        if op.kind is OpKind.COLLECTIVE]


def test_compact_graphs_cost_what_full_graphs_do():
    cfg = config_from_hf(QWEN3_NEXT, "q", "c")
    assert [n for _, n in emitted_layers(cfg, True)] == [1, 2, 1, 3, 1]
    step = StepShape(2, 100, 100)
    full, compact = (build_step(cfg, step, DType.BF16, compact=c) for c in (False, True))
    assert compact.flops == pytest.approx(full.flops, rel=1e-12)
    assert compact.bytes == pytest.approx(full.bytes, rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(tokens=st.integers(1, 2_000_000), window=st.integers(1, 100_000))
def test_windowed_cache_never_exceeds_the_full_cache(tokens, window):
    gemma = xpusim.model("gemma-3-27b")
    windowed = dataclasses.replace(gemma, sliding_window=window)
    full = dataclasses.replace(gemma, sliding_layers=())
    assert windowed.cache_bytes(tokens, 2) <= full.cache_bytes(tokens, 2)
    if tokens <= window:
        assert windowed.cache_bytes(tokens, 2) == full.cache_bytes(tokens, 2)


def test_run_bounds_gemma3s_windowed_cache():
    """52 of Gemma-3-27B's 62 layers keep 1,024 tokens: at 32k tokens its cache is about a
    fifth of what 62 full layers would hold."""
    cfg = xpusim.model("gemma-3-27b")
    tokens = 32768 + 128
    r = xpusim.simulate(cfg, "h200-sxm", chips=1, batch=1, prompt=32768, gen=128)
    per_layer = 2 * 16 * 128 * 2
    assert r.memory_bytes.kv_cache == (10 * tokens + 52 * 1024) * per_layer
    assert r.memory_bytes.kv_cache * 5 < 62 * tokens * per_layer


def test_serve_bounds_gemma3s_windowed_cache():
    """serve's KV blocks hold the full layers' tokens and the windowed layers' share: about
    5x more tokens at 32k contexts than 62 full layers would leave room for."""
    result = xpusim.serve("gemma-3-27b", "h200-sxm", concurrency=4, prompt=32768, gen=16,
                          requests=4)  # fmt: skip
    per_layer = 2 * 16 * 128 * 2
    tokens = 32768 + 16
    expected = (10 + 52 * (1024 + 16) / tokens) * per_layer
    assert result.kv_cache.bytes_per_token == pytest.approx(expected, rel=1e-12)
    assert 62 * per_layer > 5 * result.kv_cache.bytes_per_token


def test_serve_blocks_hold_full_attention_tokens_and_a_share_of_the_state():
    """A hybrid's KV blocks hold its full-attention layers' tokens and each linear layer's
    state spread over a request's tokens (serving/run.py _kv_room), not every layer's KV."""
    cfg = config_from_hf(QWEN3_NEXT, "q", "c")
    result = xpusim.serve(cfg, "h100-sxm", concurrency=2, prompt=1000, gen=24, requests=2)
    full = cfg.num_layers - len(cfg.linear_layers)
    per_token = full * 2 * cfg.num_kv_heads * cfg.head_dim * 2
    state = len(cfg.linear_layers) * cfg.linear_state_elements_per_layer() * 2
    assert result.kv_cache.bytes_per_token == pytest.approx(per_token + state / 1024, rel=1e-12)


def test_bandwidth_floor_of_a_decode_step_is_the_state():
    """A decode step's linear attention reads and writes each sequence's state: its bytes
    are at least twice the state, whatever the context."""
    cfg = config_from_hf(QWEN3_NEXT, "q", "c")
    (op, *_) = [op for op in build_step(cfg, StepShape(5, 1, 10_000), DType.BF16)
                if op.kind is OpKind.LINEAR_ATTENTION]  # fmt: skip
    assert op.bytes >= 2 * 5 * 8 * 32 * 48 * 2
    assert np.isfinite(op.bytes)


DSA = dict(model_type="deepseek_v32", hidden_size=256, intermediate_size=512,
           moe_intermediate_size=64, n_shared_experts=1, n_routed_experts=8,
           num_experts_per_tok=2, first_k_dense_replace=1, num_hidden_layers=3,
           num_attention_heads=4, num_key_value_heads=4, vocab_size=1000, kv_lora_rank=64,
           q_lora_rank=96, qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=32,
           index_n_heads=4, index_head_dim=32, index_topk=16)  # fmt: skip


def test_dsa_counts_what_transformers_builds():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    rest = {k: v for k, v in DSA.items() if k != "model_type"}
    hf = transformers.AutoConfig.for_model("deepseek_v32", **rest)
    with torch.device("meta"):
        built = sum(p.numel() for p in transformers.AutoModelForCausalLM.from_config(hf)
                    .parameters())  # fmt: skip
    assert config_from_hf(hf.to_dict(), "v32", "config.json").param_count == built


@settings(max_examples=25, deadline=None)
@given(context=st.integers(17, 1_000_000))
def test_sparse_attention_attends_top_k_keys_and_indexes_them_all(context):
    """A decode step of DSA: attention over the index_topk keys its indexer picks (its
    FLOPs the same at any context past them), the indexer over every cached key (its
    FLOPs growing with the context)."""
    cfg = config_from_hf(DSA, "v32", "c")

    def step(kv_len: int) -> dict[OpKind, float]:
        graph = build_step(cfg, StepShape(2, 1, kv_len), DType.BF16)
        return {kind: sum(op.flops for op in graph if op.kind is kind)
                for kind in (OpKind.ATTENTION, OpKind.SPARSE_INDEX)}  # fmt: skip

    at_top_k, here = step(16), step(context)
    assert here[OpKind.ATTENTION] == at_top_k[OpKind.ATTENTION]
    heads, width = 4, 32
    indexer_matrix = 2 * heads * width * context * 2 * 3  # 2 sequences, 3 layers
    assert here[OpKind.SPARSE_INDEX] == indexer_matrix + 2 * 3 * (3 * heads + 1) * context


def test_the_index_keys_are_cached_beside_the_latents():
    cfg = config_from_hf(DSA, "v32", "c")
    assert cfg.kv_elements_per_layer() == 64 + 16 + 32


def test_deepseek_v32s_published_total_counts_its_mtp_module():
    cfg = xpusim.model("deepseek-v3.2")
    assert cfg.param_count + cfg.mtp_params == pytest.approx(685e9, rel=0.01)
    assert xpusim.model("deepseek-v3").mtp_params == pytest.approx(14e9, rel=0.05)


def test_glm5_counts_what_transformers_builds_and_builds_as_deepseek_v32():
    """GLM-5 (glm_moe_dsa) is V3.2's MLA, indexer and experts under V3.2's keys."""
    glm = {**DSA, "model_type": "glm_moe_dsa"}
    assert config_from_hf(glm, "g", "c").param_count == config_from_hf(DSA, "v", "c").param_count
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    rest = {k: v for k, v in glm.items() if k != "model_type"}
    try:
        hf = transformers.AutoConfig.for_model("glm_moe_dsa", **rest)
    except ValueError:
        pytest.skip("this transformers has no glm_moe_dsa")
    with torch.device("meta"):
        built = sum(p.numel() for p in transformers.AutoModelForCausalLM.from_config(hf)
                    .parameters())  # fmt: skip
    assert config_from_hf(hf.to_dict(), "glm", "config.json").param_count == built


@pytest.mark.parametrize("key, value", [("index_topk_freq", 4), ("index_topk_pattern", "FFS"),
                                        ("indexer_types", ["full", "shared", "full"])])
def test_glm_layers_sharing_another_layers_top_k_are_refused(key, value):
    with pytest.raises(UserError, match=f"field '{key}'.*not modelled"):
        config_from_hf({**DSA, "model_type": "glm_moe_dsa", key: value}, "g", "config.json")
    config_from_hf({**DSA, "model_type": "glm_moe_dsa", "index_topk_freq": 1,
                    "indexer_types": ["full"] * 3}, "g", "config.json")  # fmt: skip


def test_glm5_runs_on_eight_h200s_with_its_fp8_blocks():
    from click.testing import CliRunner

    from xpusim.cli import cli

    out = CliRunner().invoke(cli, ["run", "zai-org/GLM-5-FP8", "--chip", "h200-sxm",
                                   "--chips", "8", "--json"])  # fmt: skip
    assert out.exit_code == 0, out.output
    row = json.loads(out.output)
    assert row["fits"] and row["weight_precision"] == "fp8-block"
    assert row["params"] == pytest.approx(744e9, rel=0.01) and 0 < row["tpot_s"] < 1


LLAMA4 = dict(model_type="llama4_text", hidden_size=256, intermediate_size=128,
              intermediate_size_mlp=512, num_hidden_layers=8, num_attention_heads=4,
              num_key_value_heads=2, head_dim=64, num_local_experts=4, num_experts_per_tok=1,
              vocab_size=1000, attention_chunk_size=64)  # fmt: skip


@pytest.mark.parametrize("step", [1, 2])
def test_llama4_counts_what_transformers_builds(step):
    """Scout (every layer with experts) and Maverick's interleaving (every other)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    rest = {k: v for k, v in LLAMA4.items() if k != "model_type"}
    hf = transformers.AutoConfig.for_model("llama4_text", **rest, interleave_moe_layer_step=step)
    with torch.device("meta"):
        built = sum(p.numel() for p in transformers.AutoModelForCausalLM.from_config(hf)
                    .parameters())  # fmt: skip
    cfg = config_from_hf(hf.to_dict(), "l4", "config.json")
    assert cfg.param_count == built
    assert cfg.chunked_layers == (0, 1, 2, 4, 5, 6) and cfg.expert_layers == 8 // step


@settings(max_examples=60, deadline=None)
@given(q=st.integers(1, 5000), past=st.integers(0, 5000), chunk=st.integers(1, 700))
def test_chunked_pairs_count_each_querys_chunk(q, past, chunk):
    """Each query at position p sees p mod chunk + 1 keys: the closed form equals the sum,
    and never exceeds what full causal attention or a window of the chunk would score."""
    from xpusim.ir.op import attention_pairs, chunked_pairs

    kv = q + past
    counted = sum(p % chunk + 1 for p in range(past, kv))
    assert chunked_pairs(q, kv, chunk) == counted
    assert counted <= attention_pairs(q, kv, True)
    assert counted <= attention_pairs(q, kv, True, chunk)


def test_chunked_layers_keep_one_chunk_of_cache():
    cfg = config_from_hf(LLAMA4, "l4", "c")
    per_layer = 2 * 2 * 64 * 2
    assert cfg.cache_bytes(10_000, 2) == (2 * 10_000 + 6 * 64) * per_layer
    graph = build_step(cfg, StepShape(1, 1, 10_000), DType.BF16)
    keys = sorted({op.inputs[1].shape[1] for op in graph if op.kind is OpKind.ATTENTION})
    assert keys == [10_000 % 64, 10_000]


@pytest.mark.parametrize("qk_norm", [False, True])
def test_glm4_moe_counts_what_transformers_builds(qk_norm):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    fields = dict(hidden_size=256, intermediate_size=512, moe_intermediate_size=64,
                  n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=1,
                  first_k_dense_replace=1, num_hidden_layers=3, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=64, vocab_size=1000, attention_bias=True,
                  use_qk_norm=qk_norm)  # fmt: skip
    hf = transformers.AutoConfig.for_model("glm4_moe", **fields)
    with torch.device("meta"):
        built = sum(p.numel() for p in transformers.AutoModelForCausalLM.from_config(hf)
                    .parameters())  # fmt: skip
    cfg = config_from_hf(hf.to_dict(), "glm", "config.json")
    assert cfg.param_count == built
    assert cfg.rotary_fraction == 0.5 and cfg.mtp_layers == 1


MINIMAX_M1 = dict(model_type="minimax_m1", hidden_size=256, intermediate_size=128,
                  num_hidden_layers=8, num_attention_heads=4, num_key_value_heads=2,
                  head_dim=32, num_local_experts=4, num_experts_per_tok=2, vocab_size=1000,
                  attn_type_list=[0, 0, 0, 1] * 2, rotary_dim=16)  # fmt: skip


def test_minimax_m1_counts_what_transformers_builds():
    """transformers' MiniMax (model_type minimax, the same architecture under layer_types)
    built on the meta device from the same sizes."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    kinds = ["linear_attention" if t == 0 else "full_attention"
             for t in MINIMAX_M1["attn_type_list"]]  # fmt: skip
    rest = {k: v for k, v in MINIMAX_M1.items()
            if k not in ("model_type", "attn_type_list", "rotary_dim")}  # fmt: skip
    hf = transformers.AutoConfig.for_model("minimax", layer_types=kinds, **rest)
    with torch.device("meta"):
        built = sum(p.numel() for p in transformers.AutoModelForCausalLM.from_config(hf)
                    .parameters())  # fmt: skip
    cfg = config_from_hf(MINIMAX_M1, "m", "config.json")
    assert cfg.param_count == built
    assert cfg.linear_layers == (0, 1, 2, 4, 5, 6) and cfg.is_lightning


def test_minimax_m1s_published_counts():
    """456B total and 45.9B activated (MiniMax-M1, arXiv 2506.13585), the active count
    without the embedding and LM head."""
    cfg = zoo_entry("minimax-m1-80k").config
    assert cfg.param_count == pytest.approx(456e9, rel=0.01)
    active = cfg.active_param_count - cfg.embedding_params - cfg.lm_head_params
    assert active == pytest.approx(45.9e9, rel=0.01)


def test_lightning_layers_cache_their_state_alone():
    """A lightning layer carries one head_dim x head_dim state per head and no convolution
    inputs; a decode step's cost does not grow with the context, and its KV cache is the
    softmax layers' tokens beside the states."""
    cfg = config_from_hf(MINIMAX_M1, "m", "config.json")
    assert cfg.linear_state_elements_per_layer() == 4 * 32 * 32
    assert cfg.linear_state_elements_per_layer(tp=2) == 2 * 32 * 32
    short, long = (next(op for op in build_step(cfg, StepShape(3, 1, context), DType.BF16)
                    if op.kind is OpKind.LINEAR_ATTENTION) for context in (9, 50_000))
    assert not long.attr("delta")
    assert long.bytes == short.bytes >= 2 * 3 * 4 * 32 * 32 * 2  # the state, read and written


def test_a_bad_attn_type_list_is_refused_by_name():
    with pytest.raises(UserError, match="'attn_type_list'"):
        config_from_hf({**MINIMAX_M1, "attn_type_list": [0, 2] * 4}, "m", "config.json")
    with pytest.raises(UserError, match="'shared_intermediate_size'"):
        config_from_hf({**MINIMAX_M1, "shared_intermediate_size": 64}, "m", "config.json")
