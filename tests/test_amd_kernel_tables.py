"""AMD's own kernel tables (kernel_tables/amd-aiter.toml, moe/amd-aiter.toml; written by
benchmarks/amd_kernel_tables.py from ROCm/aiter's tuned configs): they load with their
source, every row is at or below its chip's datasheet roofline, they price the AMD chips'
BF16, per-tensor FP8 and expert matmuls (not NVIDIA's tables scaled), and a measured shape
costs what the table's model says of it, within the table's fit of the measurements."""

from __future__ import annotations

import re
import tomllib

import numpy as np
import pytest

from xpusim.compiler.memory_plan import Footprint, place
from xpusim.cost import kernel_tables
from xpusim.cost.kernel_tables import all_tables, kernel_table, roofline_seconds
from xpusim.cost.op_table import op_table
from xpusim.cost.roofline import HardwareArrays, evaluate, kernel_floor_s
from xpusim.errors import UserError
from xpusim.hardware.catalog import load_chip
from xpusim.ir.dtypes import DType, parse_weight_format
from xpusim.ir.graph import Graph
from xpusim.ir.op import Op, OpKind
from xpusim.ir.tensor import Role, Tensor

AITER = [t for t in all_tables() if t.engine == "aiter" and t.kind in ("gemm", "moe")]
"""The tables written from AITER's tuned-config CSVs (its MLA decode tables are
transcribed from its pull requests: test_the_mla_decode_tables_are_aiters_own)."""
AMD = ("mi300x", "mi325x", "mi355x")


def _entry(path: str, name: str) -> dict:
    with kernel_tables.TABLES_DIR.joinpath(path).open("rb") as f:
        (entry,) = [t for t in tomllib.load(f)["table"] if t["name"] == name]
    return entry


def test_the_aiter_tables_load_with_their_source_commit_and_chip():
    assert {t.name for t in AITER} == {
        "aiter-bf16-gemm-mi300x", "aiter-int8-gemm-mi300x", "aiter-bf16-gemm-mi355x",
        "aiter-fp8-gemm-mi355x", "aiter-fp8-blockscale-fmoe-mi300x", "aiter-bf16-fmoe-mi300x",
        "aiter-mxfp4-fmoe-mi355x", "aiter-fp8-blockscale-fmoe-mi355x", "aiter-bf16-fmoe-mi355x",
        "aiter-a16w4-fmoe-mi355x"}
    for t in AITER:
        assert re.match(r"https://github.com/ROCm/aiter/blob/[0-9a-f]{40}/aiter/configs/", t.url)
        assert t.source.startswith("ROCm/aiter") and "cu_num" in t.source
        assert t.measured_on in ("mi300x", "mi355x") and t.measured_on in t.chips
        assert set(t.chips) <= set(AMD) and len(t.rows_m) >= 10  # MI355X FP8 MoE: 13


@pytest.mark.parametrize("table", AITER, ids=lambda t: t.name)
def test_every_row_is_at_or_below_its_chips_roofline(table):
    """The loader's test, and what the rows mean: none reaches past the datasheet peak or
    bandwidth of the chip that measured it (benchmarks/amd_kernel_tables.py drops any that
    would, and names them)."""
    assert np.all(table.roofline_s <= table.measured_s)
    assert np.all(table.fractions > 0.01)  # no row is a unit slip (gpt-oss's router GEMM,
    # 2880 x 128, is the least: 0.014, a 10 us launch-bound kernel)


def test_a_row_faster_than_the_mi300x_roofline_is_refused():
    """The MI300X's 8192 x 8192 x 8192 INT8 GEMM cannot take under 420 us at its 2,614.9
    TOPS peak."""
    rows = np.array([[8192.0, 8192.0, 8192.0, 400.0]])
    with pytest.raises(UserError, match="at most 1"):
        roofline_seconds(rows, DType.INT8, load_chip("mi300x"), "test")


