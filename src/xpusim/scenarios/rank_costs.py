"""Per-op time and energy of the graph one chip runs, for many configurations at once.

A rank's graphs (one tensor/expert-parallel rank, all pipeline stages) depend on the model,
the formats and the plan's tp and ep only, never on the chip, and not on the request's shape
either: their dimensions are arrays over the requests asked for together (shapes as arrays,
ir/tensor.py), so one compact graph (one layer standing for the identical others) per phase
counts every op's FLOPs and bytes for all of them. Costing is then array arithmetic with a
leading configuration axis: every (request, system, plan) of one format and (tp, ep) is
costed by one call, whether they are the plans of a search, the chips, what-if specs and
chip counts of a sweep, or its batches, prompts and generation lengths. Pipeline stages are
(distinct ops x stages) count matrices, so any depth costs a few array sums.

Decode steps: op counts are affine in the KV length, so a decode step's costs are piecewise
affine in its index (a max of affine compute and memory times). They are evaluated at up to
DECODE_NODES + 1 steps and summed with weights that are exact wherever the costs are affine
between nodes; the error is confined to the few intervals where an op crosses from one bound
to another, and a test holds it against evaluating every step.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from xpusim.compiler.memory_plan import Placement, peak_activation_bytes
from xpusim.compiler.partition import Plan, op_stage_counts, partition
from xpusim.cost.collectives import Collective, CollectiveLine, collective_line
from xpusim.cost.op_table import OpTable, distinct_stage_counts, op_table
from xpusim.cost.roofline import HardwareArrays, OpCosts, evaluate, placement_onehot
from xpusim.hardware.spec import Chip
from xpusim.hardware.system import System
from xpusim.ir.dtypes import DType, Format
from xpusim.ir.graph import Graph
from xpusim.ir.op import Op, OpKind
from xpusim.ir.tensor import ROLES
from xpusim.memo import distinct, remembered, scoped
from xpusim.workloads.transformer import StepShape, build_step
from xpusim.workloads.transformer_config import TransformerConfig

DECODE_NODES = 32
"""Intervals the decode steps are cut into; gen <= 34 evaluates every step."""


@dataclass(frozen=True, init=False)
class Request:
    """What is asked of the system: shapes and formats of one batch of sequences."""

    batch: int  # sequences per microbatch
    prompt: int
    gen: int
    act: DType
    weight: Format
    attention: DType | None = None  # attention's compute format when not act's
    kv: DType | None = None  # the KV cache's storage format when not act's
    # How it decodes (scenarios/decoding.py): sequences decoded per prompt (beams or parallel
    # samples), tokens each decode step feeds per sequence (a speculative verify's draft
    # tokens + 1), and tokens a sequence advances per step (the expected accepted ones)
    width: int = 1
    returned: int = 1  # sequences output per prompt: 1 for beam search
    step_tokens: int = 1
    advance: float = 1.0
    # worked out once: a sweep looks each request up by hash for every plan of every point
    _hash: int = field(init=False, repr=False, compare=False, default=0)
    steps_after_first: int = field(init=False, repr=False, compare=False, default=0)
    """Decode steps after the prefill's first token: one per token, or per expected
    advance of a speculative step."""
    formats: tuple[DType, Format, DType | None, DType | None] = field(
        init=False, repr=False, compare=False, default=())
    """act, weight, attention and kv: what a graph's structure depends on besides tp and
    ep; requests that share them share one graph over their shapes (ShapeGraphs)."""

    def __init__(self, batch: int, prompt: int, gen: int, act: DType, weight: Format,
                 attention: DType | None = None, kv: DType | None = None, width: int = 1,
                 returned: int = 1, step_tokens: int = 1,
                 advance: float = 1.0) -> None:  # fmt: skip
        """Written out: a frozen dataclass's own __init__ sets each field through
        object.__setattr__, 1.8 us a request, and a sweep makes one a point; here the fields
        go into the instance's dict in one call (0.8 us, 2026-12-04)."""
        given = (batch, prompt, gen, act, weight, attention, kv, width, returned, step_tokens,
                 advance)  # fmt: skip
        self.__dict__.update(batch=batch, prompt=prompt, gen=gen, act=act, weight=weight,
                             attention=attention, kv=kv, width=width, returned=returned,
                             step_tokens=step_tokens, advance=advance, _hash=hash(given),
                             steps_after_first=math.ceil((gen - 1) / advance),
                             formats=(act, weight, attention, kv))  # fmt: skip

    def _given(self) -> tuple:
        return (self.batch, self.prompt, self.gen, self.act, self.weight, self.attention,
                self.kv, self.width, self.returned, self.step_tokens, self.advance)

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple:
        """Pickled as its fields: another process hashes them anew (str hashes differ)."""
        return Request, self._given()

    @property
    def kv_format(self) -> DType:
        return self.kv or self.act

    @property
    def cached_tokens(self) -> int:
        """Tokens one prompt keeps in the KV cache at its longest: the prompt once (its
        blocks shared by its beams or samples, as paged engines share them), each
        sequence's generated tokens, and a verify step's draft tokens beyond them."""
        return self.prompt + self.width * (self.gen + self.step_tokens - 1)

    @property
    def decode_steps(self) -> int:
        """Decode steps the graphs cost (one where gen is 1: the step that would follow)."""
        return max(self.steps_after_first, 1)

    @property
    def output_tokens(self) -> int:
        """Tokens a microbatch outputs."""
        return self.batch * self.returned * self.gen


