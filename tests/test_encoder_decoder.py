"""Encoder-decoders (T5): counted as transformers builds them; the encoder runs once in the
prefill, the decoder attends its own tokens and, through its cached K and V, the encoder's."""

from __future__ import annotations

import json

import pytest
from cli_run import config_file, refused, run_cli

import xpusim
from xpusim.ir.dtypes import DType
from xpusim.ir.op import OpKind
from xpusim.workloads.transformer import StepShape, build_step
from xpusim.workloads.transformer_config import config_from_hf

SMALL = dict(model_type="t5", d_model=256, d_kv=32, d_ff=512, num_layers=3, num_heads=8,
             vocab_size=1000)  # fmt: skip


@pytest.mark.parametrize("changes", [{}, {"feed_forward_proj": "gated-gelu",
                                          "tie_word_embeddings": False},
                                     {"num_decoder_layers": 2, "d_kv": 16}])  # fmt: skip
def test_counts_what_transformers_builds(changes):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    hf = transformers.T5Config(**{**{k: v for k, v in SMALL.items() if k != "model_type"},
                                  **changes})  # fmt: skip
    with torch.device("meta"):
        built = sum(p.numel() for p in transformers.T5ForConditionalGeneration(hf).parameters())
    assert config_from_hf(hf.to_dict(), "t5", "config.json").param_count == built


def _attention(graph):
    return {op.name: op for op in graph if op.kind is OpKind.ATTENTION}


def test_the_prefill_runs_the_encoder_and_the_decoders_first_token():
    cfg = config_from_hf(SMALL, "t5", "c")
    batch, prompt = 2, 40
    graph = build_step(cfg, StepShape(batch, prompt, prompt), DType.BF16)
    attention = _attention(graph)
    heads, d = 8, 32
    encoder = attention["encoder.0.attention"]  # every token sees every other
    assert encoder.matrix_flops == 2 * batch * heads * 2 * d * prompt * prompt
    cross = attention["layers.0.cross_attention"]  # the first token over the encoder
    assert cross.matrix_flops == 2 * batch * heads * 2 * d * prompt
    # 2 FLOPs per weight per token: encoder layers over the prompt, the decoder's over one
    # token, the cross K and V projections over the prompt, the LM head over one position
    h, i, width = 256, 512, heads * d
    matmuls = sum(op.matrix_flops for op in graph if op.kind is OpKind.MATMUL)
    encoder_layer, decoder_layer = 4 * h * width + 2 * h * i, 6 * h * width + 2 * h * i
    assert matmuls == 2 * (batch * prompt * 3 * encoder_layer + batch * 3 * decoder_layer
                           + batch * prompt * 3 * 2 * h * width + batch * h * 1000)  # fmt: skip


def test_a_decode_step_reads_the_cached_encoder_and_its_own_tokens():
    cfg = config_from_hf(SMALL, "t5", "c")
    prompt, generated = 40, 7  # step 7 attends 8 of its own tokens
    graph = build_step(cfg, StepShape(2, 1, prompt + generated + 1, cross=prompt), DType.BF16)
    attention = _attention(graph)
    assert "encoder.0.attention" not in attention
    own, cross = attention["layers.0.attention"], attention["layers.0.cross_attention"]
    assert own.inputs[1].shape[1] == generated + 1
    assert cross.inputs[1].shape[1] == prompt
    assert not any(op.name.endswith("cross_kv") for op in graph)  # projected once, cached


def test_a_run_costs_the_encoder_once_and_caches_its_keys_per_decoder_layer():
    cfg = config_from_hf(SMALL, "t5", "c")
    short, long = (xpusim.simulate(cfg, "h100-sxm", batch=4, prompt=64, gen=g) for g in (8, 64))
    assert short.ttft_s == long.ttft_s  # the encoder runs in the prefill only
    # the decoder's tokens and the encoder's output, K and V, per decoder layer, bf16
    per_token = 3 * 2 * 8 * 32 * 2
    assert long.memory_bytes.kv_cache == 4 * (64 + 64) * per_token


@pytest.mark.parametrize("args, message", [
    (["run", "--chips", "2", "--pp", "2"], "pipeline stages"),
    (["run", "--mode", "training"], "training an encoder-decoder"),
    (["serve", "--concurrency", "2"], "encoder-decoder"),
])  # fmt: skip
def test_what_is_not_modelled_is_refused_in_one_line(capsys, tmp_path, args, message):
    command, *rest = args
    path = config_file(tmp_path, SMALL)
    assert message in refused(capsys, command, path, "--chip", "h100-sxm", *rest)


def test_a_run_prints_its_json(capsys, tmp_path):
    path = config_file(tmp_path, SMALL)
    code, out, err = run_cli(capsys, "run", path, "--chip", "h100-sxm", "--json")
    assert code == 0, err
    assert json.loads(out)["params"] == config_from_hf(SMALL, "t5", "c").param_count
