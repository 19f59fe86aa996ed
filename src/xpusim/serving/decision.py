"""Deciding a max-rate trial before its end, pass or fail, once the answer is clear.

A max-rate search (serving/capacity.py) asks of each open-loop trial one thing: do its p99
TTFT and p99 TPOT meet the objectives, with the queue kept up with. A trial far below the
answer meets them by a wide margin long before its last request; only trials near the answer
need the whole run. This rule decides a trial as it goes, by the method of batch means of
serving/steady.py (Law, "Simulation Modeling and Analysis", 5th ed., 9.5.3; Schmeiser 1982
for 10 to 30 batches; Heidelberger and Lewis 1984 for batch quantiles): the measured requests
whose figure is known, in arrival order (TTFT: those with a first token; TPOT: those
finished), are cut into BATCHES batches, each giving its own p99.

Unlike steady.py it does not ask the trial to be stationary: near capacity a trial's TTFTs
rise for its whole run (the batch still growing, the queue a random walk), and the full run
is judged at its end. What decides is where each p99 will be by the trial's last arrival:

- the batch p99s are fitted against their arrival time by least squares, and the fit's 95%
  prediction interval for a batch at the last arrival time bounds the local p99 then
  (Montgomery and Runger, "Applied Statistics and Probability for Engineers", 11-5);
- a p99 over a mix of batches is at most the largest batch's and at least the smallest's
  (each batch's share below a bound is at least 99% when every batch's p99 is under it), so
  when both the whole prefix's p99 (its batch-means interval) and the projected local p99
  are under the objective, with the fit a line, every remaining batch's is too: the trial
  passes; both over it, it fails.
- A pass also needs the queue kept up with: the mean TTFT's slope (seconds of wait per
  second), at its 95% upper bound, under `backlog` (capacity.BACKLOG: a queue growing by
  that share of the arrivals adds that many seconds of wait per second).

The line is the assumption: a queue that blows up late (a run that passes for most of its
length and fails in its last tenth) is convex, and the line under-predicts it; the
prediction interval widens with the distance to the last arrival, which is why only trials
well clear of the objectives stop early (docs/validation.md, "Max-rate trials decided
early", has the trials it decided and the full runs' outcomes).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from xpusim.serving.schedulers import Sequence
from xpusim.serving.steady import BATCHES, MIN_MEASURED, T_975, ArrivalPrefix, p99

CHECKS = 40  # checks over a trial at most (each a few numpy passes over the prefix)
CHECK_EVERY = 250  # requests, at least, between checks (steady.CHECK_EVERY's spacing)


class RowBuffer:
    """(arrival, value) rows appended one at a time as a run goes, read as one array (k, 2)
    at each check: the array is filled with the rows added since the last read, where
    `np.array(rows)` over the whole list at every check (the plain form, `reference`) was
    17% of a max-rate search's CPU (MLPerf v5.1 Llama-2-70B Server on 8 B200, sampled; up
    to CHECKS checks a trial, each over every row so far). The array is a C-contiguous view
    of floats, equal to the plain form's element for element and stride for stride, so
    every statistic read off it is the same bit for bit (tests/test_decision.py)."""

    def __init__(self, capacity: int) -> None:
        self.rows: list[tuple[float, float]] = []
        self._array = np.empty((capacity, 2))
        self._filled = 0  # rows copied into _array

    def append(self, row: tuple[float, float]) -> None:
        self.rows.append(row)

    def __len__(self) -> int:
        return len(self.rows)

    def array(self) -> np.ndarray:
        k = len(self.rows)
        if k > self._filled:
            self._array[self._filled : k] = self.rows[self._filled : k]
            self._filled = k
        return self._array[:k]

    def reference(self) -> np.ndarray:
        return np.array(self.rows)


class Decision(ArrivalPrefix):
    """Follows one open-loop trial (objectives in seconds, None: none) and says when its
    outcome is settled; then `outcome` is "pass" or "fail", `upto` the requests (in arrival
    order) whose results are all known, and `reason` why."""

    def __init__(self, sequences: list[Sequence], warmup: int, slo_ttft_s: float | None,
                 slo_tpot_s: float | None, backlog: float) -> None:  # fmt: skip
        super().__init__(sequences, warmup)
        self.slo = (slo_ttft_s, slo_tpot_s)
        self.backlog = backlog
        self.last_arrival_s = max((s.arrival_s for s in sequences), default=0.0)
        self._first = 0  # arrival-order prefix with first tokens known
        self._filed = 0  # of the finished prefix, positions whose TPOT rows are filed
        self._ttft = RowBuffer(len(sequences))  # (arrival, TTFT) of measured requests
        self._tpot = RowBuffer(len(sequences))  # (arrival, TPOT), finished, gen > 1
        self._every = max(CHECK_EVERY, (len(sequences) - warmup) // CHECKS)
        self._checked = 0
        self.outcome = ""
        self.reason = ""

    def settled(self) -> bool:
        """Whether the trial's outcome is settled (then `outcome`, `upto` and `reason`)."""
        self._advance()
        if not self._may_check():
            return False
        order, seqs, n = self._order, self.sequences, len(self._order)
        while self._first < n and not math.isnan(seqs[order[self._first]].first_token_s):
            if self._first >= self.warmup:
                s = seqs[order[self._first]]
                self._ttft.append((s.arrival_s, s.first_token_s - s.arrival_s))
            self._first += 1
        for i in range(self._filed, self._prefix):  # a TPOT counts once every request
            s = seqs[order[i]]  # before it has finished
            if i >= self.warmup and s.gen > 1:
                self._tpot.append((s.arrival_s, (s.finish_s - s.first_token_s) / (s.gen - 1)))
        self._filed = self._prefix
        known = min(len(self._ttft), self._prefix - self.warmup)
        if known < MIN_MEASURED or self._prefix == n or known - self._checked < self._every:
            return False
        self._checked = known
        self.outcome = self._decide()
        if self.outcome:
            self.upto = self._prefix
            self.reason = (f"{self.outcome}: p99s clear of the objectives at {known} of "
                           f"{n - self.warmup} measured requests")
        return bool(self.outcome)

    def _may_check(self) -> bool:
        """Whether a check may fall due: the measured requests known (`settled`'s count) are
        at most the finished prefix's past the warm-up, so while that bound is short of the
        next check, settled would only file rows and say no. The rows wait for the next
        call that may check, which files the same rows in the same order (a request's
        figures do not change once known): settled is asked at every instant with an end,
        and filing at each was 5% of a max-rate search's CPU (MLPerf v5.1 DeepSeek-R1
        Server on 8 B200). tests/test_decision.py holds every answer to settled's without it."""
        bound = self._prefix - self.warmup
        return bound >= MIN_MEASURED and bound - self._checked >= self._every

    def _decide(self) -> str:
        """The outcome so far: "fail" once either p99 is clearly over its objective, "pass"
        once every p99 is clearly under and the queue is kept up with (the module
        docstring), "" while neither."""
        passes = []
        for rows, slo in zip((self._ttft, self._tpot), self.slo, strict=True):
            if slo is None:
                continue
            if len(rows) < 2 * BATCHES:
                return ""
            clear = _clear(rows.array(), slo, self.last_arrival_s)
            if clear == "fail":
                return "fail"
            passes.append(clear == "pass")
        times, means = _batches(self._ttft.array(), np.mean)
        slope, width = _slope(times, means)
        if all(passes) and slope + width < self.backlog:
            return "pass"
        return ""


