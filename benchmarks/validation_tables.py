"""The accuracy tables of docs/validation.md, regenerated from `xpusim validate --json`.

    xpusim validate --json --out /tmp/v | python benchmarks/validation_tables.py -
    python benchmarks/validation_tables.py after.json --before old.json  # a "before" column
    python benchmarks/validation_tables.py after.json --print  # to stdout, the page untouched

The tables (by workload and metric, by source group, by chip, and the worst points) are
written between the two marker comments of the docs page and nowhere else, so the prose
around them, which explains the misses, stays hand-written and the figures never go stale
by hand-copying. Each group gives its count, median absolute error, median predicted /
measured (which way it misses: an error of 80% is 0.2x or 1.8x), the share within 15% (the
project's bar) and its worst point. With `--before`, each group's median error in the older
run is printed beside (for a change that moves predictions: old -> new per group).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs" / "validation.md"
BEGIN = "<!-- validation-tables:begin (benchmarks/validation_tables.py writes this block) -->"
END = "<!-- validation-tables:end -->"
WITHIN = 0.15  # the project's accuracy bar (issues #7, #48)
WORST = 15

# A point's publication, from its id's prefix (first match wins): the ids are namespaced by
# source in published.json. MLPerf ids (`mlperf51-amd-...`) name round and submitter and are
# labelled by the rule in source_group; anything unlisted falls back to its id's first word.
SOURCE_GROUPS: tuple[tuple[str, str], ...] = (
    ("dstack-dsr1-", "dstack DeepSeek-R1 (Feb 2025 engines)"),
    ("dstack-", "dstack Llama-3.1-405B, vLLM 0.6.3 on MI300X"),
    ("trtllm-perfov10-", "TensorRT-LLM perf overview 1.x"),
    ("trtllm-perfov-", "TensorRT-LLM perf overview 0.x"),
    ("trt09-", "TensorRT-LLM v0.9.0 tables"),
    ("trt061-", "TensorRT-LLM v0.6.1 tables"),
    ("trt05-", "TensorRT-LLM v0.5 tables"),
    ("nim180-", "NIM 1.8"),
    ("tpurecipes-v7x", "tpu-recipes TPU7x (Ironwood), vLLM TPU (Qwen3-32B, Qwen3-Coder-480B, "
                       "Qwen3.5-397B)"),
    ("tpurecipes-", "tpu-recipes v6e"),
    ("mlenergy3-gpqa-", "ML.ENERGY v3 GPQA, vLLM 0.11.1"),
    ("gpustack-lat-", "GPUStack Qwen3-8B latency (H100, 1-8 clients)"),
    ("vllmspot-", "vLLM spot check (vLLM 0.8.2, SGLang 0.4.4; 10 req/s)"),
    ("sglcook-qwen3-235b-", "SGLang cookbook Qwen3-235B (B200, SGLang 0.5.6)"),
    ("sglcook-deepseek-r1-", "SGLang cookbook DeepSeek-R1-0528 (B200, SGLang 0.5.6)"),
    ("sglcook-deepseek-v3.1-", "SGLang cookbook DeepSeek-V3.1 (MI300X, SGLang 0.5.7)"),
    ("sglcook-minimax-m2-", "SGLang cookbook MiniMax-M2 (MI300X TP 4, SGLang 0.5.7)"),
    ("sglcook-minimax-m2.5-", "SGLang cookbook MiniMax-M2.5 (B200 0.5.8, H100 0.5.9; EP 8)"),
    ("sglcook-kimi-k2.5-", "SGLang cookbook Kimi-K2.5 INT4 (H200, SGLang 0.5.6)"),
    ("sglcook-llama-4-", "SGLang cookbook Llama-4 Scout, Maverick (MI300X, SGLang 0.5.9)"),
    ("sglcook-qwen3-coder-next-", "SGLang cookbook Qwen3-Coder-Next (2 B200, SGLang 0.5.8+)"),
    ("vultr-", "Vultr cookbook MiniMax-M2.5 (B200, vLLM 0.12)"),
    ("inferencemax-", "InferenceMAX gpt-oss-120b (B200, H100, H200, MI355X)"),
    ("mlenergy-", "ML.ENERGY leaderboard"),
    ("gptfast-", "gpt-fast README"),
    ("neuron-", "AWS Neuron tutorial"),
    ("pope-", "Pope et al. (PaLM on TPU v4)"),
    ("mtia2i-", "MTIA 2i paper"),
    ("mtia-", "MTIA v1 paper"),
    ("llmperf-", "LLMPerf leaderboard"),
    ("groq-", "Groq"),
    ("tpuv4-", "TPU v4 paper"),
)
SUBMITTERS = {"amd": "AMD", "nvidia": "NVIDIA", "asustek": "ASUSTeK", "gigacomputing":
              "GigaComputing"}  # fmt: skip
HEADER = ("| {what} | points | median error{before} | pred/meas (median) | within 15% "
          "| worst point (pred/meas) |")  # fmt: skip
WORST_HEADER = ("| # | point | chip | metric | measured | predicted | pred/meas | error "
                "| stated gap |")  # fmt: skip


class Refused(Exception):
    """Bad input: one line on stderr, exit status 2."""


def source_group(point_id: str) -> str:
    """The publication a point comes from (MLPerf split by round and submitter)."""
    mlperf = re.match(r"mlperf(\d)(\d)-([a-z0-9]+)-", point_id)
    if mlperf:
        major, minor, submitter = mlperf.groups()
        if major + minor in ("30", "40"):  # one system each, named in the id's second word
            submitter = "nvidia"
        return f"MLPerf v{major}.{minor} ({SUBMITTERS.get(submitter, submitter.title())})"
    for prefix, label in SOURCE_GROUPS:
        if point_id.startswith(prefix):
            return label
    return point_id.split("-")[0]


def metric_group(point: dict) -> str:
    """A serving point's metric answers its own question (TTFT, TPOT, throughput); other
    workloads are grouped whole, as `xpusim validate` groups them."""
    if point["workload"] == "llm-serving":
        return f"llm-serving {point['metric']}"
    return point["workload"]


def _ratio(points: list[dict]) -> float:
    return statistics.median(p["ratio"] for p in points)


def _rule(header: str) -> str:
    return "|" + "---|" * (header.count("|") - 1)


def _row(name: str, points: list[dict], before: dict[str, list[dict]] | None) -> str:
    errors = [p["ape"] for p in points]
    worst = max(points, key=lambda p: p["ape"])
    within = sum(e <= WITHIN for e in errors) / len(errors)
    old = ""
    if before is not None:
        was = before.get(name)
        old = (f"{statistics.median(p['ape'] for p in was):.1%} (n={len(was)}) -> " if was
               else "new -> ")  # fmt: skip
    return (f"| {name} | {len(points)} | {old}{statistics.median(errors):.1%} | "
            f"{_ratio(points):.2f} | {within:.0%} | {worst['id']} ({worst['ratio']:.2f}) |")


def _grouped(points: Iterable[dict], key: Callable[[dict], str]) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = {}
    for p in points:
        groups.setdefault(key(p), []).append(p)
    return dict(sorted(groups.items()))


def _table(what: str, points: list[dict], key: Callable[[dict], str],
           before: list[dict] | None, total: str | None = None) -> list[str]:  # fmt: skip
    header = HEADER.format(what=what, before=" (before -> now)" if before is not None else "")
    lines = [header, _rule(header)]
    old = _grouped(before, key) if before is not None else None
    lines += [_row(name, group, old) for name, group in _grouped(points, key).items()]
    if total is not None:
        lines.append(_row(total, points, {total: before} if before is not None else None))
    return lines


def _gap(text: str, limit: int = 90) -> str:
    text = text.replace("|", "/").replace("\n", " ")
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + " ..."


def render(run: dict, before: dict | None = None, worst: int = WORST) -> str:
    """The Markdown between the markers, from one `validate --json` object (and an older one)."""
    points: list[dict] = run["points"]
    old: list[dict] | None = before["points"] if before is not None else None
    serving = [p for p in points if p["workload"] == "llm-serving"]
    old_serving = [p for p in old if p["workload"] == "llm-serving"] if old is not None else None

    def serving_key(by: Callable[[dict], str]) -> Callable[[dict], str]:
        return lambda p: f"{by(p)} · {p['metric']}"

    lines = [
        f"{run['n_points']} points scored, {run['n_skipped']} skipped; median absolute error "
        f"**{run['median_ape']:.1%}**, mean {run['mean_ape']:.1%}"
        + (f" (before: {before['median_ape']:.1%} over {before['n_points']})" if before else "")
        + ".",
        "",
        "By workload, and serving by metric:",
        "",
        *_table("group", points, metric_group, old, total="all"),
        "",
        "Serving by source and metric:",
        "",
        *_table("source · metric", serving, serving_key(lambda p: source_group(p["id"])),
                old_serving),
        "",
        "Serving by chip and metric:",
        "",
        *_table("chip · metric", serving, serving_key(lambda p: p["chip"]), old_serving),
        "",
        "Other workloads by source:",
        "",
        *_table("source · workload", [p for p in points if p["workload"] != "llm-serving"],
                lambda p: f"{source_group(p['id'])} · {p['workload']}",
                [p for p in old if p["workload"] != "llm-serving"] if old is not None else None),
        "",
        f"The {worst} worst points:",
        "",
        WORST_HEADER,
        _rule(WORST_HEADER),
    ]
    ranked = sorted(points, key=lambda p: -p["ape"])[:worst]
    lines += [f"| {i} | {p['id']} | {p['chip']} | {p['metric']} | {p['measured']:.4g} | "
              f"{p['predicted']:.4g} | {p['ratio']:.2f} | {p['ape']:.0%} | "
              f"{_gap(p.get('known_gap', ''))} |" for i, p in enumerate(ranked, 1)]  # fmt: skip
    return "\n".join(lines)


def replace_block(text: str, block: str) -> str:
    """`text` with what lies between the markers replaced by `block`."""
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise Refused(f"the page needs one '{BEGIN}' line and, after it, one '{END}' line")
    head, rest = text.split(BEGIN)
    _, tail = rest.split(END)
    return f"{head}{BEGIN}\n{block}\n{END}{tail}"


def block_of(text: str) -> str:
    """What lies between the markers (for the test that the docs hold the generator's format)."""
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n")


def _load(name: str) -> dict:
    try:
        raw = sys.stdin.read() if name == "-" else Path(name).read_text()
    except OSError as why:
        raise Refused(f"{name}: cannot be read ({why.strerror})") from None
    try:
        run = json.loads(raw)
    except json.JSONDecodeError as why:
        raise Refused(f"{name}: not JSON ({why.msg} at line {why.lineno})") from None
    needed = ("points", "n_points", "n_skipped", "median_ape", "mean_ape")
    if not isinstance(run, dict) or any(k not in run for k in needed) or not run["points"]:
        raise Refused(f"{name}: not the output of `xpusim validate --json` (needs "
                      f"{', '.join(needed)} and at least one point)")  # fmt: skip
    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", help="`xpusim validate --json` output, or - for stdin")
    parser.add_argument("--before", help="an older run's JSON: its medians printed beside")
    parser.add_argument("--docs", type=Path, default=DOCS, help="the page to update")
    parser.add_argument("--print", action="store_true", help="print the tables; leave the page")
    args = parser.parse_args(argv)
    try:
        block = render(_load(args.run), _load(args.before) if args.before else None)
        if args.print:
            print(block)
            return 0
        try:
            text = args.docs.read_text()
        except OSError as why:
            raise Refused(f"--docs {args.docs}: cannot be read ({why.strerror})") from None
        from xpusim.files import write_text  # atomic: a page is never left half-written

        write_text(args.docs, replace_block(text, block))
    except Refused as why:
        print(f"error: {why}", file=sys.stderr)
        return 2
    print(f"wrote the tables into {args.docs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
