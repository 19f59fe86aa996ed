"""PNG plots of a serving run (the `plot` extra): the timeline of batch, queue and KV cache,
the measured requests' TTFT and TPOT distributions, and the latency
percentiles of a --find max-rate's trials against load."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from xpusim.files import atomic_path
from xpusim.report.plots import pyplot_or_none
from xpusim.serving.metrics import Frames


def plot_timeline(frames: Frames, result: Any, out: Path) -> list[str]:
    plt = pyplot_or_none()
    if plt is None:
        return []
    t = frames.timeline
    fig, axes = plt.subplots(3, 1, figsize=(8, 7), sharex=True)
    axes[0].plot(t["end_s"], t["decodes"] + t["prefills"], lw=0.6)
    axes[0].set_ylabel("sequences / iteration")
    axes[1].plot(t["end_s"], t["waiting"], lw=0.6, color="tab:orange")
    axes[1].set_ylabel("waiting requests")
    axes[2].plot(t["end_s"], 100 * t["kv_used"], lw=0.6, color="tab:green")
    axes[2].set_ylabel("KV cache used (%)")
    axes[2].set_xlabel("time (s)")
    fig.suptitle(f"{result.model} on {result.chips} {result.chip}: {result.load['kind']} "
                 f"{result.load['value']}")  # fmt: skip
    fig.tight_layout()
    written = [_save(plt, fig, out / "timeline.png"),
               plot_latency_distribution(frames, result, out)]
    if result.search and result.search.get("find") == "max-rate":
        written.append(plot_latency_load(result.search["trials"], result, out))
    return written


def plot_latency_distribution(frames: Frames, result: Any, out: Path) -> str:
    """The measured requests' TTFT and TPOT as cumulative distributions (every request a
    step, so a tail is as visible as the median), p50 and p99 marked; warm-up requests and
    one-token requests' TPOT are left out, as in the summary table."""
    plt = pyplot_or_none()
    rows = frames.requests
    measured = rows["measured"].astype(bool)
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    for ax, key, label in ((axes[0], "ttft_s", "TTFT"), (axes[1], "tpot_s", "TPOT")):
        values = np.sort(1e3 * rows[key][measured])
        values = values[np.isfinite(values)]
        if len(values):
            ax.step(values, np.arange(1, len(values) + 1) / len(values), where="post")
            for q, style in ((50, "--"), (99, ":")):
                ax.axvline(np.percentile(values, q), ls=style, color="grey",
                           label=f"p{q} {np.percentile(values, q):.3g} ms")  # fmt: skip
            ax.legend(fontsize=8, loc="lower right")
        ax.set_xlabel(f"{label} (ms)")
        ax.set_ylabel("share of requests")
    fig.suptitle(f"{result.model} on {result.chips} {result.chip}: {result.load['kind']} "
                 f"{result.load['value']:.3g}")  # fmt: skip
    fig.tight_layout()
    return _save(plt, fig, out / "latency.png")


def plot_latency_load(trials: list[dict], result: Any, out: Path) -> str:
    """p99 TTFT and TPOT of each trial rate, with the SLOs and the answer; a hollow marker
    is a trial that failed (an SLO, or the arrivals outran the system)."""
    plt = pyplot_or_none()
    rows = sorted((t for t in trials if not t.get("stopped")), key=lambda r: r["rate"])
    rate = [r["rate"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4))
    for key, marker, label in (("ttft_p99_s", "o", "p99 TTFT"), ("tpot_p99_s", "s", "p99 TPOT")):
        (line,) = ax.plot(rate, [1e3 * r[key] for r in rows], "-", label=label)
        for r in rows:
            ax.plot(r["rate"], 1e3 * r[key], marker, color=line.get_color(),
                    markerfacecolor=line.get_color() if r["meets"] else "white")  # fmt: skip
    for slo, style in ((result.slo_ttft_ms, "--"), (result.slo_tpot_ms, ":")):
        if slo is not None:
            ax.axhline(slo, ls=style, color="grey")
    ax.axvline(result.search["rate"], color="black", lw=0.8)
    ax.set_xlabel("requests/s")
    ax.set_ylabel("ms")
    ax.set_yscale("log")
    ax.legend()
    ax.set_title(f"{result.model} on {result.chips} {result.chip}: latency against load")
    fig.tight_layout()
    return _save(plt, fig, out / "latency_load.png")


def _save(plt: Any, fig: Any, path: Path) -> str:
    """The figure written whole or not at all, and closed; its path as text."""
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=120)
    plt.close(fig)
    return str(path)
