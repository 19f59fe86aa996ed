"""Instructions a simulation takes, counted by valgrind's callgrind, for this tree and
another version side by side.

    python benchmarks/bench_instructions.py                      # every case, this tree
    python benchmarks/bench_instructions.py --base c709014       # and that commit beside it
    python benchmarks/bench_instructions.py --case train-512 --base HEAD~3

Wall times on this project's 2-core VMs move by up to 2x between identical runs (the
figures in docs/sweeps.md and docs/training.md say so), which hides a change of 10-20%.
Instruction counts repeat for the same code and inputs, whatever else the machine does
(given a fixed hash seed and one BLAS thread: 225.8 M twice for a Groq plan search), so a
before/after comparison of a change is made with them; wall times, which are
what the issue targets name, are still measured by bench_simulate.py and bench_sweep.py.

Each case runs in a fresh process under callgrind twice: once to the point just before the
case (imports, model and chip loaded, a small warm-up simulation, memos cleared) and once
through it; the difference is the case's. Needs valgrind (Debian's `valgrind` package).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Each case: what runs once the process is warm. `grid` cases run a sweep in the process.
CASES = {
    "train-512": "simulate('llama-2-70b', 'h100-sxm', mode='training', chips=512, batch=512, "
                 "prompt=4096)",
    "train-4096": "simulate('llama-2-70b', 'h100-sxm', mode='training', chips=4096, "
                  "batch=1024, prompt=4096)",
    "search-groq": "simulate('llama-2-70b', 'groq-lpu', chips=576, precision='int8')",
    # bench_sweep.py's grids, cut to a share of their batch sizes (callgrind runs Python
    # some 30-50x slower): 120, 2,500 and 2,500 points
    "sweep-training": "grid('training', 0.34)",
    "sweep-shapes-1": "grid('shapes-1', 0.25)",
    "sweep-shapes-8": "grid('shapes-8', 0.25)",
}  # fmt: skip

SCRIPT = """
import sys, tempfile
from pathlib import Path
sys.path.insert(0, {benchmarks!r})
import xpusim

def simulate(model, chip, **options):
    xpusim.simulate(xpusim.model(model), xpusim.target(chip), **options)

def grid(name, scale):
    import bench_sweep
    from xpusim.explore.executor import InProcess
    from xpusim.explore.sweep import run
    g = bench_sweep.CASES[name].grid(scale)
    with tempfile.TemporaryDirectory() as out:
        run(g, Path(out), InProcess())

xpusim.simulate('llama-2-7b', 'h100-sxm', mode='training', chips=8, batch=8, prompt=256)
xpusim.simulate('llama-2-7b', 'h100-sxm', chips=8)
try:  # trees before memos were scoped to a call (xpusim/memo.py) kept them in the process
    from xpusim.scenarios.rank_costs import _shape_graphs
    from xpusim.scenarios import training_graphs
    _shape_graphs.cache_clear()
    training_graphs._RANKS._found.clear()
except (ImportError, AttributeError):
    pass
if sys.argv[1] == 'run':
    {case}
"""


def instructions(src: Path, case: str) -> int:
    """The case's instructions with the xpusim in `src` on the path: the run through it
    less the run that stops before it."""
    # a fixed hash seed (dict and set orders) and one BLAS thread (idle threads spin for as
    # long as the scheduler lets them), so that the count repeats from run to run
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONHASHSEED": "0",
           "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    counts = []
    for stage in ("before", "run"):
        with tempfile.TemporaryDirectory() as tmp:
            script = Path(tmp) / "case.py"
            script.write_text(SCRIPT.format(benchmarks=str(ROOT / "benchmarks"), case=case))
            done = subprocess.run(
                ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/out",
                 sys.executable, str(script), stage],
                capture_output=True, text=True, env=env,
            )  # fmt: skip
        found = re.search(r"Collected : (\d+)", done.stderr)
        if done.returncode or not found:
            raise SystemExit(f"{case}: the run failed: {done.stderr.strip().splitlines()[-1]}")
        counts.append(int(found.group(1)))
    return counts[1] - counts[0]


def exported(rev: str, into: Path) -> Path:
    """`rev`'s src/ folder, written under `into`."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"],
                             capture_output=True, check=True).stdout  # fmt: skip
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=sorted(CASES), nargs="*", default=list(CASES))
    parser.add_argument("--base", help="a git revision to count beside this tree")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed: apt-get install valgrind")
    with tempfile.TemporaryDirectory() as tmp:
        base = exported(args.base, Path(tmp)) if args.base else None
        for name in args.case:
            now = instructions(ROOT / "src", CASES[name])
            line = f"{name:<16} this tree {now / 1e6:9.1f} M instructions"
            if base is not None:
                then = instructions(base, CASES[name])
                line += f"; {args.base} {then / 1e6:9.1f} M ({now / then - 1:+.1%})"
            print(line, flush=True)


if __name__ == "__main__":
    main()
