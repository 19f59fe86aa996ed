"""vLLM's own block-FP8 kernels (kernel_tables/engine-vllm.toml and moe/engine-vllm.toml,
written by benchmarks/vllm_kernel_tables.py): they price the block-FP8 linear layers and
fused MoE of vLLM runs on Hopper, at the times aiconfigurator measured, and no other
engine's; their floor keeps the physics."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpusim.compiler.memory_plan import Footprint, place
from xpusim.cost.kernel_tables import engine_scope, kernel_table
from xpusim.cost.op_table import op_table
from xpusim.cost.roofline import HardwareArrays, evaluate, kernel_floor_s
from xpusim.hardware.catalog import load_chip
from xpusim.ir.dtypes import DType, parse_weight_format
from xpusim.ir.graph import Graph
from xpusim.ir.op import Op, OpKind
from xpusim.ir.tensor import Role, Tensor
from xpusim.serving.engines import engines

LINEAR = "vllm-w8a8-block-fp8"
MOE = "vllm-fused-moe"


def _linear(m: int, k: int, n: int, kernels: tuple[str, ...] = ()):
    """One matmul over a 128 x 128 block-scaled FP8 weight, stamped with `kernels` as the
    layer builder stamps an engine's."""
    ins = (Tensor("x", (m, k), DType.FP8),
           Tensor("w", (k, n), parse_weight_format("fp8-block"), Role.WEIGHT))  # fmt: skip
    attrs = (("compute", "fp8"), *((("kernels", kernels),) if kernels else ()))
    return op_table(Graph("one", [Op(OpKind.MATMUL, "mm", ins, (Tensor("y", (m, n),
                                                                       DType.BF16),), attrs)]))


def _floor_s(chip_id: str, m: int, k: int, n: int, kernels: tuple[str, ...] = ()) -> float:
    table = _linear(m, k, n, kernels)
    return float(kernel_floor_s(table, HardwareArrays.build(load_chip(chip_id), table))[0])


def test_the_vllm_profile_lists_its_kernels_and_their_tables_exist():
    assert set(engines()["vllm"].kernels) >= {LINEAR, MOE}
    for chip_id in ("h100-sxm", "h200-sxm"):
        gemm = kernel_table(chip_id, DType.FP8, engine_scope("fp8-block-scaled", LINEAR))
        assert gemm is not None and gemm.kernel == LINEAR and "gemm/vllm/0.14.0" in gemm.url
        moe = kernel_table(chip_id, DType.FP8, engine_scope("fp8-block", MOE), kind="moe")
        assert moe is not None and moe.kernel == MOE and "moe/vllm/0.14.0" in moe.url
    assert kernel_table("b200", DType.FP8, engine_scope("fp8-block-scaled", LINEAR)) is None
    assert all(LINEAR not in p.kernels for name, p in engines().items() if name != "vllm")


def test_vllm_decode_linears_cost_what_vllm_measured_and_others_keep_deepgemm():
    """Qwen3-8B's qkv_proj (6144 x 4096) at M 1-64 on an H100: aiconfigurator times vLLM
    0.14's block-FP8 layer at 35.4-38.2 us, where DeepGEMM's table gives other engines ~11."""
    for m, measured_us in ((1, 35.40), (32, 37.33)):
        assert _floor_s("h100-sxm", m, 4096, 6144, (LINEAR,)) == pytest.approx(
            measured_us * 1e-6, rel=0.08)
    for m in (1, 8, 64):
        assert _floor_s("h100-sxm", m, 4096, 6144, (LINEAR,)) > 2.5 * _floor_s(
            "h100-sxm", m, 4096, 6144)  # fmt: skip
    assert _floor_s("h100-sxm", 8, 4096, 6144, ("sglang-custom-allreduce",)) == _floor_s(
        "h100-sxm", 8, 4096, 6144)  # fmt: skip


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 16384), k=st.integers(128, 16384), n=st.integers(128, 32768),
       chip_id=st.sampled_from(["h100-sxm", "h200-sxm"]), factor=st.floats(1.0, 8.0))  # fmt: skip
def test_the_vllm_linear_never_beats_either_roof(m, k, n, chip_id, factor):
    chip = load_chip(chip_id)
    table = _linear(m, k, n, (LINEAR,))
    hw = HardwareArrays.build(chip, table)
    floor_s = kernel_floor_s(table, hw)[0]
    hbm = max(level.bandwidth_bytes_per_s.value for level in chip.memory
              if level.kind.holds_tensors)  # fmt: skip
    assert floor_s >= 2.0 * m * k * n / chip.peak(DType.FP8) * (1 - 1e-12)
    assert floor_s >= (m * k + k * n + 2 * m * n) / hbm * (1 - 1e-9)
    placement = place(chip, Footprint(k * n, 0.0, m * (k + 2 * n)))
    time_s = evaluate(table, hw, placement).time_s[0]
    faster = dataclasses.replace(hw, level_rate=hw.level_rate * factor,
                                 kernel_bw=hw.kernel_bw * factor)  # fmt: skip
    assert evaluate(table, faster, placement).time_s[0] <= time_s * (1 + 1e-12)


def test_serve_prices_vllms_block_fp8_layers_slower_than_deepgemm():
    """Qwen3-30B-A3B-FP8 on one H100 under vLLM: a decode step with vLLM's own kernels
    costs more than the same run on every engine's tables (DeepGEMM's linears, TensorRT-LLM's
    fused MoE), as aiconfigurator's vLLM rows time its layers slower."""
    import xpusim

    def run() -> object:
        return xpusim.serve("qwen3-30b-a3b-fp8", "h100-sxm", precision="fp8",
                            kv_precision="bf16", engine="vllm", concurrency=4, requests=4,
                            prompt=256, gen=32)  # fmt: skip

    own = run()
    assert any(f"engine kernels: {LINEAR}, {MOE}" in n for n in own.notes)
    plain = dataclasses.replace(engines()["vllm"], kernels=(), kernels_source="")
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(engines(), "vllm", plain)
        before = run()
    assert own.tpot_s.mean > 1.1 * before.tpot_s.mean
