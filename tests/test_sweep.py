"""Sweeps: grids, Pareto fronts, equality with one-by-one runs, resuming, Ray, the commands."""

from __future__ import annotations

import csv
import dataclasses
import json
import math

import numpy as np
import pytest
from cli_run import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st
from test_cli import assert_user_error, run_json

import xpusim
from xpusim.errors import UserError
from xpusim.explore.executor import InProcess, LocalPool
from xpusim.explore.grid import Point, split
from xpusim.explore.pareto import Objective, front, front_mask
from xpusim.explore.rows import Columns, result_row
from xpusim.explore.sensitivity import sensitivity
from xpusim.explore.sweep import Grid, run
from xpusim.hardware.whatif import apply

BANDWIDTH = "memory.dram.bandwidth_bytes_per_s"


@pytest.fixture(scope="module")
def grid(llama7b_module) -> Grid:
    """2 chips x 2 bandwidths x 2 batches x 2 precisions x 2 chip counts."""
    return Grid(llama7b_module, ("h100-sxm", "mtia-v1"), ((BANDWIDTH, (1e12, 4e12)),),
                {"batch": (1, 4), "precision": ("int8", "bf16"), "chips": (1, 2)})  # fmt: skip


@pytest.fixture(scope="module")
def llama7b_module():
    return xpusim.model("llama-2-7b")


def test_split_comma_lists_and_progressions():
    assert split("1,2,4,...,64") == ["1", "2", "4", "8", "16", "32", "64"]
    assert split("128,256,...,512") == ["128", "256", "384", "512"]
    assert split("8,4,...,1") == ["8", "4", "2", "1"]
    assert split("int8, bf16") == ["int8", "bf16"]
    for bad in ("1,2,4,...,100", "1,...,4", "a,b,...,c", "1,,2", "1,2,...,1e9", "1,2,...,inf",
                "1,2,...,nan", "-inf,1,...,4", "1e-308,2e-308,...,1e308"):
        with pytest.raises(UserError):
            split(bad)


def test_front_of_hand_made_points():
    # maximize both: (1,5) (2,4) (3,3) are a front; (1,1) and (2,2) are dominated by (3,3)
    values = np.array([[1, 5], [2, 4], [3, 3], [1, 1], [2, 2], [3, 3]], float)
    assert front_mask(values, [True, True]).tolist() == [True, True, True, False, False, False]
    # minimize the first: now (1,5) dominates everything but itself
    assert front_mask(values, [False, True]).tolist() == [True, False, False, False, False, False]
    # three objectives: a point best on the third alone stays
    three = np.array([[1, 1, 9], [2, 2, 1], [1, 1, 1]], float)
    assert front_mask(three, [True, True, True]).tolist() == [True, True, False]


def test_front_skips_points_that_do_not_fit_or_failed():
    x, y = Objective("x", True, "x"), Objective("y", True, "y")
    rows = [
        {"x": 1.0, "y": 1.0, "fits": True},
        {"x": 9.0, "y": 9.0, "fits": False},  # would dominate all, but does not fit
        {"x": 2.0, "y": 0.5, "fits": True},
        {"x": 5.0, "y": 5.0, "fits": True, "error": "no bf16"},
        {"x": float("nan"), "y": 1.0, "fits": True},
    ]
    assert front(rows, (x, y)) == [0, 2]
    assert front(rows, (x, y), among=[2, 3]) == [2]


