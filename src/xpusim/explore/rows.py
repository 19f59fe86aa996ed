"""A sweep point and its result as one flat row of scalars: a line of the CSV, a Parquet
record, a point of a plot.

The row is what `xpusim run --json` says, less its lists (ops, collectives, notes), with
nested objects one level deep as dotted columns (`plan.tp`, `memory_bytes.total`), plus the
throughput per chip that compares systems of different sizes. A point that raised a user
error keeps its inputs and says why in `error`. A sweep's chunk of points is gathered as
columns (`Columns`), which is how it travels to the results file.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Mapping, Sequence
from operator import itemgetter, truediv
from typing import Any

from xpusim.errors import UserError
from xpusim.explore.grid import Point
from xpusim.memo import distinct
from xpusim.result import Nested, Results, field_names

Scalar = bool | int | float | str | None

SKIPPED = frozenset({"plan_search"})  # its search time would make equal sweeps differ
PER_CHIP = ("tokens_per_s", "queries_per_s", "throughput")
"""Rates divided by the system's chips into `<rate>_per_chip` columns."""


class Columns:
    """Rows as columns: each column's cells, one a row, None where a row has none; columns in
    the order they first appear (the point's inputs, its result's fields in declaration
    order with nested keys as they first appear, the per-chip rates, `key`, `error`).

    A sweep's chunk is made, sent and stored this way: gathered a column at a time over
    the chunk's results, not a dict a point (a 10,000-point sweep has 600,000 cells)."""

    def __init__(self, cells: dict[str, list[Scalar]], size: int,
                 kinds: dict[str, frozenset[type]] | None = None):  # fmt: skip
        self.cells = cells
        self.size = size
        # the types of each column's cells, where known: as_stored, the lines and the
        # results file's process each need them (a set of a column's types: 15 us)
        self.kinds = kinds or {}

    @classmethod
    def of(cls, points: Sequence[Point], found: Results | Sequence[Any]) -> Columns:
        """The points' inputs, then every scalar of each one's result (resolved values win:
        a precision not given shows the one the chip used), or the UserError that it raised
        in `error`. `found` is the points' results in order, as objects or as Results
        (api.simulate_table's columns, which no object is made of)."""
        results = found if isinstance(found, Results) else Results.of(found)
        n = len(points)
        every = range(n)
        gathered = _Gathered(n)
        gathered.put(every, "target", [p.target for p in points])
        gathered.put_mappings(every, [dict(p.sets) for p in points], "set.")
        gathered.put_mappings(every, [dict(p.options) for p in points], "")
        for t, table in enumerate(results.tables):
            jobs, rows = results.rows_of(t)
            where = every if len(jobs) == n else jobs
            take = None if rows == list(range(table.size)) else rows
            for name in field_names(table.kind):
                column = table.columns.get(name)
                if column is None or name in SKIPPED:
                    continue
                if isinstance(column, Nested):
                    for key, values in column.columns.items():
                        gathered.put_values(where, f"{name}.{key}", _taken(values, take))
                else:
                    values = _taken(column, take)
                    if name in _objects(table.kind) and not any(v is not None for v in values):
                        continue  # no column of its own: its dotted ones, where any row has it
                    gathered.put_values(where, name, values)
        cells = gathered.cells
        chips = cells.get("chips")
        for rate in PER_CHIP:
            if rate in cells and chips is not None:
                gathered.put(every, f"{rate}_per_chip", _per_chip(cells[rate], chips),
                             complete=False)  # fmt: skip
        gathered.put(every, "key", [p.key for p in points])
        gathered.put(every, "error", [str(f) if isinstance(f, UserError) else _ABSENT
                                      for f in results.found], complete=False)  # fmt: skip
        return cls(gathered.finished(), n, gathered.kinds)

    def row(self, i: int) -> dict[str, Scalar]:
        return {name: column[i] for name, column in self.cells.items()}

    @property
    def has_results(self) -> bool:
        """Whether any row is a result rather than an error."""
        errors = self.cells.get("error")
        return errors is None or None in errors

    def as_stored(self) -> Columns:
        """The cells as the results file will give them back (stored_cell): a sweep's
        workers apply it, so that the process writing the file does no more than write.
        `key` is left as it is (a JSON list, a text however read). Changes the text cells
        in place and returns itself."""
        for name, column in self.cells.items():
            kinds = self.kinds.get(name) or set(map(type, column))
            if name != "key" and any(issubclass(kind, str) for kind in kinds):
                if kinds == {str} and column.count(column[0]) == len(column):  # a chip's id
                    column = self.cells[name] = [from_text(column[0])] * len(column)
                else:
                    column = self.cells[name] = (
                        list(map(from_text, column)) if kinds == {str} else
                        [stored_cell(v) if isinstance(v, str) else v for v in column])  # fmt: skip
                kinds = set(map(type, column))
            self.kinds[name] = frozenset(kinds)
        return self


