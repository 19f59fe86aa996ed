"""Physics the cost model must obey for any op on any chip (property tests).

Floors: no op runs faster than its FLOPs at peak or its bytes at any level's bandwidth.
Power: no op, hence no workload, averages more than the chip's TDP.
Monotonicity: more bandwidth or more peak never makes anything slower.
Overlap: a matmul's (compute^p + memory^p)^(1/p) keeps all three for any fitted p >= 1.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xpusim.compiler.memory_plan import Footprint, place
from xpusim.cost.op_table import op_table
from xpusim.cost.pe_grid import operand_rereads
from xpusim.cost.roofline import HardwareArrays, evaluate, level_bytes
from xpusim.ir.graph import Graph
from xpusim.ir.op import Op, OpKind
from xpusim.ir.tensor import Role, Tensor

dims = st.integers(min_value=1, max_value=8192)
small = st.integers(min_value=1, max_value=64)


@st.composite
def random_op(draw, dtype):
    kind = draw(st.sampled_from([OpKind.MATMUL, OpKind.ATTENTION, OpKind.ELEMENTWISE, OpKind.NORM,
                                 OpKind.LINEAR_ATTENTION]))
    weight_role = draw(st.sampled_from([Role.WEIGHT, Role.ACTIVATION]))
    if kind is OpKind.MATMUL:
        m, k, n = draw(dims), draw(dims), draw(dims)
        ins = (Tensor("x", (m, k), dtype), Tensor("w", (k, n), dtype, weight_role))
        return Op(kind, "mm", ins, (Tensor("y", (m, n), dtype),), (("compute", dtype.value),))
    if kind is OpKind.ATTENTION:
        b, kvh, group, d = draw(small), draw(st.integers(1, 16)), draw(st.integers(1, 8)), 64
        kv = draw(dims)
        q = draw(st.integers(1, kv))
        cache = Tensor("k", (b, kv, kvh, d), dtype, Role.KV_CACHE)
        ins = (Tensor("q", (b, q, kvh * group, d), dtype), cache, dataclasses.replace(cache))
        outs = (Tensor("o", (b, q, kvh * group * d), dtype),)
        return Op(kind, "attn", ins, outs, (("causal", draw(st.booleans())),))
    if kind is OpKind.LINEAR_ATTENTION:
        b, heads, d_k, d_v, tokens = draw(small), draw(small), 128, draw(small), draw(dims)
        state = Tensor("s", (b, heads, d_k, d_v), dtype, Role.KV_CACHE)
        ins = (*(Tensor(n, (b, tokens, heads, w), dtype) for n, w in (("q", d_k), ("k", d_k),
                                                                       ("v", d_v))), state)
        outs = (Tensor("o", (b, tokens, heads * d_v), dtype), dataclasses.replace(state))
        return Op(kind, "linear", ins, outs, (("chunk", 64), ("delta", draw(st.booleans()))))
    shape = (draw(small), draw(dims))
    flops = draw(st.integers(1, 10))
    return Op(kind, "vec", (Tensor("a", shape, dtype),), (Tensor("b", shape, dtype),),
              (("flops_per_element", flops),))  # fmt: skip


@st.composite
def workload(draw, chip):
    """1-4 random ops on `chip`: their op table, the chip's arrays for it, a placement."""
    dtype = draw(st.sampled_from(sorted(chip.peak_ops_per_s)))
    graph = Graph("random", [draw(random_op(dtype)) for _ in range(draw(st.integers(1, 4)))])
    capacity = chip.capacity_bytes
    fractions = [draw(st.floats(0, 1.5)) for _ in range(3)]
    footprint = Footprint(*(f * capacity for f in fractions))
    table = op_table(graph)
    return table, HardwareArrays.build(chip, table), place(chip, footprint)


PROPERTY = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip


@PROPERTY
@given(data=st.data())
def test_time_is_at_least_every_physics_floor(any_chip, data):
    table, hw, placement = data.draw(workload(any_chip))
    costs = evaluate(table, hw, placement)
    peaks = np.array([any_chip.peak(d) for d in table.dtypes])
    floor_compute = (
        table.matrix_flops / peaks + table.vector_flops / any_chip.vector_ops_per_s.value
    )
    assert np.all(costs.time_s >= floor_compute * (1 - 1e-12))
    bandwidth = np.array([[m.bandwidth_bytes_per_s.value] for m in any_chip.memory])
    assert np.all(costs.time_s >= (costs.level_bytes / bandwidth).max(axis=0) * (1 - 1e-12))
    # every byte is charged to exactly one level: what the op reads, and a PE grid's
    # re-reads of its operands, which are never negative
    moved = operand_rereads(table, hw.unit.block_rows, hw.unit.block_cols)
    moved = table.role_bytes if moved is None else moved
    assert np.all(moved >= table.role_bytes)
    assert np.allclose(costs.level_bytes.sum(axis=0), moved.sum(axis=0))


@PROPERTY
@given(data=st.data())
def test_average_power_never_exceeds_tdp(any_chip, data):
    table, hw, placement = data.draw(workload(any_chip))
    costs = evaluate(table, hw, placement)
    power = costs.energy_j / costs.time_s
    assert np.all(power <= any_chip.tdp_w.value * (1 + 1e-9)), power.max()
    assert np.all(power >= any_chip.energy.static_power_w.value * (1 - 1e-9))


@PROPERTY
@given(data=st.data(), factor=st.floats(1.0, 16.0))
def test_more_bandwidth_or_peak_is_never_slower(any_chip, data, factor):
    table, hw, placement = data.draw(workload(any_chip))
    base = evaluate(table, hw, placement).time_s
    faster_memory = dataclasses.replace(hw, level_rate=hw.level_rate * factor)
    faster_compute = dataclasses.replace(
        hw, matrix_rate=hw.matrix_rate * factor, vector_rate=hw.vector_rate * factor
    )
    assert np.all(evaluate(table, faster_memory, placement).time_s <= base)
    assert np.all(evaluate(table, faster_compute, placement).time_s <= base)
    # nor costs more energy: the bytes' energy is the same, the static power's is shorter
    base_j = evaluate(table, hw, placement).energy_j
    assert np.all(evaluate(table, faster_memory, placement).energy_j <= base_j * (1 + 1e-12))


def test_level_bytes_follow_placement(llama7b):
    from xpusim.hardware.catalog import load_chip
    from xpusim.ir.dtypes import DType
    from xpusim.workloads.transformer import StepShape, build_step

    chip = load_chip("h100-sxm")
    table = op_table(build_step(llama7b, StepShape(1, 1, 64), DType.FP16))
    placement = place(chip, Footprint(13.5e9, 1e8, 1e7))
    by_level = level_bytes(table, placement, len(chip.memory))
    hbm = [m.name for m in chip.memory].index("hbm3")
    weights = table.role_bytes[0]
    assert np.all(by_level[hbm] >= weights)  # weights stream from HBM


@PROPERTY
@given(data=st.data(), p=st.floats(1.0, 64.0), factor=st.floats(1.0, 16.0))
def test_any_overlap_exponent_keeps_the_physics(any_chip, data, p, factor):
    """Whatever p a calibration fits for matmuls, each op takes at least max(compute,
    memory) and at most their sum (plus overhead) or the time the power limit sets, more
    bandwidth never slows it, and the average power stays within the TDP."""
    table, built, placement = data.draw(workload(any_chip))
    hw = dataclasses.replace(built, overlap_p=np.full_like(built.overlap_p, p))  # every op
    costs = evaluate(table, hw, placement)
    roof = np.maximum(costs.compute_s, costs.memory_s)
    assert np.all(costs.time_s >= (roof + costs.overhead_s) * (1 - 1e-12))
    summed = costs.compute_s + costs.memory_s + costs.overhead_s
    assert np.all(costs.time_s <= np.maximum(summed, costs.power_s) * (1 + 1e-12))
    faster = dataclasses.replace(hw, level_rate=hw.level_rate * factor)
    assert np.all(evaluate(table, faster, placement).time_s <= costs.time_s * (1 + 1e-12))
    assert np.all(costs.energy_j / costs.time_s <= any_chip.tdp_w.value * (1 + 1e-9))