def test_sweep_equals_points_run_one_by_one(grid, tmp_path):
    swept = run(grid, tmp_path, InProcess())
    assert len(swept.rows) == len(grid.points()) == 32
    targets = {t: xpusim.target(t) for t in grid.targets}
    for point, row in zip(grid.points(), swept.rows, strict=True):
        try:
            alone = result_row(
                point,
                xpusim.simulate(
                    grid.workload, apply(targets[point.target], point.sets), **dict(point.options)
                ),
            )
        except UserError as error:  # fmt: skip
            assert str(error) == row["error"]
            continue
        assert "error" not in row or row["error"] is None
        assert {k: v for k, v in alone.items() if v not in ("", None)} == {
            k: v for k, v in row.items() if v is not None and k not in ("error", "spec_hash")}
    errors = [r for r in swept.rows if r.get("error")]
    assert all(r["target"] == "mtia-v1" and "fp8" not in r["error"] for r in errors)
    # a 25 W MTIA v1 given 4 TB/s of LPDDR5 cannot feed it within its TDP: the power
    # limit, not the memory roof, sets its decode
    starved = [r for r in swept.rows if r["target"] == "mtia-v1" and r.get("fits")
               and r[f"set.{BANDWIDTH}"] == 4e12]  # fmt: skip
    assert starved and all(r["bottleneck"] == "power" for r in starved)


def test_interrupted_sweep_resumes_to_the_same_file(grid, tmp_path):
    whole = tmp_path / "whole"
    run(grid, whole, InProcess())
    part = Grid(grid.workload, grid.targets[:1], grid.sets, {**grid.axes, "batch": (4,)})
    resumed = tmp_path / "resumed"
    run(part, resumed, InProcess())
    again = run(grid, resumed, InProcess())
    assert again.n_simulated == len(grid.points()) - len(part.points())
    assert (resumed / "results.csv").read_text() == (whole / "results.csv").read_text()


@pytest.mark.parametrize(("address", "says"), [
    ("127.0.0.1:1", "no Ray cluster answers there"),  # Ray retried for minutes, logging
    ("nonsense", "expected HOST:PORT"),
])  # fmt: skip
def test_a_ray_address_nothing_answers_at_is_one_line(capsys, tmp_path, address, says):
    pytest.importorskip("ray")
    code, out, err = run_cli(capsys, "sweep", "llama-3.2-1b", "--chip", "h100-sxm",
                             "--ray-address", address, "--out", str(tmp_path / "x"))  # fmt: skip
    assert code == 2 and not out and says in err and err.count("\n") == 1
    assert not (tmp_path / "x").exists()


def test_local_pool_and_ray_give_identical_tables(grid, tmp_path):
    ray = pytest.importorskip("ray")
    from xpusim.explore.executor import RayPool

    run(grid, tmp_path / "local", LocalPool(2))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        run(grid, tmp_path / "ray", RayPool())
    finally:
        ray.shutdown()
    local, on_ray = ((tmp_path / d / "results.csv").read_text() for d in ("local", "ray"))
    assert local == on_ray


