"""Encoders (BERT, RoBERTa): counted as transformers builds them, run as one forward pass
with every token attending every other, and refused where only decoders make sense."""

from __future__ import annotations

import dataclasses
import json

import pytest
from cli_run import refused, run_cli

import xpusim
from xpusim.errors import UserError
from xpusim.ir.dtypes import DType
from xpusim.ir.op import OpKind
from xpusim.workloads.transformer import StepShape, build_step
from xpusim.workloads.transformer_config import config_from_hf

SMALL = dict(hidden_size=256, intermediate_size=1024, num_hidden_layers=2,
             num_attention_heads=4, vocab_size=1000, max_position_embeddings=128)  # fmt: skip


@pytest.mark.parametrize("model_type", ["bert", "roberta", "xlm-roberta"])
def test_encoders_count_what_transformers_builds(model_type):
    """transformers' encoder (AutoModel: embeddings, layers, pooler) on the meta device,
    less its learned position table, which xpusim does not count (as GPT-2's)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    hf = transformers.AutoConfig.for_model(model_type, **SMALL)
    with torch.device("meta"):
        module = transformers.AutoModel.from_config(hf)
    built = sum(p.numel() for p in module.parameters())
    built -= hf.max_position_embeddings * hf.hidden_size
    assert config_from_hf(hf.to_dict(), model_type, "config.json").param_count == built


def _bert(**changes):
    return dataclasses.replace(config_from_hf({"model_type": "bert", **SMALL}, "b", "c"),
                               **changes)  # fmt: skip


def test_every_token_attends_every_other():
    n = 100
    encoder, decoder = _bert(), _bert(encoder=False)
    flops = []
    for cfg in (encoder, decoder):
        graph = build_step(cfg, StepShape(2, n, n), DType.BF16)
        flops.append(sum(op.matrix_flops for op in graph if op.kind is OpKind.ATTENTION))
    assert flops[0] / flops[1] == pytest.approx(n * n / (n * (n + 1) / 2))


def test_an_encoder_pass_is_its_matmuls_and_a_pooler():
    """2 FLOPs per weight per token in every layer's matmuls, attention's 4 x heads x
    head_dim per score, the pooler on one token per sequence; no LM head, no cache."""
    cfg, batch, n = _bert(), 3, 64
    result = xpusim.simulate(cfg, "h100-sxm", batch=batch, prompt=n)
    h, i, layers = 256, 1024, 2
    matmul = 2 * batch * n * layers * (4 * h * h + 2 * h * i) + 2 * batch * h * h
    attention = 4 * batch * layers * n * n * h
    graph = build_step(cfg, StepShape(batch, n, n), DType.BF16)
    assert sum(op.matrix_flops for op in graph) == matmul + attention
    assert result.memory_bytes.weights == pytest.approx(
        (cfg.param_count - cfg.type_vocab_size * h) * 2)  # the type table is not read
    assert result.throughput == pytest.approx(batch / result.latency_s)
    assert not hasattr(result, "tpot_s")


def test_a_saved_bert_config_runs_as_an_encoder(capsys, tmp_path):
    transformers = pytest.importorskip("transformers")
    transformers.BertConfig().save_pretrained(tmp_path)
    code, out, err = run_cli(capsys, "run", str(tmp_path / "config.json"), "--chip", "h100-sxm",
                             "--batch", "8", "--json")  # fmt: skip
    assert code == 0, err
    found = json.loads(out)
    assert found["source"] == "config.json"
    assert found["inputs"] == {"input_ids": [8, 128]}
    assert "tpot_s" not in found and found["latency_s"] > 0
    assert found["memory_bytes"]["weights"] == pytest.approx((109_089_024 - 2 * 768) * 2)


@pytest.mark.parametrize("args, message", [
    (["run", "--gen", "4"], "--gen does not apply"),
    (["run", "--mode", "training"], "is an encoder"),
    (["serve", "--concurrency", "2"], "is an encoder"),
    (["run", "--prompt", "600"], "max_position_embeddings"),
    (["run", "--chips", "2"], "one chip"),
])  # fmt: skip
def test_what_an_encoder_does_not_do_is_refused_in_one_line(capsys, tmp_path, args, message):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "bert", "hidden_size": 768,
                                "intermediate_size": 3072, "num_hidden_layers": 12,
                                "num_attention_heads": 12, "vocab_size": 30522,
                                "max_position_embeddings": 512}))  # fmt: skip
    command, *rest = args
    assert message in refused(capsys, command, str(path), "--chip", "h100-sxm", *rest)


def test_an_encoder_needs_its_fields():
    with pytest.raises(UserError, match="missing field 'num_attention_heads'"):
        config_from_hf({"model_type": "bert", "hidden_size": 64, "intermediate_size": 128,
                        "num_hidden_layers": 2, "vocab_size": 100}, "b", "config.json")  # fmt: skip
