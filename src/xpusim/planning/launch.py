"""Launch files for a chosen configuration: the engine's command for one replica and a
Kubernetes Deployment of the replica group, written only from planning/launch.toml's flags
(each engine's, per version, with the page they were read from)."""

from __future__ import annotations

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
