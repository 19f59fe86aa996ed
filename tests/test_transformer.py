"""The transformer builder against published parameter counts and hand-counted FLOPs."""

from __future__ import annotations

import json

import pytest

import xpusim
from xpusim.errors import UserError
from xpusim.ir.dtypes import DType
from xpusim.ir.op import OpKind, attention_pairs
from xpusim.ir.tensor import Role
from xpusim.workloads.resolve import load_model
from xpusim.workloads.transformer import StepShape, build_step
from xpusim.workloads.transformer_config import (
    config_from_hf,
    expected_active_experts,
)
from xpusim.workloads.zoo import ZOO_DIR, model_ids, zoo_entry

REQUIRED_ZOO = {"llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-65b", "llama-3-8b",
                "llama-3-70b", "mixtral-8x7b", "gpt-j-6b"}  # fmt: skip


def test_zoo_has_the_required_models():
    assert set(model_ids()) >= REQUIRED_ZOO


@pytest.mark.parametrize("model_id", sorted(REQUIRED_ZOO))
def test_parameter_counts_within_one_percent(model_id):
    entry = zoo_entry(model_id)
    assert entry.config.param_count == pytest.approx(entry.published_params, rel=0.01)


def test_llama_2_7b_exact_count():
    # 32 x (4 x 4096^2 + 3 x 4096 x 11008 + 2 x 4096) + 2 x 32000 x 4096 + 4096
    assert load_model("llama-2-7b").param_count == 6_738_415_616


def test_mixtral_active_parameters():
    cfg = load_model("mixtral-8x7b")
    assert cfg.active_param_count == pytest.approx(12.9e9, rel=0.01)  # paper: 13B active


def _attention_flops(cfg, batch, q, kv):
    return 4 * batch * cfg.num_heads * cfg.head_dim * attention_pairs(q, kv, True) * cfg.num_layers


@pytest.mark.parametrize("model_id", ["llama-2-7b", "llama-3-8b", "gpt-j-6b", "llama-2-70b"])
def test_prefill_flops_are_two_per_parameter_per_token_plus_attention(model_id):
    cfg = load_model(model_id)
    batch, prompt = 2, 64
    graph = build_step(cfg, StepShape(batch, prompt, prompt), DType.BF16)
    # every parameter multiplies once per token, except the embedding table (a lookup, no
    # FLOPs), norms (vector work) and the LM head, which runs on the last position only
    body = cfg.param_count - cfg.embedding_params - cfg.lm_head_params - cfg.final_norm_params
    body -= cfg.num_layers * cfg.norm_params_per_layer
    head = cfg.hidden_size * cfg.vocab_size
    biases = cfg.num_layers * (cfg.intermediate_size + cfg.hidden_size) if cfg.mlp_bias else 0
    expected = (2 * (body - biases) * batch * prompt + 2 * head * batch
                + _attention_flops(cfg, batch, prompt, prompt))  # fmt: skip
    assert graph.matrix_flops == pytest.approx(expected, rel=1e-9)
    assert graph.flops - graph.matrix_flops < 0.01 * graph.flops  # vector work is small


def test_decode_flops_grow_with_context(llama7b):
    short = build_step(llama7b, StepShape(1, 1, 100), DType.BF16)
    long = build_step(llama7b, StepShape(1, 1, 1100), DType.BF16)
    assert long.matrix_flops - short.matrix_flops == pytest.approx(
        _attention_flops(llama7b, 1, 1, 1100) - _attention_flops(llama7b, 1, 1, 100)
    )


def test_decode_reads_the_kv_cache_and_all_weights_once(llama7b):
    kv_len = 500
    graph = build_step(llama7b, StepShape(1, 1, kv_len), DType.FP16)
    kv_read = sum(t.nbytes for op in graph if op.kind is OpKind.ATTENTION for t in op.inputs[1:3])
    assert kv_read == kv_len * llama7b.kv_cache_bytes_per_token(2)
    weight_bytes = sum(op.bytes_by_role()[Role.WEIGHT] for op in graph)
    # all weights once, minus the embedding table (one row is gathered per token)
    table = llama7b.embedding_params * 2
    assert weight_bytes == pytest.approx(llama7b.param_count * 2 - table + 4096 * 2)


