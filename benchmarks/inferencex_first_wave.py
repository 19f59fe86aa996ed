"""Splits InferenceX's mean TTFT into its first wave and the rest, measured and simulated,
and sets the same run's 1k/1k and 1k/8k TTFTs side by side (docs/validation.md, "InferenceX
TTFT: the first wave, not the output length"; issue #48).

    python benchmarks/inferencex_first_wave.py /path/to/InferenceX-app.git [--max-conc 16]
    python benchmarks/inferencex_first_wave.py /path/to/InferenceX-app.git --pairs

Needs git and xpusim on the path. It changes nothing.

Why: every InferenceX point is a closed loop of C clients that benchmark_serving
(utils/bench_serving/benchmark_serving.py, InferenceX since 2026-01-21) runs with
--request-rate inf, --max-concurrency C and --num-prompts WAVES x C, after 2 x C warm-up
copies of one prompt that finish before the run starts: the first C prompts reach the
server together, each later one when a client's previous request ends, and the point's
mean_ttft averages them all, so mean = (first + (WAVES - 1) x rest) / WAVES
(inferencex_points.first_wave). The dashboard rows hold the median beside the mean
(FIXTURE at APP_COMMIT); with the median standing for the rest, the first wave's measured
mean follows. xpusim's first wave is the same point run with C requests (a closed loop's
first wave alone: they all arrive at once), its rest from its full run by the same sum.

--pairs: the points' 1k/1k and 1k/8k rows of one configuration often come from different
runs (the sweep dropped 1k/8k on 2026-03-27, InferenceX #911), so comparing them compares
images. The app's earlier fixture (EARLIER, 2026-05-05) still holds 1k/1k rows from the runs
behind today's 1k/8k rows: this prints each configuration's same-run pairs (mean and median
TTFT) from both fixtures.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
from dataclasses import replace
from typing import Any

from inferencex_points import APP_COMMIT, FIXTURE, RUN, SINCE, WAVES, first_wave

from xpusim.validation.adapters import predict
from xpusim.validation.points import Point, load_points

EARLIER = "cac6246e9fef70841e48e1434cbf10bb9a2802a8"  # 2026-05-05, app PR #318
ROW = re.compile(
    r"row hardware=(\S+) framework=(\S+) precision=(\S+) spec_method=(\S+) decode_tp=(\d+) "
    r"decode_ep=(\d+) dp_attention=(\S+) isl=(\d+) osl=(\d+) conc=(\d+) date=([\d-]+),"
)
"""A point's source names its dashboard row by these fields (inferencex_points.points)."""
FIELDS = ("hardware", "framework", "precision", "spec_method", "decode_tp", "decode_ep",
          "decode_dp_attention", "isl", "osl", "conc", "date")  # fmt: skip
"""ROW's groups, in its order."""


def fixture(app: str, commit: str) -> list[dict[str, Any]]:
    """The app's dashboard rows of single-node DeepSeek-R1 at `commit`."""
    shown = subprocess.run(["git", "-C", app, "show", f"{commit}:{FIXTURE}"],
                           capture_output=True, text=True, check=True)  # fmt: skip
    rows = json.loads(shown.stdout)
    return [r for r in rows if r["model"] == "dsr1" and not r["disagg"] and not r["is_multinode"]]


def row_key(r: dict[str, Any]) -> tuple[str, ...]:
    """A dashboard row's FIELDS as a point's source prints them."""
    return tuple(str(r[k]).lower() if isinstance(r[k], bool) else str(r[k]) for k in FIELDS)


def split(point: Point, row: dict[str, Any]) -> dict[str, Any]:
    """One TTFT point's measured and simulated mean, rest and first wave (s)."""
    load = point.get("load")
    alone = replace(point, setup={**point.setup, "load": {**load, "requests": load["value"],
                                                          "warmup": 0}})  # fmt: skip
    mean, first = predict(point).value, predict(alone).value
    median = row["metrics"]["median_ttft"]
    return {
        "id": point.id, "chip": row["hardware"], "engine": row["framework"],
        "conc": load["value"], "measured": point.value, "median": median,
        "first": first_wave(point.value, median), "predicted": mean,
        "rest_xpusim": (WAVES * mean - first) / (WAVES - 1), "first_xpusim": first,
    }  # fmt: skip


def with_measured_first(s: dict[str, Any]) -> float:
    """xpusim's mean with the measured first wave in place of its own, over the measured
    mean: what is left is the rest's error."""
    return (s["first"] + (WAVES - 1) * s["rest_xpusim"]) / WAVES / s["measured"]