@scoped()  # a sweep asks for the same generation lengths again and again
def step_nodes(steps: int, intervals: int = DECODE_NODES) -> tuple[np.ndarray, np.ndarray]:
    """Step indices to evaluate and the weights that sum any piecewise-affine quantity
    over all `steps` from them: over integers a..b an affine f sums to (b - a + 1) x the
    mean of f(a) and f(b); neighbouring intervals share their end node."""
    # sorted(set()), not np.unique: its first call imports numpy.ma (numpy 2.4), 10-26 ms
    # of every process that simulates (tests/test_startup.py)
    spread = np.round(np.linspace(0, steps - 1, min(steps, intervals + 1))).tolist()
    nodes = np.array(sorted(set(spread)))
    if len(nodes) == 1:
        return nodes, np.ones(1)
    span = np.diff(nodes) + 1  # integers in each closed interval
    weights = np.zeros(len(nodes))
    weights[:-1] += span / 2
    weights[1:] += span / 2
    weights[1:-1] -= 1  # an interior node was counted by both its intervals
    return nodes, weights


def ordered_sum(values: np.ndarray, axis: int) -> np.ndarray:
    """A sum whose order of additions depends only on the length of the axis, as a tree:
    the axis is padded with zeros to a power of two and halved, first half plus second,
    until one term is left. numpy's own sum groups terms differently with the shape of the
    array around them (pairwise, unrolled); a configuration's result must not depend on
    how many others were costed beside it. Zeros appended past the last term change
    nothing: a pipeline of 3 stages padded to 16 sums exactly as it does alone."""
    values = np.moveaxis(values, axis, 0)
    n = len(values)
    size = 1 << max(n - 1, 0).bit_length()
    if size != n:  # the first halving, without the zeros: x + 0.0 is x, except for -0.0
        half = size // 2
        head = values[:half].astype(float)  # a copy
        head[: n - half] += values[half:]
        values = head
    while len(values) > 1:
        half = len(values) // 2
        values = values[:half] + values[half:]
    # where a zero was added, the sum is never -0.0 (0.0 + -0.0 is 0.0): nor is it here
    return values[0] + 0.0 if size != n else values[0]


