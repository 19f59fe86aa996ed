"""A sweep: every combination of chips, what-if specs and run options, simulated in chunks
and streamed to a results file.

Why it is fast: most of a simulation is building and tabulating the model's graphs, and
those depend on the model, the shapes (batch, prompt, gen), the formats and the tensor and
expert parallel degrees, never on the chip. Graphs are memoized by exactly that
(scenarios/llm/graphs.py), and points are sorted so that all chips, what-if values, chip
counts and plans of one shape run back to back in the same worker: the graphs are built
once and every hardware variation only re-costs their op tables.

Points are cut into chunks of many points, so that scheduling a chunk on a pool or on Ray
costs little against its work. Chips and what-if copies are resolved once, here, so that a
bad `--set` stops the sweep before it starts (exit 2), and travel to the workers pickled
once per chunk: a chunk's points share each spec object, which is what the simulator's
per-chip memos (scoped to the chunk: xpusim/memo.py) are keyed by.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import math
import pickle
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xpusim import api
from xpusim.errors import Interrupted, UserError
from xpusim.explore.executor import Executor, rare_collections
from xpusim.explore.grid import Point, cross, target_axes
from xpusim.explore.rows import Columns
from xpusim.explore.store import SPEC_HASH, ResultStore, StoredRow, lines_of, locked
from xpusim.files import writable_dir
from xpusim.hardware.spec import Chip
from xpusim.hardware.system import System
from xpusim.hardware.whatif import apply
from xpusim.memo import remembered, scope, sweep_scope
from xpusim.result import Results

Spec = Chip | System | UserError  # a what-if a chip cannot take is an error for its points

RESULTS_FILE = "results.csv"
CHUNKS_PER_WORKER = 4  # enough for load balance and a moving progress bar
MAX_CHUNK = 1024  # points per task: a chunk builds its graphs once for all its shapes
MAX_POINTS = 5_000_000
"""The largest grid one sweep runs: its rows stay in memory for the summary, the plots and the
Parquet copy, 2.7 GB at the peak for a million points (docs/sweeps.md), so 5 million need
about 13 GB."""


@dataclass(frozen=True)
class Grid:
    """What a sweep covers: one workload, the targets, one axis per --set path and per option."""

    workload: Any
    targets: tuple[str, ...]
    sets: tuple[tuple[str, tuple[float, ...]], ...]
    axes: dict[str, tuple[Any, ...]]
    # target -> the chip counts its `--chip ID:N` gave, its chips axis (grid.target_axes)
    counts: dict[str, tuple[int, ...]] = field(default_factory=dict)

    @property
    def size(self) -> int:
        """How many points it has, without making them."""
        what_ifs = math.prod(len(v) for _, v in self.sets)
        return what_ifs * sum(math.prod(map(len, target_axes(self.axes, self.counts, t).values()))
                              for t in self.targets)  # fmt: skip

    def points(self) -> list[Point]:
        """Every point; a grid of more than MAX_POINTS is refused before any is made."""
        if self.size > MAX_POINTS:
            raise UserError(f"the grid has {self.size:,} points; at most {MAX_POINTS:,} can be "
                            "swept at once (each keeps about 2.7 KB of memory): sweep fewer "
                            "values, or split the grid over several --out folders")  # fmt: skip
        return cross(self.targets, self.sets, self.axes, self.counts)


@dataclass(frozen=True)
class Chunk:
    workload: Any
    specs: dict[str, bytes]  # each pickled once by the sweep, by spec_key, unpickled per chunk
    hashes: dict[str, str]  # spec_key -> what its rows were simulated from (spec_hashes)
    points: tuple[Point, ...]


@dataclass(frozen=True)
class ChunkResult:
    rows: Columns  # as_stored
    lines: list[str]  # the rows' CSV lines, in their own column order (store.lines_of)
    busy_s: float  # the worker's time on the chunk


@dataclass
class SweepRun:
    rows: list[StoredRow]  # one per point, in grid order, every column a key
    columns: list[str]  # of the results file
    n_simulated: int  # by this run (the others were in the results file already)
    simulate_s: float  # wall time from the first chunk sent to the last result stored
    simulate_cpu_s: float  # the workers' time, summed
    executor: str
    workers: int
    results_path: Path
    notes: list[str]  # what resuming found (rows dropped as not whole)


def run_chunk(chunk: Chunk) -> ChunkResult:
    """Simulates a chunk's points together (a worker's task: api.simulate_many costs every
    plan of every point that shares a shape in one array computation); a point whose
    options the chip cannot take (a precision it lacks) becomes a row with the error."""
    start = time.perf_counter()
    with scope():  # a sweep's chips unpickled once (memo.LASTING), their memos kept with them
        specs = {key: remembered("spec", (), blob, lambda blob=blob: pickle.loads(blob))
                 for key, blob in chunk.specs.items()}  # fmt: skip
        runnable: Sequence[int] = range(len(chunk.points))
        points = chunk.points
        if any(isinstance(spec, UserError) for spec in specs.values()):
            runnable = [i for i in runnable
                        if not isinstance(specs[points[i].spec_key], UserError)]  # fmt: skip
            points = tuple(points[i] for i in runnable)
        jobs = [(specs[p.spec_key], dict(p.options)) for p in points]
        results = api.simulate_table(chunk.workload, jobs)
    if len(runnable) < len(chunk.points):  # the points of specs that failed: their errors
        found: list[Any] = [specs[p.spec_key] for p in chunk.points]
        for i, got in zip(runnable, results.found, strict=True):
            found[i] = got
        results = Results(results.tables, found)
    rows = Columns.of(chunk.points, results).as_stored()
    rows.cells[SPEC_HASH] = [chunk.hashes[point.spec_key] for point in chunk.points]  # a text
    return ChunkResult(rows, lines_of(rows), time.perf_counter() - start)


def resolve_specs(points: Sequence[Point]) -> dict[str, Spec]:
    """Every target with every combination of its what-if values, validated.

    A what-if value that no target can take (a path no chip has, an efficiency above 1) is
    the user's mistake and raises; one that only some chips cannot take (6 TB/s of HBM
    pushes TPU v4's memory power past its TDP) leaves those chips' points as error rows.
    """
    bases: dict[str, Chip | System] = {}
    specs: dict[str, Spec] = {}
    for point in points:
        key = point.spec_key
        if key in specs:
            continue
        if point.target not in bases:
            bases[point.target] = api.target(point.target)
        try:
            specs[key] = apply(bases[point.target], point.sets)
        except UserError as error:
            specs[key] = error
    taken = {s for p in points if not isinstance(specs[p.spec_key], UserError) for s in p.sets}
    for point in points:
        spec = specs[point.spec_key]
        if isinstance(spec, UserError) and any(s not in taken for s in point.sets):
            raise spec
    return specs


def spec_hashes(workload: Any, specs: dict[str, Spec]) -> dict[str, str]:
    """spec_key -> a hash of everything a point's result depends on besides its options:
    the model, the chip or system with its what-ifs (every figure), and xpusim's version. A
    resumed sweep trusts a stored row only if its hash is this run's (store.py)."""
    from importlib.metadata import version

    base = hashlib.sha256(f"{version('xpusim')}\n{workload!r}".encode())
    found = {}
    for key, spec in specs.items():
        h = base.copy()
        h.update(str(spec).encode() if isinstance(spec, UserError) else
                 spec.model_dump_json().encode())  # fmt: skip
        found[key] = h.hexdigest()[:16]
    return found