def _one_matmul(m: int, k: int, n: int):
    from xpusim.ir.dtypes import DType

    ins = (Tensor("x", (m, k), DType.BF16), Tensor("w", (k, n), DType.BF16, Role.WEIGHT))
    op = Op(OpKind.MATMUL, "mm", ins, (Tensor("y", (m, n), DType.BF16),), (("compute", "bf16"),))
    return op_table(Graph("one", [op]))


def test_a_matmul_at_the_ridge_pays_for_imperfect_overlap():
    """On the H100 (fitted p ~ 2) a 128-row GEMM against a 4096 x 11008 weight, where
    compute and weight streaming take about as long, costs more than the sharp roofline;
    on a chip with no calibration and no assumed p (TPU v4) it costs exactly the roofline."""
    from xpusim.hardware.catalog import load_chip

    table = _one_matmul(256, 4096, 11008)
    for chip_id, finite in (("h100-sxm", True), ("tpu-v4", False)):
        chip = load_chip(chip_id)
        placement = place(chip, Footprint(1e8, 0.0, 1e7))
        hw = HardwareArrays.build(chip, table)
        costs = evaluate(table, hw, placement)
        roof = np.maximum(costs.compute_s, costs.memory_s) + costs.overhead_s
        assert bool(np.isfinite(hw.overlap_p).all()) is finite
        if finite:
            assert 0.5 < (costs.compute_s / costs.memory_s)[0] < 2  # near the ridge
            assert np.all(costs.time_s > roof * 1.2)
        else:
            assert np.array_equal(costs.time_s, roof)


def test_stacked_chips_keep_their_own_overlap():
    """HardwareArrays.stack carries each chip's per-op p: a stacked evaluation equals the
    chips evaluated one by one, and take/take_configs keep p aligned with the ops."""
    from xpusim.cost.roofline import largest_activations, placement_onehot
    from xpusim.hardware.catalog import load_chip

    table = _one_matmul(128, 4096, 4096)
    chips = [load_chip(c) for c in ("h100-sxm", "tpu-v4", "a100-sxm-80gb")]
    placements = [place(c, Footprint(3.4e7, 0.0, 1e6)) for c in chips]
    alone = [evaluate(table, HardwareArrays.build(c, table), p).time_s
             for c, p in zip(chips, placements, strict=True)]  # fmt: skip
    stacked = HardwareArrays.stack([HardwareArrays.build(c, table) for c in chips])
    n_levels = stacked.level_rate.shape[-2]
    onehot = placement_onehot(largest_activations(table), placements, n_levels)[:, None]
    together = evaluate(table, stacked, onehot).time_s
    assert np.allclose(together[:, 0], np.stack(alone))
    picked = stacked.take_configs(np.array([2, 0])).take(np.array([0]))
    assert np.array_equal(picked.overlap_p[:, 0], stacked.overlap_p[[2, 0], 0][:, :1])


def test_a_figure_takes_a_what_if_then_a_fit_then_the_chip_file():
    from xpusim.cost.roofline import FigureSources
    from xpusim.hardware.spec import Figure

    chip_file = Figure(value=0.7, source="datasheet")
    what_if = Figure(value=0.5, source="what-if")
    assert FigureSources.of(what_if, 0.9, 0.0).value == 0.5
    assert FigureSources.of(chip_file, 0.9, 0.0).value == 0.9
    assert FigureSources.of(chip_file, None, 0.0).value == 0.7
    assert FigureSources.of(chip_file, 0.0, 0.0).value == 0.7  # a fitted 0 is no fit
    assert FigureSources.of(None, None, 3.0).value == 3.0
