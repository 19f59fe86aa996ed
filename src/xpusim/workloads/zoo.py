"""The workload zoo: well-known models as Hugging Face style config files, plus user paths."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from xpusim.errors import UserError, closest
from xpusim.workloads.transformer_config import config_from_hf, load_hf_config

ZOO_DIR = Path(__file__).parent / "zoo"


@dataclass(frozen=True)
class ZooEntry:
    id: str
    config: Any  # TransformerConfig, or what the kind's reader returns
    published_params: float
    params_source: str
    source: str


def model_ids() -> list[str]:
    return sorted(p.stem for p in ZOO_DIR.glob("*.json"))


# How to read a zoo file, by its `_xpusim.kind` (default "transformer").
# Each reader takes (config dict, model id, origin for error messages).
READERS: dict[str, Callable[[dict, str, str], Any]] = {"transformer": config_from_hf}


@cache
def zoo_entry(model_id: str) -> ZooEntry:
    path = ZOO_DIR / f"{model_id}.json"
    data = json.loads(path.read_text())
    meta = data.pop("_xpusim")
    return ZooEntry(
        id=model_id,
        config=READERS[meta.get("kind", "transformer")](data, model_id, str(path)),
        published_params=float(meta["published_params"]),
        params_source=meta["params_source"],
        source=meta["source"],
    )


def load_model(id_or_path: str | Path) -> Any:
    """A zoo id (`llama-2-7b`) or a path to a Hugging Face `config.json`."""
    text = str(id_or_path)
    if text.endswith(".json") or Path(text).is_file():
        return load_hf_config(Path(text))
    if text not in model_ids():
        raise UserError(f"unknown model {text!r}" + closest(text, model_ids()))
    return zoo_entry(text).config
