"""The `xpusim` command: a thin layer that parses options, calls the API and formats results.

Heavy modules are imported inside the commands so that `xpusim --help` stays fast. Every
user mistake ends as one line on stderr and exit status 2; `--json` prints exactly one JSON
object on stdout.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any, ClassVar

import click

from xpusim.cli_lists import (
    CHIP_HELP,
    PRECISIONS,
    chip_counts,
    count,
    merged_chips,
    offline_option,
    parse_sets,
)
from xpusim.cli_output import emit_json as _emit_json
from xpusim.cli_output import given as _given
from xpusim.cli_output import input_shape_option as _input_shape_option
from xpusim.cli_output import json_option as _json_option
from xpusim.cli_output import listing as _listing
from xpusim.cli_output import print_tables as _print
from xpusim.cli_output import progress as _progress
from xpusim.cli_output import run_options as _workload_options
from xpusim.cli_output import wide_option as _wide_option

_set_option = click.option(
    "--set", "sets", multiple=True, callback=parse_sets, metavar="FIELD=VALUE",
    help="What-if chip: any figure `xpusim chip ID` lists, e.g. "
    "memory.dram.bandwidth_bytes_per_s=4e12 (memory levels by name, by kind, sram being the "
    "largest on-chip one, or by index: memory[1]); repeatable.",
)  # fmt: skip


def _what_if(chip_id: str, sets: list[tuple[str, float]]) -> Any:
    """What --chip names, with the --set figures changed (validated like a chip file)."""
    from xpusim import api
    from xpusim.hardware.whatif import apply

    return apply(api.target(chip_id), sets)


def _model_label(result: Any) -> str:
    """The model's name, with its parameters where the result carries them."""
    params = getattr(result, "params", None)
    if not params:
        return result.model
    active = result.active_params
    more = f", {_count(active)} active" if active != params else ""
    return f"{result.model} ({_count(params)} parameters{more})"


def _count(params: int) -> str:
    """A parameter count as people write it: 1.03T, 46.7B, 60.5M."""
    if params >= 1e12:
        return f"{params / 1e12:.3g}T"
    return f"{params / 1e9:.3g}B" if params >= 1e9 else f"{params / 1e6:.3g}M"


def _notes(result: Any) -> list[str]:
    """Lines under a result's table: what a what-if chip changed, its notes, then why it does
    not fit or, for training, where the chip falls short."""
    from xpusim.hardware.spec import base_id, display_id

    tail = getattr(result, "limits", None) or [result.reason]
    changed = result.chip[len(base_id(result.chip)):]
    what_if = [f"{display_id(result.chip)} is a what-if {base_id(result.chip)}: "
               + changed.replace("][", ", ").strip("[]")] if changed else []  # fmt: skip
    return [line for line in [*what_if, *result.notes, *tail] if line]


def _results_view(results: list, title: str) -> Any:
    """The table for the results' kind, titled with the shape they share. Dispatched by the
    result class's name, so that showing one kind imports no other kind's scenario."""
    for result in results:
        result.to_dict()  # the result boundary's check (result.py), as --json has it
    first, kind = results[0], type(results[0]).__name__
    if kind == "TrainingResult":
        from rich.console import Group

        from xpusim.report.training_tables import breakdown_table, training_table

        shape = f"{first.batch} sequences of {first.prompt} tokens per step"
        return Group(training_table(results, f"{title}: training, {shape}"),
                     breakdown_table(results))  # fmt: skip
    if kind == "GraphInferenceResult":
        from xpusim.report.graph_tables import graph_results_table

        inputs = ", ".join(f"{k} {'x'.join(map(str, v))}" for k, v in first.inputs.items())
        return graph_results_table(results, f"{title}: one pass ({inputs})")
    if kind == "RecsysResult":  # with --sla-ms each chip has its own batch: a column
        from xpusim.report.tables import recsys_table

        shape = f"largest batch within {first.sla_ms:g} ms" if first.sla_ms else "one batch"
        return recsys_table(results, f"{title}: {shape}")
    from xpusim.report.tables import results_table

    flight = {r.sequences_in_flight for r in results if r.fits}
    shown = f" ({', '.join(map(str, sorted(flight)))} sequences in flight)" if flight - {
        first.batch} else ""  # a pipeline's microbatches: tok/s counts every one of them
    return results_table(results, f"{title}: batch {first.batch}{shown}, prompt {first.prompt},"
                                  f" gen {first.gen}")  # fmt: skip