@pytest.mark.parametrize("chip_id", AMD)
def test_amd_chips_are_priced_by_amd_measurements(chip_id):
    """BF16 matmuls of an AMD chip are priced by AITER tables measured on an AMD chip of the
    same family (gfx942 for the MI300X and MI325X, gfx950 for the MI355X); on the MI355X
    FP8 too (AITER's FP8 GEMMs at Llama's shapes); on the MI300X INT8, and per-tensor FP8
    keeps the chip's model (AITER's gfx942 rows of 1-byte GEMMs are INT8 CK kernels, where
    vLLM's FP8 runs hipBLASLt); the block-scaled FP8 keeps its own AITER table."""
    family = "mi355x" if chip_id == "mi355x" else "mi300x"
    one_byte = DType.FP8 if family == "mi355x" else DType.INT8
    for dtype in (DType.BF16, one_byte):
        table = kernel_table(chip_id, dtype)
        assert table.engine == "aiter" and table.measured_on == family
    if family == "mi300x":
        assert kernel_table(chip_id, DType.FP8) is None
    assert kernel_table(chip_id, DType.FP8, "fp8-block-scaled").scope == "fp8-block-scaled"


def _matmul(m: int, k: int, n: int, dtype: DType, groups: int = 1):
    lead = (groups,) if groups > 1 else ()
    ins = (Tensor("x", (*lead, m, k), dtype), Tensor("w", (*lead, k, n), dtype, Role.WEIGHT))
    op = Op(OpKind.MATMUL, "mm", ins, (Tensor("y", (*lead, m, n), DType.BF16),),
            (("compute", dtype.value),))  # fmt: skip
    return op_table(Graph("one", [op]))


def _fit_range(table) -> tuple[float, float]:
    errors = table.predict_s(table.rows_m, table.roofline_s) / table.measured_s
    return float(errors.min()), float(errors.max())


@pytest.mark.parametrize(("name", "chip_id", "dtype", "row"), [
    ("aiter-int8-gemm-mi300x", "mi300x", DType.INT8, [1024, 20480, 8192]),  # 16 x 1280
    ("aiter-bf16-gemm-mi355x", "mi355x", DType.BF16, [4096, 57344, 8192]),
    ("aiter-fp8-gemm-mi355x", "mi355x", DType.FP8, [512, 8192, 28672]),
    ("aiter-bf16-gemm-mi300x", "mi300x", DType.BF16, [64, 5120, 2880]),
])  # fmt: skip
def test_a_measured_gemm_costs_its_measured_time(name, chip_id, dtype, row):
    """A matmul of a tabulated shape takes the table's model of it (fixed time + roofline
    / f(M)), so it lands as near the measured time as the table's fit does anywhere, and
    never under its roofline."""
    table = kernel_table(chip_id, dtype)
    assert table.name == name
    (micros,) = [r[3] for r in _entry("amd-aiter.toml", name)["rows"] if r[:3] == row]
    m, n, k = row
    ops = _matmul(m, k, n, dtype)
    chip = load_chip(chip_id)
    hw = HardwareArrays.build(chip, ops)
    floor_s = float(kernel_floor_s(ops, hw)[0])
    low, high = _fit_range(table)
    assert low * 0.98 <= floor_s / (micros * 1e-6) <= high * 1.02
    assert 0.6 < floor_s / (micros * 1e-6) < 1.5
    placement = place(chip, Footprint(float(k * n * dtype.itemsize), 0.0, 1e6))
    assert float(evaluate(ops, hw, placement).time_s[0]) >= floor_s


