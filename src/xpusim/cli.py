"""The `xpusim` command: a thin layer that parses options, calls the API and formats results.

Heavy modules are imported inside the commands so that `xpusim --help` stays fast. Every
user mistake ends as one line on stderr and exit status 2; `--json` prints exactly one JSON
object on stdout.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import click

from xpusim.cli_lists import (
    MAX_COUNT,
    PRECISIONS,
    PRICE_HELP,
    WEIGHT_PRECISIONS,
    Finite,
    PriceType,
    count,
    parse_sets,
)


def _emit_json(obj: Any) -> None:
    click.echo(json.dumps(obj, indent=2, allow_nan=False))


def _print(*renderables: Any) -> None:
    from rich.console import Console

    # rich assumes 80 columns when piped; tables of a dozen columns need more to stay legible
    console = Console(width=None if sys.stdout.isatty() else 160)
    for r in renderables:
        console.print(r)


def _workload_options(f: Callable) -> Callable:
    """Options shared by run and compare (and later sweep)."""
    options = [
        click.option("--batch", type=count(), default=1, show_default=True,
                     help="Sequences decoded together (recommendation models: samples scored "
                          "together; training: sequences per optimizer step, default 8)."),
        click.option("--sla-ms", type=Finite(min=0, min_open=True), default=None,
                     help="Recommendation models: find the largest batch whose latency is "
                          "within this bound (instead of --batch)."),
        click.option("--sharding", type=click.Choice(["auto", "table", "row"]), default="auto",
                     show_default=True,
                     help="Recommendation models on several chips: how tables are sharded."),
        click.option("--prompt", type=count(), default=128, show_default=True,
                     help="Input tokens per sequence (training: the sequence length, "
                          "default 2048)."),
        click.option("--gen", type=count(), default=128, show_default=True,
                     help="Output tokens per sequence."),
        click.option("--precision", type=click.Choice(PRECISIONS), default=None,
                     help="Weights, activations and KV cache. Default: the chip's bf16, "
                          "else fp16, else int8 (reported in the output)."),
        click.option("--weight-precision", type=click.Choice(WEIGHT_PRECISIONS), default=None,
                     help="Weight-only quantization: weights stored narrower than --precision."),
        click.option("--attention-precision", type=click.Choice(PRECISIONS), default=None,
                     help="LLM inference: attention's compute format when the engine runs it "
                          "wider than --precision (TensorRT-LLM's FP8 engines: fp16)."),
        click.option("--kv-precision", type=click.Choice(PRECISIONS), default=None,
                     help="LLM inference: the KV cache's storage format when not --precision "
                          "(an FP8 cache beside nvfp4 GEMMs)."),
        click.option("--mode", type=click.Choice(["inference", "training"]), default="inference",
                     show_default=True),
        click.option("--chips", type=count(), default=None,
                     help="Chips in the system; on a chip id, builds its default system. "
                          "Without --tp/--pp/--dp/--ep the best plan is searched for."),
        click.option("--tp", type=count(), default=None, help="Tensor parallel."),
        click.option("--pp", type=count(), default=None, help="Pipeline stages."),
        click.option("--dp", type=count(), default=None,
                     help="Data-parallel replicas (default: the chips the others leave)."),
        click.option("--ep", type=count(), default=None,
                     help="Expert parallel (MoE)."),
        click.option("--microbatches", type=count(), default=None,
                     help="Microbatches of --batch sequences in flight (default: --pp); "
                          "training: per replica and step (default 1, or one sequence each "
                          "with --pp)."),
        click.option("--objective", type=click.Choice(["latency", "throughput"]),
                     default="latency", show_default=True, help="What the plan search optimizes."),
        click.option("--overlap", is_flag=True,
                     help="Overlap collectives with compute (ideal; default: they serialize)."),
        click.option("--beams", type=count(), default=None,
                     help="LLM inference: beam search of this width (one sequence output per "
                          "prompt; MLPerf's GPT-J runs 4)."),
        click.option("--n", type=count(), default=None,
                     help="LLM inference: parallel samples per prompt, all output (vLLM's n)."),
        # a Path (it may be a config.json): the web API, which reads no files, leaves it out
        click.option("--speculative", type=click.Path(dir_okay=False), default=None,
                     metavar="DRAFT_MODEL",
                     help="LLM inference: speculative decoding with this draft model (a zoo id, "
                          "hub name or config.json, or mtp: the model's own multi-token "
                          "prediction module) on the same chips; needs --acceptance."),
        click.option("--draft-tokens", type=count(), default=None,
                     help="Speculative decoding: draft tokens proposed per step (default 5)."),
        click.option("--acceptance", type=Finite(min=0, max=1, max_open=True), default=None,
                     help="Speculative decoding: the probability that the target accepts a "
                          "draft token, as measured for the model pair."),
        click.option("--acceptance-lengths", default=None, metavar="P0,P1,...,PK",
                     help="Speculative decoding, in place of --acceptance: the share of steps "
                          "whose target accepts exactly 0, 1, ..., K of K draft tokens."),
        click.option("--recompute", type=click.Choice(["none", "selective", "full"]),
                     default="none", show_default=True,
                     help="Training: activation recomputation, trading FLOPs for memory."),
        click.option("--optimizer", type=click.Choice(["adam", "adamw", "sgd"]), default="adam",
                     show_default=True, help="Training: the optimizer (fp32 state)."),
        click.option("--sequence-parallel", is_flag=True,
                     help="Training: norms and residual adds split the sequence over --tp ranks "
                          "instead of repeating it (less activation memory)."),
        click.option("--zero", type=click.IntRange(0, 3), default=0, show_default=True,
                     help="Training: ZeRO stage sharding optimizer state (1), gradients (2) "
                          "and weights (3) over data-parallel chips."),
        click.option("--price", type=PriceType(), default=None, help=PRICE_HELP),
        click.option("--json", "as_json", is_flag=True, help="Print one JSON object."),
    ]  # fmt: skip
    for option in reversed(options):
        f = option(f)
    return f


def _parse_shapes(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> dict[str, tuple[int, ...]]:
    """NAME=D0,D1,... (repeatable) -> {NAME: (D0, D1, ...)}."""
    shapes: dict[str, tuple[int, ...]] = {}
    for value in values:
        name, _, dims = value.partition("=")
        try:
            shape = tuple(int(d) for d in dims.split(","))
        except ValueError:
            shape = ()
        if not name or not shape or min(shape) < 1:
            raise click.BadParameter(f"{value!r} is not NAME=D0,D1,... with positive sizes")
        if max(shape) > MAX_COUNT:
            raise click.BadParameter(f"{value!r}: a size above {MAX_COUNT} (2^40)")
        shapes[name] = shape
    return shapes


_input_shape_option = click.option(
    "--input-shape", "input_shapes", multiple=True, callback=_parse_shapes,
    metavar="NAME=D0,D1,...", help="ONNX models: the shape of an input with symbolic "
    "dimensions (repeat for each input).",
)  # fmt: skip

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
    """A parameter count as people write it: 46.7B, 60.5M."""
    return f"{params / 1e9:.3g}B" if params >= 1e9 else f"{params / 1e6:.3g}M"


def _notes(result: Any) -> list[str]:
    """Lines under a result's table: its notes, then why it does not fit or, for training,
    where the chip falls short."""
    tail = getattr(result, "limits", None) or [result.reason]
    return [line for line in [*result.notes, *tail] if line]


def _given(options: dict[str, Any]) -> dict[str, Any]:
    """The options the user typed: the rest take the scenario's defaults, and an option that
    does not apply to the model (--prompt on a DLRM) is refused only when it was typed."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    return {k: v for k, v in options.items()
            if ctx.get_parameter_source(k) is not ParameterSource.DEFAULT}  # fmt: skip


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

    return results_table(results, f"{title}: batch {first.batch}, prompt {first.prompt}, "
                                  f"gen {first.gen}")  # fmt: skip


