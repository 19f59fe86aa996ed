"""The decision: for each chip, the configuration that serves the load within both
objectives for the fewest dollars per million tokens delivered within them (goodput), and
why every other lost.

A configuration meets the objectives when its simulated p99 TTFT and p99 TPOT are within
them (as `serve --find` judges); its cost counts only the tokens of requests that met both
(`serve`'s slo_met share of its output tokens/s; in an open loop, of the offered rate's
tokens, so that a configuration within both objectives for every request costs exactly its
bound and ends the search). Configurations are costed cheaply first
(bounds.py) and simulated in order of the least they could cost; the search stops at the
first whose bound is no cheaper than the best simulated (branch and bound), and answers at
once when no configuration's unloaded latencies are within the objectives.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from xpusim.errors import UserError
from xpusim.memo import in_scope
from xpusim.planning.bounds import (
    SECONDS_PER_HOUR,
    Bound,
    batches,
    bound,
    run_key,
    run_options,
)
from xpusim.planning.sides import front, side_batches, side_keys
from xpusim.planning.space import (
    KINDS,
    TOKEN_BUDGETS,
    Config,
    Knobs,
    Layout,
    aggregated,
    chip_counts,
    disaggregated,
    max_batches,
    precisions,
    replica_plans,
    side_counts,
)

DEFAULT_REQUESTS = 300
"""Requests each simulation serves: 30 of warm-up and 270 measured, enough for a p99 of a
closed loop of tens of clients (serve's default is 500; the plan runs tens of them), or 8
per client of a larger closed loop, as serve's (serving/options.default_requests: else a
loop of hundreds of clients is simulated as its first burst alone)."""


@dataclass
class Outcome:
    """One configuration's fate in the search."""

    config: Config
    status: str  # chosen, dearer, slo, fit, refused, bound
    reason: str
    bound_usd_per_million: float | None
    simulated: bool = False
    ttft_p99_ms: float | None = None
    tpot_p99_ms: float | None = None
    slo_met: float | None = None
    output_tokens_per_s: float | None = None
    tokens_per_s_per_chip: float | None = None
    tokens_per_s_per_user: float | None = None
    usd_per_million: float | None = None  # every token
    usd_per_million_goodput: float | None = None  # tokens of requests within both SLOs
    bound_tpot_ms: float = math.inf  # the least its TPOT can be (bounds.py): ties' order

    @property
    def meets(self) -> bool:
        return self.status in ("chosen", "dearer")


@dataclass
class ChipPlan:
    chip: str
    engines: list[str]
    best: Outcome | None
    outcomes: list[Outcome]
    notes: list[str] = field(default_factory=list)


@dataclass
class PlanResult:
    """`xpusim.plan`'s answer: the best configuration overall and per chip, every
    configuration's outcome, and the search's counts."""

    model: str
    slo_ttft_ms: float
    slo_tpot_ms: float
    load: dict[str, Any]
    best: Outcome | None
    chips: list[ChipPlan]
    binding: str  # when nothing meets the objectives: which one binds ("" otherwise)
    decisions: list[str]  # which of EP, attention DP and disaggregation won, and by how much
    costed: int  # configurations given a bound
    simulated: int  # configurations served in the discrete-event simulation
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return _finite(asdict(self))