def chunks(points: Sequence[Point], workers: int) -> list[tuple[Point, ...]]:
    """Points sorted so that formats and shapes stay together, packed into chunks whole
    format groups at a time (a group larger than a chunk is split), so that a chunk's points
    share few graphs (one per format and tp, ep, whatever their shapes)."""
    ordered = sorted(((p.order, p) for p in points), key=lambda pair: pair[0])
    size = max(1, min(MAX_CHUNK, math.ceil(len(ordered) / (workers * CHUNKS_PER_WORKER))))
    packed: list[tuple[Point, ...]] = []
    current: list[Point] = []
    for _, group in itertools.groupby(ordered, key=lambda pair: pair[0][0]):  # the formats
        members = [p for _, p in group]
        for start in range(0, len(members), size):
            piece = members[start : start + size]
            if current and len(current) + len(piece) > size:
                packed.append(tuple(current))
                current = []
            current += piece
    return [*packed, tuple(current)] if current else packed


def check(grid: Grid) -> None:
    """The options' names (and modes) are ones the workload's scenario takes."""
    names = dict.fromkeys(grid.axes, None)
    for mode in grid.axes.get("mode", ("inference",)):
        api.check_options(grid.workload, **{**names, "mode": mode})


def run(
    grid: Grid,
    out: Path,
    executor: Executor,
    progress: Callable[[int, int], None] | None = None,
) -> SweepRun:
    """Simulates the points not yet in `out`'s results file, streaming rows to it."""
    check(grid)
    points = grid.points()
    specs = resolve_specs(points)  # the inputs are valid before the folder is touched
    writable_dir(out, "--out")
    out.mkdir(parents=True, exist_ok=True)
    load_shared()
    # the rows this process keeps (a StoredRow and its tuple each) are long-lived objects
    # that reference counting never frees: at the collector's default threshold a one-chip
    # sweep's chunk took 4.2-8.8 ms to store, 3.3-3.7 ms without its passes (2026-12-04)
    with locked(out), rare_collections():
        return _simulate(grid, points, specs, out, executor, progress)


