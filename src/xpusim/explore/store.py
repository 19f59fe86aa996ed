"""The results of a sweep on disk, written as they arrive, so that an interrupted sweep keeps
what it finished and a rerun into the same folder simulates only the points still missing.

Rows go to a CSV file, appended and flushed chunk by chunk; each row carries its point's
`key`, which is how a rerun knows what is done, and its `spec_hash`, which is how it knows the
row still answers the same question. The columns are those of the first row with a result;
a later row with a column the file lacks rewrites the file with it added (atomically, as
every rewrite). Rows in memory are read back through the same text form, so a resumed
sweep's summary is identical to an uninterrupted one's. One sweep at a time writes a folder
(`locked`).
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import io
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import IO

from xpusim.errors import UserError
from xpusim.explore.rows import Columns, Scalar, from_text, to_text
from xpusim.files import atomic, read_text

Row = dict[str, Scalar]
SPEC_HASH = "spec_hash"  # the column naming what a row was simulated from
LOCK_FILE = ".xpusim.lock"
_LINE_END = "\r\n"  # the csv module's
MOVED_MAX_BYTES = 256 * 2**20
"""The largest results file whose rows a rewrite moves as text (held in memory while it
writes, beside the rows: about 400,000 rows); a larger one's rows are formatted again."""


REWRITE_ROWS = 10_000
"""Rows a rewrite formats at a time (_write_rows): their texts are held until written."""


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


def column(rows: Sequence[StoredRow], name: str) -> list[Scalar]:
    """One column of stored rows (None where a row has none), read with one C call a row
    rather than a lookup through StoredRow (a million-row Parquet file reads 60 columns)."""
    if not rows:
        return []
    at = rows[0]._index[name]  # every row of a store shares its index
    values = list(map(_VALUES, rows))
    if at < min(map(len, values)):  # rows stored before a column came are shorter
        return list(map(itemgetter(at), values))
    return [v[at] if at < len(v) else None for v in values]


_VALUES = attrgetter("_values")


