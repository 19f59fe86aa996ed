"""Where a sweep's chunks run: in this process, on a local process pool, or on Ray.

All three take the same picklable task function and chunks and yield each chunk's result as
soon as it finishes, in any order, so results stream to disk while the rest still run.
A chunk is many points (see sweep.py), which keeps per-task overhead (pickling, scheduling)
small against the work in it.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import logging
import multiprocessing
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Protocol, TypeVar

from xpusim.errors import UserError

T = TypeVar("T")
R = TypeVar("R")


class Executor(Protocol):
    name: str
    workers: int

    def map(self, fn: Callable[[T], R], tasks: Sequence[T]) -> Iterator[R]:
        """fn over the tasks, each result yielded as soon as it is ready."""
        ...


YOUNG_OBJECTS = 100_000
"""Gen-0 threshold of Python's cycle collector while chunks run (700 by default). A chunk
makes hundreds of thousands of short-lived objects (rows, candidates, arrays' views) that
reference counting frees on its own; at 700 the collector's passes, and the full ones they
trigger over the simulator's long-lived graphs and memos, took 10-17% of a sweep
(benchmarks/bench_sweep.py, 2026-11-29). Worker processes keep it (restoring it after each
chunk would set off a collection of the chunk's backlog every time); the sweep's own process
has it while the sweep runs (sweep.run), and its own back after."""


def collect_rarely() -> None:
    """Raises the gen-0 threshold for good: for processes that only run sweep chunks."""
    young, *older = gc.get_threshold()
    gc.set_threshold(max(young, YOUNG_OBJECTS), *older)


PARENT_POLL_S = 0.5


def start_worker(sweep_pid: int, forked: bool, blas_threads: int | None = None) -> None:
    """A pool worker's set-up: it collects rarely, leaves Ctrl-C to the sweep (which stops
    the pool and keeps what finished; a worker's own KeyboardInterrupt would only print a
    traceback), dies of the SIGTERM the sweep stops it with, and exits as soon as the sweep
    is gone, however it died (SIGKILL runs no clean-up): a thread watches for the parent's
    pid to change, or the sweep's pid to vanish. Forked workers' parent is the sweep; a fork
    server's workers' is the server, which exits with it.

    The sweep's pid comes from the sweep, not from getppid() here: a sweep killed between
    the fork and this set-up had already handed the worker to init, and a watch that began
    from that parent waited forever (CI, 2026-12-06: two workers alive 10 s after the kill).

    `blas_threads`: the threads numpy's BLAS may use in this worker (threadpoolctl; None:
    its own default, a thread per core). A pool of a worker per core whose work is small
    matrix products gains nothing from more: validate's serving step tables
    (serving/step_cost.py) kept a second busy thread in each worker, four on two cores
    (`validate --source nim.csv --workers 2`: 18.7 s and 34.9 CPU-s with them, 14.2 s and
    26.2 CPU-s at one, 2026-12-07)."""
    if blas_threads is not None:
        from threadpoolctl import threadpool_limits

        threadpool_limits(blas_threads, user_api="blas")
    collect_rarely()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the command's handler (cli.main)
    parent = os.getppid()
    if forked and parent != sweep_pid:  # orphaned before it began
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent and _exists(sweep_pid):
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):  # gone, or its pid another user's now
        return False
    return True


@contextlib.contextmanager
def rare_collections() -> Iterator[None]:
    """collect_rarely() for a while, in a process that goes on to do other things."""
    before = gc.get_threshold()
    collect_rarely()
    try:
        yield
    finally:
        gc.set_threshold(*before)


def _in_worker(fn: Callable[[T], R], task: T) -> R:
    collect_rarely()
    return fn(task)


class InProcess:
    """One core, no start-up: for small sweeps, tests and the one-core benchmark."""

    name = "in-process"
    workers = 1

    def map(self, fn: Callable[[T], R], tasks: Sequence[T]) -> Iterator[R]:
        for task in tasks:  # under the sweep's rare_collections (sweep.run)
            yield fn(task)


class LocalPool:
    """A process pool on this machine's cores (all of them unless told otherwise).

    Workers are forked from this process when it runs no other thread: they start at once
    with everything imported. Beside a thread (the progress bar's), forking is not safe,
    and workers start from a fork server that imports the simulator once (0.3 s).
    """

    name = "local"

    def __init__(self, workers: int | None = None, blas_threads: int | None = None):
        self.workers = workers or len(os.sched_getaffinity(0))
        self.blas_threads = blas_threads  # start_worker's

    def map(self, fn: Callable[[T], R], tasks: Sequence[T]) -> Iterator[R]:
        if not tasks:  # a sweep resumed to completion starts no processes
            return
        if threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods():
            context = multiprocessing.get_context("fork")
        else:
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload([fn.__module__])
        pool = ProcessPoolExecutor(
            min(self.workers, len(tasks)) or 1,
            mp_context=context,
            initializer=start_worker,
            initargs=(os.getpid(), context.get_start_method() == "fork", self.blas_threads),
        )
        finished = False
        try:
            yield from _windowed(pool, fn, tasks, IN_FLIGHT_PER_WORKER * self.workers)
            finished = True
        finally:  # on an interrupt, what finished is kept and the rest is dropped, now
            if not finished:
                for process in list(getattr(pool, "_processes", {}).values()):
                    process.terminate()
            pool.shutdown(wait=True, cancel_futures=True)


IN_FLIGHT_PER_WORKER = 2
"""Chunks a local pool keeps running or queued, per worker: one running and one
queued keeps every worker busy while this process stores a result. With every chunk sent
at once, finished chunks' rows would pile up in this process whenever the workers outran
the results file (many cores, one writer); on this project's 2-core VM the writer kept up,
and a million-point sweep peaked alike either way (2026-12-03)."""


def _windowed(pool: ProcessPoolExecutor, fn: Callable[[T], R], tasks: Sequence[T],
              window: int) -> Iterator[R]:  # fmt: skip
    """fn over the tasks on the pool, at most `window` of them running or queued while a
    result is handed back (and let go of), as soon as each is ready. A finished task's
    place is taken before its result is handed back: while this process stores a result
    the workers have the next tasks (sent after, they waited out every store: 5-25 ms idle
    per chunk of a one-chip sweep on 2 cores, 2026-12-03)."""
    waiting = iter(tasks)
    running = {pool.submit(fn, task) for task in itertools.islice(waiting, max(window, 1))}
    while running:
        done, running = wait(running, return_when=FIRST_COMPLETED)
        for future in done:
            running |= {pool.submit(fn, task) for task in itertools.islice(waiting, 1)}
            yield future.result()


class RayPool:
    """Ray, on a cluster (`address`) or started locally; the same chunks as the local pool."""

    name = "ray"

    def __init__(self, address: str | None = None, workers: int | None = None):
        try:
            import ray
        except ImportError:
            raise UserError("--ray needs Ray: pip install 'xpusim[ray]'") from None
        self.ray = ray
        if not ray.is_initialized():
            if address and address != "auto":
                _reachable(address)
            local_cpus = None if address else workers
            # Ray's own INFO and WARNING lines (its start, its token set-up) would break the
            # contract of nothing on stderr for a sweep that succeeds
            ray.init(address=address, num_cpus=local_cpus, include_dashboard=False,
                     log_to_driver=False, logging_level=logging.ERROR)  # fmt: skip
        self.workers = int(ray.cluster_resources().get("CPU", 1))

    def map(self, fn: Callable[[T], R], tasks: Sequence[T]) -> Iterator[R]:
        remote = self.ray.remote(_in_worker)
        pending = [remote.remote(fn, task) for task in tasks]
        try:
            while pending:
                done, pending = self.ray.wait(pending, num_returns=1)
                yield self.ray.get(done[0])
        finally:
            for ref in pending:
                self.ray.cancel(ref)


def _reachable(address: str) -> None:
    """A cluster address that nothing answers at is one line, at once: Ray itself retries
    for minutes, printing its retries."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UserError(f"--ray-address {address!r}: expected HOST:PORT, ray://HOST:PORT or auto")
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as e:
        raise UserError(f"--ray-address {address}: no Ray cluster answers there "
                        f"({e.strerror or e})") from None  # fmt: skip


def choose(workers: int | None, ray: bool, address: str | None,
           blas_threads: int | None = None) -> Executor:  # fmt: skip
    """Ray when asked, this process for one worker, else a local pool (its workers' BLAS
    threads as start_worker takes them)."""
    if ray:
        return RayPool(address, workers)
    return InProcess() if workers == 1 else LocalPool(workers, blas_threads)
