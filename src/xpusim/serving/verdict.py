"""Stopping a capacity trial once it must fail its SLOs, whatever its remaining requests do.

A max-rate search (serving/capacity.py) runs open-loop trials at rates around the answer,
and about half of them fail. Only a passing trial's figures become the answer; a failing
one says "fail" and nothing else is read from it but its row in the trial log. Its p99
TTFT (numpy's linear percentile over the measured requests, metrics.summarize) is at least
the sorted value at rank floor(0.99 (N - 1)), so once N minus that rank of the measured
requests are known to take longer than the SLO, the p99 is over it: a request is known late
when its first token came more than the SLO after its arrival, or when that long has passed
with none. TPOT likewise, from the requests that finished. The trial can stop there with
the answer unchanged; it is shorter by the part of the run after the queue passed the SLO,
which is most of an overloaded trial's iterations.

One more request than the rank requires is counted (FAIL_MARGIN), and a request is late only
by more than LATE_TOLERANCE of the SLO, so that no rounding in numpy's interpolation can
turn a stopped trial into one that would have passed.
"""

from __future__ import annotations

import math

import numpy as np

from xpusim.serving.schedulers import Sequence

P99 = 0.99  # the quantile the SLOs hold (capacity.meets); metrics.Percentiles reports it
FAIL_MARGIN = 1  # requests counted beyond the rank that decides the p99
LATE_TOLERANCE = 1e-9  # of the SLO: a request this close to it is not counted late


class Verdict:
    """Counts the measured requests (ids from `warmup` on) of one open-loop run that are
    certain to miss the TTFT or TPOT objective (seconds; None: none), and says when enough
    are that the run's p99 must miss it."""

    def __init__(self, sequences: list[Sequence], warmup: int, slo_ttft_s: float | None,
                 slo_tpot_s: float | None) -> None:  # fmt: skip
        self.sequences = sequences
        self.warmup = warmup
        self.ttft_s = None if slo_ttft_s is None else slo_ttft_s * (1 + LATE_TOLERANCE)
        self.tpot_s = None if slo_tpot_s is None else slo_tpot_s * (1 + LATE_TOLERANCE)
        measured = sequences[warmup:]
        self.need_ttft = _need(len(measured))
        self.need_tpot = _need(sum(1 for s in measured if s.gen > 1))
        arrivals = np.array([s.arrival_s for s in measured])
        self._by_arrival = (np.argsort(arrivals, kind="stable") + warmup).tolist()
        self._next = 0  # of _by_arrival: the first not yet looked at
        self._late_first: set[int] = set()  # ids known late to their first token
        self.late_tpot = 0
        self.reason = ""

    def finished(self, s: Sequence) -> None:
        """A request's last token: its TTFT and TPOT are known."""
        if s.id < self.warmup:
            return
        if self.ttft_s is not None and s.first_token_s - s.arrival_s > self.ttft_s:
            self._late_first.add(s.id)
        if self.tpot_s is not None and s.gen > 1 \
                and (s.finish_s - s.first_token_s) / (s.gen - 1) > self.tpot_s:
            self.late_tpot += 1

    def missed(self, now_s: float) -> str:
        """Why the run must miss an objective ("" while it may still meet them), counting
        the requests that have waited past the TTFT objective for their first token."""
        if self.ttft_s is not None:
            order, seqs = self._by_arrival, self.sequences
            while self._next < len(order):
                s = seqs[order[self._next]]
                if now_s - s.arrival_s <= self.ttft_s:
                    break
                if math.isnan(s.first_token_s):  # waited past the objective, none yet
                    self._late_first.add(s.id)
                self._next += 1
            if len(self._late_first) >= self.need_ttft:
                self.reason = (f"p99 TTFT over the objective: {len(self._late_first)} of "
                               f"{len(seqs) - self.warmup} measured requests late")
        if not self.reason and self.tpot_s is not None and self.late_tpot >= self.need_tpot:
            self.reason = (f"p99 TPOT over the objective: {self.late_tpot} measured requests "
                           "over it")
        return self.reason

    def first_missed(self, times_s: np.ndarray) -> int:
        """The index of the first of `times_s` (ascending) at which missed would say the run
        must miss, were no first token and no finish to come before them (a skip of decode
        steps, Replica._skip: none does), len(times_s) if at none; it changes nothing (the
        caller's missed at the last time it asks brings the count there). Then only waiting
        makes a request late: the one that decides is the request without a first token, in
        arrival order from the first not yet looked at, that is the last the objective needs
        (missed's comparison, on every time at once)."""
        if self.reason or (self.tpot_s is not None and self.late_tpot >= self.need_tpot):
            return 0
        if self.ttft_s is None:
            return len(times_s)
        more = self.need_ttft - len(self._late_first)
        if more <= 0:
            return 0
        seqs = self.sequences
        for i in self._by_arrival[self._next:]:
            if math.isnan(seqs[i].first_token_s):
                more -= 1
                if not more:
                    late = times_s - seqs[i].arrival_s > self.ttft_s
                    return int(late.argmax()) if late.any() else len(times_s)
        return len(times_s)


def _need(n: int) -> int:
    """Values above a bound that put the linear P99 of n values above it: those from the
    rank floor(P99 (n - 1)) up, and FAIL_MARGIN more; more than n where n is 0."""
    return n - math.floor(P99 * (n - 1)) + FAIL_MARGIN if n else 1
