"""The one thing every result shares: it is a plain dataclass that serializes to JSON.

The CLI's `--json` prints `to_dict()`; nested dataclasses (memory splits, op reports) become
nested objects, so a result's JSON and its Python fields never drift apart. `to_dict` is also
the result boundary where a number that is not finite is caught: inputs are validated where
they enter (docs/reliability.md), so an infinity or NaN here is the simulator's bug, and it
is raised, naming the field, rather than printed.

Many results of one kind can also be held as columns (`Table`), and many jobs' results as
`Results`: a sweep's 10,000 points become rows of its results file from columns worked out
as arrays, and a result object is only made for a row a caller takes.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from operator import attrgetter
from typing import Any

from xpusim.errors import UserError


class NonFiniteResult(AssertionError):
    """A result field came out infinite or NaN from valid inputs: a bug to report."""


def check_finite(value: Any, path: str) -> None:
    """Every float in a result's dict, list or tuple is finite. Looked over once without
    paths (a sweep checks thousands of rows' dicts); the path is spelled out only for a
    value that is not."""
    if not _all_finite(value):
        _name_non_finite(value, path)


def _all_finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        value = value.values()
    elif not isinstance(value, list | tuple):
        return True
    for item in value:  # a dict's or list's own items in this loop, not a call each
        if isinstance(item, float):
            if not math.isfinite(item):
                return False
        elif isinstance(item, dict | list | tuple) and not _all_finite(item):
            return False
    return True


def _name_non_finite(value: Any, path: str) -> None:
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NonFiniteResult(f"{path} is {value}: a bug in xpusim; please report the command")
    elif isinstance(value, dict):
        for key, item in value.items():
            _name_non_finite(item, f"{path}.{key}")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _name_non_finite(item, f"{path}[{i}]")


class Result:
    """Mixin for result dataclasses."""

    def to_dict(self) -> dict:
        data = asdict(self)  # type: ignore[call-overload]
        check_finite(data, type(self).__name__)
        return data


def field_names(cls: type) -> tuple[str, ...]:
    """A dataclass's field names, in declaration order (kept: dataclasses.fields() rebuilds
    its tuple on every call)."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


@dataclass
class Nested:
    """A dataclass-typed field of many results (a memory split) as columns of its own
    fields: the objects are made only for the rows a caller takes. A field that some rows
    leave None (a cost where no price is known) has None in each column there, and
    `present` says which rows have one."""

    kind: type
    columns: dict[str, list]
    present: list[bool] | None = None  # None: every row has one


@dataclass
class Table:
    """Many results of one kind as columns: a list per field, one value a row (a Nested for
    a dataclass-typed field), in the kind's field order. A field left out takes its
    default in a row. A row's dicts and lists are its own copies: a column may hold one
    object for many rows (a plan's degrees)."""

    kind: type
    columns: dict[str, list | Nested]
    size: int

    @classmethod
    def of(cls, results: Sequence[Any]) -> Table:
        """Results of one kind, as columns."""
        kind = type(results[0])
        return cls(kind, {name: list(map(attrgetter(name), results))
                          for name in field_names(kind)}, len(results))  # fmt: skip

    def row(self, i: int) -> Any:
        return self.kind(**{name: _cell(column, i) for name, column in self.columns.items()})

    def check_finite(self) -> None:
        """to_dict's check over every row at once (a sweep's rows are never made objects):
        a column of numbers is summed in one C loop, finite only if every cell is; only a
        column that is not, or holds texts, None or objects, is looked at cell by cell
        (4 ms for 2,000 one-chip points, against 0.46 s simulating them)."""
        _check_columns(self.columns, self.kind.__name__)

    def put_row(self, i: int, result: Any) -> None:
        """Row i becomes `result` (of the table's kind): a job whose answer was replaced
        after its columns were made (a torus layout's, scenarios/llm/torus.py)."""
        for name, column in self.columns.items():
            value = getattr(result, name)
            if isinstance(column, Nested):
                for key, values in column.columns.items():
                    values[i] = getattr(value, key)
            else:
                column[i] = value

    def cell(self, name: str, i: int) -> Any:
        """One field of row i, as the row's object would hold it."""
        return _cell(self.columns[name], i)


def _check_columns(columns: dict[str, list | Nested], path: str) -> None:
    for name, column in columns.items():
        if isinstance(column, Nested):
            _check_columns(column.columns, f"{path}.{name}")
            continue
        try:
            if math.isfinite(sum(column)):
                continue
        except (TypeError, OverflowError):  # texts, None, objects; ints past a float
            pass
        # rows share their plan's and placement's objects: each is looked into once
        for i, value in {id(v): (i, v) for i, v in enumerate(column)}.values():
            check_finite(value, f"{path}.{name}[{i}]")


def _cell(column: list | Nested, i: int) -> Any:
    if isinstance(column, Nested):
        if column.present is not None and not column.present[i]:
            return None
        return column.kind(**{name: values[i] for name, values in column.columns.items()})
    value = column[i]
    if type(value) is dict:
        return dict(value)
    if dataclasses.is_dataclass(value):  # a result object's part (its MemoryBytes): a copy
        return dataclasses.replace(value)
    return list(value) if type(value) is list else value


class Results(Sequence):
    """Many jobs' results, in job order: each job's row of one of `tables`, or the
    UserError it raised. Indexing makes the result object."""

    def __init__(self, tables: list[Table], found: list[tuple[int, int] | UserError]):
        self.tables = tables
        self.found = found  # per job: (table, row), or its error

    @classmethod
    def of(cls, found: Sequence[Any]) -> Results:
        """Result objects and UserErrors, a table for each kind of result."""
        by_kind: dict[type, list[int]] = {}
        for i, result in enumerate(found):
            if not isinstance(result, UserError):
                by_kind.setdefault(type(result), []).append(i)
        placed: list[tuple[int, int] | UserError] = list(found)
        tables = []
        for t, at in enumerate(by_kind.values()):
            tables.append(Table.of([found[i] for i in at]))
            for r, i in enumerate(at):
                placed[i] = (t, r)
        return cls(tables, placed)

    def __len__(self) -> int:
        return len(self.found)

    def __getitem__(self, i: int | slice) -> Any:  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        found = self.found[i]
        if isinstance(found, UserError):
            return found
        table, row = found
        return self.tables[table].row(row)

    def rows_of(self, table: int) -> tuple[list[int], list[int]]:
        """The jobs whose results are rows of this table, and their rows."""
        found = self.found
        jobs = [i for i, f in enumerate(found) if type(f) is tuple and f[0] == table]
        return jobs, [found[i][1] for i in jobs]
