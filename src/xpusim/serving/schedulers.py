"""How an engine chooses each iteration's batch: the policies engines run, by name.

- static: a batch of up to max-batch waiting requests is prefilled together and decoded
  until its last sequence finishes; nothing joins it meanwhile (xpusim run's batch, and
  engines before Orca).
- continuous: iteration-level batching as vLLM's V0 scheduler runs it: waiting requests join
  whenever a slot and their whole prompt's KV blocks are free, in an iteration of prefills
  only (whole prompts, within the token budget), which pauses the decodes; otherwise every
  running sequence decodes one token.
- decode-first (alias chunked): chunked prefill as vLLM V1 schedules it (Sarathi-Serve):
  decodes first, then prompts in chunks of at most `chunk` tokens fill the rest of the
  token budget, so a long prompt never stalls the decodes for longer than one budget's
  worth of work.
- prefill-first: SGLang's and ATOM's: whenever a prompt can start or continue, a step of
  prompt chunks only (the one part-way first, then new requests in arrival order, within
  the chunked-prefill size), which pauses the decodes; otherwise every running sequence
  decodes. Short TTFT, decodes stalled by each prefill step. Under SGLang's attention data
  parallelism each rank schedules its own requests, so while fewer prompts prefill than
  there are ranks, the other ranks' decodes run in the same step (the cohort decodes as a
  whole: the prefilling ranks' few decodes are counted as running too). Where the engine
  reserves room for the running requests' outputs (SGLang's PrefillAdder,
  serving/admission.py), a new prompt starts only within what that leaves.
- inflight: TensorRT-LLM's in-flight batching with its defaults: decodes, then whole
  prompts beside them within max_num_tokens (context chunking off; a prompt longer than
  the budget runs alone, chunked), a request admitted only when the blocks of its whole
  length are free (the GUARANTEED_NO_EVICT capacity scheduler), so nothing is preempted.

Each engine profile (serving/engines.toml) names its policy; --scheduler overrides it.
Two engine gates hold new prompts back whatever the policy (Replica.admitting): vLLM V0's
multi-step scheduling (--decode-steps) and TensorRT-LLM's attention-DP balancer
(--adp-balance), serving/replica.py; TensorRT-LLM's batch waiting (--batch-wait) takes the
prompts back out of a step the scheduler chose (Replica._hold), as the engine does.

A scheduler sees the replica's queues and KV cache (serving/replica.py) and returns the
sequences to run: decodes, and prefill chunks with their sizes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from xpusim.errors import UserError, closest

if TYPE_CHECKING:
    from xpusim.serving.replica import Replica


@dataclass(eq=False, slots=True)
class Sequence:
    """A request inside the engine."""

    id: int
    arrival_s: float
    prompt: int
    gen: int
    target: int = 0  # tokens to prefill before decoding: the prompt, more after a preemption
    done: int = 0  # of target, prefilled (cached prefix included)
    generated: int = 0
    blocks: int = 0  # KV blocks it holds
    shared: int = 0  # tokens of a cached prefix it reads but does not hold
    busy: bool = False  # in an iteration in flight
    admitted_s: float = float("nan")  # when the first iteration running its prompt started
    first_token_s: float = float("nan")
    last_token_s: float = float("nan")
    finish_s: float = float("nan")
    preemptions: int = 0
    joined: int = 0  # the lane's decode count when it joined the decoding cohort
    base: int = 0  # its output then (replica.py: its output is base + decodes since)
    finishes_at: int = 0  # the lane's decode step that makes its last token
    growing: Any = None  # its replica.Growing while in a cohort (then blocks lag, see there)
    mark: int = 0  # that Growing's count of growths when it joined it

    def __post_init__(self) -> None:
        self.target = self.target or self.prompt

    @property
    def decoding(self) -> bool:
        return self.done >= self.target

    @property
    def context(self) -> int:
        """Keys a decode step attends: every token so far, the one it feeds included (its
        output count is current only outside a decoding cohort)."""
        return self.prompt + self.generated


@dataclass
class Batch:
    decode: bool = False  # the lane's decoding cohort runs a token each
    chunks: list[tuple[Sequence, int]] = field(default_factory=list)  # (sequence, tokens)

    def __bool__(self) -> bool:
        return self.decode or bool(self.chunks)


Scheduler = Callable[["Replica"], Batch]
SCHEDULERS: dict[str, Scheduler] = {}


def scheduler(name: str) -> Scheduler:
    found = SCHEDULERS.get(name)
    if found is None:
        raise UserError(f"unknown scheduler {name!r}{closest(name, SCHEDULERS)}")
    return found


def _register(name: str) -> Callable[[Scheduler], Scheduler]:
    def add(f: Scheduler) -> Scheduler:
        SCHEDULERS[name] = f
        return f

    return add


@_register("static")
def static(r: Replica) -> Batch:
    if r.cohort or r.prefilling:  # the batch runs to its end; its finished sequences have left
        return Batch(decode=r.decodes())
    batch = Batch()
    while r.waiting and r.admitting and len(batch.chunks) < r.max_batch:
        s = r.waiting[0]
        if not r.admit(s, s.prompt + s.gen):  # static batching reserves the whole length
            break
        r.waiting.popleft()
        batch.chunks.append((s, s.target - s.done))
    return batch


@_register("continuous")
def continuous(r: Replica) -> Batch:
    batch = Batch()
    budget = r.token_budget
    while r.waiting and r.running < r.max_batch:
        s = r.waiting[0]
        if s.decoding:  # prefilled elsewhere (disaggregation): it needs its blocks only
            if not r.admit(s, s.context):
                break
            r.waiting.popleft()
            continue
        q = s.target - r.cached(s)
        if not r.admitting or (q > budget and batch.chunks) or not r.admit(s, s.target):
            break
        r.waiting.popleft()
        batch.chunks.append((s, s.target - s.done))
        budget -= q
    if not batch.chunks:
        batch.decode = r.decodes()
    return batch


@_register("chunked")
@_register("decode-first")
def chunked(r: Replica) -> Batch:
    """Decodes first, then prefill chunks (ongoing prompts, then new requests in arrival
    order) within the token budget."""
    return _beside_decodes(r, whole=False)


@_register("inflight")
def inflight(r: Replica) -> Batch:
    """Decodes first, then whole prompts within the budget, each admitted with its whole
    length's blocks."""
    return _beside_decodes(r, whole=True)


