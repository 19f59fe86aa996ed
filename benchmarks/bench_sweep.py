"""Sweeps people run, timed: in this process on one core, as the `xpusim sweep` command on
every core, beside a closed-form roofline over the same points (the limit) and beside
llm-analysis per point.

    python benchmarks/bench_sweep.py                     # every grid, every part
    python benchmarks/bench_sweep.py --grid shapes-8     # one grid
    python benchmarks/bench_sweep.py --skip peers        # parts not to run
    python benchmarks/bench_sweep.py --profile           # also where the one-core time goes
    python benchmarks/bench_sweep.py --rounds 4          # each timing 4 times: best and range

The grids (10,000 points each) are chosen so that no cache can stand in for the tool:
- `shapes-8`: llama-2-70b on 8 H100s with a plan search at every point, over 20 batch
  sizes x 10 prompt lengths x 10 generation lengths x 5 precisions: every point a distinct
  request shape (the sweep a capacity planner runs).
- `shapes-1`: llama-2-7b on one H100, the same 10,000 distinct request shapes.
- `chips`: llama-2-70b on 5 chips x 5 what-if HBM bandwidths x 5 chip counts (plan
  searches) x 10 batches x 2 prompts x 2 generation lengths x 2 precisions: few shapes,
  many systems (the sweep a hardware architect runs).
- `training`: llama-2-70b training steps on H100 and TPU v4, 5 chip counts x 6 global
  batches x 3 sequence lengths x 2 formats (360 points, each a plan search): how many chips
  a training run needs (fewer points: a training point costs a search of backward graphs).

The closed-form limit is the roofline a spreadsheet would compute, vectorized over the
grid's points: TTFT = max(prefill FLOPs / peak, weight bytes / bandwidth), TPOT the same for
one decode step with the mean KV cache, on one chip group of tp = the chips. llm-analysis
(the `peers` extra, in a venv of its own: it pins transformers < 5) is run on a sample of
the grid's points it can express (one H100, or 8 as tensor parallelism, no search).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import math
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import xpusim
from xpusim.explore.executor import InProcess
from xpusim.explore.grid import split
from xpusim.explore.sweep import Grid, run
from xpusim.ir.dtypes import DType
from xpusim.scenarios.training import model_flops_per_token
from xpusim.validation.points import Point
from xpusim.workloads.transformer_config import TransformerConfig

SHAPES = {
    "batch": "1,2,...,20",
    "prompt": "128,256,384,512,768,1024,1536,2048,3072,4096",
    "gen": "16,32,64,128,192,256,384,512,768,1024",
    "precision": "int8,fp8,bf16,fp16,fp32",
}


@dataclass(frozen=True)
class Case:
    name: str
    model: str
    chips: tuple[str, ...]
    options: dict[str, str]  # as typed on the command line
    sets: tuple[tuple[str, str], ...] = ()
    peer_chips: int = 1  # llm-analysis runs the grid's points with this many chips as tp

    def grid(self, scale: float) -> Grid:
        axes = {name: tuple(_value(v) for v in split(text)) for name, text in self.options.items()}
        axes["batch"] = axes["batch"][: max(1, round(len(axes["batch"]) * scale))]
        sets = tuple((path, tuple(float(v) for v in split(text))) for path, text in self.sets)
        return Grid(xpusim.model(self.model), self.chips, sets, axes)


CASES = {
    "shapes-8": Case("shapes-8", "llama-2-70b", ("h100-sxm",), {**SHAPES, "chips": "8"},
                     peer_chips=8),
    "shapes-1": Case("shapes-1", "llama-2-7b", ("h100-sxm",), SHAPES),
    "chips": Case(
        "chips", "llama-2-70b", ("h100-sxm", "h200-sxm", "a100-sxm-80gb", "mi300x", "tpu-v4"),
        {"batch": "1,2,4,...,512", "prompt": "128,2048", "gen": "128,1024",
         "precision": "int8,bf16", "chips": "1,2,4,8,16"},
        (("memory.dram.bandwidth_bytes_per_s", "2e12,3e12,...,6e12"),),
    ),
    "training": Case(
        "training", "llama-2-70b", ("h100-sxm", "tpu-v4"),
        {"mode": "training", "chips": "8,16,32,64,128", "batch": "8,16,32,64,128,256",
         "prompt": "1024,2048,4096", "precision": "bf16,fp16"},
    ),
}  # fmt: skip
PEER_SAMPLE = 40  # points per peer


def _value(text: str) -> int | str:
    return int(text) if text.isdigit() else text


def one_core(g: Grid, profile: bool) -> float:
    """Seconds per point in this process (its memos last a chunk: xpusim/memo.py)."""
    with tempfile.TemporaryDirectory() as out:
        profiler = cProfile.Profile() if profile else None
        if profiler:
            profiler.enable()
        result = run(g, Path(out), InProcess())
        if profiler:
            profiler.disable()
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
    n = len(result.rows)
    print(f"  one core: {n} points in {result.simulate_s:.2f} s = {n / result.simulate_s:.0f} "
          f"points/s ({result.simulate_s / n * 1e3:.3f} ms/point)")  # fmt: skip
    return result.simulate_s / n


def reference_s() -> float:
    """How fast this VM is at the moment: the best of three runs of a fixed one-core
    workload of the kinds a sweep's points do (dicts of tuples, floats' repr, numpy calls on
    short arrays). This VM's speed drifts by up to 2x within minutes, which no single timing
    shows; printed beside each, it tells a slower tree from a slower phase."""
    best = math.inf
    a = np.arange(1000.0)
    for _ in range(3):
        start = time.perf_counter()
        found = {(i, i % 7): i * 1.5 for i in range(100_000)}
        list(map(repr, found.values()))
        for _ in range(2000):
            a = np.maximum(a * 1.0001, a + 1.0)
        best = min(best, time.perf_counter() - start)
    return best


def all_cores(case: Case, g: Grid) -> float:
    """The whole `xpusim sweep` command on every core: its simulate_s and wall time, with
    this VM's reference time (reference_s) just before it."""
    reference = reference_s()
    cmd = [str(Path(sys.executable).parent / "xpusim"), "sweep", case.model, "--json"]
    cmd += [arg for chip in case.chips for arg in ("--chip", chip)]
    cmd += [arg for k, vs in g.axes.items() for arg in (f"--{k}", ",".join(map(str, vs)))]
    cmd += [arg for path, values in case.sets for arg in ("--set", f"{path}={values}")]
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        # with bytecode caches, as a user's install runs (bench_startup.py says why)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        done = subprocess.run([*cmd, "--out", out], capture_output=True, text=True, check=True,
                              env=env)  # fmt: skip
        wall = time.perf_counter() - start
    summary = json.loads(done.stdout)
    n, simulate_s = summary["n_points"], summary["simulate_s"]
    print(f"  all {summary['workers']} cores: {n} points simulated in {simulate_s:.2f} s = "
          f"{n / simulate_s:.0f} points/s ({simulate_s / n * 1e3:.3f} ms/point); the whole "
          f"command (start-up, files, plots) {wall:.2f} s; reference "
          f"{reference * 1e3:.0f} ms")  # fmt: skip
    return simulate_s / n


