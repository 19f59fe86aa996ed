"""Groq's LPU as a stream machine: the stream bound, pure pipelines deeper than the layers,
and their hops over the system's levels (cost/stream_machine.py)."""

from __future__ import annotations

import pytest

import xpusim
from xpusim.compiler.partition import Plan, weights_per_chip_bytes
from xpusim.cost.stream_machine import hop_line, pipeline_plans
from xpusim.hardware.catalog import load_chip
from xpusim.hardware.system import load_system
from xpusim.workloads.resolve import load_model


def test_the_sram_level_is_the_stream_bound_of_its_sourced_inputs():
    chip = load_chip("groq-lpu")
    streams = chip.memory[0]
    assert streams.bandwidth_bytes_per_s.value == pytest.approx(64 * 320 * chip.clock_hz.value)
    assert chip.peak_ops_per_s["fp16"].value == pytest.approx(
        chip.peak_ops_per_s["int8"].value / 4, rel=0.01)  # the MXM's fp16 at a quarter


def test_pipeline_plans_spread_the_layers_evenly_over_every_chip():
    cfg = load_model("llama-2-70b")
    plans = pipeline_plans(cfg, 576)
    assert all(p.chips == 576 and p.tp == 1 for p in plans)
    deepest = next(p for p in plans if p.dp == 1)
    assert (deepest.pp, deepest.chain, deepest.hops) == (16, 36, 575)
    per_chip = weights_per_chip_bytes(cfg, deepest, 1.0)
    whole = weights_per_chip_bytes(cfg, Plan(pp=16), 1.0)
    assert per_chip == pytest.approx([w / 36 for w in whole])
    # inner stages (no embedding or head) hold the same share: 5 of 80 layers over 36 chips
    assert per_chip[1] == pytest.approx(cfg.layer_params * 5 / 36)


def test_hops_are_counted_at_the_level_each_crosses():
    system = load_system("groq-system")  # nodes of 8, racks of 72, the Dragonfly
    line = hop_line(system, Plan(pp=16, chain=36))
    assert line.level == "504 node, 64 rack, 7 dragonfly"
    latencies = [level.latency_s.value for level in system.levels]
    assert line.fixed_s == pytest.approx(
        (504 * latencies[0] + 64 * latencies[1] + 7 * latencies[2]) / 575)
    assert hop_line(system, Plan()).fixed_s == 0.0


def test_a_pipelined_token_costs_its_weights_over_the_streams_plus_its_hops():
    """The 576-chip Llama-2-70B: no faster than its weight bytes over one chip's streams at
    a time plus 575 hop latencies (the physics floor), and stream-bound: within 10% of it."""
    r = xpusim.simulate("llama-2-70b", "groq-lpu", chips=576, precision="int8")
    assert r.plan == {"tp": 1, "pp": 16, "dp": 1, "ep": 1, "chain": 36}
    cfg, chip = load_model("llama-2-70b"), load_chip("groq-lpu")
    system = load_system("groq-system")
    floor_s = (cfg.param_count / chip.memory[0].bandwidth_bytes_per_s.value
               + 504 * system.levels[0].latency_s.value)  # fmt: skip
    assert floor_s <= r.tpot_s <= 1.1 * floor_s
    sends = next(op for op in r.ops if op.phase == "decode" and op.name == "pipeline.send")
    assert sends.count == 575
    assert any("575 hops" in note for note in r.notes)


def test_a_user_given_tensor_parallel_plan_still_runs_on_the_pipeline_system():
    r = xpusim.simulate("llama-2-70b", "groq-lpu", chips=576, precision="int8", tp=8, pp=72)
    assert r.fits and r.plan == {"tp": 8, "pp": 72, "dp": 1, "ep": 1}