def test_weight_only_quantization_shrinks_weights_not_activations(llama7b):
    full = build_step(llama7b, StepShape(1, 1, 10), DType.BF16)
    quant = build_step(llama7b, StepShape(1, 1, 10), DType.BF16, DType.INT4)
    w = lambda g: sum(op.bytes_by_role()[Role.WEIGHT] for op in g)  # noqa: E731
    a = lambda g: sum(op.bytes_by_role()[Role.ACTIVATION] for op in g)  # noqa: E731
    assert w(quant) == pytest.approx(w(full) / 4)
    assert a(quant) == a(full)
    assert all(op.compute_dtype is DType.BF16 for op in quant if op.kind is OpKind.MATMUL)


def test_moe_decode_touches_only_routed_experts():
    cfg = load_model("mixtral-8x7b")
    graph = build_step(cfg, StepShape(1, 1, 10), DType.BF16)
    expert_weights = sum(op.bytes_by_role()[Role.WEIGHT] for op in graph if ".experts." in op.name)
    assert expert_weights == cfg.num_layers * cfg.experts_per_token * cfg.expert_params * 2


@pytest.mark.parametrize(("tokens", "expected"), [(1, 2), (2, 4), (1000, 8)])
def test_expected_active_experts(tokens, expected):
    assert expected_active_experts(tokens, 8, 2) == expected


def _hf(**overrides):
    """The llama-2-7b zoo config with fields replaced (None removes a field)."""
    base = json.loads((ZOO_DIR / "llama-2-7b.json").read_text())
    base.pop("_xpusim")
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not None}


def test_config_missing_field_names_it():
    with pytest.raises(UserError, match="missing field 'hidden_size'"):
        config_from_hf(_hf(hidden_size=None), "m", "config.json")


@pytest.mark.parametrize(
    ("field", "value"), [("num_hidden_layers", 0), ("vocab_size", -5), ("hidden_size", "big")]
)
def test_config_bad_values_name_the_field(field, value):
    with pytest.raises(UserError, match=field):
        config_from_hf(_hf(**{field: value}), "m", "config.json")


@pytest.mark.parametrize(("zoo_id", "field"), [
    ("gemma-3-1b", "num_hidden_layers"), ("deepseek-v3", "first_k_dense_replace"),
    ("mamba-130m", "state_size"), ("bert-base-uncased", "type_vocab_size"),
])  # fmt: skip
def test_a_null_where_a_default_exists_is_named_not_used(zoo_id, field):
    """A null in a field with a default reached arithmetic (TypeError): now it is refused,
    naming the field and the default that leaving it out would give."""
    config = json.loads((ZOO_DIR / f"{zoo_id}.json").read_text())
    config.pop("_xpusim")
    (config.get("text_config") or config)[field] = None
    with pytest.raises(UserError, match=f"{field}.*null.*default"):
        config_from_hf(config, "m", "config.json")


def test_a_null_sliding_window_means_none():
    mistral = config_from_hf({**_hf(), "model_type": "mistral", "sliding_window": None}, "m",
                             "config.json")  # fmt: skip
    assert config_from_hf(_hf(), "m", "config.json").param_count == mistral.param_count


def test_config_kv_heads_must_divide_heads():
    with pytest.raises(UserError, match="num_key_value_heads"):
        config_from_hf(_hf(num_key_value_heads=5), "m", "config.json")


def test_config_from_a_path(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_hf()))
    assert load_model(path).param_count == load_model("llama-2-7b").param_count
    path.write_text("{not json")
    with pytest.raises(UserError, match="malformed JSON"):
        load_model(path)