def closed_form(case: Case, g: Grid) -> float:
    """Seconds per point of the spreadsheet roofline over the grid's points, vectorized:
    what a tool that only divides FLOPs by peak and bytes by bandwidth would take."""
    cfg = xpusim.model(case.model)
    points = g.points()
    chip = xpusim.chip(case.chips[0])
    opts = [dict(p.options) for p in points]
    if opts[0].get("mode") == "training":
        return _closed_form_training(cfg, chip, opts)
    batch = np.array([o["batch"] for o in opts], dtype=float)
    prompt = np.array([o["prompt"] for o in opts], dtype=float)
    gen = np.array([o["gen"] for o in opts], dtype=float)
    chips = np.array([o.get("chips", 1) for o in opts], dtype=float)
    itemsize = np.array([DType.parse(str(o["precision"])).itemsize for o in opts])
    peak = np.array([_peak(chip, str(o["precision"])) for o in opts]) * chips
    bandwidth = chip.memory[-1].bandwidth_bytes_per_s.value * chips
    best = float("inf")
    for _ in range(20):
        start = time.perf_counter()
        weights = cfg.param_count * itemsize
        kv = batch * (prompt + gen / 2) * cfg.kv_cache_bytes_per_token(1.0) * itemsize
        ttft = np.maximum(2 * cfg.param_count * batch * prompt / peak, weights / bandwidth)
        tpot = np.maximum(2 * cfg.param_count * batch / peak, (weights + kv) / bandwidth)
        latency = ttft + (gen - 1) * tpot
        _ = batch * gen / latency / chips  # tokens/s per chip
        best = min(best, time.perf_counter() - start)
    print(f"  closed-form roofline over the same {len(points)} points: {best * 1e3:.3f} ms "
          f"({best / len(points) * 1e6:.3f} us/point; its inputs as arrays already)")  # fmt: skip
    return best / len(points)


def _closed_form_training(cfg: TransformerConfig, chip: xpusim.api.Chip,
                          opts: list[dict]) -> float:  # fmt: skip
    """A training step's closed form: PaLM's model FLOPs per token over the chips' peak."""
    tokens = np.array([o["batch"] * o["prompt"] for o in opts], dtype=float)
    per_token = np.array([model_flops_per_token(cfg, o["prompt"]) for o in opts])
    peak = np.array([_peak(chip, str(o["precision"])) * o["chips"] for o in opts])
    best = float("inf")
    for _ in range(20):
        start = time.perf_counter()
        step = tokens * per_token / peak
        _ = tokens / step / peak  # tokens/s per unit of peak
        best = min(best, time.perf_counter() - start)
    print(f"  closed-form step (6N + attention FLOPs over peak) over the same {len(opts)} "
          f"points: {best * 1e3:.3f} ms ({best / len(opts) * 1e6:.3f} us/point)")  # fmt: skip
    return best / len(opts)