def test_sweep_command_writes_table_files_and_plots(capsys, tmp_path):
    out = tmp_path / "out"
    d = run_json(capsys, "sweep", "llama-2-7b", "--chip", "h100-sxm", "--chip", "groq-lpu",
                 "--batch", "4,8,...,16", "--precision", "int8,bf16", "--workers", "1",
                 "--out", str(out))  # fmt: skip
    assert d["n_points"] == 16 and d["n_simulated"] == 16 and d["simulate_s"] > 0
    assert d["pareto"] and all(r["fits"] and r["target"] == "h100-sxm" for r in d["pareto"])
    assert d["objectives"] == ["tokens_per_s_per_user", "tokens_per_s_per_chip"]
    with (out / "results.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 16 and sum(bool(r["error"]) for r in rows) == 4  # groq has no bf16
    names = {p.rsplit("/", 1)[-1] for p in d["files"]}
    pytest.importorskip("matplotlib")
    assert {"results.csv", "pareto.png", "roofline.png", "breakdown.png"} <= names
    assert (out / "pareto.png").read_bytes()[:4] == b"\x89PNG"
    again = run_json(capsys, "sweep", "llama-2-7b", "--chip", "h100-sxm", "--chip", "groq-lpu",
                     "--batch", "4,8,...,16", "--precision", "int8,bf16", "--workers", "1",
                     "--out", str(out), "--no-plots")  # fmt: skip
    assert again["n_simulated"] == 0 and again["pareto"] == d["pareto"]


@pytest.mark.parametrize(("argv", "plotted"), [
    # nothing fits a 405B model on one Groq chip: plotting it raised (log axes, no data)
    (["llama-3-405b", "--chip", "groq-lpu"], set()),
    # a query server's best points are labelled by their rate (it raised AttributeError)
    (["dlrm-v2", "--chip", "h100-sxm", "--rate", "1,2", "--requests", "20"], {"pareto.png"}),
])  # fmt: skip
def test_sweeps_whose_points_plot_oddly_still_finish(capsys, tmp_path, argv, plotted):
    pytest.importorskip("matplotlib")
    d = run_json(capsys, "sweep", *argv, "--workers", "1", "--out", str(tmp_path))
    names = {p.rsplit("/", 1)[-1] for p in d["files"]}
    assert {"results.csv"} | plotted <= names and ("pareto.png" in names) == bool(plotted)
    assert bool(plotted) or "no point fits: nothing to plot" in d["notes"]


@pytest.mark.parametrize(("argv", "mentions"), [
    (["run", "llama-2-7b", "--chip", "h100-sxm", "--set", "memory.dram.bandwidth=1e12"],
     ["bandwidth"]),
    (["run", "llama-2-7b", "--chip", "h100-sxm", "--set", f"{BANDWIDTH}=-1"], [BANDWIDTH]),
    (["run", "llama-2-7b", "--chip", "h100-sxm", "--set", f"{BANDWIDTH}=fast"], ["fast"]),
    (["compare", "llama-2-7b", "--chip", "h100-sxm", "--set", "memory.sram.capacity_bytes=1"],
     ["sram"]),
    (["sweep", "llama-2-7b", "--chip", "h100-sxm", "--set", "efficiency.matmul=0.5,1.5",
      "--out", "never-written"], ["efficiency.matmul"]),
    (["sweep", "llama-2-7b", "--chip", "h100-sxm", "--set", "nonsense=1"], ["nonsense"]),
    (["sweep", "llama-2-7b", "--chip", "h100-sxm", "--batch", "1,2,4,...,10"], ["--batch"]),
    (["sweep", "dlrm-v2", "--chip", "h100-sxm", "--prompt", "128,256"], ["--prompt"]),
    # ten million points: refused before one is made (it would have filled memory)
    (["sweep", "llama-2-7b", "--chip", "h100-sxm", "--batch", "1,2,...,100000", "--prompt",
      "1,2,...,100", "--out", "never-written"], ["10,000,000 points", "5,000,000"]),
])  # fmt: skip
def test_bad_what_if_or_list_is_exit_2_naming_it(capsys, tmp_path, monkeypatch, argv, mentions):
    monkeypatch.chdir(tmp_path)
    assert_user_error(capsys, *argv, mentions=mentions)
    assert not (tmp_path / "never-written").exists()


def test_what_if_changes_a_run(capsys):
    base = run_json(capsys, "run", "llama-2-7b", "--chip", "h100-sxm", "--precision", "fp16")
    faster = run_json(capsys, "run", "llama-2-7b", "--chip", "h100-sxm", "--precision", "fp16",
                      "--set", f"{BANDWIDTH}=6.7e12")  # fmt: skip
    assert faster["tpot_s"] < 0.7 * base["tpot_s"]  # per-op overheads stay
    assert "=6.7e+12" in faster["chip"]


def test_sensitivity_ranks_bandwidth_first_for_decode(capsys, llama7b_module):
    s = sensitivity(llama7b_module, xpusim.target("h100-sxm"), precision="fp16")
    assert s.metric == "tokens_per_s_per_user" and s.changes[0].change == "hbm3 bandwidth x2"
    # less than 2x: at the HBM path's measured 144 pJ/B, twice the bandwidth would draw more
    # than the TDP, so the power limit takes part of the gain
    assert 1.3 < s.changes[0].gain <= 2.0
    peak = next(g for g in s.changes if g.change == "compute peak x2")
    assert peak.gain == pytest.approx(1.0, abs=0.02)
    # a model that does not fit: only capacity helps, and it comes first
    big = sensitivity(xpusim.model("llama-2-70b"), xpusim.target("mtia-v1"), precision="int8")
    assert not big.fits and big.changes[0].change == "lpddr5 capacity x2" and big.changes[0].fits
    d = run_json(capsys, "sensitivity", "llama-2-7b", "--chip", "groq-lpu", "--precision", "int8",
                 "--chips", "64")  # fmt: skip
    assert {c["change"] for c in d["changes"]} >= {"sram bandwidth x2", "chip-to-chip links x2"}
    json.dumps(d, allow_nan=False)


def test_point_keys_are_stable_and_order_groups_shapes():
    a = Point("h100-sxm", ((BANDWIDTH, 1e12),), (("batch", 4), ("chips", 8)))
    b = Point("tpu-v4", (), (("batch", 4), ("chips", 1)))
    c = Point("h100-sxm", (), (("batch", 8), ("chips", 1)))
    assert a.key == Point("h100-sxm", ((BANDWIDTH, 1e12),), (("batch", 4), ("chips", 8))).key
    assert len({a.key, b.key, c.key}) == 3
    # points of one shape (batch 4) sort together, whatever their chip, what-if or plan
    assert {p.target for p in sorted([c, a, b], key=lambda p: p.order)[:2]} == {
        "h100-sxm",
        "tpu-v4",
    }


def test_rare_collections_restores_the_thresholds():
    import gc

    from xpusim.explore.executor import YOUNG_OBJECTS, rare_collections

    before = gc.get_threshold()
    with rare_collections():
        assert gc.get_threshold()[0] == max(YOUNG_OBJECTS, before[0])
    assert gc.get_threshold() == before


def test_points_sort_by_format_first():
    """One graph serves every shape of a format: a chunk holds one format's shapes."""
    points = [Point("h100-sxm", (), (("batch", b), ("precision", p)))
              for b in (1, 2, 3) for p in ("int8", "bf16")]  # fmt: skip
    ordered = [dict(p.options)["precision"] for p in sorted(points, key=lambda p: p.order)]
    assert ordered == ["bf16"] * 3 + ["int8"] * 3


def test_pareto_plot_draws_a_bounded_number_of_points(tmp_path, monkeypatch):
    """However many points a sweep has, at most MAX_FAINT of each target's are drawn."""
    pytest.importorskip("matplotlib")
    from xpusim.explore.pareto import objectives_for
    from xpusim.report import plots

    drawn = []
    monkeypatch.setattr(plots, "_save", lambda plt, fig, path: drawn.extend(
        len(c.get_offsets()) for ax in fig.axes for c in ax.collections))
    rng = np.random.default_rng(1)
    rows = [{"target": "h100-sxm", "fits": True, "batch": i,
             "tokens_per_s_per_user": float(x), "tokens_per_s_per_chip": float(y)}
            for i, (x, y) in enumerate(rng.uniform(1, 100, (50_000, 2)))]  # fmt: skip
    objectives = objectives_for(list(rows[0]))
    plots.pareto_plot(rows, {"h100-sxm": [0, 1]}, objectives, ["batch"], "t", tmp_path / "p.png")
    assert drawn and max(drawn) <= plots.MAX_FAINT


def test_a_point_comes_back_from_its_key():
    point = Point("h100-sxm", ((BANDWIDTH, 2e12),), (("batch", 4), ("precision", "int8")))
    again = Point.from_key(point.key)
    assert again == point and again.key == point.key


def _chunk(*rows: dict) -> Columns:
    """Rows as a sweep's chunk (a row without a column has None there)."""
    names = dict.fromkeys(name for row in rows for name in row)
    return Columns({name: [row.get(name) for row in rows] for name in names}, len(rows))


def test_lines_formatted_by_a_worker_are_the_stores_own(tmp_path):
    """A chunk's lines formatted where it was simulated (store.lines_of) are written as
    they are only where the file's columns begin with the chunk's (widened by an empty
    cell a column), else the rows are formatted again: the file is the same byte for byte
    as one written from the values alone, for chunks of the same, fewer, more and
    reordered columns."""
    from xpusim.explore.store import ResultStore, lines_of

    chunks = [
        _chunk({"key": "a", "spec_hash": "h", "x": 1.5, "t": 'q,"r"'}),
        _chunk({"key": "b", "spec_hash": "h", "x": -0.0, "t": "s"}),  # the same columns
        _chunk({"key": "c", "spec_hash": "h", "x": 2.0}),  # fewer: the first ones
        _chunk({"key": "d", "spec_hash": "h", "x": 3.0, "t": "u", "y": 7}),  # one more
        _chunk({"key": "e", "spec_hash": "h", "x": 0.0, "y": 8, "t": "v"}),  # reordered
        _chunk({"spec_hash": "h", "key": "f"}),  # fewer, not the first ones
    ]
    expected = dict.fromkeys("abcdef", "h")
    texts = []
    for with_lines in (True, False):
        path = tmp_path / f"{with_lines}.csv"
        store = ResultStore(path, expected)
        for chunk in chunks:
            store.add(chunk, lines_of(chunk) if with_lines else None)
        texts.append(path.read_bytes())
    assert texts[0] == texts[1]
    assert texts[0].decode().splitlines()[0] == "key,spec_hash,x,t,y"


def test_store_rows_gain_columns_and_read_back_whole(tmp_path):
    """A row with a column the file lacks rewrites it: every line keeps the header's width,
    and rows stored before the column read None there, as they read back from the file."""
    from xpusim.explore.store import ResultStore, column

    path = tmp_path / "results.csv"
    expected = {"a": "h", "b": "h", "e": "h"}
    store = ResultStore(path, expected)
    store.add(_chunk({"key": "a", "spec_hash": "h", "x": 1.5},
                     {"key": "e", "spec_hash": "h", "error": "no bf16"}))  # fmt: skip
    store.add(_chunk({"key": "b", "spec_hash": "h", "x": 2.0, "y": True}))
    store.close()
    with path.open() as f:
        lines = list(csv.reader(f))
    assert len({len(line) for line in lines}) == 1
    again = ResultStore(path, expected)
    assert [dict(r) for r in again.rows] == [dict(r) for r in store.rows]
    assert again.rows[0]["y"] is None and again.rows[2]["y"] is True
    assert again.rows[1].get("error") == "no bf16" and again.rows[1].get("nope", 7) == 7
    # a column read whole (store.column, for Parquet): rows stored before it came read None
    assert column(store.rows, "y") == [None, None, True]
    assert column(store.rows, "x") == column(again.rows, "x") == [1.5, None, 2.0]


@pytest.mark.parametrize(("error", "moved_max_bytes"),
                         [("one line", 2**20), ("two\nlines", 2**20), ("one line", 0)])
def test_store_rewrites_move_written_rows_and_read_back_whole(tmp_path, monkeypatch, error,
                                                              moved_max_bytes):  # fmt: skip
    """A column added mid-sweep and the final grid-order rewrite move the rows already
    written as their text (widened by empty cells); a cell spanning lines makes the file's
    lines not its rows, and a file too large to hold makes moving it cost memory: the
    rows are formatted again, a few at a time (here one). Either way the file reads back as
    the store holds it, and a spec hash of digits stays the text it was (it read back as a
    number, lost its leading zero and refused the resume)."""
    from xpusim.explore import store as stores
    from xpusim.explore.store import ResultStore

    monkeypatch.setattr(stores, "MOVED_MAX_BYTES", moved_max_bytes)
    monkeypatch.setattr(stores, "REWRITE_ROWS", 1)

    path, digits = tmp_path / "results.csv", "0123456789012345"
    expected = {"a": digits, "b": digits, "c": digits, "d": digits}
    store = ResultStore(path, expected)
    store.add(_chunk({"key": "a", "spec_hash": digits, "x": 0.1},
                     {"key": "b", "spec_hash": digits, "error": error}))  # fmt: skip
    store.add(_chunk({"key": "c", "spec_hash": digits, "x": 1 / 3, "y": True}))  # a new column
    store.add(_chunk({"key": "d", "spec_hash": digits, "x": 2.0}))
    store.reorder(["d", "c", "b", "a"])
    again = ResultStore(path, expected)
    assert [r["key"] for r in again.rows] == ["d", "c", "b", "a"]
    assert [dict(r) for r in again.rows] == [dict(r) for r in store.rows]
    assert again.rows[1]["x"] == 1 / 3 and again.rows[1]["y"] is True
    assert again.rows[2]["error"] == error and again.rows[3]["y"] is None
    assert again.rows[0]["spec_hash"] == digits
    again.reorder(["a", "b", "c", "d"])
    assert [r["key"] for r in ResultStore(path, expected).rows] == ["a", "b", "c", "d"]


@dataclasses.dataclass
class _Part:
    share: float
    items: list


@dataclasses.dataclass
class _Outcome:
    chips: int
    throughput: float
    plan: dict
    part: _Part | None
    notes: list
    plan_search: dict | None = None


def test_columns_hold_each_results_scalars_one_level_deep():
    """A chunk's columns: the inputs, then each result's scalars with nested dicts and
    dataclasses one level deep (lists and plan_search left out), the per-chip rate, key and
    error; a row without a column has None there, and a result's value wins over the
    input of the same name. A field that is None beside nested values (a point that does
    not fit has no cost) has no column of its own: it would be empty throughout."""
    points = [Point("x", (("p", 1.0),), (("chips", 2),)),
              Point("y", (), (("chips", 4), ("precision", "int8"))),
              Point("z", (), (("chips", 1),))]  # fmt: skip
    found = [_Outcome(8, 8.0, {"tp": 2, "ops": [1]}, _Part(0.5, []), ["a note"], {"s": 1.0}),
             UserError("no int8"),
             _Outcome(1, 3.0, {"tp": 1}, None, [])]  # fmt: skip
    got = Columns.of(points, found)
    assert list(got.cells) == ["target", "set.p", "chips", "precision", "throughput",
                               "plan.tp", "part.share", "throughput_per_chip", "key",
                               "error"]  # fmt: skip
    assert got.row(0) == {
        "target": "x", "set.p": 1.0, "chips": 8, "precision": None, "throughput": 8.0,
        "plan.tp": 2, "part.share": 0.5, "throughput_per_chip": 1.0,
        "key": points[0].key, "error": None}  # fmt: skip
    assert got.row(1) == {
        **dict.fromkeys(got.cells), "target": "y", "chips": 4, "precision": "int8",
        "key": points[1].key, "error": "no int8"}  # fmt: skip
    assert got.row(2)["part.share"] is None
    assert [result_row(p, f) for p, f in zip(points, found, strict=True)][2] == {
        "target": "z", "chips": 1, "throughput": 3.0, "plan.tp": 1,
        "throughput_per_chip": 3.0, "key": points[2].key}  # no `part` of its own, even alone


def test_a_signal_during_a_write_keeps_what_it_counts(tmp_path, monkeypatch):
    """A SIGINT that arrives while a chunk's rows are written is raised once they are all
    on disk: the rows the store counts are the rows the file holds (once, a SIGTERM landing
    mid-write left 575 rows in the file and 768 counted)."""
    import signal

    from xpusim.explore import store as stores

    class Stop(Exception):
        pass

    def stop(*_):
        raise Stop

    path = tmp_path / "results.csv"
    keys = [f"p{i}" for i in range(50)]
    store = stores.ResultStore(path, dict.fromkeys(keys, "h"))
    store.add(_chunk({"key": keys[0], "spec_hash": "h", "x": 0.0}))  # columns known: appends next
    append = store._append

    def append_then_signal(lines):
        def signalled():
            for i, line in enumerate(lines):
                if i == 9:  # the middle of the second chunk's rows, as they are written
                    signal.raise_signal(signal.SIGINT)
                yield line

        append(signalled())

    monkeypatch.setattr(store, "_append", append_then_signal)
    previous = signal.signal(signal.SIGINT, stop)
    try:
        with pytest.raises(Stop):
            store.add(_chunk(*({"key": k, "spec_hash": "h", "x": 1.0} for k in keys[1:])))
    finally:
        signal.signal(signal.SIGINT, previous)
    with path.open() as f:
        kept = len(list(csv.reader(f))) - 1
    assert kept == len(store.rows) == 50


_CELLS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, -0.0, 1.5, 1e16]),
    st.text(alphabet=st.sampled_from(list('ab ,"\r\n-0.e')), max_size=6),
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(width=st.integers(1, 6), data=st.data())
def test_rows_are_written_as_the_csv_module_writes_them(width, data):
    """The store formats a chunk's lines a column at a time, each distinct value once
    (store._lines): byte for byte what csv.writer writes of the same cells, with quotes,
    line ends in texts, -0.0 beside 0.0, NaN, mixed kinds in a column and rows stored
    before the last columns came."""
    import io

    from xpusim.explore.rows import to_text
    from xpusim.explore.store import ResultStore, StoredRow

    rows = data.draw(st.lists(st.lists(_CELLS, max_size=width), min_size=1, max_size=12))
    columns = [f"c{i}" for i in range(width)]
    store = ResultStore.__new__(ResultStore)  # only its columns are read
    store.columns = columns
    index = {c: i for i, c in enumerate(columns)}
    expected = io.StringIO(newline="")
    csv.writer(expected).writerows(
        [to_text(v) if v is True or v is False else v for v in row] + [None] * (width - len(row))
        for row in rows)  # fmt: skip
    written = store._lines([StoredRow(index, tuple(row)) for row in rows])
    assert "".join(written) == expected.getvalue()


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.one_of(st.none(), st.floats(), st.floats(-1e-3, 1e-3),
                          st.sampled_from([0.0, -0.0, 1e-4, -1e-4, 9.99e-5, 1e-5, 1e16,
                                           9999999999999998.0, 5e-324, 1e308])),
                max_size=30))  # fmt: skip
