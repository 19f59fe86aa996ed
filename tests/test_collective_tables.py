"""Measured collectives (cost/collectives.py's floor, kernel_tables/collectives/*.toml):
a measured size costs its measured time where that is slower than the analytic line, the
floor never beats the line (nor so the bandwidth bound), more bandwidth is never slower,
and chips without tables keep the analytic cost."""

from __future__ import annotations

import tomllib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xpusim
from xpusim.cost.collectives import (
    MEASURED_DIR,
    Collective,
    bandwidth_bound_s,
    collective_line,
    collective_time,
    comm_seconds,
    floored_seconds,
    measured_curves,
)
from xpusim.hardware.system import load_system
from xpusim.ir.dtypes import DType
from xpusim.scenarios.llm.graphs import shape_graphs
from xpusim.scenarios.llm.request import Request

SYSTEMS = ("dgx-h100", "hgx-h200", "dgx-b200", "hgx-b300", "gb200-nvl72", "mi300x-platform",
           "tpu-v7-pod")
KINDS = (Collective.ALL_REDUCE, Collective.ALL_GATHER, Collective.REDUCE_SCATTER)


def _tables() -> list[dict]:
    return [t for path in sorted(MEASURED_DIR.glob("*.toml"))
            for t in tomllib.loads(path.read_text())["table"]]  # fmt: skip


def test_every_table_names_its_source_date_and_conditions():
    for table in _tables():
        assert table["kind"] == "collective" and Collective(table["scope"]) in KINDS
        for key in ("source", "url", "date", "conditions", "engine", "engine_version", "chips"):
            assert table[key], (table["name"], key)
        assert all(len(r) == 3 and r[2] > 0 for r in table["rows"])


def test_a_measured_size_costs_its_measured_time():
    """NCCL's all-gather of 8 MiB over 8 H100s took 44.86 us (nccl-tests, the only
    all-gather table); the analytic line says 7/8 x 8 MiB / 450 GB/s + 7 x 2 us = 30 us."""
    dgx = load_system("dgx-h100")
    row = next(r for t in _tables() if t["name"] == "aiconfigurator-nccl-all-gather-h100-sxm"
               for r in t["rows"] if r[:2] == [8, 2**23])  # fmt: skip
    line = collective_line(dgx, Collective.ALL_GATHER, 8).cost(2**23).time_s
    cost = collective_time(dgx, Collective.ALL_GATHER, 2**23, 8)
    assert row[2] * 1e-6 > line
    assert cost.time_s == pytest.approx(row[2] * 1e-6) and cost.algorithm == "measured"


def test_the_fastest_engine_floors_an_all_reduce():
    """At 16 KiB over 8 H100s TensorRT-LLM's one-shot all-reduce beats the analytic line's
    six steps of 2 us: the floor adds nothing there."""
    dgx = load_system("dgx-h100")
    line = collective_line(dgx, Collective.ALL_REDUCE, 8).cost(2**14)
    assert collective_time(dgx, Collective.ALL_REDUCE, 2**14, 8) == line


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(SYSTEMS), st.sampled_from(KINDS), st.sampled_from((2, 4, 8)),
       st.floats(1.0, 4e9), st.floats(1.0, 8.0))  # fmt: skip
def test_the_floor_never_beats_the_line_and_more_bandwidth_is_never_slower(
    system_id, kind, group, nbytes, factor
):
    system = load_system(system_id)
    seconds = float(floored_seconds(system, kind, np.array(nbytes), group))
    assert seconds >= collective_line(system, kind, group).cost(nbytes).time_s
    assert seconds >= bandwidth_bound_s(system, kind, nbytes, group)
    nvlink = system.levels[0]
    wider = nvlink.model_copy(update={"bandwidth_bytes_per_s": nvlink.bandwidth_bytes_per_s
                                      .model_copy(update={"value": nvlink.bandwidth_bytes_per_s
                                                          .value * factor})})  # fmt: skip
    faster = system.model_copy(update={"levels": (wider, *system.levels[1:])})
    assert float(floored_seconds(faster, kind, np.array(nbytes), group)) <= seconds * (1 + 1e-12)


