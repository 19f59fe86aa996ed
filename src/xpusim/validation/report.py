"""The validation report as Markdown and a log-log parity plot (matplotlib, optional)."""

from __future__ import annotations

from pathlib import Path

from xpusim.files import atomic_path, write_text
from xpusim.validation.score import Validation, reason


def _fmt(value: float) -> str:
    return f"{value:.4g}"


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
    """Writes the plot; False when matplotlib is not installed (the `plot` extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(6, 6))
    metrics = sorted({p.metric for p in v.points})
    for metric in metrics:
        pts = [p for p in v.points if p.metric == metric]
        ax.scatter([p.measured for p in pts], [p.predicted for p in pts], label=metric, s=36)
    values = [x for p in v.points for x in (p.measured, p.predicted)]
    low, high = min(values) / 2, max(values) * 2
    ax.plot([low, high], [low, high], color="grey", lw=1, label="exact")
    for factor, style in ((1.15, ":"), (2, "--")):
        ax.plot([low, high], [low * factor, high * factor], color="grey", lw=0.8, ls=style)
        ax.plot([low, high], [low / factor, high / factor], color="grey", lw=0.8, ls=style)
    title = f"xpusim vs published: median error {v.median_ape:.0%} over {v.n_points}"
    ax.set(xscale="log", yscale="log", xlim=(low, high), ylim=(low, high),
           xlabel="measured (published)", ylabel="predicted (xpusim)", title=title)  # fmt: skip
    ax.legend(fontsize=8, title="dotted: ±15%, dashed: 2x", title_fontsize=8)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=120)
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
