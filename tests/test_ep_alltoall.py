"""The measured DeepEP floor under an MoE layer's dispatch and combine (cost/ep_alltoall.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xpusim
from xpusim.compiler.partition import Plan, partition
from xpusim.cost import ep_alltoall
from xpusim.cost.collectives import Collective, collective_algorithms, collective_line
from xpusim.cost.op_table import op_table
from xpusim.errors import UserError
from xpusim.hardware.system import load_system
from xpusim.ir.dtypes import DType
from xpusim.workloads.transformer import StepShape, build_step


@pytest.fixture(scope="module")
def deepseek_rank():
    cfg = xpusim.model("deepseek-v3")
    graph = build_step(cfg, StepShape(64, 1, 2048), DType.BF16)  # 8 decode tokens a chip
    return partition(graph, Plan(tp=8, ep=8, dp_attention=True))


def _a2a(rank, system, span=8) -> dict[str, dict]:
    table = op_table(rank)
    return {c["op"].rsplit(".", 2)[-2]: c for c in collective_algorithms(table, system, span)
            if c["collective"] == "all_to_all"}  # fmt: skip


def test_partition_marks_dispatch_and_combine(deepseek_rank):
    steps = {op.attr("step") for op in deepseek_rank.ops if op.attr("collective") == "all_to_all"}
    assert steps == {"dispatch", "combine"}


@pytest.mark.parametrize("system_id", ["dgx-b200", "hgx-h200", "dgx-h100", "hgx-b300"])
def test_dispatch_and_combine_cost_at_least_the_measured_kernels(deepseek_rank, system_id):
    """At 8 tokens a rank the op costs at least the links' time and the measured kernels';
    on Blackwell (DeepEP's ~20 us before the first byte against the links' 14) the floor
    is what prices it, on Hopper at BF16 the links' line is above the floor already."""
    system = load_system(system_id)
    line = collective_line(system, Collective.ALL_TO_ALL, 8)
    found = _a2a(deepseek_rank, system)
    for step in ("gate_up", "down"):
        c = found[step]
        measured = ep_alltoall.measured_line(system.chip_id, 8, 7168, 8,
                                             "dispatch" if step == "gate_up" else "combine")
        assert c["time_s"] >= line.cost(c["bytes"]).time_s
        assert c["time_s"] >= measured.fixed_s + measured.s_per_token * 8 - 1e-12
        assert ("DeepEP" in c["algorithm"]) == (system.chip_id in ("b200", "b300"))


def test_floor_stays_under_every_measured_row():
    """The floor line is a lower supporting line: no measured DeepEP row is faster."""
    for t in ep_alltoall.tables():
        for step in ep_alltoall.STEPS:
            line = ep_alltoall.measured_line(t.chip, t.ranks, t.hidden, t.topk, step)
            assert np.all(line.fixed_s + line.s_per_token * t.tokens <= t.seconds[step] + 1e-12)


def test_other_groups_keep_the_links_model():
    """A 4-GPU expert group was not measured: its all-to-all is the links' line."""
    cfg = xpusim.model("deepseek-v3")
    rank = partition(build_step(cfg, StepShape(16, 1, 2048), DType.BF16),
                     Plan(tp=4, ep=4, dp_attention=True))  # fmt: skip
    system = load_system("dgx-b200")
    for c in _a2a(rank, system, 4).values():
        assert "DeepEP" not in c["algorithm"]
    line = collective_line(system, Collective.ALL_TO_ALL, 4)
    assert all(c["time_s"] == pytest.approx(line.cost(c["bytes"]).time_s)
               for c in _a2a(rank, system, 4).values())  # fmt: skip


def test_chips_without_tables_keep_the_links_model(deepseek_rank):
    system = load_system("mi300x-platform")
    line = collective_line(system, Collective.ALL_TO_ALL, 8)
    for c in _a2a(deepseek_rank, system).values():
        assert c["time_s"] == pytest.approx(line.cost(c["bytes"]).time_s)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(1, 1e5), min_size=3, max_size=12, unique=True),
       st.floats(1e-6, 1e-4), st.floats(0, 1e-6))  # fmt: skip
def test_supporting_line_lies_under_its_points(tokens, fixed, slope):
    n = np.array(sorted(tokens))
    noise = np.linspace(0, 3e-6, len(n))[::-1]
    t = fixed + slope * n + noise
    line = ep_alltoall.supporting_line(n, t)
    assert np.all(line.fixed_s + line.s_per_token * n <= t + 1e-15)
    assert line.s_per_token >= 0


def test_a_row_faster_than_the_links_is_refused():
    entry = {"name": "x", "mode": "ll", "chip": "b200", "system": "dgx-b200", "ranks": 8,
             "hidden": 7168, "topk": 8, "experts": 256, "source": "s", "url": "u",
             "date": "d", "conditions": "c", "rows": [[65536, 1.0, 1.0]]}  # fmt: skip
    with pytest.raises(UserError, match="faster than"):
        ep_alltoall._check(entry, "t", ep_alltoall._link_bytes_per_s("dgx-b200"))
