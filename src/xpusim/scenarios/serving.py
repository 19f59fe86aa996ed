"""Serving under load as a scenario, mode "serving": what a sweep with serving options runs
per point (`xpusim sweep --concurrency 1,8,64`) and what `xpusim.simulate(...,
mode="serving")` returns. The simulation itself is serving/'s; this is its entry point in
the scenario registry (api.py), with the options it takes."""

from __future__ import annotations

from typing import Any

from xpusim.hardware.spec import Chip
from xpusim.hardware.system import System
from xpusim.scenarios.registry import register


def simulate_serving(model: Any, target: Chip | System, **options: Any) -> Any:
    """xpusim.serve's result for these options (no progress, no files)."""
    from xpusim.serving.serve import serve

    return serve(model, target, options)[0]


def _options() -> tuple[str, ...]:
    from dataclasses import fields

    from xpusim.serving.options import Engine, Load, Search
    from xpusim.serving.serve import PLAN_OPTIONS, RECSYS_OPTIONS

    names = [f.name for cls in (Load, Engine, Search) for f in fields(cls)]
    return tuple(dict.fromkeys([*names, *PLAN_OPTIONS, *RECSYS_OPTIONS]))


simulate_serving.options = _options  # type: ignore[attr-defined]  # api._taken reads it


for _kind in ("llm", "recsys", "cnn"):
    register(_kind, "serving", simulate_serving)
