"""aiconfigurator's measured TensorRT-LLM GEMM tables (cost/kernel_tables/gemm/<chip>.toml,
written by benchmarks/gemm_kernel_tables.py): each chip's own file loads and prices only
that chip, every row is within its roofline, a GEMM at a measured shape costs what the
table's model says of that row, and the floor keeps the physics on Blackwell."""

from __future__ import annotations

import dataclasses
import tomllib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpusim.compiler.memory_plan import Footprint, place
from xpusim.cost import kernel_tables
from xpusim.cost.calibration import dram_bytes_per_s
from xpusim.cost.kernel_tables import chip_tables, kernel_table, roofline_seconds
from xpusim.cost.op_table import BLOCK_SCALED_FP8, op_table
from xpusim.cost.roofline import HardwareArrays, evaluate, kernel_floor_s
from xpusim.errors import UserError
from xpusim.hardware.catalog import load_chip
from xpusim.ir.dtypes import DType, parse_weight_format
from xpusim.ir.graph import Graph
from xpusim.ir.op import Op, OpKind
from xpusim.ir.tensor import Role, Tensor

BLACKWELL = ("b200", "b300", "gb200")
SCOPES = {"bf16": DType.BF16, "fp8": DType.FP8, BLOCK_SCALED_FP8: DType.FP8,
          "nvfp4": DType.NVFP4}  # fmt: skip
TABLES = [t for chip in (*BLACKWELL, "h100-sxm", "h200-sxm") for t in chip_tables("gemm", chip)]


def test_each_chip_has_its_own_tables_of_every_format():
    """Blackwell chips get BF16, per-tensor FP8, block-scaled FP8 and NVFP4 tables measured
    on themselves; H100 and H200 BF16 (their FP8 stays DeepGEMM's)."""
    for chip_id in BLACKWELL:
        tables = chip_tables("gemm", chip_id)
        assert {t.scope for t in tables} == set(SCOPES)
        for scope, dtype in SCOPES.items():
            table = kernel_table(chip_id, dtype, scope)
            assert table.measured_on == chip_id and table.chips == (chip_id,)
            assert "aiconfigurator" in table.source and table.engine.startswith("trtllm")
    for chip_id in ("h100-sxm", "h200-sxm"):
        assert kernel_table(chip_id, DType.BF16).measured_on == chip_id
        assert kernel_table(chip_id, DType.FP8).name == "deepgemm-fp8-gemm-h800"
    assert chip_tables("gemm", "l40s") == () and chip_tables("moe", "b200") == ()
    assert {t.name for t in TABLES} <= {t.name for t in kernel_tables.all_tables()}


def test_a_chip_file_holding_another_chips_table_is_refused(tmp_path, monkeypatch):
    text = (kernel_tables.TABLES_DIR / "gemm" / "h100-sxm.toml").read_text()
    (tmp_path / "gemm").mkdir()
    (tmp_path / "gemm" / "h200-sxm.toml").write_text(text)  # H100's tables in H200's file
    monkeypatch.setattr(kernel_tables, "TABLES_DIR", tmp_path)
    kernel_tables.chip_tables.cache_clear()
    try:
        with pytest.raises(UserError, match="h200-sxm only"):
            chip_tables("gemm", "h200-sxm")
    finally:
        kernel_tables.chip_tables.cache_clear()


@pytest.mark.parametrize("chip_id", [*BLACKWELL, "h100-sxm", "h200-sxm"])
def test_every_row_is_within_its_chips_roofline(chip_id):
    """Each committed row, from the file: 2MNK / peak and the A, B and BF16 C bytes / DRAM
    bandwidth on the catalog's figures are each at most its measured time."""
    chip = load_chip(chip_id)
    for entry in _entries(chip_id):
        dtype = DType(entry["dtype"])
        m, n, k, micros = np.array(entry["rows"], dtype=float).T
        largest = 8192.0 if entry.get("engine") == "vllm" else 16384.0  # vLLM's H100 rows
        # stop there; SGLang's NVFP4 rows are DeepSeek-R1's 18 (N, K) alone
        fewest = 200 if entry.get("engine") == "sglang" else 300
        assert set(m.tolist()) >= {1.0, largest} and len(m) >= fewest
        moved = (m * k + n * k) * dtype.itemsize + 2 * m * n
        assert np.all(2 * m * n * k / chip.peak(dtype) <= micros * 1e-6), entry["name"]
        assert np.all(moved / dram_bytes_per_s(chip) <= micros * 1e-6), entry["name"]


def _entries(chip_id: str) -> list[dict]:
    with (kernel_tables.TABLES_DIR / "gemm" / f"{chip_id}.toml").open("rb") as f:
        return tomllib.load(f)["table"]


