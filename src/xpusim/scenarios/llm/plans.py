"""The plans of many LLM inference jobs as columns (a sweep of plan searches has hundreds
of thousands): their memory, which are worth costing, their costed timelines and each
job's choice among them; the plan search's candidates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from xpusim.compiler.memory_plan import Footprint, Placement, footprint_matters, place
from xpusim.compiler.partition import Plan, layers_per_stage, weight_bytes
from xpusim.hardware.system import System
from xpusim.ir.dtypes import DType, Format
from xpusim.memo import distinct, remembered, scoped
from xpusim.scenarios.decoding import Decoding, DraftCost
from xpusim.scenarios.llm.graphs import ShapeGraphs
from xpusim.scenarios.llm.request import Request
from xpusim.scenarios.llm.timeline import CostBatch, Metrics
from xpusim.workloads.transformer_config import TransformerConfig


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
    # The model's weights in one copy, its cache per token and per sequence (a
    # state-space model's), and its windowed layers' per token and their window, in the
    # request's formats: what min_chips divides
    one_copy: tuple[float, float, float, float, int]
    decoding: Decoding = field(default_factory=Decoding)
    drafts: dict[int, DraftCost] | None = None  # speculative decoding: its draft, by tp

    def draft(self, plan: Plan) -> DraftCost | None:
        return self.drafts[plan.tp] if self.drafts else None


@dataclass
class Candidates:
    """Every plan of every job of one call, as columns (one entry per job and plan). Only
    plans that fit are worth costing; when none of a job's does, the one closest to
    fitting is, and it is the answer (with `fits` false)."""

    setups: list[Setup]
    job: np.ndarray  # (C,) the plan's job, a position in setups
    plans: list[Plan]
    group_keys: list[tuple]  # the graph groups: formats, tp, ep, dp_attention
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
    # Set by add() for the plans worth costing (nan elsewhere):
    figures: dict[str, np.ndarray] = field(init=False)  # Metrics' (C,) arrays by name
    metrics: dict[int, Metrics] = field(init=False)  # by graph group
    k: np.ndarray = field(init=False)  # (C,) each costed plan's position in its group's

    @classmethod
    def of(cls, cfg: TransformerConfig, setups: list[Setup],
           graphs: dict[tuple, ShapeGraphs]) -> Candidates:  # fmt: skip
        """The columns, in job order and each job's plans in their order."""
        group_keys: dict[tuple, int] = {}  # graph groups' positions
        memories: dict[tuple, int] = {}  # by plan and graph group, their positions
        memory_list: list[StageMemory] = []
        columns: tuple[list, ...] = ([], [], [], [], [], [])
        job_l, plans, group_l, memory_l, rows_l, ms_l = columns
        for j, setup in enumerate(setups):
            req = setup.req
            for p in setup.plans:
                key = (req.formats, p.tp, p.ep, p.dp_attention)
                if (p, key) not in memories:
                    memories[p, key] = len(memory_list)
                    memory_list.append(stage_memory(cfg, p, req.weight, req.act, req.kv_format))
                job_l.append(j)
                plans.append(p)
                group_l.append(group_keys.setdefault(key, len(group_keys)))
                memory_l.append(memories[p, key])
                rows_l.append(graphs[key].row[req])
                ms_l.append(setup.microbatches or p.pp)
        job_a, group_a, memory_a, rows_a, ms_a = map(np.array, (job_l, group_l, memory_l,
                                                                rows_l, ms_l))  # fmt: skip
        reqs = [s.req for s in setups]
        terms = tuple(np.array([getattr(r, name) for r in reqs], dtype=np.int64)
                      for name in ("batch", "cached_tokens", "width"))
        systems, which = distinct([s.system for s in setups])
        capacity = np.array([system.chip.capacity_bytes for system in systems],
                            dtype=float)[which]  # fmt: skip
        batch, cached, width = terms
        # as floats: the in-flight counts are multiplied by bytes
        tokens_a = batch[job_a].astype(float) * ms_a * cached[job_a]  # in flight, per microbatch
        sequences_a = batch[job_a].astype(float) * ms_a * width[job_a]
        activations = np.empty(len(job_a))
        for key, code in group_keys.items():
            at = group_a == code
            activations[at] = graphs[key].activation_bytes[rows_a[at]]
        fullest_bytes, fullest_stage = np.empty(len(job_a)), np.empty(len(job_a), dtype=int)
        for code, found in enumerate(memory_list):
            at = memory_a == code
            # what each stage's chip holds: weights + its layers' caches (+ activations)
            cache = (tokens_a[at] * found.kv_bytes_per_token_layer
                     + sequences_a[at] * found.state_bytes_per_sequence_layer)
            if found.window_bytes_per_token_layer:  # a windowed layer keeps its window's
                windowed = np.minimum(cached[job_a[at]], width[job_a[at]] * found.window)
                cache = cache + (batch[job_a[at]] * ms_a[at] * windowed
                                 * found.window_bytes_per_token_layer)
            totals = (np.array(found.weights)[None, :]
                      + cache[:, None] * np.array(found.layers)[None, :])  # fmt: skip
            fullest_stage[at] = totals.argmax(axis=1)
            fullest_bytes[at] = totals.max(axis=1) + activations[at]
        if any(s.drafts for s in setups):  # a draft model's weights and cache on every chip
            drafts = [setups[j].draft(p) for j, p in zip(job_a.tolist(), plans, strict=True)]
            fullest_bytes += [d.weight_bytes + d.kv_bytes if d else 0.0 for d in drafts]
        cands = cls(setups, job_a, plans, list(group_keys), group_a, graphs, rows_a, ms_a,
                    memory_list, memory_a, activations, fullest_bytes, fullest_stage,
                    fullest_bytes <= capacity[job_a])  # fmt: skip
        cands.worth = cands.fits | cands._closest_where_none_fits()
        cands.figures = {name: np.full(len(job_a), np.nan) for name in Metrics.FIGURES}
        cands.metrics, cands.k = {}, np.full(len(job_a), -1)
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
        """What plan c's fullest chip holds, a speculative job's draft model included."""
        memory, stage = self.memories[self.memory_of[c]], self.fullest_stage[c]
        weights, kv = float(memory.weights[stage]), self.layer_kv_bytes(c) * memory.layers[stage]
        draft = self.setups[self.job[c]].draft(self.plans[c])
        if draft is not None:
            weights, kv = weights + draft.weight_bytes, kv + draft.kv_bytes
        return Footprint(weights, kv, float(self.activations[c]))

    def layer_kv_bytes(self, c: int) -> float:
        """One layer's KV cache on one chip of plan c: a microbatch's sequences times the
        microbatches, times each one's cached tokens' cache and its state (a state-space
        model's), a windowed layer's its window's tokens only."""
        req, memory = self.setups[self.job[c]].req, self.memories[self.memory_of[c]]
        cached, width = req.cached_tokens, req.width
        return req.batch * int(self.microbatches[c]) * (
            cached * memory.kv_bytes_per_token_layer
            + width * memory.state_bytes_per_sequence_layer
            + min(cached, width * memory.window) * memory.window_bytes_per_token_layer)

    def placement(self, c: int) -> Placement:
        """Where plan c's fullest chip keeps what: worked out from its footprint only where
        the chip has more than one memory to choose from (one HBM holds every role)."""
        chip = self.setups[self.job[c]].system.chip
        key = self.footprint(c) if footprint_matters(chip) else None
        return remembered("placement", (chip,), key,
                          lambda: place(chip, key or self.footprint(c)))  # fmt: skip

    def add(self, code: int, members: list[int], metrics: Metrics) -> None:
        """The costed timelines of plans `members`, of graph group `code`."""
        self.metrics[code] = metrics
        at = np.array(members)
        for name in self.figures:
            self.figures[name][at] = getattr(metrics, name)
        self.k[at] = np.arange(len(at))

    def batch(self, members: list[int]) -> CostBatch:
        """What the timeline needs of plans `members` (one graph group), as columns."""
        setups = [self.setups[j] for j in self.job[members].tolist()]
        return CostBatch(
            systems=[s.system for s in setups],
            reqs=[s.req for s in setups],
            plans=[self.plans[c] for c in members],
            placements=list(map(self.placement, members)),
            rows=self.rows[members],
            microbatches=self.microbatches[members],
            overlap=np.array([s.overlap for s in setups]),
            drafts=[s.draft(self.plans[c]) if s.drafts else None
                    for s, c in zip(setups, members, strict=True)],
        )

    @cached_property
    def tokens(self) -> np.ndarray:
        """(C,) tokens each plan generates per request batch, over its replicas."""
        setups = self.setups
        per_job = np.array([s.req.output_tokens for s in setups])
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

    def bottlenecks(self, cs: np.ndarray) -> list[str]:
        """These costed plans' bottlenecks, as results name them, worked out one array pass
        per graph group (Metrics.bottlenecks): only for the plans a search keeps."""
        found: list[str] = [""] * len(cs)
        groups = self.group_of[cs]
        for code in sorted(set(groups.tolist())):
            at = np.flatnonzero(groups == code)
            labels = self.metrics[code].bottlenecks(self.k[cs[at]])
            if len(at) == len(cs):
                return labels
            for i, label in zip(at.tolist(), labels, strict=True):
                found[i] = label
        return found

    def candidate(self, c: int) -> Candidate:
        """Plan c as one object, for its result."""
        code = int(self.group_of[c])
        return Candidate(self.setups[self.job[c]].system, self.plans[c],
                         self.graphs[self.group_keys[code]], int(self.rows[c]),
                         self.memories[self.memory_of[c]], self.placement(c),
                         self.metrics[code], int(self.k[c]))  # fmt: skip


