"""`xpusim plan`: the cheapest chip and configuration that serves a load within a TTFT and
a TPOT objective (planning/), its front and its launch files."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import click

from xpusim.cli_lists import PRICE_HELP, Finite, PriceType, count
from xpusim.cli_output import json_option
from xpusim.planning.search import DEFAULT_REQUESTS

WHY = {"dearer": "dearer", "slo": "SLO missed", "fit": "does not fit",
       "bound": "bound above the best", "refused": "refused by serve"}  # fmt: skip


@click.command()
@click.argument("model")
@click.option("--chip", "chip_ids", multiple=True, required=True,
              help="A chip to consider (repeat for several).")
@click.option("--slo-ttft-ms", type=Finite(), required=True, help="p99 TTFT objective (ms).")
@click.option("--slo-tpot-ms", type=Finite(), required=True, help="p99 TPOT objective (ms).")
@click.option("--rate", type=Finite(), default=None, help="Open loop: requests/s.")
@click.option("--concurrency", type=count(), default=None, help="Closed loop: clients.")
@click.option("--trace", type=click.Path(dir_okay=False), default=None,
              help="Replay a JSONL or CSV trace (arrival time, input and output tokens), "
                   "as serve --trace.")
@click.option("--chips", "num_chips", type=count(), default=None, help="Exactly N chips.")
@click.option("--max-chips", type=count(), default=None,
              help="Up to N chips (powers of two and N).")
@click.option("--prompt", type=count(), default=1024, show_default=True,
              help="Input tokens per request.")
@click.option("--gen", type=count(), default=128, show_default=True,
              help="Output tokens per request.")
@click.option("--requests", type=count(), default=None,
              help=f"Requests each simulation serves (default: {DEFAULT_REQUESTS}, or 8 per "
                   "client of --concurrency where that is more).")
@click.option("--price", type=PriceType(), default=None, help=PRICE_HELP)
@click.option("--mtp-acceptance", type=Finite(min=0, max=1, max_open=True), default=None,
              help="Also search speculative decoding with the model's own multi-token-"
                   "prediction module: the probability a draft token is accepted.")
@click.option("--mtp-draft-tokens", type=click.IntRange(1, 8), default=1, show_default=True,
              help="With --mtp-acceptance: draft tokens per step.")
@click.option("--exhaustive", is_flag=True,
              help="Simulate every configuration that fits (no pruning): slow, a check.")
@json_option
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Folder for the front's table (CSV) and picture (PNG).")
@click.option("--emit", type=click.Path(file_okay=False), default=None,
              help="Folder for the chosen configuration's launch command and Kubernetes "
                   "manifest.")  # fmt: skip
def plan(model: str, chip_ids: tuple[str, ...], out: str | None, emit: str | None,
         as_json: bool, **options: Any) -> None:  # fmt: skip
    """The cheapest configuration of each --chip, and overall, that serves MODEL's load
    within both objectives, ranked by dollars per million tokens delivered within them."""
    from xpusim.cli_output import emit_json as _emit_json
    from xpusim.cli_output import print_tables as _print
    from xpusim.files import writable_dir
    from xpusim.planning.search import plan as run_plan

    for folder, name in ((out, "--out"), (emit, "--emit")):
        if folder is not None:
            writable_dir(Path(folder), name)
    result = run_plan(model, list(chip_ids), **options)
    written: list[str] = []
    from xpusim.planning.front import front

    rows = front(result)
    if out is not None:
        written += _write_front(result, rows, Path(out))
    if emit is not None:
        from xpusim.planning.launch import emit as write_launch

        written += write_launch(result, Path(emit))
    if as_json:
        _emit_json({**result.to_dict(), "front": rows, "written": written})
        return
    _print(_view(result, rows))
    if written:
        _print("wrote " + ", ".join(written))


def _write_front(result: Any, rows: list[dict[str, Any]], out: Path) -> list[str]:
    import csv
    import importlib.util

    from xpusim.files import atomic

    out.mkdir(parents=True, exist_ok=True)
    path = out / "front.csv"
    with atomic(path) as f:
        writer = csv.DictWriter(f, fieldnames=["chip", "configuration", "tokens_per_s_per_user",
                                               "tokens_per_s_per_chip", "meets"])  # fmt: skip
        writer.writeheader()
        writer.writerows(rows)
    written = [str(path)]
    if rows and importlib.util.find_spec("matplotlib") is not None:
        from xpusim.planning.front import plot_front

        written += plot_front(result, rows, out)
    return written


def _view(result: Any, rows: list[dict[str, Any]]) -> Any:
    from rich.console import Group
    from rich.table import Table

    from xpusim.report.units import dollars, plain, si

    load = ", ".join(f"{k} {v:g}" if isinstance(v, int | float) else f"{k} {v}"
                     for k, v in result.load.items())  # fmt: skip
    title = (f"{result.model}: {load}; p99 TTFT <= {result.slo_ttft_ms:g} ms, "
             f"p99 TPOT <= {result.slo_tpot_ms:g} ms")  # fmt: skip
    table = Table(title=title)
    for name in ("chip", "best configuration", "p99 TTFT ms", "p99 TPOT ms", "SLO met",
                 "tok/s/chip", "tok/s/user", "$/M tokens", "$/M goodput", "others lost"):
        table.add_column(name, justify="left" if name in ("chip", "best configuration",
                                                          "others lost") else "right")
    for p in result.chips:
        lost = Counter(WHY[o.status] for o in p.outcomes if o is not p.best)
        why = ", ".join(f"{n} {w}" for w, n in lost.most_common())
        b = p.best
        if b is None:
            table.add_row(p.chip, "none meets both", *["-"] * 7, why)
            continue
        table.add_row(p.chip, b.config.label().split(" ", 2)[2], plain(b.ttft_p99_ms, 4),
                      plain(b.tpot_p99_ms), f"{b.slo_met:.0%}", si(b.tokens_per_s_per_chip),
                      si(b.tokens_per_s_per_user), dollars(b.usd_per_million),
                      dollars(b.usd_per_million_goodput), why)  # fmt: skip
    lines: list[Any] = [table]
    if result.best is not None:
        lines.append(f"best: {result.best.config.label()} at "
                     f"${result.best.usd_per_million_goodput:.3g} per million goodput tokens")
    else:
        lines.append(f"no configuration meets both objectives; binding: {result.binding}")
    lines += result.decisions
    for p in result.chips:
        if p.best is None:
            closest = [o for o in p.outcomes if o.status in ("slo", "fit")]
            if closest:
                lines.append(f"{p.chip}: e.g. {closest[0].config.label()}: {closest[0].reason}")
        lines += [f"{p.chip}: note: {n}" for n in p.notes]
    front = Table(title="front: tokens/s per chip against tokens/s per user (simulated)")
    for name in ("chip", "configuration", "tok/s/user", "tok/s/chip", "meets SLOs"):
        front.add_column(name, justify="right" if name.startswith("tok/s") else "left")
    for r in rows:
        front.add_row(r["chip"], r["configuration"], si(r["tokens_per_s_per_user"]),
                      si(r["tokens_per_s_per_chip"]), "yes" if r["meets"] else "no")
    if rows:
        lines.append(front)
    lines.append(f"{result.costed} configurations costed, {result.simulated} simulated, "
                 f"{result.seconds:.1f} s")
    return Group(*lines)
