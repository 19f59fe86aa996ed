"""Published measurements to score predictions against: what was measured, on what, by whom.

The data file is `published.json` beside this module (copied from the project's shared
ground truth, each point with its source). It is read here and by the scoring code only:
calibration must never look at it (a test enforces that), so that efficiencies come from
microbenchmarks and the error we report is an honest one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "published.json"


@dataclass(frozen=True)
class Point:
    id: str
    workload: str
    chip: str
    metric: str
    value: Any  # a number, or [low, high] for a published range
    source: str
    notes: str = ""
    known_gap: str = ""  # why xpusim is expected to miss it: what the measurement includes
    setup: dict[str, Any] = field(default_factory=dict)  # model, chips, tp, batch, ...

    def get(self, key: str, default: Any = None) -> Any:
        value = self.setup.get(key)
        return default if value is None else value


_CORE = {"id", "workload", "chip", "metric", "value", "source", "notes", "known_gap"}


@cache
def load_points(path: Path = DATA) -> tuple[Point, ...]:
    data = json.loads(path.read_text())
    return tuple(
        Point(
            id=p["id"],
            workload=p["workload"],
            chip=p["chip"],
            metric=p["metric"],
            value=p["value"],
            source=p["source"],
            notes=p.get("notes", ""),
            known_gap=p.get("known_gap", ""),
            setup={k: v for k, v in p.items() if k not in _CORE and k != "unit"},
        )
        for p in data["points"]
    )
