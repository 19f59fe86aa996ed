"""Human units for numbers in tables: engineering prefixes and fixed significant figures."""

from __future__ import annotations

import math

_PREFIXES = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")]
_SMALL = [(1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")]


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
