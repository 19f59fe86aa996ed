"""Memoization scoped to one call, keyed by objects' identity, for chips and systems.

Every memo lives in a `Scope` that a call opens (`api.simulate`, a sweep's chunk,
`api.serve`, `api.compare`) and drops when it returns: nothing computed is kept by the
process between calls, so no cache can go stale, grow without bound or make one call's
answer depend on what ran before it. Outside a scope nothing is memoized (every function
still answers, it only works everything out again). Scopes nest: an inner call reuses
the outer one's memos (a plan search inside a sweep's chunk).

Chips and systems are pydantic models: hashing one hashes every figure in it, which costs
more than most of what is cached on it, and what-if copies are new objects anyway. A sweep
reuses the same objects across thousands of configurations, so identity is the right key.
Each entry holds its objects, so that no other object can take their ids while it lives.
For the same reason a sweep's columns are worked out once per distinct object and spread
by position (`distinct`): thousands of rows share a few chips, plans and placements.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:  # `xpusim --help` imports memo (plan's in_scope) without numpy
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


class Scope:
    """The memos of one call, by name (the function or table each belongs to); those named
    in LASTING in the sweep's scope around it, where a sweep opened one (sweep_scope)."""

    def __init__(self, lasting: Scope | None = None) -> None:
        self._memos: dict[str, ByIdentity[Any]] = {}
        self._lasting = lasting

    def memo(self, name: str, maxsize: int) -> ByIdentity[Any]:
        if self._lasting is not None and name in LASTING:
            return self._lasting.memo(name, maxsize)
        found = self._memos.get(name)
        if found is None:
            found = self._memos[name] = ByIdentity(maxsize)
        return found


_SCOPE: ContextVar[Scope | None] = ContextVar("xpusim_memo_scope", default=None)
_SWEEP: ContextVar[Scope | None] = ContextVar("xpusim_sweep_scope", default=None)

LASTING = frozenset({
    "spec", "system", "xpusim.hardware.system._torus_slice", "resolved",
    "xpusim.scenarios.llm.plans.stage_memory", "xpusim.scenarios.llm.plans.candidate_plans",
    "hardware arrays", "stacked hardware", "collective line", "placement",
})  # fmt: skip
"""Memos of what a sweep's points share whatever their shapes: its chips and what-if
copies (unpickled once, explore/sweep.run_chunk), their systems, a job's resolved options,
its plans' memory, the chips' figures per op table and their collective lines. A sweep
keeps these from one chunk to the next (sweep_scope): worked out again for each chunk,
they were a tenth of the chips grid's time (benchmarks/bench_sweep.py, 2026-12-05). They
grow with the sweep's chips and option sets, not its points, each within its maxsize."""


@contextmanager
def sweep_scope() -> Iterator[None]:
    """The scope of a sweep's LASTING memos, under each chunk's own (scope()): a sweep
    opens it around its chunks, in its process and, forked, in its pool's workers."""
    token = _SWEEP.set(Scope())
    try:
        yield
    finally:
        _SWEEP.reset(token)


@contextmanager
def scope() -> Iterator[Scope]:
    """Memoize within this block (an outer block's scope if there is one)."""
    current = _SCOPE.get()
    if current is not None:
        yield current
        return
    opened = Scope(_SWEEP.get())
    token = _SCOPE.set(opened)
    try:
        yield opened
    finally:
        _SCOPE.reset(token)


def in_scope(function: Callable[..., T]) -> Callable[..., T]:
    """A call that memoizes within itself (an entry point: a simulation, a serve run)."""

    @functools.wraps(function)
    def scoped_call(*args: Any, **kwargs: Any) -> T:
        with scope():
            return function(*args, **kwargs)

    return scoped_call


def remembered(
    name: str, objects: tuple[object, ...], rest: Hashable, make: Callable[[], T],
    maxsize: int = 4096,
) -> T:  # fmt: skip
    """`make()`, kept in the open scope's memo `name` by the objects' identity and `rest`."""
    current = _SCOPE.get()
    if current is None:
        return make()
    return current.memo(name, maxsize).get(objects, rest, make)


def scoped(maxsize: int = 4096) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """functools.lru_cache's place for pure functions of hashable arguments: kept in the
    open scope only, by the arguments' values."""

    def wrap(function: Callable[..., T]) -> Callable[..., T]:
        name = f"{function.__module__}.{function.__qualname__}"

        @functools.wraps(function)
        def kept(*args: Any, **kwargs: Any) -> T:
            current = _SCOPE.get()
            if current is None:
                return function(*args, **kwargs)
            key = (args, tuple(kwargs.items())) if kwargs else args
            return current.memo(name, maxsize).get((), key, lambda: function(*args, **kwargs))

        return kept

    return wrap


def distinct(
    objects: Sequence[T], key: Callable[[T], Hashable] = id
) -> tuple[list[T], np.ndarray]:
    """The distinct objects (by identity, or by `key`; in first-seen order) and each one's
    position among them. Written with dicts and maps, not a loop: a sweep's chunk asks it
    of thousands of configurations."""
    import numpy as np

    keys = list(map(key, objects))
    first = dict(zip(reversed(keys), reversed(objects), strict=True))  # first of a key wins
    position = {k: i for i, k in enumerate(dict.fromkeys(keys))}
    where = np.fromiter(map(position.__getitem__, keys), dtype=np.intp, count=len(keys))
    return [first[k] for k in position], where
