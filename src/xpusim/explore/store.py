"""The results of a sweep on disk, written as they arrive, so that an interrupted sweep keeps
what it finished and a rerun into the same folder simulates only the points still missing.

Rows go to a CSV file, appended and flushed chunk by chunk; each row carries its point's
`key`, which is how a rerun knows what is done. The columns are those of the first row
with a result; a later row with a column the file lacks rewrites the file with it added.
Rows in memory are read back through the same text form, so a resumed sweep's summary is
identical to an uninterrupted one's.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from xpusim.errors import UserError
from xpusim.explore.rows import Scalar, from_text, to_text

Row = dict[str, Scalar]


class StoredRow(Mapping[str, Scalar]):
    """A row of the results file, kept as compactly as a tuple: its values in the store's
    column order, read through one column index that every row of the store shares (a
    million-point sweep keeps a million rows). Columns only ever grow, at the end, so a row
    stored before a column was added has a shorter tuple and reads None there, as the
    file's empty cell does: every column of the store is a key of every row."""

    __slots__ = ("_index", "_values")

    def __init__(self, index: dict[str, int], values: tuple[Scalar, ...]):
        self._index, self._values = index, values

    def __getitem__(self, key: str) -> Scalar:
        i = self._index[key]
        return self._values[i] if i < len(self._values) else None

    def get(self, key: str, default: Scalar = None) -> Scalar:  # type: ignore[override]
        i = self._index.get(key)
        if i is None:
            return default
        return self._values[i] if i < len(self._values) else None

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def __repr__(self) -> str:
        return f"StoredRow({dict(self)!r})"

    def cells(self) -> tuple[Scalar, ...]:
        """Its values in the store's column order, as far as it has them."""
        return self._values


class ResultStore:
    def __init__(self, path: Path):
        self.path = path
        self.columns: list[str] = []
        self._index: dict[str, int] = {}  # column -> position, shared by every StoredRow
        self.rows: list[StoredRow] = []
        self._pending: list[Row] = []  # rows waiting for a first result to fix the columns
        # one object per distinct text ("h100-sxm", "int8", "memory"): rows arrive unpickled
        # from the workers, each with its own copies
        self._shared: dict[str, str] = {}
        if path.exists():
            self._load()

    def _load(self) -> None:
        with self.path.open(newline="") as f:
            reader = csv.reader(f)
            self._add_columns(next(reader, []))
            if "key" not in self.columns:
                raise UserError(f"{self.path}: not a sweep's results file (no 'key' column)")
            width = len(self.columns)
            self.rows = [StoredRow(self._index, tuple(map(from_text, cells[:width])))
                         for cells in reader]  # fmt: skip

    def _add_columns(self, names: Iterable[str]) -> None:
        for name in names:
            if name not in self._index:
                self._index[name] = len(self.columns)
                self.columns.append(name)

    @property
    def done(self) -> set[str]:
        return {str(row["key"]) for row in self.rows + self._pending}

    def add(self, rows: Iterable[Row]) -> None:
        """Stores rows made by as_stored, on disk once the columns are known."""
        self._pending += rows
        if self.columns or any("error" not in row for row in self._pending):
            self._flush()

    def close(self) -> None:
        """Writes rows still waiting for columns (a sweep in which every point failed)."""
        if self._pending:
            self._flush()

    def _flush(self) -> None:
        new, self._pending = self._pending, []
        results_first = sorted(new, key=lambda row: "error" in row)
        known = self._index
        missing = [k for row in results_first for k in row if k not in known]
        self._add_columns(missing)
        columns, index, shared = self.columns, self._index, self._shared
        stored = [StoredRow(index, tuple([shared.setdefault(v, v) if type(v) is str else v
                                          for v in map(row.get, columns)]))
                  for row in new]  # fmt: skip
        self.rows += stored
        if missing:
            self._rewrite()
        else:
            self._append(stored)

    def reorder(self, keys: Sequence[str]) -> None:
        """Rewrites the file with these points' rows first, in this order: a finished sweep's
        file is the same however its chunks were scheduled, interrupted or resumed."""
        rank = {key: i for i, key in enumerate(keys)}
        self.rows.sort(key=lambda row: rank.get(str(row["key"]), len(rank)))
        self._rewrite()

    def _append(self, rows: list[StoredRow]) -> None:
        with self.path.open("a", newline="") as f:
            csv.writer(f).writerows(self._cells(row) for row in rows)

    def _rewrite(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        with tmp.open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(self.columns)
            writer.writerows(self._cells(row) for row in self.rows)
        os.replace(tmp, self.path)

    def _cells(self, row: StoredRow) -> list[Scalar]:
        """The row's cells in column order, as to_text writes them; the csv module writes
        numbers with str (repr, for floats) and None as empty already, so only booleans
        need converting; a row stored before the last columns came ends in empty cells."""
        cells = [to_text(v) if v is True or v is False else v for v in row.cells()]
        return cells + [None] * (len(self.columns) - len(cells))


def as_stored(row: Row) -> Row:
    """The row as the results file will give it back: numbers, booleans and None come back
    as they are (floats are written with repr), a string may not ("12" reads as 12). A
    sweep's workers apply it, so that the process writing the file does no more than write.
    Changes the row's texts in place (no key is added or removed) and returns it."""
    for key, value in row.items():
        if isinstance(value, str):
            row[key] = from_text(value)
    return row
