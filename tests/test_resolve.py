"""Model names as users type them (workloads/resolve.py): the zoo, a path, the Hugging Face
cache (built here in tmp_path, as huggingface_hub lays it out), the hub only when online;
and a quantized repo's checkpoint format (workloads/checkpoint.py) as the run's defaults."""

from __future__ import annotations

import json
import socket
import sys
import types

import pytest
from click.testing import CliRunner

from xpusim import api
from xpusim.cli import cli
from xpusim.errors import UserError
from xpusim.workloads.checkpoint import Checkpoint, checkpoint_options, read_checkpoint
from xpusim.workloads.resolve import listed_models, resolve
from xpusim.workloads.zoo import zoo_entry, zoo_file

TINY = zoo_file("llama-3.2-1b")[1]  # a real config.json's fields, 1.2B parameters


def _cache(root, repo: str, config: dict, commit: str = "0123abcd", ref: str = "main",
           hf_quant: dict | None = None):  # fmt: skip
    """A hub cache holding one repo's config.json at `commit`, refs/<ref> naming it."""
    folder = root / f"models--{repo.replace('/', '--')}"
    snapshot = folder / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps(config))
    if hf_quant is not None:
        (snapshot / "hf_quant_config.json").write_text(json.dumps(hf_quant))
    (folder / "refs").mkdir()
    (folder / "refs" / ref).write_text(commit)
    return snapshot


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    root = tmp_path / "hub"
    root.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(root))
    return root


def test_an_unknown_repo_in_the_cache_runs_offline(hub_cache):
    snapshot = _cache(hub_cache, "acme/tiny-llama", TINY)
    found = resolve("acme/tiny-llama")
    assert (found.origin, found.where) == ("cache", str(snapshot))
    assert found.workload.name == "acme/tiny-llama"
    assert found.workload.param_count == zoo_entry("llama-3.2-1b").config.param_count
    assert resolve("ACME/Tiny-Llama").workload == found.workload  # repo ids in any case


