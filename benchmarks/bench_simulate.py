"""How long one simulation takes inside Python, without process start-up.

    python benchmarks/bench_simulate.py            # all cases, median of repeated runs

Each case is timed as a whole `xpusim.simulate` call: graph building for prefill and two
decode steps, memory planning and the vectorized cost evaluation. Chip and model files are
loaded once before timing (they are cached in a session anyway).
"""

from __future__ import annotations

import statistics
import time

import xpusim

CASES = [
    ("llama-2-7b", "h100-sxm", dict(batch=1, prompt=128, gen=128, precision="fp16")),
    ("llama-2-70b", "h100-sxm", dict(batch=1, prompt=128, gen=128, precision="fp16")),
    ("llama-2-70b", "h100-sxm", dict(batch=64, prompt=2048, gen=2048, precision="fp16")),
    ("mixtral-8x7b", "tpu-v4", dict(batch=8, prompt=512, gen=256, precision="bf16")),
    ("llama-2-70b", "dgx-h100", dict(batch=1, prompt=128, gen=128, precision="fp16", tp=8)),
    # a whole plan search: every feasible (tp, pp, dp) over 576 chips, costed
    ("llama-2-70b", "groq-lpu", dict(chips=576, precision="int8")),
]


def time_case(model_id: str, chip_id: str, options: dict, repeats: int = 5) -> list[float]:
    model, chip = xpusim.model(model_id), xpusim.target(chip_id)
    xpusim.simulate(model, chip, **options)  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        xpusim.simulate(model, chip, **options)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    print(f"{'model':<14} {'chip':<10} {'options':<56} {'median':>9} {'min':>9}")
    for model_id, chip_id, options in CASES:
        times = time_case(model_id, chip_id, options)
        shown = " ".join(f"{k}={v}" for k, v in options.items())
        print(f"{model_id:<14} {chip_id:<10} {shown:<56} "
              f"{statistics.median(times) * 1e3:7.2f}ms {min(times) * 1e3:7.2f}ms")  # fmt: skip


if __name__ == "__main__":
    main()