class _Commands(click.Group):
    """The group, with `serve` and `sweep` imported only when named or listed: their
    options are generated from serving/options.py's fields and from `run`'s and `serve`'s
    options, work that `xpusim run` need not do."""

    LAZY: ClassVar[dict[str, str]] = {"serve": "xpusim.cli_serve", "sweep": "xpusim.cli_sweep"}

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
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def chips(as_json: bool) -> None:
    """List the chip catalog."""
    from xpusim.hardware.catalog import chip_ids, load_chip
    from xpusim.report.tables import chips_table

    specs = [load_chip(i) for i in chip_ids()]
    if as_json:
        _emit_json({"chips": [_chip_summary(c) for c in specs]})
    else:
        _print(chips_table(specs))


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
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def chip(chip_id: str, as_json: bool) -> None:
    """One chip in full, with the source of every figure (CHIP_ID: catalog id or TOML path)."""
    from xpusim.hardware.catalog import load_chip
    from xpusim.report.tables import chip_table, sources_table

    spec = load_chip(chip_id)
    if as_json:
        _emit_json(spec.model_dump(mode="json"))
    else:
        _print(chip_table(spec), sources_table(spec))


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def systems(as_json: bool) -> None:
    """List the multi-chip systems: chips, topology levels and link figures."""
    from xpusim.hardware.system import load_system, system_ids
    from xpusim.report.tables import systems_table

    found = [load_system(i) for i in system_ids()]
    if as_json:
        _emit_json({"systems": [s.model_dump(mode="json", exclude={"spec"}) for s in found]})
    else:
        _print(systems_table(found))


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def models(as_json: bool) -> None:
    """List the model zoo."""
    from xpusim.report.tables import models_table
    from xpusim.workloads.zoo import model_ids, zoo_entry

    entries = [zoo_entry(i) for i in model_ids()]
    if as_json:
        _emit_json({"models": [
            {"id": e.id, "hf_repo": e.hf_repo, "params": e.config.param_count, "active_params":
             e.config.active_param_count, "published_params": e.published_params,
             "params_source": e.params_source, "source": e.source}
            for e in entries
        ]})  # fmt: skip
    else:
        _print(models_table(entries))


