"""Costs of one training plan: each stage's passes, the 1F1B timeline, gradient sync.

scenarios/training.py says what a step is; this module turns one rank's graphs
(scenarios/training_graphs.py) into per-stage times with the roofline (cost/roofline.py) and
the system's collectives (cost/collectives.py), and lays them out as the 1F1B schedule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xpusim.compiler.autodiff import Recompute
from xpusim.compiler.memory_plan import Placement
from xpusim.compiler.optimizer import OptimizerSpec, dp_traffic
from xpusim.compiler.partition import Plan
from xpusim.cost.collectives import (
    Collective,
    collective_algorithms,
    collective_time,
    hierarchical_time,
)
from xpusim.hardware.system import System
from xpusim.ir.dtypes import DType
from xpusim.ir.graph import Graph
from xpusim.ir.op import OpKind
from xpusim.scenarios.llm.engine import PhaseCosts
from xpusim.scenarios.training_graphs import RankTraining
from xpusim.workloads.transformer_config import TransformerConfig


@dataclass(frozen=True)
class Setup:
    """What one step asks for, the plan aside."""

    batch: int
    seq: int
    act: DType
    optimizer: OptimizerSpec
    recompute: Recompute
    zero: int
    microbatches: int | None
    overlap: bool
    sequence_parallel: bool
    virtual_stages: int = 1  # model chunks per pipeline rank (interleaved 1F1B)


@dataclass(frozen=True)
class Timeline:
    """Per stage: one microbatch's passes (comm included) and the update; the step."""

    forward: np.ndarray
    backward: np.ndarray
    update: np.ndarray
    step_s: float
    breakdown: dict[str, float]


def timeline(
    fwd: PhaseCosts, bwd: PhaseCosts, upd: PhaseCosts, rank: RankTraining, system: System,
    plan: Plan, setup: Setup, params: Sequence[float], m: int, micro: int,
) -> Timeline:  # fmt: skip
    """The 1F1B step (scenarios/training.py), and the slowest stage's time by its parts."""
    pp = plan.pp
    f_tp, b_tp = (p.stage_sums("time_s", comm_only=True) for p in (fwd, bwd))
    f_comp = fwd.stage_sums("time_s") - f_tp
    b_comp = bwd.stage_sums("time_s") - b_tp
    recomputed = bwd.costs.time_s @ rank.stage_counts(rank.backward, pp, "recompute")
    u = upd.stage_sums("time_s")
    dp_step, dp_micro = _dp_times(system, plan, setup, params)
    f_comm, b_comm = f_tp + dp_micro["forward"], b_tp + dp_micro["backward"]
    if setup.overlap:  # collectives hidden behind compute, per pass: an ideal bound, but
        # never faster than the pass's energy allows at the TDP (a power-limited pass
        # cannot also hide the links' traffic)
        f = np.maximum(np.maximum(f_comp, f_comm), fwd.stage_sums("power_s"))
        b = np.maximum(np.maximum(b_comp, b_comm), bwd.stage_sums("power_s"))
        dp_step = np.maximum(dp_step - b, 0.0)  # the gradient sync overlaps the last backward
    else:
        f, b = f_comp + f_comm, b_comp + b_comm
    v = setup.virtual_stages if pp > 1 else 1
    send = _send_s(system, plan, micro, setup, rank.cfg) if pp > 1 else 0.0
    per_micro = f + b + 2 * v * send  # a microbatch leaves each of a rank's v chunks
    pipeline = (m - 1) * per_micro.max() + _fill_drain_s(per_micro, v)
    tail = dp_step + u

    slow, last = int(np.argmax(per_micro)), int(np.argmax(tail))  # the slowest stages
    exposed = float(f[slow] - f_comp[slow] + b[slow] - b_comp[slow])
    raw = float(f_comm[slow] + b_comm[slow])
    tp_share = float(f_tp[slow] + b_tp[slow]) / raw if raw else 0.0
    breakdown = {
        "forward": m * float(f_comp[slow]),
        "backward": m * float(b_comp[slow] - recomputed[slow]),
        "recompute": m * float(recomputed[slow]),
        "tensor_parallel_comm": m * exposed * tp_share,
        "pipeline_sends": m * 2 * v * send,
        "pipeline_bubble": float(pipeline) - m * float(per_micro[slow]),
        "data_parallel_comm": m * exposed * (1 - tp_share) + float(dp_step[last]),
        "optimizer": float(u[last]),
    }
    return Timeline(f, b, u, float(pipeline + tail.max()), breakdown)


