"""DeepSeek-R1 on B200, op by op (benchmarks/b200_r1_step.py; docs/validation.md "DeepSeek-R1
NVFP4 on B200 at small batch, op by op"): the setups are the InferenceX runs' launches, and
at one sequence xpusim's NVFP4 routed experts on a rank of EP 8 cost less than the row the
harness measured on a heavier rank (issue #48)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from xpusim.cost.kernel_tables import gate_load
from xpusim.hardware.catalog import load_chip
from xpusim.validation.points import load_points

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))
try:
    from b200_r1_step import SETUPS, xpusim_us
finally:
    sys.path.remove(str(BENCH))

POINTS = ("inferencex-dsr1-b200-sglang-fp4-tp8-ep8-1k1k-c1-tpot",
          "inferencex-dsr1-b200-sglang-fp8-tp8-1k1k-c1-tpot",
          "inferencex-dsr1-b200-trt-fp4-tp4-1k1k-c4-tpot")  # fmt: skip


@pytest.mark.parametrize(("setup", "point"), list(zip(SETUPS, POINTS, strict=True)))
def test_the_setups_are_the_runs_launches(setup, point):
    """Each setup prices the model, split, engine and MoE backend its point ran."""
    (p,) = [p for p in load_points() if p.id == point]
    assert (setup.model, setup.tp, setup.ep, setup.engine.name) == (
        p.get("model"), p.get("tp"), p.get("ep", 1), p.get("engine"))
    assert p.get("moe_backend") == "TRTLLM" and setup.fusion == bool(p.get("allreduce_fusion"))


def test_nvfp4_experts_at_one_sequence_cost_less_than_the_harness_rank():
    """One sequence on 8 B200 at EP 8: xpusim's busiest rank runs 4 pairs over 4 experts,
    the rank aiconfigurator's TensorRT-LLM row measured 5 over 5 (gate_load), 37.4 us; the
    layer's two expert GEMMs, less their dispatch, cost less than that row and more than
    half of it."""
    assert gate_load(1, 256, 8, 8) == (5, 5)
    ops = xpusim_us(SETUPS[0], 1)
    dispatch_us = load_chip("b200").overhead.per_op_s.value * 1e6
    gemms_us = sum(ops[f"layers.3.experts.{name}"][1] - dispatch_us for name in ("gate_up",
                                                                                  "down"))
    assert 0.5 * 37.38 < gemms_us < 37.38
