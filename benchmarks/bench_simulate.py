"""How long one simulation takes inside Python, without process start-up.

    python benchmarks/bench_simulate.py            # all cases, median of repeated runs

Each case is timed as a whole `xpusim.simulate` call: graph building for prefill and two
decode steps, memory planning and the vectorized cost evaluation. Chip and model files are
loaded once before timing (they are cached in a session anyway). Every call builds its
graphs afresh: the simulator's memos last one call (xpusim/memo.py), so a call is as cold
as a new shape.
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
    # training steps with their plan searches (docs/training.md): batch = chips, capped
    *[("llama-2-70b", "h100-sxm", dict(mode="training", chips=n, batch=min(n, 1024),
                                        prompt=4096)) for n in (8, 64, 512, 4096)],
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
    print(f"{'model':<14} {'chip':<10} {'options':<72} {'median':>9}")
    for model_id, chip_id, options in CASES:
        median = statistics.median(time_case(model_id, chip_id, options))
        shown = " ".join(f"{k}={v}" for k, v in options.items())
        print(f"{model_id:<14} {chip_id:<10} {shown:<72} {median * 1e3:7.2f}ms")


if __name__ == "__main__":
    main()
