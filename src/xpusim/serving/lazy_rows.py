"""Tables over one axis of a step cost whose rows are costed a block at a time, when first read.

A serving run's step table has a row per token count up to its token budget (131,072 for
SGLang's) and a decode-kernel row per sequence count up to its max batch (each row a few
hundred mean contexts), but a run reads a few hundred of them: the token counts its
iterations reach, the batch sizes it decodes at. Costing every row up front was most of a
serving point's CPU time (issue #46: 5 of 6.6 CPU-s on InferenceX DeepSeek-R1 on MI300X).
Every row is costed on its own (the roofline is elementwise over works, the sums over ops
are ordered_sum's), so a row costed in a block equals the row of a table costed whole, bit
for bit (tests/test_lazy_rows.py holds the lazy table equal to the eager `reference`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


class LazyTable:
    """Some tables of the same rows (0 .. length-1), costed together a block of rows at a
    time: `cost(lo, hi)` gives each table's rows lo .. hi-1 as arrays (hi - lo, ...)."""

    def __init__(self, length: int, block_rows: int,
                 cost: Callable[[int, int], list[np.ndarray]]) -> None:  # fmt: skip
        self.length = length
        self.block_rows = block_rows
        self._cost = cost
        self._arrays: dict[int, list[np.ndarray]] = {}
        self._lists: dict[int, list[list]] = {}

    def _block(self, b: int) -> list[np.ndarray]:
        found = self._arrays.get(b)
        if found is None:
            lo = b * self.block_rows
            found = self._arrays[b] = self._cost(lo, min(lo + self.block_rows, self.length))
        return found

    def row(self, table: int, i: int) -> list:
        """Row i of one table as Python floats (nested lists for rows of more than one axis):
        an iteration adds a few rows, and numpy's per-call overhead would be most of a
        serving run's time."""
        b, at = divmod(i, self.block_rows)
        lists = self._lists.get(b)
        if lists is None:
            lists = self._lists[b] = [None] * len(self._block(b))
        if lists[table] is None:
            lists[table] = self._block(b)[table].tolist()
        return lists[table][at]

    def rows(self, table: int, lo: int, hi: int) -> np.ndarray:
        """Rows lo .. hi-1 of one table as one array."""
        if lo >= hi:
            return self._block(0)[table][:0]
        first, last = lo // self.block_rows, (hi - 1) // self.block_rows
        parts = [self._block(b)[table] for b in range(first, last + 1)]
        whole = parts[0] if len(parts) == 1 else np.concatenate(parts)
        start = lo - first * self.block_rows
        return whole[start:start + hi - lo]

    def reference(self) -> list[np.ndarray]:
        """Every table whole, costed in one block: what the lazy rows equal."""
        return self._cost(0, self.length)


class Rows:
    """One table of a LazyTable, its first `length` rows: a list of rows (stage times...,
    energy) to an iteration, arrays by column (`stage_s`, `energy_j`) to a slice."""

    def __init__(self, source: LazyTable, table: int, length: int | None = None) -> None:
        self.source = source
        self.table = table
        self.length = source.length if length is None else length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int) -> list:
        if not 0 <= i < self.length:
            raise IndexError(f"row {i} of {self.length}")
        return self.source.row(self.table, i)

    def head(self, length: int) -> Rows:
        """The first `length` rows, sharing what is costed."""
        return Rows(self.source, self.table, length)

    def array(self, lo: int = 0, hi: int | None = None) -> np.ndarray:
        hi = self.length if hi is None else min(hi, self.length)
        return self.source.rows(self.table, lo, hi)

    @property
    def stage_s(self) -> Columns:
        return Columns(self, slice(None, -1))

    @property
    def energy_j(self) -> Columns:
        return Columns(self, -1)


class Columns:
    """Some columns of Rows, indexed as an array of them (a row, or a slice of rows)."""

    def __init__(self, rows: Rows, columns: slice | int) -> None:
        self.rows = rows
        self.columns = columns

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, key: int | slice) -> np.ndarray:
        if isinstance(key, slice):
            lo, hi, step = key.indices(len(self.rows))
            return self.rows.array(lo, max(lo, hi))[::step, ..., self.columns]
        i = key + len(self.rows) if key < 0 else key
        return self.rows.array(i, i + 1)[0, ..., self.columns]
