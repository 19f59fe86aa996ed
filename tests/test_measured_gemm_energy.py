"""The power of matmuls a measured kernel table prices (roofline.measured_gemm_energy_j):
a compute-bound GEMM at the table's plateau draws its chip's TDP (H100 matmuls are power
limited, He 2024), a weight-streaming decode GEMM is still charged by its bytes, time never
moves, and the average power stays between static power and the TDP."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpusim.compiler.memory_plan import Footprint, place
from xpusim.cost import roofline
from xpusim.cost.op_table import op_table
from xpusim.cost.roofline import HardwareArrays, evaluate
from xpusim.hardware.catalog import load_chip
from xpusim.ir.dtypes import DType
from xpusim.ir.graph import Graph
from xpusim.ir.op import Op, OpKind
from xpusim.ir.tensor import Role, Tensor

TABLED = ("h100-sxm", "h200-sxm", "b200", "b300", "gb200", "mi300x", "mi355x")


def _costs(chip_id: str, m: int, k: int, n: int, dtype: DType, monkeypatch=None):
    """(costs, costs with the datasheet-only energy) of one M x K x N matmul."""
    chip = load_chip(chip_id)
    ins = (Tensor("x", (m, k), dtype), Tensor("w", (k, n), dtype, Role.WEIGHT))
    op = Op(OpKind.MATMUL, "mm", ins, (Tensor("y", (m, n), DType.BF16),),
            (("compute", dtype.value),))  # fmt: skip
    table = op_table(Graph("one", [op]))
    hw = HardwareArrays.build(chip, table)
    placement = place(chip, Footprint(k * n, 0.0, m * (k + 2 * n)))
    costs = evaluate(table, hw, placement)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(roofline, "measured_gemm_energy_j", lambda *args: args[-1])
        datasheet = evaluate(table, hw, placement)
    return chip, costs, datasheet


def test_a_large_gemm_on_an_h100_draws_its_tdp():
    """8192 x 8192 x 8192 in BF16: the table's kernel at its plateau, power limited. The
    datasheet-derived energy had it at static power plus its fraction of the rest."""
    chip, costs, datasheet = _costs("h100-sxm", 8192, 8192, 8192, DType.BF16)
    tdp_w = chip.tdp_w.value
    power_w = float(costs.energy_j[0] / costs.time_s[0])
    assert power_w == pytest.approx(tdp_w, rel=0.03)
    assert power_w <= tdp_w * (1 + 1e-9)
    assert float(datasheet.energy_j[0] / datasheet.time_s[0]) < 0.9 * tdp_w


def test_a_decode_gemm_is_charged_by_its_bytes():
    """M = 1 against a 8192 x 28672 weight streams 470 MB per token; its arithmetic is
    2 FLOPs a weight, so its energy hardly moves, and it stays well under the TDP."""
    chip, costs, datasheet = _costs("h100-sxm", 1, 8192, 28672, DType.BF16)
    assert costs.energy_j[0] == pytest.approx(datasheet.energy_j[0], rel=0.01)
    assert costs.energy_j[0] / costs.time_s[0] < 0.9 * chip.tdp_w.value


def test_chips_without_tables_keep_their_energy():
    for chip_id in ("a100-sxm-80gb", "tpu-v5e"):
        _, costs, datasheet = _costs(chip_id, 4096, 4096, 4096, DType.BF16)
        assert costs.energy_j[0] == datasheet.energy_j[0]


@settings(max_examples=40, deadline=None)
@given(chip_id=st.sampled_from(TABLED), m=st.integers(1, 16384), k=st.integers(64, 16384),
       n=st.integers(64, 16384), dtype=st.sampled_from([DType.BF16, DType.FP8]))  # fmt: skip
def test_time_never_moves_and_power_stays_within_static_and_tdp(chip_id, m, k, n, dtype):
    chip, costs, datasheet = _costs(chip_id, m, k, n, dtype)
    assert np.array_equal(costs.time_s, datasheet.time_s)
    assert np.all(costs.energy_j >= datasheet.energy_j)
    power_w = costs.energy_j / costs.time_s
    assert np.all(power_w <= chip.tdp_w.value * (1 + 1e-9))
    assert np.all(power_w >= chip.energy.static_power_w.value * (1 - 1e-9))
