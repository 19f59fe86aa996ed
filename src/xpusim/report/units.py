"""Human units for numbers in tables: engineering prefixes and fixed significant figures."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

_PREFIXES = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")]
_SMALL_PREFIXES = [(1e-3, "m"), (1e-6, "µ"), (1e-9, "n"), (1e-12, "p")]
_SMALL = [(1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"), (1e-12, "ps")]


def si(value: float, unit: str = "", digits: int = 3) -> str:
    """The one number style of every table: three significant figures and an SI prefix.
    1.979e15, 'OPS' -> '1.98 POPS'; 55_850 -> '55.8 k'; 0.00412, 'J' -> '4.12 mJ'. Below one,
    a bare number stays a decimal ('0.686'): a prefix on a count without a unit reads badly."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g} {unit}".strip()
    value = float(f"{value:.{digits}g}")  # round first: 999.96 prints as '1 k', not '1e+03'
    for scale, prefix in _PREFIXES:
        if abs(value) >= scale:
            return f"{value / scale:.{digits}g} {prefix}{unit}".strip()
    if unit:
        for scale, prefix in _SMALL_PREFIXES:
            if abs(value) >= scale:
                return f"{value / scale:.{digits}g} {prefix}{unit}"
    return f"{value:.{digits}g} {unit}".strip()


def seconds(value: float, digits: int = 3) -> str:
    value = float(f"{value:.{digits}g}")  # round first: 999.9995 µs prints as 1 ms
    for scale, unit in _SMALL:
        if abs(value) >= scale:
            return f"{value / scale:.{digits}g} {unit}"
    return f"{value:.{digits}g} s"


def watts(average: float, tdp: float) -> str:
    """A chip's average draw over its TDP in one unit, so the two read as a fraction: '385/700
    W', '312/1000 W' (three significant figures, never an exponent: a 1 kW chip's TDP as
    '1e+03' was not a number a person reads)."""
    return f"{plain(average)}/{plain(tdp)} W"


def plain(value: float, digits: int = 3) -> str:
    """A number to `digits` significant figures without a prefix or an exponent, for a
    column whose header carries the unit: 27_790, 4 -> '27790', 0.0688 -> '0.0688'."""
    return np.format_float_positional(value, precision=digits, fractional=False, trim="-")


_SUFFIX_UNITS = [("_bytes_per_s", "B/s"), ("ops_per_s", "OPS"), ("_bytes", "B"), ("_hz", "Hz"),
                 ("_w", "W")]  # fmt: skip
"""A figure's unit read off its name (the chip files name every unit: clock_hz, tdp_w), the
longest suffix first: 'bandwidth_bytes_per_s' is B/s, not B or s."""


def figure(name: str, value: Any, digits: int = 4) -> str:
    """A chip file's figure in the one number style, its unit from its name: 'clock_hz',
    1.98e9 -> '1.98 GHz'; 'peak_ops_per_s.bf16', 9.895e14 -> '989.5 TOPS'; a count or an
    efficiency as a plain number. Four figures, not three: the datasheets' own (1,979
    TFLOPS) print whole; `xpusim chip --json` has every figure exact."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return value
    name = name.split(".")[0] if name.startswith("peak_ops_per_s.") else name
    if name.endswith("_pj_per_byte"):
        return f"{plain(value, digits)} pJ/B"
    unit = next((u for suffix, u in _SUFFIX_UNITS if name.endswith(suffix)), None)
    if unit is not None:
        return si(value, unit, digits)
    return seconds(value, digits) if name.endswith("_s") else plain(value, digits)


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
