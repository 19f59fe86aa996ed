"""Results of slow, pure builds from the package's own files, kept on disk between commands.

Reading the kernel tables (cost/kernel_tables.py: 1.3 MB of TOML in 32 files, every row
checked and turned into its roofline) took 1.2 s of each `serve` or `run` that needs them:
most of a small serve (1.4 s) and half of a 64-client DeepSeek-R1 serve under MTP (2.4 s),
where issue #48 asks for 2 s on one core. What such a build returns depends on nothing but
the package's own source and data files, so its result is kept on disk under a key of their
hash (every .py and .toml file below the package, path and bytes: 3.3 MB, about 10 ms a
process) and read back by the next command (5 ms for every table). Any edit to any of those
files gives every build a new key, so a result is never read back for other code or data
than built it; a key's older files of the same build are removed when a new one is written.

Where: $XPUSIM_CACHE_DIR, else $XDG_CACHE_HOME/xpusim, else ~/.cache/xpusim;
XPUSIM_CACHE_DIR=off (or empty) turns it off. The cache never fails a command: a file that
cannot be read or written, or does not unpickle, is built again and, where it can be,
written again (a temporary file renamed into place, so no reader sees half of one). The
files are pickles, read only from that directory and only under their own content key, the
same trust as the package's own files; `build` stays the plain reference (tests hold the
read-back result equal to it).
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
CACHE_ENV = "XPUSIM_CACHE_DIR"
OFF = ("", "off")
PACKAGE = Path(__file__).resolve().parent
KEYED_SUFFIXES = (".py", ".toml")


def cache_dir() -> Path | None:
    """Where results are kept, or None where the cache is off."""
    given = os.environ.get(CACHE_ENV)
    if given is not None:
        return None if given.strip().lower() in OFF else Path(given)
    try:
        base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    except RuntimeError:  # no home directory to find: no cache
        return None
    return Path(base) / "xpusim"


@cache
def package_key() -> str:
    """The hash of every source and data file of the package (relative path and bytes)."""
    digest = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*")):
        if path.suffix in KEYED_SUFFIXES and path.is_file():
            digest.update(str(path.relative_to(PACKAGE)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:20]


def cached(name: str, build: Callable[[], T], inputs: bytes = b"") -> T:
    """`build()`'s result, read back from the cache where this package built it before
    from the same `inputs` (the bytes it reads, where they may lie outside the package: a
    test's own table file), else built and kept. `name` says which build (letters, digits,
    '-' and '.'); a name's older results are removed when a new one is kept."""
    folder = cache_dir()
    if folder is None:
        return build()
    own = hashlib.sha256(inputs).hexdigest()[:12]
    path = folder / f"{name}--{package_key()}-{own}.pickle"
    try:
        with path.open("rb") as f:
            return pickle.load(f)
    except Exception:  # missing, unreadable or not a pickle of today's classes: build it
        pass
    value = build()
    temporary = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=f".{name}-", suffix=".tmp")
        with os.fdopen(handle, "wb") as f:
            pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(temporary, path)
        temporary = None
        for old in folder.glob(f"{name}--*.pickle"):
            if old != path:
                old.unlink(missing_ok=True)
    except (OSError, pickle.PicklingError):  # a read-only or full disk: not kept this time
        pass
    finally:
        if temporary is not None:
            Path(temporary).unlink(missing_ok=True)
    return value
