"""Serving engines' host time per iteration, as named profiles (engines.toml, each figure
with its source): the part of an engine step that is not the model's kernels."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from xpusim.errors import UserError, closest

DATA = Path(__file__).with_name("engines.toml")


@dataclass(frozen=True)
class EngineProfile:
    name: str
    about: str
    per_iteration_s: float
    per_sequence_s: float
    overlapped: bool  # host work for the next iteration runs while the device runs this one
    source: str

    def host_s(self, sequences: int) -> float:
        return self.per_iteration_s + self.per_sequence_s * sequences

    def exposed_s(self, sequences: int, device_s: float) -> float:
        """Host time the device waits for in an iteration that keeps it busy device_s."""
        host = self.host_s(sequences)
        return max(host - device_s, 0.0) if self.overlapped else host


@cache
def engines() -> dict[str, EngineProfile]:
    data = tomllib.loads(DATA.read_text())
    return {name: EngineProfile(name, **fields) for name, fields in data.items()}


def engine(name: str) -> EngineProfile:
    found = engines().get(name)
    if found is None:
        raise UserError(f"unknown engine {name!r}{closest(name, engines())}")
    return found
