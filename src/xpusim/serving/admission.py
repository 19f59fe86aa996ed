"""SGLang's admission control: how much of the KV cache a new request may take, counting the
output tokens the running requests are still expected to write (engines.toml admit_reserve).

SGLang's PrefillAdder (python/sglang/srt/managers/schedule_policy.py, 0.4-0.5) opens each
prefill pass with a budget of the free tokens less, for every running request,
min(max_new_tokens - output so far, clip) x new_token_ratio, and charges each request it
admits its prompt and min(max_new_tokens, clip) in full. A request is admitted while its
prompt and clipped output fit what is left. new_token_ratio starts at ratio_init, falls by
(init - min) / decay_steps every decode step the cache holds (scheduler.py
update_running_batch), is set after a retraction (the cache ran out while decoding) to the
survivors' (output so far + retract_decode_steps each) / their max_new_tokens
(retract_decode), and returns to ratio_init whenever the engine has nothing to run
(self_check_during_idle).

Requests that ignore EOS under --disable-radix-cache (InferenceX's every SGLang launch, whose
client sends --ignore-eos) take add_one_req_ignore_eos instead: the prompt must fit the budget
above, and then the exact no-eviction check: with every running request's remaining output
known (its max_new_tokens, ratio 1), sorted shortest first, when the i-th finishes the
n - i still running have each grown by its remaining output, and the free tokens plus those
the finished ones gave back must exceed that (and one token each). So SGLang holds only as
many long-output requests as can all finish without a retraction.

serve's requests all run to their length (max_new_tokens is the request's output, EOS never
comes first), so under --no-radix-cache the exact check applies to every request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from xpusim.serving.engines import ReserveRule

if TYPE_CHECKING:
    from xpusim.serving.schedulers import Sequence

IGNORE_EOS_RESERVE_TOKENS = 1  # schedule_policy.py: kept free per running request


@dataclass
class Reserve:
    """One scheduler's new_token_ratio under its rule, and the admission arithmetic. The
    ratio is kept as where it was last set and the decode steps since, so that steps
    counted one at a time or many at once (Replica._skip) give the same figure."""

    rule: ReserveRule
    exact: bool = False  # requests ignore EOS and the radix cache is off: the exact check
    start: float = 0.0  # the ratio when last set (0: the rule's ratio_init)
    steps: int = 0  # decode steps since

    def __post_init__(self) -> None:
        self.start = self.start or self.rule.ratio_init

    @property
    def ratio(self) -> float:
        return float(self.after(0))

    def after(self, steps: int | np.ndarray) -> Any:
        """The ratio after `steps` more decode steps with no retraction."""
        return np.maximum(self.start - self.rule.decay * (self.steps + steps),
                          self.rule.ratio_min)

    def decayed(self, steps: int = 1) -> None:
        """After `steps` decode steps with no retraction."""
        self.steps += steps

    def idle(self) -> None:
        self.start, self.steps = self.rule.ratio_init, 0

    def retracted(self, outputs: list[int], gens: list[int]) -> None:
        """After a retraction: the surviving requests' outputs so far and lengths."""
        steps = self.rule.retract_decode_steps * len(outputs)
        self.start, self.steps = min(1.0, (sum(outputs) + steps) / (sum(gens) + 1)), 0

    def budget(self, free_tokens: int, outputs: np.ndarray, gens: np.ndarray) -> float:
        """rem_total_tokens as a pass opens: the free tokens less every running request's
        clipped remaining output at the ratio."""
        left = np.minimum(gens - outputs, self.rule.clip_tokens)
        return free_tokens - float(left.sum()) * self.ratio

    def charge(self, s: Sequence) -> int:
        """What admitting s takes from the pass's budget beyond its prompt's cache (which
        the caller takes): its clipped output, in full."""
        return min(max(s.gen - s.generated, 0), self.rule.clip_tokens)

    def fits(self, s: Sequence, prompt_tokens: int, free_tokens: int, rem_total: float,
             running: tuple[np.ndarray, np.ndarray, np.ndarray]) -> bool:  # fmt: skip
        """Whether s, needing `prompt_tokens` more of the cache, is admitted with
        `free_tokens` free and `rem_total` left of the pass's budget; `running`: every
        running request's (output so far, length, prompt) as arrays, those admitted
        earlier in the pass among them."""
        if not self.exact:  # add_one_req
            return prompt_tokens + self.charge(s) < rem_total
        if prompt_tokens > min(free_tokens, rem_total):  # add_one_req_ignore_eos
            return False
        outputs, gens, prompts = running
        left = np.append(gens - outputs, s.gen - s.generated)
        held = np.append(prompts + outputs, s.prompt + s.generated)
        keep = left > 0
        left, held = left[keep], held[keep]
        order = np.lexsort((held, left))  # shortest first, as reference_fits sorts them
        left, held = left[order], held[order]
        still = len(left) - np.arange(len(left))  # requests running when each finishes
        freed = np.concatenate(([0], np.cumsum(held)[:-1]))
        spare = free_tokens - prompt_tokens + freed - left * still
        return bool(np.all(spare > IGNORE_EOS_RESERVE_TOKENS * still))

    def first_fit(self, s: Sequence, prompt_tokens: int, free_tokens: int,
                  running: tuple[np.ndarray, np.ndarray, np.ndarray], block_tokens: int,
                  horizon: int) -> float:  # fmt: skip
        """For a stretch of decode steps in which no running request finishes or is
        retracted (Replica.cruise): after how many steps s may first be admitted (0: at
        once), within `horizon`; inf if not. `running`, `free_tokens`: as they stand when
        the scheduler next runs; each step every request writes a token, the ratio decays
        and the free tokens fall by at least a token a request once a block fills. The
        budget checked each step is an upper bound of what the scheduler will see, so no
        step that could admit is skipped. Of the exact check only its first test (the
        prompt within the budget) is asked: the rest is not monotonic in the steps (the
        running requests' remaining outputs pass the new one's), so from the first step
        that test passes the scheduler decides each step."""
        outputs, gens, _ = running
        clip, steps = self.rule.clip_tokens, np.arange(horizon)
        left = np.sort(gens - outputs)
        below = np.concatenate(([0], np.cumsum(left)))
        done = np.searchsorted(left, steps, side="right")  # none left to write
        full = np.searchsorted(left, steps + clip, side="left")  # clipped
        counted = (len(left) - full) * clip + below[full] - below[done] - steps * (full - done)
        free = free_tokens - len(left) * np.maximum(steps - block_tokens + 1, 0)
        rem = free - self.after(steps) * counted
        if self.exact:  # add_one_req_ignore_eos's first test, which its rest needs
            ok = (prompt_tokens <= free) & (prompt_tokens <= rem)
        else:
            ok = prompt_tokens + self.charge(s) < rem
        hits = np.flatnonzero(ok)
        return float(hits[0]) if hits.size else np.inf