def summary(splits: list[dict[str, Any]]) -> list[str]:
    """Medians by chip and engine: xpusim over the mean, its rest over the median, both
    first waves (s), and with_measured_first."""
    columns = {
        "xpusim/mean": lambda s: s["predicted"] / s["measured"],
        "rest/median": lambda s: s["rest_xpusim"] / s["median"],
        "first meas.": lambda s: s["first"],
        "first xpusim": lambda s: s["first_xpusim"],
        "with meas. first": with_measured_first,
    }
    lines = [f"{'group':<16} {'n':>3} " + " ".join(f"{c:>{len(c)}}" for c in columns)]
    groups: dict[str, list[dict[str, Any]]] = {"all": splits}
    for s in splits:
        groups.setdefault(f"{s['chip']}-{s['engine']}", []).append(s)
    for name, g in sorted(groups.items()):
        cells = (f"{statistics.median(f(s) for s in g):>{len(c)}.2f}" for c, f in columns.items())
        lines.append(f"{name:<16} {len(g):>3} " + " ".join(cells))
    return lines


def errors(splits: list[dict[str, Any]]) -> str:
    """Median APE of xpusim's mean TTFT as it stands, with the measured first wave in place
    of its own, and with the measured median in place of its rest; and the first wave's share
    of the gap between xpusim's mean and the measured one at the median point."""
    def ape(f: Any) -> float:
        return 100 * statistics.median(abs(f(s) / s["measured"] - 1) for s in splits)

    gaps = [s for s in splits if abs(s["measured"] - s["predicted"]) > 1e-3]
    share = statistics.median((s["first"] - s["first_xpusim"]) / WAVES
                              / (s["measured"] - s["predicted"]) for s in gaps)  # fmt: skip
    own = ape(lambda s: s["predicted"])
    first = ape(lambda s: with_measured_first(s) * s["measured"])
    rest = ape(lambda s: (s["first_xpusim"] + (WAVES - 1) * s["median"]) / WAVES)
    return (f"median APE {own:.1f}%; with the measured first wave {first:.1f}%; with the "
            f"measured median as the rest {rest:.1f}%; the first wave's share of the gap "
            f"{share:.2f}")


def same_run_pairs(rows: list[dict[str, Any]]) -> list[str]:
    """Each configuration's 1k/1k and 1k/8k rows at one concurrency from one run."""
    config = [k for k in RUN if k not in ("isl", "osl")] + ["spec_method"]
    by_run: dict[tuple, dict[int, dict[str, Any]]] = {}
    for r in rows:
        if r["isl"] == 1024 and r["date"] >= SINCE:
            by_run.setdefault((*(r[k] for k in config), r["run_url"]), {})[r["osl"]] = r
    lines = []
    for key, pair in sorted(by_run.items(), key=lambda kv: kv[0][:-1]):
        if {1024, 8192} <= pair.keys():
            a, b = (pair[n]["metrics"] for n in (1024, 8192))
            ratio = b["mean_ttft"] / a["mean_ttft"]
            lines.append(f"{'-'.join(map(str, key[:-1])):<48} {pair[1024]['date']}  mean "
                         f"{a['mean_ttft']:.3f} {b['mean_ttft']:.3f} (x{ratio:.2f})  median "
                         f"{a['median_ttft']:.3f} {b['median_ttft']:.3f}")  # fmt: skip
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("app", help="git directory of SemiAnalysisAI/InferenceX-app (or a fork)")
    parser.add_argument("--max-conc", type=int, default=None, help="only up to this many clients")
    parser.add_argument("--pairs", action="store_true", help="same-run 1k/1k and 1k/8k TTFTs")
    parser.add_argument("--json", action="store_true", help="print every point's split")
    args = parser.parse_args()
    if args.pairs:
        for commit in (EARLIER, APP_COMMIT):
            print(f"fixture at {commit[:7]}: config, date, mean TTFT 1k/1k 1k/8k, median")
            print("\n".join(same_run_pairs(fixture(args.app, commit))))
        return
    by_key = {row_key(r): r for r in fixture(args.app, APP_COMMIT)}
    splits = []
    for p in load_points():
        if p.id.startswith("inferencex-") and p.metric == "ttft_s":
            row = by_key[ROW.search(p.source).groups()]
            if args.max_conc is None or row["conc"] <= args.max_conc:
                splits.append(split(p, row))
    print(json.dumps(splits, indent=1) if args.json else "\n".join([*summary(splits),
                                                                    errors(splits)]))  # fmt: skip


if __name__ == "__main__":
    main()
