"""The Python API that notebooks use and the CLI wraps: names in, result dataclasses out."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from xpusim.errors import UserError, closest
from xpusim.hardware.catalog import chip_ids, load_chip
from xpusim.hardware.spec import Chip
from xpusim.hardware.system import System, load_system, system_ids
from xpusim.scenarios.llm_inference import simulate as simulate_llm
from xpusim.workloads.transformer_config import TransformerConfig
from xpusim.workloads.zoo import load_model, model_ids

# Workload type -> the scenario that simulates it (first isinstance match wins).
SCENARIOS: dict[type, Callable[..., Any]] = {TransformerConfig: simulate_llm}


def chip(id_or_path: str | Path) -> Chip:
    """A chip from the catalog by id (`xpusim.chip("h100-sxm")`) or from a TOML file."""
    return load_chip(id_or_path)


def system(system_id: str) -> System:
    """A multi-chip system from the catalog (`xpusim.system("dgx-h100")`)."""
    return load_system(system_id)


def target(id_or_path: str | Path) -> Chip | System:
    """What `--chip` names: a system id, a chip id or a chip TOML path."""
    text = str(id_or_path)
    if text in system_ids():
        return load_system(text)
    if text in chip_ids() or text.endswith(".toml") or Path(text).is_file():
        return load_chip(text)
    raise UserError(f"unknown chip or system {text!r}" + closest(text, chip_ids() + system_ids()))


def model(id_or_path: str | Path) -> Any:
    """A model from the zoo by id (`xpusim.model("llama-2-7b")`) or a HF `config.json` path."""
    return load_model(id_or_path)


def simulate(model: Any, chip: Chip | System | str | Path, **options: Any) -> Any:
    """Simulates a workload on a chip; the workload's type picks the scenario.

    A transformer config (zoo id or config.json) runs LLM inference: options `batch`,
    `prompt`, `gen`, `precision`, `weight_precision` (scenarios/llm_inference.py).
    """
    workload = load_model(model) if isinstance(model, str | Path) else model
    spec = target(chip) if isinstance(chip, str | Path) else chip
    for kind, scenario in SCENARIOS.items():
        if isinstance(workload, kind):
            return scenario(workload, spec, **options)
    raise TypeError(f"no scenario simulates a {type(workload).__name__}")


def compare(model: Any, targets: list[Chip | System | str], **options: Any) -> list[Any]:
    """The same workload on several chips or systems, in the order given."""
    return [simulate(model, t, **options) for t in targets]


__all__ = [
    "chip", "chip_ids", "compare", "model", "model_ids", "simulate", "system", "system_ids",
    "target",
]  # fmt: skip