def test_float_texts_are_repr(column):
    """store.float_texts (orjson with repr where the two differ) writes every float as repr
    does, nan, the infinities, subnormals and -0.0 included, and None as an empty cell."""
    from xpusim.explore.store import float_texts

    assert float_texts(column) == ["" if v is None else repr(v) for v in column]


def _twin(value):
    """A value equal to this one but written otherwise: -0.0 for 0.0, 2 for 2.0, True for 1."""
    if isinstance(value, float) and value == 0.0:
        return -math.copysign(0.0, value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return True if value == 1.0 else int(value)
    return value


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.none(), st.sampled_from([0.0, -0.0, 1.0, 2.0, 2.5, 1e300]),
                          st.floats(allow_nan=True)), min_size=1, max_size=12),
       st.lists(st.sampled_from(["same", "twin", "other"]), min_size=1, max_size=4))
def test_a_column_equal_to_another_is_written_as_its_own(column, copies):
    """A column of floats equal to one written before takes that one's texts
    (store._float_texts: a one-chip sweep's per-chip rates are its system's); equal
    cells that are written otherwise (-0.0 and 0.0, 2 and 2.0, True and 1.0) keep theirs:
    byte for byte what csv.writer writes."""
    import io

    from xpusim.explore.rows import to_text
    from xpusim.explore.store import _column_lines

    made = {"same": list, "twin": lambda c: list(map(_twin, c)),
            "other": lambda c: [v if v is None else 7.25 for v in c]}
    columns = [column] + [made[how](column) for how in copies]
    expected = io.StringIO(newline="")
    rows = zip(*columns, strict=True)
    csv.writer(expected).writerows([[to_text(v) if v is True or v is False else v for v in row]
                                    for row in rows])  # fmt: skip
    assert "".join(_column_lines(columns)) == expected.getvalue()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.0, 1.0, 2.0, 2.0000000001, 3.0, -1.5, 1e300]),
                          st.floats(-1e6, 1e6)), min_size=1, max_size=40),
       st.tuples(st.booleans(), st.booleans()))  # fmt: skip