class ResultStore:
    """The results file of one grid: `expected` maps each of its points' keys to the hash of
    what the point simulates (spec_hash: the model, the chip or system with its what-ifs,
    xpusim's version), and a file already there is checked against it before any row of it
    is trusted (see _load)."""

    def __init__(self, path: Path, expected: Mapping[str, str]):
        self.path = path
        self.expected = expected
        self.columns: list[str] = []
        self._index: dict[str, int] = {}  # column -> position, shared by every StoredRow
        self.rows: list[StoredRow] = []
        # chunks waiting for a first result to fix the columns, with their lines (add)
        self._pending: list[tuple[Columns, list[str] | None]] = []
        # one object per distinct text ("h100-sxm", "int8", "memory"): rows arrive unpickled
        # from the workers, each with its own copies
        self._shared: dict[str, str] = {}
        # (first row's key, its columns in order) of the file loaded and of every chunk
        # stored: reorder's column order is their first appearance in grid order
        self._orders: list[tuple[str, list[str]]] = []
        self.notes: list[str] = []
        if path.exists():
            self._load()

    def _load(self) -> None:
        """The rows of a file already there, each verified: a row that is not whole (torn by
        a kill or a full disk, or with cells added or lost) is dropped and simulated again,
        with a note; a whole row that is not one of this grid's points, repeats one, or was
        simulated from different inputs refuses the resume, with its line."""
        text = read_text(self.path, "results")
        records = list(_records(text))
        if not records:
            return
        header = records[0][1]
        if "key" not in header or SPEC_HASH not in header:
            raise UserError(f"{self.path}: not a results file of this xpusim's sweeps (no "
                            f"'key' and '{SPEC_HASH}' columns); give a new --out")  # fmt: skip
        if len(set(header)) != len(header):
            raise UserError(f"{self.path} line 1: a column appears twice")
        self._add_columns(header)
        width, key_at, hash_at = len(header), header.index("key"), header.index(SPEC_HASH)
        if len(records) > 1 and len(records[1][1]) > key_at:
            self._orders.append((records[1][1][key_at], list(header)))
        torn = not text.endswith("\n")  # the last record was cut short
        dropped, seen = [], set()
        for i, (line, cells) in enumerate(records[1:], 1):
            if len(cells) != width or (torn and i == len(records) - 1):
                dropped.append(line)
                continue
            key, spec_hash = cells[key_at], cells[hash_at]
            where = f"{self.path} line {line}"
            if key not in self.expected:
                raise UserError(f"{where}: a point this sweep does not have (another grid's "
                                f"results?); give a new --out or remove the file")  # fmt: skip
            if key in seen:
                raise UserError(f"{where}: a point already on an earlier line; remove one")
            if spec_hash != self.expected[key]:
                raise UserError(f"{where}: simulated from a different model, chip file or "
                                f"xpusim version; remove the file to simulate afresh")  # fmt: skip
            seen.add(key)
            values = list(map(from_text, cells))
            values[key_at], values[hash_at] = key, spec_hash  # texts, even all digits
            self.rows.append(StoredRow(self._index, tuple(values)))
        if dropped:
            lines = ", ".join(map(str, dropped[:5])) + (", ..." if len(dropped) > 5 else "")
            self.notes.append(f"{self.path.name}: dropped {len(dropped)} row(s) that were not "
                              f"whole (line {lines}); simulated again")  # fmt: skip
            self._rewrite()

    def _add_columns(self, names: Iterable[str]) -> None:
        for name in names:
            if name not in self._index:
                self._index[name] = len(self.columns)
                self.columns.append(name)

    @property
    def done(self) -> set[str]:
        return {str(row["key"]) for row in self.rows} | {
            str(key) for chunk, _ in self._pending for key in chunk.cells["key"]}

    def add(self, chunk: Columns, lines: list[str] | None = None) -> None:
        """Stores a chunk's rows (Columns.as_stored), on disk once the columns are known.
        `lines` are its rows' lines in its own column order (lines_of), formatted where it
        was simulated: written as they are where the file's columns begin with the chunk's
        (most chunks of a sweep), else the rows are formatted here."""
        self._pending.append((chunk, lines))
        if self.columns or any(c.has_results for c, _ in self._pending):
            self._flush()

    def close(self) -> None:
        """Writes rows still waiting for columns (a sweep in which every point failed)."""
        if self._pending:
            self._flush()

    def _flush(self) -> None:
        with _uninterrupted():  # a chunk is on disk and in `rows` whole, or not at all
            new, self._pending = self._pending, []
            self._store(new)

    def _store(self, new: list[Columns]) -> None:
        """The chunks' rows as StoredRows, made a column at a time (a text repeated across
        rows kept as one object); the columns a chunk brings are added in its order, those
        of chunks with results first."""
        known = self._index
        missing = [name for chunk, _ in sorted(new, key=lambda c: not c[0].has_results)
                   for name in chunk.cells if name not in known]  # fmt: skip
        self._add_columns(missing)
        index, shared, stored, lines = self._index, self._shared, [], []
        for chunk, given in new:
            if chunk.size and chunk.cells.get("key"):
                self._orders.append((str(chunk.cells["key"][0]), list(chunk.cells)))
            empty = [None] * chunk.size
            columns = [chunk.cells.get(name, empty) for name in self.columns]
            columns = [_shared_texts(column, shared, chunk.kinds.get(name))
                       for name, column in zip(self.columns, columns, strict=True)]  # fmt: skip
            stored += [StoredRow(index, values) for values in zip(*columns, strict=True)]
            lines += self._as_written(chunk, given) or _column_lines(columns)
        self.rows += stored
        if missing:
            self._rewrite(fresh=lines)
        else:
            self._append(lines)

    def _as_written(self, chunk: Columns, lines: list[str] | None) -> list[str] | None:
        """A chunk's own lines (lines_of) as this file's, where its columns are the first
        of the file's: widened by an empty cell a column it lacks; else None."""
        names = list(chunk.cells)
        if lines is None or len(names) < 2 or names != self.columns[: len(names)]:
            return None  # (a lone empty cell is written "", which a wider row's is not)
        if len(names) == len(self.columns):
            return lines
        end = "," * (len(self.columns) - len(names)) + _LINE_END
        return [line[: -len(_LINE_END)] + end for line in lines]

    def reorder(self, keys: Sequence[str]) -> None:
        """Rewrites the file with these points' rows first, in this order: a finished sweep's
        file is the same however its chunks were scheduled, interrupted or resumed."""
        rank = {key: i for i, key in enumerate(keys)}
        rows = self.rows
        order = sorted(range(len(rows)), key=lambda i: rank.get(str(rows[i]["key"]), len(rank)))
        columns = self._grid_columns(rank)
        if columns != self.columns:  # chunks that brought columns came out of grid order
            self._index = {name: i for i, name in enumerate(columns)}
            self.columns = columns
            self.rows = [StoredRow(self._index, tuple(rows[i].get(n) for n in columns))
                         for i in order]  # fmt: skip
            self._rewrite(reformat=True)
        elif order != list(range(len(rows))):
            self.rows = [rows[i] for i in order]
            self._rewrite(order=order)

    def _grid_columns(self, rank: Mapping[str, int]) -> list[str]:
        """The columns in the order a run of the chunks in grid order gives (a chunk adds
        the columns it brings first, in its order): a column that only some chunks have (a
        price, where some chips have none) must not take its place from the chunk that
        happened to finish first."""
        found: dict[str, None] = {}
        for _, names in sorted(self._orders, key=lambda o: rank.get(o[0], len(rank))):
            found.update(dict.fromkeys(names))
        return [*found, *(name for name in self.columns if name not in found)]

    def _append(self, lines: list[str]) -> None:
        """Rows' lines at the end of the file. A kill or a full disk may tear the last one:
        the next run's _load drops it."""
        try:
            with self.path.open("a", newline="") as f:
                f.writelines(lines)
        except OSError as e:
            raise UserError(f"{self.path}: cannot write: {e.strerror or e}; the rows before "
                            f"are kept, and a rerun resumes from them") from None  # fmt: skip

    def _rewrite(self, order: Sequence[int] | None = None, fresh: Sequence[str] = (),
                 reformat: bool = False) -> None:
        """The whole file anew with the store's columns, renamed over the old one only once
        whole: the rows the file holds (taken in `order`, positions among its rows, where
        given), then `fresh`: the lines of the last rows of `rows`, not yet written. The
        rows already written move as their text, widened by an empty cell a column added
        since (a 10,000-row file of 59 columns moved in 0.07-0.09 s, formatted again in
        0.33-0.35 s); they are formatted again where a cell spans lines, where the file
        is too large to hold in memory beside the rows, or with `reformat` (the columns'
        order changed)."""
        kept = len(self.rows) - len(fresh)
        written = None if reformat else self._written(kept)
        try:
            with atomic(self.path) as f:
                csv.writer(f).writerow(self.columns)
                if written is None:
                    self._write_rows(f, self.rows[:kept])
                else:
                    width, lines = written
                    taken = (lines[i] for i in order or range(kept))
                    if len(self.columns) > width:  # columns added since: an empty cell each
                        end = "," * (len(self.columns) - width) + _LINE_END
                        taken = (line[: -len(_LINE_END)] + end for line in taken)
                    f.writelines(taken)
                f.writelines(fresh)
        except OSError as e:
            raise UserError(f"{self.path}: cannot write: {e.strerror or e}; the file as it "
                            f"was is kept") from None  # fmt: skip

    def _write_rows(self, f: IO[str], rows: Sequence[StoredRow]) -> None:
        """The rows' lines, formatted and written REWRITE_ROWS at a time: formatting a
        million rows' texts at once (a rewrite of a file too large to move as text) took a
        million-point sweep's process from 2.7 to 6.0 GB (2026-12-03)."""
        for start in range(0, len(rows), REWRITE_ROWS):
            f.writelines(self._lines(rows[start : start + REWRITE_ROWS]))

    def _written(self, count: int) -> tuple[int, list[str]] | None:
        """The file's header width and its rows' lines as written, where it holds `count`
        rows, one a line, in at most MOVED_MAX_BYTES; else None."""
        try:
            if self.path.stat().st_size > MOVED_MAX_BYTES:
                return None
            with self.path.open(newline="") as f:
                lines = f.readlines()  # split at any line end: a cell's own makes one more
        except FileNotFoundError:
            return None
        if len(lines) != count + 1 or not all(line.endswith(_LINE_END) for line in lines):
            return None
        return len(next(csv.reader(lines[:1]))), lines[1:]

    def _lines(self, rows: Sequence[StoredRow]) -> list[str]:
        """The rows' lines as the csv module writes them (minimal quoting, "\\r\\n"), cells as
        to_text writes them, a row stored before the last columns came ending in empty
        cells. Formatted a column at a time, each distinct value of a column once, since
        the file is written in the process the workers send their chunks to (10,000 rows
        of 61 columns, a one-chip sweep's: csv.writer 0.27-0.38 s, this 0.21-0.24 s, most
        of it repr of the columns whose floats are all distinct)."""
        width = len(self.columns)
        if not rows:
            return []
        values = [row.cells() for row in rows]
        if any(len(v) != width for v in values):
            empty = (None,) * width
            values = [v + empty[len(v) :] for v in values]
        return _column_lines(list(zip(*values, strict=True)))


