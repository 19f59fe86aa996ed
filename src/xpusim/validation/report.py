"""The validation report as Markdown and a log-log parity plot (matplotlib, optional)."""

from __future__ import annotations

import statistics
from pathlib import Path

from xpusim.files import atomic_path, write_text
from xpusim.report.units import plain
from xpusim.validation.score import Validation, reason


def _fmt(value: float) -> str:
    """Four significant figures, never an exponent (12,345.6 tokens/s as '12350', not
    '1.235e+04')."""
    return plain(value, 4)


def markdown(v: Validation) -> str:
    lines = [
        "# xpusim validation against published measurements",
        "",
        f"{v.n_points} points scored, {v.n_skipped} not expressible yet. "
        f"Median absolute error **{v.median_ape:.1%}**, mean **{v.mean_ape:.1%}**.",
        "",
        "| point | chip | metric | measured | predicted | error | plan | bound by |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for p in sorted(v.points, key=lambda p: (p.chip, p.workload, p.id)):
        lines.append(
            f"| {p.id} | {p.chip} | {p.metric} | {_fmt(p.measured)} | {_fmt(p.predicted)} | "
            f"{p.ape:.0%} {'over' if p.ratio > 1 else 'under'} | {p.detail} | {p.bottleneck} |"
        )
    lines += ["", "## Worst points", ""]
    lines += [f"- **{p.id}**: {reason(p)}" for p in v.worst]
    lines += ["", "## Not expressible yet", ""]
    lines += [f"- {s.id} ({s.workload}, {s.metric}): {s.reason}" for s in v.skipped]
    lines += ["", "Sources: each point's `source` in src/xpusim/validation/published.json.", ""]
    return "\n".join(lines)


def parity_plot(v: Validation, path: Path) -> bool:
    """Writes the plot; False when matplotlib is not installed (the `plot` extra).

    One panel per metric (a time, a rate and a power do not share an axis): predicted over
    measured on a log scale against the measured value, so that a 2x miss is as far from the
    line as a 2x miss anywhere else, with the +-15% band and the 2x lines drawn. A parity
    plot of predicted against measured spanned 16 decades, and a 2x miss was a dot's width.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import NullFormatter
    except ImportError:
        return False
    metrics = sorted({p.metric for p in v.points})
    columns = min(3, len(metrics))
    rows = -(-len(metrics) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.4 * rows), squeeze=False)
    for ax, metric in zip(axes.flat, metrics, strict=False):
        pts = [p for p in v.points if p.metric == metric]
        ax.axhspan(1 / 1.15, 1.15, color="tab:green", alpha=0.15, lw=0, label="±15%")
        ax.axhline(1, color="grey", lw=0.8)
        for factor in (2, 0.5):
            ax.axhline(factor, color="grey", lw=0.8, ls="--")
        ax.scatter([p.measured for p in pts], [p.ratio for p in pts], s=18, alpha=0.8)
        ratios = [p.ratio for p in pts]
        span = max(4.0, *(max(r, 1 / r) * 1.3 for r in ratios))
        ax.set(xscale="log", yscale="log", ylim=(1 / span, span), xlabel=f"measured {metric}",
               ylabel="predicted / measured")  # fmt: skip
        ticks = [t for t in (0.25, 0.5, 1, 2, 4, 8) if 1 / span <= t <= span]
        ax.set_yticks(ticks, [f"{t:g}x" for t in ticks])
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())  # 2e13 3e13 4e13 overlapped
        median = statistics.median(p.ape for p in pts)
        ax.set_title(f"{metric}: {len(pts)} points, median error {median:.0%}", fontsize=9)
    for ax in list(axes.flat)[len(metrics):]:
        ax.set_visible(False)
    axes.flat[0].legend(fontsize=8, loc="upper left", title="dashed: 2x", title_fontsize=8)
    fig.suptitle(f"xpusim vs published: median error {v.median_ape:.0%} over {v.n_points} "
                 "points", fontsize=11)  # fmt: skip
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110)
    plt.close(fig)
    return True


def write(v: Validation, out_dir: Path) -> list[Path]:
    """validation.md and parity.png in `out_dir` (checked by writable_dir before validating)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [out_dir / "validation.md"]
    write_text(written[0], markdown(v))
    plot = out_dir / "parity.png"
    if parity_plot(v, plot):
        written.append(plot)
    return written
