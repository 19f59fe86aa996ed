"""The 10,000-point sweep of llama-2-70b that the sweep issue sets as a target, timed.

    python benchmarks/bench_sweep.py               # one core, all cores, the whole command, peers
    python benchmarks/bench_sweep.py --profile     # also where the one-core time goes
    python benchmarks/bench_sweep.py --scale 0.1   # a tenth of the batch sizes' grid, quicker

The grid: 5 chips x 10 batch sizes x 2 prompts x 2 generation lengths x 2 precisions x 5 chip
counts (each with its plan search) x 5 what-if HBM bandwidths = 10,000 points. It is timed
three ways: in this process on one core (points per second), as the `xpusim sweep` command
on every core (its `simulate_s` and the whole command's wall time, files and plots
included), and, for scale, genz-llm and llm-analysis (when installed: the `peers` extra) on
the grid's points they can express (one H100 or A100, no what-if), per point.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import xpusim
from xpusim.explore.executor import InProcess
from xpusim.explore.grid import split
from xpusim.explore.sweep import Grid, run
from xpusim.scenarios.rank_costs import _rank_graphs
from xpusim.validation.points import Point

MODEL = "llama-2-70b"
CHIPS = ("h100-sxm", "h200-sxm", "a100-sxm-80gb", "mi300x", "tpu-v4")
OPTIONS = {  # as typed on the command line
    "batch": "1,2,4,...,512",
    "prompt": "128,2048",
    "gen": "128,1024",
    "precision": "int8,bf16",
    "chips": "1,2,4,8,16",
}
SET = ("memory.dram.bandwidth_bytes_per_s", "2e12,3e12,...,6e12")
PEER_CHIPS = ("h100-sxm", "a100-sxm-80gb")
PEER_SAMPLE = 40  # points per peer: genz-llm takes ~55 ms each


def axes(scale: float) -> dict[str, tuple]:
    parsed = {name: tuple(split(text)) for name, text in OPTIONS.items()}
    batches = parsed["batch"]
    parsed["batch"] = batches[: max(1, round(len(batches) * scale))]
    return {k: tuple(int(v) if v.isdigit() else v for v in vs) for k, vs in parsed.items()}


def grid(scale: float) -> Grid:
    bandwidths = tuple(float(v) for v in split(SET[1]))
    return Grid(xpusim.model(MODEL), CHIPS, ((SET[0], bandwidths),), axes(scale))


def one_core(g: Grid, profile: bool) -> float:
    """Points per second in this process; the graph memo starts cold."""
    with tempfile.TemporaryDirectory() as out:
        profiler = cProfile.Profile() if profile else None
        if profiler:
            profiler.enable()
        result = run(g, Path(out), InProcess())
        if profiler:
            profiler.disable()
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
    n = len(result.rows)
    print(f"one core: {n} points in {result.simulate_s:.2f} s = {n / result.simulate_s:.0f} "
          f"points/s ({result.simulate_s / n * 1e3:.2f} ms/point)")  # fmt: skip
    return result.simulate_s / n


def all_cores(g: Grid) -> float:
    """The whole `xpusim sweep` command on every core: its simulate_s and wall time."""
    cmd = [str(Path(sys.executable).parent / "xpusim"), "sweep", MODEL, "--json"]
    cmd += [arg for chip in CHIPS for arg in ("--chip", chip)]
    cmd += [arg for k, vs in g.axes.items() for arg in (f"--{k}", ",".join(map(str, vs)))]
    cmd += ["--set", f"{SET[0]}={SET[1]}"]
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        done = subprocess.run([*cmd, "--out", out], capture_output=True, text=True, check=True)
        wall = time.perf_counter() - start
    summary = json.loads(done.stdout)
    n, simulate_s = summary["n_points"], summary["simulate_s"]
    print(f"all {summary['workers']} cores: {n} points simulated in {simulate_s:.2f} s = "
          f"{n / simulate_s:.0f} points/s; the whole command (start-up, files, plots) "
          f"{wall:.2f} s")  # fmt: skip
    return simulate_s / n


def peer_points(g: Grid) -> list[Point]:
    """The grid's points a peer can express: one GPU it describes, its own HBM, in int8."""
    found = []
    for chip in PEER_CHIPS:
        for batch in g.axes["batch"]:
            for prompt in g.axes["prompt"]:
                for gen in g.axes["gen"]:
                    for precision in ("int8",):  # 70B in 16 bits needs two GPUs
                        setup = dict(model=MODEL, chips=1, tp=1, batch=batch, prompt=prompt,
                                     gen=gen, precision=precision)  # fmt: skip
                        name = f"{chip}-{len(found)}"
                        found.append(Point(name, "llm-inference", chip, "tokens_per_s_per_chip",
                                           0.0, "grid", setup=setup))  # fmt: skip
    step = max(1, len(found) // PEER_SAMPLE)
    return found[::step][:PEER_SAMPLE]


def xpusim_on(points: list[Point], g: Grid) -> float:
    """xpusim's median time per point on the peers' sample, graphs built anew for each."""
    times = []
    for point in points:
        _rank_graphs.cache_clear()
        start = time.perf_counter()
        xpusim.simulate(g.workload, point.chip, **{k: v for k, v in point.setup.items()
                                                   if k not in ("model", "tp")})  # fmt: skip
        times.append(time.perf_counter() - start)
    median = statistics.median(times)
    print(f"xpusim on the peers' {len(points)} one-chip points: {median * 1e3:.2f} ms/point")
    return median


def peers(g: Grid, per_point: dict[str, float]) -> None:
    """Each installed peer's time per point on the expressible sample, against xpusim's."""
    sys.path.insert(0, str(Path(__file__).parent))
    from peers import PEERS, quiet

    points = peer_points(g)
    per_point = {**per_point, "on these points": xpusim_on(points, g)}
    for peer_type in PEERS:
        peer = peer_type()
        try:
            peer.load()
        except Exception as error:  # not installed, or broken: the others still run
            print(f"{peer.name}: not run ({type(error).__name__}: {error})")
            continue
        times = []
        for point in points:
            start = time.perf_counter()
            try:
                with quiet():
                    peer.predict(point, peer.settings[0])
            except Exception as error:
                print(f"{peer.name}: {point.id} failed: {error}")
                continue
            times.append(time.perf_counter() - start)
        if not times:
            continue
        median = statistics.median(times)
        ratios = ", ".join(f"{_relative(median, t)} than xpusim {how} ({t * 1e3:.2f} ms)"
                           for how, t in per_point.items())  # fmt: skip
        print(f"{peer.name}: {median * 1e3:.2f} ms/point (median of {len(times)}): {ratios}")


def _relative(peer_s: float, xpusim_s: float) -> str:
    ratio = peer_s / xpusim_s
    return f"{ratio:.3g}x slower" if ratio >= 1 else f"{1 / ratio:.3g}x faster"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", action="store_true", help="profile the one-core run")
    parser.add_argument("--scale", type=float, default=1.0, help="share of the batch sizes")
    parser.add_argument("--skip", choices=["one-core", "all-cores", "peers"], nargs="*",
                        default=[], help="parts not to run")  # fmt: skip
    args = parser.parse_args()
    g = grid(args.scale)
    print(f"{len(g.points())} points of {MODEL}; {os.cpu_count()} cores")
    per_point = {}
    if "one-core" not in args.skip:
        per_point["in the one-core sweep"] = one_core(g, args.profile)
    if "all-cores" not in args.skip:
        per_point["in the all-core sweep"] = all_cores(g)
    if "peers" not in args.skip:
        peers(g, per_point)


if __name__ == "__main__":
    main()
