"""The one thing every result shares: it is a plain dataclass that serializes to JSON.

The CLI's `--json` prints `to_dict()`; nested dataclasses (memory splits, op reports) become
nested objects, so a result's JSON and its Python fields never drift apart.
"""

from __future__ import annotations

from dataclasses import asdict


class Result:
    """Mixin for result dataclasses."""

    def to_dict(self) -> dict:
        return asdict(self)  # type: ignore[call-overload]
