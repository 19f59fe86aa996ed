"""The README's latency-against-load figure: Llama-2-70B (int8) served at rising Poisson
rates on Groq's 576-chip system and on a DGX H100, p50 and p99 TTFT and mean TPOT.

    python benchmarks/serve_load_plot.py [--out docs/serving/latency_load.png]

Needs the `plot` extra. About a minute on one core.
"""

from __future__ import annotations

import argparse

import xpusim
from xpusim.report.plots import pyplot_or_none

SYSTEMS = {"Groq, 576 LPUs": ("groq-lpu", 576), "DGX H100, 8 GPUs": ("dgx-h100", None)}
RATES = (1, 2, 4, 6, 8, 10, 12, 16, 20, 24, 28, 32)
OPTIONS = dict(precision="int8", prompt=1024, gen=256, requests=1000, seed=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/serving/latency_load.png")
    args = parser.parse_args()
    plt = pyplot_or_none()
    if plt is None:
        raise SystemExit("needs the plot extra: pip install -e '.[plot]'")
    fig, (ttft, tpot) = plt.subplots(1, 2, figsize=(10, 4))
    for label, (target, chips) in SYSTEMS.items():
        rows = []
        for rate in RATES:
            r = xpusim.serve("llama-2-70b", target, chips=chips, rate=rate, **OPTIONS)
            rows.append((rate, r.ttft_s.p50, r.ttft_s.p99, r.tpot_s.mean))
            print(f"{label:18s} {rate:3d}/s  TTFT p50 {r.ttft_s.p50 * 1e3:8.0f} ms  p99 "
                  f"{r.ttft_s.p99 * 1e3:8.0f} ms  TPOT {r.tpot_s.mean * 1e3:6.1f} ms  "
                  f"{r.output_tokens_per_s:6.0f} tok/s", flush=True)
        rates = [row[0] for row in rows]
        (line,) = ttft.plot(rates, [1e3 * row[1] for row in rows], "o-", label=f"{label} p50")
        ttft.plot(rates, [1e3 * row[2] for row in rows], "o--", color=line.get_color(),
                  label=f"{label} p99")  # fmt: skip
        tpot.plot(rates, [1e3 * row[3] for row in rows], "s-", color=line.get_color(),
                  label=label)  # fmt: skip
    for ax, title in ((ttft, "time to first token"), (tpot, "time per output token (mean)")):
        ax.set_yscale("log")
        ax.set_xlabel("requests/s (Poisson)")
        ax.set_ylabel("ms")
        ax.set_title(title)
        ax.legend(fontsize=8)
    fig.suptitle("Llama-2-70B int8, 1,024 -> 256 tokens: latency against load")
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
