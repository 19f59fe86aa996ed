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
from typing import Any, ClassVar, NamedTuple

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

    Every plan of every job that shares formats, tp and ep is costed by one array
    computation over one graph whose dimensions span all their request shapes
    (scenarios/rank_costs.py), which is what makes a sweep of thousands of points and a plan
    search over hundreds of plans fast; the plans are columns (Candidates), not objects,
    until one is chosen. A job whose options its target cannot take gets the UserError in
    its place. Without `detail`, results leave out their per-op reports and collectives (a
    sweep's rows do not hold them).
    """
    setups: list[Setup | UserError] = []
    for target, options in jobs:
        try:
            setups.append(_setup(model, target, options))
        except UserError as error:
            setups.append(error)
    ready = [s for s in setups if isinstance(s, Setup)]
    if not ready:
        return setups  # type: ignore[return-value]
    # one graph per format and (tp, ep) over every request that needs it (shapes as arrays)
    requests: dict[tuple, dict[Request, None]] = {}
    for setup in ready:
        for plan in setup.plans:
            requests.setdefault((setup.req.formats, plan.tp, plan.ep), {})[setup.req] = None
    graphs = {key: shape_graphs(model, list(reqs), key[1], key[2])
              for key, reqs in requests.items()}  # fmt: skip
    cands = Candidates.of(model, ready, graphs)
    cands.cost(model)
    best, runner_up = cands.choose()
    chosen = iter(zip(best.tolist(), runner_up.tolist(), strict=True))
    return [s if isinstance(s, UserError) else _choose(model, s, cands, *next(chosen), detail)
            for s in setups]  # fmt: skip


MAX_TOKENS = 2**40
"""Tokens one request batch may hold (batch x (prompt + gen)): graph dimensions are int64
arrays over the requests (rank_costs.ShapeGraphs), and a token count times the widest
tensor dimension (a vocabulary, 2^17 and more) must stay below 2^63."""

_DEFAULTS = {
    name: p.default
    for name, p in inspect.signature(simulate).parameters.items()
    if p.kind is inspect.Parameter.KEYWORD_ONLY
}


@dataclass
class Setup:
    """A job resolved: its system, request and the plans to consider."""

    system: System
    req: Request
    notes: list[str]
    plans: list[Plan]  # one when the plan was given
    microbatches: int | None
    overlap: bool
    objective: str | None  # None when the plan was given
    started_s: float


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
    if batch * (prompt + gen) > MAX_TOKENS:
        raise UserError(f"batch x (prompt + gen) is {batch * (prompt + gen):.3g} tokens; at "
                        f"most 2^40 ({MAX_TOKENS:.3g}) can be simulated")  # fmt: skip
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


@dataclass
class Candidates:
    """Every plan of every job of one simulate_many call, as columns (one entry per job and
    plan): their memory, which are worth costing, their costed timelines and the choice
    among each job's, without an object per plan (a sweep has hundreds of thousands).

    Only plans that fit are worth costing; when none of a job's does, the one closest to
    fitting is, and it is the answer (with `fits` false)."""

    setups: list[Setup]
    job: np.ndarray  # (C,) the plan's job, a position in setups
    plans: list[Plan]
    group_keys: list[tuple]  # the graph groups: formats, tp, ep
    group_of: np.ndarray  # (C,) each plan's, a position in group_keys
    graphs: dict[tuple, ShapeGraphs]
    rows: np.ndarray  # its request's position on its graphs' shape axis
    microbatches: np.ndarray
    memories: list[StageMemory]
    memory_of: np.ndarray  # (C,) each plan's, a position in memories
    activations: np.ndarray  # (C,) peak activation bytes
    fullest_bytes: np.ndarray  # (C,) what the fullest chip holds
    fullest_stage: np.ndarray  # (C,) which stage that is (the first such)
    fits: np.ndarray  # (C,) bool
    worth: np.ndarray = field(init=False)  # (C,) bool: to be costed
    # Set by cost() for the plans worth costing (nan elsewhere):
    figures: dict[str, np.ndarray] = field(init=False)  # Metrics' (C,) arrays by name
    costed_in: dict[int, tuple[Metrics, int]] = field(init=False)  # plan -> (its group's, k)

    @classmethod
    def of(cls, cfg: TransformerConfig, setups: list[Setup],
           graphs: dict[tuple, ShapeGraphs]) -> Candidates:  # fmt: skip
        """The columns, filled a job at a time from what its plans share with other jobs'
        (a sweep's jobs share their plan lists and formats)."""
        group_keys: dict[tuple, int] = {}
        memories: dict[tuple, int] = {}  # by plan and formats, their positions
        memory_list: list[StageMemory] = []
        layouts: dict[tuple, tuple] = {}  # by plan list and formats: per plan columns
        job, plans, group_of, memory_of, rows, ms = ([] for _ in range(6))
        for j, setup in enumerate(setups):
            req = setup.req
            layout_key = (id(setup.plans), req.formats, setup.microbatches)
            layout = layouts.get(layout_key)
            if layout is None:
                keys = [(req.formats, p.tp, p.ep) for p in setup.plans]
                codes = [group_keys.setdefault(k, len(group_keys)) for k in keys]
                for p, k in zip(setup.plans, keys, strict=True):
                    if (p, k) not in memories:
                        memories[p, k] = len(memory_list)
                        memory_list.append(stage_memory(cfg, p, req.weight, req.act))
                layout = layouts[layout_key] = (
                    setup.plans, keys, codes, [memories[p, k] for p, k in zip(setup.plans, keys,
                                                                              strict=True)],
                    [setup.microbatches or p.pp for p in setup.plans])  # fmt: skip
            plan_list, keys, codes, mems, plan_ms = layout
            job += [j] * len(plan_list)
            plans += plan_list
            group_of += codes
            memory_of += mems
            ms += plan_ms
            rows += [graphs[k].row[req] for k in keys]
        job_a, group_a, memory_a = np.array(job), np.array(group_of), np.array(memory_of)
        rows_a, ms_a = np.array(rows), np.array(ms)
        per_job = np.array([(s.req.batch, s.req.prompt + s.req.gen, s.system.chip.capacity_bytes)
                            for s in setups]).T  # fmt: skip
        tokens_a = per_job[0][job_a] * ms_a * per_job[1][job_a]  # in flight, per microbatch
        activations = np.empty(len(job))
        for key, code in group_keys.items():
            at = group_a == code
            activations[at] = graphs[key].activation_bytes[rows_a[at]]
        fullest_bytes, fullest_stage = np.empty(len(job)), np.empty(len(job), dtype=int)
        for code, found in enumerate(memory_list):
            at = memory_a == code
            # what each stage's chip holds: weights + its layers' caches (+ activations)
            totals = (np.array(found.weights)[None, :]
                      + (tokens_a[at] * found.kv_bytes_per_token_layer)[:, None]
                      * np.array(found.layers)[None, :])  # fmt: skip
            fullest_stage[at] = totals.argmax(axis=1)
            fullest_bytes[at] = totals.max(axis=1) + activations[at]
        cands = cls(setups, job_a, plans, list(group_keys), group_a, graphs, rows_a, ms_a,
                    memory_list, memory_a, activations, fullest_bytes, fullest_stage,
                    fullest_bytes <= per_job[2][job_a])  # fmt: skip
        cands.worth = cands.fits | cands._closest_where_none_fits()
        return cands

    @cached_property
    def feasible(self) -> np.ndarray:
        """(jobs,) how many of each job's plans fit."""
        return np.bincount(self.job, weights=self.fits, minlength=len(self.setups)).astype(int)

    def _closest_where_none_fits(self) -> np.ndarray:
        """(C,) the plan of least memory of each job none of whose plans fits."""
        any_fit = self.feasible > 0
        order = np.lexsort((self.fullest_bytes, self.job))  # stable: the first of equals
        first = order[np.r_[True, self.job[order][1:] != self.job[order][:-1]]]
        closest = np.zeros(len(self.job), dtype=bool)
        closest[first[~any_fit[self.job[first]]]] = True
        return closest

    def footprint(self, c: int) -> Footprint:
        """What plan c's fullest chip holds."""
        s = int(self.fullest_stage[c])
        memory, setup = self.memories[self.memory_of[c]], self.setups[self.job[c]]
        kv = memory.kv_bytes(setup.req, int(self.microbatches[c])) * memory.layers[s]
        return Footprint(memory.weights[s], kv, float(self.activations[c]))

    def placement(self, c: int) -> Placement:
        """Where plan c's fullest chip keeps what."""
        shared = self.shared_placement[self.job[c]]
        if shared is not None:
            return shared
        chip, fullest = self.setups[self.job[c]].system.chip, self.footprint(c)
        return _PLACED.get((chip,), fullest, lambda: place(chip, fullest))

    @cached_property
    def shared_placement(self) -> list[Placement | None]:
        """Each job's placement where it is its every plan's: on a chip whose one memory
        holds everything, whatever the footprint (None elsewhere)."""
        first = np.searchsorted(self.job, np.arange(len(self.setups)))  # jobs run in order
        found: list[Placement | None] = []
        for setup, c in zip(self.setups, first.tolist(), strict=True):
            chip = setup.system.chip
            found.append(None if footprint_matters(chip) else _PLACED.get(
                (chip,), None, lambda chip=chip, c=c: place(chip, self.footprint(c))))
        return found

    def cost(self, cfg: TransformerConfig) -> None:
        """Costs the plans worth it, one array computation per graph group."""
        n = len(self.job)
        self.figures = {name: np.full(n, np.nan) for name in Metrics.FIGURES}
        self.figures["bottleneck"] = np.zeros(n, dtype=int)
        self.costed_in = {}
        worth = np.flatnonzero(self.worth)
        for code, key in enumerate(self.group_keys):
            members = worth[self.group_of[worth] == code].tolist()
            if not members:
                continue
            metrics = _cost(cfg, self.graphs[key], self._batch(members))
            at = np.array(members)
            for name in self.figures:
                self.figures[name][at] = getattr(metrics, name)
            self.costed_in.update((c, (metrics, k)) for k, c in enumerate(members))

    def _batch(self, members: list[int]) -> CostBatch:
        jobs = self.job[members].tolist()
        setups = [self.setups[j] for j in jobs]
        shared = self.shared_placement
        return CostBatch(
            systems=[s.system for s in setups],
            reqs=[s.req for s in setups],
            plans=[self.plans[c] for c in members],
            placements=[shared[j] or self.placement(c) for j, c in zip(jobs, members,
                                                                        strict=True)],
            rows=self.rows[members],
            microbatches=self.microbatches[members],
            overlap=np.array([s.overlap for s in setups]),
        )

    @cached_property
    def tokens(self) -> np.ndarray:
        """(C,) tokens each plan generates per request batch, over its replicas."""
        setups = self.setups
        per_job = np.array([s.req.batch * s.req.gen for s in setups])
        dp = np.array([p.dp for p in self.plans])
        return per_job[self.job] * self.microbatches * dp

    def choose(self) -> tuple[np.ndarray, np.ndarray]:
        """Each job's best costed plan and its runner-up (-1 where none), by score: fitting
        first, then the job's objective (latency: TPOT, TTFT, then throughput; throughput:
        tokens/s, then TPOT); a plan that does not fit by its memory. A stable sort, so
        equal plans keep the order in which they were listed."""
        c = np.flatnonzero(self.worth)
        job, f = self.job[c], self.figures
        tokens_per_s = self.tokens[c] / f["latency_s"][c]
        latency = np.array([s.objective != "throughput" for s in self.setups])[job]
        fits = self.fits[c]
        keys = [np.where(latency, f["tpot_s"][c], -tokens_per_s),
                np.where(latency, f["ttft_s"][c], f["tpot_s"][c]),
                np.where(latency, -tokens_per_s, 0.0)]
        keys = [np.where(fits, k, 0.0) for k in keys]
        keys[0] = np.where(fits, keys[0], self.fullest_bytes[c])
        order = c[np.lexsort((*keys[::-1], ~fits, job))]
        ranked_job = self.job[order]
        first = np.r_[True, ranked_job[1:] != ranked_job[:-1]]
        best = np.full(len(self.setups), -1)
        best[ranked_job[first]] = order[first]
        second = np.r_[False, first[:-1]] & ~first
        runner_up = np.full(len(self.setups), -1)
        runner_up[ranked_job[second]] = order[second]
        return best, runner_up

    def candidate(self, c: int) -> Candidate:
        """Plan c as one object, for its result."""
        setup = self.setups[self.job[c]]
        metrics, k = self.costed_in[c]
        return Candidate(setup.system, self.plans[c], setup.req, int(self.microbatches[c]),
                         self.graphs[self.group_keys[self.group_of[c]]], int(self.rows[c]),
                         self.memories[self.memory_of[c]],
                         self.footprint(c), bool(self.fits[c]), self.placement(c),
                         metrics.costed(k))  # fmt: skip


_PLACED: ByIdentity[Placement] = ByIdentity()


@dataclass
class Candidate:
    """One plan of one job, chosen: its memory and costed timeline."""

    system: System
    plan: Plan
    req: Request
    microbatches: int
    graphs: ShapeGraphs  # the graphs its rank runs, its request among theirs
    row: int  # its request's position on their shape axis
    memory: StageMemory
    fullest: Footprint  # the stage whose chip holds the most
    fits: bool
    placement: Placement
    metrics: Costed


class CostBatch(NamedTuple):
    """What _cost needs of K plans of one graph group, as columns."""

    systems: list[System]
    reqs: list[Request]
    plans: list[Plan]
    placements: list[Placement]
    rows: np.ndarray
    microbatches: np.ndarray
    overlap: np.ndarray


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
    """The costed timeline of K plans of one graph group, each figure a (K,) array."""

    FIGURES: ClassVar[tuple[str, ...]] = ("ttft_s", "tpot_s", "latency_s", "energy_j",
                                          "comm_s", "trip_s")  # fmt: skip

    ttft_s: np.ndarray
    tpot_s: np.ndarray
    latency_s: np.ndarray
    energy_j: np.ndarray
    comm_s: np.ndarray
    trip_s: np.ndarray  # a token's mean trip through the pipeline
    bottleneck: np.ndarray  # Bottleneck carrying the most of a request's time
    phases: tuple[PhaseCosts, PhaseCosts]

    def costed(self, k: int) -> Costed:
        """Plan k's figures, as Python numbers."""
        figures = (float(getattr(self, name)[k]) for name in self.FIGURES)
        return Costed(*figures, Bottleneck(int(self.bottleneck[k])).label, self.phases, k)


class Costed(NamedTuple):
    """One plan's costed timeline (see Metrics), and where its per-op costs are."""

    ttft_s: float
    tpot_s: float
    latency_s: float
    energy_j: float
    comm_s: float
    trip_s: float
    bottleneck: str
    phases: tuple[PhaseCosts, PhaseCosts]
    k: int  # its position in the phases' arrays


def _cost(cfg: TransformerConfig, graphs: ShapeGraphs, batch: CostBatch) -> Metrics:
    """The timeline of one microbatch (see the module docstring) for K plans that share
    formats, tp and ep (one ShapeGraphs), each with its own request, system, depth,
    microbatches and overlap."""
    sequences, prompt, gen = (np.array(v) for v in zip(*[(r.batch, r.prompt, r.gen)
                                                        for r in batch.reqs], strict=True))
    pp = np.array([p.pp for p in batch.plans])
    m, overlap = batch.microbatches, batch.overlap
    prefill, decode = cost_phases(graphs, batch.rows, batch.systems, batch.placements,
                                  batch.plans[0], pp)  # fmt: skip

    def stage_times(phase: PhaseCosts) -> np.ndarray:  # (K, steps, stages)
        total = phase.stage_sums("time_s")
        if not overlap.any():
            return total
        comm = phase.stage_sums("time_s", comm_only=True)
        return np.where(overlap[:, None, None], np.maximum(total - comm, comm), total)

    # a pipeline's sends (pp > 1 only), by topology and the chips they span
    lines: dict[tuple[int, int], CollectiveLine] = {}
    none = CollectiveLine(0.0, 0.0, "none", "")  # one stage sends nothing
    send = []
    for system, plan in zip(batch.systems, batch.plans, strict=True):
        key = (id(system.levels), plan.pp)
        if plan.pp > 1 and key not in lines:
            span = plan.tp * plan.ep * plan.pp
            lines[key] = collective_line(system, Collective.SEND_RECV, 2, span)
        send.append(lines.get(key, none))
    send_fixed_s, send_s_per_byte = (np.array(v) for v in zip(
        *[(line.fixed_s, line.s_per_byte) for line in send], strict=True))
    itemsize = batch.reqs[0].act.itemsize

    def send_s(tokens: np.ndarray) -> np.ndarray:
        return send_fixed_s + send_s_per_byte * (sequences * tokens * cfg.hidden_size * itemsize)

    pre, dec = stage_times(prefill)[:, 0], stage_times(decode)  # (K, stages), (K, steps, stages)
    send_pre, send_dec = send_s(prompt), send_s(np.ones_like(prompt))
    ttft_s = _over_stages(pre) + (pp - 1) * send_pre
    trip = _over_stages(dec) + ((pp - 1) * send_dec)[:, None]
    tpot_s = decode.step_mean(np.maximum(trip, m[:, None] * dec.max(axis=-1)))
    decode_steps = gen - 1
    latency_s = ttft_s + (m - 1) * pre.max(axis=-1) + decode_steps * tpot_s

    # Energy: every chip's ops, then static power for the time each chip waits.
    static_w = np.array([s.chip.energy.static_power_w.value for s in batch.systems])
    group_chips = np.array([p.tp * p.ep * p.dp for p in batch.plans])
    chips = np.array([s.chips for s in batch.systems])
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


def _choose(
    cfg: TransformerConfig, setup: Setup, cands: Candidates, best: int, runner_up: int,
    detail: bool,
) -> LLMInferenceResult:
    """The job's result: its plan's, or the best of its search with the search's summary."""
    result = _result(cfg, setup, cands.candidate(best), detail)
    if setup.objective is None:
        return result
    other = runner_up >= 0 and {
        "plan": cands.plans[runner_up].to_dict(), "fits": bool(cands.fits[runner_up]),
        "tpot_s": float(cands.figures["tpot_s"][runner_up]),
        "ttft_s": float(cands.figures["ttft_s"][runner_up]),
        "tokens_per_s": float(cands.tokens[runner_up] / cands.figures["latency_s"][runner_up]),
    }  # fmt: skip
    result.plan_search = {
        "objective": setup.objective,
        "candidates": len(setup.plans),
        "feasible": int(cands.feasible[cands.job[best]]),
        "chosen": result.plan,
        "runner_up": other or None,
        "search_s": time.perf_counter() - setup.started_s,
    }
    return result


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
    tokens = req.batch * m * plan.dp * req.gen
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