def test_a_two_objective_front_equals_the_point_by_point_one(points, maximize):
    """front_mask's running maximum for two objectives keeps exactly the points the
    general check against the front so far keeps (ties to DIGITS digits included): the
    latter, on a third objective that is the same for every point."""
    values = np.array(points, dtype=float)
    flat = np.c_[values, np.zeros(len(values))]
    assert front_mask(values, list(maximize)).tolist() == front_mask(
        flat, [*maximize, True]).tolist()


def test_a_grid_counts_its_points_without_making_them():
    grid = Grid(xpusim.model("llama-2-7b"), ("h100-sxm", "tpu-v4"),
                ((BANDWIDTH, (2e12, 3e12, 4e12)),), {"batch": (1, 2), "prompt": (64, 128, 256)})
    assert grid.size == len(grid.points()) == 36
    # --chip h100-sxm:1 --chip h100-sxm:8: that chip at its two counts, tpu-v4 at --chips'
    counted = dataclasses.replace(grid, axes={**grid.axes, "chips": (4,)},
                                  counts={"h100-sxm": (1, 8)})  # fmt: skip
    points = counted.points()
    assert counted.size == len(points) == 36 + 18
    assert {(p.target, dict(p.options)["chips"]) for p in points} == {
        ("h100-sxm", 1), ("h100-sxm", 8), ("tpu-v4", 4)}


