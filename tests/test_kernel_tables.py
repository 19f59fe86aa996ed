"""Kernel efficiency tables (cost/kernel_tables.py): each loads with its source, its
fractions are physical, its curve interpolates without overshoot, and the cost model's
floor from it keeps the physics (at least the roofline; more bandwidth never slower)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpusim.compiler.memory_plan import Footprint, place
from xpusim.cost.kernel_tables import (
    GRID_LOG2,
    all_tables,
    interpolate_grid,
    kernel_table,
    roofline_seconds,
)
from xpusim.cost.op_table import op_table
from xpusim.cost.roofline import HardwareArrays, evaluate, kernel_floor_s
from xpusim.errors import UserError
from xpusim.hardware.catalog import load_chip
from xpusim.hardware.whatif import override
from xpusim.ir.dtypes import DType, parse_weight_format
from xpusim.ir.graph import Graph
from xpusim.ir.op import Op, OpKind
from xpusim.ir.tensor import Role, Tensor

TABLES = all_tables()


def test_every_table_loads_with_its_source_date_and_conditions():
    assert {t.name for t in TABLES} >= {"deepgemm-fp8-gemm-h800",
                                        "aiter-fp8-blockscale-gemm-mi300x",
                                        "aiter-fp8-blockscale-gemm-mi355x"}  # fmt: skip
    for t in TABLES:
        assert t.source and t.url.startswith("https://") and t.conditions
        assert len(t.date) == 10 and t.date[4] == "-"
        assert len(t.rows_m) >= 10  # the TRTLLM moe tables: 1-16 tokens at EP 4 and 8


def test_amd_chips_have_their_own_tables():
    """AMD's chips have tables of AMD kernels measured on AMD chips, not NVIDIA's scaled:
    AITER's block-scaled FP8 GEMMs price block-scaled matmuls; its BF16 GEMMs BF16, its
    FP8 GEMMs per-tensor FP8 on the MI355X and its INT8 GEMMs INT8 on the MI300X, where
    per-tensor FP8 keeps the chip's model (tests/test_amd_kernel_tables.py)."""
    from xpusim.cost.kernel_tables import tables_for_chip

    for chip_id in ("mi300x", "mi325x", "mi355x"):
        tables = tables_for_chip(chip_id, "gemm")
        assert {t.measured_on for t in tables} <= {"mi300x", "mi325x", "mi355x"}
        assert len(tables) == 3
        block = kernel_table(chip_id, DType.FP8, "fp8-block-scaled")
        assert block.scope == "fp8-block-scaled" and block.name.startswith("aiter-fp8-block")
        per_tensor = kernel_table(chip_id, DType.FP8)
        assert (per_tensor is None) == (chip_id != "mi355x")
        assert kernel_table(chip_id, DType.BF16).measured_on.startswith("mi")
    assert kernel_table("h200-sxm", DType.FP8).measured_on == "h100-sxm"
    assert kernel_table("h200-sxm", DType.FP8, "fp8-block-scaled").measured_on == "h100-sxm"
    assert kernel_table("b200", DType.FP8).measured_on == "b200"  # its own (gemm/b200.toml)
    assert kernel_table("l40s", DType.FP8) is None  # no table: the chip keeps its model


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.name)
def test_fractions_are_physical_and_the_fit_explains_the_rows(table):
    assert np.all((table.fractions > 0) & (table.fractions <= 1))
    nodes, values = table.curve()
    assert np.all((values > 0) & (values <= 1)) and np.all(np.diff(nodes) > 0)
    assert 0 <= table.fixed_s <= np.min(table.measured_s - table.roofline_s)
    predicted = table.predict_s(table.rows_m, table.roofline_s)
    assert np.all(predicted >= table.roofline_s)  # no row predicted past its roofline
    rms = np.sqrt(np.mean((predicted / table.measured_s - 1) ** 2))
    assert rms < 0.45, rms  # docs/cost.md states each table's rms