@dataclass(frozen=True)
class PhaseValues:
    """A phase's op counts for R requests at the steps each is costed at, split into the
    ops that do the same at every step and those that do not (attention over a growing KV
    cache): only the latter are costed per step, which keeps long generations cheap.

    Counts are affine in the KV length, so the counts of a request's first and last costed
    step (`ends`) give every step between them exactly. Kept per request, not per
    configuration: a sweep's configurations index into them."""

    ends: OpTable  # counts on leading (request, end) axes: (R, 2, ...), or (R, 1, ...)
    fraction: np.ndarray  # (R, steps) where each costed step lies from the first end to the last
    weights: np.ndarray  # (R, steps) how many steps each costed one stands for

    @cached_property
    def varying(self) -> np.ndarray:
        """Positions of the ops whose counts differ between a request's ends: those that
        grow with the KV cache, whatever the requests beside (their ends always differ)."""
        t, n = self.ends, len(self.ends)
        moves = [(a[:, 1:] != a[:, :1]).reshape(-1, n).any(axis=0)
                 for a in (t.matrix_flops, t.vector_flops, t.role_bytes)]  # fmt: skip
        return np.flatnonzero(np.logical_or.reduce(moves))

    @cached_property
    def first(self) -> OpTable:
        return self.ends.subset(steps=(slice(None), slice(0, 1)))

    @cached_property
    def moving(self) -> OpTable:
        """The varying ops at every costed step: (R, steps, ...)."""
        ends = self.ends.subset(ops=self.varying)
        f = self.fraction[..., None]

        def mix(values: np.ndarray) -> np.ndarray:
            first, last = values[:, :1], values[:, -1:]
            return first + (last - first) * (f if values.ndim == 3 else f[..., None])

        return replace(ends, matrix_flops=mix(ends.matrix_flops),
                       vector_flops=mix(ends.vector_flops), role_bytes=mix(ends.role_bytes))

    def steps_of(self, row: int) -> OpTable:
        """Every op at every costed step of one request: (steps, ...), for its report."""
        steps = self.weights.shape[1]

        def full(first: np.ndarray, moving: np.ndarray) -> np.ndarray:
            values = np.repeat(first[row], steps, axis=0)
            values[..., self.varying] = moving[row]
            return values

        first, moving = self.first, self.moving
        return replace(first, **{f: full(getattr(first, f), getattr(moving, f))
                                 for f in ("matrix_flops", "vector_flops", "role_bytes")})

    @cached_property
    def activation_peak(self) -> np.ndarray:
        """(R, ops) each op's activation bytes at a request's largest step (an end: affine)."""
        return self.ends.activation_bytes.max(axis=1)


