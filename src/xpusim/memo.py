"""Memoization keyed by objects' identity, for chips and systems.

Chips and systems are pydantic models: hashing one hashes every figure in it, which costs
more than most of what is cached on it, and what-if copies are new objects anyway. A sweep
reuses the same objects across thousands of configurations, so identity is the right key.
Each entry holds its objects, so that no other object can take their ids while it lives.
For the same reason a sweep's columns are worked out once per distinct object and spread
by position (`distinct`): thousands of rows share a few chips, plans and placements.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Generic, TypeVar

import numpy as np

T = TypeVar("T")


class ByIdentity(Generic[T]):
    def __init__(self, maxsize: int = 4096):
        self.maxsize = maxsize
        self._found: dict[tuple, tuple[tuple[object, ...], T]] = {}

    def get(self, objects: tuple[object, ...], rest: Hashable, make: Callable[[], T]) -> T:
        """The value for these objects (by identity) and a hashable rest, made once."""
        key = (tuple(map(id, objects)), rest)
        found = self._found.get(key)
        if found is None:
            if len(self._found) >= self.maxsize:  # a long-lived process cannot grow it forever
                self._found.clear()
            found = self._found[key] = (objects, make())
        return found[1]


def distinct(
    objects: Sequence[T], key: Callable[[T], Hashable] = id
) -> tuple[list[T], np.ndarray]:
    """The distinct objects (by identity, or by `key`; in first-seen order) and each one's
    position among them. Written with dicts and maps, not a loop: a sweep's chunk asks it
    of thousands of configurations."""
    keys = list(map(key, objects))
    first = dict(zip(reversed(keys), reversed(objects), strict=True))  # first of a key wins
    position = {k: i for i, k in enumerate(dict.fromkeys(keys))}
    where = np.fromiter(map(position.__getitem__, keys), dtype=np.intp, count=len(keys))
    return [first[k] for k in position], where
