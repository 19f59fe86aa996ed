"""TensorRT-LLM's own block-FP8 linear on Hopper (kernel_tables/engine-trtllm-hopper.toml,
benchmarks/trtllm_kernel_tables.py; docs/validation.md "The dense decode step at large batch,
op by op"): it prices the block-scaled FP8 matmuls of TensorRT-LLM runs on the H100 and H200
at its measured rows, which at serving batches run longer than DeepGEMM's curve, and no other
engine's."""

from __future__ import annotations

import dataclasses
import sys
import tomllib
from pathlib import Path

import pytest

import xpusim
from xpusim.cost.kernel_tables import TABLES_DIR, engine_scope, kernel_table
from xpusim.ir.dtypes import DType
from xpusim.serving.engines import engines

sys.path.insert(0, str(Path(__file__).resolve().parent))
try:
    from test_engine_kernels import _floor_s
finally:
    sys.path.pop(0)

KERNEL = "trtllm-fp8-block-gemm"


def _rows(chip_id: str) -> dict[tuple[int, int, int], float]:
    """The committed rows of `chip_id`'s table, (M, N, K) -> seconds, read as a user would."""
    with (TABLES_DIR / "engine-trtllm-hopper.toml").open("rb") as f:
        table = next(t for t in tomllib.load(f)["table"] if t["chips"] == [chip_id])
    return {(m, n, k): us * 1e-6 for m, n, k, us in table["rows"]}


@pytest.mark.parametrize("chip_id", ["h100-sxm", "h200-sxm"])
def test_the_table_is_trtllms_own_kernel_on_hopper(chip_id):
    own = kernel_table(chip_id, DType.FP8, engine_scope("fp8-block-scaled", KERNEL))
    assert own is not None and own.kernel == KERNEL and own.engine.startswith("trtllm")
    assert "trtllm/1.3.0rc20/gemm_perf.parquet" in own.url
    assert KERNEL in engines()["trtllm"].kernels
    every = kernel_table(chip_id, DType.FP8, "fp8-block-scaled")
    assert every is not None and not every.kernel  # DeepGEMM's, what other engines take


def test_blackwell_keeps_its_own_tables():
    assert kernel_table("b200", DType.FP8, engine_scope("fp8-block-scaled", KERNEL)) is None


@pytest.mark.parametrize(("chip_id", "m"), [("h100-sxm", 512), ("h100-sxm", 1024),
                                            ("h200-sxm", 256), ("h200-sxm", 2048)])
def test_a_measured_row_prices_its_op(chip_id, m):
    """Qwen3-32B's output projection (an M x 8192 input against a 5120 x 8192 weight) is a
    row of the table: the op takes the row's time, the table's fixed time aside."""
    measured_s = _rows(chip_id)[(m, 5120, 8192)]
    assert _floor_s(m, 8192, 5120, (KERNEL,), chip_id) == pytest.approx(measured_s, rel=0.05)


def test_serving_batches_cost_more_than_deepgemms_curve_and_other_engines_keep_it():
    """Qwen3-32B's down projection (5120 x 25600) at M 512 on an H100: TensorRT-LLM's rows
    (of 5120 x 16384, the nearest measured K, scaled by the roofline) give about 1.4x
    DeepGEMM's curve; an op without the kernel, or with an unknown one, is priced as before."""
    plain = _floor_s(512, 25600, 5120, (), "h100-sxm")
    assert _floor_s(512, 25600, 5120, (KERNEL,), "h100-sxm") > 1.3 * plain
    assert _floor_s(512, 25600, 5120, ("no-such-kernel",), "h100-sxm") == plain


def test_serve_runs_trtllms_block_fp8_kernel():
    """Qwen3-32B-FP8 (block-scaled) under TensorRT-LLM on one H100 at 512 clients (M about
    512, where its projections take 1.18x DeepGEMM's curve a layer) decodes slower with its
    own kernel; the BF16 model does not change."""

    def run(weights: str | None) -> object:
        return xpusim.serve("qwen3-32b", "h100-sxm", precision="fp8" if weights else "bf16",
                            weight_precision=weights, kv_precision="bf16", engine="trtllm",
                            concurrency=512, requests=512, prompt=128, gen=64)  # fmt: skip

    own = [run("fp8-block"), run(None)]
    assert any(f"engine kernels: {KERNEL}" in n for n in own[0].notes)
    profile = engines()["trtllm"]
    plain = dataclasses.replace(profile, kernels=tuple(k for k in profile.kernels if k != KERNEL))
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(engines(), "trtllm", plain)
        before = [run("fp8-block"), run(None)]
    assert own[0].tpot_s.mean > 1.05 * before[0].tpot_s.mean
    assert own[1].tpot_s.mean == before[1].tpot_s.mean