class _Commands(click.Group):
    """The group, with `serve` and `sweep` imported only when named or listed: their
    options are generated from serving/options.py's fields and from `run`'s and `serve`'s
    options, work that `xpusim run` need not do."""

    LAZY: ClassVar[dict[str, str]] = {"plan": "xpusim.cli_plan", "serve": "xpusim.cli_serve",
                                      "sweep": "xpusim.cli_sweep"}  # fmt: skip

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.LAZY})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.LAZY and cmd_name not in self.commands:
            import importlib

            self.add_command(getattr(importlib.import_module(self.LAZY[cmd_name]), cmd_name))
        return super().get_command(ctx, cmd_name)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]},
             no_args_is_help=False)  # fmt: skip
@click.version_option(package_name="xpusim")
def cli() -> None:
    """Simulate ML models on AI accelerators: latency, throughput, energy, memory fit."""


@cli.command()
@_json_option
@_wide_option
def chips(as_json: bool) -> None:
    """List the chip catalog."""
    from xpusim.hardware.catalog import chip_ids, load_chip
    from xpusim.report.tables import chips_table

    _listing(as_json, "chips", [load_chip(i) for i in chip_ids()], _chip_summary, chips_table)


def _chip_summary(chip: Any) -> dict:
    return {
        "id": chip.id,
        "name": chip.name,
        "vendor": chip.vendor,
        "year": chip.year,
        "process": chip.process,
        "peak_ops_per_s": {d.value: f.value for d, f in chip.peak_ops_per_s.items()},
        "memory_capacity_bytes": chip.capacity_bytes,
        "tdp_w": chip.tdp_w.value,
    }


@cli.command()
@click.argument("chip_id")
@_json_option
@_wide_option
def chip(chip_id: str, as_json: bool) -> None:
    """One chip in full, with the source of every figure (CHIP_ID: catalog id or TOML path)."""
    from xpusim.hardware.catalog import chip_ids, load_chip
    from xpusim.hardware.system import catalog_id
    from xpusim.report.tables import chip_table, sources_table

    named = catalog_id(chip_id)  # `h100` as --chip takes it
    spec = load_chip(named if named in chip_ids() else chip_id)
    if as_json:
        _emit_json(spec.model_dump(mode="json"))
    else:
        _print(chip_table(spec), sources_table(spec))


@cli.command()
@_json_option
@_wide_option
def systems(as_json: bool) -> None:
    """List the multi-chip systems: chips, topology levels and link figures."""
    from xpusim.hardware.system import load_system, system_ids
    from xpusim.report.tables import systems_table

    _listing(as_json, "systems", [load_system(i) for i in system_ids()],
             lambda s: s.model_dump(mode="json", exclude={"spec"}), systems_table)


@cli.command()
@_json_option
@_wide_option
def models(as_json: bool) -> None:
    """List the models a name resolves to without the network: the zoo, and the repos in
    the local Hugging Face cache, each with where it came from."""
    from xpusim.report.tables import models_table
    from xpusim.workloads.resolve import listed_models

    _listing(as_json, "models", listed_models(), lambda m: m.to_dict(), models_table)


@cli.command()
@click.argument("model")
@click.option("--chip", "chip_id", required=True, callback=chip_counts, help=CHIP_HELP)
@_workload_options
@_input_shape_option
@_set_option
@offline_option
@click.option("--ops", "show_ops", is_flag=True, help="Also show where the time goes, per op.")
@_wide_option
def run(model: str, chip_id: tuple[str, int | None], mode: str, as_json: bool, show_ops: bool,
        input_shapes: dict, sets: list, **options: Any) -> None:  # fmt: skip
    """Simulate MODEL on a chip or system (ID:N or --chips N for several). MODEL: a zoo id
    or Hugging Face repo (the zoo, the local cache, then the hub), a config.json or
    snapshot folder, or an .onnx or torch.export .pt2 file."""
    from xpusim import api
    from xpusim.report.tables import ops_table

    workload = api.model(model, input_shapes)
    given = merged_chips(chip_id, _given(options))
    result = api.simulate(workload, _what_if(chip_id[0], sets), mode, **given)
    if as_json:
        _emit_json(result.to_dict())
        return
    from xpusim.hardware.spec import display_id

    title = f"{_model_label(result)} on {display_id(result.chip)}"
    detail = [ops_table(result)] if show_ops and result.ops else []  # a torus layout has none
    _print(_results_view([result], title), *detail)
    for line in _notes(result):
        _print(f"note: {line}")


