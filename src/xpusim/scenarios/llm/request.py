"""The request: what a user asks of the system (shapes, formats, decoding) as a plain value,
and which of its decode steps are costed.

Decode steps: op counts are affine in the KV length (between a window's or a chunk's breaks,
whose steps are costed too: graphs.py), so a decode step's costs are piecewise affine in its
index (a max of affine compute and memory times). They are evaluated at up to
DECODE_NODES + 1 steps and the break steps, and summed with weights that are exact wherever
the costs are affine between nodes; the error is confined to the few intervals where an op
crosses from one bound to another, and a test holds it against evaluating every step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from xpusim.ir.dtypes import DType, Format
from xpusim.memo import scoped

DECODE_NODES = 32
"""Intervals the decode steps are cut into; gen <= 34 evaluates every step."""


@dataclass(frozen=True)
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
    moe_backend: str = ""  # the engine's MoE backend (kernel_tables.MOE_BACKENDS); "": default
    kernels: tuple[str, ...] = ()  # the engine's own kernels (serving/engines.toml `kernels`)

    def shaped(self, batch: int, prompt: int, gen: int) -> Request:
        """This request at another shape: dataclasses.replace(self, batch=..., prompt=...,
        gen=...) without its per-field work, which cost more than the rest of a sweep
        point's set-up (tests/test_result_table.py holds the two equal)."""
        found = object.__new__(Request)
        found.__dict__.update(self.__dict__, batch=batch, prompt=prompt, gen=gen)
        return found

    @property
    def formats(self) -> tuple[DType, Format, DType | None, DType | None, str, tuple[str, ...]]:
        """act, weight, attention, kv, the MoE backend and the engine's kernels: what a
        graph's ops depend on besides tp and ep; requests that share them share one graph
        over their shapes (ShapeGraphs)."""
        return (self.act, self.weight, self.attention, self.kv, self.moe_backend, self.kernels)

    @property
    def steps_after_first(self) -> int:
        """Decode steps after the prefill's first token: one per token, or per expected
        advance of a speculative step."""
        return math.ceil((self.gen - 1) / self.advance)

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
def step_nodes(
    steps: int, breaks: tuple[int, ...] = (), intervals: int = DECODE_NODES
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Step indices to evaluate and the weights that sum any piecewise-affine quantity
    over all `steps` from them: over integers a..b an affine f sums to (b - a + 1) x the
    mean of f(a) and f(b); neighbouring intervals share their end node. `breaks`: steps
    that must be nodes, where op counts change slope (TransformerConfig.key_breaks)."""
    # sorted(set()), not np.unique: its first call imports numpy.ma (numpy 2.4), 10-26 ms
    # of every process that simulates (tests/test_startup.py)
    spread = np.round(np.linspace(0, steps - 1, min(steps, intervals + 1))).tolist()
    nodes = np.array(sorted(set(spread) | {float(b) for b in breaks if 0 <= b < steps}))
    if len(nodes) == 1:
        return nodes, np.ones(1)
    span = np.diff(nodes) + 1  # integers in each closed interval
    weights = np.zeros(len(nodes))
    weights[:-1] += span / 2
    weights[1:] += span / 2
    weights[1:-1] -= 1  # an interior node was counted by both its intervals
    return nodes, weights