@dataclass(frozen=True)
class ShapeGraphs:
    """The compact graphs one rank runs for many requests of one format, tp and ep.

    Their dimensions are arrays over the requests (ir/tensor.py), (R, 1), or (R, 2) for the
    KV cache: one prefill graph for every request's prompt, one decode graph for every
    request's first and last decode step (the steps between are interpolated: PhaseValues).
    A sweep over batch, prompt and generation lengths thus builds and tabulates two graphs
    per format and (tp, ep), not two per shape. They never depend on the chip."""

    requests: tuple[Request, ...]
    prefill: Graph  # dimensions (R, 1)
    decode: Graph  # dimensions (R, 1) or (R, 2): first and last decode step
    step_fraction: np.ndarray  # (R, steps) costed decode steps, from first (0) to last (1)
    step_weights: np.ndarray  # (R, steps) decode steps each costed one stands for
    num_layers: int

    @cached_property
    def row(self) -> dict[Request, int]:
        return {r: i for i, r in enumerate(self.requests)}

    @cached_property
    def tables(self) -> tuple[OpTable, OpTable]:
        """Prefill (R, 1, ...) and decode (R, 2, ...): its first and last step."""
        r = len(self.requests)
        return _leading(op_table(self.prefill), (r, 1)), _leading(op_table(self.decode), (r, 2))

    @cached_property
    def phase_values(self) -> tuple[PhaseValues, PhaseValues]:
        prefill, decode = self.tables
        one = np.ones((len(self.requests), 1))
        return (PhaseValues(prefill, one - 1, one),
                PhaseValues(decode, self.step_fraction, self.step_weights))  # fmt: skip

    @cached_property
    def activation_bytes(self) -> np.ndarray:
        """(R,) the largest activations of a request's prefill and last decode step."""
        r = len(self.requests)
        decode = np.broadcast_to(peak_activation_bytes(self.decode), (r, 2))
        prefill = np.broadcast_to(peak_activation_bytes(self.prefill), (r, 1))
        return np.maximum(prefill[:, 0], decode[:, -1])

    @cached_property
    def flops(self) -> tuple[np.ndarray, np.ndarray]:
        """(R,) FLOPs of each request's prefill and first decode step."""
        return tuple(  # type: ignore[return-value]
            (t.matrix_flops[:, 0] + t.vector_flops[:, 0]) @ t.count for t in self.tables
        )

    @cached_property
    def collective_bytes(self) -> tuple[np.ndarray, np.ndarray]:
        """(R, ops) bytes each collective op sends, per phase (zero for other ops); a
        decode step's do not grow with the cache, so the first step's stand for all."""
        found = []
        for table in self.tables:
            shape = table.matrix_flops.shape[:2]  # (R, steps)
            nbytes = np.zeros((shape[0], len(table)))
            for i, op in enumerate(table.ops):
                if op.kind is OpKind.COLLECTIVE:
                    nbytes[:, i] = np.broadcast_to(op.inputs[0].nbytes, shape)[:, 0]
            found.append(nbytes)
        return found[0], found[1]

    def depth_counts(self, phase: int, pp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """stage_counts for each configuration's depth: (K, 1, ops, deepest), the stages a
        shallower pipeline lacks running nothing (so sums and maxima over stages hold)."""
        depths, which = np.unique(pp, return_inverse=True)
        deepest = int(depths[-1])
        found = []
        for part in (0, 1):
            padded = np.zeros((len(depths), len(self.tables[phase]), deepest))
            for i, d in enumerate(depths):
                padded[i, :, :d] = self.stage_counts(phase, int(d))[part]
            found.append(padded[which][:, None])
        return found[0], found[1]

    def stage_counts(self, phase: int, pp: int) -> tuple[np.ndarray, np.ndarray]:
        """(distinct ops, pp) instances each stage runs, of all ops and of collectives, for
        the prefill (phase 0) or decode (1)."""
        graph = (self.prefill, self.decode)[phase]
        return _stage_counts(self.layouts[phase], graph, self.tables[phase], self.num_layers, pp)

    @cached_property
    def layouts(self) -> tuple[tuple, tuple]:
        """What stage counts depend on, per phase: each op's layer, copies, whether it is a
        collective, and its distinct-op row. Other requests of one model, plan and format
        have the same, so the counts are shared between them."""
        return tuple(  # type: ignore[return-value]
            (tuple((op.layer, graph.copies(op), op.kind is OpKind.COLLECTIVE) for op in graph.ops),
             table.index.tobytes())
            for graph, table in zip((self.prefill, self.decode), self.tables, strict=True)
        )  # fmt: skip


def _leading(table: OpTable, shape: tuple[int, int]) -> OpTable:
    """A table whose leading axes broadcast to `shape` (R, steps), with them in full."""
    n = len(table)

    def shaped(values: np.ndarray, trailing: tuple[int, ...]) -> np.ndarray:
        return np.broadcast_to(values, (*shape, *trailing))

    return replace(
        table,
        matrix_flops=shaped(table.matrix_flops, (n,)),
        vector_flops=shaped(table.vector_flops, (n,)),
        role_bytes=shaped(table.role_bytes, (len(ROLES), n)),
    )


def _stage_counts(
    layout: tuple, graph: Graph, table: OpTable, num_layers: int, pp: int
) -> tuple[np.ndarray, np.ndarray]:
    """Kept by layout (not by graph: the graphs of other requests share it)."""

    def make() -> tuple[np.ndarray, np.ndarray]:
        per_op = op_stage_counts(graph, num_layers, pp)
        is_comm = np.array([op.kind is OpKind.COLLECTIVE for op in graph.ops], dtype=float)
        return distinct_stage_counts(table, per_op), distinct_stage_counts(table, per_op, is_comm)

    return remembered("stage counts", (), (layout, num_layers, pp), make)


def shape_graphs(
    cfg: TransformerConfig, requests: Sequence[Request], tp: int, ep: int
) -> ShapeGraphs:
    """ShapeGraphs of requests that share their formats, in the order first asked for: a
    sweep's chunk costs its configurations in that order, so that their rows are the
    graphs' own and no table is copied row by row (cost_phases)."""
    return _shape_graphs(cfg, tuple(dict.fromkeys(requests)), tp, ep)


@scoped(maxsize=16)  # `compare` asks again per chip; a sweep's chunks never repeat a set
def _shape_graphs(
    cfg: TransformerConfig, requests: tuple[Request, ...], tp: int, ep: int
) -> ShapeGraphs:
    act, weight, attention, kv_format = requests[0].formats
    if any(r.formats != requests[0].formats for r in requests):
        raise ValueError("ShapeGraphs needs requests of one format")
    steps = np.array([r.decode_steps for r in requests])
    nodes = {s: step_nodes(s) for s in sorted(set(steps.tolist()))}
    width = max(len(n) for n, _ in nodes.values())
    # steps past a request's own count repeat its last node with weight 0: summed to nothing
    padded = np.zeros((len(requests), width))
    step_weights = np.zeros((len(requests), width))
    for s, (at_nodes, weights) in nodes.items():
        at = steps == s
        padded[at] = np.pad(at_nodes, (0, width - len(at_nodes)), mode="edge")
        step_weights[at, : len(weights)] = weights
    batch = np.array([r.batch for r in requests])[:, None]
    prompt = np.array([r.prompt for r in requests])[:, None]
    width = np.array([r.width for r in requests])[:, None]
    fed = np.array([r.step_tokens for r in requests])[:, None]
    advance = np.array([r.advance for r in requests])[:, None]
    # step i feeds `fed` tokens after prompt + i x advance cached ones (one token, advance 1:
    # it attends prompt + 1 + i keys); the ends differ even for one step, so that which ops
    # vary with the cache (PhaseValues.varying) never depends on the other requests
    last = np.maximum(steps - 1, 1)[:, None]
    kv = prompt + fed + np.rint(advance * np.hstack([0 * last, last])).astype(np.int64)
    # a plain decode feeds the integer 1: the decode graph's query dimension stays a scalar
    # (one shape for every request, as before speculative steps), an array only where a
    # verify feeds more
    q = 1 if (fed == 1).all() else fed
    fraction = padded / last

    def rank(step: StepShape) -> Graph:
        graph = build_step(cfg, step, act, weight, compact=True, attention=attention,
                           kv=kv_format)  # fmt: skip
        return partition(graph, Plan(tp=tp, ep=ep))

    return ShapeGraphs(requests, rank(StepShape(batch, prompt, prompt)),
                       rank(StepShape(batch * width, q, kv, logits=q,
                                      cross=prompt if cfg.is_encoder_decoder else 0,
                                      decode=True)),
                       fraction, step_weights,
                       cfg.num_layers)  # fmt: skip


@dataclass(frozen=True)
class PhaseCosts:
    """One phase's per-op costs. `costs` holds every op at the phase's first step: (K, 1,
    ops) for K inference configurations, (ops,) for a training pass. The ops whose work
    changes from step to step (`varying`) also have `steps`: (K, steps, varying ops)."""

    table: OpTable  # the distinct ops and their counts
    costs: OpCosts
    counts: np.ndarray  # (..., ops, pp) instances of each distinct op each stage runs
    comm_counts: np.ndarray  # (..., ops, pp) the same, of collectives only
    varying: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))
    steps: OpCosts | None = None
    step_weights: np.ndarray = field(default_factory=lambda: np.ones((1, 1)))  # (K, steps)
    _sums: dict[tuple[str, bool], np.ndarray] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def stage_sums(self, name: str, comm_only: bool = False) -> np.ndarray:
        """A cost (an OpCosts field) summed over each stage's op instances: (..., pp), with
        the step axis where the phase has one. Kept: the timeline asks for some twice."""
        if (name, comm_only) not in self._sums:
            counts = self.comm_counts if comm_only else self.counts
            self._sums[name, comm_only] = self._summed(name, counts)
        return self._sums[name, comm_only]

    def totals(self, name: str, comm_only: bool = False) -> np.ndarray:
        """A cost summed over every stage's op instances, without the stage axis: (K,
        steps). Energy and link time are wanted only in total, and summing each op's count
        over the stages first (integers: exact) spares the per-stage products."""
        counts = self.comm_counts if comm_only else self.counts
        return self._summed(name, counts.sum(axis=-1, keepdims=True))[..., 0]

    def _summed(self, name: str, counts: np.ndarray) -> np.ndarray:
        """Σ over ops of the cost times `counts` (..., ops, stages); the ops that vary by
        step are taken from `steps`, the others from the first step's costs."""
        values = getattr(self.costs, name)
        if self.steps is None or not len(self.varying):
            return ordered_sum(values[..., None] * counts, axis=-2)
        fixed = values.copy()
        fixed[..., self.varying] = 0.0
        moving = getattr(self.steps, name)[..., None] * np.take(counts, self.varying, axis=-2)
        return ordered_sum(fixed[..., None] * counts, axis=-2) + ordered_sum(moving, axis=-2)

    @cached_property
    def _steps(self) -> np.ndarray:
        """(K,) each configuration's decode steps (the weights' sum)."""
        return ordered_sum(self.step_weights, axis=-1)

    def step_mean(self, values: np.ndarray) -> np.ndarray:
        """Mean over every step of a per-step quantity (K, steps): an ordered sum, so the
        steps of weight 0 that pad a short generation beside longer ones change nothing."""
        return ordered_sum(values * self.step_weights, axis=-1) / self._steps

    def op_mean(self, name: str, ks: np.ndarray | None = None) -> np.ndarray:
        """A cost of each op averaged over the steps: (K, ..., ops), or of configurations
        `ks` only (each one's mean is its own: the same numbers as the whole's rows)."""
        at = slice(None) if ks is None else ks
        values = getattr(self.costs, name)[at, 0].copy()
        if self.steps is not None and len(self.varying):
            moving = getattr(self.steps, name)[at]
            inner = (1,) * (moving.ndim - 2)
            weights = self.step_weights[at]
            w = weights.reshape(*weights.shape, *inner)
            mean = ordered_sum(moving * w, axis=1) / self._steps[at].reshape(-1, *inner)
            values[..., self.varying] = mean
        return values

    def config(self, k: int) -> OpCosts:
        """Configuration k's per-op costs, averaged over the steps."""
        return OpCosts(*(self.op_mean(f)[k] for f in OpCosts.__dataclass_fields__))


