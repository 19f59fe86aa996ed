"""TTFT at a few clients, part by part: for each scored TTFT point of a closed loop of at most
MAX_CLIENTS clients, the measurement beside xpusim's prediction and the prediction's parts,
means over the run's measured requests (docs/validation.md, 2026-12-07, t1, issue #48):

    front end   engines.toml frontend_s (or the point's frontend_ms): the API server's time
                before the engine has the request, a delay on the request's own path
    wait        the rest of the wait before the prompt's first step (the step in flight,
                prompts ahead of it)
    prompt      the prompt's steps, to the step that samples its first token
    left        measured - predicted: what no modelled part holds

    python benchmarks/low_load_ttft.py                      # vLLM and TensorRT-LLM profiles
    python benchmarks/low_load_ttft.py --source gpustack --engine vllm --engine sglang

Each row runs the simulation `xpusim validate` scores the point on
(validation/adapters.serving_result), so its prediction is the scored one; xpusim's p99
inter-token gap is printed beside it, for runs whose source publishes its own (a stall of
every client's stream once a request, as the GPUStack vLLM 0.11 runs show, sits there).
"""

from __future__ import annotations

import argparse
import json

from xpusim.validation.adapters import Unexpressible, serving_result
from xpusim.validation.points import Point, load_points

MAX_CLIENTS = 8
ENGINES = ("vllm", "trtllm")  # profile name prefixes: vllm, vllm-0.11, vllm-v0, trtllm, ...
MS = ("predicted_ms", "frontend_ms", "wait_ms", "prompt_ms", "left_ms")


def low_load_ttft_points(sources: list[str], engines: tuple[str, ...],
                         max_clients: int = MAX_CLIENTS) -> list[Point]:
    """The TTFT points of closed loops of at most `max_clients` clients whose engine profile
    starts with one of `engines` and whose source cites any of `sources` (all: none given),
    case-insensitive as `validate --source` matches."""
    wanted = [s.lower() for s in sources]
    return [p for p in load_points()
            if p.workload == "llm-serving" and p.metric == "ttft_s"
            and p.get("load", {}).get("kind") == "concurrency"
            and p.get("load")["value"] <= max_clients
            and str(p.get("engine_profile", "")).startswith(engines)
            and (not wanted or any(s in p.source.lower() for s in wanted))]  # fmt: skip


def parts(point: Point) -> dict[str, float | str]:
    """The point's measured TTFT, xpusim's (the point's statistic) and its parts (means), ms;
    `skipped` holds the reason where the point cannot be simulated."""
    row: dict[str, float | str] = {"id": point.id, "engine": point.get("engine_profile"),
                                   "clients": point.get("load")["value"],
                                   "prompt_tokens": point.get("prompt"),
                                   "measured_ms": 1e3 * point.value}  # fmt: skip
    try:
        result = serving_result(point)
    except Unexpressible as why:
        return row | {"skipped": str(why)}
    ttft, queue = result.ttft_s, result.queue_s
    if ttft is None or queue is None:
        return row | {"skipped": "no request of the run was measured"}
    predicted = getattr(ttft, point.get("stat", "mean"))
    return row | {"predicted_ms": 1e3 * predicted, "frontend_ms": 1e3 * result.frontend_s,
                  "wait_ms": 1e3 * (queue.mean - result.frontend_s),
                  "prompt_ms": 1e3 * (ttft.mean - queue.mean),
                  "left_ms": 1e3 * (point.value - predicted),
                  **({"itl_p99_ms": 1e3 * result.itl_s.p99} if result.itl_s else {})}


def table(rows: list[dict[str, float | str]]) -> str:
    """A Markdown table of `parts` rows; a skipped point's row says why."""
    lines = ["| point | engine | clients | prompt | measured | xpusim | front end | wait | "
             "prompt steps | left | xpusim ITL p99 |", "|" + "---|" * 11]
    for r in rows:
        head = f"| {r['id']} | {r['engine']} | {r['clients']} | {r['prompt_tokens']} | " \
               f"{r['measured_ms']:.1f} |"
        if "skipped" in r:
            lines.append(f"{head} skipped: {r['skipped']} |")
            continue
        ms = {k: round(float(r[k]), 1) + 0.0 for k in MS}  # no "-0.0" from rounding noise
        itl = f"{float(r['itl_p99_ms']):.1f}" if "itl_p99_ms" in r else "-"  # none: one token
        lines.append(f"{head} {ms['predicted_ms']:.1f} | {ms['frontend_ms']:.1f} | "
                     f"{ms['wait_ms']:.1f} | {ms['prompt_ms']:.1f} | {ms['left_ms']:+.1f} | "
                     f"{itl} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", action="append", default=[],
                        help="only points whose source cites this (repeatable)")
    parser.add_argument("--engine", action="append", default=[],
                        help=f"engine profile prefix (repeatable; default {', '.join(ENGINES)})")
    parser.add_argument("--max-clients", type=int, default=MAX_CLIENTS)
    parser.add_argument("--json", action="store_true", help="one JSON list of rows")
    args = parser.parse_args()
    points = low_load_ttft_points(args.source, tuple(args.engine) or ENGINES, args.max_clients)
    rows = [parts(p) for p in points]
    print(json.dumps(rows, indent=1) if args.json else table(rows))


if __name__ == "__main__":
    main()
