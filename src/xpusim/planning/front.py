"""The front people compare systems by: for each chip, its simulated configurations'
output tokens/s per chip against tokens/s per user (1 / mean TPOT), keeping those no other
configuration of the chip beats on both, as rows and a PNG with the TPOT objective drawn,
the configurations that miss an objective hollow and the choice a star."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def front(result: Any) -> list[dict[str, Any]]:
    """Per chip, the Pareto-best simulated configurations that fit, by tokens/s per user,
    and the chip's best within the objectives (which a faster one that misses them can
    hide)."""
    rows = []
    for plan in result.chips:
        served = [o for o in plan.outcomes if o.simulated and o.tokens_per_s_per_chip]
        kept = [o for o in served
                if not any(p.tokens_per_s_per_chip >= o.tokens_per_s_per_chip
                           and p.tokens_per_s_per_user >= o.tokens_per_s_per_user
                           and (p.tokens_per_s_per_chip, p.tokens_per_s_per_user)
                           != (o.tokens_per_s_per_chip, o.tokens_per_s_per_user)
                           for p in served)]  # fmt: skip
        if plan.best is not None and plan.best not in kept:
            kept.append(plan.best)
        seen = set()
        for o in sorted(kept, key=lambda o: o.tokens_per_s_per_user):
            point = (o.tokens_per_s_per_chip, o.tokens_per_s_per_user)
            if point in seen:
                continue
            seen.add(point)
            rows.append({"chip": plan.chip, "configuration": o.config.label(),
                         "tokens_per_s_per_user": o.tokens_per_s_per_user,
                         "tokens_per_s_per_chip": o.tokens_per_s_per_chip,
                         "meets": o.meets})  # fmt: skip
    return rows


def plot_front(result: Any, rows: list[dict[str, Any]], out: Path) -> list[str]:
    """front.png under `out` (matplotlib, imported here: the plot extra)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from xpusim.files import atomic_path

    fig, ax = plt.subplots(figsize=(7, 4.5))
    best = result.best.config.label() if result.best is not None else None
    for chip in dict.fromkeys(r["chip"] for r in rows):
        mine = [r for r in rows if r["chip"] == chip]
        xs = [r["tokens_per_s_per_user"] for r in mine]
        ys = [r["tokens_per_s_per_chip"] for r in mine]
        (line,) = ax.plot(xs, ys, label=chip)
        for r, x, y in zip(mine, xs, ys, strict=True):  # hollow: misses an objective
            ax.plot(x, y, marker="*" if r["configuration"] == best else "o",
                    markersize=14 if r["configuration"] == best else 6, color=line.get_color(),
                    markerfacecolor=line.get_color() if r["meets"] else "white")  # fmt: skip
    slo = 1e3 / result.slo_tpot_ms
    ax.axvline(slo, color="grey", linestyle="--",
               label=f"TPOT objective {result.slo_tpot_ms:g} ms ({slo:.3g} tokens/s)")
    ax.set_xlabel("output tokens/s per user")
    ax.set_ylabel("output tokens/s per chip")
    ax.set_title(f"{result.model}: each chip's front (hollow: misses an objective; "
                 "star: the choice)", fontsize=10)  # fmt: skip
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = out / "front.png"
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    plt.close(fig)
    return [str(path)]