def test_the_cache_is_found_under_hf_home_too(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    _cache(tmp_path / "hf" / "hub", "acme/tiny", TINY)
    assert resolve("acme/tiny").origin == "cache"


def test_a_revision_names_a_branch_or_a_commit(hub_cache):
    _cache(hub_cache, "acme/tiny", TINY, commit="c0ffee", ref="v2")
    assert resolve("acme/tiny@v2").origin == "cache"
    assert resolve("acme/tiny@c0ffee").origin == "cache"
    with pytest.raises(UserError, match="not in the Hugging Face cache"):
        resolve("acme/tiny")  # no refs/main


def test_without_it_one_line_says_what_was_tried(hub_cache):
    with pytest.raises(UserError) as caught:
        resolve("acme/missing")
    message = str(caught.value)
    assert "\n" not in message
    for tried in ("not in the zoo", "no such file or folder", str(hub_cache),
                  "hub not asked (offline"):  # fmt: skip
        assert tried in message


def test_the_cli_says_it_in_one_line_with_exit_2(hub_cache):
    result = CliRunner().invoke(cli, ["run", "acme/missing", "--chip", "h100-sxm"])
    assert result.exit_code != 0 and "acme/missing" in str(result.exception)
    _cache(hub_cache, "acme/tiny", TINY)
    ran = CliRunner().invoke(cli, ["run", "acme/tiny", "--chip", "h100-sxm", "--json"])
    assert ran.exit_code == 0, ran.output
    assert json.loads(ran.output)["model"] == "acme/tiny"


def test_the_hub_is_asked_only_online(hub_cache, monkeypatch, tmp_path):
    """A stand-in huggingface_hub: asked for config.json when online, never offline, and
    --offline holds for its command only."""
    asked = []
    snapshot = tmp_path / "fetched"
    snapshot.mkdir()
    (snapshot / "config.json").write_text(json.dumps(TINY))

    def download(repo, filename, revision=None):
        asked.append((repo, filename))
        if filename != "config.json":
            raise FileNotFoundError(filename)
        return str(snapshot / filename)

    monkeypatch.setitem(sys.modules, "huggingface_hub",
                        types.SimpleNamespace(hf_hub_download=download))  # fmt: skip
    with pytest.raises(UserError, match="hub not asked"):
        resolve("acme/online")
    assert not asked
    monkeypatch.delenv("HF_HUB_OFFLINE")
    found = resolve("acme/online")
    assert (found.origin, found.workload.name) == ("hub", "acme/online")
    assert asked == [("acme/online", "config.json"), ("acme/online", "hf_quant_config.json")]
    offline = CliRunner().invoke(cli, ["run", "acme/online", "--chip", "h100-sxm", "--offline"])
    assert "hub not asked" in str(offline.exception)
    assert resolve("acme/online").origin == "hub"  # the flag ended with its command
    CliRunner().invoke(cli, ["run", "acme/online", "--offline", "--batch", "0"])  # refused
    assert resolve("acme/online").origin == "hub"  # ... also when its command was refused


def test_a_hub_failure_is_said_in_a_few_words(hub_cache, monkeypatch):
    class RepositoryNotFoundError(Exception):
        pass

    def download(repo, filename, revision=None):
        raise RepositoryNotFoundError("404 Client Error\nlong body")

    monkeypatch.setitem(sys.modules, "huggingface_hub",
                        types.SimpleNamespace(hf_hub_download=download))  # fmt: skip
    monkeypatch.delenv("HF_HUB_OFFLINE")
    with pytest.raises(UserError, match=r"hub: no such repo \(or a private one\)$"):
        resolve("acme/nowhere")


def test_a_hub_whose_name_resolves_nowhere_is_not_asked(hub_cache, monkeypatch):
    """huggingface_hub retries a connection that cannot be made five times with back-off
    (23 s with no DNS): where the hub's host has no address, that is said at once, without
    asking the client."""
    pytest.importorskip("huggingface_hub")
    asked = []
    monkeypatch.setattr("huggingface_hub.hf_hub_download",
                        lambda *a, **k: asked.append(a))  # fmt: skip

    def no_address(host, port):
        raise socket.gaierror(-2, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_address)
    monkeypatch.delenv("HF_HUB_OFFLINE")
    with pytest.raises(UserError, match=r"hub: cannot be reached \(no network\?\)$"):
        resolve("acme/nowhere")
    assert not asked


def test_a_mirror_endpoint_is_looked_up_at_its_own_port(monkeypatch):
    """HF_ENDPOINT may name a mirror on a port of its own (or plain http): the address is
    asked for there, and the hub's own at 443."""
    from xpusim.workloads.resolve import _resolves

    asked = []
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, port: asked.append((host, port)))
    assert _resolves("http://mirror.local:8080") and _resolves("http://mirror.local")
    assert _resolves("https://huggingface.co") and _resolves("")
    assert asked == [("mirror.local", 8080), ("mirror.local", 80), ("huggingface.co", 443)]


def test_a_snapshot_folder_and_a_config_path(tmp_path, monkeypatch):
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY))
    monkeypatch.chdir(tmp_path)
    for name in ("./my-model/", "my-model", str(folder), "my-model/config.json"):
        found = resolve(name)
        assert found.origin == "file" and found.workload.name == "my-model", name
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match=r"a folder without config\.json"):
        resolve("./empty")
    with pytest.raises(UserError, match="no such file or folder"):
        resolve("./nothing/")


def test_a_file_named_like_a_zoo_model_does_not_shadow_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "llama-2-7b").write_text("not a config")
    assert resolve("llama-2-7b").origin == "zoo"


def test_the_web_api_reads_no_path(tmp_path, monkeypatch):
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match="unknown model"):
        resolve("./config.json", paths=False)


