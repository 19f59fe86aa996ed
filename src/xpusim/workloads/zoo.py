"""The workload zoo: well-known models as config files (Hugging Face style for transformers,
xpusim's own format for DLRMs), named by id or by their Hugging Face hub repo. Paths, the
Hugging Face cache and the hub are resolved in workloads/resolve.py."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from xpusim.errors import UserError
from xpusim.workloads.checkpoint import read_checkpoint, stated_checkpoint, with_checkpoint
from xpusim.workloads.transformer_config import config_from_hf

ZOO_DIR = Path(__file__).parent / "zoo"


@dataclass(frozen=True)
class ZooEntry:
    id: str
    config: Any  # TransformerConfig, or what the kind's reader returns
    published_params: float | None  # None for synthetic configs: nothing was published
    params_source: str
    source: str
    hf_repo: str | None = None  # the Hugging Face hub's name for it, which also names it here
    # The precision of the published figure where it is only a rounded name ("12B": 1e9),
    # so that a count can be checked against it: within half of it
    published_rounding: float | None = None
    # the published active count of an MoE model, where it is stated beside the total: to
    # within half of `published_active_rounding` where it is a round figure ("37B"), and
    # leaving out what its source leaves out (`active_excludes`: "embedding", the input
    # table; "embedding and head", the non-embedding convention)
    published_active: float | None = None
    published_active_rounding: float | None = None
    active_excludes: str = ""


def model_ids() -> list[str]:
    return sorted(p.stem for p in ZOO_DIR.glob("*.json"))


@cache
def zoo_file(model_id: str) -> tuple[dict, dict]:
    """(its `_xpusim` block, its config fields) as the file has them, nothing built."""
    data = json.loads((ZOO_DIR / f"{model_id}.json").read_text())
    return data.pop("_xpusim"), data


def hub_repos() -> dict[str, str]:
    """{hub repo, as the repo spells it: zoo id}: each file's `hf_repo`, the repo whose
    config.json it copied, and its `hf_aliases`: the repos of the same architecture users
    serve, an instruction-tuned release of that base repo (google/gemma-3-27b-it), each with
    its `aliases_source`; the engines' commands name those, and a gated one needs a hub login
    the zoo does not. Read from the files' metadata alone: a file whose architecture this tree
    cannot build yet still names it (and building it says why not)."""
    repos = {}
    for model_id in model_ids():
        meta = zoo_file(model_id)[0]
        for repo in (meta.get("hf_repo"), *meta.get("hf_aliases", ())):
            if repo:
                repos[repo] = model_id
    return repos


@cache
def hub_names() -> dict[str, str]:
    """{hub repo, lower case: zoo id} (hub_repos): `xpusim run meta-llama/Llama-2-70b-hf`
    works offline, in any case, from the architecture fields the zoo file copied."""
    return {repo.lower(): model_id for repo, model_id in hub_repos().items()}


@cache
def unbuilt_repos() -> dict[str, str]:
    """{hub repo, lower case: why xpusim cannot build it}: the repos unbuilt.toml lists,
    whose architecture has no reader yet, so that naming one says so in one line (its
    model_type and what is missing) rather than calling it unknown."""
    table = tomllib.loads((ZOO_DIR.parent / "unbuilt.toml").read_text())
    return {repo.lower(): f"its architecture is not built yet (model_type "
                          f"{arch['model_type']!r}: {arch['missing']})"
            for arch in table["architecture"] for repo in arch["repos"]}  # fmt: skip


@cache
def built_ids() -> list[str]:
    """The zoo ids whose architecture this tree builds (a file may be bundled before its
    architecture is supported: its model_type is refused by name)."""
    found = []
    for model_id in model_ids():
        try:
            zoo_entry(model_id)
        except UserError:
            continue
        found.append(model_id)
    return found


def _dlrm(data: dict, name: str, origin: str) -> Any:
    from xpusim.workloads.dlrm_config import config_from_json

    return config_from_json(data, name, origin)


def _resnet(data: dict, name: str, origin: str) -> Any:
    from xpusim.workloads.cnn import resnet_from_json

    return resnet_from_json(data, name, origin)


# How to read a zoo file, by its `_xpusim.kind` (default "transformer"); the readers of the
# other kinds import their modules when first used, so an LLM run loads neither.
# Each reader takes (config dict, model id, origin for error messages).
READERS: dict[str, Callable[[dict, str, str], Any]] = {
    "transformer": config_from_hf,
    "dlrm": _dlrm,
    "resnet": _resnet,
}


@cache
def zoo_entry(model_id: str) -> ZooEntry:
    path = ZOO_DIR / f"{model_id}.json"
    meta, data = zoo_file(model_id)
    config = READERS[meta.get("kind", "transformer")](dict(data), model_id, str(path))
    checkpoint = read_checkpoint(data, meta.get("hf_quant_config"), str(path))
    if "checkpoint" in meta:  # stated from a model card where the repo's file was not found
        checkpoint = stated_checkpoint(meta["checkpoint"], str(path))
    return ZooEntry(
        id=model_id,
        config=with_checkpoint(config, checkpoint) if checkpoint else config,
        published_params=float(meta["published_params"]) if "published_params" in meta else None,
        params_source=meta["params_source"],
        source=meta["source"],
        hf_repo=meta.get("hf_repo"),
        published_rounding=meta.get("published_rounding"),
        published_active=meta.get("published_active"),
        published_active_rounding=meta.get("published_active_rounding"),
        active_excludes=meta.get("active_excludes", ""),
    )



def config_from_data(
    data: Any, origin: str, path: Path | None = None, name: str | None = None
) -> Any:
    """A config file's object, however it arrived (a file, a snapshot, or pasted into
    `xpusim web`): its `_xpusim.kind` picks the reader. A transformer is named `name` if
    given (a hub repo id), else by its `_name_or_path`, else by its file's folder; a DLRM by
    its file; a pasted one, unnamed, as "pasted-config". Errors are UserErrors that start
    with `origin`."""
    if not isinstance(data, dict):
        raise UserError(f"{origin}: expected a JSON object")
    data = dict(data)
    meta = data.pop("_xpusim", {})
    kind = meta.get("kind", "transformer") if isinstance(meta, dict) else None
    if not isinstance(kind, str) or kind not in READERS:
        raise UserError(f"{origin}: field '_xpusim.kind' must be one of {', '.join(READERS)}")
    if name is None:
        name = path.stem if path else "pasted-config"
        if kind == "transformer":
            name = data.get("_name_or_path") or (path and path.parent.name) or name
    return READERS[kind](data, str(name), origin)
