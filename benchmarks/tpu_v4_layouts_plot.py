"""docs/chips/tpu-v4.md's figure: Pope et al.'s layouts for PaLM-540B on 64 TPU v4, each
phase of Table 2 costed under every layout (compiler/torus_layouts.py), the step split into
its parts, the layouts whose fullest chip does not fit hatched, the paper's time marked.

    python benchmarks/tpu_v4_layouts_plot.py [--out docs/images/tpu-v4-layouts.png]

Needs the `plot` extra. A few seconds.
"""

from __future__ import annotations

import argparse

import xpusim
from xpusim.compiler.torus_layouts import layout_cost, layouts
from xpusim.report.plots import pyplot_or_none

# Pope et al., arXiv 2211.05102, Table 2 (2048-token context, 64 tokens generated):
# title, batch, new tokens a sequence, cached tokens (decode: the mean over 64 steps),
# weight bytes a parameter, the paper's time for one step (decode: a token)
PHASES = [
    ("low-latency prefill\nbatch 1, int8", 1, 2048, 0, 1.0, 0.29),
    ("low-latency decode\nbatch 64, int8", 64, 1, 2080, 1.0, 1.82 / 64),
    ("high-throughput prefill\nbatch 512, bf16", 512, 2048, 0, 2.0, 85.2),
    ("high-throughput decode\nbatch 512, bf16", 512, 1, 2080, 2.0, 6.0 / 64),
]
PARTS = ("compute", "memory", "links", "collective latency")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/images/tpu-v4-layouts.png")
    args = parser.parse_args()
    plt = pyplot_or_none()
    if plt is None:
        raise SystemExit("needs the plot extra: pip install -e '.[plot]'")
    palm, tpu = xpusim.model("palm-540b"), xpusim.chip("tpu-v4")
    names = list(layouts())
    fig, axes = plt.subplots(1, len(PHASES), figsize=(16, 5.2))
    for ax, (title, batch, tokens, context, wbytes, published_s) in zip(axes, PHASES,
                                                                         strict=True):
        unit, scale = ("s", 1.0) if published_s > 1 else ("ms", 1e3)
        for i, name in enumerate(names):
            c = layout_cost(palm, tpu, 64, name, batch, tokens, context, wbytes)
            parts = (c.compute_s, c.memory_s, c.link_s, c.hop_s)
            fits = c.total_bytes <= tpu.capacity_bytes
            bottom = 0.0
            for k, (label, value) in enumerate(zip(PARTS, parts, strict=True)):
                ax.bar(i, value * scale, bottom=bottom, width=0.6, color=f"C{k}",
                       hatch=None if fits else "//", edgecolor="white",
                       label=label if i == 0 else None)  # fmt: skip
                bottom += value * scale
            ax.plot(i, c.step_s * scale, "k_", markersize=22, markeredgewidth=2,
                    label="step, as the layout composes its parts" if i == 0 else None)  # fmt: skip
            top = 3 * published_s * scale
            if c.step_s * scale > top:  # off the scale: its step written at the top
                ax.text(i, 0.97 * top, f"{c.step_s * scale:,.0f}", ha="center", va="top",
                        fontsize=8, rotation=90)  # fmt: skip
            print(f"{title.splitlines()[0]:26s} {name:26s} step {c.step_s * scale:9.2f} "
                  f"{unit}  {c.total_bytes / 1e9:6.1f} GB{'' if fits else ' (does not fit)'}")
        ax.set_ylim(0, 3 * published_s * scale)
        ax.axhline(published_s * scale, color="k", linestyle="--",
                   label="Pope et al., Table 2")  # fmt: skip
        ax.set_title(title, fontsize=10)
        ax.set_xticks(range(len(names)), names, rotation=40, ha="right", fontsize=8)
        ax.set_ylabel(f"time a step ({unit}); hatched: fullest chip over 32 GiB")
    axes[2].legend(fontsize=7, loc="upper right")
    fig.suptitle("PaLM-540B on 64 TPU v4 (4x4x4): each layout's step, its parts summed, "
                 "against the paper")  # fmt: skip
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
