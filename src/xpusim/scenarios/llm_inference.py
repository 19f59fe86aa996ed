"""LLM inference on one chip or a system of many: a prefill, then decode against a growing cache.

Timeline of one microbatch (`batch` sequences): its prefill crosses every pipeline stage and
yields the first token (TTFT); each of the other gen - 1 tokens takes one decode step, the
new token attending to prompt + 1 ... prompt + gen - 1 keys, and crosses every stage again.
A pipeline of pp stages keeps `microbatches` (default pp) of them in flight, so the time
between a sequence's tokens (TPOT) is

    max(sum of the stage times + sends,  microbatches x slowest stage)

the first term being a token's trip through the pipeline and the second the stages' turn
at each microbatch. More stages therefore add sequences in flight (throughput) but never
shorten a token's trip (per-user speed): Groq's explanation of its design. Tensor
parallelism shortens every stage until its all-reduces dominate; data parallelism adds
replicas. latency = TTFT + (microbatches - 1) x slowest prefill stage + (gen - 1) x TPOT.
With gen = 1 TPOT is still reported for the step that would follow.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from xpusim.compiler.memory_plan import Footprint, min_chips, place
from xpusim.compiler.partition import Plan, check_plan, stage_of_layer, weights_per_chip_bytes
from xpusim.cost.collectives import Collective, collective_time
from xpusim.cost.op_table import OpTable
from xpusim.cost.roofline import Bottleneck, OpCosts
from xpusim.errors import check_positive
from xpusim.hardware.spec import Chip
from xpusim.hardware.system import System, default_system, host_system
from xpusim.ir.dtypes import DType
from xpusim.result import Result
from xpusim.scenarios.formats import resolve_formats
from xpusim.scenarios.rank_costs import (
    PhaseCosts,
    Request,
    collective_algorithms,
    cost_phases,
    rank_graphs,
)
from xpusim.workloads.transformer_config import TransformerConfig


@dataclass
class OpReport:
    phase: str
    name: str
    kind: str
    count: int  # in the graph one chip group runs, all pipeline stages together
    flops: float
    bytes: float
    time_s: float
    compute_s: float
    memory_s: float
    overhead_s: float
    comm_s: float
    energy_j: float
    bottleneck: str
    share: float  # of the phase's critical path, all instances included


@dataclass
class MemoryBytes:
    weights: float
    kv_cache: float
    activations: float
    total: float
    capacity: float

    @classmethod
    def of(cls, fp: Footprint, capacity: float) -> MemoryBytes:
        return cls(fp.weights, fp.kv_cache, fp.activations, fp.total, capacity)


@dataclass
class LLMInferenceResult(Result):
    model: str
    chip: str
    chips: int
    system: str
    plan: dict[str, int]
    microbatches: int
    sequences_in_flight: int
    batch: int
    prompt: int
    gen: int
    precision: str
    weight_precision: str
    mode: str
    fits: bool
    reason: str
    min_chips: int
    memory_bytes: MemoryBytes  # the whole system
    per_chip_memory_bytes: MemoryBytes  # the fullest chip
    placement: dict[str, str]
    ttft_s: float
    tpot_s: float
    latency_s: float
    tokens_per_s: float
    tokens_per_s_per_user: float
    energy_j: float
    joules_per_token: float
    avg_power_w: float  # per chip, to compare with tdp_w
    tdp_w: float
    bottleneck: str
    comm_s: float  # communication on one token's path through the system
    comm_share: float  # of that path's time
    prefill_flops: float
    decode_flops_per_step: float
    collectives: list[dict[str, Any]] = field(default_factory=list)
    plan_search: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    ops: list[OpReport] = field(default_factory=list)


def resolve_system(target: Chip | System, chips: int | None) -> System:
    """A chip with --chips N becomes its default system; a system takes --chips as its size."""
    if isinstance(target, System):
        return target.with_chips(chips) if chips else target
    if chips and chips > 1:
        return default_system(target, chips)
    return host_system(target, 1)


def complete_plan(chips: int, tp: int | None, pp: int | None, dp: int | None,
                  ep: int | None) -> Plan:  # fmt: skip
    """Missing degrees are 1, except dp, which takes up the chips the others leave."""
    tp, pp, ep = tp or 1, pp or 1, ep or 1
    return Plan(tp=tp, pp=pp, dp=dp or max(chips // (tp * pp * ep), 1), ep=ep)


def simulate(
    model: TransformerConfig,
    chip: Chip | System,
    *,
    batch: int = 1,
    prompt: int = 128,
    gen: int = 128,
    precision: str | DType | None = None,
    weight_precision: str | DType | None = None,
    chips: int | None = None,
    tp: int | None = None,
    pp: int | None = None,
    dp: int | None = None,
    ep: int | None = None,
    microbatches: int | None = None,
    objective: str = "latency",
    overlap: bool = False,
) -> LLMInferenceResult:
    """Simulates serving one batch; with many chips and no plan, searches for the best plan."""
    check_positive(batch=batch, prompt=prompt, gen=gen, chips=chips, tp=tp, pp=pp, dp=dp,
                    ep=ep, microbatches=microbatches)  # fmt: skip
    system = resolve_system(chip, chips)
    act, weight, notes = resolve_formats(system.chip, precision, weight_precision)
    req = Request(batch, prompt, gen, act, weight)
    if system.chips > 1 and all(v is None for v in (tp, pp, dp, ep)):
        from xpusim.scenarios.plan_search import search

        return search(model, system, req, microbatches, objective, overlap, notes)
    plan = complete_plan(system.chips, tp, pp, dp, ep)
    check_plan(plan, model, system.chips)
    return run_plan(model, system, plan, req, microbatches, overlap, notes)


def stage_footprints(
    cfg: TransformerConfig, plan: Plan, req: Request, microbatches: int, activations: float
) -> list[Footprint]:
    """What one chip of each pipeline stage holds."""
    weights = weights_per_chip_bytes(cfg, plan, req.weight.itemsize)
    layers = stage_of_layer(cfg.num_layers, plan.pp)
    kv_heads = max(1, -(-cfg.num_kv_heads // plan.tp))
    kv_per_layer = (req.batch * microbatches * (req.prompt + req.gen)
                    * 2 * kv_heads * cfg.head_dim * req.act.itemsize)  # fmt: skip
    return [
        Footprint(weights[s], kv_per_layer * layers.count(s), activations) for s in range(plan.pp)
    ]


def run_plan(
    cfg: TransformerConfig,
    system: System,
    plan: Plan,
    req: Request,
    microbatches: int | None,
    overlap: bool,
    notes: list[str],
) -> LLMInferenceResult:
    """One plan, costed; the rank's graphs are memoized (rank_costs.py), so the plans of a
    search and the chips of a sweep share them."""
    chip, pp = system.chip, plan.pp
    m = microbatches or pp
    graphs = rank_graphs(cfg, req, plan)
    stages = stage_footprints(cfg, plan, req, m, graphs.activation_bytes)
    fullest = max(stages, key=lambda f: f.total)
    capacity = chip.capacity_bytes
    fits = fullest.total <= capacity
    placement = place(chip, fullest)
    prefill, decode = cost_phases(graphs, cfg, system, plan, placement)

    def stage_times(phase: PhaseCosts) -> np.ndarray:
        total = phase.stage_sums(phase.costs.time_s, pp)
        if not overlap:
            return total
        comm = phase.stage_sums(phase.costs.time_s, pp, phase.is_comm)
        return np.maximum(total - comm, comm)

    def send_s(tokens: int) -> float:
        nbytes = req.batch * tokens * cfg.hidden_size * req.act.itemsize
        span = plan.tp * plan.ep * pp
        return collective_time(system, Collective.SEND_RECV, nbytes, 2, span).time_s

    pre, dec = stage_times(prefill), stage_times(decode)  # (pp,), (steps, pp)
    send_pre, send_dec = (send_s(req.prompt), send_s(1)) if pp > 1 else (0.0, 0.0)
    ttft_s = float(pre.sum()) + (pp - 1) * send_pre
    trip = dec.sum(axis=-1) + (pp - 1) * send_dec
    tpot_s = float(np.maximum(trip, m * dec.max(axis=-1)).mean())
    decode_steps = req.gen - 1
    latency_s = ttft_s + (m - 1) * float(pre.max()) + decode_steps * tpot_s

    # Energy: every chip's ops, then static power for the time each chip waits.
    group_chips = plan.tp * plan.ep * plan.dp
    static_w = chip.energy.static_power_w.value
    busy_s = m * (float(pre.sum()) + decode_steps * float(dec.sum(axis=-1).mean()))
    op_energy = m * (_phase_energy(prefill, pre, static_w, pp)
                     + decode_steps * _phase_energy(decode, dec, static_w, pp))  # fmt: skip
    idle_s = system.chips * latency_s - group_chips * busy_s
    energy_j = group_chips * op_energy + static_w * idle_s
    tokens = req.batch * m * plan.dp * req.gen

    send_total_s = (pp - 1) * (send_pre + decode_steps * send_dec)
    comm_s = float(decode.stage_sums(decode.costs.time_s, pp, decode.is_comm).sum(-1).mean())
    comm_s += (pp - 1) * send_dec
    ops = _op_reports("prefill", prefill.table, prefill.costs, ttft_s)
    ops += _op_reports("decode", decode.table, _mean_over_steps(decode.costs), float(trip.mean()),
                       graphs.decode_table)  # fmt: skip
    level_names = [level.name for level in chip.memory]
    kv_bytes = (
        req.batch * m * (req.prompt + req.gen) * cfg.kv_cache_bytes_per_token(req.act.itemsize)
    )
    single_copy = Footprint(
        cfg.param_count * req.weight.itemsize, kv_bytes, graphs.activation_bytes
    )
    system_fp = Footprint(
        sum(s.weights for s in stages) * plan.tp * plan.ep * plan.dp,
        sum(s.kv_cache for s in stages) * plan.tp * plan.ep * plan.dp,
        graphs.activation_bytes * system.chips,
    )
    return LLMInferenceResult(
        model=cfg.name,
        chip=chip.id,
        chips=system.chips,
        system=system.id,
        plan=plan.to_dict(),
        microbatches=m,
        sequences_in_flight=req.batch * m * plan.dp,
        batch=req.batch,
        prompt=req.prompt,
        gen=req.gen,
        precision=req.act.value,
        weight_precision=req.weight.value,
        mode="inference",
        fits=fits,
        reason="" if fits else _not_fit_reason(chip, fullest, system.chips),
        min_chips=min_chips(single_copy, capacity),
        memory_bytes=MemoryBytes.of(system_fp, capacity * system.chips),
        per_chip_memory_bytes=MemoryBytes.of(fullest, capacity),
        placement={role.value: level_names[i] for role, i in placement.home.items()},
        ttft_s=ttft_s,
        tpot_s=tpot_s,
        latency_s=latency_s,
        tokens_per_s=tokens / latency_s,
        tokens_per_s_per_user=1.0 / tpot_s,
        energy_j=energy_j,
        joules_per_token=energy_j / tokens,
        avg_power_w=energy_j / latency_s / system.chips,
        tdp_w=chip.tdp_w.value,
        bottleneck=_overall_bottleneck(ops, decode_steps, send_total_s),
        comm_s=comm_s,
        comm_share=comm_s / float(trip.mean()),
        prefill_flops=graphs.flops[0] * plan.tp * plan.ep,
        decode_flops_per_step=graphs.flops[1] * plan.tp * plan.ep,
        collectives=collective_algorithms(decode.table, system, plan),
        notes=notes,
        ops=ops,
    )


def _phase_energy(phase: PhaseCosts, stage_s: np.ndarray, static_w: float, pp: int) -> float:
    """Energy of one microbatch's pass through all stages, on one chip of each stage.

    With overlap, a stage takes less than the sum of its ops' times; the static energy of
    the hidden time was counted in both overlapped ops and is taken back once.
    """
    energy = phase.stage_sums(phase.costs.energy_j, pp)
    hidden = phase.stage_sums(phase.costs.time_s, pp) - stage_s
    return float((energy - static_w * hidden).sum(axis=-1).mean())


def _mean_over_steps(costs: OpCosts) -> OpCosts:
    return OpCosts(*(getattr(costs, f).mean(axis=0) for f in OpCosts.__dataclass_fields__))


def _op_reports(
    phase: str, table: OpTable, costs: OpCosts, phase_s: float, values: OpTable | None = None
) -> list[OpReport]:
    values = values or table
    flops = np.atleast_2d(values.matrix_flops + values.vector_flops).mean(axis=0)
    moved = np.atleast_2d(values.role_bytes.sum(axis=-2)).mean(axis=0)
    labels = costs.bottleneck
    return [
        OpReport(
            phase=phase,
            name=op.name,
            kind=op.kind.value,
            count=int(table.count[i]),
            flops=float(flops[i]),
            bytes=float(moved[i]),
            time_s=float(costs.time_s[i]),
            compute_s=float(costs.compute_s[i]),
            memory_s=float(costs.memory_s[i]),
            overhead_s=float(costs.overhead_s[i]),
            comm_s=float(costs.comm_s[i]),
            energy_j=float(costs.energy_j[i]),
            bottleneck=Bottleneck(int(labels[i])).label,
            share=float(table.count[i] * costs.time_s[i] / phase_s) if phase_s else 0.0,
        )
        for i, op in enumerate(table.ops)
    ]


def _overall_bottleneck(ops: list[OpReport], decode_steps: int, send_s: float) -> str:
    """The label carrying the most time over one request's path through the system."""
    totals = {Bottleneck.INTERCONNECT.label: send_s}
    for op in ops:
        weight = decode_steps if op.phase == "decode" else 1
        totals[op.bottleneck] = totals.get(op.bottleneck, 0.0) + op.count * op.time_s * weight
    return max(totals, key=totals.__getitem__)


def _not_fit_reason(chip: Chip, fp: Footprint, chips: int) -> str:
    gb = 1e9
    where = f"{chip.id} holds" if chips == 1 else f"each of the {chips} {chip.id} chips holds"
    return (
        f"memory: the fullest chip needs {fp.total / gb:.1f} GB (weights {fp.weights / gb:.1f}, "
        f"KV cache {fp.kv_cache / gb:.2f}, activations {fp.activations / gb:.2f}) but {where} "
        f"{chip.capacity_bytes / gb:.2f} GB"
    )
