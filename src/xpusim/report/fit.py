"""Tables that fit the terminal: a table wider than the console is split into several, each
repeating the key columns (chip, chips, precision) so that every row can still be read, and
every number is printed whole. Rich's own answer to a narrow console is to squeeze columns and
cut cells with an ellipsis ("6.…"), which hides the very numbers a user ran the command for.

The columns keep their order: a table builder puts the essential ones first (TTFT and TPOT
before power and the bottleneck), so the first table holds what most users look for and the
rest follow. `--wide` prints each table whole instead, as wide as it needs.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from rich.console import Console, Group
from rich.table import Table

KEYS_ATTR = "xpusim_key_columns"


def keyed(table: Table, keys: int) -> Table:
    """Mark the first `keys` columns of `table` as the ones repeated in every part of it;
    0 for a table of prose (sources, notes) that wraps its cells instead of splitting."""
    setattr(table, KEYS_ATTR, keys)
    return table


def natural_width(console: Console, table: Table) -> int:
    """The width `table` takes with no cell wrapped or cut."""
    return console.measure(table, options=console.options.update(width=1 << 16)).maximum


def fit(console: Console, renderable: Any) -> Any:
    """`renderable` as it fits `console.width`: tables split into parts, groups fitted part by
    part, anything else as it is."""
    if isinstance(renderable, Group):
        return Group(*(fit(console, r) for r in renderable.renderables))
    if not isinstance(renderable, Table):
        return renderable
    parts = list(_split(console, renderable))
    for part in parts:  # a part still too wide (a key column alone is): wrap, never cut
        for column in part.columns:
            column.overflow = "fold"
    return parts[0] if len(parts) == 1 else Group(*parts)


def widest(console: Console, renderable: Any) -> int:
    """The widest table in `renderable` (0 where it holds none): the width `--wide` needs."""
    if isinstance(renderable, Group):
        return max((widest(console, r) for r in renderable.renderables), default=0)
    return natural_width(console, renderable) if isinstance(renderable, Table) else 0


def _split(console: Console, table: Table) -> Iterator[Table]:
    """Parts of `table`, each within the console's width where the key columns and one more
    fit at all: each column goes into the first part it fits in (order kept within a part),
    a new part opening when it fits in none."""
    if not getattr(table, KEYS_ATTR, 1) or natural_width(console, table) <= console.width:
        yield _subtable(table, list(range(len(table.columns))), True)  # a copy, then folded
        return
    keys = list(range(min(getattr(table, KEYS_ATTR, 1), len(table.columns))))
    parts: list[list[int]] = []
    for index in range(len(keys), len(table.columns)):
        for part in parts:
            if natural_width(console, _subtable(table, [*part, index], True)) <= console.width:
                part.append(index)
                break
        else:
            parts.append([*keys, index])
    for number, part in enumerate(parts or [keys]):
        yield _subtable(table, part, number == 0)


def _subtable(table: Table, columns: list[int], first: bool) -> Table:
    """A copy of `table` with only `columns`; a continuation is titled as one."""
    part = copy.copy(table)
    part.columns = [copy.copy(table.columns[i]) for i in columns]  # _cells are shared, unchanged
    if not first:
        part.title, part.caption = "(continued)", None
    elif len(columns) < len(table.columns):
        part.caption = None  # the caption closes the last part
    return part