def test_a_local_pool_keeps_a_bounded_window_of_chunks_in_flight():
    """At most `window` chunks are running or queued while one is handed back, whatever
    the number of chunks: finished chunks' rows cannot pile up while the results file is
    written."""
    from concurrent.futures import ThreadPoolExecutor

    from xpusim.explore.executor import _windowed

    sent = []

    class Counting(ThreadPoolExecutor):
        def submit(self, fn, *args):
            sent.append(args)
            return super().submit(fn, *args)

    got = []
    with Counting(max_workers=2) as pool:
        for result in _windowed(pool, lambda x: x * x, range(50), window=4):
            assert len(sent) - len(got) <= 4 + 1  # the one handed back
            got.append(result)
    assert sorted(got) == [x * x for x in range(50)] and len(sent) == 50


def test_a_finished_files_columns_do_not_depend_on_which_chunk_finished_first(tmp_path):
    """A column only some chunks bring (a price, where some chips have none) takes its
    place from the grid's order, not from the chunk that happened to finish first: the
    local pool and Ray wrote the same rows under two headers (2026-12-05)."""
    from xpusim.explore.store import ResultStore

    priced = _chunk({"key": "a", "spec_hash": "h", "x": 1.0, "cost.usd": 2.0, "y": 3.0})
    unpriced = _chunk({"key": "b", "spec_hash": "h", "x": 4.0, "y": 5.0})
    texts = []
    for arrival in ((priced, unpriced), (unpriced, priced)):
        path = tmp_path / f"{len(texts)}.csv"
        store = ResultStore(path, {"a": "h", "b": "h"})
        for chunk in arrival:
            store.add(chunk)
        store.reorder(["a", "b"])
        texts.append(path.read_text())
    assert texts[0] == texts[1]
    assert texts[0].splitlines()[0] == "key,spec_hash,x,cost.usd,y"