def _rows(chip_id: str, name: str) -> list[list]:
    (entry,) = [e for e in _entries(chip_id) if e["name"] == name]
    return entry["rows"]


def _matmul(m: int, k: int, n: int, dtype: DType, weights: str | None = None):
    weight = parse_weight_format(weights) if weights else dtype
    ins = (Tensor("x", (m, k), dtype), Tensor("w", (k, n), weight, Role.WEIGHT))
    op = Op(OpKind.MATMUL, "mm", ins, (Tensor("y", (m, n), DType.BF16),),
            (("compute", dtype.value),))  # fmt: skip
    return op_table(Graph("one", [op]))


@pytest.mark.parametrize(("chip_id", "dtype", "weights", "mnk"), [
    ("b200", DType.NVFP4, None, (4096, 8192, 10240)),  # Llama-3-70B QKV, TP1, prefill
    ("b200", DType.FP8, None, (1024, 4096, 6144)),  # Llama-3-8B QKV, mixed step
    ("b200", DType.FP8, "fp8-block", (256, 7168, 16384)),
    ("gb200", DType.BF16, None, (16384, 8192, 8192)),
    ("h100-sxm", DType.BF16, None, (8192, 8192, 10240)),  # large M on Hopper
])  # fmt: skip
def test_a_gemm_at_a_measured_shape_costs_the_tables_time_for_it(chip_id, dtype, weights, mnk):
    """The op's time is the table's model of that row (t0 + roofline / f(M), fitted to
    the rows of the op's (N, K): KernelTable.of_shape) where the table binds, and that model
    is within the fit's error of the measured time."""
    m, k, n = mnk
    table = kernel_table(chip_id, dtype, BLOCK_SCALED_FP8 if weights else None)
    (measured_us,) = [row[3] for row in _rows(chip_id, table.name) if row[:3] == [m, n, k]]
    raw = np.array([[m, n, k, measured_us]])
    _, (roof_s,), _ = roofline_seconds(raw, dtype, load_chip(chip_id), "test", "gemm",
                                       table.scope)  # fmt: skip
    shaped = table.of_shape((float(n), float(k)))
    assert len(shaped.rows_m) < len(table.rows_m)
    modelled_s = float(shaped.predict_s(np.array([m]), np.array([roof_s]))[0])
    assert modelled_s == pytest.approx(measured_us * 1e-6, rel=0.1)
    chip = load_chip(chip_id)
    ops = _matmul(m, k, n, dtype, weights)
    hw = HardwareArrays.build(chip, ops)
    placement = place(chip, Footprint(k * n, 0.0, m * (k + 2 * n)))
    costs = evaluate(ops, hw, placement)
    # the table's time plus dispatch (within 0.1%: the graph counts the op's bytes, the
    # row's roofline the formula's), unless the power limit (TDP) holds the clocks lower
    floor_s = modelled_s + chip.overhead.per_op_s.value
    assert costs.time_s[0] >= floor_s * (1 - 1e-3)
    assert costs.time_s[0] <= max(floor_s, costs.power_s[0]) * (1 + 1e-3)


@settings(max_examples=60, deadline=None)
@given(chip_id=st.sampled_from(BLACKWELL), scope=st.sampled_from(sorted(SCOPES)),
       m=st.integers(1, 65536), k=st.integers(128, 16384), n=st.integers(128, 32768),
       factor=st.floats(1.0, 8.0))  # fmt: skip
def test_the_blackwell_floor_keeps_the_physics(chip_id, scope, m, k, n, factor):
    """No GEMM faster than its roofline; more bandwidth, in the chip's figures and the
    table's roofline, never slower (a memory-bound decode GEMM most of all)."""
    chip, dtype = load_chip(chip_id), SCOPES[scope]
    ops = _matmul(m, k, n, dtype, "fp8-block" if scope == BLOCK_SCALED_FP8 else None)
    placement = place(chip, Footprint(k * n, 0.0, m * (k + 2 * n)))
    hw = HardwareArrays.build(chip, ops)
    costs = evaluate(ops, hw, placement)
    moved = (m * k + k * n) * dtype.itemsize + 2 * m * n
    assert costs.time_s[0] >= 2.0 * m * k * n / chip.peak(dtype) * (1 - 1e-12)
    assert costs.time_s[0] >= moved / dram_bytes_per_s(chip) * (1 - 1e-9)
    assert costs.time_s[0] >= kernel_floor_s(ops, hw)[0] > 0  # the chip's table prices it
    faster = dataclasses.replace(hw, level_rate=hw.level_rate * factor,
                                 kernel_bw=hw.kernel_bw * factor)  # fmt: skip
    assert evaluate(ops, faster, placement).time_s[0] <= costs.time_s[0] * (1 + 1e-12)
