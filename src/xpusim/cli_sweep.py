"""`xpusim sweep`: every combination of a command's options, its options generated from
`run`'s and `serve`'s (each taking a comma list); imported only when named (cli.py)."""

from __future__ import annotations

from typing import Any

import click

from xpusim.cli import run
from xpusim.cli_lists import RANKS, chip_counts, count, listed, offline_option, parse_set_lists
from xpusim.cli_output import emit_json as _emit_json
from xpusim.cli_output import input_shape_option as _input_shape_option
from xpusim.cli_output import print_tables as _print
from xpusim.cli_output import progress as _progress
from xpusim.cli_output import wide_option as _wide_option
from xpusim.cli_serve import serve as serve_command

SERVING_AXES = frozenset({"concurrency", "rate", "trace", "lengths", "scheduler", "engine",
                          "find", "slo_ttft_ms", "slo_tpot_ms", "requests", "window_ms"})
"""Sweep options that make each point a serving run (mode "serving")."""


@click.command()
@click.argument("model")
@click.option("--chip", "chip_ids", multiple=True, required=True, callback=chip_counts,
              help="Catalog id, system id or TOML path, ID:N for N chips of it (each "
                   "chip its own, as in compare; --chips sweeps counts); repeat for each "
                   "chip.")  # fmt: skip
@listed(run, skip=("chip_id", "show_ops", "input_shapes", "sets", "as_json", "offline", "wide"))
@listed(serve_command, skip=("chip_id", "out", "as_json", "offline", "precision",
                             "weight_precision", "attention_precision", "kv_precision",
                             "moe_backend", "chips", "tp", "pp", "dp", "ep", "dp_attention",
                             "prompt", "gen", "sla_ms", "price", "wide", "speculative",
                             "draft_tokens", "acceptance",
                             "acceptance_lengths", "accept_length"))  # run's, the same flags
@_input_shape_option
@click.option("--set", "sets", multiple=True, callback=parse_set_lists,
              metavar="FIELD=V1,V2,...", help="What-if chip figures to sweep (see run --set); "
              "repeat for several fields.")  # fmt: skip
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default="sweep",
    show_default=True,
    help="Folder for results.csv (resumed if there), results.parquet and plots.",
)
@click.option(
    "--workers",
    type=count(),
    default=None,
    help="Processes (default: every core; 1 runs in this process).",
)
@click.option("--ray", "use_ray", is_flag=True, help="Run on Ray (the 'ray' extra).")
@click.option("--ray-address", default=None, help="A Ray cluster to run on (implies --ray).")
@click.option("--no-plots", is_flag=True, help="Skip the PNG plots.")
@click.option(
    "--top",
    type=count(),
    default=20,
    show_default=True,
    help="Rows of the Pareto front shown.",
)
@click.option("--rank", type=click.Choice(RANKS), default="throughput",
              show_default=True, help="What the Pareto front trades against per-user speed "
              "(or latency): throughput per chip, or dollars per million tokens (--price).")
@offline_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (a summary).")
@_wide_option
def sweep(model: str, chip_ids: tuple[str, ...], input_shapes: dict, sets: tuple,
          out: str, workers: int | None, use_ray: bool, ray_address: str | None,
          no_plots: bool, top: int, rank: str, as_json: bool, **lists: Any) -> None:  # fmt: skip
    """Every combination of the options (comma lists: --batch 1,2,4,...,256) on every chip,
    with each chip's Pareto front, a CSV/Parquet file and plots in --out."""
    from pathlib import Path

    from xpusim import api
    from xpusim.explore.executor import choose
    from xpusim.explore.summary import summarize
    from xpusim.explore.sweep import Grid
    from xpusim.explore.sweep import run as run_sweep
    from xpusim.report.sweep_tables import front_table
    from xpusim.report.units import si

    axes = {k: v if isinstance(v, tuple) else (v,) for k, v in lists.items() if v}
    targets, counts = _counted(chip_ids, axes)
    if SERVING_AXES & set(axes) and "mode" not in axes:
        axes["mode"] = ("serving",)  # a load to serve: each point is an `xpusim serve`
    grid = Grid(api.model(model, input_shapes), targets, sets, axes, counts)
    executor = choose(workers, use_ray or ray_address is not None, ray_address)
    with _progress(f"sweeping {grid.size:,} points") as progress:
        result = run_sweep(grid, Path(out), executor, progress)
    summary = summarize(grid, result, Path(out), plots=not no_plots, rank=rank)
    if as_json:
        _emit_json(summary.to_dict())
        return
    inputs = [k for k, v in axes.items() if len(v) > 1 and k != "chips"]
    inputs += [f"set.{path}" for path, values in sets if len(values) > 1]
    _print(front_table(summary, inputs, top))
    for target, row in summary.best.items():
        what = "lowest cost" if rank == "cost" else "best throughput per chip"
        _print(f"{what} on {target}: " + ", ".join(
            f"{k} {si(row[k])}" if isinstance(row[k], float) else f"{k} {row[k]}"
            for k in ("batch", "precision", "chips", *summary.objectives) if k in row))  # fmt: skip
    workers = f"{summary.workers} {summary.executor} worker(s)"
    resumed = summary.n_points - summary.n_simulated
    _print(f"{summary.n_points} points ({summary.n_simulated} simulated now, {resumed} resumed), "
           f"{summary.n_fit} fit, {summary.n_errors} errors; simulated in "
           f"{summary.simulate_s:.2f} s on {workers}")  # fmt: skip
    for line in summary.notes:
        _print(f"note: {line}")
    _print("wrote " + ", ".join(summary.files))


def _counted(
    chips: tuple[tuple[str, int | None], ...], axes: dict[str, tuple]
) -> tuple[tuple[str, ...], dict[str, tuple[int, ...]]]:  # fmt: skip
    """The chip ids, and the counts `--chip ID:N` gave each (compare's meaning: that chip's
    points run at N, the others at --chips'; h100-sxm:1 and h100-sxm:8 both run). A --chips
    list beside a different N is refused, as `run` refuses one: which was meant is unknown.
    So is a chip given both with and without a count (h100-sxm and h100-sxm:8): compare runs
    both, but a target here has one chips axis, and the plain one's points would be lost."""
    from xpusim.errors import UserError

    counts: dict[str, tuple[int, ...]] = {}
    for name, n in chips:
        if n is not None:
            counts[name] = tuple(dict.fromkeys((*counts.get(name, ()), n)))
    plain = next((name for name, n in chips if n is None and name in counts), None)
    if plain is not None:
        raise UserError(f"--chip {plain} and --chip {plain}:{counts[plain][0]} disagree: "
                        "give each count of a chip as ID:N")  # fmt: skip
    for name, own in counts.items():
        if "chips" in axes and axes["chips"] != own:
            raise UserError(f"--chip {name}:{','.join(map(str, own))} and --chips "
                            f"{','.join(map(str, axes['chips']))} disagree: give a chip's count "
                            "once (ID:N, or --chips for the chips without one)")  # fmt: skip
    return tuple(dict.fromkeys(name for name, _ in chips)), counts
