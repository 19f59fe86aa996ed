"""Scenarios by name, as Vidur's registries hold its schedulers and predictors: each
scenario module registers its function for a workload kind and a mode when it is imported
(`register("llm", "inference", simulate, simulate_many)`), and a workload type names its
kind (`TransformerConfig.scenario_kind`). `find` imports a module the first time its kind
and mode are asked for, so `xpusim run` on an LLM loads no recsys or training code and
`xpusim --help` loads none."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# Where each kind's scenario in each mode registers itself: the one table to extend
HOMES: dict[tuple[str, str], str] = {
    ("llm", "inference"): "xpusim.scenarios.llm.inference",
    ("encoder", "inference"): "xpusim.scenarios.encoder_inference",
    ("recsys", "inference"): "xpusim.scenarios.recsys",
    ("cnn", "inference"): "xpusim.scenarios.cnn_inference",
    ("graph", "inference"): "xpusim.scenarios.graph_inference",
    ("llm", "training"): "xpusim.scenarios.training",
    ("llm", "serving"): "xpusim.scenarios.serving",
    ("recsys", "serving"): "xpusim.scenarios.serving",
    ("cnn", "serving"): "xpusim.scenarios.serving",
}


@dataclass(frozen=True, eq=False)  # each one its own, by identity: hashed for every job
class Scenario:
    """What simulates a kind of workload in a mode."""

    kind: str
    mode: str
    function: Callable[..., Any]
    batched: Callable[..., Any] | None = None  # costs many jobs together, if it can


_REGISTERED: dict[tuple[str, str], Scenario] = {}


def register(kind: str, mode: str, function: Callable[..., Any],
             batched: Callable[..., Any] | None = None) -> None:  # fmt: skip
    """Registers what simulates this kind of workload in this mode (at a module's end)."""
    _REGISTERED[kind, mode] = Scenario(kind, mode, function, batched)


def find(kind: str | None, mode: str) -> Scenario | None:
    """The scenario registered for this kind and mode, its module imported if not yet."""
    key = (str(kind), mode)
    if key not in _REGISTERED and key in HOMES:
        importlib.import_module(HOMES[key])
    return _REGISTERED.get(key)
