"""Torus collectives by the scaling book's rule, one rule for `run`'s plans and the layouts.

On a wrapped axis of d chips a collective takes d // 2 hops over 2 links; on an axis without
wrap-around (a line) d - 1 hops over 1 link (Austin, Pope et al., "How to Scale Your Model",
sharding.md and tpus.md). Which axes of a slice wrap: TPU v4/v5p slices of whole 4x4x4
cubes all, smaller ones none; TPU v5e/v6e only axes of the full 16; a Trainium2 instance's
4x4 torus both. Switch and full-mesh systems are costed as before.
"""

from __future__ import annotations

import pytest

from xpusim.compiler import torus_layouts
from xpusim.compiler.torus_layouts import dispatch_s, layout_cost
from xpusim.cost.collectives import Collective, collective_line, collective_time, group_axes
from xpusim.hardware.catalog import load_chip
from xpusim.hardware.system import Axis, load_system
from xpusim.workloads.resolve import load_model

MB = 1e6


@pytest.mark.parametrize(("system_id", "chips", "axes"), [
    ("tpu-v4-pod", 64, ((4, True), (4, True), (4, True))),  # one whole cube
    ("tpu-v4-pod", 128, ((4, True), (4, True), (8, True))),  # two cubes
    ("tpu-v4-pod", 32, ((2, False), (4, False), (4, False))),  # half a cube: no wraps
    ("tpu-v5p-pod", 16, ((2, False), (2, False), (4, False))),
    ("tpu-v6e-pod", 8, ((2, False), (4, False))),  # v6e-8: no axis of 16
    ("tpu-v5e-pod", 128, ((8, False), (16, True))),  # "8x16 will have a wraparound"
    ("tpu-v6e-pod", 256, ((16, True), (16, True))),
    ("trn2-instance", 16, ((4, True), (4, True))),
])  # fmt: skip
def test_a_slice_knows_which_of_its_axes_wrap(system_id, chips, axes):
    level = load_system(system_id).with_chips(chips).levels[0]
    assert level.axes == tuple(Axis(d, w) for d, w in axes)


def test_a_wrapped_axis_takes_half_its_hops_a_line_all_of_them():
    """An all-gather over 16 chips of a 4x4x4 cube: 2 + 2 hops over 4 links; over 16 chips
    of half a cube (2x4x4, no wrap-arounds) the 4 x 4 group are lines: 3 + 3 hops over 2."""
    s, link, a = 64 * MB, 45e9, 1e-6
    cube = load_system("tpu-v4-pod").with_chips(64)
    got = collective_time(cube, Collective.ALL_GATHER, s, 16)
    assert got.algorithm == "torus 2D (4x4)"
    assert got.time_s == pytest.approx(15 / 16 * s / (4 * link) + 4 * a)
    half = load_system("tpu-v4-pod").with_chips(32)
    assert group_axes(half.levels[0], 16) == (Axis(2, False), Axis(4, False), Axis(2, False))
    got = collective_time(half, Collective.ALL_REDUCE, s, 32)
    assert got.algorithm == "torus 3D (2x4x4)"
    assert got.time_s == pytest.approx(2 * 31 / 32 * s / (3 * link) + 2 * (1 + 3 + 3) * a)


def test_a_v6e_8_slice_has_lines_so_its_bytes_take_twice_as_long():
    """TPU v6e-8 (2 x 4, no axis of 16): the scaling book's "no wraparounds ... typically
    doubles the time of most communication": 1 link an axis, 1 + 3 hops."""
    s, link, a = 64 * MB, 90e9, 1e-6
    system = load_system("tpu-v6e-pod").with_chips(8)
    got = collective_time(system, Collective.ALL_REDUCE, s, 8)
    assert got.algorithm == "torus 2D (2x4)"
    assert got.time_s == pytest.approx(2 * 7 / 8 * s / (2 * link) + 2 * 4 * a)


def test_a_torus_all_to_all_is_forwarded_along_the_rings():
    """Over a 4x4x4 cube: 6 hops of latency (not 63 pairwise steps), its bytes the rings'
    mean distance, 4/4 an axis over the 6 links."""
    s, link, a = 8 * MB, 45e9, 1e-6
    cube = load_system("tpu-v4-pod").with_chips(64)
    got = collective_time(cube, Collective.ALL_TO_ALL, s, 64)
    assert got.algorithm == "torus 3D (4x4x4)"
    assert got.time_s == pytest.approx(63 / 64 * s / (6 * link) * 3 + 6 * a)
    # a Trainium2 instance's 4x4 torus: 2 + 2 hops of its 1 us
    trn = load_system("trn2-instance")
    assert collective_line(trn, Collective.ALL_TO_ALL, 16).fixed_s == pytest.approx(4e-6)
    assert collective_line(trn, Collective.ALL_REDUCE, 16).fixed_s == pytest.approx(8e-6)