def _parse_provisioned(ctx: click.Context, param: click.Parameter,
                       settings: tuple[str, ...]) -> dict[str, float]:  # fmt: skip
    """CHIP=WATTS, repeatable: a power per chip between a milliwatt and a megawatt (past
    either, ratios of perf/W overflow to inf or a geometric mean to a math domain error)."""
    found: dict[str, float] = {}
    for setting in settings:
        chip, _, watts = setting.partition("=")
        try:
            value = float(watts)
        except ValueError:
            value = float("nan")
        if not chip or not 1e-3 <= value <= 1e6:
            raise click.BadParameter(f"{setting!r}: expected CHIP=WATTS with watts from 0.001 "
                                     "to 1e6 (mtia-v1=65)")  # fmt: skip
        found[chip] = value
    return found


@cli.command()
@click.argument("models", nargs=-1, required=True, metavar="MODEL...")
@click.option("--chip", "chip_ids", multiple=True, required=True, callback=chip_counts,
              help=f"{CHIP_HELP} Repeat for each chip.")  # fmt: skip
@click.option("--provisioned-w", "provisioned", multiple=True, metavar="CHIP=WATTS",
              callback=_parse_provisioned,
              help="Performance per watt on provisioned power (a server's power over its "
                   "accelerators, as the MTIA paper compares) instead of each chip's "
                   "simulated draw; repeat for each chip.")  # fmt: skip
@_workload_options
@_input_shape_option
@_set_option
@offline_option
@_wide_option
def compare(models: tuple[str, ...], chip_ids: tuple[str, ...], provisioned: dict[str, float],
            mode: str, as_json: bool, input_shapes: dict, sets: list,
            **options: Any) -> None:  # fmt: skip
    """The same workloads on several chips, side by side, with performance per watt. With
    several models (or --provisioned-w), a last table gives each chip's performance per watt
    against the first chip's, per model, and their geometric mean."""
    from xpusim import api
    from xpusim.errors import UserError
    from xpusim.hardware.spec import display_id
    from xpusim.report.perf_per_watt import PerfPerWatt

    names = [name for name, _ in chip_ids]
    missing = sorted(set(provisioned) - set(names))
    if missing:
        raise UserError(f"--provisioned-w {missing[0]}: not one of the --chip given "
                        f"({', '.join(names)})")  # fmt: skip
    given = _given(options)
    runs: dict[str, list[Any]] = {}
    for m in dict.fromkeys(models):
        workload = api.model(m, input_shapes)
        runs[m] = [_attempt(workload, chip, sets, mode, given) for chip in chip_ids]
    for results in runs.values():  # no chip can run it: the first reason, as for one chip
        if all(isinstance(r, _Refused) for r in results):
            raise UserError(results[0].reason)
    summary = PerfPerWatt.of(runs, names, provisioned)
    if as_json:
        found = {"results": [r.to_dict() for results in runs.values() for r in results]}
        _emit_json(found | ({"perf_per_watt": summary.to_dict()} if summary.shown else {}))
        return
    for results in runs.values():
        ran = [r for r in results if not isinstance(r, _Refused)]
        view = _results_view(ran, f"{_model_label(ran[0])}; per joule is performance per watt")
        for refused in (r for r in results if isinstance(r, _Refused)):
            refused.add_row(view)
        _print(view)
        for r in results:
            for line in [r.reason] if isinstance(r, _Refused) else _notes(r):
                _print(f"note: {display_id(r.chip)}: {line}")
    if summary.shown:
        _print(summary.table())


