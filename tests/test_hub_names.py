"""The names users type for the models they serve: every alias builds the architecture its own
config has, NVIDIA's aiconfigurator's default repos resolve or say why not, and a fine-tune
the zoo lacks is answered with the release it has."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from cli_run import refused, run_cli

from xpusim.errors import UserError
from xpusim.workloads.checkpoint import read_checkpoint
from xpusim.workloads.resolve import load_model
from xpusim.workloads.transformer_config import config_from_hf
from xpusim.workloads.zoo import hub_names, model_ids, unbuilt_repos, zoo_file

HUB_CONFIGS = Path(__file__).parent / "data" / "hub_configs"
"""Copies of aliased repos' config.json (file `org--name.json`), each with the public copy it
was read from in `_evidence`: what an alias is checked against."""


def _repo(path: Path) -> str:
    return path.stem.replace("--", "/", 1)


def _architecture(config) -> dict:
    """Every field the layer builder reads, less the name and the checkpoint's record."""
    fields = dataclasses.asdict(config)
    for key in ("name", "checkpoint", "unquantized"):
        fields.pop(key, None)
    return fields


@pytest.mark.parametrize("path", sorted(HUB_CONFIGS.glob("*.json")), ids=lambda p: p.stem)
def test_an_alias_builds_what_its_own_config_builds(path):
    """An alias is the zoo file of another repo: only where the alias's own config.json gives
    the same model, field for field (positions and rope included), and the same checkpoint
    format; a Qwen2.5 -Instruct repo (32K positions against its base's 128K) needs its own
    file, and this catches it."""
    data = json.loads(path.read_text())
    assert data.pop("_evidence").startswith(_repo(path))
    zoo_id = hub_names()[_repo(path).lower()]
    built = load_model(_repo(path))
    assert _architecture(config_from_hf(dict(data), _repo(path), str(path))) == \
        _architecture(built)  # fmt: skip
    assert read_checkpoint(data, None, str(path)) == read_checkpoint(
        zoo_file(zoo_id)[1], zoo_file(zoo_id)[0].get("hf_quant_config"), "zoo")


def test_an_instruct_release_with_other_positions_is_its_own_file():
    """What the check above catches: Qwen2.5-7B-Instruct states 32,768 positions where its
    base states 131,072, so it is a file of its own, not the base's alias."""
    instruct, base = load_model("Qwen/Qwen2.5-7B-Instruct"), load_model("Qwen/Qwen2.5-7B")
    assert instruct is not base and instruct.max_position_embeddings == 32768
    assert {k for k, v in _architecture(instruct).items() if _architecture(base)[k] != v} == {
        "max_position_embeddings"}


STATED_ALIASES = {
    "Qwen/Qwen3-Coder-Next",
    "google/gemma-3-1b-it", "google/gemma-3-4b-it", "google/gemma-3-12b-it",
    "google/gemma-3-27b-it", "meta-llama/Meta-Llama-3-8B-Instruct",
    "meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Meta-Llama-3.1-8B-Instruct",
    "meta-llama/Meta-Llama-3-70B-Instruct", "meta-llama/Llama-3.1-405B-Instruct",
    "meta-llama/Meta-Llama-3.1-405B-Instruct", "meta-llama/Llama-3.2-3B-Instruct",
    "mistralai/Mixtral-8x7B-Instruct-v0.1", "meta-llama/Meta-Llama-3.1-405B-Instruct-FP8",
    "meta-llama/Llama-3.1-405B-FP8", "meta-llama/Meta-Llama-3.1-405B-FP8",
    "meta-llama/Llama-2-70b-chat-hf", "neuralmagic/Llama-3.3-70B-Instruct-FP8-dynamic",
    "neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8", "amd/DeepSeek-R1-0528-MXFP4-Preview",
    "deepseek-ai/DeepSeek-V3-0324", "deepseek-ai/DeepSeek-V3.1-Terminus",
    "deepseek-ai/DeepSeek-V3.2-Exp", "zai-org/GLM-4.6", "MiniMaxAI/MiniMax-M2",
    "MiniMaxAI/MiniMax-M2.1", "mistralai/Mistral-Small-24B-Instruct-2501",
    "google/gemma-2-27b-it", "deepseek-ai/DeepSeek-R1-Distill-Llama-8B",
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B", "Qwen/Qwen3-235B-A22B-Thinking-2507",
    "Qwen/Qwen3-30B-A3B-Instruct-2507", "Qwen/Qwen2.5-Coder-32B-Instruct",
    "nvidia/DeepSeek-R1-0528-NVFP4-v2", "Qwen/Qwen3-235B-A22B-Thinking-2507-FP8",
}  # fmt: skip
"""Aliases with no copy of their own config.json here: each file's aliases_source states what
says the release is the same architecture (a model card, a config dump it compared)."""