def test_unknown_model_suggests_close_names():
    with pytest.raises(UserError, match="llama-2-7b"):
        load_model("llama-2-7")


SMALL_HF = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                num_attention_heads=8, num_key_value_heads=4, vocab_size=1000, pad_token_id=0,
                n_embd=256, n_layer=2, n_head=8, rotary_dim=16, moe_intermediate_size=128,
                num_experts=4, num_local_experts=4, num_experts_per_tok=2,
                shared_expert_intermediate_size=384, n_routed_experts=8, n_shared_experts=2,
                first_k_dense_replace=1, kv_lora_rank=32, q_lora_rank=96, qk_rope_head_dim=16,
                qk_nope_head_dim=32, v_head_dim=24, n_group=2, topk_group=1,
                word_embed_proj_dim=256, ffn_dim=512)  # fmt: skip


@pytest.mark.parametrize("model_type", ["llama", "mistral", "mixtral", "qwen2", "phi3",
                                        "qwen3", "qwen3_moe", "qwen2_moe", "gemma", "gemma2",
                                        "gemma3_text", "gpt_oss", "gpt_neox", "opt", "gptj",
                                        "gpt2", "falcon", "deepseek_v2",
                                        "deepseek_v3"])  # fmt: skip
def test_each_dialect_counts_what_transformers_builds(model_type):
    """A small config of each model_type, saved by transformers, read by xpusim: the same
    parameters as transformers' own model on the meta device (GPT-2's learned position
    table aside, which xpusim does not count)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    hf = transformers.AutoConfig.for_model(model_type)
    for key, value in SMALL_HF.items():
        if hasattr(hf, key):
            setattr(hf, key, value)
    if getattr(hf, "layer_types", None):  # as the config would have made them for 2 layers
        hf.layer_types = hf.layer_types[: hf.num_hidden_layers]
    with torch.device("meta"):
        module = transformers.AutoModelForCausalLM.from_config(hf)
    built = sum(p.numel() for p in module.parameters())
    if model_type == "gpt2":
        built -= hf.n_positions * hf.n_embd
    if model_type == "opt":  # its learned position table, two rows of offset included
        built -= (hf.max_position_embeddings + 2) * hf.hidden_size
    saved = hf.to_dict()
    assert config_from_hf(saved, model_type, "config.json").param_count == built
    saved.pop("tie_word_embeddings", None)  # as hub files often omit it: the dialect's default
    assert config_from_hf(saved, model_type, "config.json").param_count == built


def test_gemma_layers_slide_as_transformers_says():
    """Gemma-2: every other layer has the 4,096-token window, from the first; Gemma-3 five
    of every six; a multimodal Gemma-3's text_config is its language model; layer_types,
    where a file has it, says which."""
    transformers = pytest.importorskip("transformers")
    gemma2 = config_from_hf(transformers.Gemma2Config().to_dict(), "g2", "config.json")
    assert gemma2.sliding_window == 4096 and gemma2.sliding_layers == tuple(range(0, 26, 2))
    g3 = transformers.Gemma3TextConfig(num_hidden_layers=12).to_dict()
    text = config_from_hf(g3, "g3", "config.json")
    assert text.sliding_layers == (0, 1, 2, 3, 4, 6, 7, 8, 9, 10)
    g3.pop("layer_types")  # files that predate it: sliding_window_pattern (6 by default)
    assert config_from_hf(g3, "g3", "config.json").sliding_layers == text.sliding_layers
    nested = config_from_hf({"model_type": "gemma3", "text_config": g3}, "g3", "config.json")
    assert nested.param_count == text.param_count and nested.qk_norm and nested.sandwich_norms
    with pytest.raises(UserError, match="'text_config'"):
        config_from_hf({"model_type": "gemma3"}, "g3", "config.json")
    with pytest.raises(UserError, match="'layer_types' must list 12 layers"):
        config_from_hf({**g3, "layer_types": ["sliding_attention"]}, "g3", "config.json")
    mistral = config_from_hf({**_hf(), "model_type": "mistral", "sliding_window": 4096}, "m",
                             "config.json")  # fmt: skip
    assert mistral.sliding_layers == tuple(range(32))
    with pytest.raises(UserError, match="word_embed_proj_dim"):  # OPT-350M's projections
        config_from_hf({"model_type": "opt", "hidden_size": 1024, "ffn_dim": 4096,
                        "num_hidden_layers": 24, "num_attention_heads": 16, "vocab_size": 50272,
                        "word_embed_proj_dim": 512}, "opt-350m", "config.json")  # fmt: skip
    oss = load_model("gpt-oss-120b")  # the model card's 116.83B; 128 tokens, every other layer
    assert oss.param_count == 116_829_156_672 and oss.sliding_layers == tuple(range(0, 36, 2))


def test_deepseek_reads_as_transformers_builds_it():
    """DeepSeek-V3's own sizes (transformers' defaults are V3's: 61 layers, 256 routed
    experts and one shared, the first 3 layers dense, MLA with a 512-wide latent), and
    V2-Lite's q projected from the hidden state (q_lora_rank null)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    v3 = transformers.DeepseekV3Config()
    lite = transformers.DeepseekV2Config(q_lora_rank=None, num_hidden_layers=3,
                                         first_k_dense_replace=1, num_experts_per_tok=6,
                                         n_routed_experts=16, moe_intermediate_size=64)
    for hf in (v3, lite):
        with torch.device("meta"):
            module = transformers.AutoModelForCausalLM.from_config(hf)
        ours = config_from_hf(hf.to_dict(), hf.model_type, "config.json")
        assert ours.param_count == sum(p.numel() for p in module.parameters())
    ours = config_from_hf(v3.to_dict(), "deepseek-v3", "config.json")
    assert (ours.param_count, ours.active_param_count) == (671_026_404_352, 37_552_282_624)
    assert ours.kv_cache_bytes_per_token(1) == 61 * (512 + 64)  # the latent, not 2 x 128 heads
    with pytest.raises(UserError, match="moe_layer_freq"):
        config_from_hf({**v3.to_dict(), "moe_layer_freq": 2}, "m", "config.json")