def test_switch_and_full_mesh_systems_are_costed_as_before():
    """NVLink (a switch) and Infinity Fabric (a full mesh): pairwise all-to-all and the
    ring/tree of the standard alpha-beta costs, by hand (guards against the torus rule
    leaking; check_outputs showed them byte-identical)."""
    s = 8 * MB
    dgx = load_system("dgx-h100")
    b, a = 18 * 25e9, 2e-6
    got = collective_time(dgx, Collective.ALL_TO_ALL, s, 8)
    assert got.algorithm == "pairwise" and got.time_s == pytest.approx(7 / 8 * s / b + 7 * a)
    got = collective_time(dgx, Collective.ALL_REDUCE, s, 6)
    assert got.algorithm == "ring" and got.time_s == pytest.approx(2 * 5 / 6 * s / b + 10 * a)
    mi = load_system("mi300x-platform")
    b, a = 7 * 64e9, 2e-6
    got = collective_time(mi, Collective.ALL_TO_ALL, s, 8)
    assert got.algorithm == "pairwise" and got.time_s == pytest.approx(7 / 8 * s / b + 7 * a)
    got = collective_time(mi, Collective.ALL_GATHER, s, 8)
    assert got.algorithm == "tree" and got.time_s == pytest.approx(7 / 8 * s / b + 3 * a)


@pytest.mark.parametrize(("system_id", "chips", "group"), [
    ("tpu-v4-pod", 64, 64), ("tpu-v4-pod", 64, 16), ("tpu-v4-pod", 32, 32),
    ("tpu-v6e-pod", 16, 16), ("tpu-v6e-pod", 8, 8), ("trn2-instance", 16, 16),
])  # fmt: skip
def test_the_layouts_and_the_plans_count_the_same_hops_and_links(system_id, chips, group):
    """One rule: a layout's collective over a group's axes has the hops and links
    cost/collectives.py gives an all-gather over the same group, its all-to-all those of
    an all-to-all."""
    system = load_system(system_id).with_chips(chips)
    level = system.levels[0]
    line = collective_line(system, Collective.ALL_GATHER, group)
    one = torus_layouts.Collective(1.0, group_axes(level, group))
    assert one.latency_s(level.latency_s.value) - dispatch_s() == pytest.approx(line.fixed_s)
    link = level.bandwidth_bytes_per_s.value
    assert one.time_s(link) == pytest.approx(line.s_per_byte * group / (group - 1))
    # an all-to-all: the same hops, its bytes over the rings' mean distance in both
    a2a = collective_line(system, Collective.ALL_TO_ALL, group)
    queries = torus_layouts.Collective(1.0, group_axes(level, group), all_to_all=True)
    assert queries.hops * level.latency_s.value == pytest.approx(a2a.fixed_s)
    assert queries.time_s(link) == pytest.approx(a2a.s_per_byte * group / (group - 1))


def test_a_layout_on_v6e_lines_pays_their_hops():
    """PaLM-540B's ws-1d over 16 TPU v6e (4 x 4, no wrap-arounds): each of its two
    collectives a layer takes 3 + 3 hops, not the 2 + 2 of a wrapped 4 x 4."""
    palm, v6e = load_model("palm-540b"), load_chip("tpu-v6e")
    torus = load_system("tpu-v6e-pod").with_chips(16).levels[0]
    cost = layout_cost(palm, v6e, 16, "ws-1d", 1, 1, 128, 1.0, torus=torus)
    hop = torus.latency_s.value
    assert cost.hop_s == pytest.approx(palm.num_layers * 2 * (dispatch_s() + 6 * hop))


def test_a_group_lies_on_whole_axes_where_they_make_it():
    """PaLM's 12-way tensor parallelism on a 16x16x12 pod runs along the pod's axis of 12
    (wrapped: 6 hops a pass over 2 links), not on 12 chips of an axis of 16 (a line: 11 hops
    over 1 link); 8 chips of a 4x4x8 slice keep 4 x 2 (3 links, 3 hops) over the axis of 8
    (2 links, 4 hops)."""
    palm = load_system("tpu-v4-palm")
    assert group_axes(palm.levels[0], 12) == (Axis(12, True),)
    line = collective_line(palm, Collective.ALL_REDUCE, 12)
    assert line.algorithm == "ring" and line.fixed_s == pytest.approx(2 * 6 * 1e-6)
    assert line.s_per_byte == pytest.approx(2 * 11 / 12 / (2 * 45e9))
    slice_128 = load_system("tpu-v4-pod").with_chips(128).levels[0]
    assert group_axes(slice_128, 8) == (Axis(4, True), Axis(2, False))
