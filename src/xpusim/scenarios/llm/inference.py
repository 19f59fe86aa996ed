"""LLM inference on one chip or a system of many: a prefill, then decode against a growing cache.

Each job's options become a system, a request and the plans to consider (`_setup`); the
plans worth costing of every job are costed together (`_ranked_jobs`), and each job's
best becomes its result: `_result` for one job, the plain reference, and `_table` for many
at once, as columns (a sweep's chunk), which tests/test_result_table.py holds equal to it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field, replace
from itertools import chain
from typing import Any, ClassVar

import numpy as np

from xpusim.compiler.memory_plan import Footprint
from xpusim.compiler.partition import Plan, check_plan, complete_plan
from xpusim.cost.collectives import collective_algorithms
from xpusim.cost.dollars import Cost
from xpusim.cost.roofline import Bottleneck
from xpusim.cost.stream_machine import pipeline_plans
from xpusim.errors import UserError, check_positive_in
from xpusim.hardware.spec import Chip
from xpusim.hardware.system import System, plan_chips, system_for
from xpusim.ir.dtypes import weight_parts
from xpusim.memo import in_scope, remembered, scope
from xpusim.result import Nested, Result, Results, Table
from xpusim.run_options import keyword_defaults, takes
from xpusim.scenarios.decoding import Decoding, DraftCost, mtp_draft, resolve_decoding
from xpusim.scenarios.formats import (
    resolve_attention_format,
    resolve_formats,
    resolve_kv_format,
    resolve_moe_backend,
)
from xpusim.scenarios.llm.chunking import PrefillChunks, default_token_budget
from xpusim.scenarios.llm.engine import cost_phases
from xpusim.scenarios.llm.graphs import shape_graphs
from xpusim.scenarios.llm.plans import (
    OBJECTIVES,
    Candidate,
    Setup,
    candidate_plans,
    cost_batch,
    graph_group,
    ranked,
    stage_memory,
    worth_costing,
)
from xpusim.scenarios.llm.request import Request
from xpusim.scenarios.llm.timeline import Metrics, timeline
from xpusim.scenarios.llm.torus import answered, layouts_answer, layouts_offered, offer_layouts
from xpusim.scenarios.op_reports import OpReport, op_reports
from xpusim.scenarios.registry import register
from xpusim.workloads.transformer import hidden_state_bytes
from xpusim.workloads.transformer_config import TransformerConfig


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
    PRICED_BY: ClassVar[tuple[str, str]] = ("tokens_per_s", "output tokens")

    model: str
    params: int  # the model's, all experts included
    active_params: int  # those one token touches (MoE: its routed experts only)
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
    decoding: dict[str, Any]  # how it decodes (scenarios/decoding.py)
    collectives: list[dict[str, Any]] = field(default_factory=list)
    plan_search: dict[str, Any] | None = None
    cost: Cost | None = None  # cost/dollars.py: filled where a price is known
    layout: str = ""  # a torus layout's name, where one won the search (scenarios/llm/torus.py)
    notes: list[str] = field(default_factory=list)
    ops: list[OpReport] = field(default_factory=list)


OPTIONS = ("batch", "prompt", "gen", "precision", "weight_precision", "attention_precision",
           "kv_precision", "moe_backend", "chips", "tp", "pp", "dp", "ep", "dp_attention",
           "microbatches", "objective", "overlap", "beams", "n", "speculative", "draft_tokens",
           "acceptance", "acceptance_lengths", "accept_length")  # fmt: skip
"""The fields of run_options.RunOptions that LLM inference takes: their help says what each
does, and `simulate`'s keywords are made from them. Besides a name, `precision`'s take a
DType or Format and `speculative` a TransformerConfig (or "mtp": the model's own module)."""


@takes(OPTIONS)
def simulate(model: TransformerConfig, chip: Chip | System, **options: Any) -> LLMInferenceResult:
    """Simulates serving one batch; with many chips and no plan, searches for the best plan.
    Plans are stated as engines state them (compiler/partition.py); decoding other than
    greedy (beams, samples, a draft model) is scenarios/decoding.py's."""
    with scope():
        (ranks,) = _ranked_jobs(model, [(chip, options)])
        if isinstance(ranks, UserError):
            raise ranks
        result = offer_layouts(model, ranks[0].setup, _result(model, ranks))
        if not result.layout:  # a torus layout's answer has no op graph
            _add_detail(model, ranks[0], result)
    return result


@in_scope
def simulate_many(
    model: TransformerConfig, jobs: Sequence[tuple[Chip | System, dict[str, Any]]]
) -> Results:
    """Many simulations of one model, each a target and `simulate`'s options, costed together
    (what makes a sweep fast). A job whose options its target cannot take gets the UserError
    in its place; results leave out the per-op reports and collectives `simulate` adds.
    The results are one table of columns (`_table`), no result object made a job."""
    found = _ranked_jobs(model, jobs)
    costed = [ranks for ranks in found if not isinstance(ranks, UserError)]
    if not costed:  # every job's options refused: their errors, no table to make
        return Results([], found)
    table = _table(model, costed)
    for row, ranks in enumerate(costed):  # the few jobs the torus layouts answer
        setup = ranks[0].setup
        if layouts_offered(model, setup):
            layouts = layouts_answer(model, setup, table.cell("fits", row),
                                     table.cell("plan", row))  # fmt: skip
            if layouts is not None:
                table.put_row(row, answered(model, setup, table.row(row), *layouts))
    rows = iter(range(len(costed)))
    return Results([table], [r if isinstance(r, UserError) else (0, next(rows)) for r in found])


def _ranked_jobs(
    model: TransformerConfig, jobs: Sequence[tuple[Chip | System, dict[str, Any]]]
) -> list[list[Candidate] | UserError]:
    """Each job's costed candidates, best first, or the UserError its options raised.

    Every plan of these jobs is costed with one graph per format and (tp, ep) over every
    request that needs it (shapes as arrays): the engine costs each group's ops, the
    timeline makes them TTFT, TPOT and energy. Written out here, not behind helpers, so
    that `run` reaches the cost formula in few frames (tests/test_call_depth.py)."""
    setups: list[Setup | UserError] = []
    for target, options in jobs:
        try:
            setups.append(_setup(model, target, options))
        except UserError as error:
            setups.append(error)
    ready = [s for s in setups if isinstance(s, Setup)]
    requests: dict[tuple, dict[Request, None]] = {}
    for setup in ready:
        for group in dict.fromkeys(setup.groups):
            requests.setdefault(group, {})[setup.req] = None
    graphs = {key: shape_graphs(model, list(reqs), *key[1:])
              for key, reqs in requests.items()}  # fmt: skip
    worth = [worth_costing(setup, graphs) for setup in ready]
    groups: dict[tuple, list[Candidate]] = {}
    for c in chain.from_iterable(worth):
        groups.setdefault(c.group, []).append(c)
    for key, members in groups.items():
        batch = cost_batch(members)
        phases = cost_phases(graphs[key], batch.rows, batch.systems, batch.placements,
                             members[0].plan, np.array([c.plan.pp for c in members]))  # fmt: skip
        metrics = timeline(model, batch, phases)
        for k, c in enumerate(members):
            c.metrics, c.k = metrics, k
    ranks = iter(map(ranked, worth))
    return [s if isinstance(s, UserError) else next(ranks) for s in setups]


def chosen_plan(
    model: TransformerConfig, target: Chip | System, options: dict[str, Any]
) -> tuple[Setup, Candidate]:
    """The plan `simulate` would choose for these options, as an object: what serving
    runs (serving/engine.py). Raises UserError for options the target cannot take."""
    (ranks,) = _ranked_jobs(model, [(target, options)])
    if isinstance(ranks, UserError):
        raise ranks
    return ranks[0].setup, ranks[0]


def job_setup(model: TransformerConfig, target: Chip | System, options: dict[str, Any]) -> Setup:
    """A job's options resolved into its system, request and plans, before any plan is
    costed: what serving reads a run's formats from to choose its options (an engine's own
    MoE backend) ahead of chosen_plan."""
    return _setup(model, target, options)


# Tokens one request batch may hold (batch x (prompt + gen)): a token count times the widest
# tensor dimension (a vocabulary, 2^17 and more) must stay below 2^63 (int64 dimensions)
MAX_TOKENS = 2**40


_DEFAULTS = keyword_defaults(simulate)
_COUNTS = ("batch", "prompt", "gen", "chips", "tp", "pp", "dp", "ep", "microbatches")


def _setup(cfg: TransformerConfig, target: Chip | System, options: dict[str, Any]) -> Setup:
    """A job's options (simulate's keywords) resolved into a system, a request and plans."""
    if unknown := options.keys() - _DEFAULTS.keys():
        raise TypeError(f"LLM inference takes no option {', '.join(sorted(unknown))}")
    given = {**_DEFAULTS, **options}
    batch, prompt, gen = given["batch"], given["prompt"], given["gen"]
    started_s = time.perf_counter()
    check_positive_in(given, _COUNTS)
    if batch * (prompt + gen) > MAX_TOKENS:
        raise UserError(f"batch x (prompt + gen) is {batch * (prompt + gen):.3g} tokens; at "
                        f"most 2^40 ({MAX_TOKENS:.3g}) can be simulated")  # fmt: skip
    # the same for every shape of a sweep: resolved once (a draft model by its identity)
    rest = tuple(map(given.__getitem__, _SHARED_OPTIONS))
    job = remembered("resolved", (cfg, target, given["speculative"]), rest,
                     lambda: _resolve(cfg, target, given))  # fmt: skip
    notes = list(job.notes)
    if 0 < cfg.max_position_embeddings < prompt + gen:
        notes.append(f"prompt + gen ({prompt + gen:,} tokens) exceed {cfg.name}'s "
                     f"{cfg.max_position_embeddings:,} positions (max_position_embeddings): "
                     "costed as asked, beyond the context it was trained for")  # fmt: skip
    how = job.decoding
    setup = job.shaped(job.req.shaped(batch, prompt, gen), notes, started_s)
    if how.draft is not None:
        setup.drafts = _drafts(cfg, how, setup, given)
    if how.width > 1 or how.draft is not None:
        notes.append(f"decoding: {setup.decoding.describe(cfg)}")
    return setup


_SHARED_OPTIONS = tuple(name for name in _DEFAULTS
                        if name not in ("batch", "prompt", "gen", "speculative"))  # fmt: skip


def _resolve(cfg: TransformerConfig, target: Chip | System, given: dict[str, Any]) -> Setup:
    """What a job's options resolve to apart from its request's shape (batch, prompt and
    gen 0): the same for every shape of a sweep."""
    chips, tp, pp, dp, ep = (given[k] for k in ("chips", "tp", "pp", "dp", "ep"))
    objective = given["objective"]
    system = system_for(target, plan_chips(target, chips, tp, pp, dp))
    act, weight, notes = resolve_formats(system.chip, given["precision"],
                                         given["weight_precision"])  # fmt: skip
    kv = resolve_kv_format(act, given["kv_precision"])
    attention = resolve_attention_format(system.chip, act, given["attention_precision"], kv)
    moe_backend = resolve_moe_backend(given["moe_backend"])
    how = resolve_decoding(given["beams"], given["n"], given["speculative"],
                           given["draft_tokens"], given["acceptance"],
                           given["acceptance_lengths"], given["accept_length"])  # fmt: skip
    dp_attention = given["dp_attention"]
    searched = system.chips > 1 and all(v is None for v in (tp, pp, dp, ep)) \
        and not dp_attention
    if searched:
        if objective not in OBJECTIVES:
            raise UserError(f"unknown objective {objective!r}; choose latency or throughput")
        plans = candidate_plans(cfg, system.chips)
        if system.deployment and system.deployment.layout == "pipeline":  # the vendor's
            plans = pipeline_plans(cfg, system.chips)
        if how.draft is not None:  # engines run speculative decoding on one pipeline stage
            plans = [p for p in plans if p.pp == 1]
        if not plans:
            raise UserError(f"no parallelism plan splits {cfg.name} over {system.chips} chips")
    else:
        plans = [complete_plan(system.chips, tp, pp, dp, ep, dp_attention)]
        check_plan(plans[0], cfg, system.chips)
        if how.draft is not None and plans[0].pp > 1:
            raise UserError("--speculative runs on one pipeline stage, as engines run it; "
                            "give --pp 1")  # fmt: skip
    req = Request(0, 0, 0, act, weight, attention, kv, how.width, how.returned, how.step_tokens,
                  how.advance, moe_backend)  # fmt: skip
    memories = [stage_memory(cfg, plan, weight, act, kv or act) for plan in plans]
    one_chip = stage_memory(cfg, Plan(), weight, act, kv or act)
    groups = [graph_group(req, plan) for plan in plans]
    return Setup(system, req, notes, plans, memories, groups, one_chip,
                 default_token_budget(system.chip), given["microbatches"],
                 given["overlap"], objective if searched else None, 0.0, how)  # fmt: skip


def _drafts(cfg: TransformerConfig, how: Decoding, setup: Setup,
            given: dict[str, Any]) -> dict[int, DraftCost]:  # fmt: skip
    """The draft model's cost on each tensor-parallel degree the job's plans use: on that
    many chips of the target's system, decoding the request's whole length (its mean step
    over the same contexts as the target's). An MTP module's embedding table is its
    target's, held once, by the target, and so left out of the draft's weights."""
    draft, shared = how.draft, 0.0
    if draft == "mtp":
        draft = mtp_draft(cfg)
        table = weight_parts(setup.req.weight, setup.req.act).table
        shared = draft.embedding_params * table.itemsize
    elif isinstance(draft, str):
        from xpusim.workloads.resolve import load_model

        draft = load_model(draft)
    if not isinstance(draft, TransformerConfig):
        raise UserError("--speculative takes a transformer (a zoo id or a config.json)")
    setup.decoding = replace(how, draft=draft)
    req, system, found = setup.req, setup.system, {}
    for tp in sorted({p.tp for p in setup.plans}):
        try:
            got = simulate(draft, system.with_chips(tp) if tp > 1 else system.chip, tp=tp, pp=1,
                           dp=1, batch=req.batch, prompt=req.prompt, gen=req.gen,
                           precision=req.act, weight_precision=req.weight, kv_precision=req.kv,
                           attention_precision=given["attention_precision"])  # fmt: skip
        except UserError as error:
            raise UserError(f"the draft {draft.name} on tp {tp}: {error}") from None
        power_w, step_s = got.energy_j / got.latency_s, (how.step_tokens - 1) * got.tpot_s
        memory = got.per_chip_memory_bytes
        found[tp] = DraftCost(got.ttft_s, step_s, power_w * got.ttft_s, power_w * step_s,
                              memory.weights - shared / tp, memory.kv_cache)  # fmt: skip
    return found


def _result(cfg: TransformerConfig, ranks: list[Candidate]) -> LLMInferenceResult:
    """A job's result from its costed candidates, best first."""
    best = ranks[0]
    setup, plan, fullest, m = best.setup, best.plan, best.footprint, best.microbatches
    system, chip, req = setup.system, setup.system.chip, setup.req
    n_chips, replicas, capacity = system.chips, plan.tp * plan.dp, float(chip.capacity_bytes)
    # the whole system: one chip of each stage times the replicas of a stage's chips (tp x
    # dp), and a speculative job's draft model on each of its tp x dp chips
    memory, kv_layer = best.memory, best.memory.layer_kv_bytes(req, m)
    weights = float(sum(memory.weights)) * replicas
    kv = sum(kv_layer * layers for layers in memory.layers) * replicas
    draft = setup.draft(plan)
    if draft is not None:
        weights, kv = weights + draft.weight_bytes * replicas, kv + draft.kv_bytes * replicas
    one = setup.one_chip
    single_copy = one.weights[0] + one.layer_kv_bytes(req, m) * one.layers[0] + fullest.activations
    ttft_s, tpot_s, latency_s, energy_j, comm_s, trip_s = map(best.figure, (
        "ttft_s", "tpot_s", "latency_s", "energy_j", "comm_s", "trip_s"))  # fmt: skip
    return LLMInferenceResult(
        model=cfg.name, params=cfg.param_count, active_params=cfg.active_param_count,
        chip=chip.id, chips=n_chips, system=system.id, plan=plan.to_dict(), microbatches=m,
        sequences_in_flight=req.batch * m * plan.dp, batch=req.batch, prompt=req.prompt,
        gen=req.gen, precision=req.act.value, weight_precision=req.weight.value,
        mode="inference", fits=best.fits,
        reason="" if best.fits else _not_fit_reason(chip, fullest, n_chips),
        min_chips=max(1, -int(-single_copy // capacity)),
        memory_bytes=MemoryBytes.of(
            Footprint(weights, kv, fullest.activations * n_chips), capacity * n_chips),
        per_chip_memory_bytes=MemoryBytes.of(fullest, capacity),
        placement=_placement_names(best),
        ttft_s=ttft_s, tpot_s=tpot_s, latency_s=latency_s, tokens_per_s=best.tokens / latency_s,
        tokens_per_s_per_user=1.0 / tpot_s, energy_j=energy_j,
        joules_per_token=energy_j / best.tokens, avg_power_w=energy_j / latency_s / n_chips,
        tdp_w=chip.tdp_w.value, bottleneck=best.metrics.bottlenecks[best.k], comm_s=comm_s,
        comm_share=comm_s / trip_s,
        # a rank's FLOPs, over the tp ranks of a stage
        prefill_flops=float(best.graphs.flops[0][best.row]) * plan.tp,
        decode_flops_per_step=float(best.graphs.flops[1][best.row]) * plan.tp,
        decoding=setup.decoding.summary(),
        plan_search=None if setup.objective is None else _search(ranks),
        notes=list(_notes(setup)),
    )  # fmt: skip


def _table(cfg: TransformerConfig, costed: list[list[Candidate]]) -> Table:
    """`_result` of many jobs, as columns, in the result's field order: the timeline's
    figures gathered as arrays from each graph group's Metrics, what jobs share (a plan's
    degrees, a placement's names, a decoding's summary) made once and spread, and no
    object made a job (a sweep's rows never are). tests/test_result_table.py holds each
    row equal to `_result`'s for the same job."""
    n = len(costed)
    best = [ranks[0] for ranks in costed]
    setups = [c.setup for c in best]
    systems = [s.system for s in setups]
    chips = [s.chip for s in systems]
    reqs = [s.req for s in setups]
    plans = [c.plan for c in best]
    m = [c.microbatches for c in best]
    fits = [c.fits for c in best]
    fullest = [c.footprint for c in best]
    n_chips = np.array([s.chips for s in systems])
    capacity = np.array([float(chip.capacity_bytes) for chip in chips])
    f, bottlenecks = _figures(best, ("ttft_s", "tpot_s", "latency_s", "energy_j", "comm_s",
                                     "trip_s"))  # fmt: skip
    tokens = np.array([c.tokens for c in best])
    tp = np.array([p.tp for p in plans])
    replicas = tp * np.array([p.dp for p in plans])
    stage_weights = _once([c.memory for c in best], lambda memory: float(sum(memory.weights)))
    weights, kv, single_copy = [], [], []
    for c, req, mb, fp, whole in zip(best, reqs, m, fullest, stage_weights, strict=True):
        memory, one, k = c.memory, c.setup.one_chip, c.layer_kv_bytes
        weights.append(whole)
        kv.append(sum(k * layers for layers in memory.layers))
        single_copy.append(one.weights[0] + one.layer_kv_bytes(req, mb) * one.layers[0]
                           + fp.activations)  # fmt: skip
    weights, kv = np.array(weights) * replicas, np.array(kv) * replicas
    drafts = [s.draft(p) for s, p in zip(setups, plans, strict=True)]
    if any(d is not None for d in drafts):
        weights = weights + np.array([d.weight_bytes if d else 0.0 for d in drafts]) * replicas
        kv = kv + np.array([d.kv_bytes if d else 0.0 for d in drafts]) * replicas
    per_chip = np.array([(fp.weights, fp.kv_cache, fp.activations) for fp in fullest]).T
    system_activations = per_chip[2] * n_chips
    latency_s = f["latency_s"]
    columns: dict[str, list | Nested] = {
        "model": [cfg.name] * n, "params": [cfg.param_count] * n,
        "active_params": [cfg.active_param_count] * n,
        "chip": [chip.id for chip in chips], "chips": n_chips.tolist(),
        "system": [s.id for s in systems],
        "plan": _once(plans, Plan.to_dict), "microbatches": m,
        "sequences_in_flight": [r.batch * mb * p.dp for r, mb, p in zip(reqs, m, plans,
                                                                        strict=True)],
        "batch": [r.batch for r in reqs], "prompt": [r.prompt for r in reqs],
        "gen": [r.gen for r in reqs], "precision": [r.act.value for r in reqs],
        "weight_precision": [r.weight.value for r in reqs], "mode": ["inference"] * n,
        "fits": fits,
        "reason": ["" if fit else _not_fit_reason(chip, fp, s.chips) for fit, chip, fp, s in
                   zip(fits, chips, fullest, systems, strict=True)],
        "min_chips": [max(1, -int(-total // cap)) for total, cap in
                      zip(single_copy, capacity.tolist(), strict=True)],
        "memory_bytes": _memory_bytes(weights, kv, system_activations, capacity * n_chips),
        "per_chip_memory_bytes": _memory_bytes(*per_chip, capacity),
        "placement": _once(best, _placement_names, key=lambda c: (id(c.placement),
                                                                   id(c.setup.system.chip))),
        "ttft_s": f["ttft_s"].tolist(), "tpot_s": f["tpot_s"].tolist(),
        "latency_s": latency_s.tolist(), "tokens_per_s": (tokens / latency_s).tolist(),
        "tokens_per_s_per_user": (1.0 / f["tpot_s"]).tolist(),
        "energy_j": f["energy_j"].tolist(),
        "joules_per_token": (f["energy_j"] / tokens).tolist(),
        "avg_power_w": (f["energy_j"] / latency_s / n_chips).tolist(),
        "tdp_w": [chip.tdp_w.value for chip in chips],
        "bottleneck": bottlenecks,
        "comm_s": f["comm_s"].tolist(), "comm_share": (f["comm_s"] / f["trip_s"]).tolist(),
        "prefill_flops": [float(c.graphs.flops[0][c.row]) * c.plan.tp for c in best],
        "decode_flops_per_step": [float(c.graphs.flops[1][c.row]) * c.plan.tp for c in best],
        "decoding": _once([s.decoding for s in setups], Decoding.summary),
        "plan_search": [None if ranks[0].setup.objective is None else _search(ranks)
                        for ranks in costed],
        "cost": [None] * n, "layout": [""] * n,
        "notes": [_notes(s) for s in setups],  # ops and collectives: their default, []
    }  # fmt: skip
    return Table(LLMInferenceResult, columns, n)


def _figures(best: list[Candidate],
             names: tuple[str, ...]) -> tuple[dict[str, np.ndarray], list[str]]:  # fmt: skip
    """Candidate.figure of each candidate, as arrays, and each one's bottleneck: gathered
    from each graph group's Metrics at once, the bottlenecks of these candidates only."""
    found = {name: np.empty(len(best)) for name in names}
    bottlenecks: list[str] = [""] * len(best)
    groups: dict[int, tuple[Metrics, list[int], list[int]]] = {}
    for i, c in enumerate(best):
        at = groups.get(id(c.metrics)) or groups.setdefault(id(c.metrics), (c.metrics, [], []))
        at[1].append(i)
        at[2].append(c.k)
    for metrics, rows, ks in groups.values():
        for name in names:
            found[name][rows] = getattr(metrics, name)[ks]
        for i, label in zip(rows, metrics.bottlenecks_of(np.array(ks)), strict=True):
            bottlenecks[i] = label
    return found, bottlenecks


def _once(objects: list[Any], made: Callable[[Any], Any],
          key: Callable[[Any], Hashable] = id) -> list[Any]:  # fmt: skip
    """made(o) for each object, made once for each distinct one (by identity, or by `key`):
    a sweep's jobs share a few plans, memories, placements and decodings. (A row taken
    from the table gets its own copy of a dict: Table.row.)"""
    made_for: dict[Hashable, Any] = {}
    found = []
    for o in objects:
        k = key(o)
        value = made_for[k] if k in made_for else made_for.setdefault(k, made(o))
        found.append(value)
    return found


def _memory_bytes(weights: np.ndarray, kv: np.ndarray, activations: np.ndarray,
                  capacity: np.ndarray) -> Nested:  # fmt: skip
    """MemoryBytes as columns, its total summed in Footprint.total's order."""
    return Nested(MemoryBytes, {
        "weights": weights.tolist(), "kv_cache": kv.tolist(), "activations": activations.tolist(),
        "total": (weights + kv + activations).tolist(), "capacity": capacity.tolist()})


def _placement_names(c: Candidate) -> dict[str, str]:
    """Where a candidate's fullest chip keeps each role, by its memory levels' names."""
    memory = c.setup.system.chip.memory
    return {role.value: memory[i].name for role, i in c.placement.home.items()}


def _notes(setup: Setup) -> list[str]:
    """A result's notes: its job's, and the prefill's chunking where it is chunked."""
    req = setup.req
    chunked = PrefillChunks(req.batch * req.prompt, setup.token_budget).note()
    return [*setup.notes, chunked] if chunked else setup.notes


def _search(ranks: list[Candidate]) -> dict[str, Any]:
    """What a job's plan search found: its plan, how many it weighed and the runner-up."""
    best, other = ranks[0], ranks[1] if len(ranks) > 1 else None
    return {
        "objective": best.setup.objective,
        "candidates": len(best.setup.plans),
        "feasible": len(ranks) if best.fits else 0,  # worth_costing keeps those that fit
        "chosen": best.plan.to_dict(),
        "runner_up": other and {
            "plan": other.plan.to_dict(), "fits": other.fits, "tpot_s": other.figure("tpot_s"),
            "ttft_s": other.figure("ttft_s"),
            "tokens_per_s": other.tokens / other.figure("latency_s"),
        },
        "search_s": time.perf_counter() - best.setup.started_s,
    }


def _add_detail(cfg: TransformerConfig, cand: Candidate, result: LLMInferenceResult) -> None:
    """A result's per-op reports and its decode step's collectives (`simulate`'s)."""
    setup, plan, graphs, row = cand.setup, cand.plan, cand.graphs, cand.row
    prefill, decode = cand.metrics.phases
    ttft_s, trip_s, send_prefill_s, send_decode_s = map(cand.figure, (
        "ttft_s", "trip_s", "send_prefill_s", "send_decode_s"))  # fmt: skip
    act_bytes = setup.req.batch * hidden_state_bytes(cfg, setup.req.act)
    pre, dec = (values.steps_of(row) for values in graphs.phase_values)
    tpot_s = cand.figure("tpot_s")
    prefill_rows = [
        *op_reports("prefill", pre, prefill.config(cand.k), ttft_s),
        *_sends("prefill", plan.hops, send_prefill_s, ttft_s, act_bytes * setup.req.prompt),
    ]
    decode_rows = [
        *op_reports("decode", dec, decode.config(cand.k), tpot_s, graphs.step_weights[row]),
        *_sends("decode", plan.hops, send_decode_s, tpot_s, act_bytes),
    ]
    speculative = setup.decoding.draft is not None
    result.ops = [
        *prefill_rows,
        *_rest("prefill", ttft_s, prefill_rows, {"overlap.hidden": ttft_s}, speculative),
        *decode_rows,
        *_rest("decode", tpot_s, decode_rows, {"overlap.hidden": trip_s,
                                               "pipeline.wait": tpot_s}, speculative),
    ]
    result.collectives = collective_algorithms(decode.table, setup.system, plan.tp,
                                               graphs.collective_bytes[1][row])  # fmt: skip
    if plan.chain > 1:  # a stream machine's pipeline: its per-chip time and hops
        from xpusim.cost.stream_machine import pipeline_note

        result.notes = [*result.notes, pipeline_note(setup.system, plan, max(cand.memory.weights),
                                                     send_decode_s)]  # fmt: skip


def _sends(phase: str, hops: int, send_s: float, phase_s: float, nbytes: float) -> list[OpReport]:
    """The pipeline's hops as one report: a token's trip crosses `hops` of them (pp - 1, or
    one between every pair of consecutive chips of a chained pipeline), so with the ops'
    they add up to the phase's time."""
    if hops == 0:
        return []
    return [OpReport(phase=phase, name="pipeline.send", kind="send", count=hops, flops=0.0,
                     bytes=nbytes, time_s=send_s, compute_s=0.0, memory_s=0.0, overhead_s=0.0,
                     comm_s=send_s, energy_j=0.0, bottleneck=Bottleneck.INTERCONNECT.label,
                     share=hops * send_s / phase_s if phase_s else 0.0)]  # fmt: skip


def _rest(phase: str, phase_s: float, rows: list[OpReport], ends: dict[str, float],
          speculative: bool) -> list[OpReport]:
    """Rows for a phase's time outside its ops and sends, so that `--ops` sums to TTFT and
    TPOT: in order, each named part runs from the rows' sum (or the part before) to its end.
    "overlap.hidden" (negative): collectives hidden behind computation (--overlap), up to a
    token's trip through the pipeline; "pipeline.wait": a step beyond that trip, while the
    microbatches in flight queue at the slowest stage (m x its time, timeline.py). A
    speculative job's draft steps and tokens per step take the place of both."""
    at = sum(r.count * r.time_s for r in rows)
    if speculative:
        ends = {"speculative.draft": phase_s}
    found = []
    for name, end in ends.items():
        part = end - at
        if abs(part) > 1e-12 * phase_s:
            found.append(OpReport(phase=phase, name=name, kind="wait", count=1, flops=0.0,
                                  bytes=0.0, time_s=part, compute_s=0.0, memory_s=0.0,
                                  overhead_s=0.0, comm_s=0.0, energy_j=0.0,
                                  bottleneck="wait", share=part / phase_s))  # fmt: skip
        at = end
    return found


def _not_fit_reason(chip: Chip, fp: Footprint, chips: int) -> str:
    gb = 1e9
    where = f"{chip.id} holds" if chips == 1 else f"each of the {chips} {chip.id} chips holds"
    return (
        f"memory: the fullest chip needs {fp.total / gb:.1f} GB (weights {fp.weights / gb:.1f}, "
        f"KV cache {fp.kv_cache / gb:.2f}, activations {fp.activations / gb:.2f}) but {where} "
        f"{chip.capacity_bytes / gb:.2f} GB"
    )


register("llm", "inference", simulate, batched=simulate_many)
