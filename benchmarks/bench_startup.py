"""How long `xpusim --help`, `xpusim run`, `xpusim demo` and a small `xpusim serve` take from a
cold process, beside the floor their dependencies set.

    python benchmarks/bench_startup.py              # 7 rounds, each command once a round

The floor is a process that imports only the core dependencies a run needs (numpy, click,
rich's console and table, pydantic) and builds and validates one pydantic model: no
simulator can start faster than that with these dependencies. Each round runs every command
once, in turn, so that this machine's drifting speed touches them alike; the figures are the
best and the median of the rounds, and each command's median as a ratio to the floor's.
Targets (issue: shapes as arrays): `run` under 0.5 s, `demo` under 1 s. The serve reads its
kernel tables back from the disk cache (src/xpusim/disk_cache.py) that the untimed round
writes, as a user's second command does.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time

FLOOR = (
    "import numpy, click, rich.console, rich.table\n"
    "from pydantic import BaseModel\n"
    "class A(BaseModel):\n    x: int\n"
    "A(x=1)\n"
)
XPUSIM = shutil.which("xpusim") or "xpusim"
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "dependency floor": [sys.executable, "-c", FLOOR],
    "xpusim --help": [XPUSIM, "--help"],
    "xpusim run llama-2-7b --chip h100-sxm": [XPUSIM, "run", "llama-2-7b", "--chip", "h100-sxm"],
    "xpusim demo": [XPUSIM, "demo"],
    # a serve whose kernel tables come from the disk cache the untimed round writes
    "xpusim serve deepseek-r1, 1 client": [
        XPUSIM, "serve", "deepseek-ai/DeepSeek-R1", "--chip", "h200-sxm", "--chips", "8",
        "--tp", "8", "--precision", "fp8", "--engine", "sglang", "--concurrency", "1",
        "--requests", "2", "--prompt", "128", "--gen", "8"],
}


def main(rounds: int = 7) -> None:
    # As a user's install runs: with bytecode caches. An environment that sets
    # PYTHONDONTWRITEBYTECODE (this project's VMs do) would otherwise have every command
    # compile each module from source on every start (about 0.15 s for `run` under cProfile);
    # one untimed round writes the caches.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for argv in COMMANDS.values():
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env)
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(rounds):
        for name, argv in COMMANDS.items():
            start = time.perf_counter()
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env)
            times[name].append(time.perf_counter() - start)
    floor = statistics.median(times["dependency floor"])
    print(f"{'command':<40} {'best':>7} {'median':>7} {'/ floor':>8}")
    for name, found in times.items():
        median = statistics.median(found)
        print(f"{name:<40} {min(found):6.2f}s {median:6.2f}s {median / floor:7.2f}x")


if __name__ == "__main__":
    main()
