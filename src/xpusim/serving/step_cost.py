"""The time and energy of one engine iteration: the one interface serving has to cost/.

An iteration runs a batch of sequences, each with q new tokens (a prefill chunk, or 1 for a
decode) attending c keys (its cache plus the new tokens). Its ops fall into four kinds by
what their work depends on (KINDS), found by probing the model's graph rather than by op
names:

- token ops (every linear layer, norm, collective, MoE expert): the iteration's new tokens
  T = Σ q, because an engine runs them over all sequences' tokens as one matrix;
- sampling ops (the LM head over each sequence's last position, the sampler): the sequences
  that produce a token this iteration;
- state ops (linear attention's chunked scan, a state-space model's scan, the convolutions
  that carry their last inputs): each sequence's q alone, since what it carries is the
  same size at any context; one kernel over all of them, its FLOPs and bytes the sum of
  each sequence's, read from run's own prefill graph of a q-token prompt (chunks and all);
- attention ops: each sequence's own (q, c), as one variable-length kernel over all of them
  (FlashAttention's varlen form), so their FLOPs and bytes are sums over the sequences.

Token ops are costed for every T up to the token budget and sampling ops for every count up
to the max batch, as arrays over those shapes (scenarios/llm/graphs.py, the same ops,
calibrations and collectives `run` costs); the token ops' rows TOKEN_BLOCK_ROWS at a time,
when a run first reads one (serving/lazy_rows.py: a run reads a few hundred of the 131,072
an SGLang budget tabulates), bit for bit the table costed whole. An attention op's FLOPs
and bytes are a fixed polynomial in (q, c) (ir/op.py: pairs = qc - q²/2 + q/2; bytes
linear in q and c), so a set of sequences' are the polynomial's coefficients times five
sums over them. Nothing here computes a FLOP: the coefficients are read off the builder's
own graph at probe shapes and checked there.

Attention runs as two kernels, as engines with FlashInfer or vLLM's V0 backends launch them:
one over the decoding sequences, one over the prefill chunks. The decode kernel's work is a
function of two numbers, the sequences n and their keys Σc, and decode iterations are nearly
all of a serving run's, so it is tabulated over every n up to the max batch (a row per n,
costed when first read: a run decodes at a few hundred of 2,048 batch sizes) and a
geometric grid of mean context (GRID_RATIO apart), and interpolated linearly along the
grid: exact where the cost is affine in Σc (memory-bound everywhere but near the ridge), and
a test holds the rest within 1% of the roofline of each iteration; an engine whose decode
kernel gives each sequence's KV head one thread block (no split-KV) floors each row at one
head's cache streamed at one block's rate (unsplit_floor). The prefill kernel,
at most one per iteration, is costed by the roofline itself, kept per distinct work (an
engine sees the same prompt lengths again and again): by roofline.OneWork, evaluate's
arithmetic for one work in Python floats and bit for bit its answer, where it applies (no
systolic unit, no PE grid), else by evaluate. State ops run
as two kernels the same way (vLLM's Gated DeltaNet: a recurrent kernel for the decodes, a
chunked one for the prompts): the decodes' tabulated over their count, the prompts' by the
roofline of their summed work.

Under attention data parallelism (Plan.dp_attention) the step is its busiest chip's: the
engine spreads the decoding sequences evenly over the tp chips, each prefill chunk runs on
one of them, and the experts run the whole step's tokens. So token ops are tabulated twice
over: those outside the experts at the busiest chip's tokens, the experts' (and their
dispatch and combine) at the step's, and attention at the busiest chip's sequences.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from operator import mul
from typing import NamedTuple

import numpy as np

from xpusim.compiler.memory_plan import Placement
from xpusim.compiler.moe_expert import is_expert
from xpusim.compiler.partition import Plan, partition
from xpusim.cost.collectives import Collective, collective_line
from xpusim.cost.engine_kernels import kernels_priced
from xpusim.cost.op_table import BLOCK_SCALED_FP8, OpTable, kernel_scope, op_table
from xpusim.cost.ordered_sum import ordered_sum
from xpusim.cost.roofline import HardwareArrays, OneWork, evaluate, placement_onehot
from xpusim.cost.stream_machine import stage_send_line
from xpusim.hardware.spec import Chip
from xpusim.hardware.system import System
from xpusim.ir.op import Op
from xpusim.ir.tensor import ROLES, Role
from xpusim.scenarios.llm.engine import cost_phases
from xpusim.scenarios.llm.graphs import shape_graphs
from xpusim.scenarios.llm.request import Request
from xpusim.serving.lazy_rows import Columns, LazyTable, Rows
from xpusim.workloads.transformer import StepShape, build_step, hidden_state_bytes
from xpusim.workloads.transformer_config import TransformerConfig

# (q, c) shapes the attention polynomial is read at: more than its five terms, so that a
# count outside the basis shows as a residual instead of fitting exactly by chance
_PROBES_Q = np.array([1, 1, 1, 2, 2, 3, 4, 4, 7])
_PROBES_C = np.array([1, 5, 9, 2, 8, 3, 4, 11, 20])

GRID_RATIO = 1.02
"""Neighbouring mean contexts of the decode-attention table: a 2% grid keeps interpolation
within a fraction of a percent where the cost bends (near the ridge) and exact elsewhere."""


TOKEN_BLOCK_ROWS = 512
"""Token counts the token tables cost at once, when a run first reads one of them: a run
reads a few hundred token counts, clustered (its prompts' lengths, plus its decodes); one
block's call costs about as much as 500 rows, so smaller blocks save no more."""


class Work(NamedTuple):
    """What one iteration's cost depends on: sums over its sequences."""

    decodes: int  # sequences decoding one token
    decode_context: int  # Σ c over them: keys attended
    prefills: int  # sequences running a prefill chunk
    prefill_tokens: int  # Σ q over them
    prefill_context: int  # Σ c
    prefill_query_context: int  # Σ q·c
    prefill_query_squared: int  # Σ q²
    sampled: int  # sequences that produce a token: decodes and finished prompts
    prefill_queries: tuple[int, ...] = ()  # each prefill chunk's q, for the state ops
    # the prefill sums' part that is speculative verifies (prefill_basis's terms over them):
    # chunks of K + 1 tokens that engines attend with their decode kernels (StepCost.verify)
    verify_basis: tuple[int, ...] = ()

    @property
    def tokens(self) -> int:
        return self.decodes + self.prefill_tokens

    @classmethod
    def of(cls, decode_c: list[int], prefill_q: list[int], prefill_c: list[int],
           sampled: int) -> Work:  # fmt: skip
        """From each decoding sequence's keys and each prefill chunk's (q, c)."""
        return cls.of_cohort(len(decode_c), sum(decode_c), prefill_q, prefill_c, sampled)

    @classmethod
    def of_cohort(cls, decodes: int, decode_context: int, prefill_q: list[int],
                  prefill_c: list[int], sampled: int) -> Work:  # fmt: skip
        """From a decoding cohort's size and keys, and each prefill chunk's (q, c) (the
        products summed by map, without a generator's frame per chunk: every mixed step)."""
        if len(prefill_q) != len(prefill_c):
            raise ValueError(f"{len(prefill_q)} chunk sizes for {len(prefill_c)} contexts")
        return cls(decodes, decode_context, len(prefill_q), sum(prefill_q), sum(prefill_c),
                   sum(map(mul, prefill_q, prefill_c)), sum(map(mul, prefill_q, prefill_q)),
                   sampled, tuple(prefill_q))  # fmt: skip

    @property
    def prefill_basis(self) -> tuple[int, int, int, int, int]:
        """The attention polynomial's terms summed over the prefill chunks: 1, q, c, qc, q²."""
        return (self.prefills, self.prefill_tokens, self.prefill_context,
                self.prefill_query_context, self.prefill_query_squared)  # fmt: skip


def _basis(q: np.ndarray, c: np.ndarray) -> np.ndarray:
    return np.stack(np.broadcast_arrays(np.ones_like(q), q, c, q * c, q * q),
                    axis=-1).astype(float)  # fmt: skip


class StepTime(NamedTuple):
    stage_s: list[float]  # each pipeline stage's time
    send_s: float  # one activation send between neighbouring stages (0 with one stage)
    energy_j: float  # every chip of one replica

    @property
    def trip_s(self) -> float:
        """The iteration's path through every stage."""
        return sum(self.stage_s) + (len(self.stage_s) - 1) * self.send_s


@dataclass(frozen=True)
class Kernel:
    """Some ops on one chip, costed for any counts of their work."""

    table: OpTable  # the ops (perhaps none: a state-space model has no attention); their
    # counts are replaced by each work's
    chip: Chip
    counts: np.ndarray  # (n, pp) instances per stage
    placement: Placement
    levels: int

    @cached_property
    def _hw(self) -> HardwareArrays:
        return HardwareArrays.of(self.chip, self.table)

    @cached_property
    def _offchip(self) -> np.ndarray:
        """Where one work's tensors live on a chip without an on-chip level: one place."""
        act = np.zeros((1, len(self.table)))
        return placement_onehot(act, [self.placement], self.levels)

    @cached_property
    def _placed(self) -> dict[bytes, np.ndarray]:
        return {}

    def _where(self, act: np.ndarray) -> np.ndarray:
        """placement_onehot of one work's activation bytes (1, n), kept per pattern of which
        ops' activations fit on chip: the one-hot is a function of that pattern alone, and a
        serving run costs thousands of distinct prefill chunks with a handful of patterns."""
        fits = (act <= self.placement.onchip_bytes).tobytes()
        found = self._placed.get(fits)
        if found is None:
            found = self._placed[fits] = placement_onehot(act, [self.placement], self.levels,
                                                          np.zeros(1, dtype=int))  # fmt: skip
        return found

    @cached_property
    def _one(self) -> OneWork | None:
        return OneWork.of(self.table, self._hw)

    @cached_property
    def _kept(self) -> dict[bytes, list[list[list[int]]]]:
        return {}

    @cached_property
    def _per_op(self) -> tuple[np.ndarray, np.ndarray]:
        return self.counts, self.counts.sum(axis=1)

    def cost_counts(self, matrix: np.ndarray, vector: np.ndarray,
                    roles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
        """Stage times (K, pp) and energy (K,) of the ops at K works' FLOPs (K, n) and
        bytes by role (K, roles, n); one work in Python floats where OneWork applies (bit
        for bit the same: the serving run's prefill chunk sets are priced one at a time)."""
        k = len(matrix)
        if not len(self.table):
            return np.zeros((k, self.counts.shape[1])), np.zeros(k)
        if k == 1 and self._one is not None:
            return self._cost_one(matrix, vector, roles)
        return self.cost_counts_reference(matrix, vector, roles)

    def _cost_one(self, matrix: np.ndarray, vector: np.ndarray,
                  roles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
        """cost_counts of one work through OneWork: the placement's one-hot as the roles
        each op keeps at each level, kept per pattern of which activations fit on chip."""
        if self.placement.onchip_level is None:
            fits = b""
        else:
            fits = (roles[:, ROLES.index(Role.ACTIVATION)] <= self.placement.onchip_bytes
                    ).tobytes()  # fmt: skip
        kept = self._kept.get(fits)
        if kept is None:
            act = roles[:, ROLES.index(Role.ACTIVATION)]
            where = self._offchip if self.placement.onchip_level is None else self._where(act)
            kept = self._kept[fits] = OneWork.kept(where[0])
        time_s, energy_j = self._one.costs(matrix[0].tolist(), vector[0].tolist(),
                                           roles[0].tolist(), kept)  # fmt: skip
        counts, per_op = self._per_op
        return np.array([time_s]) @ counts, np.array([energy_j]) @ per_op

    def cost_counts_reference(self, matrix: np.ndarray, vector: np.ndarray,
                              roles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
        """cost_counts through roofline.evaluate on arrays, for any K (a table of works)."""
        k = len(matrix)
        table = replace(self.table, matrix_flops=matrix, vector_flops=vector, role_bytes=roles)
        if self.placement.onchip_level is None and k == 1:  # then where does not depend on it
            where = self._offchip
        else:
            act = table.role_bytes[:, ROLES.index(Role.ACTIVATION)]
            where = self._where(act) if k == 1 else placement_onehot(
                act, [self.placement], self.levels, np.zeros(k, dtype=int))  # fmt: skip
        costs = evaluate(table, self._hw, where)
        return costs.time_s @ self.counts, costs.energy_j @ self.counts.sum(axis=1)


@dataclass(frozen=True)
class Attention(Kernel):
    """A model's prefill attention ops on one chip, costed for any sums over sequences."""

    coefficients: tuple[np.ndarray, ...] = ()  # (5, n), (5, n), (5, roles, n)

    def cost(self, basis: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Stage times (K, pp) and energy (K,) of the ops for K works' bases (K, 5).

        An op's weights (a speculative verify's q_absorb and v_absorb: kv_b_proj's slices;
        an attention sink) are read once by the one kernel that runs every sequence of the
        work (SGLang's torch.bmm over all the verify's tokens, deepseek_v2.py forward_absorb),
        not once a sequence as the polynomial's constant term would count them: the weight
        role is its constant coefficient wherever the work has a sequence. Counted per
        sequence, 493 verifying sequences read the absorbed BMMs' weights 493 times, 26 of
        the 31.6 ms an NVFP4 DeepSeek-R1 verify took on a B200 (issue #48)."""
        k = len(basis)
        matrix, vector, roles = (basis @ c.reshape(5, -1) for c in self.coefficients)
        roles = roles.reshape(k, len(ROLES), len(self.table))
        w = ROLES.index(Role.WEIGHT)
        once = self.coefficients[2].reshape(5, len(ROLES), -1)[0, w]
        roles[:, w] = (basis[:, :1] > 0) * once
        return self.cost_counts(matrix, vector, roles)


@dataclass
class StepCost:
    """Costs iterations of one replica (tp x pp chips) of a model on a system."""

    max_tokens: int
    max_sampled: int
    # rows (stage times..., energy), costed when first read (lazy_rows.py): a run reads
    # a few hundred of the token counts and batch sizes tabulated
    tokens: Rows  # the token ops at T = 1..max_tokens
    sample_stage_s: np.ndarray  # (max_sampled, pp)
    sample_energy_j: np.ndarray  # (max_sampled,)
    step_stage_s: np.ndarray  # (max_sampled, pp) a decode step's ops but its kernel, n sequences
    step_energy_j: np.ndarray  # (max_sampled,)
    prompts: Rows  # attention of one whole prompt of T tokens, T = 1..max_tokens
    attention: Attention
    mean_context: np.ndarray  # (M,) the decode table's grid
    decodes: Rows  # the decode kernel of n = 1..max_sampled sequences: rows (M, pp + 1)
    state_stage_s: np.ndarray  # (max_sampled, pp) the state ops of n decoding sequences
    state_energy_j: np.ndarray  # (max_sampled,)
    state: Counts  # the state ops' work for a prefill chunk of each q up to max_tokens (one
    # row of no ops where the model has none)
    ranks: int  # chips per stage: tp
    send_fixed_s: float
    send_s_per_token: float
    # attention data parallelism: chips that each run their own sequences (1: none), and
    # the expert ops' part of the token table (token_stage_s then holds the rest)
    attention_dp: int = 1
    experts: Rows | None = None  # at the step's T
    # the ops one prefill forward runs on each stage's chip: the kernels an engine launches
    # one by one where it runs that forward without a CUDA graph (Replica's eager floor)
    launches: tuple[int, ...] = ()
    # a speculative verify's attention, its chunks run in the decode form (_verify_attention);
    # None where the table was not asked for one, and verifies then cost as prefill chunks
    verify: Attention | None = None
    # the distinct weight shapes (K, N) of its dense block-scaled FP8 GEMMs on a chip: the
    # kernels an engine that specializes them on the token count compiles per bucket
    # (EngineProfile.jit_gemm)
    block_fp8_shapes: int = 0
    # the engine's own kernels whose measurements price some op of its steps (a prefill's or
    # a decode's: cost/engine_kernels.py), what serve's note names
    own_kernels: frozenset[str] = frozenset()
    _prefills: dict[tuple, list[float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # the small tables as rows of Python floats, (stage times..., energy): an iteration
        # adds a few rows, and numpy's per-call overhead would be most of a serving run's time
        def rows(stage_s: np.ndarray, energy_j: np.ndarray) -> list[list[float]]:
            return np.concatenate([stage_s, energy_j[..., None]], axis=-1).tolist()

        self._sample_rows = rows(self.sample_stage_s, self.sample_energy_j)
        self._step_rows = rows(self.step_stage_s, self.step_energy_j)
        self._state_rows = rows(self.state_stage_s, self.state_energy_j)
        self._grid = self.mean_context.tolist()
        self._share_rows: dict[int, list] = {}  # decodes' row by a chip's share of the n
        # sequences, read once from the lazy table (Rows.__getitem__, then LazyTable.row)
        # and kept (attention DP: `attention_dp` batch sizes run one row; step_cost's
        # decode_block), so that each is turned into Python floats once, not once per n (a
        # max-rate search of DeepSeek-R1 at DP8 reads 5,295 batch sizes, 770 shares: 5% of
        # its CPU went to those lists)
        self.stages = self.step_stage_s.shape[1]  # pipeline stages (read every iteration)

    @property
    def token_stage_s(self) -> Columns:
        """The token ops' stage times at T = 1..max_tokens, indexed as an array (T, pp)."""
        return self.tokens.stage_s

    @property
    def token_energy_j(self) -> Columns:
        return self.tokens.energy_j

    def within(self, max_tokens: int) -> StepCost:
        """This table for iterations of at most `max_tokens` new tokens: its rows up to it,
        equal to a table tabulated at that size (every row is costed on its own), for one
        replica tabulated once for several token budgets (serving/run.py)."""
        if max_tokens > self.max_tokens:
            raise ValueError(f"{max_tokens} tokens: this StepCost tabulated {self.max_tokens}")
        t = max_tokens
        state = replace(self.state, matrix=self.state.matrix[:t], vector=self.state.vector[:t],
                        roles=self.state.roles[:t])  # fmt: skip
        return replace(
            self, max_tokens=t, tokens=self.tokens.head(t), prompts=self.prompts.head(t),
            state=state, experts=None if self.experts is None else self.experts.head(t),
            _prefills={},
        )  # fmt: skip

    def __call__(self, work: Work) -> StepTime:
        tokens = work.tokens
        if not 0 < tokens <= self.max_tokens or work.decodes > self.max_sampled \
                or work.sampled > self.max_sampled:
            raise ValueError(f"{work} is outside what this StepCost tabulated "
                             f"({self.max_tokens} tokens, {self.max_sampled} sequences)")
        if not work.prefills and work.sampled == work.decodes:  # decodes only: one pass
            return self._decodes_only(work.decodes, work.decode_context)
        total = self._token(tokens, work)
        if work.sampled:
            total = [a + b for a, b in zip(total, self._sample_rows[work.sampled - 1],
                                           strict=True)]  # fmt: skip
        if work.decodes:
            total = [a + b + s for a, b, s in zip(
                total, self._decode(work.decodes, work.decode_context),
                self._state_rows[work.decodes - 1], strict=True)]  # fmt: skip
        if work.prefills:
            busiest = self._busiest_prefills(work) / work.prefills
            total = [a + b * busiest for a, b in zip(total, self._prefill(work), strict=True)]
        send = self.send_fixed_s + self.send_s_per_token * tokens if self.stages > 1 else 0.0
        return StepTime(total[:-1], send, total[-1] * self.ranks)

    def decode_step(self, n: int, context: int) -> StepTime:
        """A decode-only step of n sequences attending `context` keys in all: this table
        called on Work(n, context, 0, 0, 0, 0, 0, n), without making the Work (every step
        Replica.cruise runs one at a time)."""
        if not 0 < n <= min(self.max_sampled, self.max_tokens):
            raise ValueError(f"{n} decodes: outside what this StepCost tabulated "
                             f"({self.max_tokens} tokens, {self.max_sampled} sequences)")
        return self._decodes_only(n, context)

    def _decodes_only(self, n: int, context: int) -> StepTime:
        """__call__'s one pass for decodes only: the step's row beside the decode kernel's,
        interpolated between its grid nodes."""
        low, high, f = self._decode_nodes(n, context)
        total = [a + d + f * (e - d) for a, d, e in zip(
            self._step_rows[n - 1], low, high, strict=True)]  # fmt: skip
        send = self.send_fixed_s + self.send_s_per_token * n if self.stages > 1 else 0.0
        return StepTime(total[:-1], send, total[-1] * self.ranks)

    def decode_steps(self, n: int, contexts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Stage time and energy of decode-only steps of n sequences attending each of
        `contexts` keys in all (ints), at once, an array each: __call__'s interpolation on
        arrays, the same IEEE operations per element, so each step's figures are __call__'s
        bit for bit (tests/test_decode_runs.py). For a run of steps that differ only in
        their keys (Replica._skip); one pipeline stage, so one time a step."""
        if not 0 < n <= min(self.max_sampled, self.max_tokens) or self.stages > 1:
            raise ValueError(f"{n} decodes on {self.stages} stages: not a decode run")
        mean = contexts / n
        i = np.clip(np.searchsorted(self.mean_context, mean, side="left") - 1, 0,
                    len(self.mean_context) - 2)  # fmt: skip
        table = self.decodes.array(n - 1, n)[0]
        low, high = table[i], table[i + 1]
        f = (mean - self.mean_context[i]) / (self.mean_context[i + 1] - self.mean_context[i])
        total = np.array(self._step_rows[n - 1]) + low + f[:, None] * (high - low)
        return total[:, 0], total[:, -1] * self.ranks

    def _busiest_prefills(self, work: Work) -> int:
        """Prefill chunks the busiest chip runs: all of them, or under attention data
        parallelism its share of them, one chip each."""
        return -(-work.prefills // self.attention_dp)

    def _token(self, tokens: int, work: Work) -> list[float]:
        """The token ops (stage times..., energy) of a step of `tokens` new tokens; under
        attention data parallelism, the busiest chip's (its share of the decodes and of the
        prefill chunks, at their mean length) beside the experts' over every token."""
        if self.experts is None:
            return self.tokens[tokens - 1]
        a = self.attention_dp
        mine = -(-work.decodes // a)
        if work.prefills:
            mine += -(-work.prefill_tokens * self._busiest_prefills(work) // work.prefills)
        return [x + y for x, y in zip(self.tokens[min(mine, tokens) - 1],
                                      self.experts[tokens - 1], strict=True)]

    def _decode(self, n: int, context: int) -> list[float]:
        """The decode kernel (stage times..., energy), interpolated along the mean context
        between grid nodes."""
        low, high, f = self._decode_nodes(n, context)
        return [a + f * (b - a) for a, b in zip(low, high, strict=True)]

    def _decode_nodes(self, n: int, context: int) -> tuple[list[float], list[float], float]:
        """The decode table's rows at the grid nodes around n sequences' mean context, and
        where between them it lies."""
        grid = self._grid
        mean = context / n
        i = min(max(bisect_left(grid, mean) - 1, 0), len(grid) - 2)
        share = -(-n // self.attention_dp)
        row = self._share_rows.get(share)
        if row is None:
            row = self._share_rows[share] = self.decodes[n - 1]
        return row[i], row[i + 1], (mean - grid[i]) / (grid[i + 1] - grid[i])

    def _prefill(self, work: Work) -> list[float]:
        """The prefill kernels (attention's and the state ops'): one whole prompt from the
        table of every length (the common iteration), else costed by the roofline once per
        distinct work."""
        basis = work.prefill_basis
        n, q, c = basis[:3]
        if n == 1 and q == c <= len(self.prompts) and not work.verify_basis:
            return self.prompts[q - 1]
        key = (basis, tuple(sorted(work.prefill_queries)), work.verify_basis)
        found = self._prefills.get(key)
        if found is None:
            if len(self._prefills) > 1 << 16:
                self._prefills.clear()
            state_s, state_j = self.state.summed(key[1])
            stage_s, energy = state_s, state_j
            if work.verify_basis and self.verify is not None:  # the verifies apart
                verify_s, verify_j = self.verify.cost(np.array([work.verify_basis], dtype=float))
                stage_s, energy = stage_s + verify_s[0], energy + verify_j[0]
                basis = tuple(a - b for a, b in zip(basis, work.verify_basis, strict=True))
            if basis[0]:
                prefill_s, prefill_j = self.attention.cost(np.array([basis], dtype=float))
                stage_s, energy = stage_s + prefill_s[0], energy + prefill_j[0]
            found = self._prefills[key] = [*np.asarray(stage_s).tolist(), float(energy)]
        return found


def step_cost(
    cfg: TransformerConfig,
    system: System,
    plan: Plan,
    formats: Request,
    placement: Placement,
    max_tokens: int,
    max_sampled: int,
    max_context: int,
    verify_tokens: int = 0,
    aux_tokens: tuple[int | None, int | None] = (None, None),
    block_bytes_per_s: float = 0.0,
) -> StepCost:
    """The StepCost of one replica of `plan` (its tp, ep and pp) with `formats`' formats
    (a Request whose shape is ignored) and `placement` (where its fullest chip keeps what),
    for iterations of up to `max_tokens` new tokens and `max_sampled` sequences of up to
    `max_context` keys each; with `verify_tokens` (K + 1), a speculative verify's attention
    too. `aux_tokens`: the most tokens an iteration costed from the prefill graph, and a
    decode-only one, may have for the engine to run the shared experts on their second
    stream (EngineProfile.aux_stream_tokens; None: any). `block_bytes_per_s`: where not 0,
    the decode attention kernel gives each sequence's KV head one thread block streaming
    that many bytes a second (EngineProfile.decode_block_bytes_per_s; unsplit_floor)."""
    act, weight, attention, kv, moe_backend, kernels = formats.formats

    def requests(batch: np.ndarray, prompt: np.ndarray) -> list[Request]:
        return [Request(int(b), int(p), 1, act, weight, attention, kv, moe_backend=moe_backend,
                        kernels=kernels)
                for b, p in zip(batch, prompt, strict=True)]  # fmt: skip

    probe = _attention_probe(cfg, plan, *formats.formats)
    kinds = _op_kinds(cfg, requests, plan, probe)
    tokens = np.arange(1, max_tokens + 1)
    a = plan.attention_dp

    def token(op: Op) -> bool:
        return kinds[op.name] == "token"

    def whole_prompt(op: Op) -> bool:  # its attention and state ops, as the prefill graph
        return kinds[op.name] in ("attention", "state")  # has them (windows, chunks)

    def by_tokens(batch: Callable[[np.ndarray], np.ndarray],
                  picks: list[Callable[[Op], bool]]) -> tuple[list[Rows], OpTable, np.ndarray]:
        """Rows of the ops `picks` picks at T = 1..max_tokens, requests of batch(T) prompts
        of T tokens, costed TOKEN_BLOCK_ROWS at a time when first read; the table and its
        stage counts (every block's: its ops are the same at any shape) from the first."""
        found = []

        def cost(lo: int, hi: int) -> list[np.ndarray]:
            t = tokens[lo:hi]
            tables, table, counts = _tabulated(cfg, requests(batch(t), t), system, plan,
                                               placement, picks, aux=aux_tokens[0])  # fmt: skip
            found.append((table, counts))
            return [np.concatenate([s, e[:, None]], axis=-1)
                    for s, e in zip(tables[::2], tables[1::2], strict=True)]  # fmt: skip

        lazy = LazyTable(max_tokens, TOKEN_BLOCK_ROWS, cost)
        lazy.row(0, 0)  # the first block: its table and counts
        return [Rows(lazy, k) for k in range(len(picks))], *found[0]

    experts: Rows | None = None
    if a == 1:
        (token_rows, prompt_rows), table, counts = by_tokens(np.ones_like,
                                                             [token, whole_prompt])  # fmt: skip
        launches = counts
    else:  # a sequences of t tokens: each chip t, the experts a t, tabulated at the step's T
        (token_rows,), table, counts = by_tokens(
            lambda t: np.full_like(t, a), [lambda op: token(op) and not _expert_op(op)])
        (experts, prompt_rows), _, launches = by_tokens(
            np.ones_like, [lambda op: token(op) and _expert_op(op), whole_prompt])
    sampled = np.arange(1, max_sampled + 1)
    (sample_s, sample_j), _, _ = _tabulated(
        cfg, requests(sampled, np.ones_like(sampled)), system, plan, placement,
        [lambda op: kinds[op.name] == "sample"], aux=aux_tokens[0],
    )  # fmt: skip
    at = np.array([i for i, op in enumerate(table.ops) if kinds[op.name] == "attention"], dtype=int)
    rows = np.array([probe.names.index(table.ops[i].name) for i in at], dtype=int)
    found = probe.subset(ops=rows)
    ops = replace(found, matrix_flops=found.matrix_flops[:1], vector_flops=found.vector_flops[:1],
                  role_bytes=found.role_bytes[:1])  # fmt: skip
    att = Attention(
        ops, system.chip, counts[at], placement, len(system.chip.memory),
        tuple(_fit(getattr(found, f)) for f in ("matrix_flops", "vector_flops", "role_bytes")),
    )  # fmt: skip
    # decodes run the decode graph `run` costs (MLA's absorbed form, windows, sinks): its
    # ops whose work grows with the keys are the decode kernel, the rest depend on the
    # sequences alone and are tabulated over them like the token ops
    varies = _context_ops(cfg, requests, plan)
    (step_s, step_j, state_s, state_j), decode_table, _ = _tabulated(
        cfg, requests(sampled, np.ones_like(sampled)), system, plan, placement,
        [lambda op: op.name not in varies, lambda op: kinds.get(op.name) == "state"], phase=1,
        aux=aux_tokens[1],
    )  # fmt: skip
    # a prefill chunk's state ops: one q-token prompt's, for every q; a model without
    # them (most) has no work to tabulate there, and its one row of none stands for all
    stateful = frozenset(n for n, k in kinds.items() if k == "state")
    q = tokens if stateful else tokens[:1]
    state = _counts(cfg, requests(np.ones_like(q), q), system, plan, placement, stateful,
                    phase=0)  # fmt: skip
    top = max(max_context, 3)
    mean = np.unique(np.rint(np.r_[np.geomspace(2, top, int(np.log(top / 2) / np.log(GRID_RATIO))
                                                + 2), top]))  # fmt: skip
    decode = _counts(cfg, requests(np.ones_like(mean), mean - 1), system, plan, placement,
                     varies, phase=1)  # fmt: skip
    mine = -(-np.arange(1, max_sampled + 1) // a)  # a chip's share of n sequences
    floor_s = unsplit_floor(cfg, plan, decode, block_bytes_per_s)
    static_w = system.chip.energy.static_power_w.value
    shared: dict[int, list[np.ndarray]] = {}  # one row by a chip's share, read once

    def decode_block(lo: int, hi: int) -> list[np.ndarray]:
        """Rows lo .. hi-1; one row (the lazy table's block) is its chip's share's, costed
        once for the `a` batch sizes that share it (attention DP: a max-rate search reads
        thousands of batch sizes, a tenth of its CPU where each was costed apart)."""
        if hi - lo == 1 and (found := shared.get(int(mine[lo]))) is not None:
            return found
        stage_s, energy_j = decode.per_sequence(mine[lo:hi])
        # a stage held by its blocks' streams draws static power the while (as eager's wait)
        floored = np.maximum(stage_s, floor_s[None])
        energy_j = energy_j + static_w * (floored - stage_s).sum(axis=-1)
        rows = [np.concatenate([floored, energy_j[..., None]], axis=-1)]
        if hi - lo == 1:
            shared[int(mine[lo])] = rows
        return rows

    decode_rows = Rows(LazyTable(max_sampled, 1, decode_block), 0)
    send = stage_send_line(system, plan) if plan.chain > 1 else collective_line(
        system, Collective.SEND_RECV, 2, plan.tp * plan.pp)  # fmt: skip
    per_token = hidden_state_bytes(cfg, act)
    return StepCost(
        max_tokens, max_sampled, token_rows, sample_s, sample_j, step_s, step_j,
        prompt_rows, att, mean.astype(float), decode_rows, state_s, state_j, state, plan.tp,
        send.fixed_s, send.s_per_byte * per_token, a, experts,
        tuple(int(n) for n in launches.sum(axis=0)),
        _verify_attention(cfg, requests, system, plan, placement, formats, kinds, verify_tokens)
        if verify_tokens else None,
        block_fp8_shapes(table),
        kernels_priced(table, system, plan.tp) | kernels_priced(decode_table, system, plan.tp),
    )  # fmt: skip


def unsplit_floor(cfg: TransformerConfig, plan: Plan, decode: Counts,
                  block_bytes_per_s: float) -> np.ndarray:  # fmt: skip
    """The least time (M, pp) of a decode step's context-dependent kernels at each mean
    context of the grid, on a chip whose decode attention kernel does not split a
    sequence's keys over thread blocks: one block per (sequence, KV head) streams that
    head's cache at `block_bytes_per_s`, so the step takes at least one sequence's cache of
    one head at that rate, whatever the batch (more sequences are more blocks beside it).
    The mean sequence's, not the longest's: a lower bound where contexts differ. The stage
    holds the floor as a whole (its kernels' times summed, then floored), exact where every
    layer's attention is alike. Zeros where the kernel splits (`block_bytes_per_s` 0) or
    the cache is MLA's latent one (one latent a token, not per KV head: not modelled)."""
    kv = decode.roles[:, ROLES.index(Role.KV_CACHE)]  # (M, ops): one sequence's cache read
    stage_bytes = kv @ decode.kernel.counts  # (M, pp)
    if not block_bytes_per_s or cfg.kv_lora_rank:
        return np.zeros_like(stage_bytes)
    # KV heads on a chip, as partition.py splits them: all under attention DP (a sequence
    # runs on one chip), else a ceil'd tp-th share, one replicated head where tp exceeds them
    heads = max(1, -(-cfg.num_kv_heads // plan.attention_tp))
    return stage_bytes / (heads * block_bytes_per_s)


def block_fp8_shapes(table: OpTable) -> int:
    """The distinct weight shapes (K, N) among `table`'s dense block-scaled FP8 matmuls
    (op_table.kernel_scope; stacked expert weights are the grouped scope's): a GEMM kernel
    specialized on its shape compiles once for each."""
    k, n = table.weight_tile_kn
    return len({(int(k[i]), int(n[i])) for i, op in enumerate(table.ops)
                if kernel_scope(op) == BLOCK_SCALED_FP8})


def _expert_op(op) -> bool:
    """An MoE layer's expert GEMMs and their dispatch and combine (partition.py's rules)."""
    return is_expert(op) or op.attr("group") == "ep"


class Probed(NamedTuple):
    """One op's work (FLOPs and bytes by role, as one vector) at the probe shapes."""

    two_tokens: np.ndarray  # one sequence of 2 new tokens
    two_sequences: np.ndarray  # two sequences of 1 each
    one: np.ndarray  # one sequence of 1
    # per q of the attention probes, its (q, c) shapes' works (C, values); None for an op
    # the probe graph has not (a collective of the plan's own)
    by_query: list[np.ndarray] | None


KINDS: dict[str, Callable[[Probed], bool]] = {
    # the step's new tokens T, whatever the sequences they come from
    "token": lambda w: np.array_equal(w.two_tokens, w.two_sequences),
    # the sequences that produce a token, whatever their tokens
    "sample": lambda w: np.array_equal(w.two_tokens, w.one),
    # each sequence's q alone: the same at any context (a constant-size state)
    "state": lambda w: w.by_query is not None and all((works == works[0]).all()
                                                      for works in w.by_query),
    # each sequence's (q, c)
    "attention": lambda w: True,
}
"""The op kinds, by what an op's work depends on, each with its test; an op is the first
kind whose test it passes. serving costs each kind its own way (StepCost)."""


def _op_kinds(cfg: TransformerConfig, requests, plan: Plan, probe: OpTable) -> dict[str, str]:
    """Each op's kind (KINDS) from three prefill shapes, (batch 1, 2 tokens), (batch 2, 1
    token each) and (1, 1), and the attention probes' (q, c) shapes (`probe`)."""
    a = plan.attention_dp  # each chip's share: (1, 2), (2, 1), (1, 1)
    probes = requests(np.array([a, 2 * a, a]), np.array([2, 1, 1]))
    graphs = shape_graphs(cfg, probes, plan.tp, plan.ep, plan.dp_attention)
    table = graphs.tables[0]
    rows = [graphs.row[r] for r in probes]
    works = np.concatenate([probe.matrix_flops[:, None], probe.vector_flops[:, None],
                            probe.role_bytes], axis=1)  # (probes, values, ops)
    groups = [np.flatnonzero(q == _PROBES_Q) for q in np.unique(_PROBES_Q)]
    index = {name: j for j, name in enumerate(probe.names)}
    found = {}
    for i, op in enumerate(table.ops):
        shapes = (np.concatenate([table.matrix_flops[row, 0, i, None],
                                  table.vector_flops[row, 0, i, None],
                                  table.role_bytes[row, 0, :, i]]) for row in rows)
        j = index.get(op.name)
        probed = Probed(*shapes, None if j is None else [works[g, :, j] for g in groups])
        found[op.name] = next(kind for kind, test in KINDS.items() if test(probed))
    return found


def _context_ops(cfg: TransformerConfig, requests, plan: Plan) -> frozenset[str]:
    """The decode graph's ops whose work grows with the keys a sequence attends (its
    attention kernels, whatever their form): those of two decode steps of one sequence
    that differ only in their cache."""
    probes = requests(np.array([1, 1]), np.array([1, 4]))
    graphs = shape_graphs(cfg, probes, plan.tp, plan.ep, plan.dp_attention)
    table = graphs.tables[1]
    n = len(graphs.requests)

    def work(values: np.ndarray, row: int) -> np.ndarray:  # (..., ops) at one probe's first step
        return np.broadcast_to(values, (n, *values.shape[1:]))[row, 0].reshape(-1, len(table))

    a, b = (np.concatenate([work(getattr(table, f), graphs.row[r])
                            for f in ("matrix_flops", "vector_flops", "role_bytes")])
            for r in probes)  # fmt: skip
    return frozenset(op.name for i, op in enumerate(table.ops)
                     if not np.array_equal(a[:, i], b[:, i]))  # fmt: skip


def _tabulated(
    cfg: TransformerConfig, reqs: list[Request], system: System, plan: Plan,
    placement: Placement, picks: list[Callable[[Op], bool]], phase: int = 0,
    aux: int | None = None,
) -> tuple[list[np.ndarray], OpTable, np.ndarray]:  # fmt: skip
    """Stage times (R, pp) and energy (R,) of the ops each of `picks` picks in the prefill
    (phase 0) or first decode step's (phase 1) graphs of these requests, one per row, as
    [times, energy, times, energy, ...]; the table and its (ops, pp) stage counts. `aux`:
    the most tokens a row's step may have for its shared experts' second stream to run
    (None: any)."""
    graphs = shape_graphs(cfg, reqs, plan.tp, plan.ep, plan.dp_attention)
    rows = np.array([graphs.row[r] for r in reqs])
    tokens = np.array([r.batch * (r.prompt if phase == 0 else r.step_tokens) for r in reqs])
    (found,) = cost_phases(graphs, rows, [system] * len(reqs), [placement] * len(reqs),
                           plan.rank, np.full(len(reqs), plan.pp), phases=(phase,),
                           streams=None if aux is None else tokens <= aux)  # fmt: skip
    counts = found.counts[0, 0]  # (ops, pp): the same for every row
    tables = []
    for mine in picks:
        picked = np.array([mine(op) for op in found.table.ops], dtype=float)
        per_op = found.costs.time_s[:, 0] * picked  # (R, ops)
        tables.append(ordered_sum(per_op[:, :, None] * counts, axis=1))
        # summed as the times are (ordered_sum), so that a row's energy does not depend on
        # how many rows were tabulated with it (StepCost.within slices a larger table)
        energy = found.costs.energy_j[:, 0] * picked * counts.sum(axis=1)
        tables.append(ordered_sum(energy, axis=1))
    return tables, found.table, counts


@dataclass(frozen=True)
class Counts:
    """Some ops (`kernel`) and their work for one sequence at each of M shapes (the decode
    graph's context-dependent ops at each mean context of the grid; the state ops at each
    prefill chunk's q): FLOPs (M, n) and bytes by role (M, roles, n)."""

    kernel: Kernel
    matrix: np.ndarray
    vector: np.ndarray
    roles: np.ndarray

    def per_sequence(self, sequences: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Stage times (N, M, pp) and energy (N, M) of n sequences each at a grid context:
        every count n times one sequence's, but weights (a sink's logits) read once."""
        n = sequences.astype(float)[:, None, None]
        scale = np.array([1.0 if r is not Role.WEIGHT else 0.0 for r in ROLES])[:, None]
        once = self.roles * (1 - scale)
        roles = once[None] + n[..., None] * (self.roles * scale)[None]
        shape = (len(sequences), len(self.matrix))
        k = shape[0] * shape[1]  # (not -1: a model without attention has no ops here)
        stage_s, energy = self.kernel.cost_counts(
            (n * self.matrix[None]).reshape(k, self.matrix.shape[-1]),
            (n * self.vector[None]).reshape(k, self.vector.shape[-1]),
            roles.reshape(k, *self.roles.shape[1:]))  # fmt: skip
        return stage_s.reshape(*shape, self.kernel.counts.shape[1]), energy.reshape(shape)

    def summed(self, shapes: tuple[int, ...]) -> tuple[np.ndarray, float]:
        """Stage times (pp,) and energy of one kernel over sequences at these shapes (rows,
        from 1): their FLOPs and bytes summed, weights read once. None of them (a model
        without state ops, most of them): nothing, without the sums, once per prefill."""
        if not shapes or not len(self.kernel.table):
            return np.zeros(self.kernel.counts.shape[1]), 0.0
        at = np.asarray(shapes) - 1
        weight = np.array([r is Role.WEIGHT for r in ROLES])[:, None]
        roles = np.where(weight, self.roles[at].max(axis=0), self.roles[at].sum(axis=0))
        stage_s, energy = self.kernel.cost_counts(self.matrix[at].sum(axis=0, keepdims=True),
                                                  self.vector[at].sum(axis=0, keepdims=True),
                                                  roles[None])  # fmt: skip
        return stage_s[0], float(energy[0])


def _counts(cfg: TransformerConfig, reqs: list[Request], system: System, plan: Plan,
            placement: Placement, names: frozenset[str], phase: int) -> Counts:  # fmt: skip
    """The ops `names` names of one sequence at each request's prefill (phase 0) or first
    decode step (1)."""
    graphs = shape_graphs(cfg, reqs, plan.tp, plan.ep, plan.dp_attention)
    rows = np.array([graphs.row[r] for r in reqs])
    # the ops' work and stage counts only: the Kernel costs them for the works it is asked
    found = graphs.phase_values[phase].first.subset(steps=rows)
    stage_counts = graphs.depth_counts(phase, np.array([plan.pp]))[0][0, 0]  # (ops, pp)
    at = np.array([i for i, op in enumerate(found.ops) if op.name in names], dtype=int)
    table = found.subset(ops=at)
    m = len(reqs)

    def per_row(values: np.ndarray) -> np.ndarray:
        return np.broadcast_to(values, (m, *values.shape[1:]))[:, 0].astype(float)

    ops = replace(table, matrix_flops=per_row(table.matrix_flops)[:1],
                  vector_flops=per_row(table.vector_flops)[:1],
                  role_bytes=per_row(table.role_bytes)[:1])  # fmt: skip
    kernel = Kernel(ops, system.chip, stage_counts[at], placement,
                    len(system.chip.memory))  # fmt: skip
    return Counts(kernel, per_row(table.matrix_flops), per_row(table.vector_flops),
                  per_row(table.role_bytes))  # fmt: skip


def _attention_probe(cfg, plan: Plan, act, weight, attention, kv, moe_backend="",
                     kernels: tuple[str, ...] = (), decode: bool = False,
                     tokens: int = 0) -> OpTable:  # fmt: skip
    """The rank's ops at the probe shapes (batch 1), as a table whose counts have one row
    per probe: (probes, ...), whatever the axes each op's dimensions left (a weight's bytes
    are the same at every probe and broadcast); `decode`: built as decode steps of q tokens
    (StepShape.decode), a speculative verify's form; `tokens`: every probe at that q."""
    q = _PROBES_Q if not tokens else np.full_like(_PROBES_Q, tokens)
    step = StepShape(1, q[:, None], _PROBES_C[:, None], decode=decode)
    graph = build_step(cfg, step, act, weight, compact=True, attention=attention, kv=kv,
                       moe_backend=moe_backend, kernels=kernels)  # fmt: skip
    # a sequence's attention runs on one chip: whole heads under attention data parallelism
    table = op_table(partition(graph, Plan() if plan.dp_attention else plan.rank))
    n = len(_PROBES_Q)

    def per_probe(values: np.ndarray) -> np.ndarray:  # (probes, 1, ...) or (...) -> (probes, ...)
        if values.ndim >= 2:
            return np.broadcast_to(values, (n, 1, *values.shape[2:]))[:, 0]
        return np.broadcast_to(values, (n, *values.shape))

    return replace(table, matrix_flops=per_probe(table.matrix_flops),
                   vector_flops=per_probe(table.vector_flops),
                   role_bytes=per_probe(table.role_bytes))  # fmt: skip


def _verify_attention(cfg: TransformerConfig, requests, system: System, plan: Plan,
                      placement: Placement, formats: Request, kinds: dict[str, str],
                      tokens: int) -> Attention:  # fmt: skip
    """A speculative verify's attention: each sequence's K + 1 tokens attend its cache with
    the engine's decode kernels, as one token does (SGLang's target_verify takes the MLA
    absorbed path: deepseek_v2.py runs MHA only for extends without speculation; TensorRT-
    LLM's MTP verify runs its generation-phase MLA kernel, its MTP blog's "Attention for
    MTP"), where a prefill chunk of latent attention would decompress every cached latent
    (kv_b_proj over the context) first. Its ops: those of the decode form at the probe
    shapes that are not token or sampling ops of the prefill graph (the token table prices
    those at the step's tokens): the attention kernel, and for latent attention the per-
    token q_absorb and v_absorb; their counts a polynomial in (q, c) as a prefill's are,
    their instances per stage the decode graph's. Its ops are those built at the verify's
    own `tokens` (K + 1) a sequence: a decode kernel's floors count its sequences by its
    bytes per sequence other than the cache's (OpTable.sequence_bytes), which grow with q,
    and the probes' at their most q (7) counted 4 tokens' verify of one sequence as 4/7 of
    one, its MI355X stream floor 7/4 of one sequence's latents."""
    probe = _attention_probe(cfg, plan, *formats.formats, decode=True)
    at_tokens = _attention_probe(cfg, plan, *formats.formats, decode=True, tokens=tokens)
    graphs = shape_graphs(cfg, requests(np.array([1]), np.array([4])), plan.tp, plan.ep,
                          plan.dp_attention)  # fmt: skip
    stage_counts = graphs.depth_counts(1, np.array([plan.pp]))[0][0, 0]  # (ops, pp)
    index = {op.name: i for i, op in enumerate(graphs.tables[1].ops)}
    rows = [j for j, op in enumerate(probe.ops)
            if kinds.get(op.name, "attention") == "attention" and op.name in index]
    found = probe.subset(ops=np.array(rows, dtype=int))
    ops = replace(at_tokens.subset(ops=np.array(rows, dtype=int)),
                  matrix_flops=found.matrix_flops[:1], vector_flops=found.vector_flops[:1],
                  role_bytes=found.role_bytes[:1])  # fmt: skip
    return Attention(
        ops, system.chip, stage_counts[[index[probe.ops[j].name] for j in rows]], placement,
        len(system.chip.memory),
        tuple(_fit(getattr(found, f)) for f in ("matrix_flops", "vector_flops", "role_bytes")),
    )  # fmt: skip


def _fit(values: np.ndarray) -> np.ndarray:
    """Coefficients (5, ...) of the attention polynomial from its values at the probes.

    The true coefficients are multiples of a quarter (pairs = qc - q²/2 + q/2, times integer
    widths and byte sizes down to int4's half byte); least squares leaves them 1e-16 off,
    so they are snapped to quarters when that is what they are, and counts are then exact."""
    basis = _basis(_PROBES_Q, _PROBES_C)
    flat = values.reshape(len(_PROBES_Q), -1)
    coef, *_ = np.linalg.lstsq(basis, flat, rcond=None)
    worst = np.abs(basis @ coef - flat).max(initial=0.0)
    if worst > 1e-6 * max(np.abs(flat).max(initial=0.0), 1.0):
        raise RuntimeError("an attention op's counts are not a polynomial in q, c, qc and q²")
    snapped = np.round(coef * 4) / 4
    return snapped if np.allclose(coef, snapped, rtol=1e-9, atol=1e-9) else coef