def _finite(value: Any) -> Any:
    """JSON's values: an infinite or NaN float is no number (None)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


@in_scope  # its serves share their models' graphs and replicas' step tables (serving/run.py)
def plan(
    model: Any, chips: list[str], *, slo_ttft_ms: float | None = None,
    slo_tpot_ms: float | None = None,
    rate: float | None = None, concurrency: int | None = None, num_chips: int | None = None,
    max_chips: int | None = None, prompt: int = 1024, gen: int = 128,
    requests: int | None = None, price: Any = None, kinds: tuple[str, ...] = tuple(KINDS),
    exhaustive: bool = False, mtp_acceptance: float | None = None,
    mtp_draft_tokens: int = 1, trace: str | Path | None = None,
) -> PlanResult:  # fmt: skip
    """The cheapest configuration per chip and overall that serves `rate` requests/s or
    `concurrency` clients of `prompt` + `gen` tokens (or replays `trace`'s first `requests`,
    serve's --trace) within p99 TTFT `slo_ttft_ms` and p99
    TPOT `slo_tpot_ms`, over `num_chips` chips (or each count up to `max_chips`).
    `exhaustive` simulates every configuration that fits (the pruned search's check).
    `mtp_acceptance` (with `mtp_draft_tokens`) searches speculative decoding with the
    model's own multi-token-prediction module as a knob, with and without: the probability a
    draft token is accepted, measured for the model (DeepSeek-V3's report: 85-90% for its
    second token)."""
    import xpusim.api as api
    from xpusim.cost.dollars import parse_price
    from xpusim.hardware.system import catalog_id
    from xpusim.serving.engines import engine as profile_named
    from xpusim.serving.options import Load, check_slo, default_requests
    from xpusim.workloads.transformer_config import TransformerConfig

    start = time.perf_counter()
    check_slo(slo_ttft_ms, "slo_ttft_ms")
    check_slo(slo_tpot_ms, "slo_tpot_ms")
    if requests is None:
        requests = default_requests(concurrency, DEFAULT_REQUESTS)
    if slo_ttft_ms is None or slo_tpot_ms is None:
        raise UserError("plan needs both objectives: --slo-ttft-ms and --slo-tpot-ms")
    Load(concurrency=concurrency, rate=rate, prompt=prompt, gen=gen, requests=requests,
         trace=None if trace is None else Path(trace))  # fmt: skip
    # what the bounds see: an open loop's rate and the tokens/s it offers
    shape, offered = (prompt, gen, rate), None if rate is None else rate * gen
    if trace is not None:
        shape, offered = _trace_bounds(Path(trace), requests)
    if (num_chips is None) == (max_chips is None):
        raise UserError("give one of --chips N (exactly N) and --max-chips N (up to N)")
    for name, value in (("chips", num_chips), ("max_chips", max_chips)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < 1):  # fmt: skip
            raise UserError(f"{name} must be a positive integer, got {value!r}")
    if not chips:
        raise UserError("give at least one --chip")
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise UserError(f"unknown plan kind {unknown[0]!r}; choose {', '.join(KINDS)}")
    cfg = api.model(model) if isinstance(model, str) else model
    if not isinstance(cfg, TransformerConfig) or cfg.encoder or cfg.ssm \
            or cfg.is_encoder_decoder:  # fmt: skip
        raise UserError("plan serves decoder-only transformer LLMs (as serve does)")
    mtps: list[tuple[int, float] | None] = [None]
    if mtp_acceptance is not None:
        if not cfg.mtp_layers:
            raise UserError(f"--mtp-acceptance: {cfg.name} has no multi-token-prediction "
                            "module to draft with")  # fmt: skip
        from xpusim.scenarios.decoding import resolve_decoding

        resolve_decoding(None, None, "mtp", mtp_draft_tokens, mtp_acceptance)  # its checks
        mtps.append((mtp_draft_tokens, mtp_acceptance))
    named = [catalog_id(c) or c for c in chips]  # `H100` is h100-sxm, in the table and prices
    targets = {c: api.target(c) for c in dict.fromkeys(named)}
    for chip_id, target in targets.items():
        if not hasattr(target, "peak_ops_per_s"):
            raise UserError(f"--chip {chip_id}: plan takes chips (it sizes their systems); "
                            "give the system's chip")  # fmt: skip
        parse_price(price, chip_id)

    from xpusim.planning.launch import carries, carries_plan, engines_for

    results: dict[tuple, Any] = {}  # `run` results by run_key, each job run once
    priced = {} if price is None else {"price": price}

    def run_all(keys: set[tuple]) -> None:
        """The `run` jobs not yet run, in one batched call."""
        todo = sorted(keys - results.keys(), key=repr)
        jobs = [(targets[k[0]], {**run_options(k, shape[0], shape[1]), **priced}) for k in todo]
        results.update(zip(todo, api.simulate_many(cfg, jobs), strict=True))

    def expand(chip_id: str, n: int, layouts: list[Layout], precision: str,
               engines: list[str], mtp_options: list[Any]) -> list[Config]:  # fmt: skip
        """The layouts with each engine whose flags carry their plans, and the knobs."""
        return [Config(chip_id, n, layout, precision, Knobs(e, mb, tb, mtp))
                for layout in layouts for e in engines
                if all(carries_plan(e, side) for side in layout.sides)
                for mb in max_batches(concurrency) for tb in TOKEN_BUDGETS
                for mtp in mtp_options if mtp is None or carries(e, "speculative_mtp")]  # fmt: skip

    counts = chip_counts(num_chips, max_chips)
    per_chip: dict[str, tuple[list[Config], list[str], list[str]]] = {}
    for chip_id, target in targets.items():
        names, notes = engines_for(target)
        configs = [] if "aggregated" not in kinds else [
            c for n in counts for p in precisions(target)
            for c in expand(chip_id, n, list(aggregated(cfg, n)), p, names or ["ideal"], mtps)]
        per_chip[chip_id] = (configs, names, notes)
    needed = {run_key(c.chip, plan, c.precision, c.knobs.mtp, b)
              for configs, _, _ in per_chip.values() for c in configs
              for plan, b in batches(c, concurrency, shape[2], shape[0])}  # fmt: skip
    if "disaggregated" in kinds:  # each side's plans, measured to keep each side's front
        at = side_batches(concurrency, shape[0])
        side_plans = {c: list(replica_plans(cfg, c))
                      for c in {c for n in counts for c in side_counts(n)}}  # fmt: skip
        all_sides = [plan for plans in side_plans.values() for plan in plans]
        for chip_id, target in targets.items():
            for p in precisions(target):
                for mtp in mtps:
                    needed |= side_keys(chip_id, all_sides, p, mtp, at)
    run_all(needed)
    if "disaggregated" in kinds:
        needed = set()
        for chip_id, target in targets.items():
            configs, names, _ = per_chip[chip_id]
            for p in precisions(target):
                for mtp in mtps:
                    prefill, decode = front(chip_id, all_sides, p, mtp, results, at,
                                            slo_ttft_ms / 1e3, slo_tpot_ms / 1e3)  # fmt: skip
                    for n in counts:
                        layouts = list(disaggregated(
                            {c: v for c, v in prefill.items() if c < n},
                            {c: v for c, v in decode.items() if c < n}, n))
                        made = expand(chip_id, n, layouts, p, names or ["ideal"], [mtp])
                        configs += made
                        needed |= {run_key(chip_id, plan, p, mtp, b) for c in made
                                   for plan, b in batches(c, concurrency, shape[2], shape[0])}
        run_all(needed)
    bounds: dict[Config, Bound] = {}
    for configs, _, _ in per_chip.values():
        for c in configs:
            got = {(plan, b): results[run_key(c.chip, plan, c.precision, c.knobs.mtp, b)]
                   for plan, b in batches(c, concurrency, shape[2], shape[0])}  # fmt: skip
            error = next((r for r in got.values() if isinstance(r, UserError)), None)
            if error is not None:
                bounds[c] = Bound(False, str(error), math.inf, math.inf, 0.0, None)
                continue
            bounds[c] = bound(c, got, profile_named(c.knobs.engine), shape[0], shape[1],
                              concurrency, shape[2], offered)  # fmt: skip

    load: dict[str, Any] = {"concurrency": concurrency} if concurrency is not None else \
        {"rate": rate} if rate is not None else {"trace": str(trace)}  # fmt: skip
    load |= {"requests": requests} if trace is not None else \
        {"prompt": prompt, "gen": gen, "requests": requests}  # fmt: skip
    binding = _binding(list(bounds.values()), slo_ttft_ms, slo_tpot_ms)
    serve_options = {**load, "slo_ttft_ms": slo_ttft_ms, "slo_tpot_ms": slo_tpot_ms,
                     **({} if price is None else {"price": price})}  # fmt: skip
    if trace is not None:
        serve_options["trace"] = Path(trace)
    plans, simulated = [], 0
    for chip_id, (configs, names, notes) in per_chip.items():
        if not names:
            notes = [*notes, "no engine in planning/launch.toml runs this chip: simulated "
                     "with no host time (engine 'ideal')"]  # fmt: skip
        if binding:
            outcomes = [o for c in configs
                        if (o := _unsimulated(c, bounds[c], slo_ttft_ms, slo_tpot_ms))]
            plans.append(ChipPlan(chip_id, names, None, outcomes, notes))
            continue
        outcomes = _search(cfg, targets[chip_id], configs, bounds, serve_options, offered,
                           slo_ttft_ms, slo_tpot_ms, exhaustive)  # fmt: skip
        simulated += sum(o.simulated for o in outcomes)
        met = [o for o in outcomes if o.meets]
        best = min(met, key=_rank) if met else None
        plans.append(ChipPlan(chip_id, names, best, outcomes, notes))
    bests = [p.best for p in plans if p.best is not None]
    best = min(bests, key=_rank) if bests else None
    for p in plans:
        for o in p.outcomes:
            if o.meets:
                o.status = "chosen" if o is best else "dearer"
                if o is not best and best is not None:
                    o.reason = (f"${o.usd_per_million_goodput:.3g}/M goodput tokens against "
                                f"${best.usd_per_million_goodput:.3g}")  # fmt: skip
    if best is None and not binding:
        binding = _binding_simulated([o for p in plans for o in p.outcomes])
    outcomes = [o for p in plans for o in p.outcomes if best and o.config.chip == best.config.chip]
    decisions = [] if best is None else [
        _decision(name, has, best, outcomes) for name, has in FEATURES.items()
        if len({has(o.config) for o in outcomes}) == 2]  # both sides searched
    return PlanResult(cfg.name, slo_ttft_ms, slo_tpot_ms, load, best, plans, binding,
                      decisions, len(bounds), simulated, time.perf_counter() - start)  # fmt: skip


FEATURES = {
    "EP": lambda c: any(side.ep > 1 for side in c.layout.sides),
    "attention DP": lambda c: any(side.dp_attention for side in c.layout.sides),
    "disaggregation": lambda c: c.layout.decode is not None,
    "MTP speculative decoding": lambda c: c.knobs.mtp is not None,
}
"""The choices a plan reports on: experts spread over the tp chips, attention data
parallelism, prefill and decode on their own replicas, and drafting with the model's own
multi-token-prediction module; EP and attention DP count on either side of a disaggregated
layout."""


def _decision(name: str, has: Any, best: Outcome, outcomes: list[Outcome]) -> str:
    """Whether the best configuration uses the choice, and the best of the other side on
    the same chip: its goodput cost where one met the objectives, else why none did (the
    least bound of those never simulated, or the count that missed or did not fit)."""
    won = has(best.config)
    side = [o for o in outcomes if has(o.config) != won]
    verdict = f"{name}: {'won' if won else 'lost'} ({_short(best)}"
    verdict += f" at ${best.usd_per_million_goodput:.3g}/M goodput"
    met = [o for o in side if o.meets]
    other = "with" if not won else "without"
    if met:
        o = min(met, key=_rank)
        cost = o.usd_per_million_goodput
        return verdict + f"; the best {other} it: {_short(o)} at ${cost:.3g}/M)"
    bounded = [o.bound_usd_per_million for o in side
               if o.status == "bound" and o.bound_usd_per_million is not None]
    why = Counter(WHY_SHORT[o.status] for o in side if o.status != "bound")
    reasons = [f"{n} {w}" for w, n in why.most_common()]
    if bounded and min(bounded) <= best.usd_per_million_goodput:
        reasons.append(f"{len(bounded)} could at best tie at ${min(bounded):.3g}/M, with a "
                       "slower steady-state TPOT")  # fmt: skip
    elif bounded:
        reasons.append(f"{len(bounded)} could cost no less than ${min(bounded):.3g}/M")
    return verdict + f"; {other} it: " + (", ".join(reasons) or "none") + ")"


def _short(o: Outcome) -> str:
    c = o.config
    return f"{c.chips}x {c.chip} {c.layout.label()} {c.precision}" + (" mtp" if c.knobs.mtp else "")


WHY_SHORT = {"slo": "missed an objective", "fit": "do not fit", "refused": "refused",
             "dearer": "dearer", "chosen": "chosen"}  # fmt: skip


def _trace_bounds(path: Path, requests: int) -> tuple[tuple[int, int, float | None], float | None]:
    """What the bounds see of a trace's first `requests`: its shortest prompt and output
    (no request is served faster unloaded than the shortest, nor does a step cost less than
    at the shortest context), its mean arrival rate, and the output tokens/s it offers."""
    from xpusim.serving.load import read_trace

    reqs = read_trace(path, requests)
    assert reqs.arrival_s is not None
    span = float(reqs.arrival_s[-1] - reqs.arrival_s[0])
    rate = (len(reqs) - 1) / span if span > 0 else None
    offered = None if rate is None else rate * float(reqs.gen.mean())
    return (int(reqs.prompt.min()), int(reqs.gen.min()), rate), offered


def _rank(o: Outcome) -> tuple[float, float, str]:
    """Cheapest per goodput token first. At equal costs (an open loop at one chip count and
    price, where every configuration that meets both objectives for every request delivers
    the offered tokens for the same dollars) the one of the least steady-state TPOT
    (bounds.py: known before simulating, so a tie ends the search), then the label, so that
    the pruned and the exhaustive search name the same one."""
    return (o.usd_per_million_goodput or math.inf, o.bound_tpot_ms, o.config.label())


def _order(c: Config, b: Bound) -> tuple[float, float, str]:
    """A configuration's least _rank: its cost bound for its cost."""
    lower = b.usd_per_million if b.usd_per_million is not None else math.inf
    return (lower, b.tpot_s * 1e3, c.label())


def _binding(bounds: list[Bound], ttft_ms: float, tpot_ms: float) -> str:
    """Which objective no configuration can meet even unloaded ("" when some might)."""
    fit = [b for b in bounds if b.fits]
    if not fit:
        return "memory: no configuration fits"
    if any(b.ttft_s * 1e3 <= ttft_ms and b.tpot_s * 1e3 <= tpot_ms for b in fit):
        return ""
    fastest_ttft = min(b.ttft_s for b in fit) * 1e3
    fastest_tpot = min(b.tpot_s for b in fit) * 1e3
    if fastest_ttft > ttft_ms:
        return f"TTFT: the fastest unloaded TTFT is {fastest_ttft:.3g} ms > {ttft_ms:g} ms"
    if fastest_tpot > tpot_ms:
        return (f"TPOT: the fastest TPOT (unloaded, or under an open loop's load) is "
                f"{fastest_tpot:.3g} ms > {tpot_ms:g} ms")  # fmt: skip
    return (f"both: no configuration is within {ttft_ms:g} ms TTFT and {tpot_ms:g} ms TPOT "
            "at once, even unloaded")  # fmt: skip


def _binding_simulated(outcomes: list[Outcome]) -> str:
    """Which objective the simulated configurations missed most often (keeping up with an
    open loop's arrivals counts as one)."""
    missed = [o.reason for o in outcomes if o.status == "slo"]
    if not missed:
        return "memory: no configuration fits under load"
    counts = {which: sum(mark in r for r in missed) for which, mark in
              (("TTFT", "TTFT"), ("TPOT", "TPOT"), ("the arrival rate", "keep up"))}  # fmt: skip
    which = max(counts, key=lambda k: counts[k])
    return (f"{which} under load: {counts[which]} of the {len(missed)} configurations "
            f"simulated miss it" + (" at p99" if which != "the arrival rate" else ""))


def _unsimulated(c: Config, b: Bound, ttft_ms: float, tpot_ms: float) -> Outcome | None:
    """A configuration judged by its bound alone: it does not fit, or misses an objective
    even unloaded (None when its bound leaves it in the running)."""
    if not b.fits:
        return Outcome(c, "fit", f"does not fit: {b.reason}", None)
    missed = []
    if b.ttft_s * 1e3 > ttft_ms:
        missed.append(f"TTFT unloaded {b.ttft_s * 1e3:.3g} ms > {ttft_ms:g} ms")
    if b.tpot_s * 1e3 > tpot_ms:
        missed.append(f"TPOT at least {b.tpot_s * 1e3:.3g} ms > {tpot_ms:g} ms")
    if not missed:
        return None
    return Outcome(c, "slo", "SLO missed: " + "; ".join(missed), b.usd_per_million)


def _search(
    cfg: Any, target: Any, configs: list[Config], bounds: dict[Config, Bound],
    options: dict[str, Any], offered: float | None, ttft_ms: float, tpot_ms: float,
    exhaustive: bool,
) -> list[Outcome]:  # fmt: skip
    """One chip's configurations, simulated cheapest bound first until no bound can beat the
    best found (every one that fits, when exhaustive)."""
    outcomes: list[Outcome] = []
    best: tuple[float, float, str] = (math.inf, math.inf, "")  # _rank's key of the best found
    for c in sorted(configs, key=lambda c: _order(c, bounds[c])):
        b = bounds[c]
        judged = _unsimulated(c, b, ttft_ms, tpot_ms)
        if judged is not None and (not b.fits or not exhaustive):
            outcomes.append(judged)
            continue
        lower = b.usd_per_million
        if not exhaustive and lower is not None and _order(c, b) > best:
            # its cost is at least its bound: no less than the best's, and a tie loses
            why = (f"can cost no less than ${lower:.3g}/M, not below the ${best[0]:.3g}/M found"
                   if lower > best[0] else f"could at best tie the ${lower:.3g}/M found, with "
                   f"a slower steady-state TPOT ({b.tpot_s * 1e3:.3g} ms against "
                   f"{best[1]:.3g})")  # fmt: skip
            outcomes.append(Outcome(c, "bound", why, lower, bound_tpot_ms=b.tpot_s * 1e3))
            continue
        o = _served(cfg, target, c, options, offered, ttft_ms, tpot_ms, lower)
        o.bound_tpot_ms = b.tpot_s * 1e3
        if o.meets:
            best = min(best, _rank(o))
        outcomes.append(o)
    return outcomes


def _served(
    cfg: Any, target: Any, c: Config, options: dict[str, Any], offered: float | None,
    ttft_ms: float, tpot_ms: float, lower: float | None,
) -> Outcome:  # fmt: skip
    """The configuration served in the discrete-event simulation."""
    import xpusim.api as api
    from xpusim.serving.capacity import BACKLOG

    try:
        r = api.serve(cfg, target, **options, **c.serve_options())
    except UserError as e:
        return Outcome(c, "refused", f"serve refused it: {e}", lower, simulated=True)
    if not r.fits:
        return Outcome(c, "fit", f"does not fit: {r.reason}", lower, simulated=True)
    ttft, tpot = r.ttft_s.p99 * 1e3, r.tpot_s.p99 * 1e3
    delivered = r.output_tokens_per_s
    if offered is not None:  # an open loop's, or a trace's
        # a queue that keeps up (checked below, as serve --find max-rate does) delivers
        # what it is offered in the long run; a measured window reads a little above or
        # below it. The offered tokens, of which the requests within both objectives count,
        # are the goodput (DistServe's SLO attainment at a rate).
        delivered = offered
    goodput = delivered * (r.slo_met or 0.0)
    usd_hour = None if r.cost is None else r.cost.usd_per_hour

    def per_million(tokens_per_s: float) -> float | None:  # of the tokens delivered, as goodput
        return usd_hour / (tokens_per_s * SECONDS_PER_HOUR) * 1e6 if usd_hour and tokens_per_s > 0 \
            else None  # fmt: skip

    o = Outcome(c, "chosen", "", lower, True, ttft, tpot, r.slo_met, r.output_tokens_per_s,
                r.tokens_per_s_per_chip, r.tokens_per_s_per_user, per_million(delivered),
                per_million(goodput))  # fmt: skip
    missed = []
    if offered is not None and r.queue_growth_per_s > BACKLOG * r.arrivals_per_s:
        missed.append(f"does not keep up: its queue grows {r.queue_growth_per_s:.3g} "
                      f"requests/s of {r.arrivals_per_s:.3g} arriving")  # fmt: skip
    if ttft > ttft_ms:
        missed.append(f"p99 TTFT {ttft:.4g} ms > {ttft_ms:g} ms")
    if tpot > tpot_ms:
        missed.append(f"p99 TPOT {tpot:.4g} ms > {tpot_ms:g} ms")
    if missed:
        o.status, o.reason = "slo", "SLO missed: " + "; ".join(missed)
    elif o.usd_per_million_goodput is None:
        o.status, o.reason = "refused", "no price known for this chip: give --price"
    return o
