"""One engine instance: a replica of the model's plan (tp x ep x pp chips), its queues, its
KV cache, and the iterations it runs.

An iteration's time is the step cost's (serving/step_cost.py) plus the engine's exposed host
time. With pp stages the replica keeps up to pp iterations in flight, on disjoint sequences,
each entering a stage when the iteration before it has left it (vLLM's virtual engines):
a token's trip crosses every stage, and the stages work on different batches meanwhile.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from xpusim.serving.engines import Engine
from xpusim.serving.kv_cache import KVCache
from xpusim.serving.schedulers import Batch, Scheduler, Sequence
from xpusim.serving.step_cost import StepCost, Work


@dataclass
class Iteration:
    batch: Batch
    start_s: float
    end_s: float
    stage0_free_s: float  # when the next iteration may enter the first stage
    energy_j: float
    busy_chip_s: float  # chip-seconds its stages kept busy


@dataclass(eq=False)
class Replica:
    index: int
    role: str  # "both", "prefill" or "decode" (disaggregation)
    cost: StepCost
    kv: KVCache
    schedule: Scheduler
    engine: Engine
    max_batch: int
    token_budget: int
    chunk: int
    waiting: deque[Sequence] = field(default_factory=deque)
    running: list[Sequence] = field(default_factory=list)
    in_flight: int = 0
    stage_free_s: list[float] = field(default_factory=list)
    preemptions: int = 0

    def __post_init__(self) -> None:
        self.stage_free_s = [0.0] * self.cost.stages

    @property
    def load(self) -> int:
        return len(self.waiting) + len(self.running)

    def cached(self, s: Sequence) -> int:
        return self.kv.cached_tokens(s.target) if s.done == 0 else s.done

    def admit(self, s: Sequence, tokens: int) -> bool:
        """Takes the blocks for `tokens` of a waiting sequence and moves it to running."""
        if s.done == 0:
            s.shared = s.done = self.kv.cached_tokens(s.target)
        need = self.kv.blocks_for(tokens, s.shared) - s.blocks
        if not self.kv.take(need):
            if s.done == s.shared:
                s.shared = s.done = 0  # not admitted: nothing was computed
            return False
        s.blocks += need
        self.running.append(s)
        return True

    def decodes(self) -> list[Sequence]:
        """The running sequences ready to decode, each with the blocks for its next token;
        when the cache runs out, the latest-admitted sequences are preempted (recompute)
        until the earlier ones fit, as vLLM does, the sequence itself last."""
        ready = []
        for s in list(self.running):
            if s.busy or not s.decoding:  # a preempted sequence is prefilling again
                continue
            while not self._grow(s):
                later = self.running[self.running.index(s) + 1:]
                victims = [v for v in later if not v.busy]
                self._preempt(victims[-1] if victims else s)
                if not victims:
                    break
            if s.decoding:
                ready.append(s)
        return ready

    def _grow(self, s: Sequence) -> bool:
        need = self.kv.blocks_for(s.context, s.shared) - s.blocks
        if need <= 0:
            return True
        if not self.kv.take(need):
            return False
        s.blocks += need
        return True

    def _preempt(self, s: Sequence) -> None:
        self.running.remove(s)
        self.kv.give(s.blocks)
        s.blocks = s.shared = s.done = 0
        s.target = s.prompt + s.generated  # recomputed: prompt and output so far
        s.preemptions += 1
        self.preemptions += 1
        self.waiting.appendleft(s)

    def free(self, s: Sequence) -> None:
        self.running.remove(s)
        self.kv.give(s.blocks)
        s.blocks = 0

    def start(self, now_s: float) -> Iteration | None:
        """Runs the scheduler's next batch from now, if there is one."""
        if self.in_flight >= self.cost.stages or self.stage_free_s[0] > now_s:
            return None
        batch = self.schedule(self)
        if not batch:
            return None
        decode_c = [s.context for s in batch.decodes]
        q = [n for _, n in batch.chunks]
        c = [s.done + n for s, n in batch.chunks]
        sampled = len(decode_c) + sum(1 for (s, n), k in zip(batch.chunks, c, strict=True)
                                      if k >= s.target)  # fmt: skip
        step = self.cost(Work.of(decode_c, q, c, sampled))
        stages = step.stage_s
        host_s = self.engine.exposed_s(len(decode_c) + len(q), step.trip_s)
        t = now_s + host_s
        stage0_free = now_s
        for i, stage_s in enumerate(stages.tolist()):
            begin = max(t, self.stage_free_s[i])
            t = self.stage_free_s[i] = begin + stage_s
            if i == 0:
                stage0_free = t
            if i + 1 < len(stages):
                t += step.send_s
        for s in batch.decodes:
            s.busy = True
        for s, _ in batch.chunks:
            s.busy = True
        self.in_flight += 1
        busy = float(stages.sum()) * self.cost.ranks
        return Iteration(batch, now_s, t, stage0_free, step.energy_j, busy)

    def finish(self, it: Iteration) -> list[Sequence]:
        """The iteration's tokens, at its end; returns the sequences whose prefill it
        completed (a prefill replica hands them on) or whose last token it made."""
        self.in_flight -= 1
        now = it.end_s
        out = []
        for s, n in it.batch.chunks:
            s.busy = False
            s.done += n
            if s.decoding:
                if self.kv.shared_prefix and s.target >= self.kv.shared_prefix:
                    self.kv.hold_prefix()
                self._token(s, now)
                out.append(s)
        for s in it.batch.decodes:
            s.busy = False
            self._token(s, now)
            if s.generated >= s.gen:
                out.append(s)
        return out

    @staticmethod
    def _token(s: Sequence, now_s: float) -> None:
        if s.generated == 0:
            s.first_token_s = now_s
        elif s.last_token_s == s.last_token_s:  # a token after a preemption's recompute too
            s.gaps_s.append(now_s - s.last_token_s)
        s.generated += 1
        s.last_token_s = now_s
