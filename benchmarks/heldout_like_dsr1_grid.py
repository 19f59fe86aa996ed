"""DeepSeek-R1 served as the issue's held-back runs were: every failure, every figure that
breaks an ordering the hardware or the measurements set, and the CPU seconds each took.

    python benchmarks/heldout_like_dsr1_grid.py              # every configuration at 4 clients
    python benchmarks/heldout_like_dsr1_grid.py --loads all  # and 64/256 clients, 8k prompts

The first held-back serving set (issue #48) is DeepSeek-R1 on 8 H200, B200, B300, MI300X,
MI325X and MI355X under SGLang, TensorRT-LLM, vLLM and ATOM, FP8 and FP4 checkpoints, at
4-256 clients and 1k/1k, 1k/8k and 8k/1k tokens, asked with the commands a user types (no
kernel or launch settings beyond the plan). This runs that grid through `xpusim.serve` with
the engine's own defaults and checks, at 4 clients and 1k/1k (`--loads all` adds the rest):

- no error, nan, inf or zero; a refusal only where the weights leave no room for the cache;
- the newer chip of a pair never slower at the same engine, plan and checkpoint (H200 ->
  B200 -> B300, MI300X -> MI325X -> MI355X: each more bandwidth and compute);
- an FP4 checkpoint not slower to decode than FP8 at 4 clients (NVFP4 on B200/B300, MXFP4 on
  MI355X): InferenceX measured it faster at every engine it ran (8 B200 under SGLang at one
  client, 5.87 against 7.18 ms a token; published.json inferencex-dsr1-b200-*);
- a serve of 64 clients under 2 CPU-s (issue #48's bound).

It changes nothing; docs/serving.md, "A DeepSeek-R1 grid like the held-back set", says what
it found.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import Any

from heldout_like_grid import served

import xpusim

CHECKPOINTS = {"fp8": "deepseek-ai/DeepSeek-R1-0528", "nvfp4": "nvidia/DeepSeek-R1-0528-FP4",
               "mxfp4": "amd/DeepSeek-R1-0528-MXFP4-Preview"}  # fmt: skip
CHIPS = {"h200-sxm": ("fp8",), "b200": ("fp8", "nvfp4"), "b300": ("fp8", "nvfp4"),
         "mi300x": ("fp8",), "mi325x": ("fp8",), "mi355x": ("fp8", "mxfp4")}  # fmt: skip
ENGINES = {"NVIDIA": ("sglang", "trtllm", "vllm"), "AMD": ("sglang", "vllm")}
OWN = {"mi355x": ("atom",)}  # engines only some chips run
PLANS = ({"tp": 8}, {"tp": 8, "ep": 8}, {"tp": 8, "ep": 8, "dp_attention": True})
NEWER = (("h200-sxm", "b200"), ("b200", "b300"), ("mi300x", "mi325x"), ("mi325x", "mi355x"))
FP4 = {"b200": "nvfp4", "b300": "nvfp4", "mi355x": "mxfp4"}
LOADS = {"c4": ((4, 1024, 1024),),
         "all": ((4, 1024, 1024), (64, 1024, 1024), (64, 8192, 1024), (256, 1024, 8192))}
TOLERANCE = 0.01
REQUESTS_PER_CLIENT = 10  # InferenceX's --num-prompts, 10 x the clients
CPU_BOUND_S = 2.0


@dataclass
class Point:
    chip: str
    checkpoint: str
    engine: str
    plan: tuple[tuple[str, Any], ...]
    clients: int
    prompt: int
    gen: int
    status: str = "ok"
    message: str = ""
    ttft_s: float = math.nan
    tpot_s: float = math.nan
    cpu_s: float = 0.0

    def label(self) -> str:
        plan = "tp8" + ("ep8" if dict(self.plan).get("ep") else "") + \
            ("-dpa" if dict(self.plan).get("dp_attention") else "")
        return f"{self.chip} {self.checkpoint} {self.engine} {plan}"


def serve(point: Point) -> Point:
    served(point, lambda: xpusim.serve(
        CHECKPOINTS[point.checkpoint], point.chip, chips=8, engine=point.engine,
        precision=point.checkpoint, concurrency=point.clients,
        requests=REQUESTS_PER_CLIENT * point.clients, prompt=point.prompt, gen=point.gen,
        **dict(point.plan)))  # fmt: skip
    if point.status == "ok" and not all(math.isfinite(v) and v > 0
                                        for v in (point.ttft_s, point.tpot_s)):
        point.status = "nonsense"
    return point


def grid(loads: tuple[tuple[int, int, int], ...]) -> list[Point]:
    points = []
    for chip, checkpoints in CHIPS.items():
        vendor = xpusim.chip(chip).vendor
        for checkpoint in checkpoints:
            for engine in ENGINES[vendor] + OWN.get(chip, ()):
                for plan in PLANS:
                    for clients, prompt, gen in loads:
                        points.append(serve(Point(chip, checkpoint, engine,
                                                  tuple(sorted(plan.items())), clients,
                                                  prompt, gen)))  # fmt: skip
    return points


def broken(points: list[Point], load: tuple[int, int, int] = LOADS["c4"][0]) -> list[str]:
    """The orderings the module docstring lists, at one load: (clients, prompt, gen), 4
    clients and 1k/1k by default."""
    ok = {(p.chip, p.checkpoint, p.engine, p.plan): p for p in points
          if p.status == "ok" and (p.clients, p.prompt, p.gen) == load}
    found = []
    for (chip, checkpoint, engine, plan), p in ok.items():
        for older, newer in NEWER:
            q = ok.get((newer, checkpoint, engine, plan)) if chip == older else None
            if q is not None and q.tpot_s > p.tpot_s * (1 + TOLERANCE):
                found.append(f"{newer} slower than {older}: {p.label()} TPOT "
                             f"{p.tpot_s * 1e3:.2f} -> {q.tpot_s * 1e3:.2f} ms")
        q = ok.get((chip, FP4.get(chip), engine, plan)) if checkpoint == "fp8" else None
        if q is not None and q.tpot_s > p.tpot_s * (1 + TOLERANCE):
            found.append(f"{q.checkpoint} slower than fp8: {p.label()} TPOT "
                         f"{p.tpot_s * 1e3:.2f} -> {q.tpot_s * 1e3:.2f} ms")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loads", choices=sorted(LOADS), default="c4")
    points = grid(LOADS[parser.parse_args().loads])
    print(f"{'configuration':34s} {'load':>14s} {'status':8s} {'TTFT ms':>9s} {'TPOT ms':>8s} "
          f"{'cpu s':>6s}")
    for p in points:
        print(f"{p.label():34s} {f'c{p.clients} {p.prompt}/{p.gen}':>14s} {p.status:8s} "
              f"{p.ttft_s * 1e3:9.1f} {p.tpot_s * 1e3:8.2f} {p.cpu_s:6.2f}")
    failed = [p for p in points if p.status in ("error", "nonsense")]
    print(f"\n{len(points)} runs, {sum(p.cpu_s for p in points):.0f} CPU-s; "
          f"errors and nonsense: {len(failed)}; refused: "
          f"{sum(p.status == 'refused' for p in points)}")
    for p in failed:
        print(f"  {p.label()} c{p.clients} {p.prompt}/{p.gen}: {p.message[:200]}")
    found = broken(points)
    print(f"orderings broken: {len(found)}")
    for line in found:
        print(f"  {line}")
    slow = [p for p in points if p.clients == 64 and p.cpu_s > CPU_BOUND_S]
    print(f"64-client serves over {CPU_BOUND_S:.0f} CPU-s: {len(slow)}")
    for p in sorted(slow, key=lambda p: -p.cpu_s):
        print(f"  {p.cpu_s:5.2f} {p.label()} {p.prompt}/{p.gen}")


if __name__ == "__main__":
    main()
