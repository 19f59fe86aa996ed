"""The key an op reads a kernel table at is the key the table's rows were converted to
(roofline.kernel_m, kernel_tables.KEYED_BY): an op of a row's own shape and size takes that
row's measured time. Issue #48: the layer builder gave 8 tokens of DeepSeek-R1 116 expert
rows (58 experts x ceil(64 / 58)) where a moe row of 8 tokens is 64 token-expert pairs, and
its MXFP4 layer on an MI355X cost 35 us against the 45.5 us AITER measured."""

from __future__ import annotations

import numpy as np
import pytest

from xpusim.compiler.moe_expert import is_expert
from xpusim.compiler.partition import Plan, partition
from xpusim.cost import kernel_tables
from xpusim.cost.kernel_tables import kernel_table
from xpusim.cost.op_table import kernel_shapes, op_table
from xpusim.cost.roofline import HardwareArrays, kernel_floor_s, kernel_m
from xpusim.errors import UserError
from xpusim.hardware.catalog import load_chip
from xpusim.ir.dtypes import DType
from xpusim.ir.graph import Graph
from xpusim.ir.op import Op, OpKind
from xpusim.ir.tensor import Role, Tensor
from xpusim.scenarios.formats import resolve_formats
from xpusim.workloads.resolve import load_model
from xpusim.workloads.transformer import StepShape, build_step


def _experts(chip_id: str, precision: str, tokens: int, tp: int):
    """DeepSeek-R1's routed-expert GEMMs of one decode step of `tokens` sequences on one of
    `tp` ranks (tensor-parallel experts), as the layer builder and partitioning emit them:
    (op table, positions of the expert GEMMs, its chip)."""
    chip = load_chip(chip_id)
    act, weight, _ = resolve_formats(chip, precision, None)
    step = build_step(load_model("deepseek-r1"), StepShape(tokens, 1, 1025, decode=True), act,
                      weight, compact=True)  # fmt: skip
    table = op_table(partition(step, Plan(tp=tp)))
    at = [i for i, op in enumerate(table.ops) if op.kind is OpKind.MATMUL and is_expert(op)]
    assert len(at) == 2  # gate_up and down, one signature over the layers
    return table, at, chip


@pytest.mark.parametrize("tp", [8, 4])  # inter 256 and 512 a GPU
@pytest.mark.parametrize("tokens", [1, 8, 64, 512])
def test_deepseeks_experts_take_aiters_row_at_their_tokens(tokens, tp):
    """AITER's tuner routed its rows to the top 8 of random scores (`routing = "random"`),
    as the layer builder routes a step: the layer the builder emits at a row's tokens costs
    that row's measured time (18.9 / 45.5 / 137.2 / 161.5 us at TP 8)."""
    table, at, chip = _experts("mi355x", "mxfp4", tokens, tp)
    assert np.all(kernel_m(table)[at] == tokens * 8)  # the rank's token-expert pairs
    layer_s = float(kernel_floor_s(table, HardwareArrays.build(chip, table))[at].sum())
    moe = kernel_table("mi355x", DType.MXFP4, "mxfp4", kind="moe")
    own = moe.of_shape(dict(kernel_shapes(table.ops[at[0]]))["moe"])
    assert own is not moe  # priced by the rows of its own shape
    (row,) = np.flatnonzero(own.rows_m == tokens * 8)
    assert layer_s == pytest.approx(own.measured_s[row], rel=1e-9)


@pytest.mark.parametrize(("chip_id", "precision"), [("b200", "nvfp4"), ("h200-sxm", "fp8")])
@pytest.mark.parametrize("tokens", [1, 64])
def test_the_trtllm_rows_are_read_at_the_layers_pairs(chip_id, precision, tokens):
    """aiconfigurator's TensorRT-LLM rows were routed balanced (64 tokens: all 256 experts),
    the builder's step at random (223 of them): the layer is read at the row of its own
    pairs, on its own roofline, so it costs the row's fixed time plus its roofline over the
    row's fraction, the row's time where both read the same experts (1 token: 8)."""
    table, at, chip = _experts(chip_id, precision, tokens, 4)
    assert np.all(kernel_m(table)[at] == tokens * 8)
    hw = HardwareArrays.build(chip, table)
    layer_s = float(kernel_floor_s(table, hw)[at].sum())
    moe = kernel_table(chip_id, DType.parse(precision), precision, kind="moe")
    own = moe.of_shape(dict(kernel_shapes(table.ops[at[0]]))["moe"])
    (row,) = np.flatnonzero(own.rows_m == tokens * 8)
    moved = table.role_bytes.sum(axis=-2)[at]
    peak, bw = (np.broadcast_to(v, (len(table),))[at] for v in (hw.kernel_peak, hw.kernel_bw))
    roof_s = np.maximum(table.matrix_flops[at] / peak, moved / bw)
    model_s = own.predict_s(np.array([tokens * 8.0]), np.array([roof_s.sum()]))  # the layer's
    assert layer_s == pytest.approx(float(model_s[0]), rel=1e-9)  # fixed time, split over both
    assert layer_s <= own.measured_s[row] * (1 + 1e-9)
    if tokens == 1:
        assert layer_s == pytest.approx(own.measured_s[row], rel=1e-9)


def test_a_gemm_row_is_read_at_its_m():
    """A dense GEMM of a row's M, N and K takes the row's measured time: AITER's MI355X FP8
    GEMM of 512 x 8192 x 28672 (a gemm table's rows of one shape, one a M)."""
    m, n, k = 512, 8192, 28672
    x, w = Tensor("x", (m, k), DType.FP8), Tensor("w", (k, n), DType.FP8, Role.WEIGHT)
    table = op_table(Graph("one", [Op(OpKind.MATMUL, "mm", (x, w),
                                      (Tensor("y", (m, n), DType.BF16),),
                                      (("compute", "fp8"),))]))  # fmt: skip
    assert kernel_m(table)[0] == m
    gemm = kernel_table("mi355x", DType.FP8).of_shape((float(n), float(k)))
    (row,) = np.flatnonzero(gemm.rows_m == m)
    floor_s = float(kernel_floor_s(table, HardwareArrays.build(load_chip("mi355x"), table))[0])
    assert floor_s == pytest.approx(gemm.measured_s[row], rel=1e-9)


def test_a_routing_other_than_balanced_or_random_is_refused_by_name():
    entry = {"name": "x", "kind": "moe", "dtype": "mxfp4", "scope": "mxfp4", "routing": "uniform",
             "measured_on": "mi355x", "chips": ["mi355x"], "source": "s", "url": "u",
             "date": "d", "conditions": "c", "rows": [[8, 7168, 256, 8, 256, 1, 1, 45.5]]}
    with pytest.raises(UserError, match="routing 'uniform': a moe table's, one of balanced"):
        kernel_tables._table(entry, kernel_tables.TABLES_DIR / "t.toml")