def _peak(chip: xpusim.api.Chip, precision: str) -> float:
    try:
        return chip.peak(DType.parse(precision))
    except xpusim.api.UserError:
        return float("nan")


def peers(case: Case, g: Grid, per_point: dict[str, float]) -> None:
    """llm-analysis and genz-llm per point on a sample of the grid's points they express."""
    if case.options.get("mode") == "training":
        print("  peers: not run; benchmarks/peers.py drives their inference analyses only")
        return
    sys.path.insert(0, str(Path(__file__).parent))
    from peers import PEERS, quiet

    # the grid's points on the peers' chip, without what-ifs, at the chips they cost
    options = [dict(p.options) for p in g.points() if p.target == case.chips[0] and not p.sets
               and dict(p.options).get("chips", 1) == case.peer_chips]  # fmt: skip
    if not options:
        print(f"  peers: none of the grid's points is on {case.chips[0]} at {case.peer_chips} "
              "chip(s) without a what-if figure, which is all they express")  # fmt: skip
        return
    sample = options[:: max(1, len(options) // PEER_SAMPLE)][:PEER_SAMPLE]
    points = [Point(f"p{i}", "llm-inference", case.chips[0], "tokens_per_s_per_chip", 0.0,
                    "grid", setup=dict(model=case.model, tp=case.peer_chips,
                                       chips=case.peer_chips, batch=o["batch"],
                                       prompt=o["prompt"], gen=o["gen"],
                                       precision=o["precision"]))
              for i, o in enumerate(sample)]  # fmt: skip
    for peer_type in PEERS:
        peer = peer_type()
        try:
            peer.load()
        except Exception as error:  # not installed, or broken: the others still run
            print(f"  {peer.name}: not run ({type(error).__name__}: {error})")
            continue
        times = []
        for point in points:
            start = time.perf_counter()
            try:
                with quiet():
                    peer.predict(point, peer.settings[0])
            except Exception:  # a point it cannot express (a precision it lacks)
                continue
            times.append(time.perf_counter() - start)
        if not times:
            print(f"  {peer.name}: expresses none of the sample")
            continue
        median = statistics.median(times)
        ratios = ", ".join(f"{_relative(median, t)} than xpusim {how} ({t * 1e3:.3f} ms)"
                           for how, t in per_point.items())  # fmt: skip
        print(f"  {peer.name}: {median * 1e3:.3f} ms/point (median of {len(times)}, no plan "
              f"search: tp{case.peer_chips}); {ratios}")  # fmt: skip


def _relative(peer_s: float, xpusim_s: float) -> str:
    ratio = peer_s / xpusim_s
    return f"{ratio:.3g}x slower" if ratio >= 1 else f"{1 / ratio:.3g}x faster"


def _best(per_point_s: list[float], n: int) -> float:
    """The best of the rounds' seconds per point, with their range said where there were
    several."""
    if len(per_point_s) > 1:
        low, high = min(per_point_s) * n, max(per_point_s) * n
        print(f"  over {len(per_point_s)} rounds: {low:.2f}-{high:.2f} s, best {low:.2f} s")
    return min(per_point_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", choices=sorted(CASES), nargs="*", default=list(CASES))
    parser.add_argument("--profile", action="store_true", help="profile the one-core run")
    parser.add_argument("--scale", type=float, default=1.0, help="share of the batch sizes")
    parser.add_argument("--skip", choices=["one-core", "all-cores", "limit", "peers"],
                        nargs="*", default=[], help="parts not to run")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=1,
                        help="times each xpusim timing runs: this VM's speed drifts by up "
                             "to 1.5x between identical runs, so the best and the range "
                             "say more than one run")  # fmt: skip
    args = parser.parse_args()
    for name in args.grid:
        case = CASES[name]
        g = case.grid(args.scale)
        print(f"{name}: {len(g.points())} points of {case.model}; {os.cpu_count()} cores")
        per_point = {}
        if "one-core" not in args.skip:
            per_point["in the one-core sweep"] = _best(
                [one_core(g, args.profile) for _ in range(args.rounds)], len(g.points()))
        if "all-cores" not in args.skip:
            per_point["in the all-core sweep"] = _best(
                [all_cores(case, g) for _ in range(args.rounds)], len(g.points()))
        if "limit" not in args.skip:
            limit = closed_form(case, g)
            for how, t in per_point.items():
                print(f"  xpusim {how}: {t / limit:.0f}x the closed-form limit's time")
        if "peers" not in args.skip:
            peers(case, g, per_point)


if __name__ == "__main__":
    main()