@dataclasses.dataclass(frozen=True)
class _Refused:
    """A chip of a comparison that cannot run the point (a format it lacks, a count its
    system cannot have): its row says why, and the other chips' rows stand."""

    chip: str
    chips: int | None
    reason: str
    fits = False

    def to_dict(self) -> dict[str, Any]:
        return {"chip": self.chip, "chips": self.chips, "error": self.reason}

    def add_row(self, view: Any) -> None:
        """A row in the view's (first) table: the chip, its count, the reason under 'fits'."""
        from rich.console import Group

        table = view.renderables[0] if isinstance(view, Group) else view
        cells = {"chip": self.chip, "chips": str(self.chips or "—"), "fits": "no: see note"}
        table.add_row(*(cells.get(str(c.header), "—") for c in table.columns))


def _attempt(workload: Any, chip: tuple[str, int | None], sets: list, mode: str,
             given: dict[str, Any]) -> Any:  # fmt: skip
    """One chip's result, or its refusal."""
    from xpusim import api
    from xpusim.errors import UserError

    try:
        return api.simulate(workload, _what_if(chip[0], sets), mode, **merged_chips(chip, given))
    except UserError as why:
        return _Refused(chip[0], chip[1] or given.get("chips"), str(why))


@cli.command()
@click.argument("model")
@click.option("--chip", "chip_id", required=True, callback=chip_counts, help=CHIP_HELP)
@_workload_options
@_input_shape_option
@_set_option
@offline_option
@click.option("--metric", default=None, help="A number of the run's result to rank by "
              "(default: tokens_per_s_per_user for LLMs, latency_s otherwise).")  # fmt: skip
@_wide_option
def sensitivity(model: str, chip_id: tuple[str, int | None], mode: str, as_json: bool,
                input_shapes: dict, sets: list, metric: str | None,
                **options: Any) -> None:  # fmt: skip
    """Which single x2 change to the chip (peak, each memory's bandwidth and capacity, links)
    helps MODEL most."""
    from xpusim import api
    from xpusim.explore.sensitivity import sensitivity as rank
    from xpusim.report.sweep_tables import sensitivity_table

    workload = api.model(model, input_shapes)
    result = rank(workload, _what_if(chip_id[0], sets), metric, mode=mode,
                  **merged_chips(chip_id, _given(options)))  # fmt: skip
    if as_json:
        _emit_json(result.to_dict())
    else:
        _print(sensitivity_table(result))


@cli.command()
@click.argument("model")
@click.option(
    "--batch",
    type=count(),
    default=1,
    show_default=True,
    help="Zoo transformers: sequences in the prefill shown.",
)
@click.option(
    "--prompt",
    type=count(),
    default=128,
    show_default=True,
    help="Zoo transformers: tokens per sequence.",
)
@click.option(
    "--precision",
    type=click.Choice(PRECISIONS),
    default=None,
    help="Recast to this format (default: bf16 for zoo models, an imported model's own dtypes).",
)
@_input_shape_option
@click.option(
    "--unfused", is_flag=True, help="Imported models: one IR op per framework op, before fusion."
)
@offline_option
@_json_option
@_wide_option
def inspect(model: str, batch: int, prompt: int, precision: str | None, input_shapes: dict,
            unfused: bool, as_json: bool) -> None:  # fmt: skip
    """Print MODEL's IR: every op with its shapes, FLOPs and bytes (a zoo model's prefill)."""
    from xpusim import api
    from xpusim.report.graph_tables import ir_table, op_row

    workload = api.model(model, input_shapes)
    graph = api.graph(workload, batch=batch, prompt=prompt, precision=precision,
                      fused=not unfused)  # fmt: skip
    counts = {"params": getattr(workload, "param_count", None),  # None: an imported graph
              "active_params": getattr(workload, "active_param_count", None)}
    if as_json:
        _emit_json({"model": graph.name, **counts, "ops": [op_row(op) for op in graph],
                    "total_flops": graph.flops, "total_matrix_flops": graph.matrix_flops,
                    "total_bytes": graph.bytes})  # fmt: skip
    else:
        _print(ir_table(graph, graph.name))
        if counts["params"]:
            _print(f"parameters: {counts['params']:,} ({counts['active_params']:,} active "
                   "per token)")  # fmt: skip