def test_a_measured_fused_moe_layer_costs_its_measured_time():
    """DeepSeek-V3's experts as AITER tuned them on an MI300X (33 local experts with the
    shared one, top 9, FP8 with block scales) at 1,024 tokens: 1.091 ms measured; the two
    expert GEMMs the layer builder emits at balanced routing take the moe table's model,
    within its fit."""
    table = kernel_table("mi300x", DType.FP8, "fp8-block", kind="moe")
    assert table.name == "aiter-fp8-blockscale-fmoe-mi300x"
    tokens, hidden, inter, topk, experts = 1024, 7168, 2048, 9, 33
    (micros,) = [r[-1] for r in _entry("moe/amd-aiter.toml", table.name)["rows"]
                 if r[:-1] == [tokens, hidden, inter, topk, experts, 1, 1]]  # fmt: skip
    assert micros == pytest.approx(1091.04, rel=1e-5)
    rows = tokens * topk // experts
    ops = []
    for name, k, n, split in (("gate_up", hidden, 2 * inter, "expert_column"),
                              ("down", inter, hidden, "expert_row")):  # fmt: skip
        ins = (Tensor(f"{name}.x", (experts, rows, k), DType.FP8),
               Tensor(f"{name}.w", (experts, k, n), parse_weight_format("fp8-block"),
                      Role.WEIGHT))  # fmt: skip
        ops.append(Op(OpKind.MATMUL, name, ins,
                      (Tensor(f"{name}.y", (experts, rows, n), DType.FP8),),
                      (("compute", "fp8"), ("tp", split))))  # fmt: skip
    layer = op_table(Graph("moe", ops))
    hw = HardwareArrays.build(load_chip("mi300x"), layer)
    floor_s = float(kernel_floor_s(layer, hw).sum())
    low, high = _fit_range(table)
    assert low * 0.97 <= floor_s / (micros * 1e-6) <= high * 1.03


def test_nvidia_chips_keep_nvidia_tables():
    """The AMD tables price AMD chips only."""
    for chip_id in ("h100-sxm", "h200-sxm", "b200"):
        for dtype in (DType.BF16, DType.FP8):
            table = kernel_table(chip_id, dtype)
            assert table is None or table.engine != "aiter"


def test_deepseeks_tp8_experts_take_glm_5_1s_measured_rows_on_gfx942(monkeypatch):
    """AITER timed GLM-5.1's fused MoE on gfx942 (hidden 6144, 256 routed experts of inter
    256 with the shared one fused: top 9 of 257), not DeepSeek-R1's at TP 8 (hidden 7168,
    top 8 of 256): DeepSeek's layer takes the nearest measured shape's rows within a
    quarter of a doubling (SNAP_LOG2), their fixed time and fractions, not the pooled curve
    of every shape (under the envelope of DeepSeek's own roofline: _moe_envelope), and an
    op two doublings from any row keeps the pooled curve."""
    table = kernel_table("mi300x", DType.FP8, "fp8-block", kind="moe")
    deepseek, glm = (7168.0, 256.0, 8.0, 256.0, 1.0), (6144.0, 256.0, 9.0, 257.0, 1.0)
    assert deepseek not in table.row_shapes and glm in table.row_shapes
    assert set(table.of_shape(deepseek).row_shapes) == {glm}
    grid, fixed_s, _, _, _ = kernel_tables.fraction_grid(
        "mi325x", DType.FP8, (("moe", "fp8-block"),), (("moe", deepseek),))  # fmt: skip
    rows = table.of_shape(glm)  # GLM-5.1's fractions, on DeepSeek's roofline's envelope
    curve = rows.fraction_at(2.0**kernel_tables.GRID_LOG2, rows.fixed_s)
    mine = kernel_tables._moe_envelope(curve, rows.fixed_s, table.moe_roofline_s(deepseek),
                                       rows.rows_m)  # fmt: skip
    assert np.array_equal(grid, mine) and fixed_s == rows.fixed_s / 2
    assert table.of_shape((7168.0, 1024.0, 8.0, 256.0, 1.0)) is table
    monkeypatch.setitem(kernel_tables.SNAP_LOG2, "moe", 0.0)
    assert table.of_shape(deepseek) is table