@settings(max_examples=80, deadline=None)
@given(table=st.sampled_from(TABLES), m=st.floats(1.0, 2.0**40))
def test_interpolation_stays_between_the_measured_neighbours(table, m):
    """Between two measured M the curve lies between their fractions (no overshoot), and
    the cost model's sampled grid gives the table's own interpolation at powers of two."""
    nodes, values = table.curve()
    x = np.log2(m)
    f = float(table.fraction_at(m))
    i = int(np.searchsorted(nodes, x))
    neighbours = values[max(i - 1, 0): i + 1]
    assert neighbours.min() - 1e-12 <= f <= neighbours.max() + 1e-12
    grid = table.fraction_at(2.0**GRID_LOG2)  # as gemm_fraction_grid samples it
    assert np.allclose(interpolate_grid(grid[None], np.array([2.0 ** np.floor(x)])),
                       table.fraction_at(2.0 ** np.floor(x)))  # fmt: skip
    between = interpolate_grid(grid[None], np.array([m]))[0]
    low, high = np.floor(x), min(np.floor(x) + 1, GRID_LOG2[-1])
    assert min(grid[int(low)], grid[int(high)]) - 1e-12 <= between
    assert between <= max(grid[int(low)], grid[int(high)]) + 1e-12


def test_a_row_faster_than_the_roofline_is_refused():
    chip = load_chip("h100-sxm")
    rows = np.array([[4096.0, 4096.0, 4096.0, 1.0]])  # 137 GFLOP in 1 us: 137 PFLOP/s
    with pytest.raises(UserError, match="at most 1"):
        roofline_seconds(rows, DType.FP8, chip, "test")


def _fp8_matmul(m: int, k: int, n: int, groups: int = 1, dtype: DType = DType.FP8,
                weights: str | None = None):
    """One matmul; `weights` names the weight's checkpoint layout (e.g. fp8-block)."""
    lead = (groups,) if groups > 1 else ()
    weight_format = parse_weight_format(weights) if weights else dtype
    ins = (Tensor("x", (*lead, m, k), dtype),
           Tensor("w", (*lead, k, n), weight_format, Role.WEIGHT))  # fmt: skip
    op = Op(OpKind.MATMUL, "mm", ins, (Tensor("y", (*lead, m, n), DType.BF16),),
            (("compute", dtype.value),))  # fmt: skip
    return op_table(Graph("one", [op]))


def test_each_gfx942_chip_prices_block_fp8_by_the_rows_tuned_on_it():
    """AITER tuned DeepSeek's block-FP8 GEMMs on an MI300 in April 2026 (PR #2881) and
    retuned seven shapes on an MI325X in July (PR #3951): each chip takes its own rows, no
    row judged by the other chip's roofline. DeepSeek-R1's fused q_a + kv_a projection at
    TP 8 and 4 tokens takes its April MI300X row (19.76 us; priced 12 us from the July
    rows as an MI300X's until the sixteenth session)."""
    from xpusim.cost.kernel_tables import tables_for_chip

    for chip_id in ("mi300x", "mi325x"):
        (block,) = [t for t in tables_for_chip(chip_id, "gemm") if t.scope == "fp8-block-scaled"]
        assert block.measured_on == chip_id and block.chips == (chip_id,)
    qkv_a = _fp8_matmul(4, 7168, 2112, weights="fp8-block")
    mi300x = load_chip("mi300x")
    floor_s = kernel_floor_s(qkv_a, HardwareArrays.build(mi300x, qkv_a))[0]
    assert floor_s == pytest.approx(19.7582e-6, rel=0.1)
    mi325x = load_chip("mi325x")
    assert kernel_floor_s(qkv_a, HardwareArrays.build(mi325x, qkv_a))[0] < 0.75 * floor_s