@cli.command()
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default="validation-report",
    show_default=True,
    help="Folder for the Markdown report and the parity plot.",
)
@click.option("--chip", "chips", multiple=True, help="Only points on this chip (repeatable).")
@click.option("--source", "sources", multiple=True,
              help="Only points whose source cites this, case-insensitive: mlcommons, "
                   "tensorrt-llm, gpt-fast (repeatable).")  # fmt: skip
@click.option("--workload", "workloads", multiple=True,
              help="Only points of this workload: llm-serving, llm-inference, llm-training, "
                   "gemm, cnn-inference, encoder-inference (repeatable).")  # fmt: skip
@click.option("--workers", type=count(), default=None,
              help="Processes (default: every core; 1 runs in this process).")
@_json_option
@_wide_option
def validate(out: str, chips: tuple[str, ...], sources: tuple[str, ...],
             workloads: tuple[str, ...], workers: int | None, as_json: bool) -> None:  # fmt: skip
    """Score predictions against published measurements; report error per point. A progress
    bar shows on a terminal (not with --json)."""
    from pathlib import Path

    from xpusim.files import writable_dir
    from xpusim.report.tables import validation_table
    from xpusim.validation.points import load_points
    from xpusim.validation.report import write
    from xpusim.validation.score import reason, select
    from xpusim.validation.score import validate as run_validation

    points = select(load_points(), chips, sources, workloads)
    folder = writable_dir(Path(out), "--out")  # before the seconds of validating
    with _progress(f"validating {len(points)} points", quiet=as_json) as bar:
        result = run_validation(points, bar, workers)
    written = write(result, folder)
    if as_json:
        _emit_json({**result.to_dict(), "written": [str(p) for p in written]})
        return
    _print(validation_table(result))
    _print(
        f"median absolute error {result.median_ape:.1%}, mean {result.mean_ape:.1%} "
        f"over {result.n_points} points; {result.n_skipped} not expressible yet"
    )
    for name, g in result.groups.items():
        _print(f"{name}: median {g['median_ape']:.1%}, mean {g['mean_ape']:.1%} over "
               f"{g['n_points']:.0f} points")  # fmt: skip
    for p in result.worst:
        _print(f"worst: {p.id}: {reason(p)}")
    for skipped in result.skipped:
        _print(f"skipped: {skipped.id}: {skipped.reason}")
    _print("wrote " + ", ".join(str(p) for p in written))


@cli.command()
@click.argument("csv_path", type=click.Path(dir_okay=False))
@click.option("--chip", "chip_id", required=True, help="Catalog id or chip TOML the CSV measured.")
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    default=None,
    help="Calibration JSON to write (default: <chip>.calibration.json).",
)
@_json_option
def calibrate(csv_path: str, chip_id: str, out: str | None, as_json: bool) -> None:
    """Fit a chip's efficiencies from your microbenchmark CSV (benchmarks/device/)."""
    from pathlib import Path

    from xpusim.cost.calibration import calibrate as fit
    from xpusim.cost.calibration import write_calibration
    from xpusim.files import writable_file
    from xpusim.hardware.catalog import load_chip

    spec = load_chip(chip_id)
    target = writable_file(Path(out or f"{spec.id}.calibration.json"), "--out")
    cal = fit(Path(csv_path), spec)
    write_calibration(cal, target)
    if as_json:
        _emit_json({**cal.to_dict(), "written": str(target)})
        return
    for dtype, f in cal.matmul.items():
        fixed = "not separable (fewer than 3 shapes)" if f.fixed_s is None else f"{f.fixed_s:.3g} s"
        _print(
            f"{dtype}: matmul efficiency {f.efficiency:.3f}, fixed time {fixed}, "
            f"{f.rows} rows, fit error {f.rms_rel_error:.1%} rms"
        )
    if cal.overlap is not None:
        o = cal.overlap
        form = "max(c, m)" if o.p is None else f"(c^p + m^p)^(1/p), p = {o.p:.3g}"
        fitted = "assumed by the chip file"
        if o.rows:
            fitted = (f"{o.rows} rows, {o.rms_rel_error:.1%} rms error "
                f"(max {o.rms_rel_error_max:.1%}, sum {o.rms_rel_error_sum:.1%})")  # fmt: skip
        _print(f"compute and memory: {form}, {fitted}")
    if cal.memory_efficiency is not None:
        _print(f"memory: {cal.memory_efficiency:.3f} of DRAM bandwidth")
    _print(f"wrote {target}")