@pytest.mark.parametrize("model_type", ["whisper", "jamba", "rwkv", "falcon_mamba", 7,
                                        ["llama"]])  # fmt: skip
def test_an_unsupported_model_type_is_refused_by_name(model_type):
    data = {"model_type": model_type, "hidden_size": 64, "intermediate_size": 128,
            "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100}  # fmt: skip
    supported = (r"is not supported .*llama, llama4_text, mamba, mamba2, minimax_m1, "
                 r"minimax_m2, mistral")
    with pytest.raises(UserError, match=supported):
        config_from_hf(data, "m", "config.json")


def test_a_zoo_model_is_also_named_by_its_hub_repo():
    assert load_model("meta-llama/Llama-2-70b-hf") is load_model("llama-2-70b")
    assert load_model("MISTRALAI/mixtral-8x7b-v0.1") is load_model("mixtral-8x7b")
    with pytest.raises(UserError, match="meta-llama/Llama-2-7b-hf"):
        load_model("meta-llama/Llama-2-7b")


QWEN3_30B_A3B = {"model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144,
                 "moe_intermediate_size": 768, "num_hidden_layers": 48,
                 "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
                 "num_local_experts": 128, "num_experts_per_tok": 8, "vocab_size": 151936,
                 "tie_word_embeddings": False, "decoder_sparse_step": 1,
                 "mlp_only_layers": []}  # fmt: skip
"""Qwen3-30B-A3B's shape (Qwen's model card: 30.5B parameters, 3.3B activated; 48 layers,
32 query and 4 KV heads, 128 experts, 8 activated), with transformers 5's key names."""


def test_qwen3_moe_reads_as_its_model_card_says_in_either_key_naming():
    config = config_from_hf(QWEN3_30B_A3B, "qwen3-30b-a3b", "config.json")
    assert config.param_count / 1e9 == pytest.approx(30.5, abs=0.05)
    assert config.active_param_count / 1e9 == pytest.approx(3.3, abs=0.06)
    four = {k: v for k, v in QWEN3_30B_A3B.items() if k != "num_local_experts"}
    four["num_experts"] = 128  # transformers 4.x's name
    assert config_from_hf(four, "q", "config.json").param_count == config.param_count
    # decode at batch 1 reads 8 of the 128 experts: above the active weights' streaming
    # time, well below the whole model's
    result = xpusim.simulate(config, "h100-sxm", precision="bf16")
    active_s, whole_s = (2 * n / 3.35e12 for n in (config.active_param_count, config.param_count))
    assert result.fits and active_s < result.tpot_s < whole_s / 2


@pytest.mark.parametrize("change, words", [
    ({"decoder_sparse_step": 2}, "dense layers among the experts"),
    ({"mlp_only_layers": [0, 1]}, "dense layers among the experts"),
    ({"num_local_experts": None}, "'num_local_experts' or 'num_experts'"),
])  # fmt: skip
def test_qwen3_moe_refuses_what_it_cannot_cost(change, words):
    data = {k: v for k, v in {**QWEN3_30B_A3B, **change}.items() if v is not None}
    with pytest.raises(UserError, match=words):
        config_from_hf(data, "q", "config.json")


def test_a_shared_expert_runs_for_every_token():
    """Qwen2-MoE's shared expert is active for every token: decode at batch 1 streams it beside
    the routed experts, so removing it lowers both the parameters and the TPOT."""
    import dataclasses

    shared = config_from_hf({**QWEN3_30B_A3B, "model_type": "qwen2_moe",
                             "shared_expert_intermediate_size": 4096}, "q2", "config.json")
    plain = dataclasses.replace(shared, shared_expert_width=0)
    extra = 3 * 2048 * 4096 + 2048  # gate_up, down and the sigmoid gate, per layer
    assert shared.param_count - plain.param_count == 48 * extra
    assert shared.active_param_count - plain.active_param_count == 48 * extra
    fast, slow = (xpusim.simulate(c, "h100-sxm", precision="bf16").tpot_s for c in (plain, shared))
    assert slow > fast


@pytest.mark.parametrize("flags", [
    {"new_decoder_architecture": True, "num_kv_heads": 2},  # Falcon-40B/180B: GQA, two norms
    {"bias": True, "multi_query": False},  # every head its own KV, biases everywhere
    {"alibi": True, "parallel_attn": False},  # ALiBi, serial block
])  # fmt: skip
def test_falcon_variants_count_what_transformers_builds(flags):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    hf = transformers.AutoConfig.for_model("falcon", hidden_size=256, num_hidden_layers=2,
                                           num_attention_heads=8, vocab_size=1000,
                                           ffn_hidden_size=1024, **flags)  # fmt: skip
    with torch.device("meta"):
        built = sum(p.numel() for p in transformers.AutoModelForCausalLM.from_config(hf)
                    .parameters())  # fmt: skip
    assert config_from_hf(hf.to_dict(), "falcon", "config.json").param_count == built


def test_falcon_7b_has_one_kv_head():
    """FalconConfig's defaults are Falcon-7B: 6.9B parameters and multi-query attention, so
    its KV cache is one head's (read as a Llama it was 71 heads' and 11.2B parameters)."""
    transformers = pytest.importorskip("transformers")
    config = config_from_hf(transformers.AutoConfig.for_model("falcon").to_dict(), "f", "c")
    assert config.param_count / 1e9 == pytest.approx(6.92, abs=0.01)
    assert config.num_kv_heads == 1 and config.kv_cache_bytes_per_token(2) == 2 * 32 * 64 * 2
