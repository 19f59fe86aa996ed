"""How long one simulation takes inside Python, without process start-up.

    python benchmarks/bench_simulate.py            # all cases, median of repeated runs

Each case is timed as a whole `xpusim.simulate` call: graph building for prefill and two
decode steps, memory planning and the vectorized cost evaluation. Chip and model files are
loaded once before timing (they are cached in a session anyway). "cold" clears the memo of
built graphs first (scenarios/rank_costs.py), as a new shape would; "warm" reuses them, as
a sweep over chips and what-if specs does. A training search builds its rank graphs afresh
on every call, so its two columns time the same thing.
"""

from __future__ import annotations

import statistics
import time

import xpusim
from xpusim.scenarios.rank_costs import _shape_graphs

CASES = [
    ("llama-2-7b", "h100-sxm", dict(batch=1, prompt=128, gen=128, precision="fp16")),
    ("llama-2-70b", "h100-sxm", dict(batch=1, prompt=128, gen=128, precision="fp16")),
    ("llama-2-70b", "h100-sxm", dict(batch=64, prompt=2048, gen=2048, precision="fp16")),
    ("mixtral-8x7b", "tpu-v4", dict(batch=8, prompt=512, gen=256, precision="bf16")),
    ("llama-2-70b", "dgx-h100", dict(batch=1, prompt=128, gen=128, precision="fp16", tp=8)),
    # a whole plan search: every feasible (tp, pp, dp) over 576 chips, costed
    ("llama-2-70b", "groq-lpu", dict(chips=576, precision="int8")),
    # training steps with their plan searches (docs/training.md): batch = chips, capped
    *[("llama-2-70b", "h100-sxm", dict(mode="training", chips=n, batch=min(n, 1024),
                                        prompt=4096)) for n in (8, 64, 512, 4096)],
]


def time_case(
    model_id: str, chip_id: str, options: dict, cold: bool, repeats: int = 5
) -> list[float]:
    model, chip = xpusim.model(model_id), xpusim.target(chip_id)
    xpusim.simulate(model, chip, **options)  # warm-up
    times = []
    for _ in range(repeats):
        if cold:
            _shape_graphs.cache_clear()
        start = time.perf_counter()
        xpusim.simulate(model, chip, **options)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    print(f"{'model':<14} {'chip':<10} {'options':<72} {'cold':>9} {'warm':>9}")
    for model_id, chip_id, options in CASES:
        cold, warm = (time_case(model_id, chip_id, options, c) for c in (True, False))
        shown = " ".join(f"{k}={v}" for k, v in options.items())
        medians = " ".join(f"{statistics.median(t) * 1e3:7.2f}ms" for t in (cold, warm))
        print(f"{model_id:<14} {chip_id:<10} {shown:<72} {medians}")


if __name__ == "__main__":
    main()