@dataclass
class Candidate:
    """One plan of one job, chosen: its memory and costed timeline."""

    system: System
    plan: Plan
    graphs: ShapeGraphs  # the graphs its rank runs, its request among theirs
    row: int  # its request's position on their shape axis
    memory: StageMemory
    placement: Placement
    metrics: Metrics  # its graph group's
    k: int  # its position in them


@dataclass(frozen=True)
class StageMemory:
    """What one chip of each pipeline stage holds apart from the request's KV cache and
    activations, and how many layers' caches: the same for every request of a plan."""

    weights: tuple[float, ...]  # bytes per stage
    layers: tuple[int, ...]  # per stage
    kv_bytes_per_token_layer: float  # one chip's cache per token in flight and layer
    state_bytes_per_sequence_layer: float  # a state-space model's, per sequence and layer
    # windowed layers' cache per token and layer, which holds a sequence's last `window`
    # tokens only (all per layer: averages over the model's layers)
    window_bytes_per_token_layer: float = 0.0
    window: int = 0

    @cached_property
    def total_weights(self) -> float:
        """One chip of each stage together: a replica's share of a tensor-parallel group."""
        return sum(self.weights)


@scoped()  # a sweep asks again for every shape, chip and what-if of a plan
def stage_memory(
    cfg: TransformerConfig, plan: Plan, weight: Format, act: DType, kv: DType
) -> StageMemory:
    """Per stage: one chip's weights, its layers, and its KV cache per token and layer in the
    cache's format `kv` (a chained stage's chips share its layers' caches evenly; under
    attention data parallelism each chip holds whole caches of 1/tp of the sequences, where
    tensor parallelism splits KV heads and repeats a latent cache on every chip)."""
    shared = plan.chain * plan.attention_dp  # chips a replica's tokens' cache is spread over
    per_layer = cfg.kv_elements_per_layer(plan.attention_tp) * kv.itemsize / shared
    windowed = len(cfg.bounded_layers) / cfg.num_layers
    return StageMemory(weight_bytes(cfg, plan, weight, act),
                       layers_per_stage(cfg.num_layers, plan.pp),
                       per_layer * (cfg.full_cache_layers / cfg.num_layers),
                       cfg.state_elements_per_layer(plan.attention_tp) * kv.itemsize / shared,
                       per_layer * windowed, cfg.cache_window)  # fmt: skip


OBJECTIVES = ("latency", "throughput")


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


@scoped(maxsize=64)
def candidate_plans(cfg: TransformerConfig, chips: int) -> list[Plan]:
    """The plan search's candidates: every (tp, pp, dp) whose product is `chips`, with ep
    over the tp chips, that the model allows (tp divides the heads, pp at most the layers,
    ep tp and the experts)."""
    plans = []
    for tp in _divisors(chips):
        if cfg.num_heads % tp or (cfg.ssm and tp > 1):  # check_plan says why
            continue
        for ep in _divisors(tp):
            if ep > 1 and (not cfg.is_moe or cfg.num_experts % ep):
                continue
            for pp in _divisors(chips // tp):
                if pp <= cfg.num_layers and not (cfg.is_encoder_decoder and pp > 1):
                    plans.append(Plan(tp=tp, pp=pp, dp=chips // (tp * pp), ep=ep))
    return plans
