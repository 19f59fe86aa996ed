"""Launch files for a chosen configuration: the engine's command for one replica and a
Kubernetes Deployment of the replica group, written only from planning/launch.toml's flags
(each engine's, per version, with the page they were read from)."""

from __future__ import annotations

import shlex
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).with_name("launch.toml")


@cache
def table() -> dict[str, dict[str, Any]]:
    return tomllib.loads(DATA.read_text())


def engines_for(chip: Any) -> tuple[list[str], list[str]]:
    """The engines that run this chip's vendor, and notes on how (vLLM on TPU)."""
    names, notes = [], []
    for name, entry in table().items():
        if chip.vendor in entry["vendors"]:
            names.append(name)
            note = entry.get(f"note_{chip.vendor.lower()}")
            if note:
                notes.append(f"{name}: {note}")
    return names, notes


def carries(engine: str, setting: str) -> bool:
    """Whether the engine's flags carry a setting (the ideal engine, no engine's, carries
    every one: it is simulated, not launched)."""
    return engine not in table() or setting in table()[engine]["flags"]


def command(config: Any, hub_id: str, role: str | None = None) -> tuple[list[str], list[str]]:
    """One replica's launch command as argv words, and notes on what no flag in the table
    carries. `role` is "prefill" or "decode" for a disaggregated replica."""
    entry = table()[config.knobs.engine]
    flags: dict[str, str] = entry["flags"]
    words, notes = entry["command"].split(), []
    words += [hub_id] if flags["model"] == "" else [flags["model"], hub_id]
    if "backend" in flags:
        words += flags["backend"].split()
    lay, k = config.layout, config.knobs
    settings: list[tuple[str, Any]] = [("tp", lay.tp), ("pp", lay.pp), ("ep", lay.ep),
                                       ("max_batch", k.max_batch),
                                       ("token_budget", k.token_budget)]  # fmt: skip
    for name, value in settings:
        if name in ("pp", "ep") and value == 1:
            continue
        if name == "ep" and "ep" not in flags and "enable_ep" in flags:
            words.append(flags["enable_ep"])
            continue
        if name not in flags:
            notes.append(f"{config.knobs.engine} {entry['version']}: no {name} flag in "
                         f"planning/launch.toml; {name} {value} is not carried")  # fmt: skip
            continue
        words += [flags[name], str(value)]
    if lay.dp_attention:  # searched only with engines that carry it (carries())
        words += [flags["dp_attention"], flags["dp_attention_size"], str(lay.tp)]
    if k.mtp is not None:  # searched only with engines that carry it (carries())
        words += flags["speculative_mtp"].split()
        words += [flags["speculative_steps"], str(k.mtp[0]),
                  flags["speculative_draft_tokens"], str(k.mtp[0] + 1)]  # fmt: skip
    if "chunked" in flags and lay.prefill_replicas is None:
        words.append(flags["chunked"])
    if config.precision == "fp8":
        for name in ("fp8", "kv_fp8"):
            if name in flags:
                words += flags[name].split()
            else:
                notes.append(f"{config.knobs.engine}: fp8 ({name}) needs an FP8 checkpoint; "
                             "no flag in the table")  # fmt: skip
    if role is not None:
        if "disaggregation" in flags:
            words += [flags["disaggregation"], role]
        else:
            notes.append(f"{config.knobs.engine} {entry['version']}: no disaggregation flag in "
                         f"planning/launch.toml; the {role} role is not carried")  # fmt: skip
    return words, notes


def manifest(name: str, config: Any, words: list[str], replicas: int) -> str:
    """A Kubernetes Deployment of `replicas` copies of one replica's server, each asking
    for its chips (nvidia.com/gpu, amd.com/gpu or google.com/tpu)."""
    resource = {"NVIDIA": "nvidia.com/gpu", "AMD": "amd.com/gpu",
                "Google": "google.com/tpu"}[_vendor(config.chip)]  # fmt: skip
    vendor = _vendor(config.chip)
    image = table()[config.knobs.engine]["images"].get(
        vendor, f"FILL-IN-{config.knobs.engine}-image-for-{vendor}")
    chips = config.layout.replica_chips
    return f"""apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
spec:
  replicas: {replicas}
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}}}
    spec:
      containers:
      - name: server
        image: {image}
        command: ["sh", "-c", {_yaml_string(shlex.join(words))}]
        resources:
          limits: {{{resource}: {chips}}}
        volumeMounts:
        - {{name: shm, mountPath: /dev/shm}}
      volumes:
      - name: shm
        emptyDir: {{medium: Memory}}
"""


def _yaml_string(text: str) -> str:
    import json

    return json.dumps(text)  # a JSON string is a YAML double-quoted scalar


def _vendor(chip_id: str) -> str:
    import xpusim.api as api

    return api.chip(chip_id).vendor


def emit(result: Any, out: Path) -> list[str]:
    """The chosen configuration's launch files under `out`: launch.sh (one command per
    replica group) and one Kubernetes manifest per group. Returns the paths written."""
    from xpusim.files import atomic

    best = result.best
    if best is None:
        return []
    config, hub = best.config, _hub_id(result.model)
    out.mkdir(parents=True, exist_ok=True)
    if config.knobs.engine not in table():
        path = out / "launch.sh"
        with atomic(path) as f:
            f.write(f"#!/bin/sh\n# xpusim plan's choice: {config.label()}\n# note: no engine in "
                    f"planning/launch.toml runs {config.chip}: no launch command\n")
        return [str(path)]
    lay = config.layout
    groups: list[tuple[str | None, int]] = [(None, lay.replicas)]
    if lay.prefill_replicas is not None:
        groups = [("prefill", lay.prefill_replicas), ("decode", lay.decode_replicas or 0)]
    source = table()[config.knobs.engine]["source"]
    lines = ["#!/bin/sh", f"# xpusim plan's choice: {config.label()}",
             f"# flags: planning/launch.toml, {source}"]
    written = []

    for role, replicas in groups:
        words, notes = command(config, hub, role)
        lines += [f"# {role or 'every'} replica ({replicas} of them, "
                  f"{lay.replica_chips} chips each)", *(f"# note: {n}" for n in notes),
                  shlex.join(words)]  # fmt: skip
        name = "xpusim-plan" + (f"-{role}" if role else "")
        path = out / f"{name}.yaml"
        with atomic(path) as f:
            f.write(manifest(name, config, words, replicas))
        written.append(str(path))
    path = out / "launch.sh"
    with atomic(path) as f:
        f.write("\n".join(lines) + "\n")
    return [str(path), *written]


def _hub_id(model: str) -> str:
    """The Hugging Face id engines load: the zoo's hub name for a zoo model."""
    from xpusim.workloads.zoo import model_ids, zoo_entry

    return (zoo_entry(model).hf_repo or model) if model in model_ids() else model