def test_groups_and_chips_without_tables_keep_the_analytic_cost():
    dgx = load_system("dgx-h100")
    assert collective_time(dgx, Collective.ALL_REDUCE, 2**23, 6) == \
        collective_line(dgx, Collective.ALL_REDUCE, 6).cost(2**23)  # no 6-GPU rows
    mi = load_system("mi355x-platform")
    assert collective_time(mi, Collective.ALL_REDUCE, 2**23, 8) == \
        collective_line(mi, Collective.ALL_REDUCE, 8).cost(2**23)
    assert collective_time(dgx, Collective.ALL_TO_ALL, 2**23, 8) == \
        collective_line(dgx, Collective.ALL_TO_ALL, 8).cost(2**23)  # not this module's tables


def test_rccl_floors_the_mi300x_all_reduce_past_the_xgmi_line():
    """AMD's own collective table (rccl-tests on 8 MI300X): a 2 MiB all-reduce, a decode
    step's at 64 sequences of a 16k-wide model, took 36.68 us where the analytic xGMI line
    (7 x 64 GB/s, 2 us a hop) says under 30 us; at 32 KiB (one sequence) RCCL's 13.94 us
    is 1.15x the line's 12.1 us."""
    mi = load_system("mi300x-platform")
    line = collective_line(mi, Collective.ALL_REDUCE, 8)
    cost = collective_time(mi, Collective.ALL_REDUCE, 2**21, 8)
    assert line.cost(2**21).time_s < 30e-6
    assert cost.time_s == pytest.approx(36.68e-6) and cost.algorithm == "measured"
    assert collective_time(mi, Collective.ALL_REDUCE, 2**15, 8).time_s == pytest.approx(13.94e-6)
    assert line.cost(2**15).time_s == pytest.approx(12.1e-6, rel=0.01)


def test_googles_all_gather_floors_a_tpu7x_slice_where_the_ici_line_is_too_fast():
    """Google's Ironwood all-gather on a 2x2x1 slice: the analytic line (each chip's two
    axes of 2 without wrap-around, one 90 GB/s link each, 1 us a hop) is within 3% of it at
    134-537 MB a chip but half its time at 2 MB (10.7 against 21.9 us: a fixed ~15 us the
    line's two hops do not hold), where the measured row now prices it."""
    from xpusim.hardware.system import system_for

    slice4 = system_for(xpusim.chip("tpu-v7"), 4)
    line = collective_line(slice4, Collective.ALL_GATHER, 4)
    small, large = collective_time(slice4, Collective.ALL_GATHER, 2**21, 4), \
        collective_time(slice4, Collective.ALL_GATHER, 2**29, 4)  # fmt: skip
    assert line.cost(2**21).time_s == pytest.approx(10.7e-6, rel=0.02)
    assert small.time_s == pytest.approx(21.92e-6) and small.algorithm == "measured"
    assert line.cost(2**29).time_s == pytest.approx(large.time_s, rel=0.03)


def test_the_serving_path_prices_its_all_reduces_as_collective_time():
    """comm_seconds (what cost_phases adds per collective op) equals collective_time."""
    dgx = load_system("dgx-h100")
    request = Request(64, 64, 1, DType.BF16, DType.BF16)
    graphs = shape_graphs(xpusim.model("llama-2-7b"), [request], 2, 1)
    table, nbytes = graphs.tables[0], graphs.collective_bytes[0]
    seconds = comm_seconds(table, dgx, 2, nbytes)
    assert table.collectives[0]
    for i, op in table.collectives[0]:
        want = collective_time(dgx, Collective(str(op.attr("collective"))), nbytes[0, i],
                               int(op.attr("size")), 2).time_s
        assert seconds[0, i] == pytest.approx(want)


def test_every_file_is_its_chips_and_read_by_a_system():
    chips = {path.stem for path in MEASURED_DIR.glob("*.toml")}
    assert chips == {load_system(s).chip.id for s in SYSTEMS}
    for path in MEASURED_DIR.glob("*.toml"):
        assert all(t["chips"] == [path.stem] for t in tomllib.loads(path.read_text())["table"])
        assert measured_curves(path.stem)