def result_row(point: Point, result: Any) -> dict[str, Scalar]:
    """One point's row (Columns.of, of one)."""
    return Columns.of([point], [result]).row(0)


def error_row(point: Point, error: UserError) -> dict[str, Scalar]:
    """One point's row where it raised a user error."""
    return Columns.of([point], [error]).row(0)


_ABSENT: Any = object()  # a row without the column, while the columns are gathered
_PLAIN = frozenset({bool, int, float, str, type(None)})


class _Gathered:
    """Columns being gathered for `n` rows; a cell no value was put in is _ABSENT until
    `finished` makes it None."""

    def __init__(self, n: int):
        self.n = n
        self.cells: dict[str, list] = {}
        self._partial: set[str] = set()  # columns that may hold _ABSENT
        self.kinds: dict[str, frozenset[type]] = {}  # the types of a column's cells, if known

    def put(self, where: Sequence[int], name: str, values: list, complete: bool = True,
            kinds: frozenset[type] | None = None) -> None:  # fmt: skip
        """A column's cells at rows `where` (a range of every row, or some of them); an
        _ABSENT value (only where not `complete`) leaves the cell as it is; a column no row
        has is not added. `kinds`: the values' types, where the caller found them."""
        if not complete and values.count(_ABSENT) == len(values):
            return
        column = self.cells.get(name)
        self.kinds.pop(name, None)
        if isinstance(where, range) and (column is None or complete):  # every row's, as given
            self.cells[name] = values  # (over a point's input: the value the chip resolved)
            if not complete:
                self._partial.add(name)
                return
            self._partial.discard(name)
            if kinds is not None:
                self.kinds[name] = kinds
            return
        if column is None:
            column = self.cells[name] = [_ABSENT] * self.n
            self._partial.add(name)
        for i, value in zip(where, values, strict=True):
            if value is not _ABSENT:
                column[i] = value

    def put_mappings(self, where: Sequence[int], maps: list[Mapping], prefix: str) -> None:
        """The keys of per-row mappings as columns (prefixed), in the order they first
        appear; only scalar values are kept."""
        layouts = dict.fromkeys(map(tuple, maps))  # the rows' key lists: a sweep has one
        keys = dict.fromkeys(key for layout in layouts for key in layout)
        for key in keys:
            if len(layouts) == 1:
                values = list(map(itemgetter(key), maps))
                if set(map(type, values)) <= _PLAIN:
                    self.put(where, prefix + key, values)
                    continue
            values = [found.get(key, _ABSENT) for found in maps]
            self.put(where, prefix + key, _scalars(values), complete=False)

    def put_values(self, where: Sequence[int], name: str, values: list) -> None:
        """One field of the results: a scalar's cells as they are, a dict's or dataclass's
        scalars one level deep as dotted columns (`plan.tp`); lists are left out, and so
        is a field's None beside dicts or dataclasses (a point that does not fit has no
        `cost`): its dotted columns are empty there, and a column of its own would be empty
        throughout."""
        kinds = frozenset(map(type, values))
        if kinds <= _PLAIN:
            self.put(where, name, values, kinds=kinds)
            return
        nesting = {kind for kind in kinds if kind is dict or dataclasses.is_dataclass(kind)}
        if not kinds <= nesting | {type(None)}:
            self.put(where, name, _scalars(values), complete=False)
        if not nesting:
            return
        if kinds <= nesting:
            self._put_objects(where, values, f"{name}.")
        else:  # the rows that have one
            self._put_objects([i for i, v in zip(where, values, strict=True) if type(v) in nesting],
                              [v for v in values if type(v) in nesting], f"{name}.")  # fmt: skip

    def _put_objects(self, where: Sequence[int], objects: list, prefix: str) -> None:
        """Dicts' or dataclasses' scalars as dotted columns (put_mappings), each distinct
        object read once: a sweep's rows share a few plans, placements and decodings (one
        object each: inference._shared), and reading 10,000 of them one by one took a
        tenth of a one-chip sweep's rows (2026-12-04)."""
        found, which = distinct(objects)
        if len(found) == len(objects):
            self.put_mappings(where, list(map(_mapping, objects)), prefix)
            return
        once = _Gathered(len(found))
        once.put_mappings(range(len(found)), list(map(_mapping, found)), prefix)
        rows = which.tolist()
        for name, column in once.cells.items():
            self.put(where, name, list(map(column.__getitem__, rows)),
                     complete=name not in once._partial)  # fmt: skip

    def finished(self) -> dict[str, list[Scalar]]:
        for name in self._partial:
            column = self.cells[name]
            if _ABSENT in column:
                self.cells[name] = [None if v is _ABSENT else v for v in column]
        return self.cells


