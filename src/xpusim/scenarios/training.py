"""A training step of a transformer on one chip or a system of many: time, MFU, memory.

One step trains on `batch` sequences of `seq` tokens. Data parallelism gives each of dp
replicas batch / dp of them, run as `microbatches` microbatches; a pipeline of pp stages
runs them with the 1F1B schedule (Narayanan et al. 2021): per microbatch each stage runs a
forward pass F_s and a backward pass B_s (recomputation included), and the step's pipeline
time is

    (m - 1) x max_s (F_s + B_s) + sum_s (F_s + B_s)

the second term being the fill and drain a microbatch takes to cross every stage, so the
bubble is (pp - 1) / m of the work when stages are even. With `virtual_stages` v > 1 each
rank runs its layers as v chunks (interleaved 1F1B): the fill and drain is the slowest
rank's passes plus 1/v of the others', a bubble of (pp - 1) / (v m), and a microbatch is
sent v times as often. Sends between stages add to each microbatch, tensor-parallel
collectives sit inside F and B (serialized, or hidden behind compute with `overlap`).
Then each stage's data-parallel gradient synchronisation (an all-reduce, or ZeRO's
reduce-scatter and all-gather: compiler/optimizer.py) and optimizer update run, and the
slowest stage ends the step.

MFU is model FLOPs over step time x chips x peak, with PaLM's definition (Chowdhery et al.
2022, appendix B): 6 N + 12 L H Q T FLOPs per token, N the parameters a token multiplies by
(the input embedding is a lookup, unless tied to the LM head), L layers, H heads of size Q,
T the sequence length; recomputation does not count. HFU counts the matrix FLOPs the chips
actually execute, recomputation included (Megatron-LM reports that one).

Memory per chip: weights, gradients and optimizer state by the optimizer's bytes per
parameter and the ZeRO stage, and activations: the peak of one microbatch's forward and
backward pass, plus the stash of the other microbatches a 1F1B stage holds in flight
(pp - s of them on stage s).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from xpusim.compiler.autodiff import Recompute
from xpusim.compiler.memory_plan import Footprint, place
from xpusim.compiler.optimizer import (
    StateBytes,
    bytes_per_param,
    check_zero,
    optimizer_spec,
    sharded,
)
from xpusim.compiler.partition import Plan, check_plan, complete_plan, weights_per_chip_bytes
from xpusim.cost.dollars import Cost
from xpusim.cost.roofline import Bottleneck
from xpusim.errors import UserError, check_positive_in
from xpusim.hardware.spec import Chip
from xpusim.hardware.system import System, plan_chips, system_for
from xpusim.ir.dtypes import DType
from xpusim.memo import in_scope
from xpusim.result import Result
from xpusim.run_options import keyword_defaults
from xpusim.scenarios.llm.engine import PhaseCosts
from xpusim.scenarios.llm.plans import candidate_plans
from xpusim.scenarios.op_reports import OpReport
from xpusim.scenarios.registry import register
from xpusim.scenarios.training_graphs import RankTraining, build_rank
from xpusim.scenarios.training_limits import limits, not_fit_reason
from xpusim.scenarios.training_step import Setup, collectives, phase_costs, timeline
from xpusim.workloads.transformer import refuse_untrainable
from xpusim.workloads.transformer_config import TransformerConfig

TRAINING_PRECISIONS = (DType.BF16, DType.FP16, DType.FP32)
"""Compute formats of training, in the order tried by default (mixed precision first)."""


@dataclass
class TrainingMemory:
    weights: float
    gradients: float
    optimizer_state: float
    activations: float
    total: float
    capacity: float

    @classmethod
    def of(cls, state: StateBytes, activations: float, capacity: float) -> TrainingMemory:
        total = state.total + activations
        return cls(state.weights, state.gradients, state.optimizer_state, activations, total,
                   capacity)  # fmt: skip


@dataclass
class TrainingResult(Result):
    PRICED_BY: ClassVar[tuple[str, str]] = ("tokens_per_s", "training tokens")

    model: str
    chip: str
    chips: int
    system: str
    plan: dict[str, int]
    batch: int  # sequences per optimizer step, all replicas
    prompt: int  # tokens per sequence
    microbatches: int  # per replica and step
    micro_batch: int  # sequences per microbatch
    virtual_stages: int  # model chunks per pipeline rank (1: plain 1F1B)
    precision: str
    optimizer: str
    recompute: str
    zero: int
    sequence_parallel: bool
    mode: str
    fits: bool
    reason: str
    min_chips: int
    memory_bytes: TrainingMemory  # the whole system
    per_chip_memory_bytes: TrainingMemory  # the fullest chip
    placement: dict[str, str]
    step_time_s: float
    tokens_per_s: float
    samples_per_s: float
    mfu: float
    hfu: float
    model_flops_per_step: float
    model_flops_per_s_per_chip: float
    hardware_flops_per_s_per_chip: float
    time_breakdown_s: dict[str, float]  # the slowest stage's step, by what it spends it on
    stash_bytes_per_microbatch: float  # the fullest stage's
    energy_j: float
    avg_power_w: float  # per chip
    tdp_w: float
    bottleneck: str
    limits: list[str] = field(default_factory=list)
    collectives: list[dict[str, Any]] = field(default_factory=list)
    plan_search: dict[str, Any] | None = None
    cost: Cost | None = None  # cost/dollars.py: filled where a price is known
    notes: list[str] = field(default_factory=list)
    ops: list[OpReport] = field(default_factory=list)


def resolve_training_precision(
    chip: Chip, precision: str | DType | None
) -> tuple[DType, list[str]]:
    if precision is None:
        dtype = next((d for d in TRAINING_PRECISIONS if d in chip.peak_ops_per_s), None)
        if dtype is None:
            raise UserError(f"{chip.id} has no bf16, fp16 or fp32 matrix format to train in")
        return dtype, [f"precision not given: trained in {dtype.value}, the first of "
                       f"bf16/fp16/fp32 {chip.id} has"]  # fmt: skip
    dtype = DType.parse(str(precision))
    if dtype not in TRAINING_PRECISIONS:
        raise UserError(
            f"training computes in bf16, fp16 or fp32 (with fp32 master weights), not "
            f"{dtype.value}; {dtype.value} is an inference format here"
        )
    chip.peak(dtype)  # a UserError naming the formats the chip has
    return dtype, []


@in_scope
def simulate_training(
    model: TransformerConfig,
    chip: Chip | System,
    *,
    batch: int = 8,
    prompt: int = 2048,
    precision: str | DType | None = None,
    chips: int | None = None,
    tp: int | None = None,
    pp: int | None = None,
    dp: int | None = None,
    ep: int | None = None,
    microbatches: int | None = None,
    virtual_stages: int = 1,
    recompute: str = "none",
    optimizer: str = "adam",
    zero: int = 0,
    overlap: bool = False,
    sequence_parallel: bool = False,
) -> TrainingResult:
    """One optimizer step of `batch` sequences of `prompt` tokens; with many chips and no
    plan, the fastest plan that fits is searched for."""
    options = dict(locals())  # the keywords as given, beside model and chip
    return _simulate(options.pop("model"), options.pop("chip"), options, detail=True)


@in_scope
def simulate_training_many(
    model: TransformerConfig, jobs: Sequence[tuple[Chip | System, dict[str, Any]]]
) -> list[TrainingResult | UserError]:
    """Many training steps of one model, each a target and `simulate_training`'s options
    (a sweep's points); a job's UserError is returned in its place. Results leave out
    their per-op reports, collectives and limits, which a sweep's rows do not hold, and
    share rank graphs as every simulation does (training_graphs.build_rank)."""
    found: list[TrainingResult | UserError] = []
    for target, options in jobs:
        try:
            found.append(_simulate(model, target, {**_DEFAULTS, **options}, detail=False))
        except UserError as error:
            found.append(error)
    return found


def _simulate(
    model: TransformerConfig, chip: Chip | System, given: dict[str, Any], detail: bool
) -> TrainingResult:
    tp, pp, dp, ep = (given[k] for k in ("tp", "pp", "dp", "ep"))
    check_positive_in(given, ("batch", "prompt", "chips", "tp", "pp", "dp", "ep", "microbatches",
                              "virtual_stages"))
    refuse_untrainable(model)
    system = system_for(chip, plan_chips(chip, given["chips"], tp, pp, dp))
    act, notes = resolve_training_precision(system.chip, given["precision"])
    setup = Setup(given["batch"], given["prompt"], act, optimizer_spec(given["optimizer"]),
                  Recompute.parse(given["recompute"]), check_zero(given["zero"]),
                  given["microbatches"], given["overlap"], given["sequence_parallel"],
                  given["virtual_stages"])  # fmt: skip
    if setup.virtual_stages > 1 and (pp or 1) == 1:
        raise UserError(f"--virtual-stages {setup.virtual_stages} splits each pipeline rank's "
                        "layers into chunks: give --pp > 1")  # fmt: skip
    if system.chips > 1 and all(v is None for v in (tp, pp, dp, ep)):
        return _search(model, system, setup, notes, detail)
    plan = complete_plan(system.chips, tp, pp, dp, ep)
    check_plan(plan, model, system.chips)
    if setup.virtual_stages > -(-model.num_layers // plan.pp):
        raise UserError(f"--virtual-stages {setup.virtual_stages}: a chunk holds at least one "
                        f"layer, and {model.num_layers} layers over {plan.pp} stages give at "
                        f"most {-(-model.num_layers // plan.pp)} per rank")  # fmt: skip
    return run_plan(model, system, plan, setup, notes, detail)


_DEFAULTS = keyword_defaults(simulate_training)


def _microbatches(setup: Setup, plan: Plan) -> tuple[int, int]:
    """(microbatches per replica, sequences per microbatch); one sequence per microbatch
    under pipelining (Megatron-LM's usual choice, the smallest bubble), else one microbatch."""
    if setup.batch % plan.dp:
        raise UserError(f"--batch {setup.batch} does not split over {plan.dp} data-parallel "
                        f"replicas")  # fmt: skip
    per_replica = setup.batch // plan.dp
    m = setup.microbatches or (per_replica if plan.pp > 1 else 1)
    if per_replica % m:
        raise UserError(f"{per_replica} sequences per replica do not split into {m} microbatches")
    return m, per_replica // m


def model_flops_per_token(cfg: TransformerConfig, seq: int) -> float:
    """PaLM's 6 N + 12 L H Q T (appendix B)."""
    n = cfg.active_param_count - (0 if cfg.tie_word_embeddings else cfg.embedding_params)
    return 6 * n + 12 * cfg.num_layers * cfg.num_heads * cfg.head_dim * seq


def _check_supported(cfg: TransformerConfig, plan: Plan) -> None:
    if cfg.is_moe and (plan.tp > 1 or plan.ep > 1):
        raise UserError(
            f"training {cfg.name} with tensor or expert parallelism is not modelled yet "
            "(the backward rules for split experts are missing); use --tp 1 --ep 1"
        )


@dataclass(frozen=True)
class PlanState:
    """What one chip of each stage holds of the training state under a plan: known before
    any graph is built."""

    microbatches: int
    micro_batch: int
    params: list[float]  # parameters one chip of each stage holds
    per_param: StateBytes  # bytes per parameter (weights, gradients, optimizer state)
    states: list[StateBytes]

    @property
    def largest(self) -> float:
        """The fullest stage's state: a chip holding more than it cannot fit the plan,
        whatever its activations."""
        return max(st.total for st in self.states)


@dataclass(frozen=True)
class PlanMemory(PlanState):
    """What one chip of each stage holds under a plan, activations too, and whether the
    fullest fits: all a search needs to know of a plan before costing its step (a plan
    that does not fit cannot win while another fits)."""

    rank: RankTraining
    stash: list[float]
    activations: list[float]
    full: int  # the fullest stage
    fits: bool

    @property
    def total(self) -> float:
        return self.states[self.full].total + self.activations[self.full]


def plan_state(cfg: TransformerConfig, plan: Plan, setup: Setup) -> PlanState:
    """The plan's training state per stage. Raises UserError for a plan the model or batch
    cannot take."""
    _check_supported(cfg, plan)
    m, micro = _microbatches(setup, plan)
    params = weights_per_chip_bytes(cfg, plan, 1.0)
    per_param = bytes_per_param(setup.optimizer, setup.act)
    states = [sharded(per_param, setup.zero, plan.dp).scaled(p) for p in params]
    return PlanState(m, micro, list(params), per_param, states)


def plan_memory(
    cfg: TransformerConfig, system: System, plan: Plan, setup: Setup,
    state: PlanState | None = None,
) -> PlanMemory:  # fmt: skip
    """The plan's memory per stage (`state`: its training state, already worked out).
    Raises UserError for a plan the model or batch cannot take."""
    chip, pp = system.chip, plan.pp
    state = state or plan_state(cfg, plan, setup)
    flag = chip.matrix_unit.explicit_transpose
    rank = build_rank(cfg, plan, state.micro_batch, setup.seq, setup.act, setup.recompute,
                      bool(flag and flag.value), setup.sequence_parallel)  # fmt: skip
    stash = rank.stash_per_stage(pp)
    peaks = rank.peak_per_stage(pp)
    m = state.microbatches
    activations = [peaks[s] + (in_flight(pp, s, m, setup.virtual_stages) - 1) * stash[s]
                   for s in range(pp)]  # fmt: skip
    totals = [st.total + a for st, a in zip(state.states, activations, strict=True)]
    full = int(np.argmax(totals))
    return PlanMemory(**vars(state), rank=rank, stash=stash, activations=activations, full=full,
                      fits=totals[full] <= chip.capacity_bytes)  # fmt: skip


def in_flight(pp: int, s: int, m: int, v: int = 1) -> float:
    """Microbatches whose stash stage s holds at its fullest: pp - s under 1F1B (at most
    m). The interleaved schedule's rank s runs 2 (pp - s - 1) + (v - 1) pp chunk passes
    forward before its first backward (Megatron-LM's warm-up count, core/pipeline_parallel/
    schedules.py, forward_backward_pipelining_with_interleaving), each chunk 1/v of the
    rank's layers: with the one in flight, pp + (pp - 2 s - 1) / v microbatches' stash, at
    most m; on the first stage pp (1 + (pp - 1) / (pp v)), Korthikanti et al. 2022's factor
    (section 4.2.3)."""
    if v == 1:
        return min(pp - s, m)
    return min(pp + (pp - 2 * s - 1) / v, m)


def run_plan(
    cfg: TransformerConfig,
    system: System,
    plan: Plan,
    setup: Setup,
    notes: list[str],
    detail: bool = True,
    memory: PlanMemory | None = None,
) -> TrainingResult:
    """One plan, costed (`memory`: the plan's, already worked out). Without `detail` the
    result leaves out its per-op reports, collectives and limits: a search ranks plans by
    their figures and reports only the one it keeps."""
    mem = memory or plan_memory(cfg, system, plan, setup)
    chip, rank, m, micro = system.chip, mem.rank, mem.microbatches, mem.micro_batch
    params, per_param, states, stash = mem.params, mem.per_param, mem.states, mem.stash
    activations, full, fits = mem.activations, mem.full, mem.fits
    capacity = chip.capacity_bytes
    placement = place(chip, Footprint(states[full].total, 0.0, activations[full]))

    update = rank.update(setup.optimizer, setup.act, setup.zero, plan.dp)
    fwd, bwd, upd = (phase_costs(g, rank, system, plan, placement)
                     for g in (rank.forward, rank.backward, update))  # fmt: skip
    t = timeline(fwd, bwd, upd, rank, system, plan, setup, params, m, micro)
    step = t.step_s

    tokens = setup.batch * setup.seq
    peak = chip.peak(setup.act)
    model_flops = model_flops_per_token(cfg, setup.seq) * tokens
    executed = rank.matrix_flops * m * plan.tp * plan.dp
    group = plan.tp * plan.dp  # chips per stage
    static_w = chip.energy.static_power_w.value
    # every op's dynamic energy, and static power on every chip for the whole step (an op's
    # energy_j holds static power over its own time, which overlap would count twice)
    dynamic = group * float(sum(
        (p.stage_sums("energy_j") - static_w * p.stage_sums("time_s")).sum() * n
        for p, n in ((fwd, m), (bwd, m), (upd, 1))
    ))  # fmt: skip
    energy = dynamic + static_w * system.chips * step
    chip_memory = TrainingMemory.of(states[full], activations[full], capacity)
    system_state = StateBytes(*(sum(getattr(st, k) for st in states) * group
                                for k in ("weights", "gradients", "optimizer_state")))  # fmt: skip
    levels = [level.name for level in chip.memory]
    result = TrainingResult(
        model=cfg.name, chip=chip.id, chips=system.chips, system=system.id, plan=plan.to_dict(),
        batch=setup.batch, prompt=setup.seq, microbatches=m, micro_batch=micro,
        virtual_stages=setup.virtual_stages if plan.pp > 1 else 1,
        precision=setup.act.value, optimizer=setup.optimizer.name,
        recompute=setup.recompute.value, zero=setup.zero,
        sequence_parallel=setup.sequence_parallel and plan.tp > 1, mode="training", fits=fits,
        reason="" if fits else not_fit_reason(chip, chip_memory, system.chips, per_param),
        min_chips=max(1, int(np.ceil(cfg.param_count * per_param.total / capacity))),
        memory_bytes=TrainingMemory.of(system_state, sum(activations) * group,
                                       capacity * system.chips),
        per_chip_memory_bytes=chip_memory,
        placement={role.value: levels[i] for role, i in placement.home.items()},
        step_time_s=step, tokens_per_s=tokens / step, samples_per_s=setup.batch / step,
        mfu=model_flops / (step * system.chips * peak),
        hfu=executed / (step * system.chips * peak),
        model_flops_per_step=model_flops,
        model_flops_per_s_per_chip=model_flops / step / system.chips,
        hardware_flops_per_s_per_chip=executed / step / system.chips,
        time_breakdown_s=t.breakdown, stash_bytes_per_microbatch=stash[full],
        energy_j=energy, avg_power_w=energy / step / system.chips, tdp_w=chip.tdp_w.value,
        bottleneck=_bottleneck(t.breakdown, fwd, bwd, m),
        collectives=collectives(fwd, bwd, system, plan, setup, params) if detail else [],
        notes=notes,
        ops=_op_reports(((fwd, "forward", m), (bwd, "backward", m), (upd, "optimizer", 1)))
        if detail else [],
    )  # fmt: skip
    if detail:
        result.limits = limits(result, chip, system, per_param)
    return result


def _bottleneck(breakdown: dict[str, float], fwd: PhaseCosts, bwd: PhaseCosts, m: int) -> str:
    """The label carrying the most of the step: compute, memory, overhead or interconnect."""
    totals = {"interconnect": breakdown["data_parallel_comm"] + breakdown["pipeline_sends"]}
    for phase in (fwd, bwd):
        labels, times = phase.costs.bottleneck, phase.costs.time_s * phase.table.count
        for label, name in enumerate(("compute", "memory", "overhead", "interconnect")):
            totals[name] = totals.get(name, 0.0) + m * float(times[labels == label].sum())
    return max(totals, key=totals.__getitem__)


def _op_reports(phases: tuple[tuple[PhaseCosts, str, int], ...]) -> list[OpReport]:
    """Every distinct op of one rank, all stages, with its share of all their op time in a
    step (`repeats`: per microbatch or per step)."""
    total = sum(n * float((p.costs.time_s * p.table.count).sum()) for p, _, n in phases)
    reports = []
    for phase, name, repeats in phases:
        c, t = phase.costs, phase.table
        for i, op in enumerate(t.ops):
            label = "recompute" if op.attr("recompute") else name
            reports.append(OpReport(
                phase=label, name=op.name, kind=op.kind.value, count=int(t.count[i]),
                flops=float(t.matrix_flops[i] + t.vector_flops[i]),
                bytes=float(t.role_bytes[:, i].sum()), time_s=float(c.time_s[i]),
                compute_s=float(c.compute_s[i]), memory_s=float(c.memory_s[i]),
                overhead_s=float(c.overhead_s[i]), comm_s=float(c.comm_s[i]),
                energy_j=float(c.energy_j[i]), bottleneck=Bottleneck(int(c.bottleneck[i])).label,
                share=float(repeats * t.count[i] * c.time_s[i] / total),
            ))  # fmt: skip
    return reports


def _score(result: TrainingResult) -> tuple:
    """Fitting first, then step time; when nothing fits, the plan closest to fitting."""
    if not result.fits:
        return (True, result.per_chip_memory_bytes.total)
    return (False, result.step_time_s)


def _memories(
    cfg: TransformerConfig, system: System, setup: Setup, states: list[tuple[Plan, PlanState]]
) -> list[tuple[Plan, PlanMemory]]:
    """The plans' memory, in their order, less those the model's graphs cannot take."""
    found = []
    for plan, state in states:
        try:
            found.append((plan, plan_memory(cfg, system, plan, setup, state)))
        except UserError:
            continue
    return found


def _search(
    cfg: TransformerConfig, system: System, setup: Setup, notes: list[str], detail: bool
) -> TrainingResult:
    start = time.perf_counter()
    plans = candidate_plans(cfg, system.chips)
    states: list[tuple[Plan, PlanState]] = []
    for plan in plans:
        try:
            states.append((plan, plan_state(cfg, plan, setup)))
        except UserError:  # the batch does not split over this plan's replicas, ...
            continue
    # A plan whose training state alone overflows a chip cannot fit: its graphs are built
    # (for its activations) only if fewer than two plans fit, when the plans that do not
    # are ranked by how close they come.
    capacity = system.chip.capacity_bytes
    memories = _memories(cfg, system, setup, [s for s in states if s[1].largest <= capacity])
    if sum(mem.fits for _, mem in memories) < 2:
        order = {plan: i for i, (plan, _) in enumerate(states)}  # the candidates' order
        overflowing = _memories(cfg, system, setup,
                                [s for s in states if s[1].largest > capacity])  # fmt: skip
        memories = sorted(memories + overflowing, key=lambda found: order[found[0]])
    if not memories:
        raise UserError(
            f"no parallelism plan trains {cfg.name} on {system.chips} chips with batch "
            f"{setup.batch}: give --tp/--pp/--dp or a batch that splits over the replicas"
        )

    def costed(plan: Plan, mem: PlanMemory) -> TrainingResult:
        return run_plan(cfg, system, plan, setup, list(notes), False, mem)

    # The order of _score: plans that fit by step time, then the others by memory. While
    # any plan fits, one that does not is costed only if it is the runner-up.
    fitting = sorted(((p, mem, costed(p, mem)) for p, mem in memories if mem.fits),
                     key=lambda found: _score(found[2]))  # fmt: skip
    rest = sorted(((p, mem, None) for p, mem in memories if not mem.fits),
                  key=lambda found: found[1].total)  # fmt: skip
    ranked = fitting + rest
    runner = None
    if len(ranked) > 1:
        plan, mem, result = ranked[1]
        runner = result or costed(plan, mem)
    plan, mem, _ = ranked[0]
    best = run_plan(cfg, system, plan, setup, list(notes), detail, mem)
    best.plan_search = {
        "objective": "step time",
        "candidates": len(plans),
        "feasible": len(fitting),
        "chosen": best.plan,
        "runner_up": runner and {"plan": runner.plan, "fits": runner.fits,
                                 "step_time_s": runner.step_time_s, "mfu": runner.mfu},
        "search_s": time.perf_counter() - start,
    }  # fmt: skip
    return best


register("llm", "training", simulate_training, batched=simulate_training_many)
