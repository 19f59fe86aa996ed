"""A stream machine's multi-chip layout: Groq's LPU (TSP) as its papers run it.

On one TSP every operand reaches the functional units over the stream registers: 32 eastward
and 32 westward streams of 320 B a cycle (ISCA 2020), 64 x 320 B x 0.9 GHz = 18.4 TB/s,
which is the chip's memory level in its catalog file. So an op's time is already its weight
and activation bytes over the streams, its MACs over the MXM planes at its format's rate
(FP16 a quarter of INT8) and its vector work over the VXM: the roofline of cost/roofline.py
with the stream bound as the bandwidth. What this module adds is the layout that chip's
systems serve with: a pure pipeline, consecutive chips holding consecutive slices of the
model, as deep as the system is (576 chips for Llama-2-70B: 8 racks x 9 nodes x 8 chips,
"current pipeline parallelism", SemiAnalysis 2024). A pipeline deeper than the model's
layers is a Plan with `chain` chips per stage: a stage's ops run across its chips in turn,
so a token's trip costs the stage's ops once (a stream-bound op's time is its bytes, however
they are spread) and one hop between every pair of consecutive chips.

The network is scheduled by the compiler (no back-pressure: ISCA 2022), so a hop's time is
deterministic: the link latency of the level the two chips share plus the activation's bytes
over that level's links, summed over the hops the chips' order crosses at each level.
"""

from __future__ import annotations

import math

from xpusim.compiler.partition import Plan
from xpusim.cost.collectives import CollectiveLine, injection_bytes_per_s
from xpusim.hardware.system import System
from xpusim.workloads.transformer_config import TransformerConfig


def pipeline_plans(cfg: TransformerConfig, chips: int) -> list[Plan]:
    """The pure pipelines over `chips`: for every replica count dp dividing them, one
    pipeline of chips / dp chips, cut into stages of equal layer counts (as many as both
    the depth and the layers divide into) chained over the rest, so every chip holds the
    same share of the layers (576 chips, 80 layers: 16 stages of 5 layers, 36 chips each)."""
    plans = []
    for dp in (d for d in range(1, chips + 1) if chips % d == 0):
        depth = chips // dp
        pp = math.gcd(depth, cfg.num_layers)
        plans.append(Plan(pp=pp, dp=dp, chain=depth // pp))
    return plans


def hop_line(system: System, plan: Plan) -> CollectiveLine:
    """One hop of the plan's pipeline, as the mean over its hops: its chips in order, the hop
    from chip i to i + 1 is on the innermost level whose groups hold both, and costs that
    level's latency plus the bytes over its links (the compiler spreads a tensor over the
    links a chip has into the level, as it schedules them: ISCA 2022)."""
    hops = plan.hops
    if hops < 1:
        return CollectiveLine(0.0, 0.0, "none", "")
    fixed_s = s_per_byte = 0.0
    crossed, leaving = [], hops  # hops that leave groups of the previous level's size
    for k, level in enumerate(system.levels):
        # hops that leave this level's groups: chip i to i + 1 where i + 1 starts a group
        outer = 0 if k == len(system.levels) - 1 else hops // level.size
        if here := leaving - outer:
            fixed_s += here * level.latency_s.value
            s_per_byte += here / injection_bytes_per_s(level, 2)
            crossed.append(f"{here} {level.name}")
        leaving = outer
    return CollectiveLine(fixed_s / hops, s_per_byte / hops, "pipeline hops",
                          ", ".join(crossed))


def pipeline_note(system: System, plan: Plan, weight_bytes: float, hop_s: float) -> str:
    """One line on a chained pipeline's chips: what each streams a token and its hops."""
    streams = system.chip.memory[0]
    rate = streams.bandwidth_bytes_per_s.value * (streams.efficiency.value
                                                  if streams.efficiency else 1.0)
    return (f"a pure pipeline of {plan.hops + 1} chips ({plan.pp} stages of "
            f"{plan.chain} chips in turn): each chip streams its {weight_bytes / 1e6:.1f} MB "
            f"of weights in {weight_bytes / rate * 1e6:.2f} us a token at "
            f"{rate / 1e12:.1f} TB/s; {plan.hops} hops ({hop_line(system, plan).level}) "
            f"of {hop_s * 1e6:.2f} us each")


def stage_send_line(system: System, plan: Plan) -> CollectiveLine:
    """What a chained pipeline's send between two stages stands for where a model counts
    pp - 1 sends (serving's steps): the hops of a token's whole trip shared among them."""
    line = hop_line(system, plan)
    share = plan.hops / max(plan.pp - 1, 1)
    return CollectiveLine(line.fixed_s * share, line.s_per_byte * share, line.algorithm,
                          line.level)
