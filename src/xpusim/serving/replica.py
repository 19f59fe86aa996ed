"""One engine instance: a replica of the model's plan (tp x pp chips), its queues, its
KV cache, and the iterations it runs.

An iteration's time is the step cost's (serving/step_cost.py) plus the engine's exposed host
time. With pp stages a replica runs pp lanes (vLLM's virtual engines), each with its own
queues and one iteration in flight, sharing the stages and the KV cache: an iteration enters
a stage when the one before it has left it, so a token's trip crosses every stage while the
stages work on other lanes' batches.

The decoding sequences of a lane are a cohort that decodes together, one token each per
decode iteration, so a sequence's output so far is the lane's decode count since it joined:
nothing is done per token. What happens to one sequence at a known future step (its last
token, its next KV block) is filed under that step, and ITL gaps are kept as (gap, how many
sequences had it). A serving run's cost is then per iteration and per request, not per
token: 10,000 requests of 256 tokens are 2.6 million tokens. The two schedules hold the
cohort's members and no one else: a sequence that leaves the cohort is taken out of both
(its finish step's list, its Growing's dict), so that a step reads its due members without
testing each for still being there, as the filter it replaced did for every growing member at every
step (a fifth of a max-rate search's CPU, a third of a closed loop's simulation). The
members due a block at one step are a Growing, which moves whole to its next step when
each gets its block, counting the block once for all of them (Growing's docstring).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from math import ceil, inf, nan
from typing import TYPE_CHECKING

import numpy as np

from xpusim.serving.admission import Pass, Reserve
from xpusim.serving.engines import EngineProfile
from xpusim.serving.kv_cache import KVCache
from xpusim.serving.schedulers import Batch, Scheduler, Sequence
from xpusim.serving.speculative import Speculator
from xpusim.serving.step_cost import StepCost, StepTime, Work

if TYPE_CHECKING:
    from xpusim.serving.verdict import Verdict

SKIP_AFTER = 2  # at least 1: a skip's first step then has no member that joined since the
# last decode (Replica._decoded_run)
SKIP_ROOM = 8
"""Replica.cruise runs a stretch's first SKIP_AFTER steps one at a time, and the steps after
them while the next event is fewer than SKIP_ROOM of the last step's time away, before it
skips the rest (Replica._skip: a pass over the cohort's schedules, which costs about what a
few steps do: more than the stretch where it ends soon, as most do in a full cache or
under an open loop's arrivals). Either way every step is the same (only the CPU differs)."""
RUN_STEPS = 64
"""Replica._skip prices RUN_STEPS steps at once, then twice as many each time (those past
the stretch's end are dropped)."""
RECV_OTHER_WEIGHT = 1000
"""SGLang's receive gate's weight for a batch other than a decode's (scheduler_recv_skipper.py
_DEFAULT_WEIGHT, env SGLANG_SCHEDULER_RECV_SKIPPER_WEIGHT_DEFAULT): over the intervals
launches set (10-30), so the loop after a prefill receives."""


@dataclass
class Padding:
    """CUDA-graph padding (serving/engines.toml): a step whose size is captured runs as the
    next captured size up, so its token ops cost that many tokens. Under attention data
    parallelism each of the `ranks` runs its own share of the step as one graph, and all
    run the same size (their experts meet in one all-to-all): T tokens over R ranks run as
    R x the size ceil(T / R) pads to (TensorRT-LLM's CUDA-graph runner with attention DP
    pads every rank's batch to the largest rank's graph). `rows[T - 1]`: what padding T
    tokens adds (stage times..., energy of one chip)."""

    mode: str  # "tokens": every step's token count; "decode": decode-only steps' batch
    rows: list[list[float]]

    @classmethod
    def of(cls, mode: str, sizes: list[int], cost: StepCost, q: int,
           pad: Callable[[int, list[int]], int], ranks: int = 1) -> Padding | None:  # fmt: skip
        """The padding of a step cost's token ops at the captured `sizes` (ascending), q
        tokens per decoding sequence, over `ranks` attention-DP ranks each padding its own
        share; `pad`: EngineProfile.padded."""
        if mode == "none" or not sizes:
            return None
        top = min(sizes[-1] * q * ranks, cost.max_tokens)
        stage = cost.token_stage_s[:top].tolist()
        energy = cost.token_energy_j[:top].tolist()
        rows = []
        for t in range(1, top + 1):
            n = -(-t // q) if mode == "decode" else t
            padded = min(pad(-(-n // ranks), sizes) * ranks * (q if mode == "decode" else 1),
                         top)  # fmt: skip
            rows.append([a - b for a, b in zip([*stage[padded - 1], energy[padded - 1]],
                                               [*stage[t - 1], energy[t - 1]], strict=True)])
        return cls(mode, rows)

    def extra(self, tokens: int, decode_only: bool) -> list[float] | None:
        if (self.mode == "decode" and not decode_only) or tokens > len(self.rows):
            return None
        return self.rows[tokens - 1]


@dataclass
class Iteration:
    batch: Batch
    start_s: float
    end_s: float
    stage0_free_s: float  # when the next iteration may enter the first stage
    energy_j: float
    busy_chip_s: float  # chip-seconds its stages kept busy
    sampled: float  # tokens it emits: per decode one (speculative: the mean accepted), and
    # one per prompt it completes
    decodes: int  # sequences it decoded
    plain: bool = False  # decodes only, on one stage, its scheduling admitting and
    # preempting nothing and no prompt held (batch_wait): the steps after it may be run
    # on by Replica.cruise (the gates counting iterations asked at each, _gates_hold)


@dataclass
class DecodeRun:
    """Consecutive plain decode iterations of one lane (Replica._skip), each as its
    Iteration would have been: n decodes and n tokens, no prefill chunk."""

    decodes: int
    start_s: np.ndarray
    end_s: np.ndarray
    energy_j: np.ndarray
    busy_chip_s: np.ndarray
    kv_used: np.ndarray  # the cache's blocks in use at each


@dataclass(eq=False, slots=True)
class Growing:
    """The cohort members whose next KV block falls due at one decode step, in the order
    they were filed. When the cache has a block for each, the whole group moves to the step
    a block later and `grown` counts the block for all of them, so that a step costs the
    same at blocks of 1 token (SGLang: every member, every step) as at 16; a member's own
    count is its `blocks` + grown - its `mark`, written back to it when it leaves the group
    (Replica.release). The members are a dict by id, in the order filed: a member leaves it
    in one step, where a list's search (a Python comparison per member passed) was a tenth
    of a large-batch max-rate search. tests/test_serving_growth.py holds each member's count
    to the cache's."""

    members: dict[int, Sequence]
    grown: int = 0

    def add(self, s: Sequence) -> None:
        self.members[s.id] = s
        s.growing, s.mark = self, self.grown


@dataclass(eq=False)
class Replica:
    """One lane of a replica (the replica itself when pp is 1)."""

    index: int
    replica: int  # the replica it is a lane of
    role: str  # "both", "prefill" or "decode" (disaggregation)
    cost: StepCost
    kv: KVCache  # shared by the lanes of a replica
    schedule: Scheduler
    engine: EngineProfile  # its host time per iteration
    max_batch: int
    token_budget: int
    chunk: int
    stage_free_s: list[float]  # shared by the lanes of a replica
    measured_from: int = 0  # sequence ids below it are warm-up: their gaps are not kept
    padding: Padding | None = None  # the engine's CUDA graphs
    speculator: Speculator | None = None  # speculative decoding
    rank_schedulers: int = 1  # attention-DP ranks that each schedule their own requests
    # (SGLang's dp-attention): a rank not prefilling decodes in a prefill-first step
    decode_steps: int = 1  # decode iterations per schedule (vLLM V0's num_scheduler_steps)
    adp_balance: tuple[int, int] | None = None  # TensorRT-LLM's attention-DP balancer:
    # (batching_wait_iters, timeout_iters), over adp_ranks attention-DP ranks
    adp_ranks: int = 1
    recv_interval: int = 1  # SGLang's --scheduler-recv-interval (1: every iteration receives)
    batch_wait: tuple[int, float] | None = None  # TensorRT-LLM's batch waiting:
    # (batch_wait_timeout_iters, batch_wait_max_tokens_ratio)
    dp_batch: tuple[int, float] | None = None  # tpu-inference's DP prefill batching: (the
    # engine's attention-DP ranks, the seconds after a release that release the rest)
    eager_s: tuple[float, ...] = ()  # each stage's host time of a step run without graphs
    eager_above_tokens: int = 0  # only steps of more tokens run without graphs (0: every one)
    static_w: float = 0.0  # one chip's static power, drawn while a stage waits on the host
    jit_s: float = 0.0  # host time to compile its GEMMs for a bucket of tokens not met before
    jit_bucket_tokens: int = 0  # (engines.toml jit_gemm)
    api_servers: float = 1.0  # API server processes streaming its tokens: its replica's
    # share of them, the replica's pp lanes streaming through the same ones (0: in-process)
    reserve: Reserve | None = None  # SGLang's admission control (serving/admission.py)
    admitting: bool = True  # whether this iteration's scheduler may start new prompts
    waiting: deque[Sequence] = field(default_factory=deque)
    inbox: deque[Sequence] = field(default_factory=deque)  # arrived, not yet received
    prefilling: list[Sequence] = field(default_factory=list)
    cohort: dict[int, Sequence] = field(default_factory=dict)  # decoding, admission order
    busy: bool = False
    load: int = 0  # requests routed here and not yet handed back by finish: `queued`, kept
    # as it changes (arrive, finish) where the simulator's route read four lengths of each
    # replica at every arrival
    steps: int = 0  # decode iterations run
    context_sum: int = 0  # Σ over the cohort of the keys its next decode attends
    last_decode_s: float = nan
    preemptions: int = 0
    itl_s: list[float] = field(default_factory=list)  # gaps between tokens, measured ones
    itl_count: list[int] = field(default_factory=list)  # sequences with each gap
    _finish_at: dict[int, dict[int, Sequence]] = field(default_factory=dict)  # by
    # finishes_at, each step's members by id in the order filed (a member leaves in one
    # step, where a list's search was 9% of MLPerf v4.1 Llama-2-70B Offline on 8 MI300X,
    # sampled: its preemptions take members out of long lists); steps with members only
    # (_leave deletes an emptied one, so _skip's first finish is the least key)
    _grow_at: dict[int, Growing] = field(default_factory=dict)
    _fresh: list[Sequence] = field(default_factory=list)  # joined since the last decode
    _measured: int = 0  # cohort members past the warm-up
    _run_left: int = 0  # decode iterations left of a multi-step run
    _adp_waited: int = 0  # iterations the balancer has held prompts for all ranks
    _adp_batched: int = 0  # iterations it has held them, all ranks having some, to batch
    _recv_count: int = 0  # the receive gate's count since it last received
    _recv_weight: int = 1  # what the last iteration adds to it
    _batch_waited: int = 0  # steps batch waiting has held prompts since it last let them run
    _released_s: float = 0.0  # when DP prefill batching last released its pending requests
    _compiled: set[tuple[int, bool]] = field(default_factory=set)  # variants compiled (_bucket)
    _cohort_columns: tuple[np.ndarray, ...] | None = None  # _columns' (None: to build)

    @cached_property
    def per_decode(self) -> int:
        """Tokens a decoding sequence runs per step: 1, or its verify chunk's K + 1."""
        return 1 if self.speculator is None else self.speculator.drafts + 1

    @cached_property
    def _gain(self) -> float:
        """Tokens a decoding sequence gains per decode step, on average (read at every
        step and every leave: kept, the speculator being the replica's for good)."""
        return 1 if self.speculator is None else self.speculator.tokens_per_step

    def _steps_for(self, tokens: int) -> int:
        """Decode steps until a sequence has gained `tokens` more."""
        gain = self._gain
        return tokens if gain == 1 else ceil(tokens / gain - 1e-9)

    def _tokens_in(self, steps: int) -> int:
        """Tokens a sequence has gained after `steps` decode steps (at least one each)."""
        gain = self._gain
        return steps if gain == 1 else max(int(steps * gain + 1e-9), steps)

    @property
    def queued(self) -> int:
        """The requests this replica holds, counted: what `load` keeps (the reference a test
        holds it to; a sequence moves between these queues but leaves them only in finish)."""
        return len(self.inbox) + len(self.waiting) + len(self.prefilling) + len(self.cohort)

    def arrive(self, s: Sequence) -> None:
        """A request reaches the engine: into its queue, or where a receive gate or DP
        prefill batching is set, into the inbox the scheduler takes it from at its next
        receive (_receive) or release (_release)."""
        held = self.recv_interval > 1 or self.dp_batch is not None
        (self.inbox if held else self.waiting).append(s)
        self.load += 1

    def _receive(self) -> None:
        """SGLang's SchedulerRecvSkipper (python/sglang/srt/managers/scheduler_recv_skipper.py,
        0.5): at the top of each scheduler loop the last batch's weight is added to a count,
        1 for a decode batch (SGLANG_SCHEDULER_RECV_SKIPPER_WEIGHT_DECODE) and 1000 for any
        other (_DEFAULT_WEIGHT: a prefill); requests are read off the tokenizer's socket only
        when the count reaches --scheduler-recv-interval, which resets it. So after a prefill
        the next loop receives, and between prefills one loop in `recv_interval` does. An
        idle loop (no batch) weighs 1 too, but it spins in microseconds: an engine with
        nothing to run receives at once."""
        self._recv_count += self._recv_weight
        idle = not (self.cohort or self.prefilling or self.waiting)
        if self._recv_count >= self.recv_interval or idle:
            self._recv_count = 0
            self._take_inbox()

    def _release(self, now_s: float) -> None:
        """tpu-inference's DP scheduler with DP_SCHED_BATCH_PREFILL (core/sched/
        dp_scheduler.py _try_flush_pending, at every step): the requests pending in the
        inbox are routed to their ranks together once as many pend as the engine has
        attention-DP ranks, once the timeout has passed since the last release, or once as
        many ranks were idle as requests pend. A rank is idle when it holds no request, its
        requests spread over the ranks as the scheduler's least-tokens routing spreads them
        (an assumption: the ranks run alike)."""
        if not self.inbox:
            return
        ranks, timeout_s = self.dp_batch  # type: ignore[misc]
        idle = ranks - min(ranks, self.running + len(self.waiting))
        pending = len(self.inbox)
        if pending >= ranks or now_s - self._released_s >= timeout_s or idle >= pending:
            self._released_s = now_s
            self._take_inbox()

    def _take_inbox(self) -> None:
        """What a gate (_receive, _release) lets through: the inbox, in arrival order, onto
        the scheduler's queue."""
        self.waiting.extend(self.inbox)
        self.inbox.clear()

    @property
    def running(self) -> int:
        return len(self.prefilling) + len(self.cohort)

    def cached(self, s: Sequence) -> int:
        return self.kv.cached_tokens(s.target) if s.done == 0 else s.done

    def output(self, s: Sequence) -> int:
        """The tokens s has made so far (a cohort member's count is kept by the lane)."""
        if self.cohort.get(s.id) is not s:
            return s.generated
        return min(s.base + self._tokens_in(self.steps - s.joined), s.gen)

    def outputs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every cohort member's (output so far, length, prompt), in admission order, as
        arrays: output() of each, from the cohort's columns (_columns) at this step. SGLang's
        admission control asks for them at every step a request waits, which one by one
        was a quarter of InferenceX's DeepSeek-R1 MTP closed loop of 512 clients on 8 B200
        (15.6 million output() calls); tests/test_serving_outputs.py holds it to output()."""
        joined, base, gens, prompts = self._columns()
        steps = self.steps - joined
        gain = self._gain
        gained = steps if gain == 1 else np.maximum((steps * gain + 1e-9).astype(np.int64), steps)
        return np.minimum(base + gained, gens), gens, prompts

    def _columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The cohort's (joined, base, gen, prompt) as int64 arrays in admission order, kept
        until the cohort next changes (_join, _leave: between them these are fixed)."""
        if self._cohort_columns is None:
            members = self.cohort.values()
            self._cohort_columns = tuple(  # type: ignore[assignment]
                np.array(column, dtype=np.int64).reshape(-1) for column in (
                    [s.joined for s in members], [s.base for s in members],
                    [s.gen for s in members], [s.prompt for s in members]))  # fmt: skip
        return self._cohort_columns  # type: ignore[return-value]

    def admission(self) -> Pass | None:
        """A prefill pass's budget under the engine's admission control, its running
        requests as they stand (None: the engine admits on its prompt's blocks alone)."""
        if self.reserve is None:
            return None
        outputs, gens, prompts = self.outputs()
        if self.prefilling:
            prefilling = self.prefilling
            outputs = np.append(outputs, [s.generated for s in prefilling])
            gens = np.append(gens, [s.gen for s in prefilling])
            prompts = np.append(prompts, [s.prompt for s in prefilling])
        return Pass.of(self.reserve, outputs, gens, prompts)

    def fits(self, gate: Pass | None, s: Sequence) -> bool:
        """Whether the pass's admission control lets waiting s start now; with nothing
        running, always (a request longer than the whole cache then runs as it would
        without the control, preempting, where SGLang's would wait forever)."""
        if gate is None or not gate.gens.size:
            return True
        free = self.kv.free * self.kv.block_tokens
        return gate.fits(s, s.target - self.cached(s), free)

    def _admit_at(self) -> float:
        """For cruise, its iteration in flight: the count of decode steps (self.steps)
        from which admission control may let the queue's head start, the budget moving
        every step as the requests write and the ratio decays (Reserve.first_fit); inf:
        not before the stretch ends, or no control or no queue."""
        if self.reserve is None or not self.waiting:
            return inf
        s = self.waiting[0]
        if s.decoding or self.prefilling or not self.cohort:
            return self.steps + 1  # the event loop's scheduler decides
        outputs, gens, prompts = self.outputs()
        running = (np.minimum(outputs + 1, gens), gens, prompts)
        horizon = int(min(self._finish_at, default=self.steps + 1) - self.steps) + 1
        wait = self.reserve.first_fit(s, s.target - self.cached(s),
                                      self.kv.free * self.kv.block_tokens, running,  # type: ignore[arg-type]
                                      self.kv.block_tokens, horizon)  # fmt: skip
        return self.steps + 1 + wait

    def admit(self, s: Sequence, tokens: int) -> bool:
        """Takes the blocks for `tokens` of a waiting sequence (the caller pops it) and
        starts it: prefilling, or decoding when it was prefilled elsewhere."""
        if s.done == 0:
            s.shared = s.done = self.kv.cached_tokens(s.target)
        need = self.kv.blocks_for(tokens, s.shared) - s.blocks
        if not self.kv.take(need):
            if s.done == s.shared:
                s.shared = s.done = 0  # not admitted: nothing was computed
            return False
        s.blocks += need
        if s.decoding:
            self._join(s)
        else:
            self.prefilling.append(s)
        return True

    def _join(self, s: Sequence) -> None:
        """Into the cohort, from the next decode iteration on."""
        s.joined, s.base = self.steps, s.generated
        self.cohort[s.id] = s
        self._cohort_columns = None
        self.context_sum += s.prompt + s.generated
        s.finishes_at = self.steps + self._steps_for(s.gen - s.generated)
        self._finish_at.setdefault(s.finishes_at, {})[s.id] = s
        self._file_growth(s)
        self._fresh.append(s)
        self._measured += s.id >= self.measured_from

    def _file_growth(self, s: Sequence) -> None:
        """The decode step whose token first exceeds the sequence's blocks."""
        tokens = s.blocks * self.kv.block_tokens + s.shared - s.prompt - s.base + 2
        step = max(s.joined + (tokens if self.speculator is None else self._steps_for(tokens)),
                   self.steps + 1)  # fmt: skip
        group = self._grow_at.get(step)
        if group is None:
            group = self._grow_at[step] = Growing({})
        group.add(s)

    @staticmethod
    def release(s: Sequence) -> None:
        """A member out of its Growing, its blocks counted in (its own count from here)."""
        group = s.growing
        s.blocks += group.grown - s.mark
        s.growing = None

    def _dissolve(self, group: Growing) -> list[Sequence]:
        """A step's due members, each released from their popped Growing, in order."""
        due = list(group.members.values())
        for s in due:
            self.release(s)
        return due

    def _leave(self, s: Sequence) -> None:
        del self.cohort[s.id]
        self._cohort_columns = None
        filed = self._finish_at.get(s.finishes_at)  # None: being read (finish)
        if filed is not None:
            del filed[s.id]
            if not filed:
                del self._finish_at[s.finishes_at]
        if s.growing is not None:  # None: released from a step being read (_grow_each)
            del s.growing.members[s.id]
            self.release(s)
        steps = self.steps - s.joined
        s.generated = min(s.base + self._tokens_in(steps), s.gen)
        s.last_token_s = self.last_decode_s if self.steps > s.joined else s.last_token_s
        self.context_sum -= s.prompt + s.base + steps * self._gain
        self._measured -= s.id >= self.measured_from
        if s in self._fresh:
            self._fresh.remove(s)

    def decodes(self) -> bool:
        """Whether the cohort decodes next, each member with the blocks for its next token;
        when the cache runs out, the latest-admitted sequences are preempted (recompute)
        until the earlier ones fit, as vLLM does, the sequence itself last. Under SGLang's
        admission control a decode step moves its new_token_ratio: down a step, or after a
        retraction to the survivors' progress (serving/admission.py)."""
        if self.reserve is not None:
            preempted = self.preemptions
            running = self._grow()
            if self.preemptions > preempted:  # a retraction: the survivors' progress
                kept = list(self.cohort.values())
                self.reserve.retracted([self.output(s) for s in kept], [s.gen for s in kept])
            elif running:
                self.reserve.decayed()
            return running
        return self._grow()

    def _grow(self) -> bool:
        """decodes' blocks: each member due one takes it, preempting when short."""
        step = self.steps + 1
        group = self._grow_at.pop(step, None)
        if group is None or not group.members:
            return bool(self.cohort)
        # speculation: each member its blocks (_blocks_due), at its own step; else one each
        if self.speculator is not None:
            if not self._grow_drafted(group):
                self._grow_each(group)
        elif not self.kv.take(len(group.members)):
            self._grow_each(group)
        else:  # the common case: every one gets its block, and is due again a block on
            group.grown += 1
            self._refile(group, step + self.kv.block_tokens)
        return bool(self.cohort)

    def _refile(self, group: Growing, step: int) -> None:
        """A Growing whose members have had their blocks, filed at their next due step
        behind the members filed there before (a far reservation's), which join it."""
        earlier = self._grow_at.get(step)
        if earlier is not None:
            for s in self._dissolve(earlier):
                s.mark = group.grown
                s.growing = group
            group.members = earlier.members | group.members
        self._grow_at[step] = group

    def _grow_each(self, group: Growing) -> None:
        """The cache holds fewer blocks than are due, or a speculative step's members are
        due (`group`, popped): each due member in turn is released and takes its blocks
        (one; under speculation _blocks_due), the latest-admitted preempted while too few
        are free (_make_room). This is every step of a run whose cache is full, an offline
        burst's steady state (MLPerf v4.1 Llama-2-70B Offline on 8 MI300X: 3.1 million
        growths a run), so release, kv.take (known to succeed here) and, without
        speculation, _file_growth are inlined; tests/test_serving_growth.py holds it to
        its plain form. A member preempted before its turn was released by _leave."""
        kv, cohort, grow_at = self.kv, self.cohort, self._grow_at
        speculative = self.speculator is not None
        bt, next_step, grown = kv.block_tokens, self.steps + 1, group.grown
        for s in list(group.members.values()):
            if cohort.get(s.id) is not s:  # preempted by an earlier one's growth
                continue
            s.blocks += grown - s.mark  # release
            s.growing = None
            need = self._blocks_due(s) if speculative else 1
            if kv.used + need > kv.blocks and not self._make_room(s, need):
                continue
            used = kv.used = kv.used + need
            if used > kv.peak:
                kv.peak = used
            s.blocks += need
            if speculative:
                self._file_growth(s)
                continue
            step = s.joined + s.blocks * bt + s.shared - s.prompt - s.base + 2
            if step < next_step:
                step = next_step
            filed = grow_at.get(step)
            if filed is None:
                filed = grow_at[step] = Growing({})
            filed.members[s.id] = s  # Growing.add
            s.growing, s.mark = filed, filed.grown

    def _make_room(self, s: Sequence, need: int) -> bool:
        """Preempts the latest-admitted sequences (a prefilling one where `s` is the
        cohort's last) until `need` blocks are free for `s`, or `s` itself where no one
        else is left: whether `s` is still in the cohort."""
        kv, cohort = self.kv, self.cohort
        while kv.used + need > kv.blocks:
            last = next(reversed(cohort.values()))
            victim = last if last is not s else None
            if victim is None and self.prefilling:
                victim = self.prefilling[-1]
            self._preempt(victim or s)
            if victim is None:
                break
        return cohort.get(s.id) is s

    def _grow_drafted(self, group: Growing) -> bool:
        """_grow_each of a speculative step's due members (`group`, popped), where the cache
        has the blocks for all of them: then no one is preempted, and each member in turn
        is released (release), takes its blocks (_blocks_due) and is filed at its next due
        step (_file_growth), that arithmetic done for all of them at once in numpy (the
        same integer and float operations, element by element), the cache's blocks taken
        at once (its peak the same: used only rises). False, nothing changed, where the
        blocks are short (_grow_each then, preempting). Under SGLang's one-token blocks
        every member of a speculative cohort is due at every step: InferenceX's DeepSeek-R1
        MTP closed loop on 8 B200 at 512 clients runs this 51,602 times over 14.6 million
        members (a loop of Python arithmetic a member was a third of its CPU).
        tests/test_serving_growth.py holds it to _grow_each."""
        bt, next_step, gain, grown = self.kv.block_tokens, self.steps + 1, self._gain, group.grown
        due = list(group.members.values())
        joined = np.array([s.joined for s in due], dtype=np.int64)
        fixed = np.array([s.prompt + s.base - s.shared for s in due], dtype=np.int64)
        held = np.array([s.blocks - s.mark for s in due], dtype=np.int64) + grown  # release's
        steps = next_step - joined  # _tokens_in(steps), _blocks_due's cached tokens
        gained = steps if gain == 1 else np.maximum((steps * gain + 1e-9).astype(np.int64),
                                                    steps)  # fmt: skip
        need = np.maximum(-(-(fixed + gained - 1) // bt) - held, 1)
        if not self.kv.take(int(need.sum())):
            return False
        blocks = held + need
        tokens = blocks * bt - fixed + 2  # _file_growth's step
        step = np.maximum(joined + (tokens if gain == 1 else
                                    np.ceil(tokens / gain - 1e-9).astype(np.int64)),
                          next_step)  # fmt: skip
        grow_at = self._grow_at
        at, filed = -1, None
        for s, held_now, due_at in zip(due, blocks.tolist(), step.tolist(), strict=True):
            s.blocks = held_now
            if due_at != at:  # members of one step are mostly filed together
                at = due_at
                filed = grow_at.get(at)
                if filed is None:
                    filed = grow_at[at] = Growing({})
            filed.members[s.id] = s  # type: ignore[union-attr]  # Growing.add
            s.growing, s.mark = filed, filed.grown  # type: ignore[union-attr]
        return True

    def _blocks_due(self, s: Sequence) -> int:
        """Blocks a decoding member takes at the next step: what the tokens it has gained by
        then fill beyond its blocks (_file_growth's threshold), more than one where a
        speculative step gains more tokens than a block holds (SGLang's blocks of 1 token,
        2.6 tokens a step at two drafts)."""
        bt = self.kv.block_tokens
        cached = s.prompt + s.base + self._tokens_in(self.steps + 1 - s.joined) - s.shared - 1
        return max(-(-cached // bt) - s.blocks, 1)

    def _preempt(self, s: Sequence) -> None:
        if s.id in self.cohort:
            self._leave(s)
        else:
            self.prefilling.remove(s)
        self.kv.give(s.blocks)
        s.blocks = s.shared = s.done = 0
        s.target = s.prompt + s.generated  # recomputed: prompt and output so far
        s.preemptions += 1
        self.preemptions += 1
        self.waiting.appendleft(s)

    def free(self, s: Sequence) -> None:
        self.kv.give(s.blocks)
        s.blocks = 0

    def start(self, now_s: float) -> Iteration | None:
        """Runs the scheduler's next batch from now, if there is one."""
        if self.busy or self.stage_free_s[0] > now_s:
            return None
        if self.recv_interval > 1:
            self._receive()
        if self.dp_batch is not None:
            self._release(now_s)
        self.admitting = self._admits()
        queued, preempted = len(self.waiting), self.preemptions
        batch = self.schedule(self)
        if not batch:
            if self.reserve is not None and not (self.cohort or self.prefilling):
                self.reserve.idle()  # SGLang's self_check_during_idle
            return None
        held = (self.batch_wait is not None and batch.decode and bool(batch.chunks)
                and self._batch_waits(batch))  # fmt: skip
        if held:
            self._hold(batch)
        self._recv_weight = RECV_OTHER_WEIGHT if batch.chunks else 1
        self._count_run(bool(batch.chunks))
        chunks = batch.chunks
        n = len(self.cohort) if batch.decode else 0
        context = round(self.context_sum) if n else 0
        prefill = None
        if chunks:
            for s, _ in chunks:
                if s.admitted_s != s.admitted_s:  # nan: its first prefill step
                    s.admitted_s = now_s
            q = [k for _, k in chunks]
            c = [s.done + k for s, k in chunks]
            sampled = n + sum(1 for (s, _), k in zip(chunks, c, strict=True) if k >= s.target)
            work = Work.of_cohort(n, context, q, c, sampled)
            if self.speculator is not None:  # the chunks apart, for the verify and the draft
                prefill = Work.of_cohort(0, 0, q, c, sampled - n)
        else:  # a decode-only iteration, nearly all of a run's
            work = Work(n, context, 0, 0, 0, 0, 0, n)
            sampled = n
        spec = self.speculator
        if spec is not None and n:
            work = spec.verify(n, context, prefill)
        step = self.cost(work)
        if self.padding is not None:
            extra = self.padding.extra(work.tokens, not chunks)
            if extra is not None:
                step = _plus(step, extra[:-1], extra[-1] * self.cost.ranks)
        if spec is not None:
            draft = spec.draft_s(n, context, prefill)
            step = _plus(step, draft.stage_s, draft.energy_j)
        if chunks and self.eager_s and work.tokens > self.eager_above_tokens:
            step = eager(step, self.eager_s, self.static_w * self.cost.ranks)
        if chunks and self.jit_s:
            step = self._compile(step, work.tokens)
        it = self._begin(batch, now_s, step, n, n + len(chunks), sampled)
        it.plain = (not chunks and n > 0 and spec is None and self.cost.stages == 1
                    and len(self.waiting) == queued and self.preemptions == preempted
                    and not self.inbox and not held)
        return it

    def warm(self, tokens: tuple[int, ...]) -> None:
        """Prompt steps of these token counts ran before the run (a client's warm-up): their
        buckets are compiled (engines.toml jit_gemm)."""
        if self.jit_s:
            self._compiled.update(map(self._bucket, tokens))

    def _bucket(self, tokens: int) -> tuple[int, bool]:
        """The variant a step of `tokens` tokens compiles: ceil(tokens / jit_bucket_tokens), as
        the kernel's GRID_MN constant counts its row tiles, and whether the token count divides
        by 16, as Triton keys every integer argument not marked do_not_specialize (M is one in
        AITER's kernel: engines.toml jit_source; the same keying in vllm-project/vllm #55268)."""
        return -(-tokens // self.jit_bucket_tokens), tokens % 16 == 0

    def _compile(self, step: StepTime, tokens: int) -> StepTime:
        """A step of `tokens` tokens with prompt chunks, after its GEMM kernels compile for
        its bucket (_bucket) if no step met that bucket before: the first stage waits jit_s
        on the host (each stage's processes compile their own at once), drawing its chips'
        static power (engines.toml jit_gemm)."""
        bucket = self._bucket(tokens)
        if bucket in self._compiled:
            return step
        self._compiled.add(bucket)
        wait_s = [self.jit_s] + [0.0] * (len(step.stage_s) - 1)
        return _plus(step, wait_s, self.static_w * self.cost.ranks * self.jit_s)

    def _begin(self, batch: Batch, now_s: float, step: StepTime, n: int, sequences: int,
               sampled: int) -> Iteration:  # fmt: skip
        """The iteration of `step`'s cost from now: the host's time, then its stages as
        they come free; n decodes, `sampled` sequences making a token."""
        stages = step.stage_s
        emitted = sampled + n * (self._gain - 1)  # a verify step's accepted tokens
        # one streamed chunk a sequence making tokens: vLLM V1 sends a request's new tokens
        # of a step, a verify step's accepted ones too, as one chunk (engines.toml)
        host_s = self.engine.exposed_s(sequences, step.trip_s, self.adp_ranks, sampled,
                                       self.api_servers)  # fmt: skip
        t = now_s + host_s
        stage0_free = now_s
        for i, stage_s in enumerate(stages):
            begin = max(t, self.stage_free_s[i])
            t = self.stage_free_s[i] = begin + stage_s
            if i == 0:
                stage0_free = t
            if i + 1 < len(stages):
                t += step.send_s
        self.busy = True
        busy = sum(stages) * self.cost.ranks
        return Iteration(batch, now_s, t, stage0_free, step.energy_j, busy, emitted, n)

    def _count_run(self, prompts: bool) -> None:
        """vLLM V0's multi-step count, after a schedule: a decode-only one starts a run of
        decode_steps iterations (or goes on with the one under way)."""
        if self.decode_steps > 1:
            self._run_left = self._run_left - 1 if self._run_left else \
                (self.decode_steps - 1 if not prompts else 0)

    @property
    def _gated(self) -> bool:
        """Whether the engine has gates that count iterations: vLLM V0's multi-step
        scheduling or TensorRT-LLM's attention-DP balancer."""
        return self.decode_steps > 1 or self.adp_balance is not None

    def _gates_hold(self) -> bool:
        """For cruise, before a decode-only step it would run: the gates that count
        iterations (_admits, _count_run) counted for the step as start counts them, where
        that step's scheduler could admit nothing (the queue empty, or the gates shut to
        it), so the step is the plain one cruise runs; else False, the gates left as they
        were, for the event loop's start to schedule the step (the gates let a prompt in).
        Without such gates the scheduler's answer is the last step's: True."""
        if not self._gated:
            return True
        counts = self._run_left, self._adp_waited, self._adp_batched
        if self._admits() and self.waiting:
            self._run_left, self._adp_waited, self._adp_batched = counts
            return False
        self._count_run(False)
        return True

    def _admits(self) -> bool:
        """Whether new prompts may start this iteration, under the engine's gates on them:
        vLLM V0's multi-step scheduling (a decode-only schedule runs decode_steps iterations
        before the scheduler runs again; a run ends early when its last sequence has left)
        and TensorRT-LLM's attention-DP balancer."""
        if self._run_left and self.cohort:
            return False
        self._run_left = 0
        if self.adp_balance is None or not (self.cohort or self.waiting):
            return True  # an engine with nothing to run does not iterate
        return self._adp_admits(*self.adp_balance)

    def _adp_admits(self, batching_wait_iters: int, timeout_iters: int) -> bool:
        """TensorRT-LLM's attention-DP balancer, once per iteration (tensorrt_llm/_torch/
        pyexecutor/py_executor.py _balance_adp_requests, 1.0-1.1): prompts are held until
        every rank has one, or for timeout_iters iterations, its count running whether or
        not a prompt waits; once every rank has one and decodes, they are held
        batching_wait_iters more; a rank with no decode releases them at once. A rank has
        a prompt when as many wait as there are ranks, TensorRT-LLM sending each new
        request to the rank with the fewest (an assumption: its ranks run alike)."""
        ranks = self.adp_ranks
        every_rank_decodes = len(self.cohort) >= ranks
        if len(self.waiting) >= ranks and self.running < self.max_batch:
            self._adp_waited = 0
            if every_rank_decodes and self._adp_batched < batching_wait_iters:
                self._adp_batched += 1
                return False
            self._adp_batched = 0
            return True
        self._adp_waited += 1
        if self._adp_waited >= timeout_iters or not every_rank_decodes:
            self._adp_waited = 0
            return True
        return False

    def _batch_waits(self, batch: Batch) -> bool:
        """TensorRT-LLM's batch waiting (tensorrt_llm/_torch/pyexecutor/py_executor.py
        _schedule and _waiting_requests, 1.x), asked of each schedule with both prompts and
        decodes (with nothing decoding it never waits, 'to avoid dead waiting'; never under
        attention DP): the prompts are held while fewer than batch_wait_timeout_iters steps
        have held them and the step's tokens (each prompt's whole length, each decode 1 plus
        its draft tokens) are under batch_wait_max_tokens_ratio x max_num_tokens; once
        either is reached they run and the count restarts. Returns whether it holds them."""
        timeout_iters, ratio = self.batch_wait  # type: ignore[misc]
        tokens = sum(s.context for s, _ in batch.chunks) + len(self.cohort) * self.per_decode
        if self._batch_waited >= timeout_iters or tokens >= ratio * self.token_budget:
            self._batch_waited = 0
            return False
        self._batch_waited += 1
        return True

    def _hold(self, batch: Batch) -> None:
        """The prompts out of a scheduled batch, its decodes left to run: TensorRT-LLM drops
        them from the step before it prepares the step's resources, so one this schedule
        admitted (nothing of it computed) gives its blocks back and returns to the front of
        the queue, in order; one part-way through its chunks stays prefilling."""
        for s, _ in reversed(batch.chunks):
            if s.done == s.shared:
                self.prefilling.remove(s)
                self.kv.give(s.blocks)
                s.blocks = s.shared = s.done = 0
                self.waiting.appendleft(s)
        batch.chunks.clear()

    def cruise(self, it: Iteration, until_s: float, stop: Verdict | None,
               record: Callable[[Iteration], None],
               record_run: Callable[[DecodeRun], None]) -> Iteration:  # fmt: skip
        """The decode-only steps that follow a plain one (`it`) before `until_s`, the next
        event: each run as the event loop runs it (its end by finish, the cohort's blocks by
        decodes, the next step begun at that end), the scheduler skipped (with the cohort,
        the queue and the prefills unchanged and no block freed, it would admit nothing
        again), so that a long stretch of decodes costs no event per step. It stops before
        the end of a step that finishes a sequence, or whose next step's blocks would
        preempt, at `until_s`, where `stop` (a Verdict; None: none) misses, or before a step
        whose gates let a waiting prompt in (_gates_hold), and returns the
        last iteration begun: its end is an event as any other's. Its first SKIP_AFTER steps,
        and those close to `until_s`, run one at a time (`record`: each, in order); the rest
        at once (_skip, `record_run`)."""
        if not it.plain:
            return it
        n = it.decodes
        extra = None if self.padding is None else self.padding.extra(n, True)
        admit_at = self._admit_at()
        ran = 0
        while ran < SKIP_AFTER or until_s - it.end_s < SKIP_ROOM * (it.end_s - it.start_s):
            if not it.end_s < until_s:
                return it
            step = self.steps + 1  # the step `it` runs
            if step in self._finish_at or step >= admit_at:  # a prompt may start after it
                return it
            due = self._grow_at.get(step + 1)
            if (due is not None and len(due.members) > self.kv.free) \
                    or (stop is not None and stop.missed(it.end_s)) \
                    or not self._gates_hold():
                return it
            now_s = it.end_s
            self.finish(it)
            if self.recv_interval > 1:  # the loop's receive gate counts this decode step
                self._receive()
            self.decodes()  # every due member takes its block
            cost = self.cost.decode_step(n, self.context_sum)
            if extra is not None:
                cost = _plus(cost, extra[:-1], extra[-1] * self.cost.ranks)
            it = self._begin(it.batch, now_s, cost, n, n, n)
            record(it)
            ran += 1
        return self._skip(it, until_s, stop, record_run, extra, admit_at)

    def _skip(self, it: Iteration, until_s: float, stop: Verdict | None,
              record_run: Callable[[DecodeRun], None], extra: list[float] | None,
              admit_at: float = inf) -> Iteration:  # fmt: skip
        """The rest of cruise's stretch after `it` at once, equal to its steps one at a
        time bit for bit (tests/test_decode_runs.py). Where it must end is known before any
        step is run but for the clock: the cohort's first finish (the earliest step with a
        member filed: the schedules hold only members) and the first step whose blocks
        would exceed the free ones (each Growing at step g is due at g, g + block,
        g + 2 blocks, ...; the blocks due by each step summed once, in numpy). So no step
        touches a sequence, and the steps go by as arrays, RUN_STEPS and then twice as many
        at a time: their prices (StepCost.decode_steps), their clock (host time, then the
        stage, added in turn by np.add.accumulate, as the event loop adds them), where
        until_s, the Verdict (first_missed) and the gates (asked step by step, where the
        engine has them) end them, and their records; the Growings' counts, the growth and
        finish schedules, the cache, the keys, the ITL gaps and the Verdict's count are
        brought to where those steps leave them afterwards, once."""
        first = self.steps + 1  # the step `it` runs
        last = min(self._finish_at, default=inf)
        horizon = int(min(last, admit_at) - first) if last < inf else 0  # steps that may
        # begin, up to the first finish, and before a step at which a prompt may start
        block = self.kv.block_tokens
        growing = sorted(((step, group) for step, group in self._grow_at.items()
                          if first < step <= first + horizon and group.members),
                         key=lambda filed: filed[0])  # fmt: skip
        if growing:  # blocks due by each step first + 1 + k: each group's every block-th step
            due_at = np.zeros(-(-horizon // block) * block, dtype=np.int64)
            for step, group in growing:
                due_at[step - first - 1] += len(group.members)
            taken = np.cumsum(due_at.reshape(-1, block).cumsum(axis=0).ravel()[:horizon])
            horizon = min(horizon, int(np.searchsorted(taken, self.kv.free, side="right")))
        n, ranks, engine, adp = it.decodes, self.cost.ranks, self.engine, self.adp_ranks
        extra_s, extra_j = (0.0, 0.0) if extra is None else (extra[0], extra[-1] * ranks)
        starts, ends, stages, energies = [], [], [], []
        end_s, priced, ran, asked_s = it.end_s, RUN_STEPS, 0, None
        while ran < horizon:  # a chunk of the steps (RUN_STEPS, then twice as many)
            ahead = min(priced, horizon - ran)
            priced *= 2
            stage_s, energy_j = self.cost.decode_steps(  # the steps' keys: n more each
                n, self.context_sum + n * (ran + 1 + np.arange(ahead)))
            if extra is not None:  # _plus's sums
                stage_s, energy_j = stage_s + extra_s, energy_j + extra_j
            # _begin's clock, one addition after the other as it adds them: the host's
            # exposed time (none below the last end: _begin's max with the stage's free
            # time), then the stage
            clock = np.empty(2 * ahead + 1)
            clock[0] = end_s
            clock[1::2] = np.maximum(
                engine.exposed_s(n, stage_s, adp, n, self.api_servers, np.maximum), 0.0)
            clock[2::2] = stage_s
            np.add.accumulate(clock, out=clock)
            start_s = clock[:-1:2]
            # the steps begun before until_s, then before stop's miss, then while the
            # gates hold (each asked in turn, as the steps ask them)
            before = ahead if start_s[-1] < until_s else int(np.argmax(start_s >= until_s))
            runs = before if stop is None else stop.first_missed(start_s[:before])
            if self._gated:  # else _gates_hold holds at every step
                runs = next((k for k in range(runs) if not self._gates_hold()), runs)
            starts.append(start_s[:runs])
            ends.append(clock[2::2][:runs])
            stages.append(stage_s[:runs])
            energies.append(energy_j[:runs])
            ran += runs
            # the last step stop was asked at: the one it or the gates ended the run
            # before, else the last begun
            asked_s = start_s[runs] if runs < before else start_s[runs - 1] if runs \
                else asked_s
            if runs < ahead:
                break
            end_s = clock[-1]
        if stop is not None and asked_s is not None:  # its count where the steps leave it
            stop.missed(float(asked_s))
        if not ran:
            return it
        kv_used = self.kv.used + taken[:ran] if growing else np.full(ran, self.kv.used)
        if growing:
            self._grow_run(first, ran, growing, int(taken[ran - 1]))
        run = DecodeRun(n, np.concatenate(starts), np.concatenate(ends),
                        np.concatenate(energies), np.concatenate(stages) * ranks, kv_used)
        self._decoded_run(np.append(it.end_s, run.end_s[:-1]))
        if self.reserve is not None:  # each step's decodes, none retracting
            self.reserve.decayed(ran)
        if self.recv_interval > 1:  # each step's loop counts 1 at the receive gate, which
            # resets it at recv_interval (_receive; a plain step leaves the inbox empty)
            self._recv_count = (self._recv_count + ran) % self.recv_interval
        end_s = self.stage_free_s[0] = float(run.end_s[-1])
        record_run(run)
        return Iteration(it.batch, float(run.start_s[-1]), end_s, end_s,
                         float(run.energy_j[-1]), float(run.busy_chip_s[-1]), n, n)

    def _grow_run(self, first: int, ran: int, growing: list[tuple[int, Growing]],
                  taken: int) -> None:  # fmt: skip
        """The blocks of `ran` decode steps after step `first` granted at once, as decodes
        grants them a step at a time: each Growing due in those steps takes one per block
        of steps (`grown`), and is filed at its next due step after them, the groups of
        later steps before those of earlier ones (as a step's group joins the one filed
        block steps on behind it), after what was filed there before."""
        block, last = self.kv.block_tokens, first + ran
        for step in range(first + 1, last + 1):
            self._grow_at.pop(step, None)
        for step, group in reversed(growing):
            if step > last:
                continue
            grants = (last - step) // block + 1
            group.grown += grants
            self._refile(group, step + grants * block)
        self.kv.take(taken)

    def _decoded_run(self, ends_s: np.ndarray) -> None:
        """_decoded at each of the steps' ends, no member fresh (a run's first step has had
        its gaps): the gaps, the counts, the keys."""
        if self._measured:
            self.itl_s += (ends_s - np.append(self.last_decode_s, ends_s[:-1])).tolist()
            self.itl_count += [self._measured] * len(ends_s)
        self.steps += len(ends_s)
        self.context_sum += len(self.cohort) * self._gain * len(ends_s)
        self.last_decode_s = float(ends_s[-1])

    def finish(self, it: Iteration) -> list[Sequence]:
        """The iteration's tokens, at its end; returns the sequences whose last token it
        made, and on a prefill replica those whose prompt it completed (to hand on)."""
        self.busy = False
        now = it.end_s
        out = []
        if it.decodes:
            self._decoded(now)
            for s in self._finish_at.pop(self.steps, {}).values():
                self._leave(s)
                out.append(s)
        for s, n in it.batch.chunks:
            s.done += n
            if not s.decoding:
                continue
            if self.kv.shared_prefix and s.target >= self.kv.shared_prefix:
                self.kv.hold_prefix()
            self.prefilling.remove(s)
            if s.generated == 0:
                s.first_token_s = now
            elif s.id >= self.measured_from:  # a recompute's token, after its stall
                self._gap(now - s.last_token_s, 1)
            s.generated += 1
            s.last_token_s = now
            if s.generated >= s.gen or self.role == "prefill":
                out.append(s)
            else:
                self._join(s)
        self.load -= len(out)
        return out

    def _decoded(self, now: float) -> None:
        """One token for every cohort member: the gaps, the counts, the keys."""
        self.steps += 1
        fresh = [s for s in self._fresh if s.id >= self.measured_from]
        for s in fresh:
            self._gap(now - s.last_token_s, 1)
        if self._measured > len(fresh):
            self._gap(now - self.last_decode_s, self._measured - len(fresh))
        self._fresh = []
        self.context_sum += len(self.cohort) * self._gain
        self.last_decode_s = now

    def _gap(self, gap_s: float, count: int) -> None:
        self.itl_s.append(gap_s)
        self.itl_count.append(count)


def eager(step: StepTime, host_s: tuple[float, ...], static_w: float) -> StepTime:
    """A step the engine runs without a CUDA graph (engines.toml eager_prefill): the host
    launches each stage's kernels one by one, ahead of the device, so a stage takes the
    longer of its device time and the host's `host_s` to launch them. The work and its
    energy are the same; a stage waiting on the host draws its chips' `static_w` (the
    stage's chips together) for the wait, as an idle chip does: the wait is counted busy,
    so the run's idle energy (serving/metrics.py summarize) does not cover it."""
    stage_s = [max(s, h) for s, h in zip(step.stage_s, host_s, strict=True)]
    wait_s = sum(stage_s) - sum(step.stage_s)
    return StepTime(stage_s, step.send_s, step.energy_j + static_w * wait_s)


def _plus(step: StepTime, stage_s: list[float], energy_j: float) -> StepTime:
    """A step with more work on its stages."""
    return StepTime([a + b for a, b in zip(step.stage_s, stage_s, strict=True)], step.send_s,
                    step.energy_j + energy_j)  # fmt: skip
