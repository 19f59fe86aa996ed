"""The plans of an LLM inference job as candidates: what each one's chips hold, which are
worth costing, and the job's choice among them by its objective; the plan search's plans.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from xpusim.compiler.memory_plan import Footprint, Placement, footprint_matters, place
from xpusim.compiler.partition import Plan, layers_per_stage, weight_bytes
from xpusim.hardware.system import System
from xpusim.ir.dtypes import DType, Format
from xpusim.memo import remembered, scoped
from xpusim.scenarios.decoding import Decoding, DraftCost
from xpusim.scenarios.llm.chunking import PrefillChunks
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
    memories: list[StageMemory]  # each plan's
    groups: list[tuple]  # each plan's graph group (graph_group): a job's copies share it
    one_chip: StageMemory  # the model on one chip, whose copy sets the result's min_chips
    token_budget: int  # the default engine's, which sizes a chunked prefill (chunking.py)
    microbatches: int | None
    overlap: bool
    objective: str | None  # None when the plan was given
    started_s: float
    decoding: Decoding = field(default_factory=Decoding)
    drafts: dict[int, DraftCost] | None = None  # speculative decoding: its draft, by tp

    def draft(self, plan: Plan) -> DraftCost | None:
        return self.drafts[plan.tp] if self.drafts else None

    def shaped(self, req: Request, notes: list[str], started_s: float) -> Setup:
        """A copy for one shape of a job resolved once (inference._setup): copy.copy's
        result without its generic pickling path (10,000 a sweep; a test holds the two
        equal)."""
        found = object.__new__(Setup)
        found.__dict__.update(self.__dict__, req=req, notes=notes, started_s=started_s)
        return found


def graph_group(req: Request, plan: Plan) -> tuple:
    """The graph group a plan of a request is costed in: its rank's graphs depend on the
    formats, tp, ep and attention data parallelism only (graphs.py)."""
    return (req.formats, plan.tp, plan.ep, plan.dp_attention)


@dataclass
class Candidate:
    """One plan of one job: what its fullest chip holds and, once costed, its timeline."""

    setup: Setup
    plan: Plan
    group: tuple  # its graph group (graph_group)
    graphs: ShapeGraphs  # the graphs its rank runs, its request among theirs
    row: int  # its request's position on their shape axis
    microbatches: int
    memory: StageMemory
    footprint: Footprint  # the fullest chip's, a speculative job's draft model included
    layer_kv_bytes: float  # one layer's KV cache on one chip (StageMemory.layer_kv_bytes)
    placement: Placement | None = None  # where its fullest chip keeps what (worth_costing)
    metrics: Metrics | None = None  # its graph group's costed timelines (timeline.py)
    k: int = -1  # its position in them

    @property
    def fits(self) -> bool:
        return self.footprint.total <= self.setup.system.chip.capacity_bytes

    @property
    def tokens(self) -> int:
        """Tokens it generates per request batch, over its replicas."""
        return self.setup.req.output_tokens * self.microbatches * self.plan.dp

    def figure(self, name: str) -> float:
        """One of its costed timeline's figures (a Metrics field: ttft_s, tpot_s...)."""
        return float(getattr(self.metrics, name)[self.k])


def worth_costing(setup: Setup, graphs: dict[tuple, ShapeGraphs]) -> list[Candidate]:
    """A job's plans that fit, or where none does the one closest to fitting (the first
    of equals): it is the answer, with `fits` false. Each is given its placement: worked
    out from the footprint only where the chip has more than one memory to choose from
    (one HBM holds every role). (What plans share, their request and chip, and a graph
    group's row and activations, is looked up once: a sweep asks this of tens of
    thousands of plans.)"""
    req, chip, found, fitting = setup.req, setup.system.chip, [], []
    capacity = chip.capacity_bytes
    chunks = PrefillChunks(req.batch * req.prompt, setup.token_budget)
    rows: dict[tuple, tuple[ShapeGraphs, int, float]] = {}
    for group in setup.groups:
        if group not in rows:
            its = graphs[group]
            row = its.row[req]
            prefill, decode = its.phase_activation_bytes
            rows[group] = its, row, chunks.peak_bytes(float(prefill[row]), float(decode[row]))
    for plan, memory, group in zip(setup.plans, setup.memories, setup.groups, strict=True):
        (its, row, activations), m = rows[group], setup.microbatches or plan.pp
        kv = memory.layer_kv_bytes(req, m)
        stage = 0
        if len(memory.layers) > 1:  # the stage holding the most
            stages = [w + kv * n for w, n in zip(memory.weights, memory.layers, strict=True)]
            stage = stages.index(max(stages))
        fullest = Footprint(float(memory.weights[stage]), kv * memory.layers[stage], activations)
        if setup.drafts:  # a draft model's weights and cache on every chip
            draft = setup.drafts[plan.tp]
            fullest = Footprint(fullest.weights + draft.weight_bytes,
                                fullest.kv_cache + draft.kv_bytes, fullest.activations)
        # a Candidate only for the plans kept (most of a many-chip search's fit; few of
        # a one-chip sweep's large models)
        found.append((plan, group, its, row, m, memory, fullest, kv))
        if fullest.total <= capacity:  # Candidate.fits
            fitting.append(found[-1])
    kept = fitting or [min(found, key=lambda f: f[6].total)]
    worth = [Candidate(setup, *f) for f in kept]
    matters = footprint_matters(chip)
    for c in worth:
        fp = c.footprint
        c.placement = remembered("placement", (chip,), fp if matters else None,
                                 lambda fp=fp: place(chip, fp))  # fmt: skip
    return worth


def cost_batch(members: list[Candidate]) -> CostBatch:
    """What the timeline needs of candidates of one graph group, as columns."""
    setups = [c.setup for c in members]
    return CostBatch(
        systems=[s.system for s in setups],
        reqs=[s.req for s in setups],
        plans=[c.plan for c in members],
        placements=[c.placement for c in members],  # type: ignore[misc]
        rows=np.array([c.row for c in members]),
        microbatches=np.array([c.microbatches for c in members]),
        overlap=np.array([s.overlap for s in setups]),
        drafts=[s.draft(c.plan) for s, c in zip(setups, members, strict=True)],
    )


def ranked(worth: list[Candidate]) -> list[Candidate]:
    """A job's costed candidates, best first, by its objective (latency: TPOT, TTFT, then
    throughput; throughput: tokens/s, then TPOT). A stable sort, so equal plans keep the
    order in which they were listed (a job none of whose plans fits has only one)."""
    latency = worth[0].setup.objective != "throughput"

    def score(c: Candidate) -> tuple[float, ...]:
        tpot_s, tokens_per_s = c.figure("tpot_s"), c.tokens / c.figure("latency_s")
        return (tpot_s, c.figure("ttft_s"), -tokens_per_s) if latency else (-tokens_per_s, tpot_s)

    return sorted(worth, key=score)


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

    def layer_kv_bytes(self, req: Request, microbatches: int) -> float:
        """One layer's KV cache on one chip: a microbatch's sequences times the
        microbatches, times each one's cached tokens' cache and its state (a state-space
        model's), a windowed layer's its window's tokens only."""
        cached, width = req.cached_tokens, req.width
        return req.batch * microbatches * (
            cached * self.kv_bytes_per_token_layer + width * self.state_bytes_per_sequence_layer
            + min(cached, width * self.window) * self.window_bytes_per_token_layer)


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