def lines_of(chunk: Columns) -> list[str]:
    """A chunk's rows' lines in its own column order (ResultStore.add): formatted by the
    worker that simulated it, not by the one process writing every chunk's. A one-chip
    sweep's writer took 0.36-0.46 s of its 10,000 rows formatting them, 0.14-0.20 s
    since; on 2 cores the sweep's time did not measurably move (the work moved, and both
    cores were busy), but one writer no longer caps many workers (2026-12-03)."""
    return _column_lines(list(chunk.cells.values()),
                         [chunk.kinds.get(name) for name in chunk.cells])


def _shared_texts(column: list[Scalar], shared: dict[str, str],
                  kinds: frozenset[type] | None = None) -> list[Scalar]:  # fmt: skip
    """The column with each text replaced by the store's one object of it (a column of
    texts alone in one C call a cell); `kinds`: its cells' types, where known."""
    kinds = set(map(type, column)) if kinds is None else kinds
    if str not in kinds:
        return column
    if kinds == {str}:
        if column.count(column[0]) == len(column):  # one text throughout: a chip's id
            return [shared.setdefault(column[0], column[0])] * len(column)  # type: ignore[arg-type]
        return list(map(shared.setdefault, column, column))  # type: ignore[arg-type]
    return [shared.setdefault(v, v) if type(v) is str else v for v in column]


