"""The graphs one tensor/expert-parallel rank runs, built once for many requests.

A rank's graphs depend on the model, the formats and the plan's tp and ep only, not on the
chip nor the request's shape: their dimensions are arrays over the requests asked for
together (ir/tensor.py), so one compact graph per phase counts every op for all of them.
Pipeline stages are (distinct ops x stages) count matrices: any depth is a few array sums.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from xpusim.compiler.memory_plan import peak_activation_bytes
from xpusim.compiler.partition import Plan, op_stage_counts, partition
from xpusim.cost.op_table import OpTable, distinct_stage_counts, op_table
from xpusim.ir.graph import Graph
from xpusim.ir.op import OpKind
from xpusim.memo import remembered, scoped
from xpusim.scenarios.llm.request import Request, step_nodes
from xpusim.workloads.transformer import StepShape, build_step
from xpusim.workloads.transformer_config import TransformerConfig


@dataclass(frozen=True)
class PhaseValues:
    """A phase's op counts for R requests at the steps each is costed at. Only the ops that
    vary by step (attention over a growing KV cache) are costed per step, which keeps long
    generations cheap; counts are affine in the KV length, so a request's first and last
    step (`ends`) give every step between them exactly, and where a window or a chunk bends
    them, the steps at its break too (`at`)."""

    ends: OpTable  # counts on leading (request, end) axes: (R, ends, ...), or (R, 1, ...)
    fraction: np.ndarray  # (R, steps) where each costed step lies from the first end to the last
    weights: np.ndarray  # (R, steps) how many steps each costed one stands for
    # (R, ends) where each end lies, where there are more than two: a window's or a chunk's
    # break between a request's first and last step (TransformerConfig.key_breaks)
    at: np.ndarray | None = None

    @cached_property
    def varying(self) -> np.ndarray:
        """Positions of the ops whose counts differ between a request's ends (the ends of
        every request differ, so this does not depend on the requests beside)."""
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
        return _between(self.ends.subset(ops=self.varying), self.fraction, self.at)

    def steps_of(self, row: int) -> OpTable:
        """Every op at every costed step of one request: (steps, ...), for its report."""
        at = None if self.at is None else self.at[[row]]
        return _between(self.ends.subset(steps=[row]), self.fraction[[row]], at).subset(steps=0)

    @cached_property
    def activation_peak(self) -> np.ndarray:
        """(R, ops) each op's activation bytes at a request's largest step (an end: affine)."""
        return self.ends.activation_bytes.max(axis=1)


def _between(ends: OpTable, fraction: np.ndarray, at: np.ndarray | None = None) -> OpTable:
    """Counts `fraction` (R, steps) of the way from each request's first end to its last:
    (R, steps, ...), exact where they are affine in the KV length. With `at` (R, ends), the
    ends' own fractions, a request whose steps cross a break (an end inside (0, 1)) has each
    step on the line between the two ends around it; the others, ends 0, 1, 1, ..., keep
    their one line, computed as without `at` (the same bits: t = f, the ends past the
    first all the last). Only the bent rows are gathered: most of a sweep's requests never
    reach a window's end or a chunk's, and gathering every row, padded to the most ends,
    had made a Gemma-3-1B sweep 1.4x slower than the plain line (docs/model.md)."""

    def line(values: np.ndarray, f: np.ndarray) -> np.ndarray:
        first, last = values[:, :1], values[:, -1:]
        return first + (last - first) * f.reshape(*f.shape, *(1,) * (values.ndim - 2))

    bent = np.flatnonzero(at[:, 1] < 1) if at is not None else np.zeros(0, dtype=int)
    if len(bent):
        at, f = at[bent], fraction[bent]
        piece = (f[:, :, None] > at[:, None, 1:-1]).sum(axis=-1)  # (bent rows, steps)
        lo, hi = (np.take_along_axis(at, piece + k, axis=1) for k in (0, 1))
        t = np.divide(f - lo, hi - lo, out=np.zeros_like(f), where=hi > lo)

    def mix(values: np.ndarray) -> np.ndarray:
        found = line(values, fraction)
        if len(bent):
            # each bent step's end below it, a row of the (request x end) axes made one: whole
            # rows copied, not take_along_axis's index over every element (1/6 the time)
            below = piece if len(values) == 1 else piece + bent[:, None] * values.shape[1]
            rows = values.reshape(-1, *values.shape[2:])
            a, b = rows[below], rows[below + 1]
            found[bent] = a + (b - a) * t.reshape(*t.shape, *(1,) * (values.ndim - 2))
        return found

    return replace(ends, matrix_flops=mix(ends.matrix_flops), vector_flops=mix(ends.vector_flops),
                   role_bytes=mix(ends.role_bytes))  # fmt: skip


@dataclass(frozen=True)
class ShapeGraphs:
    """The compact graphs one rank runs for many requests of one format, tp and ep: one
    prefill graph over every request's prompt, one decode graph over every request's first
    and last decode step and its break steps (dimensions (R, 1), or (R, ends) for the KV
    cache)."""

    requests: tuple[Request, ...]
    prefill: Graph  # dimensions (R, 1)
    decode: Graph  # dimensions (R, 1) or (R, ends): first, break and last decode steps
    step_fraction: np.ndarray  # (R, steps) costed decode steps, from first (0) to last (1)
    step_weights: np.ndarray  # (R, steps) decode steps each costed one stands for
    num_layers: int
    # (R, ends) where the decode graph's ends lie from first (0) to last (1) step, where a
    # request's steps cross a break (dimensions (R, ends)); None: first and last only
    end_fraction: np.ndarray | None = None

    @cached_property
    def row(self) -> dict[Request, int]:
        return {r: i for i, r in enumerate(self.requests)}

    @property
    def decode_ends(self) -> int:
        """Decode steps the decode graph's dimensions hold per request."""
        return 2 if self.end_fraction is None else self.end_fraction.shape[1]

    @cached_property
    def tables(self) -> tuple[OpTable, OpTable]:
        """Prefill (R, 1, ...) and decode (R, ends, ...): its first, break and last steps."""
        r = len(self.requests)
        return (op_table(self.prefill).broadcast((r, 1)),
                op_table(self.decode).broadcast((r, self.decode_ends)))  # fmt: skip

    @cached_property
    def phase_values(self) -> tuple[PhaseValues, PhaseValues]:
        prefill, decode = self.tables
        one = np.ones((len(self.requests), 1))
        return (PhaseValues(prefill, one - 1, one),
                PhaseValues(decode, self.step_fraction, self.step_weights,
                            self.end_fraction))  # fmt: skip

    @cached_property
    def phase_activation_bytes(self) -> tuple[np.ndarray, np.ndarray]:
        """(R,) each request's largest activations in its whole prefill and in its last
        decode step (`run` sizes the prefill's by a chunk of it: chunking.py)."""
        r = len(self.requests)
        decode = np.broadcast_to(peak_activation_bytes(self.decode), (r, self.decode_ends))
        prefill = np.broadcast_to(peak_activation_bytes(self.prefill), (r, 1))
        return prefill[:, 0], decode[:, -1]

    @cached_property
    def activation_bytes(self) -> np.ndarray:
        """(R,) the largest activations of a request's whole prefill and last decode step."""
        return np.maximum(*self.phase_activation_bytes)

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
            for i, op in table.collectives[0]:
                nbytes[:, i] = np.broadcast_to(op.inputs[0].nbytes, shape)[:, 0]
            found.append(nbytes)
        return found[0], found[1]

    def depth_counts(self, phase: int, pp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Instances of each distinct op each stage runs, of all ops and of collectives, for
        each configuration's depth: (K, 1, ops, deepest), the stages a shallower pipeline
        lacks running nothing (so sums and maxima over stages hold)."""
        graph, table = (self.prefill, self.decode)[phase], self.tables[phase]
        # what the counts depend on, the same for other requests' graphs: kept by it
        layout = (tuple((op.layer, graph.copies(op), op.kind is OpKind.COLLECTIVE)
                        for op in graph.ops), table.index.tobytes())  # fmt: skip

        def counts(d: int) -> tuple[np.ndarray, np.ndarray]:
            per_op = op_stage_counts(graph, self.num_layers, d)
            comm = distinct_stage_counts(table, per_op, np.array([c for *_, c in layout[0]],
                                                                 dtype=float))  # fmt: skip
            return distinct_stage_counts(table, per_op), comm

        depths, which = np.unique(pp, return_inverse=True)
        by_depth = [remembered("stage counts", (), (layout, self.num_layers, int(d)),
                               lambda d=int(d): counts(d)) for d in depths]  # fmt: skip
        found = []
        for part in (0, 1):
            padded = np.zeros((len(depths), len(table), int(depths[-1])))
            for i, d in enumerate(depths):
                padded[i, :, :d] = by_depth[i][part]
            found.append(padded[which][:, None])
        return found[0], found[1]


def shape_graphs(
    cfg: TransformerConfig, requests: Sequence[Request], tp: int, ep: int,
    dp_attention: bool = False,
) -> ShapeGraphs:  # fmt: skip
    """ShapeGraphs of requests that share their formats, in the order first asked for (a
    sweep's chunk costs them in that order: no table is copied row by row)."""
    return _shape_graphs(cfg, tuple(dict.fromkeys(requests)), tp, ep, dp_attention)


@scoped(maxsize=16)  # `compare` asks again per chip; a sweep's chunks never repeat a set
def _shape_graphs(
    cfg: TransformerConfig, requests: tuple[Request, ...], tp: int, ep: int,
    dp_attention: bool = False,
) -> ShapeGraphs:  # fmt: skip
    act, weight, attention, kv_format, moe_backend, kernels = requests[0].formats
    if any(r.formats != requests[0].formats for r in requests):
        raise ValueError("ShapeGraphs needs requests of one format")
    steps = np.array([r.decode_steps for r in requests])
    last = np.maximum(steps - 1, 1)[:, None]
    ends_at = list(zip(requests, last[:, 0].tolist(), strict=True))
    # cached tokens at each request's first and last step (round: rint, as the ends' kv)
    reach = np.array([(r.prompt, r.prompt + round(r.advance * n)) for r, n in ends_at])
    breaks: list[tuple[int, ...]] = [()] * len(requests)
    every = np.array(cfg.key_breaks(0, int(reach[:, 1].max())))
    # each request's breaks are every's part in (first, last] (key_breaks(first, last)); only
    # the requests whose cached tokens cross one have break steps
    inside = (every > reach[:, :1]) & (every <= reach[:, 1:])  # (R, breaks)
    for i in np.flatnonzero(inside.any(axis=1)).tolist():
        breaks[i] = _break_steps(*ends_at[i], every[inside[i]].tolist())
    # requests costed at the same steps: those of one count and the same breaks
    keys = list(zip(steps.tolist(), breaks, strict=True))
    order = sorted(set(keys))
    index = {key: i for i, key in enumerate(order)}
    key_of = np.array([index[key] for key in keys])
    nodes = [step_nodes(*key) for key in order]
    width = max(len(n) for n, _ in nodes)
    # steps past a request's own count repeat its last node with weight 0: summed to nothing
    padded = np.array([np.pad(n, (0, width - len(n)), mode="edge") for n, _ in nodes])[key_of]
    step_weights = np.array([np.pad(w, (0, width - len(w))) for _, w in nodes])[key_of]
    # the decode graph's ends: each request's first and last step, and its break steps
    # between them where it has any (the last repeated to pad a request with fewer)
    ends = max(len(b) for b in breaks) + 2
    end_steps = np.array([[0, *b, *[n] * (ends - len(b) - 1)]
                          for b, (_, n) in zip(breaks, ends_at, strict=True)])  # fmt: skip
    batch = np.array([r.batch for r in requests])[:, None]
    prompt = np.array([r.prompt for r in requests])[:, None]
    width = np.array([r.width for r in requests])[:, None]
    fed = np.array([r.step_tokens for r in requests])[:, None]
    advance = np.array([r.advance for r in requests])[:, None]
    # step i feeds `fed` tokens after prompt + i x advance cached ones (one token, advance 1:
    # it attends prompt + 1 + i keys); the ends differ even for one step, so that which ops
    # vary with the cache (PhaseValues.varying) never depends on the other requests
    kv = prompt + fed + np.rint(advance * end_steps).astype(np.int64)
    # a plain decode feeds the integer 1: the decode graph's query dimension stays a scalar
    # (one shape for every request, as before speculative steps), an array only where a
    # verify feeds more
    q = 1 if (fed == 1).all() else fed
    fraction = padded / last

    def rank(step: StepShape) -> Graph:
        graph = build_step(cfg, step, act, weight, compact=True, attention=attention,
                           kv=kv_format, moe_backend=moe_backend, kernels=kernels)  # fmt: skip
        return partition(graph, Plan(tp=tp, ep=ep, dp_attention=dp_attention))

    return ShapeGraphs(requests, rank(StepShape(batch, prompt, prompt)),
                       rank(StepShape(batch * width, q, kv, logits=q,
                                      cross=prompt if cfg.is_encoder_decoder else 0,
                                      decode=True)),
                       fraction, step_weights, cfg.num_layers,
                       end_steps / last if ends > 2 else None)  # fmt: skip


def _break_steps(request: Request, last: int, cached: list[int]) -> tuple[int, ...]:
    """Decode steps strictly between a request's first and `last` around each break in its
    attended keys, `cached` (TransformerConfig.key_breaks over the cached tokens its steps
    reach): costed, the steps between them are exact.
    Step i has prompt + round(advance x i) cached tokens (rint, as the graph's ends); a step
    feeding q tokens (a speculative verify) bends over q cached-token counts before a break,
    so every count from b - q to b + 1 gets the steps on both sides of it."""
    first, advance, q = request.prompt, request.advance, request.step_tokens

    def reaching(c: int) -> int:  # the first step with at least c cached tokens
        i = max(math.ceil((c - first) / advance), 0)
        while i > 0 and first + round(advance * (i - 1)) >= c:
            i -= 1
        while first + round(advance * i) < c:
            i += 1
        return i

    steps = set()
    for b in cached:
        for c in range(b - q, b + 2):
            i = reaching(c)
            steps |= {i - 1, i}
    return tuple(sorted(i for i in steps if 0 < i < last))
