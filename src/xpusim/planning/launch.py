"""Launch files for a chosen configuration: the engine's command for one replica and a
Kubernetes Deployment of the replica group, written only from planning/launch.toml's flags
(each engine's, per version, with the page they were read from)."""

from __future__ import annotations

import shlex
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from string import Template
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
    """Whether the engine's flags or options file carry a setting (the ideal engine, no
    engine's, carries every one: it is simulated, not launched)."""
    if engine not in table():
        return True
    entry = table()[engine]
    return setting in entry["flags"] or setting in entry.get("options", {})


def plan_gap(engine: str, plan: Any) -> str | None:
    """Why the engine's table cannot carry a replica plan, in one line (None: it can):
    attention DP with no flag for it, or experts over some but not all of the tp chips
    where the engine's only expert flag is a switch for all of them (vLLM's)."""
    if engine not in table():
        return None
    entry, version = table()[engine], table()[engine]["version"]
    if plan.dp_attention and not carries(engine, "dp_attention"):
        return f"{engine} {version}: no attention-DP flag in planning/launch.toml"
    flags = entry["flags"]
    if plan.ep > 1 and "ep" not in flags:
        if "enable_ep" not in flags:
            return f"{engine} {version}: no expert-parallel flag in planning/launch.toml"
        if plan.ep != plan.tp:
            return (f"{engine} {version}: {flags['enable_ep']} spreads the experts over all "
                    f"{plan.tp} tp chips; ep {plan.ep} cannot be launched")  # fmt: skip
    return None


def carries_plan(engine: str, plan: Any) -> bool:
    return plan_gap(engine, plan) is None


@dataclass
class Command:
    """One replica's launch: the command's words, the lines of its options file (an
    engine's YAML of settings it takes there, written beside the command), and notes on
    what no flag in the table carries."""

    words: list[str]
    options: list[str]
    notes: list[str]
    options_path: str = ""  # where the options file goes (the command names it)

    def shell(self) -> str:
        """The command as shell text, the options file written first (a here-document)."""
        run = shlex.join(self.words)
        if not self.options:
            return run
        return "\n".join([f"cat > {self.options_path} <<'EOF'", *self.options, "EOF", run])


def command(config: Any, hub_id: str, role: str | None = None) -> Command:
    """One replica's launch: `role` is "prefill" or "decode" for a disaggregated replica,
    whose side's plan it carries."""
    engine = config.knobs.engine
    entry = table()[engine]
    flags: dict[str, str] = entry["flags"]
    options_table: dict[str, str] = entry.get("options", {})
    words, options, notes = entry["command"].split(), [], []
    words += [hub_id] if flags["model"] == "" else [flags["model"], hub_id]
    if "backend" in flags:
        words += flags["backend"].split()
    lay, k = config.layout, config.knobs
    plan = lay.decode_plan if role == "decode" else lay.plan
    values = {"tp": str(plan.tp), "draft": str(k.mtp[0] if k.mtp else 0),
              "verify": str(k.mtp[0] + 1 if k.mtp else 1)}  # fmt: skip

    def put(setting: str) -> None:
        """A switch or templated setting: on the command line, or as an options line."""
        if setting in flags:
            words.extend(Template(w).substitute(values) for w in flags[setting].split())
        else:
            options.append(Template(options_table[setting]).substitute(values))

    tp = 1 if plan.dp_attention and entry["tp_counts"] == "attention" else plan.tp
    settings: list[tuple[str, Any]] = [("tp", tp), ("pp", plan.pp), ("ep", plan.ep),
                                       ("max_batch", k.max_batch),
                                       ("token_budget", k.token_budget)]  # fmt: skip
    for name, value in settings:
        if name in ("pp", "ep") and value == 1:
            continue
        if name == "ep" and "ep" not in flags and "enable_ep" in flags:
            words.append(flags["enable_ep"])  # every tp chip's (plan_gap refuses others)
            continue
        if name not in flags:
            notes.append(f"{engine} {entry['version']}: no {name} flag in "
                         f"planning/launch.toml; {name} {value} is not carried")  # fmt: skip
            continue
        words += [flags[name], str(value)]
    if plan.dp_attention:  # searched only where the table carries it (plan_gap)
        put("dp_attention")
    if k.mtp is not None:  # searched only with engines that carry it (carries())
        put("speculative_mtp")
    if "chunked" in flags and lay.decode is None:
        words.append(flags["chunked"])
    if config.precision == "fp8":
        for name in ("fp8", "kv_fp8"):
            if name in flags:
                words += flags[name].split()
            else:
                notes.append(f"{engine}: fp8 ({name}) needs an FP8 checkpoint; "
                             "no flag in the table")  # fmt: skip
    if role is not None:
        if "disaggregation" in flags:
            words += [flags["disaggregation"], role]
        else:
            notes.append(f"{engine} {entry['version']}: no disaggregation flag in "
                         f"planning/launch.toml; the {role} role is not carried")  # fmt: skip
    path = ""
    if options:
        path = f"{engine}-options{'-' + role if role else ''}.yml"
        words += [flags["options_file"], path]
    return Command(words, options, notes, path)


def manifest(name: str, config: Any, launch: Command, replicas: int, chips: int) -> str:
    """A Kubernetes Deployment of `replicas` copies of one replica's server, each asking
    for its `chips` (nvidia.com/gpu, amd.com/gpu or google.com/tpu)."""
    resource = {"NVIDIA": "nvidia.com/gpu", "AMD": "amd.com/gpu",
                "Google": "google.com/tpu"}[_vendor(config.chip)]  # fmt: skip
    vendor = _vendor(config.chip)
    image = table()[config.knobs.engine]["images"].get(
        vendor, f"FILL-IN-{config.knobs.engine}-image-for-{vendor}")
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
        command: ["sh", "-c", {_yaml_string(launch.shell())}]
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
    groups: list[tuple[str | None, int, Any]] = [(None, lay.replicas, lay.plan)]
    if lay.decode is not None:
        groups = [("prefill", lay.prefill_replicas or 0, lay.plan),
                  ("decode", lay.decoders, lay.decode)]  # fmt: skip
    source = table()[config.knobs.engine]["source"]
    lines = ["#!/bin/sh", f"# xpusim plan's choice: {config.label()}",
             f"# flags: planning/launch.toml, {source}"]
    written = []

    for role, replicas, plan in groups:
        launch = command(config, hub, role)
        lines += [f"# {role or 'every'} replica ({replicas} of them, {plan.chips} chips each: "
                  f"{plan.label()})", *(f"# note: {n}" for n in launch.notes),
                  launch.shell()]  # fmt: skip
        name = "xpusim-plan" + (f"-{role}" if role else "")
        path = out / f"{name}.yaml"
        with atomic(path) as f:
            f.write(manifest(name, config, launch, replicas, plan.chips))
        written.append(str(path))
    path = out / "launch.sh"
    with atomic(path) as f:
        f.write("\n".join(lines) + "\n")
    return [str(path), *written]


def _hub_id(model: str) -> str:
    """The Hugging Face id engines load: the zoo's hub name for a zoo model."""
    from xpusim.workloads.zoo import model_ids, zoo_entry

    return (zoo_entry(model).hf_repo or model) if model in model_ids() else model
