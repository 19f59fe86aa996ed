"""PNG plots of a sweep: the trade-off with each chip's Pareto front, a roofline of the ops of
a chosen point on each chip, and where its time and memory go.

matplotlib is the optional `plot` extra and is imported only when a plot is drawn, so the
rest of xpusim (and `xpusim --help`) never pays for it; `pyplot_or_none` says whether it is
there. Every function only draws what it is given: rows and results come from the sweep.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from xpusim.compiler.partition import plan_text
from xpusim.explore.pareto import Objective
from xpusim.hardware.spec import Chip
from xpusim.ir.dtypes import DType
from xpusim.report.units import seconds

Row = Mapping[str, Any]
MAX_LABELS = 10  # front points labelled per chip; more would cover the plot
MAX_FAINT = 4000
"""Points drawn faintly behind each target's front, at most (every k-th of those that fit,
in grid order): a plot of a million points would take minutes to draw and look the same."""


def pyplot_or_none() -> Any:
    """matplotlib.pyplot on the non-interactive backend, or None when it is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def pareto_plot(
    rows: Sequence[Row],
    fronts: Mapping[str, Sequence[int]],
    objectives: tuple[Objective, Objective],
    varied: Sequence[str],
    title: str,
    path: Path,
) -> None:
    """Every point that fits, faint, and each target's front as a line, its points labelled
    with the options that vary across the sweep (batch, precision, plan...)."""
    plt = pyplot_or_none()
    x, y = objectives
    fig, ax = plt.subplots(figsize=(10, 6.5))
    fig.subplots_adjust(left=0.09, right=0.97, bottom=0.09, top=0.93)
    colors = plt.get_cmap("tab10")
    for n, (target, front) in enumerate(fronts.items()):
        color = colors(n % 10)
        mine = [r for r in rows if r["target"] == target]
        fit = [r for r in mine if r.get("fits") is True and not r.get("error")
               and _positive(r, x, y)]  # fmt: skip  (log axes: a zero rate is not drawn)
        front = [i for i in front if _positive(rows[i], x, y)]
        drawn = fit[:: max(1, -(-len(fit) // MAX_FAINT))]
        ax.scatter([r[x.column] for r in drawn], [r[y.column] for r in drawn], s=10,
                   alpha=0.25, color=color, linewidths=0)  # fmt: skip
        label = f"{target}: {len(front)} on front, {len(fit)} of {len(mine)} fit"
        ax.plot([rows[i][x.column] for i in front], [rows[i][y.column] for i in front],
                "o-", color=color, lw=1.8, ms=4.5, label=label)  # fmt: skip
        step = max(1, -(-len(front) // MAX_LABELS))
        for i in front[::step]:
            ax.annotate(_short(rows[i], varied), (rows[i][x.column], rows[i][y.column]),
                        textcoords="offset points", xytext=(4, 4), fontsize=6.5,
                        color=color)  # fmt: skip
    ax.set(xscale="log", yscale="log", xlabel=_axis(x), ylabel=_axis(y), title=title)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8, loc="best")
    _save(plt, fig, path)


def _positive(row: Row, x: Objective, y: Objective) -> bool:
    return all(isinstance(v, int | float) and v > 0 for v in (row[x.column], row[y.column]))


def _axis(o: Objective) -> str:
    return f"{o.label}, {'higher' if o.maximize else 'lower'} is better"


def _short(row: Row, varied: Sequence[str]) -> str:
    """A front point's label: the varied options, tersely ('b64 int8 tp8xpp2')."""
    parts = []
    for name in varied:
        value = row.get(name)
        if name == "chips":
            parts.append(plan_text({k.removeprefix("plan."): v for k, v in row.items()
                                    if k.startswith("plan.")}, sep="x"))  # fmt: skip
        elif name == "batch":
            parts.append(f"b{value}")
        elif value is not None:
            parts.append(f"{value:g}" if isinstance(value, float) else str(value))
    return " ".join(parts)


def roofline_plot(points: Sequence[tuple[str, Any, Chip]], path: Path) -> None:
    """One panel per (label, result, chip): each distinct op's attained FLOP/s against its
    arithmetic intensity, under the chip's compute roof and a bandwidth roof per memory."""
    plt = pyplot_or_none()
    fig, axes = plt.subplots(1, len(points), figsize=(6 * len(points), 5), squeeze=False)
    fig.subplots_adjust(left=0.1 / len(points), right=0.98, bottom=0.11, top=0.92,
                        wspace=0.3)  # fmt: skip
    for ax, (label, result, chip) in zip(axes[0], points, strict=True):
        ops = [op for op in result.ops if op.flops > 0 and op.bytes > 0 and op.time_s > 0]
        intensity = [op.flops / op.bytes for op in ops]
        low, high = min(intensity, default=1) / 4, max(intensity, default=1e3) * 4
        peak = chip.peak(DType.parse(result.precision))
        ax.plot([low, high], [peak, peak], color="black", lw=1.5,
                label=f"{result.precision} peak {peak / 1e12:.0f} TFLOP/s")  # fmt: skip
        for level in chip.memory:
            bw = level.bandwidth_bytes_per_s.value
            ax.plot([low, high], [min(bw * low, peak), min(bw * high, peak)], lw=1, ls="--",
                    label=f"{level.name} {bw / 1e12:.3g} TB/s")  # fmt: skip
        for phase, marker in (("prefill", "o"), ("decode", "^"), ("forward", "s")):
            mine = [op for op in ops if op.phase == phase]
            if mine:
                ax.scatter([op.flops / op.bytes for op in mine],
                           [op.flops / op.time_s for op in mine], marker=marker, s=28,
                           label=f"{phase} ops", zorder=3)  # fmt: skip
        for name, at in _labels_apart(sorted(ops, key=lambda o: -o.share)[:6]):
            ax.annotate(name, at, textcoords="offset points", xytext=(3, -9), fontsize=7)
        ax.set(xscale="log", yscale="log", xlim=(low, high), title=label,
               xlabel="arithmetic intensity (FLOPs per byte moved)",
               ylabel="attained FLOP/s")  # fmt: skip
        ax.grid(True, which="both", alpha=0.25)
        ax.legend(fontsize=7, loc="lower right")
    _save(plt, fig, path)


def _labels_apart(ops: Sequence[Any], decades: float = 0.12) -> list[tuple[str, tuple]]:
    """The ops' labels and points, leaving out a label that would print over one already
    placed (within `decades` on both log axes): one op's prefill and decode points often
    sit together, and their labels overlapped."""
    placed: list[tuple[str, tuple]] = []
    for op in ops:
        at = (op.flops / op.bytes, op.flops / op.time_s)
        near = any(abs(np.log10(at[0] / x)) < decades and abs(np.log10(at[1] / y)) < decades
                   for _, (x, y) in placed)  # fmt: skip
        if not near:
            placed.append((op.name.rsplit(".", 1)[-1], at))
    return placed


def breakdown_plot(points: Sequence[tuple[str, Any]], path: Path) -> None:
    """Left: each point's time by op kind, as shares of each phase (its TTFT and one token's
    decode trip, or its one pass), the phase's total written beside its bar; right: the
    fullest chip's memory by what it holds, against its capacity."""
    plt = pyplot_or_none()
    height = 1.4 + 0.9 * len(points)
    fig, (time_ax, mem_ax) = plt.subplots(1, 2, figsize=(14, height))
    fig.subplots_adjust(left=0.21, right=0.88, wspace=1.15, bottom=0.9 / height,
                        top=1 - 0.4 / height)  # fmt: skip
    bars = [(f"{label}: {phase}", by_kind) for label, result in points
            for phase, by_kind in _time_by_kind(result).items()]  # fmt: skip
    kinds = sorted({k for _, by_kind in bars for k in by_kind})
    totals = [sum(by_kind.values()) or 1.0 for _, by_kind in bars]
    colors = plt.get_cmap("tab20")
    left = [0.0] * len(bars)
    for n, kind in enumerate(kinds):
        shares = [by_kind.get(kind, 0.0) / t for (_, by_kind), t in zip(bars, totals, strict=True)]
        time_ax.barh(range(len(bars)), shares, left=left, label=kind, color=colors(n % 20))
        left = [a + b for a, b in zip(left, shares, strict=True)]
    for i, total in enumerate(totals):
        time_ax.annotate(seconds(total), (1.01, i), va="center", fontsize=8)
    time_ax.set_yticks(range(len(bars)), [name for name, _ in bars], fontsize=8)
    time_ax.invert_yaxis()
    time_ax.set(xlim=(0, 1.15), xlabel="share of the phase's time (ops on one token's path)",
                title="time by op kind")  # fmt: skip
    time_ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    memories = [(label, _memory(result)) for label, result in points]
    roles = [k for k in memories[0][1] if k not in ("total", "capacity")]
    for n, role in enumerate(roles):
        left = [sum(m[r] for r in roles[:n]) / 1e9 for _, m in memories]
        mem_ax.barh(range(len(memories)), [m[role] / 1e9 for _, m in memories], left=left,
                    label=role)  # fmt: skip
    mem_ax.scatter([m["capacity"] / 1e9 for _, m in memories], range(len(memories)),
                   marker="|", s=400, color="black", label="capacity", zorder=3)  # fmt: skip
    mem_ax.set_yticks(range(len(memories)), [label for label, _ in memories], fontsize=8)
    mem_ax.invert_yaxis()
    mem_ax.set(xlabel="GB on the fullest chip", title="memory")
    mem_ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    _save(plt, fig, path)


def _time_by_kind(result: Any) -> dict[str, dict[str, float]]:
    """Seconds per op kind on each phase's critical path: op count x time per op."""
    phases: dict[str, dict[str, float]] = {}
    for op in result.ops:
        kinds = phases.setdefault(op.phase, {})
        kinds[op.kind] = kinds.get(op.kind, 0.0) + op.count * op.time_s
    return phases


def _memory(result: Any) -> dict[str, float]:
    memory = getattr(result, "per_chip_memory_bytes", None) or result.memory_bytes
    return {k: float(v) for k, v in vars(memory).items()}


def _save(plt: Any, fig: Any, path: Path) -> None:
    """Saved in the layout each plot fixed when it made its figure: no tight_layout, whose
    text measuring was most of a small sweep's time."""
    from xpusim.files import atomic_path

    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=130)
    plt.close(fig)
