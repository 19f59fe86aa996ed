"""`xpusim plan` timed: the issue #44 targets, a search over 4 chips for a 70B dense model and
for a DeepSeek-class MoE model (EP over the tp chips, attention DP and disaggregation
searched) each in under 30 s on two cores and an impossible objective in under 1 s, with the
counts of
configurations costed (bounded from `run`) and simulated (served in the discrete-event
simulation).

    python benchmarks/bench_plan.py            # every case
    python benchmarks/bench_plan.py --exhaustive   # also the unpruned search of the first

The zoo and numpy are loaded once before the clock starts (about 1 s a command pays on top).
"""

from __future__ import annotations

import argparse
import time

import xpusim

FOUR = ["h200-sxm", "b200", "mi355x", "tpu-v6e"]
CASES = {
    "70B, 4 chips, 8 each, 50 users": dict(
        model="llama-3.1-70b", chips=FOUR, num_chips=8, concurrency=50, prompt=1024, gen=256,
        slo_ttft_ms=1000, slo_tpot_ms=50),
    "70B, 3 chips (issue's done-when)": dict(
        model="llama-3.1-70b", chips=["h100-sxm", "mi300x", "tpu-v6e"], num_chips=8,
        concurrency=50, prompt=1024, gen=256, slo_ttft_ms=1000, slo_tpot_ms=50),
    "70B, 4 chips, up to 8, 5 req/s": dict(
        model="llama-3.1-70b", chips=FOUR, max_chips=8, rate=5.0, prompt=1024, gen=256,
        slo_ttft_ms=1000, slo_tpot_ms=50),
    "DeepSeek-R1, 4 chips, up to 16, 10 req/s": dict(
        model="deepseek-r1", chips=FOUR, max_chips=16, rate=10.0, prompt=1024, gen=256,
        slo_ttft_ms=2000, slo_tpot_ms=100),
    "DeepSeek-R1, as above, MTP searched": dict(
        model="deepseek-r1", chips=FOUR, max_chips=16, rate=10.0, prompt=1024, gen=256,
        slo_ttft_ms=2000, slo_tpot_ms=100, mtp_acceptance=0.85),
    "DeepSeek-R1, 4 chips, 16 each, 10 req/s": dict(
        model="deepseek-r1", chips=FOUR, num_chips=16, rate=10.0, prompt=1024, gen=256,
        slo_ttft_ms=2000, slo_tpot_ms=100),
    "impossible: TTFT 10 ms": dict(
        model="llama-3.1-70b", chips=FOUR, num_chips=8, concurrency=50, prompt=1024, gen=256,
        slo_ttft_ms=10, slo_tpot_ms=50),
}  # fmt: skip


def run(label: str, exhaustive: bool = False, **case) -> None:
    started = time.perf_counter()
    r = xpusim.plan(case.pop("model"), case.pop("chips"), exhaustive=exhaustive, **case)
    wall = time.perf_counter() - started
    best = r.best.config.label() if r.best else f"none ({r.binding})"
    cost = f" ${r.best.usd_per_million_goodput:.3g}/M" if r.best else ""
    print(f"{label:40s} {wall:6.2f} s  costed {r.costed:5d}  simulated {r.simulated:4d}  "
          f"{best}{cost}")
    for decision in r.decisions:
        print(f"{'':40s} {decision}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exhaustive", action="store_true")
    args = parser.parse_args()
    for model in ("llama-3.1-70b", "deepseek-r1"):  # the zoo and numpy: before the clock
        xpusim.model(model)
    for label, case in CASES.items():
        run(label, **dict(case))
    if args.exhaustive:
        label, case = next(iter(CASES.items()))
        run(f"{label} (exhaustive)", exhaustive=True, **dict(case))


if __name__ == "__main__":
    main()
