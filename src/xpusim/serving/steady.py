"""Stopping an open-loop run once its scored statistics have settled (`--until steady`).

An open loop at a fixed rate (MLPerf Server's Poisson arrivals) is simulated for many
thousands of requests so that its mean and p99 TTFT and TPOT are those of the steady
state, not of one short stretch. How many are enough depends on the point: a lightly
loaded system settles in a few thousand, a nearly full one needs the whole run. This rule
measures it as the run goes, by the method of batch means (Law, "Simulation Modeling and
Analysis", 5th ed., sections 9.5.3 and 9.4.1, the relative-precision sequential procedure;
Schmeiser 1982, "Batch size effects in the analysis of simulation output", Oper. Res. 30(3),
for 10 to 30 batches): the measured requests whose results are all known (the arrival-order
prefix that has finished) are cut into BATCHES consecutive batches, each batch gives the
statistic, and the spread of the batch values gives a 95% confidence interval of the whole
prefix's value (Student's t with BATCHES - 1 degrees of freedom; for the p99 the batch
quantiles, as Heidelberger and Lewis 1984, "Quantile estimation in dependent sequences",
Oper. Res. 32(1), do). The run stops at the first check where, for each of mean TTFT, p99
TTFT, mean TPOT and p99 TPOT,

- the interval's half-width is within REL_WIDTH of the prefix's value, and
- the first and the second half of the batches agree within their own two-sample interval
  (a drift test: a system still filling, or past capacity with a growing queue, has TTFTs
  that rise from batch to batch, so its halves differ even where its spread is narrow).

The result is then the prefix's: its requests' statistics, and rates over the arrivals up to
its last request (metrics.summarize). At least MIN_MEASURED measured requests are always
simulated, so no batch is smaller than MIN_MEASURED / BATCHES requests.
"""

from __future__ import annotations

import math

import numpy as np

from xpusim.serving.schedulers import Sequence

BATCHES = 20  # Schmeiser 1982: 10-30 batches; 20 leaves 19 degrees of freedom
T_975 = {19: 2.093, 18: 2.101}  # Student's t, 97.5th percentile (two-sided 95%), by dof
REL_WIDTH = 0.03
"""A statistic's 95% half-width, as a share of it, at which the run may stop. 3% is within
the seed-to-seed spread of MLPerf Server points' TTFT and TPOT (1.5-6% across seeds 0-3,
docs/validation.md, "Where the full run's time goes"), so a stopped run is off the full one
by about what another seed moves it. Those runs themselves do not settle to it within
16,000 requests, so `validate` runs them to their end."""
MIN_MEASURED = 2000  # requests: 100 a batch, one above each batch's p99
CHECK_EVERY = 250  # finished requests between checks (a check is a few numpy passes)


class ArrivalPrefix:
    """The arrival-order prefix of an open loop's requests that have all finished (ids from
    `warmup` on are measured): what both early stops judge (Steady below, and
    serving/decision.py's Decision), so that a stopped run keeps the first arrivals, not the
    quickest requests. The simulator calls `finished` as each request ends and then
    `settled`, which a subclass defines; once it says so, `upto` is the number of requests
    (in arrival order) the result keeps."""

    def __init__(self, sequences: list[Sequence], warmup: int) -> None:
        self.sequences = sequences
        self.warmup = warmup
        arrivals = np.array([s.arrival_s for s in sequences])
        self._order = np.argsort(arrivals, kind="stable").tolist()
        self._done = [False] * len(sequences)
        self._prefix = 0  # requests, in arrival order, all finished
        self.upto = 0  # set once settled: requests kept

    def finished(self, s: Sequence) -> None:
        self._done[s.id] = True

    def settled(self) -> bool:
        raise NotImplementedError

    def _advance(self) -> range:
        """The arrival-order positions that joined the finished prefix since the last call."""
        start, order, done = self._prefix, self._order, self._done
        while self._prefix < len(order) and done[order[self._prefix]]:
            self._prefix += 1
        return range(start, self._prefix)


class Steady(ArrivalPrefix):
    """Says when an open loop's measured arrival-order prefix has settled (the module
    docstring's rule)."""

    def __init__(self, sequences: list[Sequence], warmup: int, rel_width: float = REL_WIDTH,
                 min_measured: int = MIN_MEASURED) -> None:  # fmt: skip
        super().__init__(sequences, warmup)
        self.rel_width = rel_width
        self.min_measured = max(min_measured, BATCHES * 2)
        self._checked = 0  # the prefix at the last check

    def settled(self) -> bool:
        """Whether the run may stop now (then `upto` is set)."""
        self._advance()
        order = self._order
        n = self._prefix - self.warmup
        if n < self.min_measured or self._prefix - self._checked < CHECK_EVERY \
                or self._prefix == len(order):  # fmt: skip
            return False
        self._checked = self._prefix
        seqs = [self.sequences[i] for i in order[self.warmup : self._prefix]]
        if _settled(seqs, self.rel_width):
            self.upto = self._prefix
            return True
        return False


def _settled(seqs: list[Sequence], rel_width: float) -> bool:
    """Mean and p99 TTFT and TPOT of the requests (arrival order) each within rel_width at
    95%, by batch means, with no drift between the batches' halves."""
    first = np.array([s.first_token_s for s in seqs])
    arrival = np.array([s.arrival_s for s in seqs])
    finish = np.array([s.finish_s for s in seqs])
    gen = np.array([s.gen for s in seqs])
    ttft = first - arrival
    several = gen > 1
    tpot = (finish - first)[several] / (gen[several] - 1)
    for values in (ttft, tpot):
        if len(values) < 2 * BATCHES:
            return False
        batches = np.array_split(values, BATCHES)
        for stat in (np.mean, p99):
            if not _narrow(np.array([stat(b) for b in batches]), float(stat(values)), rel_width):
                return False
    return True


def p99(values: np.ndarray) -> float:
    """The 99th percentile (numpy's linear interpolation), a batch's or a run's."""
    return float(np.percentile(values, 99))


def _narrow(batch: np.ndarray, whole: float, rel_width: float) -> bool:
    """The batch values' 95% interval within rel_width of `whole`, and their two halves
    alike (Welch's two-sample interval, its degrees of freedom taken as the pooled test's)."""
    if not math.isfinite(whole) or whole <= 0:
        return False
    k = len(batch)
    half = T_975[k - 1] * float(np.std(batch, ddof=1)) / math.sqrt(k)
    if half > rel_width * whole:
        return False
    a, b = batch[: k // 2], batch[k // 2 :]
    drift = abs(float(a.mean() - b.mean()))
    spread = math.sqrt(float(np.var(a, ddof=1)) / len(a) + float(np.var(b, ddof=1)) / len(b))
    return drift <= T_975[k - 2] * spread
