"""A grid like the held-back serving set, run as a user would: every failure and every figure
that breaks a physical rule, and the seconds each command took.

    python benchmarks/heldout_like_grid.py                 # the c4 pairs, 1/4 of the curves
    python benchmarks/heldout_like_grid.py --sample 1      # every curve (about 4x longer)
    python benchmarks/heldout_like_grid.py --json grid.json

The held-back set is described as about 1,000 TTFT/TPOT measurements of Llama-3 8B/70B,
Qwen3-32B and Qwen3-235B-A22B on H100 and H200 under vLLM, SGLang and TensorRT-LLM at 4-512
concurrent clients with fixed input/output lengths. A command that errors, refuses or prints
nonsense there scores worse than any error, so this runs that grid through `xpusim.serve`
(in-process; 8 requests per client, as the brief's `--requests 8 x concurrency`) and
classifies each point:

- error: a UserError or an exception; refused: "does not fit", with the weights on the fullest
  chip, suspicious where they leave a fifth of the memory or more (KV for one 9k-token
  request of these models needs at most 3 GB);
- nan/inf/zero in TTFT, TPOT or tok/s; a dense model's c4 TPOT under the weights' streaming
  time (bytes per chip / HBM bandwidth);
- monotonic rules: TPOT must not fall as clients rise (same everything else); TTFT must not
  fall as the prompt grows (8000/1000 against 1000/1000 at every load, all four lengths at 4
  clients, where no request queues); at 4 clients decoding 1000/1000, H200 must not be slower
  than H100 (more bandwidth), fp8 (--precision fp8, or the -FP8 repo's checkpoint) not slower
  than bf16 at the same plan, and 2x tp not slower.

Two phases: every configuration (model, chip, plan, engine, precision) at 4 clients, 1000/1000
(the pair rules); then a seeded sample of configurations over 4-512 clients x the four length
pairs (the curve rules). CPU seconds of each run are recorded; the first run of a
configuration pays for building its model, as a fresh command does (imports aside).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import random
import re
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import xpusim
from xpusim.errors import UserError

MODELS = (
    "meta-llama/Llama-3.1-8B-Instruct",
    "llama-3-70b",
    "meta-llama/Llama-3.3-70B-Instruct",
    "meta-llama/Llama-3.1-70B-Instruct",
    "Qwen/Qwen3-32B",
    "Qwen/Qwen3-32B-FP8",
    "Qwen/Qwen3-235B-A22B",
    "Qwen/Qwen3-235B-A22B-FP8",
)
CHIPS = ("h100-sxm", "h200-sxm")
ENGINES = ("vllm", "sglang", "trtllm")
DP_ATTENTION_ENGINES = ("sglang", "trtllm")  # --enable-dp-attention, enable_attention_dp
CONCURRENCY = (4, 16, 64, 256, 512)
LENGTHS = ((128, 128), (1000, 1000), (2000, 200), (8000, 1000))
REQUESTS_PER_CLIENT = 8
PAIR_LOAD = (4, 1000, 1000)  # clients, prompt, gen of the pair rules
TOLERANCE = 0.01  # a rule is broken when the figure moves the wrong way by more than 1%
SUSPICIOUS_WEIGHT_SHARE = 0.8  # refused while the weights leave a fifth of the memory


@dataclass(frozen=True)
class Config:
    model: str
    chip: str
    tp: int
    ep: int = 1
    dp_attention: bool = False
    engine: str = "vllm"
    precision: str | None = None  # None: the checkpoint's own (an -FP8 repo)

    def options(self) -> dict[str, Any]:
        options: dict[str, Any] = dict(chips=self.tp, tp=self.tp, engine=self.engine)
        if self.ep > 1:
            options["ep"] = self.ep
        if self.dp_attention:
            options["dp_attention"] = True
        if self.precision is not None:
            options["precision"] = self.precision
        return options

    def label(self) -> str:
        plan = f"tp{self.tp}" + (f"ep{self.ep}" if self.ep > 1 else "")
        plan += "-dpa" if self.dp_attention else ""
        return f"{self.model} {self.chip} {plan} {self.engine} {self.precision or 'ckpt'}"


@dataclass
class Point:
    config: Config
    concurrency: int
    prompt: int
    gen: int
    cpu_s: float = 0.0
    status: str = "ok"  # ok, error, refused
    message: str = ""
    ttft_s: float = math.nan
    tpot_s: float = math.nan
    tokens_per_s: float = math.nan
    notes: list[str] = field(default_factory=list)


def configs(models: list[str]) -> list[Config]:
    """Every plan a user would try: tp 1-8 for the dense models, tp 4/8 and tp 8 with ep 8
    (and attention data parallelism where the engine has it) for Qwen3-235B; bf16 and fp8
    except for an -FP8 repo, which runs its checkpoint's format."""
    out = []
    for model in models:
        moe = "235B" in model
        precisions = (None,) if model.endswith("-FP8") else ("bf16", "fp8")
        plans = [(4, 1, False), (8, 1, False), (8, 8, False)] if moe else [
            (tp, 1, False) for tp in (1, 2, 4, 8)]
        for chip in CHIPS:
            for engine in ENGINES:
                extra = [(8, 8, True)] if moe and engine in DP_ATTENTION_ENGINES else []
                for tp, ep, dpa in plans + extra:
                    for precision in precisions:
                        out.append(Config(model, chip, tp, ep, dpa, engine, precision))
    return out