@pytest.mark.parametrize("chip_id", ["mi300x", "mi325x", "mi355x"])
def test_amd_blockscale_tables_price_block_scaled_fp8_only(chip_id):
    """A DeepSeek-style fp8-block weight runs AITER's block-scaled kernels, which the AMD
    tables measured; a per-tensor FP8 weight (Llama FP8, MLPerf) keeps the chip's model on
    the MI300X and MI325X (no AMD per-tensor FP8 table there) and takes AITER's FP8 GEMM
    table on the MI355X, a different table and so a different floor; stacked block-scaled
    weights outside a MoE layer are priced as per-tensor FP8."""
    hw_of = {w: (t, HardwareArrays.build(load_chip(chip_id), t))
             for w in ("fp8", "fp8-block") for t in [_fp8_matmul(64, 7168, 2112, weights=w)]}
    per_tensor, block = (kernel_floor_s(t, hw)[0] for t, hw in hw_of.values())
    assert block > 0.0 and per_tensor != block
    assert (per_tensor == 0.0) == (chip_id != "mi355x")
    grouped = _fp8_matmul(64, 7168, 2112, groups=8, weights="fp8-block")  # experts: fused MoE
    floor = kernel_floor_s(grouped, HardwareArrays.build(load_chip(chip_id), grouped))[0]
    assert (floor == 0.0) == (chip_id != "mi355x")
    table, hw = hw_of["fp8-block"]
    chip = load_chip(chip_id)
    placement = place(chip, Footprint(7168 * 2112, 0.0, 64 * (7168 + 2 * 2112)))
    assert evaluate(table, hw, placement).time_s[0] >= block


@settings(max_examples=60, deadline=None)
@given(chip_id=st.sampled_from(["h100-sxm", "h200-sxm"]),
       m=st.integers(1, 65536), k=st.integers(128, 16384), n=st.integers(128, 32768),
       factor=st.floats(1.0, 8.0))  # fmt: skip
def test_the_floor_keeps_the_physics(chip_id, m, k, n, factor):
    chip = load_chip(chip_id)
    table = _fp8_matmul(m, k, n)
    placement = place(chip, Footprint(k * n, 0.0, m * (k + 2 * n)))
    hw = HardwareArrays.build(chip, table)
    costs = evaluate(table, hw, placement)
    flops = 2.0 * m * k * n
    hbm = max(level.bandwidth_bytes_per_s.value for level in chip.memory
              if level.kind.holds_tensors)  # fmt: skip
    assert costs.time_s[0] >= flops / chip.peak(DType.FP8) * (1 - 1e-12)
    assert costs.time_s[0] >= (m * k + k * n + 2 * m * n) / hbm * (1 - 1e-9)
    assert costs.time_s[0] >= kernel_floor_s(table, hw)[0] > 0  # the table prices it
    # more bandwidth, in the chip's figures and in the table's roofline, is never slower
    faster = dataclasses.replace(hw, level_rate=hw.level_rate * factor,
                                 kernel_bw=hw.kernel_bw * factor)  # fmt: skip
    assert evaluate(table, faster, placement).time_s[0] <= costs.time_s[0] * (1 + 1e-12)


def test_a_what_if_of_more_bandwidth_is_never_slower_through_the_table():
    chip = load_chip("h100-sxm")
    wider = override(chip, "memory.hbm3.bandwidth_bytes_per_s", 6.7e12)
    table = _fp8_matmul(64, 7168, 18432)
    times = []
    for c in (chip, wider):
        hw = HardwareArrays.build(c, table)
        times.append(evaluate(table, hw, place(c, Footprint(7168 * 18432, 0.0, 1e7))).time_s[0])
    assert times[1] < times[0]


def test_the_table_prices_decode_gemms_and_leaves_other_formats_alone():
    """A 64-row FP8 GEMM against DeepSeek's 2112 x 7168 weight on an H100: DeepGEMM
    measured 206 TFLOPS (9.4 us); the datasheet roofline is 4.6 us. The table's floor puts
    the op within the fit's error of the measurement; a BF16 GEMM of the same shape has no
    table and keeps the chip's model."""
    chip = load_chip("h100-sxm")
    table = _fp8_matmul(64, 7168, 2112)
    hw = HardwareArrays.build(chip, table)
    measured_s = 2 * 64 * 2112 * 7168 / 206e12
    time_s = evaluate(table, hw, place(chip, Footprint(2112 * 7168, 0.0, 1e6))).time_s[0]
    assert 0.7 * measured_s < time_s < 1.4 * measured_s
    fp16 = _fp8_matmul(64, 2048, 7168, dtype=DType.FP16)
    assert not np.isfinite(HardwareArrays.build(chip, fp16).kernel_peak).any()