def load_shared() -> None:
    """Loads, before the workers fork from this process, what each would load for itself
    on its first chunk: the price list (every result is priced), the schemas of the systems
    and topology levels results are worked out on (their pydantic models build on first
    use), and orjson (results.csv's floats). 7 ms of a worker's first chunk of a one-chip
    sweep (2026-12-04), which every worker spent, now spent once."""
    import orjson  # noqa: F401

    from xpusim.hardware.prices import prices
    from xpusim.hardware.system import System, TopologyLevel

    prices()
    for model in (System, TopologyLevel):
        model.model_rebuild()


def _simulate(
    grid: Grid, points: list[Point], specs: dict[str, Spec], out: Path, executor: Executor,
    progress: Callable[[int, int], None] | None,
) -> SweepRun:  # fmt: skip
    hashes = spec_hashes(grid.workload, specs)
    store = ResultStore(out / RESULTS_FILE, {p.key: hashes[p.spec_key] for p in points})
    done = store.done
    todo = [p for p in points if p.key not in done]
    blobs = {key: pickle.dumps(spec) for key, spec in specs.items()}
    tasks = []
    for group in chunks(todo, executor.workers):
        needed = {p.spec_key for p in group}
        tasks.append(Chunk(grid.workload, {k: blobs[k] for k in needed},
                           {k: hashes[k] for k in needed}, group))  # fmt: skip
    start, busy, finished = time.perf_counter(), 0.0, len(points) - len(todo)
    if progress:
        progress(finished, len(points))
    # closing: an interrupt in this loop must cancel the chunks still queued, now
    # the chunks' shared memos (memo.LASTING) last the sweep, here and in forked workers
    with sweep_scope(), contextlib.closing(executor.map(run_chunk, tasks)) as results:
        try:
            for result in results:
                store.add(result.rows, result.lines)
                busy += result.busy_s
                finished += result.rows.size
                if progress:
                    progress(finished, len(points))
        except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (cli.main): keep what finished
            store.close()
            # the store's count, not this loop's: a signal that arrives while a chunk is
            # written is raised once the write returns (store._uninterrupted), before the
            # loop counts the chunk
            raise Interrupted(f"{len(store.rows)} of {len(points)} points kept in "
                              f"{store.path}; the same command resumes") from None  # fmt: skip
        finally:
            store.close()
    simulate_s = time.perf_counter() - start
    store.reorder([p.key for p in points])
    by_key = {row["key"]: row for row in store.rows}
    return SweepRun(  # every row with every column, as read back from the file
        rows=[by_key[p.key] for p in points],
        columns=list(store.columns),
        n_simulated=len(todo),
        simulate_s=simulate_s,
        simulate_cpu_s=busy,
        executor=executor.name,
        workers=executor.workers,
        results_path=store.path,
        notes=store.notes,
    )
