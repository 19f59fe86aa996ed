"""Every file a user hands xpusim, read once through here; every file it writes, written so
that no reader ever sees half of one.

Reading: a user's file may be binary, in the wrong encoding, absurdly large, nested deeper
than Python's parser recurses (about a thousand levels), or no file at all but a device or a
named pipe (`/dev/zero` never ends; opening a pipe waits for a writer). Each of those is the
user's mistake and a `UserError` naming the file, never a MemoryError, a hang, or a
UnicodeDecodeError or RecursionError from deep inside a parser. Files a library reads by
name (ONNX, torch.export) are checked the same way first (`regular_file`).

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
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from xpusim.errors import UserError

MAX_INPUT_BYTES = 256 * 2**20
"""The largest text file read whole (config, chip, trace, CSV). The largest real inputs are
traces: a million Azure rows like `2023-11-16 18:15:46.6805900,374,44` (36 bytes with its
newline) are 36 MB, a seventh of it; a bigger file is the wrong file."""


_NOT_REGULAR = ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"),
                (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a named pipe"),
                (stat.S_ISSOCK, "a socket"))  # fmt: skip


def is_file(text: str | Path) -> bool:
    """Whether a name a user typed is something there other than a folder: a regular file,
    or a device or pipe that reading refuses with the true error (not "unknown model").
    A name no file system takes (too long, a NUL byte) is not one, rather than an OSError."""
    try:
        return not stat.S_ISDIR(os.stat(text).st_mode)
    except (OSError, ValueError):
        return False


def regular_file(path: Path, what: str, max_bytes: int) -> int:
    """The size of a user's file, once it is known to be a regular file of at most
    `max_bytes`; else a UserError naming it. Checked before the file is opened: a pipe's
    open would wait for a writer, and a device's size (0) says nothing of what it yields."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise UserError(f"{path}: no such {what} file") from None
    except OSError as e:
        raise UserError(f"{path}: cannot read {what} file: {e.strerror or e}") from None
    for test, kind in _NOT_REGULAR:
        if test(info.st_mode):
            raise UserError(f"{path}: {what} file is {kind}, not a regular file")
    if info.st_size > max_bytes:
        raise UserError(f"{path}: {what} file is {_mib(info.st_size)}, larger than the "
                        f"{_mib(max_bytes)} xpusim reads")  # fmt: skip
    return info.st_size


def _mib(size: int) -> str:
    return f"{size / 2**20:,.0f} MiB"


def read_text(path: Path, what: str) -> str:
    """A user's text file, UTF-8 (a byte-order mark allowed); any problem names the file."""
    regular_file(path, what, MAX_INPUT_BYTES)
    try:
        with path.open("rb") as f:  # at most one byte past the cap: a file may grow, and
            data = f.read(MAX_INPUT_BYTES + 1)  # /proc's report a size of 0
        if len(data) > MAX_INPUT_BYTES:
            raise UserError(f"{path}: {what} file is larger than the "
                            f"{_mib(MAX_INPUT_BYTES)} xpusim reads")  # fmt: skip
        return data.decode("utf-8-sig")
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
    nothing: a run refused later for bad input leaves no empty folder behind. Removes the
    temporary files a killed writer left there (remove_stale): every command that writes
    a folder, and a sweep resuming one, starts here."""
    _probe(path, f"{option} {path}")
    remove_stale(path)
    return path


def writable_file(path: Path, option: str) -> Path:
    """A file's path whose folder can be written (see writable_dir); a folder is refused."""
    if path.is_dir():
        raise UserError(f"{option} {path}: is a folder, not a file")
    _probe(path.parent, f"{option} {path}")
    remove_stale(path.parent)
    return path


def _temporary_prefix(name: str) -> str:
    """The start of a temporary file's name beside `name`: hidden, and carrying its writer's
    pid, so that a later run tells one whose writer was killed from one being written."""
    return f".{name}.xpusim{os.getpid()}."


_TEMPORARY = re.compile(r"\..+\.xpusim(\d+)\.\w+\.tmp(\.\w+)?")
"""A name _temporary_prefix began and mkstemp ended (its random part, then our suffix)."""


def remove_stale(folder: Path) -> list[Path]:
    """Deletes the temporary files in `folder` whose writer no longer runs, and returns
    them. A SIGKILL runs no clean-up, so `atomic`'s temporary file of a serve killed
    mid-write stayed, hidden, for good; one whose writer still runs (another serve into the
    same folder) is left to it. Nothing else is touched: only names of _TEMPORARY's form."""
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:  # not there yet, or not a folder: nothing of ours in it
        return removed
    for entry in entries:
        found = _TEMPORARY.fullmatch(entry.name)
        if found is None or _running(int(found[1])):
            continue
        with contextlib.suppress(OSError):
            if entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
    return removed


def _running(pid: int) -> bool:
    """Whether a process of this pid exists (a pid reused since only keeps a file longer)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # none; a pid past any the OS gives
        return False
    except PermissionError:  # another user's
        return True
    return True


def _probe(folder: Path, named: str) -> None:
    """A file can be made in `folder`, or in the nearest folder above it that exists."""
    import tempfile  # here, not at the top: reading (every run) never needs it (7 ms)

    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        if not existing.is_dir():
            raise NotADirectoryError(20, f"{existing} is not a folder")
        with tempfile.NamedTemporaryFile(dir=existing, prefix=_temporary_prefix("probe"),
                                         suffix=".tmp"):  # fmt: skip
            pass
    except OSError as e:
        raise UserError(f"{named}: cannot write there: {e.strerror or e}") from None


@contextlib.contextmanager
def atomic(path: Path, mode: str = "w") -> Iterator[IO]:
    """A file object whose content replaces `path` only once it is whole and closed."""
    import tempfile

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=_temporary_prefix(path.name),
                               suffix=".tmp")  # fmt: skip
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

    # a library picks the format by the name's suffix (matplotlib): it ends the name
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=_temporary_prefix(path.name),
                               suffix=f".tmp{path.suffix}")  # fmt: skip
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