def _batches(rows: np.ndarray,
             stat: Callable[[np.ndarray], float]) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Each batch's mean arrival time and its statistic of the values (rows: arrival, value)."""
    parts = np.array_split(rows, BATCHES)
    return (np.array([p[:, 0].mean() for p in parts]),
            np.array([stat(p[:, 1]) for p in parts]))  # fmt: skip


def _clear(rows: np.ndarray, slo: float, last_arrival_s: float) -> str:
    """The trial's outcome on one objective: "pass" when the prefix's p99 and the local
    p99 projected to the last arrival are both under it at 95%, "fail" when both are over
    it, "" otherwise."""
    times, p99s = _batches(rows, p99)
    whole = p99(rows[:, 1])
    half = T_975[BATCHES - 1] * float(np.std(p99s, ddof=1)) / math.sqrt(BATCHES)
    at_end, spread = _projected(times, p99s, last_arrival_s)
    if whole - half > slo and at_end - spread > slo:
        return "fail"
    if whole + half < slo and at_end + spread < slo:
        return "pass"
    return ""


def _fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float, float]:
    """Least squares y = a + b x: (a, b, the residuals' standard deviation, Sxx)."""
    mean_x = float(x.mean())
    sxx = float(((x - mean_x) ** 2).sum())
    b = float(((x - mean_x) * (y - y.mean())).sum() / sxx) if sxx > 0 else 0.0
    a = float(y.mean()) - b * mean_x
    residual = y - (a + b * x)
    return a, b, math.sqrt(float((residual**2).sum()) / (len(x) - 2)), sxx


def _projected(x: np.ndarray, y: np.ndarray, at: float) -> tuple[float, float]:
    """The fitted line at `at`, and its 95% prediction half-width for one more batch there."""
    a, b, s, sxx = _fit(x, y)
    k = len(x)
    spread = s * math.sqrt(1 + 1 / k + ((at - x.mean()) ** 2 / sxx if sxx > 0 else math.inf))
    return a + b * at, T_975[k - 2] * spread


def _slope(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """The fitted slope and its 95% half-width."""
    _, b, s, sxx = _fit(x, y)
    return b, (T_975[len(x) - 2] * s / math.sqrt(sxx) if sxx > 0 else math.inf)
