"""The one thing every result shares: it is a plain dataclass that serializes to JSON.

The CLI's `--json` prints `to_dict()`; nested dataclasses (memory splits, op reports) become
nested objects, so a result's JSON and its Python fields never drift apart. `to_dict` is also
the result boundary where a number that is not finite is caught: inputs are validated where
they enter (docs/reliability.md), so an infinity or NaN here is the simulator's bug, and it
is raised, naming the field, rather than printed.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any


class NonFiniteResult(AssertionError):
    """A result field came out infinite or NaN from valid inputs: a bug to report."""


def check_finite(value: Any, path: str) -> None:
    """Every float in a result's dict, list or tuple is finite."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NonFiniteResult(f"{path} is {value}: a bug in xpusim; please report the command")
    elif isinstance(value, dict):
        for key, item in value.items():
            check_finite(item, f"{path}.{key}")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            check_finite(item, f"{path}[{i}]")


class Result:
    """Mixin for result dataclasses."""

    def to_dict(self) -> dict:
        data = asdict(self)  # type: ignore[call-overload]
        check_finite(data, type(self).__name__)
        return data
