"""How far `serve`'s answers have been from measured runs, by engine and chip: the error a
user reads beside a prediction, not only in docs/validation.md.

A serving prediction is not equally good everywhere. Over the published runs xpusim scores,
TTFT under load comes out at about half of what the engines measured, while TPOT is within
20% on most engines; on one engine and chip the miss can be 0.3x or 1.4x. Someone choosing
hardware from a `serve` answer should see that beside it. So `xpusim validate` results are
reduced here, per (engine profile, chip) and metric, to the predicted/measured ratios' median
and middle half (the quartiles), and `serve` shows those of the group its run falls in.

The figures are read from error_bands.json, which benchmarks/error_bands.py writes from a
full `xpusim validate --json` run; nothing here feeds a prediction. The file names the tree
its validation ran on and the serving points it held, and a test fails when the points
change without it being written again.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

from xpusim.hardware.spec import base_id
from xpusim.serving.engines import lineage
from xpusim.validation.points import Point

BANDS = Path(__file__).with_name("error_bands.json")
METRICS = {"ttft_s": "TTFT", "tpot_s": "TPOT", "output_tokens_per_s": "output tokens/s"}
"""The serving metrics a band is kept for, as a note names them."""


def _band(ratios: list[float]) -> dict[str, float]:
    """The ratios' count, median and quartiles (predicted / measured), and the median
    absolute error, each rounded as a note prints it."""
    q1, _, q3 = statistics.quantiles(ratios, n=4, method="inclusive") if len(ratios) > 1 \
        else (ratios[0],) * 3
    return {"points": len(ratios), "median_ratio": round(statistics.median(ratios), 3),
            "q1_ratio": round(q1, 3), "q3_ratio": round(q3, 3),
            "median_ape": round(statistics.median(abs(r - 1) for r in ratios), 3)}


def build(scored: Iterable[dict[str, Any]], points: dict[str, Point], tree: str) -> dict:
    """The bands of a validation run's scored points (`xpusim validate --json`'s "points"),
    each serving point's engine profile read from its published setup; `tree` names the
    commit the run scored."""
    groups: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    sources: dict[tuple[str, str], set[str]] = defaultdict(set)
    overall: dict[str, list[float]] = defaultdict(list)
    for s in scored:
        point = points[s["id"]]
        if point.workload != "llm-serving" or s["metric"] not in METRICS:
            continue
        key = (str(point.setup["engine_profile"]), s["chip"])
        groups[key][s["metric"]].append(s["ratio"])
        sources[key].add(s["id"].split("-", 1)[0])
        overall[s["metric"]].append(s["ratio"])
    return {
        "about": "xpusim serve's predicted / measured on published serving runs, by engine "
                 "profile and chip (xpusim/validation/error_bands.py)",
        "tree": tree,
        "serving_points": sum(len(r) for r in overall.values()),
        "all": {m: _band(r) for m, r in sorted(overall.items())},
        "groups": [{"engine": engine, "chip": chip, "sources": sorted(sources[engine, chip]),
                    "metrics": {m: _band(r) for m, r in sorted(metrics.items())}}
                   for (engine, chip), metrics in sorted(groups.items())],
    }


@cache
def _bands() -> dict:
    return json.loads(BANDS.read_text())


def measured_error(engine: str, chip: str) -> dict[str, Any]:
    """The band of `engine`'s runs on `chip` (a what-if copy: the chip it was made from),
    or of the release the profile is written over where its own release has none; else the
    band of every serving point, with "engine" and "chip" None."""
    groups = {(g["engine"], g["chip"]): g for g in _bands()["groups"]}
    for name in lineage(engine):
        if (group := groups.get((name, base_id(chip)))) is not None:
            return group
    return {"engine": None, "chip": None, "sources": [], "metrics": _bands()["all"]}


def note(engine: str, chip: str) -> str:
    """One line: what `measured_error` found, as `serve` prints it."""
    band = measured_error(engine, chip)
    metrics = band["metrics"]
    figures = ", ".join(
        f"{label} {metrics[m]['median_ratio']:.2f}x ({metrics[m]['q1_ratio']:.2f}-"
        f"{metrics[m]['q3_ratio']:.2f}) of {metrics[m]['points']}"
        for m, label in METRICS.items() if m in metrics)
    if band["engine"] is None:
        where = f"of every engine and chip (none of engine {engine} on {base_id(chip)} is scored)"
    else:
        sources = len(band["sources"])
        release = "" if band["engine"] == engine else f"; {engine} is written over that release"
        where = (f"of engine {band['engine']} on {band['chip']} ({sources} "
                 f"source{'s' if sources > 1 else ''}{release})")
    return (f"measured error {where}: predicted / measured, median (middle half) of the "
            f"published runs scored, {figures}; docs/validation.md")
