"""`xpusim validate` timed in pieces: wall and CPU seconds of each, as a fresh process runs it.

    python benchmarks/bench_validate.py                        # every piece, one worker each
    python benchmarks/bench_validate.py --piece trtllm-h200    # some pieces
    python benchmarks/bench_validate.py --all --workers 2      # the full run, one process
    python benchmarks/bench_validate.py --groups --source mlcommons   # CPU s by load kind

The pieces split the published points by what costs: the serving sources (simulations of
thousands of requests, the max-rate searches the most) apart, and every other workload
(one analytical call a point) together. Their CPU seconds add up to the full run's on one
core; on a machine others share, CPU seconds are the figure to compare (wall time measures
the wait too). Each piece runs `xpusim validate --json` in its own process, so imports and
the catalog count, as they do for a user. `--groups` runs in this process instead: every
simulation group of the selected points (validation/score.py's groups: the points one run
answers) timed on its own, the CPU seconds summed by load kind (max-rate searches, offline
bursts, open loops, closed loops) with the costliest groups named, to say where the time goes.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

SERVING = ["--workload", "llm-serving"]
PIECES: dict[str, list[str]] = {
    "mlperf51-b200": [*SERVING, "--source", "inference_results_v5.1", "--chip", "b200"],
    "mlperf51-other": [*SERVING, "--source", "inference_results_v5.1", "--chip", "h200-sxm",
                       "--chip", "mi300x", "--chip", "mi325x", "--chip", "gb200"],
    "trtllm-h200": [*SERVING, "--source", "TensorRT-LLM", "--chip", "h200-sxm"],
    "trtllm-other": [*SERVING, "--source", "TensorRT-LLM", "--chip", "b200", "--chip",
                     "gb200", "--chip", "h100-sxm"],
    "mlperf41-h200": [*SERVING, "--source", "inference_results_v4.1", "--chip", "h200-sxm"],
    "mlperf41-other": [*SERVING, "--source", "inference_results_v4.1", "--chip", "h100-sxm",
                       "--chip", "mi300x"],
    "dsr1-h200": [*SERVING, "--source", "Deepseek-R1/raw_data", "--chip", "h200-sxm"],
    "dsr1-mi300x": [*SERVING, "--source", "Deepseek-R1/raw_data", "--chip", "mi300x"],
    "dstack-405b": [*SERVING, "--source", "dstackai/benchmarks (commit 9ece94363401)"],
    "nim": [*SERVING, "--source", "docs.nvidia.com/nim"],
    "tpu-recipes": [*SERVING, "--source", "tpu-recipes"],
    "ml-energy": [*SERVING, "--source", "ml-energy"],
    "not-serving": [f"--workload={w}" for w in (
        "llm-inference", "gemm", "cnn-inference", "llm-training", "encoder-inference",
        "training", "recsys-inference", "recsys-training")],
}  # fmt: skip
"""Disjoint filters whose union is every published point (a point outside them all is
reported: see `uncovered`)."""


def timed(args: list[str], workers: int) -> dict:
    """One `xpusim validate` process: its points, wall seconds, CPU seconds (user + system
    of it and its workers)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        done = subprocess.run(
            [sys.executable, "-m", "xpusim", "validate", "--json", "--workers", str(workers),
             "--out", out, *args], capture_output=True, text=True, env=os.environ,
        )  # fmt: skip
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode:
        return {"wall_s": wall, "cpu_s": cpu, "error": done.stderr.strip().splitlines()[-1:]}
    data = json.loads(done.stdout)
    return {"wall_s": wall, "cpu_s": cpu, "points": data["n_points"],
            "skipped": data["n_skipped"], "median_ape": data["median_ape"]}


def uncovered() -> int:
    """Published points that no piece's filter selects."""
    from xpusim.validation.points import load_points

    points = load_points()
    serving = [p for p in points if p.workload == "llm-serving"]
    sources = [a[a.index("--source") + 1].lower() for a in PIECES.values() if "--source" in a]
    return sum(1 for p in serving if not any(s in p.source.lower() for s in sources))


def by_kind(sources: list[str], chips: list[str], workloads: list[str], top: int) -> None:
    """CPU seconds of each simulation group, in this process, summed by load kind."""
    from xpusim.validation.points import load_points
    from xpusim.validation.score import _groups, _score_group, select

    points = select(load_points(), chips, sources, workloads)
    kinds: dict[str, list[float]] = {}
    costs = []
    for group in _groups(points):
        started = time.process_time()
        _score_group(group)
        cpu = time.process_time() - started
        head = group[0]
        kind = (head.get("load") or {}).get("kind", head.workload)
        kinds.setdefault(kind, []).append(cpu)
        costs.append((cpu, kind, head.id))
        print(f"  {cpu:7.2f}  {kind:12s} {head.id}", flush=True)
    print(f"{'kind':14s} {'groups':>7s} {'CPU s':>8s} {'share':>6s}")
    total = sum(c for c, _, _ in costs)
    for kind, cpus in sorted(kinds.items(), key=lambda k: -sum(k[1])):
        print(f"{kind:14s} {len(cpus):7d} {sum(cpus):8.1f} {sum(cpus) / total:6.1%}")
    print(f"{'total':14s} {len(costs):7d} {total:8.1f}")
    for cpu, kind, name in sorted(costs, reverse=True)[:top]:
        print(f"  costliest: {cpu:7.2f}  {kind:12s} {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--piece", action="append", choices=sorted(PIECES))
    parser.add_argument("--all", action="store_true", help="the full run, in one process")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--groups", action="store_true",
                        help="time each simulation group in this process, by load kind")
    for name in ("source", "chip", "workload"):
        parser.add_argument(f"--{name}", action="append", default=[],
                            help=f"with --groups: as validate's --{name}")
    args = parser.parse_args()
    if args.groups:
        by_kind(args.source, args.chip, args.workload, top=5)
        return
    if args.all:
        runs = {"all": []}
    else:
        runs = {name: PIECES[name] for name in (args.piece or PIECES)}
        if not args.piece and (missing := uncovered()):
            print(f"note: {missing} serving points are in no piece", flush=True)
    total_cpu = total_wall = 0.0
    print(f"{'piece':16s} {'points':>7s} {'wall s':>8s} {'CPU s':>8s}", flush=True)
    for name, filters in runs.items():
        got = timed(filters, args.workers)
        total_cpu, total_wall = total_cpu + got["cpu_s"], total_wall + got["wall_s"]
        points = got.get("points", "error")
        print(f"{name:16s} {points!s:>7s} {got['wall_s']:8.1f} {got['cpu_s']:8.1f}"
              + (f"  {got['error']}" if "error" in got else ""), flush=True)  # fmt: skip
    if len(runs) > 1:
        print(f"{'total':16s} {'':>7s} {total_wall:8.1f} {total_cpu:8.1f}")


if __name__ == "__main__":
    main()
