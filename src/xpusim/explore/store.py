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
from collections.abc import Iterable, Sequence
from pathlib import Path

from xpusim.errors import UserError
from xpusim.explore.rows import Scalar, from_text, to_text

Row = dict[str, Scalar]


class ResultStore:
    def __init__(self, path: Path):
        self.path = path
        self.columns: list[str] = []
        self.rows: list[Row] = []
        self._pending: list[Row] = []  # rows waiting for a first result to fix the columns
        if path.exists():
            self._load()

    def _load(self) -> None:
        with self.path.open(newline="") as f:
            reader = csv.DictReader(f)
            self.columns = list(reader.fieldnames or [])
            if "key" not in self.columns:
                raise UserError(f"{self.path}: not a sweep's results file (no 'key' column)")
            self.rows = [{k: from_text(v or "") for k, v in row.items()} for row in reader]

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
        known = set(self.columns)
        missing = [k for row in results_first for k in row if k not in known]
        self.rows += new
        if missing:
            self.columns += list(dict.fromkeys(missing))
            self._rewrite()
        else:
            self._append(new)

    def reorder(self, keys: Sequence[str]) -> None:
        """Rewrites the file with these points' rows first, in this order: a finished sweep's
        file is the same however its chunks were scheduled, interrupted or resumed."""
        rank = {key: i for i, key in enumerate(keys)}
        self.rows.sort(key=lambda row: rank.get(str(row["key"]), len(rank)))
        self._rewrite()

    def _append(self, rows: list[Row]) -> None:
        with self.path.open("a", newline="") as f:
            csv.writer(f).writerows(self._cells(row) for row in rows)

    def _rewrite(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        with tmp.open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(self.columns)
            writer.writerows(self._cells(row) for row in self.rows)
        os.replace(tmp, self.path)

    def _cells(self, row: Row) -> list[Scalar]:
        """The row's cells in column order, as to_text writes them; the csv module writes
        numbers with str (repr, for floats) and None as empty already, so only booleans
        need converting."""
        return [to_text(v) if v is True or v is False else v for v in map(row.get, self.columns)]


def as_stored(row: Row) -> Row:
    """The row as the results file will give it back: numbers, booleans and None come back
    as they are (floats are written with repr), a string may not ("12" reads as 12). A
    sweep's workers apply it, so that the process writing the file does no more than write."""
    return {k: from_text(v) if isinstance(v, str) else v for k, v in row.items()}
