"""The disk cache of slow pure builds (disk_cache.py): a read-back result equals the build,
and no state of the cache's folder fails a command."""

from __future__ import annotations

import dataclasses
import hashlib
import pickle

import numpy as np
import pytest

from xpusim import disk_cache
from xpusim.cost import kernel_tables


def _same(a: object, b: object) -> bool:
    if dataclasses.is_dataclass(a) and type(a) is type(b):
        return all(_same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and np.array_equal(a, b)
    if isinstance(a, tuple | list):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    return a == b


def test_every_kernel_table_read_back_from_the_cache_equals_the_one_parsed(monkeypatch, tmp_path):
    monkeypatch.setenv(disk_cache.CACHE_ENV, str(tmp_path))
    directory = kernel_tables.TABLES_DIR
    files = [(path, kind) for kind, pattern in kernel_tables.KIND_FILES.items()
             for path in sorted(directory.glob(pattern))]  # fmt: skip
    files += [(path, kind) for kind, pattern in kernel_tables.CHIP_FILES.items()
              for path in sorted(directory.glob(pattern.format(chip="*")))]  # fmt: skip
    assert len(files) >= 20
    for path, kind in files:
        fresh = kernel_tables.read_tables(path, kind)
        built = kernel_tables._read(path, kind)  # builds it and keeps it
        again = kernel_tables._read(path, kind)  # reads it back
        assert _same(fresh, built) and _same(fresh, again), path.name
    assert len(list(tmp_path.glob("kernel-tables-*.pickle"))) == len({p for p, _ in files})


def test_a_corrupt_or_stale_file_is_built_again_and_replaced(monkeypatch, tmp_path):
    monkeypatch.setenv(disk_cache.CACHE_ENV, str(tmp_path))
    key = f"{disk_cache.package_key()}-{hashlib.sha256(b'').hexdigest()[:12]}"
    (tmp_path / f"answer--{key}.pickle").write_bytes(b"not a pickle")
    (tmp_path / "answer--0123456789.pickle").write_bytes(b"an older build's")
    calls = []
    assert disk_cache.cached("answer", lambda: calls.append(1) or 42) == 42
    assert pickle.loads((tmp_path / f"answer--{key}.pickle").read_bytes()) == 42
    assert [p.name for p in tmp_path.iterdir()] == [f"answer--{key}.pickle"]
    assert disk_cache.cached("answer", lambda: calls.append(1) or 41) == 42  # read back
    assert len(calls) == 1


@pytest.mark.parametrize("setting", ["off", "", "a file"])
def test_a_cache_that_is_off_or_cannot_be_written_builds_every_time(monkeypatch, tmp_path,
                                                                    setting):  # fmt: skip
    if setting == "a file":  # a folder that cannot be made: a file stands in its place
        setting = str(tmp_path / "taken")
        (tmp_path / "taken").write_text("")
    monkeypatch.setenv(disk_cache.CACHE_ENV, setting)
    calls = []
    for _ in range(2):
        assert disk_cache.cached("answer", lambda: calls.append(1) or 42) == 42
    assert len(calls) == 2
    assert not list(tmp_path.glob("**/*.tmp"))


def test_any_change_to_the_packages_files_makes_a_new_key(monkeypatch, tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "b.toml").write_text("y = 2\n")
    (tmp_path / "notes.md").write_text("not keyed\n")
    monkeypatch.setattr(disk_cache, "PACKAGE", tmp_path)
    keys = []
    for edit in (None, ("notes.md", "still not keyed\n"), ("data/b.toml", "y = 3\n"),
                 ("a.py", "x = 2\n")):  # fmt: skip
        if edit:
            (tmp_path / edit[0]).write_text(edit[1])
        disk_cache.package_key.cache_clear()
        keys.append(disk_cache.package_key())
    disk_cache.package_key.cache_clear()
    assert keys[0] == keys[1] != keys[2] != keys[3] != keys[0]


def test_the_same_build_from_other_input_bytes_is_not_read_back(monkeypatch, tmp_path):
    """A table file outside the package (a test's own) keys its result by its bytes."""
    monkeypatch.setenv(disk_cache.CACHE_ENV, str(tmp_path))
    assert disk_cache.cached("table", lambda: "first", b"rows = [1]") == "first"
    assert disk_cache.cached("table", lambda: "second", b"rows = [2]") == "second"
    assert disk_cache.cached("table", lambda: "third", b"rows = [2]") == "second"