def _column_lines(columns: Sequence[Sequence[Scalar]],
                  kinds: Sequence[frozenset[type] | None] | None = None) -> list[str]:  # fmt: skip
    """The lines of rows given as their columns, every column as long (`_lines`); `kinds`:
    each column's cells' types, where known."""
    if len(columns) < 2:  # the csv module writes a lone empty cell as "", not a blank line
        buffer = io.StringIO(newline="")
        rows = zip(*columns, strict=True)
        csv.writer(buffer).writerows([[to_text(v) for v in row] for row in rows])
        return buffer.getvalue().splitlines(keepends=True)
    floats: _FloatTexts = {}
    texts: list[list[str]] = []
    for column, found in zip(columns, kinds or [None] * len(columns), strict=True):
        cells = _column_texts(column, floats, found)
        if texts and _one_text(cells) and _one_text(texts[-1]):
            # next to a column of one text throughout: joined once, not once a row (a
            # one-chip sweep's 61 columns join as 35)
            cells = [texts.pop()[0] + "," + cells[0]] * len(cells)
        texts.append(cells)
    texts[-1] = [text + _LINE_END for text in texts[-1]]  # a row's line ends with its last cell
    return list(map(",".join, zip(*texts, strict=True)))


def _one_text(cells: list[str]) -> bool:
    return bool(cells) and cells[-1] == cells[0] and cells.count(cells[0]) == len(cells)


_FloatTexts = dict[tuple, tuple[Sequence[Scalar], list[str]]]
"""Columns of floats formatted so far, by their length and end cells (_float_texts)."""


def _column_texts(column: Sequence[Scalar], floats: _FloatTexts,
                  found: frozenset[type] | None = None) -> list[str]:  # fmt: skip
    """A column's cells as CSV text. A column of one value throughout (most of a one-chip
    sweep's: its chip, plan and model) is formatted once; other integers go straight
    through str (one C call a cell, cheaper than a lookup); a column of floats (and empty
    cells) goes to orjson whole (_float_texts); a column of texts, or of integers beside
    empty cells, formats each distinct value once, since a sweep's columns repeat (a
    chip's id); a column of mixed kinds (where 1 would equal 1.0 and True) is formatted
    cell by cell. `found`: the cells' types, where known."""
    found = set(map(type, column)) if found is None else found
    first = column[0] if column else None
    if len(found) == 1 and column.count(first) == len(column) and not (
        type(first) is float and first == 0.0  # -0.0 equals it
    ):
        return [_text(first)] * len(column)  # one value throughout (equal, and of one type)
    if found == {int}:
        return list(map(str, column))
    kinds = found - {type(None)}
    if kinds == {float}:
        return _float_texts(column, floats)
    if len(kinds) == 1 and kinds <= {int, str}:
        distinct = dict.fromkeys(column)
        for value in distinct:
            distinct[value] = _text(value)
        return list(map(distinct.__getitem__, column))
    return list(map(_text, column))