def served(point: Any, serve: Callable[[], Any]) -> Any:
    """Runs `serve` (an xpusim.serve call) for `point`, filling its status ("error" with the
    exception's name and message, "refused" with the reason, else "ok"), its mean TTFT and
    TPOT and the CPU seconds the call took; returns the result where it fit, else None. The
    DeepSeek-R1 grid (heldout_like_dsr1_grid.py) runs its points through it too."""
    started = time.process_time()
    result = None
    try:
        result = serve()
    except Exception as error:  # a UserError or any other: every failure is a finding
        point.status, point.message = "error", f"{type(error).__name__}: {error}"
    else:
        if not result.fits:
            point.status, point.message, result = "refused", result.reason, None
        else:
            point.ttft_s, point.tpot_s = result.ttft_s.mean, result.tpot_s.mean
    point.cpu_s = time.process_time() - started
    return result


def run(config: Config, concurrency: int, prompt: int, gen: int, spread: float = 0.0) -> Point:
    point = Point(config, concurrency, prompt, gen)
    result = served(point, lambda: xpusim.serve(
        config.model, config.chip, concurrency=concurrency,
        requests=REQUESTS_PER_CLIENT * concurrency, prompt=prompt, gen=gen, spread=spread,
        **config.options()))  # fmt: skip
    if result is not None:
        point.tokens_per_s = result.output_tokens_per_s
        point.notes = result.notes
    return point


def nonsense(point: Point) -> str:
    """What is wrong with a served point's figures on their own: nan, inf, zero or less."""
    for name in ("ttft_s", "tpot_s", "tokens_per_s"):
        value = getattr(point, name)
        if not math.isfinite(value) or value <= 0:
            return f"{name} = {value}"
    return ""


def weights_gb(reason: str) -> float | None:
    match = re.search(r"weights \(([\d.]+) GB on the fullest chip\)", reason)
    return float(match.group(1)) if match else None


def suspicious_refusal(point: Point) -> str:
    """A refusal where a real engine would serve: the weights leave a fifth of the memory."""
    weights = weights_gb(point.message)
    memory_gb = xpusim.chip(point.config.chip).capacity_bytes / 1e9
    if weights is None or weights > SUSPICIOUS_WEIGHT_SHARE * memory_gb:
        return ""
    return f"weights {weights:.1f} of {memory_gb:.0f} GB"


def streaming_floor_s(config: Config) -> float | None:
    """A dense model's weights per chip over HBM bandwidth: no decode step is shorter."""
    workload = xpusim.model(config.model)
    if workload.is_moe:
        return None
    precision = config.precision or "fp8"
    bytes_per_param = {"bf16": 2, "fp8": 1}[precision]
    chip = xpusim.chip(config.chip)
    dram = next(m for m in chip.memory if m.kind.value == "dram")
    return workload.param_count * bytes_per_param / config.tp / dram.bandwidth_bytes_per_s.value


def _worse(later: float, earlier: float) -> bool:
    """`later` is below `earlier` by more than the tolerance."""
    return later < earlier * (1 - TOLERANCE)


