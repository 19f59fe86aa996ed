"""The workload zoo: well-known models as config files (Hugging Face style for transformers,
xpusim's own format for DLRMs), named by id or by their Hugging Face hub repo, plus user
paths."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from xpusim.errors import UserError, closest
from xpusim.files import is_file
from xpusim.workloads.transformer_config import config_from_hf, read_config_json

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


def model_ids() -> list[str]:
    return sorted(p.stem for p in ZOO_DIR.glob("*.json"))


@cache
def hub_names() -> dict[str, str]:
    """{hub repo, lower case: zoo id}: `xpusim run meta-llama/Llama-2-70b-hf` works offline,
    from the architecture fields the zoo file copied from that repo's config.json."""
    return {e.hf_repo.lower(): e.id for e in map(zoo_entry, model_ids()) if e.hf_repo}


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
    data = json.loads(path.read_text())
    meta = data.pop("_xpusim")
    return ZooEntry(
        id=model_id,
        config=READERS[meta.get("kind", "transformer")](data, model_id, str(path)),
        published_params=float(meta["published_params"]) if "published_params" in meta else None,
        params_source=meta["params_source"],
        source=meta["source"],
        hf_repo=meta.get("hf_repo"),
        published_rounding=meta.get("published_rounding"),
    )


def load_model(
    id_or_path: str | Path, input_shapes: dict[str, tuple[int, ...]] | None = None
) -> Any:
    """A zoo id (`llama-2-7b`), a path to a config file (see load_config_file), or an exported
    model: `.onnx` (its symbolic input dimensions from `input_shapes`) or torch.export `.pt2`.
    A zoo id wins over a file of that name in the working folder, which would otherwise
    silently stand in for the model; `./llama-2-7b` (any path with a folder) names the file."""
    text = str(id_or_path)
    if text.endswith(".onnx"):
        from xpusim.workloads.onnx_import import load_onnx

        return load_onnx(Path(text), input_shapes)
    if input_shapes:
        raise UserError("--input-shape applies to ONNX models (.onnx files) only")
    if text.endswith(".pt2"):
        from xpusim.workloads.torch_import import load_exported

        return load_exported(Path(text))
    if text in model_ids():  # before files: a file named like a zoo id is read as ./name
        return zoo_entry(text).config
    if text.endswith(".json") or is_file(text):
        return load_config_file(Path(text))
    if text.lower() in hub_names():
        return zoo_entry(hub_names()[text.lower()]).config
    repos = [zoo_entry(i).hf_repo for i in hub_names().values()]
    raise UserError(f"unknown model {text!r}" + closest(text, [*model_ids(), *repos]))


def load_config_file(path: Path) -> Any:
    """A Hugging Face `config.json`, or any kind READERS knows marked `"_xpusim": {"kind": ...}`."""
    return config_from_data(read_config_json(path), str(path), path)


def config_from_data(data: Any, origin: str, path: Path | None = None) -> Any:
    """A config file's object, however it arrived (a file, or pasted into `xpusim web`):
    its `_xpusim.kind` picks the reader. A transformer is named by its `_name_or_path`, else
    by its file's folder; a DLRM by its file; a pasted one, unnamed, as "pasted-config".
    Errors are UserErrors that start with `origin`."""
    if not isinstance(data, dict):
        raise UserError(f"{origin}: expected a JSON object")
    data = dict(data)
    meta = data.pop("_xpusim", {})
    kind = meta.get("kind", "transformer") if isinstance(meta, dict) else None
    if not isinstance(kind, str) or kind not in READERS:
        raise UserError(f"{origin}: field '_xpusim.kind' must be one of {', '.join(READERS)}")
    name = path.stem if path else "pasted-config"
    if kind == "transformer":
        name = data.get("_name_or_path") or (path and path.parent.name) or name
    return READERS[kind](data, str(name), origin)