def _collective_line(op: Op, system: System, plan: Plan) -> CollectiveLine:
    """A collective op's line on the system; tp groups span tp chips, ep groups tp x ep
    (tp inner)."""
    span = {"tp": plan.tp, "ep": plan.tp * plan.ep}[str(op.attr("group"))]
    kind = Collective(str(op.attr("collective")))
    return collective_line(system, kind, int(op.attr("size")), span)


def comm_lines(table: OpTable, system: System, plan: Plan) -> tuple[np.ndarray, np.ndarray]:
    """(fixed_s, s_per_byte) of each collective op's line on the system (zero for other
    ops). A collective's time is a line in its bytes (cost/collectives.py) whose terms
    depend on the topology and the collective only, so the lines are kept per topology and
    the table's collectives and shared by every request; only the bytes are a request's."""
    collectives, signature = table.collectives
    return remembered(
        "comm lines",
        tuple(system.levels), (signature, len(table), plan.tp, plan.ep),
        lambda: _comm_lines(collectives, len(table), system, plan),
    )  # fmt: skip


def _comm_lines(
    collectives: tuple[tuple[int, Op], ...], n: int, system: System, plan: Plan
) -> tuple[np.ndarray, np.ndarray]:
    fixed_s, s_per_byte = np.zeros(n), np.zeros(n)
    for i, op in collectives:
        line = _collective_line(op, system, plan)
        if line.algorithm != "none":
            fixed_s[i], s_per_byte[i] = line.fixed_s, line.s_per_byte
    return fixed_s, s_per_byte


