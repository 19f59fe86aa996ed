"""The built-in configs of the models people name: each read as its published parameter
count says, as transformers builds it, and named by its Hugging Face hub repo offline."""

from __future__ import annotations

import json

import pytest

from xpusim.errors import UserError
from xpusim.workloads.resolve import load_model
from xpusim.workloads.transformer_config import NESTED, config_from_hf
from xpusim.workloads.zoo import (
    ZOO_DIR,
    built_ids,
    hub_names,
    model_ids,
    zoo_entry,
    zoo_file,
)

HUB_ENTRIES = sorted(set(hub_names().values()))

NOT_YET: dict[str, str] = {}
"""Architectures whose configs are bundled before this tree builds them (docs/models.md
says what each needs): their files must be refused by model_type, one line naming it, and are
skipped here until they build. Any other file that does not build fails."""


def _entry(model_id: str):
    """The zoo entry, or a skip for a bundled architecture not built yet."""
    data = zoo_file(model_id)[1]
    model_type = data.get("model_type")
    try:
        return zoo_entry(model_id)
    except UserError as error:
        if model_type not in NOT_YET or f"model_type {model_type!r} is not supported" not in str(
            error
        ):
            raise
        pytest.skip(f"architecture {model_type} not yet supported: {NOT_YET[model_type]}")


def test_at_least_sixty_served_models_are_built_in():
    assert len(HUB_ENTRIES) >= 60
    assert len([i for i in HUB_ENTRIES if i in built_ids()]) >= 60


@pytest.mark.parametrize("model_id", HUB_ENTRIES)
def test_count_matches_the_published_figure(model_id):
    """Within 1%, or, where only a rounded name was published ("12B"), within its
    rounding; an MoE model's active count too where it is published, less what its source
    leaves out (zoo.ZooEntry.active_excludes)."""
    entry = _entry(model_id)
    count, published = entry.config.param_count, entry.published_params
    if published is None:
        pytest.skip(f"{model_id}: {entry.params_source}")
    meta = json.loads((ZOO_DIR / f"{model_id}.json").read_text())["_xpusim"]
    if meta.get("published_params_include_mtp"):  # a checkpoint's total (DeepSeek's 685B)
        count += entry.config.mtp_params
    if meta.get("published_params_include"):  # a part not built (a vision encoder): less,
        assert 0.97 * published <= count < published  # but by no more than such a part
    elif entry.published_rounding:
        assert abs(count - published) <= entry.published_rounding / 2
    else:
        assert count == pytest.approx(published, rel=0.01)
    if entry.published_active:
        cfg = entry.config
        active = cfg.active_param_count - {"": 0, "embedding": cfg.embedding_params,
            "embedding and head": cfg.embedding_params + cfg.lm_head_params}[
            entry.active_excludes]  # fmt: skip
        rounding = entry.published_active_rounding or 0
        assert (active == pytest.approx(entry.published_active, rel=0.01)
                or abs(active - entry.published_active) <= rounding / 2)  # fmt: skip


@pytest.mark.parametrize("model_id", HUB_ENTRIES)
def test_named_by_its_hub_repo_in_any_case(model_id):
    entry = _entry(model_id)
    assert load_model(entry.hf_repo) is entry.config
    assert load_model(entry.hf_repo.upper()) is entry.config


ALIASED = [i for i in model_ids() if zoo_file(i)[0].get("hf_aliases")]


@pytest.mark.parametrize("model_id", ALIASED)
def test_named_by_the_instruct_repos_users_serve(model_id):
    """`xpusim serve google/gemma-3-27b-it` offline (and without a hub login for Meta's gated
    repos): an alias of the same architecture, each with its source, named by no other file."""
    meta = zoo_file(model_id)[0]
    assert meta["aliases_source"] and model_id in ALIASED
    entry = _entry(model_id)
    for repo in meta["hf_aliases"]:
        assert load_model(repo) is entry.config and load_model(repo.lower()) is entry.config
        assert repo.lower() != meta["hf_repo"].lower()
    aliases = [r.lower() for i in ALIASED for r in zoo_file(i)[0]["hf_aliases"]]
    repos = {zoo_file(i)[0].get("hf_repo", "").lower() for i in model_ids()}
    assert len(aliases) == len(set(aliases)) and not set(aliases) & repos


@pytest.mark.parametrize("model_id", sorted(set(model_ids()) - set(built_ids())))
def test_a_bundled_architecture_not_built_yet_is_refused_in_one_line(model_id):
    """`xpusim run Qwen/Qwen3.5-397B-A17B` before its architecture lands: one line naming
    the model_type, never a traceback."""
    model_type = zoo_file(model_id)[1]["model_type"]
    assert model_type in NOT_YET
    with pytest.raises(UserError, match=f"model_type {model_type!r} is not supported"):
        load_model(zoo_file(model_id)[0]["hf_repo"])


TRANSFORMERS_TYPES = {"kimi_k2": "deepseek_v3", "minimax_m1": "minimax",
                      "deepseek_ref": "deepseek_v4", "qwen3_vl_text": "qwen3",
                      "qwen3_vl_moe_text": "qwen3_moe", "mimo": "qwen2"}
"""model_types transformers builds under another name: Kimi K2 is DeepSeek-V3's model;
sgl-project's `deepseek_ref` DeepSeek-V4's; Qwen3-VL's language models Qwen3's (as
transformer_config.READ_AS reads them; test_hub_names checks them against Qwen3-VL's own);
MiMo's remote code is Qwen2's model with multi-token-prediction layers, not built;
MiniMax-M1's remote code is transformers' MiniMax, its attn_type_list that model's
layer_types (0 lightning, 1 softmax)."""

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
    config = _entry(model_id).config
    data = _fields(model_id)
    model_type = data.pop("model_type")
    if model_type in NESTED:
        data, model_type = dict(data["text_config"]), NESTED[model_type]
        data.pop("model_type", None)
    data.pop("quantization_config", None)  # transformers would quantize on the meta device
    data.pop("auto_map", None)  # remote code: the library's own class is built instead
    if "attn_type_list" in data:
        data["layer_types"] = ["full_attention" if t else "linear_attention"
                               for t in data.pop("attn_type_list")]  # fmt: skip
    hf = transformers.AutoConfig.for_model(TRANSFORMERS_TYPES.get(model_type, model_type),
                                           **data)  # fmt: skip
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
    for model_id in built_ids():
        entry = zoo_entry(model_id)
        assert entry.source and entry.params_source
        if entry.hf_repo:
            assert config_from_hf(_fields(model_id), model_id, "zoo").param_count > 0
    for model_id in model_ids():
        meta = zoo_file(model_id)[0]
        assert meta["source"] and meta["params_source"]