def test_grouped_gemms_count_all_rows_and_stacking_keeps_the_tables():
    """Grouped expert GEMMs read the curve at their rows over all groups; stacked chips
    (a sweep) keep each chip's own table."""
    table = _fp8_matmul(256, 7168, 4096, groups=4)
    chips = [load_chip(c) for c in ("h100-sxm", "h200-sxm", "b200", "l40s")]
    built = [HardwareArrays.build(c, table) for c in chips]
    stacked = HardwareArrays.stack(built)
    assert stacked.kernel_grid.shape == (4, 1, 1, len(GRID_LOG2))
    floors = kernel_floor_s(table, stacked)[:, 0, 0]
    alone = [kernel_floor_s(table, hw)[0] for hw in built]
    assert np.allclose(floors, alone) and alone[3] == 0.0  # the L40S has no FP8 table
    assert alone[2] > 0.0 and alone[2] != alone[0]  # the B200's own (gemm/b200.toml)
    picked = stacked.take_configs(np.array([1])).take(np.array([0]))
    assert np.allclose(kernel_floor_s(table, picked)[0, 0, 0], alone[1])


def test_the_chip_view_lists_the_tables_that_price_it():
    from xpusim.report.tables import chip_table

    def fields(chip_id: str) -> list[str]:
        return [c.replace("\n", "") for c in chip_table(load_chip(chip_id)).columns[0]._cells]

    assert "kernel_table.gemm.fp8" in fields("h200-sxm")
    assert "kernel_table.gemm.fp8-block-scaled" in fields("mi355x")
    assert {f"kernel_table.gemm.{s}" for s in ("bf16", "fp8", "fp8-block-scaled", "nvfp4")
            } <= set(fields("b200"))  # TensorRT-LLM's Linear, measured (gemm/b200.toml)
    assert {"kernel_table.moe.fp8.fp8", "kernel_table.moe.fp8.mxfp4",  # TensorRT-LLM's
            "kernel_table.moe.bf16.mxfp4"} <= set(fields("b200"))  # fused MoE, measured
    assert not any(f.startswith("kernel_table") for f in fields("tpu-v5e"))


def test_fractions_over_many_fixed_times_equal_one_at_a_time():
    """fit_fixed_s tries its fixed times as one array: each row must be the fractions that
    fixed time alone gives, to the bit (the fit, and so every table's curve, rests on it)."""
    from xpusim.cost.kernel_tables import _fractions, all_tables

    for table in all_tables():
        data = (table.rows_m, table.roofline_s, table.measured_s)
        tried_s = np.linspace(0.0, float(np.min(table.measured_s - table.roofline_s)), 101)
        nodes, many = _fractions(*data, tried_s)
        for t0, row in zip(tried_s, many, strict=True):
            one_nodes, one = _fractions(*data, t0)
            assert np.array_equal(nodes, one_nodes) and row.tobytes() == one.tobytes()


SHAPED = [(t, shape) for t in TABLES if t.kind in ("gemm", "moe")
          for shape in sorted(set(t.row_shapes))]  # fmt: skip


@settings(max_examples=120, deadline=None)
@given(case=st.sampled_from(SHAPED), m=st.floats(1.0, 2.0**20))
def test_a_shapes_own_rows_keep_the_guarantees(case, m):
    """A table's rows of one shape (KernelTable.of_shape) are a table of their own: every
    fraction at most 1, a fixed time the rows leave room for, and no M priced under the
    roofline; the rows are that shape's alone."""
    table, shape = case
    own = table.of_shape(shape)
    assert set(own.row_shapes) == {shape} and len(own.rows_m) == table.row_shapes.count(shape)
    assert 0 <= own.fixed_s <= np.min(own.measured_s - own.roofline_s)
    assert 0 < float(own.fraction_at(m)) <= 1
    assert np.all(own.predict_s(own.rows_m, own.roofline_s) >= own.roofline_s)


