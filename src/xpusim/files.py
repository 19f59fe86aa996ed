"""Every file a user hands xpusim, read once through here; every file it writes, written so
that no reader ever sees half of one.

Reading: a user's file may be binary, in the wrong encoding, absurdly large or nested deeper
than Python's parser recurses (about a thousand levels). Each of those is the user's mistake
and a `UserError` naming the file, never a UnicodeDecodeError or RecursionError from deep
inside a parser.

Writing: output goes to a temporary file in the destination's own folder and is renamed
over it (a rename within a folder is atomic on POSIX file systems), so a full disk or a
kill leaves the old file or none, never a torn one. A folder that cannot be written is
refused before any work starts (`writable_dir`), with its path named.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from xpusim.errors import UserError

MAX_INPUT_BYTES = 256 * 2**20
"""The largest text file read whole (config, chip, trace, CSV). The largest real inputs are
traces: a million Azure rows like `2023-11-16 18:15:46.6805900,374,44` (36 bytes with its
newline) are 36 MB, a seventh of it; a bigger file is the wrong file."""


def is_file(text: str | Path) -> bool:
    """Whether a name a user typed is an existing file; a name no file system takes (too
    long, a NUL byte) is not one, rather than an OSError."""
    try:
        return Path(text).is_file()
    except (OSError, ValueError):
        return False


def read_text(path: Path, what: str) -> str:
    """A user's text file, UTF-8 (a byte-order mark allowed); any problem names the file."""
    try:
        size = path.stat().st_size
        if size > MAX_INPUT_BYTES:
            raise UserError(f"{path}: {what} file is {size / 2**20:.0f} MiB, larger than the "
                            f"{MAX_INPUT_BYTES // 2**20} MiB xpusim reads")  # fmt: skip
        return path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: {what} file is not UTF-8 text (byte {e.start} is "
                        f"{e.object[e.start:e.start + 1]!r})") from None  # fmt: skip
    except OSError as e:
        raise UserError(f"{path}: cannot read {what} file: {e.strerror or e}") from None


def parse_json(text: str, origin: str) -> Any:
    """JSON text; malformed or too deeply nested input is one line naming its origin."""
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite)
    except json.JSONDecodeError as e:
        raise UserError(f"{origin}: malformed JSON: {e}") from None
    except RecursionError:
        raise UserError(f"{origin}: JSON nested too deeply to be a config") from None
    except ValueError as e:
        raise UserError(f"{origin}: {e}") from None


def _refuse_constant(name: str) -> float:
    """NaN and Infinity are not JSON; Python's parser accepts them unless told not to."""
    raise ValueError(f"{name} is not a number JSON allows")


def _finite(text: str) -> float:
    """A JSON number; 1e400 would otherwise read as infinity."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is too large a number")
    return value


def read_json(path: Path, what: str) -> Any:
    return parse_json(read_text(path, what), str(path))


def writable_dir(path: Path, option: str) -> Path:
    """The folder, after checking that it, or the nearest folder above it that exists, takes
    a new file; refuses with the option and the path before any work starts. Creates
    nothing: a run refused later for bad input leaves no empty folder behind."""
    _probe(path, f"{option} {path}")
    return path


def writable_file(path: Path, option: str) -> Path:
    """A file's path whose folder can be written (see writable_dir); a folder is refused."""
    if path.is_dir():
        raise UserError(f"{option} {path}: is a folder, not a file")
    _probe(path.parent, f"{option} {path}")
    return path


def _probe(folder: Path, named: str) -> None:
    """A file can be made in `folder`, or in the nearest folder above it that exists."""
    import tempfile  # here, not at the top: reading (every run) never needs it (7 ms)

    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        if not existing.is_dir():
            raise NotADirectoryError(20, f"{existing} is not a folder")
        with tempfile.NamedTemporaryFile(dir=existing, prefix=".xpusim-probe-"):
            pass
    except OSError as e:
        raise UserError(f"{named}: cannot write there: {e.strerror or e}") from None


@contextlib.contextmanager
def atomic(path: Path, mode: str = "w") -> Iterator[IO]:
    """A file object whose content replaces `path` only once it is whole and closed."""
    import tempfile

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, _mode(path))
        with os.fdopen(fd, mode, **({} if "b" in mode else {"newline": ""})) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary path beside `path` for a library that writes by name (matplotlib, pyarrow),
    renamed over `path` once the block ends without error."""
    import tempfile

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=path.suffix)
    os.fchmod(fd, _mode(path))
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _mode(path: Path) -> int:
    """The permissions a file written in place would have had: the old file's, else what
    the umask leaves of rw-rw-rw- (mkstemp's own are rw-------)."""
    try:
        return path.stat().st_mode & 0o777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def write_text(path: Path, text: str) -> None:
    with atomic(path) as f:
        f.write(text)
