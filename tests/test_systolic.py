"""Systolic matrix units: cycle counts from the dataflow (cost/systolic.py) against a
cycle-by-cycle simulation of the cells (cost/systolic_sim.py), against SCALE-Sim v3's
counts of the same layers (recorded by benchmarks/systolic_check.py), and as the GEMM time
of a chip whose matrix unit has a dataflow (TPU v4)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xpusim
from xpusim.cost.systolic import Dataflow, SystolicArray, gemm_cycles, utilization
from xpusim.cost.systolic_sim import ScheduleHazard, simulate

ARRAYS = [SystolicArray(4, 3, Dataflow.WEIGHT_STATIONARY),
          SystolicArray(4, 3, Dataflow.WEIGHT_STATIONARY, double_buffered=True),
          SystolicArray(3, 5, Dataflow.OUTPUT_STATIONARY)]  # fmt: skip


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(ARRAYS), st.integers(1, 11), st.integers(1, 13), st.integers(1, 9),
       st.integers(0, 2**31 - 1))  # fmt: skip
def test_cycles_are_those_of_a_simulated_schedule_that_computes_the_product(array, m, k, n,
                                                                            seed):  # fmt: skip
    rng = np.random.default_rng(seed)
    a, b = rng.integers(-4, 5, (m, k)), rng.integers(-4, 5, (k, n))
    got = simulate(array, a, b)
    assert np.array_equal(got.product, a @ b)
    assert got.cycles == gemm_cycles(array, m, k, n)


def test_hand_counts_on_a_small_array():
    """Weight-stationary, 4 x 3 cells, 5 x 7 by 7 x 4: 2 x 2 folds of 2*4 + 3 + 5 - 2 = 14
    cycles; double buffered, folds every max(5, 4) = 5 cycles: 4 + 3 x 5 + 5 + 4 + 3 - 2."""
    ws = SystolicArray(4, 3)
    assert gemm_cycles(ws, 5, 7, 4) == 4 * 14
    assert gemm_cycles(SystolicArray(4, 3, double_buffered=True), 5, 7, 4) == 4 + 15 + 10
    # output-stationary: ceil(5/4) x ceil(4/3) folds of 7 + 4 + 3 - 2 = 12 cycles, then the
    # last tile's 4-cycle drain
    assert gemm_cycles(SystolicArray(4, 3, Dataflow.OUTPUT_STATIONARY), 5, 7, 4) == 4 * 12 + 4


@pytest.mark.parametrize("m", [2, 6])
def test_a_tighter_fold_spacing_than_the_array_allows_is_caught(m):
    """One cycle less between folds than the double-buffered schedule leaves either reads
    weights still loading (few rows: the load is what spaces the folds) or mixes two folds'
    rows (many rows: the stream is)."""
    array = SystolicArray(4, 3, double_buffered=True)
    rng = np.random.default_rng(0)
    a, b = rng.integers(-4, 5, (m, 9)), rng.integers(-4, 5, (9, 7))
    tight = max(m, array.rows) - 1
    try:
        got = simulate(array, a, b, spacing=tight)
    except ScheduleHazard:
        return
    assert not np.array_equal(got.product, a @ b)


def test_scalesim_counts_the_same_cycles_on_the_zoos_layers():
    """SCALE-Sim v3 on dlrm-v2's, bert-base's and Llama-3.2-1B's GEMMs, 32 x 32 both ways
    and 128 x 128 weight-stationary: the analytical count is one cycle above its 'Total
    Cycles' on every layer (SCALE-Sim counts to the last cycle's index; xpusim counts
    cycles), and output-stationary also the last tile's drain (rows cycles), which
    SCALE-Sim leaves out: far within the 10% the mapping must keep."""
    data = json.loads((Path(__file__).parent / "data" / "systolic_scalesim.json").read_text())
    assert len(data["layers"]) >= 15
    for row in data["layers"]:
        array = SystolicArray(row["rows"], row["cols"], Dataflow(row["dataflow"]))
        ours = gemm_cycles(array, row["m"], row["k"], row["n"])
        drain = row["rows"] if array.dataflow is Dataflow.OUTPUT_STATIONARY else 0
        assert ours - row["scalesim"] == 1 + drain, row
        assert abs(ours / row["scalesim"] - 1) < 0.10


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 5000), st.integers(1, 9000), st.integers(1, 9000), st.booleans(),
       st.sampled_from(list(Dataflow)))  # fmt: skip
def test_no_mapping_beats_the_peak(m, k, n, buffered, dataflow):
    """The physics floor: a GEMM never uses more than every cell every cycle."""
    array = SystolicArray(128, 128, dataflow, buffered, count=8)
    assert 0 < utilization(array, m, k, n) <= 1


def _matmul_ops(result, phase):
    return [o for o in result.ops if o.phase == phase and o.kind == "matmul"]


def test_a_tpu_v4_gemm_takes_its_mxu_cycles():
    """TPU v4 (8 weight-stationary 128 x 128 MXUs, double buffered): a prefill projection's
    compute time is its cycles at the clock its peak implies (275 TFLOPS over 8 x 128 x 128
    x 2 MACs, 1.049 GHz), and a decode step of 8 rows waits on each 128-cycle weight load,
    about 128/8 of the arithmetic's time."""
    chip = xpusim.chip("tpu-v4")
    mxus = SystolicArray(128, 128, double_buffered=True, count=8)
    clock = chip.peak("bf16") / (8 * 128 * 128 * 2)
    run = dict(batch=8, prompt=1024, gen=2, precision="bf16")
    r = xpusim.simulate("llama-2-7b", "tpu-v4", **run)
    h = 4096
    o_proj = next(o for o in _matmul_ops(r, "prefill") if o.name == "layers.0.o_proj")
    assert o_proj.compute_s == pytest.approx(gemm_cycles(mxus, 8 * 1024, h, h) / clock,
                                             rel=1e-6)  # fmt: skip
    decode = next(o for o in _matmul_ops(r, "decode") if o.name == "layers.0.o_proj")
    assert decode.compute_s == pytest.approx(gemm_cycles(mxus, 8, h, h) / clock, rel=1e-6)
    assert decode.compute_s > 10 * decode.flops / chip.peak("bf16")


def test_the_dataflow_is_shown_and_not_a_what_if(capsys):
    from cli_run import refused, run_cli

    code, out, _ = run_cli(capsys, "chip", "tpu-v4")
    assert code == 0 and "weight-stationary" in out
    err = refused(capsys, "run", "llama-2-7b", "--chip", "tpu-v4", "--set",
                  "matrix_unit.dataflow=1")  # fmt: skip
    assert "matrix_unit.dataflow" in err and "not a number" in err