def collective_algorithms(
    table: OpTable, system: System, plan: Plan, nbytes: np.ndarray | None = None
) -> list[dict]:
    """The algorithm and level chosen for each distinct collective, for reports; `nbytes`
    gives each op's bytes where its tensors hold a shape axis (ShapeGraphs.collective_bytes)."""
    found = []
    for i, op in enumerate(table.ops):
        if op.kind is OpKind.COLLECTIVE:
            sent = float(op.inputs[0].nbytes if nbytes is None else nbytes[i])
            cost = _collective_line(op, system, plan).cost(sent)
            found.append({
                "op": op.name, "collective": op.attr("collective"), "group": op.attr("group"),
                "size": op.attr("size"), "bytes": sent,
                "algorithm": cost.algorithm, "level": cost.level, "time_s": cost.time_s,
            })  # fmt: skip
    return found


def cost_phases(
    graphs: ShapeGraphs,
    rows: np.ndarray,
    systems: Sequence[System],
    placements: Sequence[Placement],
    plan: Plan,
    pp: np.ndarray,
    phases: tuple[int, ...] = (0, 1),
) -> tuple[PhaseCosts, ...]:
    """(prefill, decode) costs of one rank under K configurations: the request at rows[k]
    on system k with placement k (where its fullest chip keeps what) and a pipeline of
    pp[k] stages, all with `plan`'s tp and ep; `phases` (0 prefill, 1 decode) only those
    (a serving step cost tabulates prefill graphs alone).

    The K configurations of a sweep share a few chips, placements and topologies: each
    figure is worked out once per distinct object and spread to the configurations by index.
    """
    each_system, system_of = distinct(systems)
    chips, chip_of = distinct([s.chip for s in each_system])
    homes, home_of = distinct(placements)
    # link times depend on a system's topology levels only, which its copies share
    topologies, topology_of = distinct(each_system, key=lambda s: id(s.levels))
    chip_of, topology_of = chip_of[system_of], topology_of[system_of]
    # plans that differ only in their pipeline depth run the same ops at the same cost: each
    # distinct (request, chip, placement, topology) is evaluated once and spread by index
    key = ((rows * len(chips) + chip_of) * len(homes) + home_of) * len(topologies) + topology_of
    _, once, spread = np.unique(key, return_index=True, return_inverse=True)
    if len(once) == len(key):  # all distinct (a sweep of shapes): costed in their own order
        once = spread = slice(None)
    rows, chip_of, home_of, topology_of = (a[once] for a in (rows, chip_of, home_of, topology_of))
    if len(rows) == len(graphs.requests) and np.array_equal(rows, np.arange(len(rows))):
        rows = slice(None)  # the graphs' requests in order: their tables as they are
    found = []
    for phase in phases:
        values = graphs.phase_values[phase]
        first = values.first.subset(steps=rows)
        hw = stacked_hardware(chips, first).take_configs(chip_of)
        levels = hw.level_rate.shape[-2]
        where = placement_onehot(values.activation_peak[rows], homes, levels, home_of)[:, None]
        fixed_s, s_per_byte = (np.stack(line)[topology_of] for line in zip(
            *(comm_lines(graphs.tables[phase], s, plan) for s in topologies), strict=True))
        nbytes = graphs.collective_bytes[phase][rows]
        comm = np.where(nbytes > 0, fixed_s + s_per_byte * nbytes, 0.0)[:, None]
        costs = _spread(evaluate(first, hw, where, comm), spread)
        steps, v, weights = None, values.varying, values.weights[rows][spread]
        if len(v):
            moving = values.moving.subset(steps=rows)
            steps = _spread(evaluate(moving, hw.take(v), where[..., v], comm[..., v]), spread)
        found.append(PhaseCosts(first, costs, *graphs.depth_counts(phase, pp), v, steps,
                                weights))  # fmt: skip
    return tuple(found)


def _spread(costs: OpCosts, which: np.ndarray | slice) -> OpCosts:
    """Per-configuration costs from those of the distinct configurations they index (a
    slice of them all: the same costs)."""
    if isinstance(which, slice):
        return costs
    return OpCosts(*(getattr(costs, name)[which] for name in OpCosts.__dataclass_fields__))


def stacked_hardware(chips: list[Chip], table: OpTable) -> HardwareArrays:
    """HardwareArrays.stack of these chips, kept: every shape of a sweep's chunk has them."""
    return remembered("stacked hardware", tuple(chips), table.structure,
                      lambda: HardwareArrays.stack([HardwareArrays.of(c, table) for c in chips]))