def test_models_lists_the_cache_beside_the_zoo(hub_cache):
    _cache(hub_cache, "acme/tiny", TINY)
    _cache(hub_cache, "acme/odd", {"model_type": "no_such_type"})
    found = {m.id: m for m in listed_models()}
    assert found["llama-2-7b"].origin == "zoo"
    assert found["acme/tiny"].origin == "cache" and found["acme/tiny"].config is not None
    assert "no_such_type" in found["acme/odd"].error
    assert found["deepseek-v4-pro"].config is not None  # deepseek_v4, built since issue #43
    out = CliRunner().invoke(cli, ["models", "--json"])
    rows = {m["id"]: m for m in json.loads(out.output)["models"]}
    assert rows["acme/tiny"]["origin"] == "cache" and rows["deepseek-r1"]["origin"] == "zoo"


# Checkpoint formats, each as its repo's file declares it (real files' fields, trimmed)
MODELOPT = {"producer": {"name": "modelopt"}, "quantization": {
    "quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8", "group_size": 16,
    "exclude_modules": ["lm_head", "model.layers.0.self_attn*",
                        "model.layers.0.post_attention_layernorm"]}}  # fmt: skip
# gpt-oss's mxfp4, Kimi-K2.5's compressed-tensors W4A16, an NVFP4 and a Quark MXFP4 repo
FORMATS = [
    ({"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]},
     ("fp8-block", "fp8", None)),
    ({"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn",
      "lm_head"]}, ("mxfp4", None, None)),
    ({"quant_method": "awq", "bits": 4, "group_size": 128}, ("int4", None, None)),
    ({"quant_method": "gptq", "bits": 4, "group_size": 32}, ("int4-g32", None, None)),
    ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {
        "weights": {"num_bits": 4, "type": "int", "group_size": 32}}}},
     ("int4-g32", None, None)),
    ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {
        "weights": {"num_bits": 4, "type": "float", "group_size": 16},
        "input_activations": {"num_bits": 4, "type": "float", "group_size": 16}}},
      "kv_cache_scheme": {"num_bits": 8, "type": "float"}},
     ("nvfp4", "nvfp4", "fp8")),
    ({"quant_method": "quark", "global_quant_config": {
        "weight": {"dtype": "fp4", "qscheme": "per_group", "group_size": 32},
        "input_tensors": {"dtype": "fp4", "qscheme": "per_group", "group_size": 32}},
      "exclude": ["lm_head"]}, ("mxfp4", "mxfp4", None)),
]  # fmt: skip


@pytest.mark.parametrize(("quantization", "expected"), FORMATS)
def test_each_method_reads_as_a_format_xpusim_costs(quantization, expected):
    found = read_checkpoint({"quantization_config": quantization}, None, "test")
    assert (found.weights, found.compute, found.kv) == expected


def test_modelopt_reads_its_own_file_and_what_it_excludes():
    found = read_checkpoint({}, MODELOPT, "test")
    assert (found.weights, found.compute, found.kv) == ("nvfp4", "nvfp4", "fp8")
    assert found.keeps_attention and found.keeps_head
    assert not read_checkpoint({"quantization_config": FORMATS[0][0] | {
        "modules_to_not_convert": ["model.layers.0.post_attention_layernorm"]}},
        None, "test").keeps_attention  # a norm named after attention is not attention


def test_an_unread_format_resolves_and_asks_for_flags():
    found = read_checkpoint({"quantization_config": {"quant_method": "bitsandbytes"}}, None, "t")
    assert found.weights is None and "bitsandbytes" in found.unread
    cfg = zoo_entry("llama-3.2-1b").config
    from dataclasses import replace

    with pytest.raises(UserError, match="give --precision or --weight-precision"):
        api.simulate(replace(cfg, checkpoint=found), "h100-sxm")
    assert api.simulate(replace(cfg, checkpoint=found), "h100-sxm", precision="bf16").fits


def test_the_checkpoint_sets_the_formats_flags_override(hub_cache):
    _cache(hub_cache, "acme/tiny-fp4", TINY, hf_quant=MODELOPT)
    model = api.model("acme/tiny-fp4")
    on_b200 = api.simulate(model, "b200")
    assert (on_b200.precision, on_b200.weight_precision) == ("nvfp4", "nvfp4")
    assert any("checkpoint format: modelopt nvfp4" in n for n in on_b200.notes)
    on_h100 = api.simulate(model, "h100-sxm")  # no FP4 matrix format: weight-only
    assert (on_h100.precision, on_h100.weight_precision) == ("bf16", "nvfp4")
    told = api.simulate(model, "b200", precision="fp8")
    assert (told.precision, told.weight_precision) == ("fp8", "fp8")