def check_pairs(points: dict[tuple, Point]) -> list[str]:
    """The c4 1000/1000 rules across configurations: H200 vs H100, fp8 vs bf16, 2x tp."""
    found = []
    served = {key: p for key, p in points.items() if p.status == "ok"}
    for (config, *load), point in served.items():
        if tuple(load) != PAIR_LOAD:
            continue
        if config.chip == "h100-sxm":
            other = served.get((_replace(config, chip="h200-sxm"), *PAIR_LOAD))
            if other and other.tpot_s > point.tpot_s * (1 + TOLERANCE):
                found.append(f"h200 slower than h100: {config.label()} TPOT "
                             f"{point.tpot_s * 1e3:.2f} -> {other.tpot_s * 1e3:.2f} ms")
        if config.precision == "bf16":
            for fp8 in (_replace(config, precision="fp8"),
                        _replace(config, model=f"{config.model}-FP8", precision=None)):
                other = served.get((fp8, *PAIR_LOAD))
                if other and other.tpot_s > point.tpot_s * (1 + TOLERANCE):
                    found.append(f"fp8 slower than bf16: {config.label()} -> {fp8.label()} "
                                 f"TPOT {point.tpot_s * 1e3:.2f} -> {other.tpot_s * 1e3:.2f} ms")
        if config.ep == 1 and config.tp < 8:
            other = served.get((_replace(config, tp=2 * config.tp), *PAIR_LOAD))
            if other and other.tpot_s > point.tpot_s * (1 + TOLERANCE):
                found.append(f"2x tp slower: {config.label()} -> tp{2 * config.tp} TPOT "
                             f"{point.tpot_s * 1e3:.2f} -> {other.tpot_s * 1e3:.2f} ms")
        floor = streaming_floor_s(config)
        if floor is not None and point.tpot_s < floor:
            found.append(f"TPOT under the weights' streaming time: {config.label()} "
                         f"{point.tpot_s * 1e3:.2f} < {floor * 1e3:.2f} ms")
    return found


def _replace(config: Config, **changes: Any) -> Config:
    return Config(**{**asdict(config), **changes})


def check_curves(points: dict[tuple, Point], sampled: list[Config]) -> list[str]:
    """The rules along one configuration's curves: TPOT against clients, TTFT against the
    prompt."""
    found = []
    for config in sampled:
        for prompt, gen in LENGTHS:
            curve = [points.get((config, c, prompt, gen)) for c in CONCURRENCY]
            curve = [p for p in curve if p is not None and p.status == "ok"]
            for low, high in itertools.pairwise(curve):
                if _worse(high.tpot_s, low.tpot_s):
                    found.append(f"TPOT falls with clients: {config.label()} {prompt}/{gen} "
                                 f"c{low.concurrency} {low.tpot_s * 1e3:.2f} -> "
                                 f"c{high.concurrency} {high.tpot_s * 1e3:.2f} ms")
        for concurrency in CONCURRENCY:
            pairs = [((1000, 1000), (8000, 1000))]
            if concurrency == CONCURRENCY[0]:
                ordered = sorted(LENGTHS)
                pairs += list(itertools.pairwise(ordered))
            for short, long in pairs:
                a = points.get((config, concurrency, *short))
                b = points.get((config, concurrency, *long))
                if a and b and a.status == b.status == "ok" and _worse(b.ttft_s, a.ttft_s):
                    found.append(f"TTFT falls as the prompt grows: {config.label()} "
                                 f"c{concurrency} {short[0]}/{short[1]} "
                                 f"{a.ttft_s * 1e3:.1f} -> {long[0]}/{long[1]} "
                                 f"{b.ttft_s * 1e3:.1f} ms")
    return found