@functools.cache
def _objects(kind: type) -> frozenset[str]:
    """The result fields declared as an object or None (`cost: Cost | None`). Where every row
    of a chunk has None there, the field gets no column: a chunk with one would store a
    `cost` column that a chunk holding an object stores as `cost.basis`, ..., and a resumed
    sweep's file would differ from one run at once (an unpriced chip's rows resumed beside
    a priced one's)."""
    hints = typing.get_type_hints(kind)
    return frozenset(name for name, hint in hints.items()
                     if any(dataclasses.is_dataclass(a) or a is dict
                            for a in typing.get_args(hint)))  # fmt: skip


def _per_chip(rates: list, chips: list) -> list:
    """Each rate over its row's chips, where both are numbers (a float rate and a positive
    integer count); _ABSENT elsewhere. A column at a time where all are."""
    if chips and set(map(type, rates)) == {float} and set(map(type, chips)) == {int} \
            and min(chips) > 0:
        return list(map(truediv, rates, chips))
    return [x / c if isinstance(x, float) and isinstance(c, int) and c > 0 else _ABSENT
            for x, c in zip(rates, chips, strict=True)]  # fmt: skip


def _scalars(values: list) -> list:
    """The values, _ABSENT where one is not a scalar (a list, a dict, an object)."""
    scalar = {kind for kind in set(map(type, values)) if kind in _PLAIN or issubclass(
        kind, bool | int | float | str)}  # fmt: skip
    return [v if type(v) in scalar else _ABSENT for v in values]


def _taken(values: list, rows: list[int] | None) -> list:
    """The values at these rows of a table's column (None: all of them), as a list of
    their own: the columns gathered go on to be filled in place."""
    return list(values) if rows is None else [values[r] for r in rows]


def _mapping(obj: Any) -> Mapping[str, Any]:
    """A dict as it is; a dataclass instance's fields and values, in declaration order (its
    __dict__ where it holds nothing else: its __init__ sets every field, in order)."""
    if type(obj) is dict:
        return obj
    names = field_names(type(obj))
    found = getattr(obj, "__dict__", None)
    if found is not None and tuple(found) == names:
        return found
    return {name: getattr(obj, name) for name in names}


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


def stored_cell(value: Scalar) -> Scalar:
    """A cell as the results file will give it back: numbers, booleans and None come back
    as they are (floats are written with repr), a text may not ("12" reads as 12, and a
    str enum as its text)."""
    return from_text(value) if isinstance(value, str) else value

