"""Memos last one call (xpusim/memo.py): nothing computed outlives the call that made it."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

import xpusim
from xpusim import memo
from xpusim.compiler.partition import layers_per_stage

SRC = Path(xpusim.__file__).parent

# Kept for the process, each by name (a new cache in the same file is still caught):
# constant data read from the package's own files or the environment's modules once a
# process, the same on every call, so keeping it cannot change an answer.
LOADERS_KEPT = {
    "api.py: @cache _taken",  # a scenario's option names, from its function's signature
    "cost/calibration.py: @cache catalog_calibration",
    "cost/kernel_tables.py: @cache tables_of_kind", "cost/kernel_tables.py: @cache chip_tables",
    "cost/collectives.py: @cache measured_curves",  # a chip's measured collectives file
    "cost/op_times.py: @cache op_times",  # an engine's kernel chains timed per call
    # DeepEP's tables, each row checked against its catalog node's links, and the floor line
    # a (chip, ranks, hidden, top-k, step) reads off them: functions of committed data alone
    "cost/ep_alltoall.py: @cache tables", "cost/ep_alltoall.py: @cache _link_bytes_per_s",
    "cost/ep_alltoall.py: @cache measured_line",
    "hardware/catalog.py: @cache chip_ids", "hardware/catalog.py: @cache _load_catalog_chip",
    "hardware/prices.py: @cache prices",
    "hardware/system.py: @cache system_ids", "hardware/system.py: @cache _catalog_system",
    "ir/dtypes.py: @cache weight_layouts",
    "planning/launch.py: @cache table",
    "serving/engines.py: @cache engines",
    "validation/points.py: @cache load_points",
    "validation/error_bands.py: @cache _bands",  # the committed bands file
    "disk_cache.py: @cache package_key",  # the hash of the package's own files
    "web/app.py: @cache _catalog", "web/app.py: @cache _models",
    # torch's custom op defined once a process, and the function its patch replaces
    "workloads/torch_kernels.py: @cache _original_scan",
    "workloads/torch_kernels.py: @cache register",
    "workloads/zoo.py: @cache zoo_file", "workloads/zoo.py: @cache hub_names",
    "workloads/zoo.py: @cache built_ids", "workloads/zoo.py: @cache zoo_entry",
    "workloads/zoo.py: @cache unbuilt_repos",
}  # fmt: skip
# Single functions kept likewise: a result class's fields read off its type hints (a
# constant of the class), the torus layouts' TOML (in a module whose other memos are
# computed, so scoped), and a lengths file's rows keyed by its path, size and mtime.
# The busiest expert-parallel chip's share under the power-law routing: a fixed-seed draw, a
# pure function of (experts, top-k, ep, alpha) that costs 0.03-0.14 s each (measured on this
# repository's 2-core VM, 128-256 experts, ep 4-32), so kept per process.
FUNCTIONS_KEPT = LOADERS_KEPT | {"explore/rows.py: @functools.cache _objects",
                                 "compiler/moe_expert.py: @cache _busiest_share",
                                 # the collector's routing replayed per table row: a pure
                                 # function of (tokens, experts, top-k, ep), rows repeating
                                 # across tables (up to 16,384 tokens x 256 experts a call)
                                 "cost/kernel_tables.py: @cache gate_load",
                                 "compiler/torus_layouts.py: @cache _data",
                                 "compiler/torus_layouts.py: @cache layouts",
                                 "serving/load.py: @lru_cache(maxsize=8) _read_lengths",
                                 # a checkpoint's exclusion list compiled once: constant data
                                 "workloads/checkpoint.py: @lru_cache(maxsize=64) _matcher"}


def _module_level_caches(tree: ast.Module) -> list[str]:
    found = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            for decorator in node.decorator_list:
                name = ast.unparse(decorator)
                if name.split("(")[0] in ("cache", "lru_cache", "functools.cache",
                                          "functools.lru_cache"):  # fmt: skip
                    found.append(f"@{name} {node.name}")
        value = getattr(node, "value", None)
        if isinstance(value, ast.Call) and ast.unparse(value.func) == "ByIdentity":
            found.append(f"line {node.lineno}: a module-level ByIdentity")
    return found


def test_no_process_global_computed_cache():
    """A function memoized for the process (functools.cache, lru_cache) or a module-level
    ByIdentity is a computed cache outliving its call; only constant data loaders may."""
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        name = path.relative_to(SRC).as_posix()
        offenders += [f"{name}: {c}" for c in _module_level_caches(ast.parse(path.read_text()))]
    assert [o for o in offenders if o not in FUNCTIONS_KEPT] == []
    assert sorted(FUNCTIONS_KEPT - set(offenders)) == []  # no name kept for a removed cache


def test_a_scope_keeps_values_and_nothing_outlives_it():
    outside = layers_per_stage(80, 3), layers_per_stage(80, 3)
    assert outside[0] == outside[1]
    with memo.scope() as scope:
        first = memo.remembered("test", (), 1, lambda: np.zeros(2))
        assert memo.remembered("test", (), 1, lambda: np.ones(2)) is first
        with memo.scope() as inner:
            assert inner is scope  # an inner call reuses the outer one's memos
    assert memo.remembered("test", (), 1, lambda: np.ones(2))[0] == 1.0  # made again


def test_simulate_keeps_nothing_after_it_returns():
    cfg = xpusim.model("llama-3.2-1b")
    first = xpusim.simulate(cfg, "h100-sxm", chips=2)
    assert memo._SCOPE.get() is None
    again = xpusim.simulate(cfg, "h100-sxm", chips=2)
    assert first.tpot_s == again.tpot_s


def test_a_sweep_keeps_its_lasting_memos_from_chunk_to_chunk_and_nothing_after():
    """Inside a sweep's scope each chunk's scope is its own, but the memos named in
    memo.LASTING (what points share whatever their shapes) live as long as the sweep."""
    assert "system" in memo.LASTING and "test" not in memo.LASTING
    with memo.sweep_scope():
        with memo.scope():
            system = memo.remembered("system", (), 1, lambda: np.zeros(2))
            shaped = memo.remembered("test", (), 1, lambda: np.zeros(2))
        with memo.scope():  # the next chunk
            assert memo.remembered("system", (), 1, lambda: np.ones(2)) is system
            assert memo.remembered("test", (), 1, lambda: np.ones(2)) is not shaped
    assert memo._SWEEP.get() is None
    with memo.scope():
        assert memo.remembered("system", (), 1, lambda: np.ones(2))[0] == 1.0  # made again


def test_a_sweep_s_rows_equal_its_points_run_each_in_a_sweep_of_its_own(tmp_path):
    """Memos kept from chunk to chunk change no row: a grid swept in several chunks equals
    each chunk's points swept alone."""
    from xpusim.explore import sweep
    from xpusim.explore.executor import InProcess

    grid = sweep.Grid(xpusim.model("llama-3.2-1b"), ("h100-sxm", "tpu-v4"),
                      (("memory.dram.bandwidth_bytes_per_s", (2e12, 3e12)),),
                      {"batch": (1, 8), "chips": (1, 4), "gen": (16, 64)})  # fmt: skip
    together = sweep.run(grid, tmp_path / "all", InProcess()).rows
    alone = []
    for i, point in enumerate(grid.points()):
        one = sweep.Grid(grid.workload, (point.target,), tuple((k, (v,)) for k, v in point.sets),
                         {k: (v,) for k, v in point.options})  # fmt: skip
        alone += sweep.run(one, tmp_path / str(i), InProcess()).rows
    by_key = {row["key"]: row for row in alone}
    assert [row for row in together] == [by_key[row["key"]] for row in together]