def engine_ratios(points: dict[tuple, Point]) -> dict[str, dict[int, tuple[float, float]]]:
    """SGLang's and TensorRT-LLM's TTFT and TPOT over vLLM's at the same model, chip, plan,
    precision and load: the median by clients (where the engines' schedulers part ways)."""
    vllm = {(_replace(p.config, engine="vllm"), *key[1:]): p for key, p in points.items()
            if p.status == "ok" and p.config.engine != "vllm"}  # fmt: skip
    ratios: dict[str, dict[int, list[tuple[float, float]]]] = {}
    for key, other in vllm.items():
        base = points.get(key)
        if base is not None and base.status == "ok":
            ratios.setdefault(other.config.engine, {}).setdefault(other.concurrency, []).append(
                (other.ttft_s / base.ttft_s, other.tpot_s / base.tpot_s))
    return {engine: {c: (statistics.median(t for t, _ in r), statistics.median(d for _, d in r))
                     for c, r in sorted(by.items())}
            for engine, by in sorted(ratios.items())}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=float, default=0.25,
                        help="share of configurations whose full curves run (0-1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", action="append", help="only these models (repeatable)")
    parser.add_argument("--json", dest="json_out", help="write every point here")
    parser.add_argument("--spread", type=float, default=0.0,
                        help="lengths uniform in [L(1-s), L(1+s)] (default 0: fixed lengths)")
    args = parser.parse_args()

    models, unresolved = [], []
    for name in args.model or MODELS:
        try:
            xpusim.model(name)
            models.append(name)
        except UserError:
            unresolved.append(name)
    all_configs = configs(models)
    sampled = [c for c in all_configs if random.Random(f"{args.seed}{c}").random() < args.sample]
    started = time.process_time()
    points: dict[tuple, Point] = {}
    for config in all_configs:
        points[(config, *PAIR_LOAD)] = run(config, *PAIR_LOAD, args.spread)
    for config in sampled:
        if points[(config, *PAIR_LOAD)].status != "ok":
            continue  # refused or failed at the lightest load: the curve says no more
        for concurrency in CONCURRENCY:
            for prompt, gen in LENGTHS:
                key = (config, concurrency, prompt, gen)
                if key not in points:
                    points[key] = run(config, concurrency, prompt, gen, args.spread)
        print(f"{len(points)} runs, {time.process_time() - started:.0f} CPU-s", file=sys.stderr)
    report(points, sampled, unresolved, time.process_time() - started)
    if args.json_out:
        rows = [{**asdict(p), "config": p.config.label()} for p in points.values()]
        with open(args.json_out, "w") as f:
            json.dump(rows, f, indent=1, default=str)


def report(points: dict[tuple, Point], sampled: list[Config], unresolved: list[str],
           cpu_s: float) -> None:  # fmt: skip
    values = list(points.values())
    errors = [p for p in values if p.status == "error"]
    refused = [p for p in values if p.status == "refused"]
    suspicious = [(p, why) for p in refused if (why := suspicious_refusal(p))]
    bad = [(p, why) for p in values if p.status == "ok" and (why := nonsense(p))]
    broken = check_pairs(points) + check_curves(points, sampled)
    print(f"{'config':64s} {'load':>14s} {'status':8s} {'TTFT ms':>9s} {'TPOT ms':>8s} "
          f"{'tok/s':>8s} {'cpu s':>6s}")
    for p in values:
        load = f"c{p.concurrency} {p.prompt}/{p.gen}"
        print(f"{p.config.label():64s} {load:>14s} {p.status:8s} {p.ttft_s * 1e3:9.1f} "
              f"{p.tpot_s * 1e3:8.2f} {p.tokens_per_s:8.0f} {p.cpu_s:6.2f}")
    print()
    print(f"{len(values)} runs of {len({p.config for p in values})} configurations "
          f"({len(sampled)} with curves), {cpu_s:.0f} CPU-s")
    print(f"not resolved (skipped): {', '.join(unresolved) or 'none'}")
    print(f"errors: {len(errors)}")
    for p in errors:
        print(f"  {p.config.label()} c{p.concurrency} {p.prompt}/{p.gen}: {p.message[:200]}")
    print(f"refused: {len(refused)} ({len(suspicious)} where the weights leave a fifth of the "
          "memory)")
    for p, why in suspicious:
        print(f"  {p.config.label()} c{p.concurrency} {p.prompt}/{p.gen}: {why}: "
              f"{p.message[:160]}")
    print(f"nan/inf/zero: {len(bad)}")
    for p, why in bad:
        print(f"  {p.config.label()} c{p.concurrency} {p.prompt}/{p.gen}: {why}")
    print(f"rules broken: {len(broken)}")
    for line in broken:
        print(f"  {line}")
    print("engines beside vLLM at the same point, median ratio by clients (TTFT / TPOT):")
    for engine, ratios in engine_ratios(points).items():
        print(f"  {engine}: " + ", ".join(f"c{c} {t:.2f} / {d:.2f}" for c, (t, d) in
                                         ratios.items()))  # fmt: skip
    slowest = sorted(values, key=lambda p: -p.cpu_s)[:10]
    print("slowest runs (CPU s):")
    for p in slowest:
        print(f"  {p.cpu_s:5.2f} {p.config.label()} c{p.concurrency} {p.prompt}/{p.gen}")
    moe64 = [p for p in values if "235B" in p.config.model and p.concurrency == 64]
    if moe64:
        print(f"Qwen3-235B at 64 clients: {len(moe64)} runs, slowest "
              f"{max(p.cpu_s for p in moe64):.2f} CPU-s (target: under 2 s)")


if __name__ == "__main__":
    main()