@dataclass
class Pass:
    """One prefill pass's budget (PrefillAdder): what the running requests reserve, and
    what the requests it admitted charged beyond the prompts' cache (which the cache's free
    tokens already leave out, xpusim taking a prompt's blocks as it admits it)."""

    reserve: Reserve
    outputs: np.ndarray
    gens: np.ndarray
    prompts: np.ndarray
    offset: float = 0.0

    @classmethod
    def of(cls, reserve: Reserve, outputs: np.ndarray, gens: np.ndarray,
           prompts: np.ndarray) -> Pass:  # fmt: skip
        """A pass over the running requests, each one's output so far, length and prompt as
        int64 arrays in the same order (Replica.outputs)."""
        return cls(reserve, outputs, gens, prompts, -reserve.budget(0, outputs, gens))

    def fits(self, s: Sequence, prompt_tokens: int, free_tokens: int) -> bool:
        return self.reserve.fits(s, prompt_tokens, free_tokens, free_tokens - self.offset,
                                 (self.outputs, self.gens, self.prompts))  # fmt: skip

    def took(self, s: Sequence) -> None:
        """s admitted: it runs from here, its clipped output charged in full."""
        self.offset += self.reserve.charge(s)
        self.outputs = np.append(self.outputs, s.generated)
        self.gens = np.append(self.gens, s.gen)
        self.prompts = np.append(self.prompts, s.prompt)


def reference_fits(s: Sequence, prompt_tokens: int, free_tokens: int,
                   running: list[tuple[int, int, int]]) -> bool:  # fmt: skip
    """The exact check as schedule_policy.py loops it, request by request (a test holds
    Reserve.fits to it): `running` as (output so far, length, prompt) each."""
    states = sorted((g - o, p + o) for o, g, p in [*running, (s.generated, s.gen, s.prompt)]
                    if g - o > 0)  # fmt: skip
    cur, freed = free_tokens - prompt_tokens, 0
    for i, (left, held) in enumerate(states):
        bs = len(states) - i
        if cur + freed - left * bs <= IGNORE_EOS_RESERVE_TOKENS * bs:
            return False
        freed += held
    return True