def test_an_op_far_from_every_shape_takes_the_pooled_curve():
    """An op whose shape is beyond SNAP_LOG2 of every row's keeps the whole table's curve;
    one within it takes the nearest shape's rows (DeepSeek-R1's q_a_proj, 1536 x 7168,
    prices on B200 NVFP4 at the measured 1536 x 8192 kernel)."""
    table = kernel_table("b200", DType.NVFP4)
    assert table.of_shape((1e6, 3.0)) is table and table.of_shape(None) is table
    assert set(table.of_shape((1536.0, 7168.0)).row_shapes) == {(1536.0, 8192.0)}


def test_deepseek_q_a_is_priced_at_its_own_kernels_time():
    """TensorRT-LLM's NVFP4 Linear of 128 x 1536 x 8192 on a B200 (gemm/b200.toml) takes
    21.5 us; the pooled curve of every shape priced DeepSeek-R1's q_a_proj (K 7168) at
    about 11 us. Priced at that shape's rows it is within 15% of the row, less the row's
    extra K (19 us)."""
    rows = {(r[0], r[1], r[2]): r[3] for r in _nvfp4_rows()}
    measured_us = rows[(128, 1536, 8192)]
    chip = load_chip("b200")
    ops = _fp8_matmul(128, 7168, 1536, dtype=DType.NVFP4)
    floor_us = kernel_floor_s(ops, HardwareArrays.build(chip, ops))[0] * 1e6
    assert 0.85 * measured_us * 7168 / 8192 < floor_us <= measured_us * 1.15


def _nvfp4_rows() -> list[list[float]]:
    import tomllib

    from xpusim.cost.kernel_tables import TABLES_DIR

    with (TABLES_DIR / "gemm" / "b200.toml").open("rb") as f:
        (entry,) = [e for e in tomllib.load(f)["table"]
                    if e["dtype"] == "nvfp4" and not e.get("kernel")]  # TensorRT-LLM's
    return entry["rows"]


@settings(max_examples=40, deadline=None)
@given(shape=st.sampled_from(sorted(set(kernel_table("b200", DType.NVFP4).row_shapes))),
       m=st.integers(1, 16384), factor=st.floats(1.0, 8.0))  # fmt: skip
def test_a_shape_priced_floor_keeps_the_physics(shape, m, factor):
    """At a shape the B200's NVFP4 table measured (priced by its own rows): at least both
    roofs, and more bandwidth is never slower."""
    n, k = int(shape[0]), int(shape[1])
    chip = load_chip("b200")
    ops = _fp8_matmul(m, k, n, dtype=DType.NVFP4)
    placement = place(chip, Footprint(k * n, 0.0, m * (k + 2 * n)))
    hw = HardwareArrays.build(chip, ops)
    time_s = evaluate(ops, hw, placement).time_s[0]
    assert time_s >= 2.0 * m * k * n / chip.peak(DType.NVFP4) * (1 - 1e-12)
    assert time_s >= kernel_floor_s(ops, hw)[0] > 0
    faster = dataclasses.replace(hw, level_rate=hw.level_rate * factor,
                                 kernel_bw=hw.kernel_bw * factor)  # fmt: skip
    assert evaluate(ops, faster, placement).time_s[0] <= time_s * (1 + 1e-12)


@pytest.mark.parametrize("shape", [(1536.0, 7168.0), (1e6, 3.0), None])
def test_the_memo_is_the_plain_fit(shape):
    """grid_of keeps each shape's fit; asked twice, it gives the fit of_shape does fresh."""
    table = kernel_table("b200", DType.NVFP4)
    own = table.of_shape(shape)
    for _ in range(2):
        grid, fixed_s = table.grid_of(shape)
        assert fixed_s == own.fixed_s
        assert np.array_equal(grid, own.fraction_at(2.0**GRID_LOG2, own.fixed_s))


def test_a_tables_curve_lists_its_sizes_whole_under_a_million():
    """`xpusim chip` lists each curve at its sizes: 1,024 tokens, not '1.02 k' (the one number
    style's three figures lose a power of two's last digits)."""
    curves = [t.describe()[1] for t in TABLES]
    assert any("1,024: " in c for c in curves)
    assert not any(" k: " in c for c in curves)
