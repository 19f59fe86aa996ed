"""A sweep point and its result as one flat row of scalars: a line of the CSV, a Parquet
record, a point of a plot.

The row is what `xpusim run --json` says, less its lists (ops, collectives, notes), with
nested objects one level deep as dotted columns (`plan.tp`, `memory_bytes.total`), plus the
throughput per chip that compares systems of different sizes. A point that raised a user
error keeps its inputs and says why in `error`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable
from typing import Any

from xpusim.explore.grid import Point

Scalar = bool | int | float | str | None

SKIPPED = frozenset({"plan_search"})  # its search time would make equal sweeps differ
PER_CHIP = ("tokens_per_s", "queries_per_s", "throughput")
"""Rates divided by the system's chips into `<rate>_per_chip` columns."""


def point_row(point: Point) -> dict[str, Scalar]:
    """The inputs of a point: its target, each what-if value and each option typed."""
    row: dict[str, Scalar] = {"target": point.target}
    row.update({f"set.{path}": value for path, value in point.sets})
    row.update(point.options)
    return row


def result_row(point: Point, result: Any) -> dict[str, Scalar]:
    """The point's inputs, then every scalar of its result (resolved values win: a
    precision not given shows the one the chip used)."""
    row = point_row(point)
    for name in _field_names(type(result)):
        if name in SKIPPED:
            continue
        value = getattr(result, name)
        if value is None or type(value) in _SCALARS:
            row[name] = value
        elif type(value) is dict:
            _nested(row, name, value.items())
        elif dataclasses.is_dataclass(value):
            _nested(row, name, ((k, getattr(value, k)) for k in _field_names(type(value))))
        elif _is_scalar(value):  # a subclass of a scalar type (an enum's str)
            row[name] = value
    chips = row.get("chips")
    for rate in PER_CHIP:
        if isinstance(row.get(rate), float) and isinstance(chips, int) and chips > 0:
            row[f"{rate}_per_chip"] = row[rate] / chips
    row["key"] = point.key
    return row


def _nested(row: dict[str, Scalar], name: str, items: Iterable[tuple[str, Any]]) -> None:
    """A nested object's scalars as dotted columns."""
    for key, value in items:
        if value is None or type(value) in _SCALARS or _is_scalar(value):
            row[_dotted(name, key)] = value


@functools.cache  # a sweep's rows have the same few dozen nested columns
def _dotted(name: str, key: str) -> str:
    return f"{name}.{key}"


_SCALARS = frozenset({bool, int, float, str})


def error_row(point: Point, error: Exception) -> dict[str, Scalar]:
    return {**point_row(point), "error": str(error), "key": point.key}


def _field_names(cls: type) -> tuple[str, ...]:
    """A dataclass's field names, in declaration order (kept: dataclasses.fields() rebuilds
    its tuple on every call)."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, bool | int | float | str)


def to_text(value: Scalar) -> str:
    """A CSV cell that `from_text` reads back as the same value and type."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)


_NUMBER_STARTS = frozenset("0123456789+-.iInN")  # what float() accepts may start with


def from_text(text: str) -> Scalar:
    """Inverse of `to_text`: integers, floats (repr always has '.', 'e', 'inf' or 'nan'),
    booleans, empty as None, anything else a string."""
    if text == "":
        return None
    if text in ("true", "false"):
        return text == "true"
    if text.lstrip("-").isdigit():
        return int(text)
    if text.lstrip()[:1] not in _NUMBER_STARTS:  # float() would refuse it: skip its raise
        return text
    try:
        return float(text)
    except ValueError:
        return text