def _fill_drain_s(per_micro: np.ndarray, v: int) -> float:
    """What one microbatch takes to cross the pipeline, past the slowest rank's turn: every
    rank's passes under plain 1F1B (the bubble of even stages is (pp - 1) / m of the work);
    with v chunks per rank (interleaved 1F1B, Narayanan et al. 2021, section 2.2.2) a
    microbatch waits on one chunk, 1/v of a rank's passes, at each other rank, so the bubble
    is (pp - 1) / (v m), the ratio the Llama 3 paper gives for its schedule (section 3.3.2)."""
    if v == 1:
        return float(per_micro.sum())
    return float(per_micro.max() + (per_micro.sum() - per_micro.max()) / v)


def phase_costs(
    graph: Graph, rank: RankTraining, system: System, plan: Plan, placement: Placement
) -> PhaseCosts:
    table = rank.table(graph)
    found = iter(collective_algorithms(table, system, plan.tp))
    comm = np.array([next(found)["time_s"] if op.kind is OpKind.COLLECTIVE else 0.0
                     for op in table.ops])  # fmt: skip
    costs = rank.op_costs(graph, system.chip, placement, comm)
    return PhaseCosts(table, costs, rank.stage_counts(graph, plan.pp),
                      rank.stage_counts(graph, plan.pp, "comm"))  # fmt: skip


def collectives(
    fwd: PhaseCosts, bwd: PhaseCosts, system: System, plan: Plan, setup: Setup,
    params: Sequence[float],
) -> list[dict[str, Any]]:  # fmt: skip
    """Every distinct collective: tensor-parallel ones of the passes, then the data-parallel
    ones of the stage holding the most parameters."""
    found = collective_algorithms(fwd.table, system, plan.tp)
    found += collective_algorithms(bwd.table, system, plan.tp)
    nbytes = max(params) * setup.act.itemsize
    for kind, what, when in dp_traffic(setup.zero):
        cost = hierarchical_time(system, Collective(kind), nbytes, plan.dp,
                                 plan.tp * plan.pp)  # fmt: skip
        found.append({"op": f"{what} per {when}", "collective": kind, "group": "dp",
                      "size": plan.dp, "bytes": nbytes, "algorithm": cost.algorithm,
                      "level": cost.level, "time_s": cost.time_s})  # fmt: skip
    return found


def _dp_times(
    system: System, plan: Plan, setup: Setup, params: Sequence[float]
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Per stage: data-parallel collectives once per step, and per microbatch by pass."""
    step = np.zeros(plan.pp)
    micro = {"forward": np.zeros(plan.pp), "backward": np.zeros(plan.pp)}
    stride = plan.tp * plan.pp
    gathers = 0
    for kind, what, when in dp_traffic(setup.zero):
        nbytes = np.array(params) * setup.act.itemsize  # gradients and weights: compute format
        t = np.array([hierarchical_time(system, Collective(kind), n, plan.dp, stride).time_s
                      for n in nbytes])  # fmt: skip
        if when == "step":
            step += t
        elif what == "weights":  # ZeRO-3: gathered for the forward, then for the backward
            micro["forward" if gathers == 0 else "backward"] += t
            gathers += 1
        else:
            micro["backward"] += t
    return step, micro


def _send_s(system: System, plan: Plan, micro: int, setup: Setup, cfg: TransformerConfig) -> float:
    """One microbatch's activations (or their gradient) to the next (previous) stage, from
    each chip of a stage to its peer of the next: the whole hidden state, or with sequence
    parallelism each tensor-parallel rank's 1/tp of the sequence, the residual stream's
    shard the layer boundary holds (Korthikanti et al. 2022, section 4.2.2: the layer's
    input is split along the sequence), each rank sending its own."""
    shards = plan.tp if setup.sequence_parallel else 1
    nbytes = micro * setup.seq * cfg.hidden_size * setup.act.itemsize / shards
    span = plan.tp * plan.pp
    return collective_time(system, Collective.SEND_RECV, nbytes, 2, span).time_s