@cli.command()
@click.argument("model")
@click.option(
    "--chip",
    "chip_id",
    required=True,
    help="Chip or system id (xpusim chips / xpusim systems), or a chip TOML path.",
)
@_workload_options
@_input_shape_option
@_set_option
@click.option("--ops", "show_ops", is_flag=True, help="Also show where the time goes, per op.")
def run(model: str, chip_id: str, mode: str, as_json: bool, show_ops: bool,
        input_shapes: dict, sets: list, **options: Any) -> None:  # fmt: skip
    """Simulate MODEL (zoo id, HF config.json, .onnx or torch.export .pt2 file) on one chip."""
    from xpusim import api
    from xpusim.report.tables import ops_table

    workload = api.model(model, input_shapes)
    result = api.simulate(workload, _what_if(chip_id, sets), mode, **_given(options))
    if as_json:
        _emit_json(result.to_dict())
        return
    title = f"{_model_label(result)} on {result.chip}"
    _print(_results_view([result], title), *(ops_table(result),) * show_ops)
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
@click.option("--chip", "chip_ids", multiple=True, required=True,
              help="Catalog id or TOML path; repeat for each chip.")  # fmt: skip
@click.option("--provisioned-w", "provisioned", multiple=True, metavar="CHIP=WATTS",
              callback=_parse_provisioned,
              help="Performance per watt on provisioned power (a server's power over its "
                   "accelerators, as the MTIA paper compares) instead of each chip's "
                   "simulated draw; repeat for each chip.")  # fmt: skip
@_workload_options
@_input_shape_option
@_set_option
def compare(models: tuple[str, ...], chip_ids: tuple[str, ...], provisioned: dict[str, float],
            mode: str, as_json: bool, input_shapes: dict, sets: list,
            **options: Any) -> None:  # fmt: skip
    """The same workloads on several chips, side by side, with performance per watt. With
    several models (or --provisioned-w), a last table gives each chip's performance per watt
    against the first chip's, per model, and their geometric mean."""
    from xpusim import api
    from xpusim.errors import UserError
    from xpusim.report.perf_per_watt import PerfPerWatt

    missing = sorted(set(provisioned) - set(chip_ids))
    if missing:
        raise UserError(f"--provisioned-w {missing[0]}: not one of the --chip given "
                        f"({', '.join(chip_ids)})")  # fmt: skip
    targets = [_what_if(c, sets) for c in chip_ids]
    runs = {m: api.compare(api.model(m, input_shapes), targets, mode=mode, **_given(options))
            for m in dict.fromkeys(models)}  # fmt: skip
    summary = PerfPerWatt.of(runs, chip_ids, provisioned)
    if as_json:
        found = {"results": [r.to_dict() for results in runs.values() for r in results]}
        _emit_json(found | ({"perf_per_watt": summary.to_dict()} if summary.shown else {}))
        return
    for results in runs.values():
        _print(_results_view(results, f"{_model_label(results[0])}; per joule is performance "
                                      "per watt"))  # fmt: skip
        for r in results:
            for line in _notes(r):
                _print(f"note: {r.chip}: {line}")
    if summary.shown:
        _print(summary.table())


@contextlib.contextmanager
def _progress(label: str) -> Iterator[Callable[[int, int], None] | None]:
    """A progress bar on a terminal's stderr (none when piped), as a (done, total) callback."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=None)
        yield lambda done, total: bar.update(task, completed=done, total=total)


@cli.command()
@click.argument("model")
@click.option("--chip", "chip_id", required=True, help="Catalog or system id, or a chip TOML.")
@_workload_options
@_input_shape_option
@_set_option
@click.option("--metric", default=None, help="A number of the run's result to rank by "
              "(default: tokens_per_s_per_user for LLMs, latency_s otherwise).")  # fmt: skip
def sensitivity(model: str, chip_id: str, mode: str, as_json: bool, input_shapes: dict,
                sets: list, metric: str | None, **options: Any) -> None:  # fmt: skip
    """Which single x2 change to the chip (peak, each memory's bandwidth and capacity, links)
    helps MODEL most."""
    from xpusim import api
    from xpusim.explore.sensitivity import sensitivity as rank
    from xpusim.report.sweep_tables import sensitivity_table

    workload = api.model(model, input_shapes)
    result = rank(workload, _what_if(chip_id, sets), metric, mode=mode, **_given(options))
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
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
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
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def validate(out: str, as_json: bool) -> None:
    """Score predictions against published measurements; report error per point."""
    from pathlib import Path

    from xpusim.files import writable_dir
    from xpusim.report.tables import validation_table
    from xpusim.validation.report import write
    from xpusim.validation.score import reason
    from xpusim.validation.score import validate as run_validation

    folder = writable_dir(Path(out), "--out")  # before the minutes of validating
    result = run_validation()
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
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
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
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
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
        click.echo(f"error: {e}", err=True)
        sys.exit(2)


