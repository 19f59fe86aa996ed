"""The built-in configs of the models people name: each read as its published parameter
count says, as transformers builds it, and named by its Hugging Face hub repo offline."""

from __future__ import annotations

import json

import pytest

from xpusim.workloads.transformer_config import NESTED, config_from_hf
from xpusim.workloads.zoo import ZOO_DIR, hub_names, load_model, model_ids, zoo_entry

HUB_ENTRIES = sorted(hub_names().values())


def test_at_least_forty_served_models_are_built_in():
    assert len(HUB_ENTRIES) >= 40


@pytest.mark.parametrize("model_id", HUB_ENTRIES)
def test_count_matches_the_published_figure(model_id):
    """Within 1%, or, where only a rounded name was published ("12B"), within its
    rounding."""
    entry = zoo_entry(model_id)
    count, published = entry.config.param_count, entry.published_params
    meta = json.loads((ZOO_DIR / f"{model_id}.json").read_text())["_xpusim"]
    if meta.get("published_params_include_mtp"):  # a checkpoint's total (DeepSeek's 685B)
        count += entry.config.mtp_params
    if entry.published_rounding:
        assert abs(count - published) <= entry.published_rounding / 2
    else:
        assert count == pytest.approx(published, rel=0.01)


@pytest.mark.parametrize("model_id", HUB_ENTRIES)
def test_named_by_its_hub_repo_in_any_case(model_id):
    entry = zoo_entry(model_id)
    assert load_model(entry.hf_repo) is entry.config
    assert load_model(entry.hf_repo.upper()) is entry.config


POSITION_TABLES = {"gpt2": ("n_positions", "n_embd", 0), "opt": (
    "max_position_embeddings", "hidden_size", 2), "bert": ("max_position_embeddings",
    "hidden_size", 0), "roberta": ("max_position_embeddings", "hidden_size", 0)}  # fmt: skip
"""Learned position tables transformers builds and xpusim does not count (a lookup, no
work): their config keys, and rows of offset (OPT's 2)."""


@pytest.mark.parametrize("model_id", HUB_ENTRIES)
def test_count_equals_what_transformers_builds(model_id):
    """The zoo file as transformers reads it, built on the meta device (no memory): the same
    parameters, less a learned position table; a multimodal file's language model alone."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    data = _fields(model_id)
    model_type = data.pop("model_type")
    if model_type in NESTED:
        data, model_type = dict(data["text_config"]), NESTED[model_type]
        data.pop("model_type", None)
    hf = transformers.AutoConfig.for_model(model_type, **data)
    config = zoo_entry(model_id).config
    auto = (transformers.AutoModel if config.encoder else transformers.AutoModelForSeq2SeqLM
            if config.is_encoder_decoder else transformers.AutoModelForCausalLM)  # fmt: skip
    with torch.device("meta"):
        built = sum(p.numel() for p in auto.from_config(hf).parameters())
    if model_type in POSITION_TABLES:
        rows, width, offset = POSITION_TABLES[model_type]
        built -= (getattr(hf, rows) + offset) * getattr(hf, width)
    assert zoo_entry(model_id).config.param_count == built


def _fields(model_id: str) -> dict:
    import json

    data = json.loads((ZOO_DIR / f"{model_id}.json").read_text())
    data.pop("_xpusim")
    return data


def test_every_zoo_file_reads_and_names_its_sources():
    for model_id in model_ids():
        entry = zoo_entry(model_id)
        assert entry.source and entry.params_source
        if entry.hf_repo:
            assert config_from_hf(_fields(model_id), model_id, "zoo").param_count > 0