def test_every_alias_has_its_config_to_check():
    aliases = {r for i in model_ids() for r in zoo_file(i)[0].get("hf_aliases", ())}
    kept = {_repo(p) for p in HUB_CONFIGS.glob("*.json")}
    assert aliases - STATED_ALIASES == kept


AICONFIGURATOR_DEFAULTS = [
    "meta-llama/Meta-Llama-3.1-8B", "meta-llama/Meta-Llama-3.1-70B",
    "meta-llama/Meta-Llama-3.1-405B", "nvidia/Llama-3.1-70B-Instruct-FP8",
    "deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V3", "nvidia/DeepSeek-V3.1-NVFP4",
    "moonshotai/Kimi-K2.5", "moonshotai/Kimi-K3", "nvidia/Kimi-K2.5-NVFP4",
    "nvidia/Kimi-K2.6-NVFP4", "nvidia/Kimi-K2.7-Code-NVFP4", "deepseek-ai/DeepSeek-V3.2",
    "nvidia/DeepSeek-V3.2-NVFP4", "zai-org/GLM-5", "zai-org/GLM-5-FP8", "nvidia/GLM-5-NVFP4",
    "zai-org/GLM-5.1", "zai-org/GLM-5.1-FP8", "nvidia/GLM-5.1-NVFP4", "zai-org/GLM-5.2",
    "zai-org/GLM-5.2-FP8", "nvidia/GLM-5.2-NVFP4", "deepseek-ai/DeepSeek-V4-Flash",
    "deepseek-ai/DeepSeek-V4-Pro", "sgl-project/DeepSeek-V4-Flash-FP8",
    "sgl-project/DeepSeek-V4-Pro-FP8", "nvidia/DeepSeek-V4-Flash-NVFP4",
    "nvidia/DeepSeek-V4-Pro-NVFP4", "Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B", "Qwen/Qwen3-8B",
    "Qwen/Qwen3-32B", "Qwen/Qwen3-32B-FP8", "Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-30B-A3B-FP8",
    "Qwen/Qwen3-235B-A22B", "Qwen/Qwen3-235B-A22B-FP8", "Qwen/Qwen3-Coder-480B-A35B-Instruct",
    "nvidia/Qwen3-235B-A22B-NVFP4", "Qwen/Qwen3-32B-FP8-Static-PerTensor",
    "Qwen/Qwen3-VL-2B-Instruct", "Qwen/Qwen3-VL-4B-Instruct", "Qwen/Qwen3-VL-8B-Instruct",
    "Qwen/Qwen3-VL-30B-A3B-Instruct", "Qwen/Qwen3-VL-32B-Instruct", "Qwen/Qwen3-VL-32B-Thinking",
    "Qwen/Qwen3-VL-235B-A22B-Instruct", "MiniMaxAI/MiniMax-M2.5", "nvidia/MiniMax-M2.5-NVFP4",
    "MiniMaxAI/MiniMax-M2.7", "nvidia/MiniMax-M2.7-NVFP4", "MiniMaxAI/MiniMax-M3",
    "nvidia/MiniMax-M3-NVFP4", "openai/gpt-oss-120b", "openai/gpt-oss-20b",
    "meta-llama/Llama-4-Scout-17B-16E-Instruct", "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
    "Qwen/Qwen3.5-27B", "Qwen/Qwen3.5-35B-A3B", "Qwen/Qwen3.5-397B-A17B",
    "nvidia/Qwen3.5-122B-A10B-NVFP4", "nvidia/Qwen3.5-397B-A17B-NVFP4", "nvidia/Qwen3.6-27B-NVFP4",
    "nvidia/Qwen3.6-35B-A3B-NVFP4", "XiaomiMiMo/MiMo-V2-Flash", "XiaomiMiMo/MiMo-7B-Base",
    "nvidia/Llama-3_3-Nemotron-Super-49B-v1", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4", "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8",
    "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4",
    "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16",
    "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-FP8",
    "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-NVFP4", "nvidia/Nemotron-H-56B-Base-8K",
    "google/gemma-4-26B-A4B", "stepfun-ai/Step-3.7-Flash", "stepfun-ai/Step-3.7-Flash-FP8",
    "nvidia/Gemma-4-26B-A4B-NVFP4", "nvidia/Gemma-4-31B-IT-NVFP4",
]  # fmt: skip
"""aiconfigurator's DefaultHFModels with DEEPSEEK_V4_HF_MODELS (github.com/ai-dynamo/
aiconfigurator aic-core/src/aiconfigurator_core/sdk/common.py, commit 095f58a51c4c): the
names its users type, and ours."""


