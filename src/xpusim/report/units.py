"""Human units for numbers in tables: engineering prefixes and fixed significant figures."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

_PREFIXES = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")]
_SMALL = [(1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"), (1e-12, "ps")]


def si(value: float, unit: str = "", digits: int = 3) -> str:
    """1.979e15, 'OPS' -> '1.98 POPS'."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g} {unit}".strip()
    for scale, prefix in _PREFIXES:
        if abs(value) >= scale:
            return f"{value / scale:.{digits}g} {prefix}{unit}".strip()
    return f"{value:.{digits}g} {unit}".strip()


def seconds(value: float, digits: int = 3) -> str:
    value = float(f"{value:.{digits}g}")  # round first: 999.9995 µs prints as 1 ms
    for scale, unit in _SMALL:
        if abs(value) >= scale:
            return f"{value / scale:.{digits}g} {unit}"
    return f"{value:.{digits}g} s"


def gigabytes(value: float) -> str:
    return f"{value / 1e9:.3g} GB" if value >= 1e9 else f"{value / 1e6:.3g} MB"


def dollars(value: float) -> str:
    """Money to three significant figures, cents kept below a dollar: '$1.23', '$0.0412'."""
    return f"${value:,.3g}" if value < 1000 else f"${value:,.0f}"


def cost_column(results: Sequence[Any]) -> list[str]:
    """The '$/M <what>' header when any result is priced (cost/dollars.py), else none."""
    cost = next((r.cost for r in results if getattr(r, "cost", None)), None)
    return [] if cost is None else [f"$/M {cost.per}"]


def cost_cell(result: Any, column: list[str]) -> list[str]:
    """The result's cell under cost_column's header: '—' where it has no price."""
    if not column:
        return []
    return [dollars(result.cost.usd_per_million) if result.cost else "—"]
