"""Serving simulations people run, timed on one core, beside the closed-form limit.

    python benchmarks/bench_serve.py              # every workload
    python benchmarks/bench_serve.py --profile    # also where the time goes

Workloads (Llama-3-70B on 8 H100s, vLLM's default limits, lengths spread ±50% around the
means so that no two iterations share a composition):
- `closed-64`: 10,000 requests from 64 clients in a closed loop (genai-perf's measurement),
  1,024 -> 256 tokens, continuous batching, and the same with chunked prefill.
- `open-rate`: 10,000 Poisson arrivals at 80% of the closed loop's throughput.
- `max-rate`: the highest rate within MLPerf's Llama 2 70B Server bounds (p99 TTFT 2 s,
  TPOT 200 ms), 2,000 requests per trial.

The closed-form limit beside each: what the steady state's answer would be by Little's law
from the simulated step times (throughput = sequences in flight / TPOT), so that the
simulation's figures are seen against the arithmetic a spreadsheet would do, and the time
the simulation took per iteration and per request.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

import xpusim

MODEL, CHIP, CHIPS = "llama-3-70b", "h100-sxm", 8
LENGTHS = dict(prompt=1024, gen=256, spread=0.5)


def timed(label: str, **options) -> object:
    started = time.perf_counter()
    result = xpusim.serve(MODEL, CHIP, chips=CHIPS, **LENGTHS, **options)
    wall = time.perf_counter() - started
    line = f"{label:28s} {wall:6.2f} s"
    if result.search is None:
        flight = result.mean_in_system
        limit = flight * result.gen_mean / result.e2e_s.mean if result.e2e_s else 0.0
        line += (f"  {result.requests / wall:8.0f} requests/s simulated; {result.replicas} x "
                 f"{result.plan}; TTFT p50 {result.ttft_s.p50 * 1e3:.0f} ms, TPOT mean "
                 f"{result.tpot_s.mean * 1e3:.1f} ms, {result.output_tokens_per_s:.0f} tok/s "
                 f"(Little's law: {limit:.0f}, ratio {result.output_tokens_per_s / limit:.3f})")
    else:
        trials = len(result.search["trials"])
        line += (f"  rate {result.search['rate']:.2f}/s after {trials} trials; p99 TTFT "
                 f"{result.ttft_s.p99:.2f} s, TPOT {result.tpot_s.p99 * 1e3:.0f} ms")
    print(line, flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    xpusim.serve(MODEL, CHIP, chips=CHIPS, concurrency=4, requests=8)  # imports, catalog
    closed = timed("closed-64 continuous", concurrency=64, requests=10_000)
    timed("closed-64 chunked", concurrency=64, requests=10_000, scheduler="chunked")
    timed("open-rate (80% of closed)", rate=0.8 * closed.requests_per_s, requests=10_000)
    timed("max-rate (MLPerf bounds)", find="max-rate", slo_ttft_ms=2000, slo_tpot_ms=200,
          requests=2000)
    if args.profile:
        profile = cProfile.Profile()
        profile.enable()
        xpusim.serve(MODEL, CHIP, chips=CHIPS, concurrency=64, requests=10_000, **LENGTHS)
        profile.disable()
        pstats.Stats(profile).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
