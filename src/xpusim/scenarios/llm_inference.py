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

import inspect
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from itertools import repeat
from typing import Any, NamedTuple

import numpy as np

from xpusim.compiler.memory_plan import (
    Footprint,
    Placement,
    footprint_matters,
    min_chips,
    place,
)
from xpusim.compiler.partition import Plan, check_plan, stage_of_layer, weights_per_chip_bytes
from xpusim.cost.collectives import Collective, CollectiveLine, collective_line
from xpusim.cost.op_table import OpTable
from xpusim.cost.roofline import Bottleneck, OpCosts
from xpusim.errors import UserError, check_positive
from xpusim.hardware.spec import Chip
from xpusim.hardware.system import System, default_system, host_system
from xpusim.ir.dtypes import DType
from xpusim.memo import ByIdentity
from xpusim.result import Result
from xpusim.scenarios.formats import resolve_attention_format, resolve_formats
from xpusim.scenarios.rank_costs import (
    PhaseCosts,
    Request,
    ShapeGraphs,
    collective_algorithms,
    cost_phases,
    ordered_sum,
    shape_graphs,
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


def simulate(
    model: TransformerConfig,
    chip: Chip | System,
    *,
    batch: int = 1,
    prompt: int = 128,
    gen: int = 128,
    precision: str | DType | None = None,
    weight_precision: str | DType | None = None,
    attention_precision: str | DType | None = None,
    chips: int | None = None,
    tp: int | None = None,
    pp: int | None = None,
    dp: int | None = None,
    ep: int | None = None,
    microbatches: int | None = None,
    objective: str = "latency",
    overlap: bool = False,
) -> LLMInferenceResult:
    """Simulates serving one batch; with many chips and no plan, searches for the best plan.

    `attention_precision` is the format attention computes in when the engine runs it wider
    than `precision` (TensorRT-LLM's FP8 engines of 2024 ran it in FP16); None: `precision`.
    """
    options = dict(batch=batch, prompt=prompt, gen=gen, precision=precision,
                   weight_precision=weight_precision, attention_precision=attention_precision,
                   chips=chips, tp=tp, pp=pp, dp=dp, ep=ep,
                   microbatches=microbatches, objective=objective, overlap=overlap)  # fmt: skip
    (result,) = simulate_many(model, [(chip, options)], detail=True)
    if isinstance(result, UserError):
        raise result
    return result


def simulate_many(
    model: TransformerConfig,
    jobs: Sequence[tuple[Chip | System, dict[str, Any]]],
    detail: bool = False,
) -> list[LLMInferenceResult | UserError]:
    """Many simulations of one model, each a target and `simulate`'s options, costed together.

    Every plan of every job that shares a request, tp, ep, pipeline depth and microbatches
    is costed by one array computation (scenarios/rank_costs.py), which is what makes a
    sweep of thousands of points and a plan search over hundreds of plans fast. A job whose
    options its target cannot take gets the UserError in its place. Without `detail`,
    results leave out their per-op reports and collectives (a sweep's rows do not hold them).
    """
    setups: list[Setup | UserError] = []
    for target, options in jobs:
        try:
            setups.append(_setup(model, target, options))
        except UserError as error:
            setups.append(error)
    ready = [s for s in setups if isinstance(s, Setup)]
    # one graph per format and (tp, ep) over every request that needs it (shapes as arrays)
    requests: dict[tuple, dict[Request, None]] = {}
    for setup in ready:
        for plan in setup.plans:
            requests.setdefault(_group(setup.req, plan), {})[setup.req] = None
    graphs = {key: shape_graphs(model, list(reqs), key[1], key[2])
              for key, reqs in requests.items()}  # fmt: skip
    groups: dict[tuple, list[Candidate]] = {}
    for setup in ready:
        _candidates(model, setup, graphs)
        for cand in setup.costed:
            groups.setdefault(_group(cand.req, cand.plan), []).append(cand)
    for cands in groups.values():
        for cand, costed in zip(cands, _cost(model, cands).rows(), strict=True):
            cand.metrics = costed
    return [s if isinstance(s, UserError) else _choose(model, s, detail) for s in setups]


def _group(req: Request, plan: Plan) -> tuple:
    """Candidates whose graphs are one ShapeGraphs: the same formats, tp and ep."""
    return req.formats, plan.tp, plan.ep


_DEFAULTS = {
    name: p.default
    for name, p in inspect.signature(simulate).parameters.items()
    if p.kind is inspect.Parameter.KEYWORD_ONLY
}


@dataclass
class Candidate:
    """One plan for one job, with its memory and, once costed, its metrics."""

    system: System
    plan: Plan
    req: Request
    microbatches: int
    overlap: bool
    graphs: ShapeGraphs  # the graphs its rank runs, its request among theirs
    row: int  # its request's position on their shape axis
    memory: StageMemory
    fullest: Footprint  # the stage whose chip holds the most
    fits: bool

    metrics: Costed = field(init=False)  # set once costed

    @cached_property
    def placement(self) -> Placement:
        """Where the fullest chip keeps what; the same for every footprint on a chip whose
        one memory holds everything."""
        chip, fullest = self.system.chip, self.fullest
        key = fullest if footprint_matters(chip) else None
        return _PLACED.get((chip,), key, lambda: place(chip, fullest))


_PLACED: ByIdentity[Placement] = ByIdentity()


@dataclass
class Setup:
    """A job resolved: its system, request, the plans to consider and, once their graphs
    are built, the candidates worth costing."""

    system: System
    req: Request
    notes: list[str]
    plans: list[Plan]  # one when the plan was given
    microbatches: int | None
    overlap: bool
    objective: str | None  # None when the plan was given
    started_s: float
    costed: list[Candidate] = field(default_factory=list)  # fit, or the one closest to it
    feasible: int = 0


def _setup(cfg: TransformerConfig, target: Chip | System, options: dict[str, Any]) -> Setup:
    """A job's options (simulate's keywords; those not given take simulate's defaults)
    resolved into a system, a request and the plans to consider."""
    given = {**_DEFAULTS, **options}
    batch, prompt, gen, chips = (given[k] for k in ("batch", "prompt", "gen", "chips"))
    tp, pp, dp, ep = (given[k] for k in ("tp", "pp", "dp", "ep"))
    microbatches, objective, overlap = (given[k] for k in ("microbatches", "objective",
                                                           "overlap"))  # fmt: skip
    precision, weight_precision = given["precision"], given["weight_precision"]
    started_s = time.perf_counter()
    check_positive(batch=batch, prompt=prompt, gen=gen, chips=chips, tp=tp, pp=pp, dp=dp,
                    ep=ep, microbatches=microbatches)  # fmt: skip
    system = resolve_system(target, chips)
    act, weight, notes = resolve_formats(system.chip, precision, weight_precision)
    attention = resolve_attention_format(system.chip, act, given["attention_precision"])
    req = Request(batch, prompt, gen, act, weight, attention)
    searched = system.chips > 1 and all(v is None for v in (tp, pp, dp, ep))
    if searched:
        from xpusim.scenarios.plan_search import OBJECTIVES, candidate_plans

        if objective not in OBJECTIVES:
            raise UserError(f"unknown objective {objective!r}; choose latency or throughput")
        plans = candidate_plans(cfg, system.chips)
        if not plans:
            raise UserError(f"no parallelism plan splits {cfg.name} over {system.chips} chips")
    else:
        plans = [complete_plan(system.chips, tp, pp, dp, ep)]
        check_plan(plans[0], cfg, system.chips)
    return Setup(system, req, notes, plans, microbatches, overlap,
                 objective if searched else None, started_s)  # fmt: skip


def _candidates(cfg: TransformerConfig, setup: Setup, graphs: dict[tuple, ShapeGraphs]) -> None:
    """The setup's plans with their memory, and which of them are worth costing: only
    plans that fit are; when none does, the one closest to fitting is."""
    req, capacity = setup.req, setup.system.chip.capacity_bytes
    cands = []
    for plan in setup.plans:
        shapes = graphs[_group(req, plan)]
        row = shapes.row[req]
        m = setup.microbatches or plan.pp
        memory = stage_memory(cfg, plan, req.weight, req.act)
        fullest = memory.fullest(req, m, float(shapes.activation_bytes[row]))
        cands.append(Candidate(setup.system, plan, req, m, setup.overlap, shapes, row, memory,
                               fullest, fullest.total <= capacity))  # fmt: skip
    feasible = [c for c in cands if c.fits]
    setup.costed = feasible or [min(cands, key=lambda c: c.fullest.total)]
    setup.feasible = len(feasible)


def resolve_system(target: Chip | System, chips: int | None) -> System:
    """A chip with --chips N becomes its default system; a system takes --chips as its size.
    Kept per target object and size: a sweep asks for each thousands of times."""
    return _SYSTEMS.get((target,), chips, lambda: _resolve_system(target, chips))


def _resolve_system(target: Chip | System, chips: int | None) -> System:
    if isinstance(target, System):
        return target.with_chips(chips) if chips else target
    if chips and chips > 1:
        return default_system(target, chips)
    return host_system(target, 1)


_SYSTEMS: ByIdentity[System] = ByIdentity()


def complete_plan(chips: int, tp: int | None, pp: int | None, dp: int | None,
                  ep: int | None) -> Plan:  # fmt: skip
    """Missing degrees are 1, except dp, which takes up the chips the others leave."""
    tp, pp, ep = tp or 1, pp or 1, ep or 1
    return Plan(tp=tp, pp=pp, dp=dp or max(chips // (tp * pp * ep), 1), ep=ep)


@dataclass(frozen=True)
class StageMemory:
    """What one chip of each pipeline stage holds apart from the request's KV cache and
    activations, and how many layers' caches: the same for every request of a plan."""

    weights: tuple[float, ...]  # bytes per stage
    layers: tuple[int, ...]  # per stage
    kv_bytes_per_token_layer: float  # one chip's cache per token in flight and layer

    def footprints(self, req: Request, microbatches: int,
                   activations: float) -> tuple[Footprint, ...]:  # fmt: skip
        """What one chip of each stage holds (its peak `activations` among them)."""
        kv = self.kv_bytes(req, microbatches)
        return tuple(Footprint(w, kv * n, activations)
                     for w, n in zip(self.weights, self.layers, strict=True))  # fmt: skip

    def fullest(self, req: Request, microbatches: int, activations: float) -> Footprint:
        """The footprint of the stage whose chip holds the most (the first such)."""
        kv = self.kv_bytes(req, microbatches)
        totals = [w + kv * n for w, n in zip(self.weights, self.layers, strict=True)]
        s = totals.index(max(totals))
        return Footprint(self.weights[s], kv * self.layers[s], activations)

    def kv_bytes(self, req: Request, microbatches: int) -> float:
        """One layer's cache on one chip."""
        tokens = req.batch * microbatches * (req.prompt + req.gen)
        return tokens * self.kv_bytes_per_token_layer


@lru_cache(maxsize=4096)  # a sweep asks again for every shape, chip and what-if of a plan
def stage_memory(cfg: TransformerConfig, plan: Plan, weight: DType, act: DType) -> StageMemory:
    layers = stage_of_layer(cfg.num_layers, plan.pp)
    kv_heads = max(1, -(-cfg.num_kv_heads // plan.tp))
    return StageMemory(weights_per_chip_bytes(cfg, plan, weight.itemsize),
                       tuple(layers.count(s) for s in range(plan.pp)),
                       2 * kv_heads * cfg.head_dim * act.itemsize)  # fmt: skip


@dataclass(frozen=True)
class Metrics:
    """The costed timeline of K candidates of one group, each figure a (K,) array."""

    ttft_s: np.ndarray
    tpot_s: np.ndarray
    latency_s: np.ndarray
    energy_j: np.ndarray
    comm_s: np.ndarray
    trip_s: np.ndarray  # a token's mean trip through the pipeline
    bottleneck: np.ndarray  # Bottleneck carrying the most of a request's time
    phases: tuple[PhaseCosts, PhaseCosts]

    def rows(self) -> list[Costed]:
        """Each candidate's figures, as Python numbers."""
        figures = (self.ttft_s, self.tpot_s, self.latency_s, self.energy_j, self.comm_s,
                   self.trip_s)  # fmt: skip
        labels = [_LABELS[b] for b in self.bottleneck.tolist()]
        k = len(labels)
        rows = zip(*(f.tolist() for f in figures), labels, repeat(self.phases, k), range(k),
                   strict=True)  # fmt: skip
        # tuple.__new__ makes each Costed from its values in C: Costed(*values) would call
        # the named tuple's Python-level __new__ once per candidate of a sweep
        return list(map(tuple.__new__, repeat(Costed, k), rows))


_LABELS = [b.label for b in Bottleneck]


class Costed(NamedTuple):
    """One candidate's costed timeline (see Metrics), and where its per-op costs are."""

    ttft_s: float
    tpot_s: float
    latency_s: float
    energy_j: float
    comm_s: float
    trip_s: float
    bottleneck: str
    phases: tuple[PhaseCosts, PhaseCosts]
    k: int  # its position in the phases' arrays


def _cost(cfg: TransformerConfig, cands: list[Candidate]) -> Metrics:
    """The timeline of one microbatch (see the module docstring) for every candidate; they
    share formats, tp and ep (one ShapeGraphs), and each has its own request, depth,
    microbatches and overlap."""
    graphs = cands[0].graphs
    rows = np.array([c.row for c in cands])
    batch, prompt, gen = (np.array(v) for v in zip(*[(c.req.batch, c.req.prompt, c.req.gen)
                                                    for c in cands], strict=True))  # fmt: skip
    pp, m, overlap = (np.array(v) for v in zip(*[(c.plan.pp, c.microbatches, c.overlap)
                                                  for c in cands], strict=True))  # fmt: skip
    prefill, decode = cost_phases(graphs, rows, [c.system for c in cands],
                                  [c.placement for c in cands], cands[0].plan, pp)  # fmt: skip

    def stage_times(phase: PhaseCosts) -> np.ndarray:  # (K, steps, stages)
        total = phase.stage_sums("time_s")
        if not overlap.any():
            return total
        comm = phase.stage_sums("time_s", comm_only=True)
        return np.where(overlap[:, None, None], np.maximum(total - comm, comm), total)

    # a pipeline's sends (pp > 1 only), by topology and the chips they span
    lines: dict[tuple[int, int], CollectiveLine] = {}
    for c in cands:
        key = (id(c.system.levels), c.plan.pp)
        if c.plan.pp > 1 and key not in lines:
            span = c.plan.tp * c.plan.ep * c.plan.pp
            lines[key] = collective_line(c.system, Collective.SEND_RECV, 2, span)
    none = CollectiveLine(0.0, 0.0, "none", "")  # one stage sends nothing
    send = [lines.get((id(c.system.levels), c.plan.pp), none) for c in cands]
    send_fixed_s, send_s_per_byte = (np.array(v) for v in zip(
        *[(line.fixed_s, line.s_per_byte) for line in send], strict=True))
    itemsize = cands[0].req.act.itemsize

    def send_s(tokens: np.ndarray) -> np.ndarray:
        return send_fixed_s + send_s_per_byte * (batch * tokens * cfg.hidden_size * itemsize)

    pre, dec = stage_times(prefill)[:, 0], stage_times(decode)  # (K, stages), (K, steps, stages)
    send_pre, send_dec = send_s(prompt), send_s(np.ones_like(prompt))
    ttft_s = _over_stages(pre) + (pp - 1) * send_pre
    trip = _over_stages(dec) + ((pp - 1) * send_dec)[:, None]
    tpot_s = decode.step_mean(np.maximum(trip, m[:, None] * dec.max(axis=-1)))
    decode_steps = gen - 1
    latency_s = ttft_s + (m - 1) * pre.max(axis=-1) + decode_steps * tpot_s

    # Energy: every chip's ops, then static power for the time each chip waits.
    static_w = np.array([c.system.chip.energy.static_power_w.value for c in cands])
    group_chips = np.array([c.plan.tp * c.plan.ep * c.plan.dp for c in cands])
    chips = np.array([c.system.chips for c in cands])
    busy_s = m * (_over_stages(pre) + decode_steps * decode.step_mean(_over_stages(dec)))
    overlapped = bool(overlap.any())
    op_energy = m * (_phase_energy(prefill, pre[:, None], static_w, overlapped)
                     + decode_steps * _phase_energy(decode, dec, static_w, overlapped))  # fmt: skip
    energy_j = group_chips * op_energy + static_w * (chips * latency_s - group_chips * busy_s)

    comm_s = decode.step_mean(decode.totals("time_s", comm_only=True))
    comm_s += (pp - 1) * send_dec
    send_total_s = (pp - 1) * (send_pre + decode_steps * send_dec)
    return Metrics(
        ttft_s, tpot_s, latency_s, energy_j, comm_s, decode.step_mean(trip),
        _bottleneck(prefill, decode, decode_steps, send_total_s), (prefill, decode),
    )  # fmt: skip


def _over_stages(values: np.ndarray) -> np.ndarray:
    """Sum over the stage axis (last); a shallow pipeline costed beside deeper ones has
    trailing stages of zeros, which an ordered sum adds exactly."""
    return ordered_sum(values, axis=-1)


def _phase_energy(
    phase: PhaseCosts, stage_s: np.ndarray, static_w: np.ndarray, overlapped: bool
) -> np.ndarray:
    """Energy of one microbatch's pass through all stages, on one chip of each stage.

    With overlap, a stage takes less than the sum of its ops' times; the static energy of
    the hidden time was counted in both overlapped ops and is taken back once.
    """
    energy = phase.totals("energy_j")
    if overlapped:
        hidden = _over_stages(phase.stage_sums("time_s")) - _over_stages(stage_s)
        energy = energy - static_w[:, None] * hidden
    return phase.step_mean(energy)


def _bottleneck(
    prefill: PhaseCosts, decode: PhaseCosts, decode_steps: np.ndarray, send_s: np.ndarray
) -> np.ndarray:
    """The label carrying the most time over one request's path: each op's time (decode's
    averaged over the steps) goes to its own bottleneck; pipeline sends to interconnect."""
    totals = np.zeros((len(send_s), len(Bottleneck)))
    totals[:, Bottleneck.INTERCONNECT] = send_s
    for phase, repeats in ((prefill, np.ones(1)), (decode, decode_steps)):
        mean = [phase.op_mean(f)
                for f in ("compute_s", "memory_s", "overhead_s", "comm_s", "time_s")]  # (K, n)
        labels = np.argmax(np.stack(mean[:4]), axis=0)
        time = mean[4] * phase.table.count * repeats[:, None]
        for label in Bottleneck:
            totals[:, label] += np.where(labels == label, time, 0.0).sum(axis=-1)
    return np.argmax(totals, axis=-1)


def _score(cand: Candidate, objective: str) -> tuple:
    """Smaller is better: fitting first, then the objective, then the other one.

    When nothing fits, the plan closest to fitting is the useful answer, not the fastest.
    """
    if not cand.fits:
        return (True, cand.fullest.total)
    tokens_per_s = _tokens(cand) / cand.metrics.latency_s
    if objective == "latency":
        return (False, cand.metrics.tpot_s, cand.metrics.ttft_s, -tokens_per_s)
    return (False, -tokens_per_s, cand.metrics.tpot_s)


def _tokens(cand: Candidate) -> int:
    return cand.req.batch * cand.microbatches * cand.plan.dp * cand.req.gen


def _choose(cfg: TransformerConfig, setup: Setup, detail: bool) -> LLMInferenceResult:
    """The job's result: its plan's, or the best of its search with the search's summary."""
    if setup.objective is None:
        return _result(cfg, setup, setup.costed[0], detail)
    ranked = sorted(setup.costed, key=lambda c: _score(c, str(setup.objective)))
    best = _result(cfg, setup, ranked[0], detail)
    runner_up = ranked[1] if len(ranked) > 1 else None
    best.plan_search = {
        "objective": setup.objective,
        "candidates": len(setup.plans),
        "feasible": setup.feasible,
        "chosen": best.plan,
        "runner_up": runner_up and {
            "plan": runner_up.plan.to_dict(), "fits": runner_up.fits,
            "tpot_s": runner_up.metrics.tpot_s, "ttft_s": runner_up.metrics.ttft_s,
            "tokens_per_s": _tokens(runner_up) / runner_up.metrics.latency_s,
        },
        "search_s": time.perf_counter() - setup.started_s,
    }  # fmt: skip
    return best


def _result(
    cfg: TransformerConfig, setup: Setup, cand: Candidate, detail: bool
) -> LLMInferenceResult:
    system, plan, req, m, got = setup.system, cand.plan, setup.req, cand.microbatches, cand.metrics
    chip = system.chip
    graphs, row = cand.graphs, cand.row
    activations = float(graphs.activation_bytes[row])
    capacity = chip.capacity_bytes
    fullest = cand.fullest
    stages = cand.memory.footprints(req, m, activations)
    kv_bytes = (
        req.batch * m * (req.prompt + req.gen) * cfg.kv_cache_bytes_per_token(req.act.itemsize)
    )
    single_copy = Footprint(
        cfg.param_count * req.weight.itemsize, kv_bytes, activations
    )
    replicas = plan.tp * plan.ep * plan.dp
    system_fp = Footprint(
        sum(s.weights for s in stages) * replicas,
        sum(s.kv_cache for s in stages) * replicas,
        activations * system.chips,
    )
    level_names = [level.name for level in chip.memory]
    tokens = _tokens(cand)
    result = LLMInferenceResult(
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
        fits=cand.fits,
        reason="" if cand.fits else _not_fit_reason(chip, fullest, system.chips),
        min_chips=min_chips(single_copy, capacity),
        memory_bytes=MemoryBytes.of(system_fp, capacity * system.chips),
        per_chip_memory_bytes=MemoryBytes.of(fullest, capacity),
        placement={role.value: level_names[i] for role, i in cand.placement.home.items()},
        ttft_s=got.ttft_s,
        tpot_s=got.tpot_s,
        latency_s=got.latency_s,
        tokens_per_s=tokens / got.latency_s,
        tokens_per_s_per_user=1.0 / got.tpot_s,
        energy_j=got.energy_j,
        joules_per_token=got.energy_j / tokens,
        avg_power_w=got.energy_j / got.latency_s / system.chips,
        tdp_w=chip.tdp_w.value,
        bottleneck=got.bottleneck,
        comm_s=got.comm_s,
        comm_share=got.comm_s / got.trip_s,
        prefill_flops=float(graphs.flops[0][row]) * plan.tp * plan.ep,
        decode_flops_per_step=float(graphs.flops[1][row]) * plan.tp * plan.ep,
        notes=list(setup.notes),
    )
    if detail:
        (prefill, decode), k = got.phases, got.k
        pre, dec = (values.steps_of(row) for values in graphs.phase_values)
        result.ops = [
            *op_reports("prefill", pre, prefill.config(k), got.ttft_s),
            *op_reports("decode", dec, decode.config(k), got.trip_s, graphs.step_weights[row]),
        ]
        result.collectives = collective_algorithms(decode.table, system, plan,
                                                   graphs.collective_bytes[1][row])  # fmt: skip
    return result


def op_reports(
    phase: str, table: OpTable, costs: OpCosts, phase_s: float, weights: np.ndarray | None = None
) -> list[OpReport]:
    """One report per distinct op; a table with a leading step axis (decode) is averaged
    over it with `weights`, as `costs` already are."""
    w = np.ones(1) if weights is None else weights
    flops = np.average(np.atleast_2d(table.matrix_flops + table.vector_flops), axis=0, weights=w)
    moved = np.average(np.atleast_2d(table.role_bytes.sum(axis=-2)), axis=0, weights=w)
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


def _not_fit_reason(chip: Chip, fp: Footprint, chips: int) -> str:
    gb = 1e9
    where = f"{chip.id} holds" if chips == 1 else f"each of the {chips} {chip.id} chips holds"
    return (
        f"memory: the fullest chip needs {fp.total / gb:.1f} GB (weights {fp.weights / gb:.1f}, "
        f"KV cache {fp.kv_cache / gb:.2f}, activations {fp.activations / gb:.2f}) but {where} "
        f"{chip.capacity_bytes / gb:.2f} GB"
    )