@pytest.mark.parametrize("repo", AICONFIGURATOR_DEFAULTS)
def test_aiconfigurators_default_models_resolve_or_say_why(repo):
    """Offline: each builds, or is refused in one line naming its model_type."""
    if repo.lower() in hub_names():
        assert load_model(repo) is not None
        return
    with pytest.raises(UserError, match=r"its architecture is not built yet \(model_type '") \
            as error:  # fmt: skip
        load_model(repo)
    assert "\n" not in str(error.value)


def test_an_unbuilt_repo_is_in_no_zoo_file():
    """A repo leaves unbuilt.toml when its config enters the zoo."""
    assert not set(unbuilt_repos()) & set(hub_names())


def test_an_unbuilt_repo_is_refused_in_one_line_on_the_command_line(capsys):
    err = refused(capsys, "run", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "--chip",
                  "h100-sxm")  # fmt: skip
    assert "model_type 'nemotron_h'" in err and "Mamba-2" in err


@pytest.mark.parametrize(("typed", "release"), [
    ("Qwen/Qwen2.5-0.5B-Instruct", "Qwen/Qwen2.5-0.5B"),
    ("Qwen/Qwen3-1.7B-FP8", "Qwen/Qwen3-1.7B"),
    ("Qwen/Qwen3-4B-Thinking-2507", "Qwen/Qwen3-4B"),
    ("RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8-dynamic", "meta-llama/Llama-3.1-8B"),
    ("google/gemma-2-2b-it", "google/gemma-2-2b"),
    ("zai-org/GLM-4.7-FP8", "zai-org/GLM-4.7"),
])  # fmt: skip
def test_a_fine_tune_the_zoo_lacks_is_answered_with_its_release(typed, release, monkeypatch):
    """The suggestion names the release of the same model first (difflib alone missed
    Llama-3.2-3B for its -Instruct and offered Llama-3.1-70B-Instruct-FP8 for RedHatAI's
    8B), without making the alias: its architecture is not known equal."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", "/nonexistent")
    with pytest.raises(UserError, match="did you mean ") as error:
        load_model(typed)
    assert str(error.value).split("did you mean ")[1].startswith(release)


@pytest.mark.parametrize("repo", [
    "meta-llama/Meta-Llama-3.1-8B", "meta-llama/Llama-3.1-70B-Instruct",
    "meta-llama/Meta-Llama-3.1-405B", "zai-org/GLM-5.1-FP8", "nvidia/Kimi-K2.6-NVFP4",
    "nvidia/MiniMax-M2.7-NVFP4", "Qwen/Qwen2.5-7B-Instruct", "google/gemma-2-9b-it",
    "Qwen/Qwen3-VL-8B-Instruct", "amd/DeepSeek-R1-0528-MXFP4-Preview", "zai-org/GLM-4.6",
    "MiniMaxAI/MiniMax-M2", "moonshotai/Kimi-K2-Thinking", "Qwen/Qwen3-30B-A3B-Instruct-2507",
    "deepseek-ai/DeepSeek-V3-0324", "zai-org/GLM-4.5-Air", "amd/MiniMax-M2.5-MXFP4",
    "amd/GLM-5.1-MXFP4", "amd/Kimi-K2.5-MXFP4", "amd/Qwen3.5-397B-A17B-MXFP4",
    "nvidia/DeepSeek-R1-0528-NVFP4-v2", "nvidia/Qwen3.5-397B-A17B-NVFP4-V2",
])  # fmt: skip
def test_run_takes_the_new_names(capsys, repo):
    code, out, err = run_cli(capsys, "run", repo, "--chip", "h100-sxm", "--json")
    assert code == 0, err
    assert json.loads(out)["model"] == hub_names()[repo.lower()]


@pytest.mark.parametrize("model_id", ["qwen3-vl-2b-instruct", "qwen3-vl-30b-a3b-instruct"])
def test_qwen3_vl_is_read_as_the_language_model_transformers_builds(model_id):
    """READ_AS reads Qwen3-VL's text_config as Qwen3's (MoE) layers: transformers' own
    Qwen3-VL, built on the meta device, less its vision tower has the same parameters."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    data = dict(zoo_file(model_id)[1])
    hf = transformers.AutoConfig.for_model(data.pop("model_type"), **data)
    with torch.device("meta"):
        model = transformers.AutoModelForImageTextToText.from_config(hf)
    language = sum(p.numel() for name, p in model.named_parameters()
                   if not name.startswith("model.visual."))  # fmt: skip
    assert load_model(model_id).param_count == language