@cli.command()
@_json_option
@_wide_option
def demo(as_json: bool) -> None:
    """MTIA v1, TPU v4, Groq, Apple's ANE and an H100 on a 7B model, int8 and 16-bit."""
    from xpusim.report.tables import results_table
    from xpusim.scenarios.demo import run_demo

    result = run_demo()
    if as_json:
        _emit_json({
            "model": result.model, **result.shape, "summary": result.summary,
            "notes": result.notes, "results": [r.to_dict() for r in result.results],
        })  # fmt: skip
        return
    shape = ", ".join(f"{k} {v}" for k, v in result.shape.items())
    _print(results_table(result.results, f"{result.model} on one chip each ({shape})"))
    for line in result.summary + [f"note: {n}" for n in result.notes]:
        _print(line)


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on (0.0.0.0: every interface, so anyone who reaches "
                   "this machine can run simulations on it; any address beyond loopback is "
                   "warned of).")
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True,
              help="Port to listen on; 0 takes a free one (printed).")
def web(host: str, port: int) -> None:
    """A local page to compare chips and serving setups, and its JSON API (/api/openapi.json);
    the 'web' extra."""
    import importlib.util

    from xpusim.errors import UserError

    if importlib.util.find_spec("fastapi") is None or importlib.util.find_spec("uvicorn") is None:
        raise UserError("xpusim web needs the 'web' extra: pip install 'xpusim[web]'")
    from xpusim.web.app import serve

    serve(host, port, lambda line: click.echo(line, err=True))


def _interrupt(signum: int, frame: Any) -> None:
    """SIGTERM stops a command as Ctrl-C does: a sweep keeps what finished."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> None:
    """Entry point: runs the click group and maps user errors to one line and exit 2."""
    import signal

    from click.exceptions import Abort, ClickException, Exit

    from xpusim.errors import Interrupted

    signal.signal(signal.SIGTERM, _interrupt)
    try:
        cli.main(args=argv, prog_name="xpusim", standalone_mode=False)
    except Exit as e:
        sys.exit(e.exit_code)
    except (Abort, KeyboardInterrupt):
        click.echo("interrupted", err=True)
        sys.exit(130)
    except Interrupted as e:
        click.echo(f"interrupted: {e}", err=True)
        sys.exit(130)
    except BrokenPipeError:  # `xpusim chips | head -1`: the reader has what it wanted
        sys.stderr.close()  # nothing more can be said, and Python would say it at exit
        sys.exit(0)
    except OSError as e:  # a file system refusing a write (a full disk) is not our bug
        where = f"{e.filename}: " if e.filename else ""
        click.echo(f"error: {where}{e.strerror or e}", err=True)
        sys.exit(2)
    except ClickException as e:
        hint, message = "", e.format_message()
        if isinstance(e, click.UsageError) and e.ctx is not None:
            hint = f" (see '{e.ctx.command_path} --help')"
            if e.ctx.command is cli and message == "Missing command.":
                message = f"give a command: {', '.join(cli.list_commands(e.ctx))}"
        click.echo(f"error: {message}{hint}", err=True)
        sys.exit(2)
    except Exception as e:  # a UserError is ours to word; anything else is a bug
        from xpusim.errors import UserError

        if not isinstance(e, UserError):
            raise
        click.echo(f"error: {_as_option(str(e))}", err=True)
        sys.exit(2)


def _as_option(message: str) -> str:
    """A message that names a keyword the way the API spells it ('rate must be a positive
    number') names the command-line option instead ('--rate must be ...'), where one is
    spelled so: the user typed the option, not the keyword."""
    import re

    found = re.match(r"([a-z_]+) must be ", message)
    if found is None:
        return message
    ctx = click.Context(cli)
    names = {p.name: p.opts[0] for name in cli.list_commands(ctx)
             for p in cli.get_command(ctx, name).params
             if isinstance(p, click.Option) and p.opts[0].startswith("--")}  # fmt: skip
    option = names.get(found.group(1))
    return message if option is None else option + message[found.end(1):]