def test_serve_uses_the_checkpoint_format(hub_cache):
    _cache(hub_cache, "acme/tiny-fp4", TINY, hf_quant=MODELOPT)
    served = api.serve("acme/tiny-fp4", "b200", concurrency=2, requests=8, prompt=64, gen=16)
    assert served.weight_precision == "nvfp4"


def test_an_experts_only_checkpoint_says_what_it_counts_narrower():
    """An NVFP4 repo that keeps its attention unquantized is costed so (the builder keeps
    those projections 16-bit): no note; DeepSeek-V4's FP8 attention beside MXFP4 experts
    is stored as MXFP4, and the notes say how much that is."""
    chip = api.target("b200")
    taken = ["precision", "weight_precision"]
    cfg = zoo_entry("deepseek-v3-0324-nvfp4").config
    assert cfg.checkpoint.keeps_attention and cfg.unquantized == cfg.checkpoint.excluded
    options, notes = checkpoint_options(cfg, chip, taken, {})
    assert options == {"precision": "nvfp4", "weight_precision": "nvfp4"}
    assert not any("B parameters" in n for n in notes)
    v4 = zoo_entry("deepseek-v4-flash").config
    _, notes = checkpoint_options(v4, chip, taken, {})
    assert any("keeps" in n and "B parameters" in n and "in fp8-block" in n for n in notes)
    assert Checkpoint("x", "fp8", None, None).describe() == "x fp8 weights (weight-only)"


@pytest.mark.parametrize("model", ["deepseek-r1", "deepseek-v3", "qwen3-32b-fp8"])
def test_precision_fp8_of_a_block_scaled_repo_keeps_its_blocks(model):
    """`--precision fp8` of DeepSeek-R1's (block-scaled FP8) repo costs its weights in the
    fp8-block layout the engines load, with a note; another format, or weights the user
    names, stay as given, and a note says the repo stores them otherwise (`--precision
    mxfp4` of it on an MI355X once read as if that were the repo's format)."""
    cfg = zoo_entry(model).config
    chip = api.target("mi300x")
    taken = ["precision", "weight_precision"]
    options, notes = checkpoint_options(cfg, chip, taken, {"precision": "fp8"})
    assert options == {"precision": "fp8", "weight_precision": "fp8-block"}
    assert "used --weight-precision fp8-block" in notes[0]
    named = {"precision": "fp8", "weight_precision": "fp8"}
    for given, flag in (({"precision": "bf16"}, "--precision bf16"),
                        ({"precision": "mxfp4"}, "--precision mxfp4"),
                        (named, "--weight-precision fp8")):  # fmt: skip
        options, notes = checkpoint_options(cfg, chip, taken, given)
        assert options == given
        assert len(notes) == 1 and f"costed with {flag} as given, not as this repo" in notes[0]
    ran = api.simulate(model, "mi300x", chips=8, tp=8, precision="fp8", batch=1, prompt=64, gen=4)
    assert ran.weight_precision == "fp8-block"


def test_a_format_given_over_a_repo_with_an_fp8_cache_describes_the_repo_once():
    """Llama-3.1-70B-Instruct-FP8 (FP8 weights and KV cache) at --precision bf16: its cache
    format is taken and its weights are not, in one note that describes the repo once (two
    notes repeated the description)."""
    cfg = zoo_entry("llama-3.1-70b-instruct-fp8").config
    taken = ["precision", "weight_precision", "kv_precision"]
    options, notes = checkpoint_options(cfg, api.target("h100-sxm"), taken, {"precision": "bf16"})
    assert options == {"precision": "bf16", "kv_precision": "fp8"}
    (note,) = [n for n in notes if n.startswith("checkpoint format:")]
    assert "used --kv-precision fp8; costed with --precision bf16 as given" in note