def _beside_decodes(r: Replica, whole: bool) -> Batch:
    """The decodes, then prompt chunks in the budget they leave: chunks of any size, or
    (`whole`) whole prompts reserved to their last token."""
    batch = Batch(decode=r.decodes())
    budget = r.token_budget - (len(r.cohort) * r.per_decode if batch.decode else 0)
    for s in r.prefilling:  # prompts part-way through their chunks
        if budget <= 0:
            break
        q = min(s.target - s.done, budget, r.chunk)
        batch.chunks.append((s, q))
        budget -= q
    while r.waiting and r.running < r.max_batch:
        s = r.waiting[0]
        if s.decoding:  # prefilled elsewhere: it joins the decodes from the next iteration
            if not r.admit(s, s.context):
                break
            r.waiting.popleft()
            continue
        if budget <= 0 or not r.admitting:
            break
        if whole and s.target - r.cached(s) > budget and (batch.chunks or batch.decode):
            break  # it waits for a step with room for all of it
        if not r.admit(s, s.prompt + s.gen if whole else s.target):
            break
        r.waiting.popleft()
        q = min(s.target - s.done, budget, r.chunk)
        batch.chunks.append((s, q))
        budget -= q
    if not batch:  # only sequences prefilled elsewhere joined (a decode replica): they decode
        batch.decode = r.decodes()
    return batch


@_register("prefill-first")
def prefill_first(r: Replica) -> Batch:
    """A step of prompt chunks when a prompt can run (the part-way one first, then new
    ones), else the decodes. Under attention DP with each rank scheduling apart, the ranks
    with no prompt to prefill decode in the same step (SGLang's prepare_dp_attn_batch:
    each rank's own batch, decode or prefill, the experts over all of them); their blocks
    are taken before the prompts are admitted, as a decode-first step takes them."""
    early = r.decodes() if r.rank_schedulers > 1 else None  # before any prompt's blocks
    batch = Batch()
    budget = r.token_budget
    gate = r.admission() if r.waiting else None  # SGLang's PrefillAdder
    for s in r.prefilling:
        if budget <= 0:
            break
        q = min(s.target - s.done, budget, r.chunk)
        batch.chunks.append((s, q))
        budget -= q
    while r.waiting and r.running < r.max_batch and budget > 0:
        s = r.waiting[0]
        if s.decoding:  # prefilled elsewhere: it joins the decodes
            if not r.admit(s, s.context):
                break
            r.waiting.popleft()
            continue
        if not r.admitting or not r.fits(gate, s) or not r.admit(s, s.target):
            break
        if gate is not None:
            gate.took(s)
        r.waiting.popleft()
        q = min(s.target - s.done, budget, r.chunk)
        batch.chunks.append((s, q))
        budget -= q
    if len(batch.chunks) < r.rank_schedulers:  # no prompt, or a rank free of prompts: decodes
        batch.decode = r.decodes() if early is None else early
    return batch