def _float_texts(column: Sequence[Scalar], floats: _FloatTexts) -> list[str]:
    """A column of floats (and empty cells) as text, every cell formatted (orjson formats a
    column faster than finding its distinct values would save). One equal to a column
    formatted before takes its texts: on one chip, `tokens_per_s_per_chip` is
    `tokens_per_s` and `per_chip_memory_bytes` is `memory_bytes` (equal floats are written
    alike, None equals only None, and a column holding 0.0 is never shared, since -0.0
    equals it)."""
    zero = 0.0 in column
    key = (len(column), column[0], column[-1])
    if not zero and key in floats and floats[key][0] == column:
        return floats[key][1]
    texts = float_texts(column)
    if not zero:
        floats[key] = (column, texts)
    return texts


def float_texts(column: Sequence[float | None]) -> list[str]:
    """Each float as repr writes it, and None as an empty cell: what csv.writer writes.
    orjson writes the same shortest round-trip text as repr (a property test holds them
    equal over every float), 8.5x faster over a column (50 against 435 us for 1,000 floats,
    2026-12-04), except below 1e-4, where it writes 0.0000... or a one-digit exponent
    (e-6) where repr writes e-06, and for nan, the infinities and None, all `null`: those
    few cells are formatted one at a time. A sweep's results file is mostly columns of
    floats: their repr was a fifth of a one-chip sweep's worker time."""
    import orjson

    if not column:
        return []
    text = orjson.dumps(column).decode()
    texts = text[1:-1].split(",")
    if "null" in text or "0.0000" in text or "e-" in text:
        for i, cell in enumerate(texts):
            if cell == "null" or cell.startswith(("0.0000", "-0.0000")) or "e-" in cell:
                value = column[i]
                texts[i] = "" if value is None else repr(value)
    return texts


_QUOTED = frozenset(',"\r\n')  # what makes the csv module quote a cell (QUOTE_MINIMAL)


def _text(value: Scalar) -> str:
    """One cell as the csv module writes to_text's value: floats with repr, other numbers
    with str, None empty, a text quoted where it holds a comma, a quote or a line end."""
    if type(value) is str:  # first: a sweep's keys, 10,000 distinct texts
        return value if _QUOTED.isdisjoint(value) else '"' + value.replace('"', '""') + '"'
    if value is None:
        return ""
    if value is True or value is False:
        return to_text(value)
    if isinstance(value, float):
        return repr(value)
    text = str(value)
    if isinstance(value, str) and not _QUOTED.isdisjoint(text):
        return '"' + text.replace('"', '""') + '"'
    return text


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[None]:
    """Holds the folder's lock file for the block; a second sweep into the same folder is
    refused in one line rather than interleaving its rows with this one's. The lock is the
    kernel's (flock), so a killed sweep releases it."""
    lock = folder / LOCK_FILE
    try:
        handle = lock.open("a+")
    except OSError as e:
        raise UserError(f"--out {folder}: cannot write there: {e.strerror or e}") from None
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise UserError(f"--out {folder}: another sweep ({holder}) is writing there; "
                            "wait for it or give another --out") from None  # fmt: skip
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}")
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _records(text: str) -> Iterator[tuple[int, list[str]]]:
    """(first line number, cells) of each CSV record (an error's text may span lines)."""
    reader = csv.reader(io.StringIO(text, newline=""))
    start = 1
    for cells in reader:
        yield start, cells
        start = reader.line_num + 1


@contextlib.contextmanager
def _uninterrupted() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait until the block is done. Python raises a signal's exception
    between any two bytecodes, so one that arrived while a chunk was being written left part
    of it in the file and all of it counted (a SIGTERM test: 768 rows reported, 575 kept).
    Blocking the signals in this thread was not enough: the process pool's manager thread
    could take them, and Python still ran the handler in the main thread mid-block (768
    reported, 384 kept). So the handlers themselves wait: a signal that arrives in the block
    is noted and raised again once it ends. Only the main thread can set handlers; elsewhere
    the block runs as it is."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {s: signal.signal(s, lambda signum, _: received.append(signum)) for s in signals}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if received:
            signal.raise_signal(received[0])  # now to the handler the block held off

