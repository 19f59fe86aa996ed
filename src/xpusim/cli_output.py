"""What every command shares around its work: `run`'s options generated from
run_options.RunOptions, the options the user typed, JSON and table output, and a progress
bar. Its own module so that `serve` and `sweep` (cli_serve.py, cli_sweep.py) need nothing
private of cli.py."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from typing import Any

import click

from xpusim.cli_lists import MAX_COUNT, WEIGHT_PRECISIONS, Finite, PriceType, count
from xpusim.run_options import RUN_FIELDS


def emit_json(obj: Any) -> None:
    click.echo(json.dumps(obj, indent=2, allow_nan=False))


def _console() -> Any:
    """The console tables are printed on: the terminal's width, or $COLUMNS where set; when
    piped with neither, 160 columns (rich would assume 80)."""
    import os

    from rich.console import Console

    piped = not sys.stdout.isatty() and not os.environ.get("COLUMNS", "").isdigit()
    return Console(width=160 if piped else None)


def listing(as_json: bool, key: str, items: list, as_dict: Callable[[Any], dict],
            table: Callable[[list], Any]) -> None:  # fmt: skip
    """What a command that lists a catalog prints: one JSON object, `key` the items, each
    as_dict's; else their table."""
    if as_json:
        emit_json({key: [as_dict(item) for item in items]})
    else:
        print_tables(table(items))


def print_tables(*renderables: Any) -> None:
    """Print tables fitted to the console (report/fit.py), or each whole with --wide."""
    from xpusim.report.fit import fit, widest

    console = _console()
    ctx = click.get_current_context(silent=True)
    wide = ctx is not None and ctx.meta.get("wide", False)
    for r in renderables:
        if wide:
            console.width = max(console.width, widest(console, r))
            console.print(r)
        else:
            console.print(fit(console, r))


def _set_wide(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    ctx.meta["wide"] = value


wide_option = click.option(
    "--wide", is_flag=True, expose_value=False, callback=_set_wide,
    help="Print each table whole, however wide (default: split to fit the terminal).",
)  # fmt: skip


json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")


def given(options: dict[str, Any]) -> dict[str, Any]:
    """The options the user typed: the rest take the scenario's defaults, and an option that
    does not apply to the model (--prompt on a DLRM) is refused only when it was typed."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    return {k: v for k, v in options.items()
            if ctx.get_parameter_source(k) is not ParameterSource.DEFAULT}  # fmt: skip


@contextlib.contextmanager
def progress(label: str, quiet: bool = False) -> Iterator[Callable[[int, int], None] | None]:
    """A progress bar on a terminal's stderr (none when piped or `quiet`), as a (done, total)
    callback."""
    if quiet or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=None)
        yield lambda done, total: bar.update(task, completed=done, total=total)


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


input_shape_option = click.option(
    "--input-shape", "input_shapes", multiple=True, callback=_parse_shapes,
    metavar="NAME=D0,D1,...", help="ONNX models: the shape of an input with symbolic "
    "dimensions (repeat for each input).",
)  # fmt: skip

def _click_type(meta: dict[str, Any]) -> Any:
    kind = meta["kind"]
    if kind == "count":
        return count()
    if kind == "choice":
        return click.Choice(list(meta["choices"]), case_sensitive=meta.get("case_sensitive", True))
    if kind == "number":
        return Finite(**{k: meta[k] for k in ("min", "max", "min_open", "max_open")
                         if k in meta})  # fmt: skip
    if kind == "path":
        return click.Path(dir_okay=False)
    if kind == "price":
        return PriceType()
    if kind == "weight-precision":
        return click.Choice(WEIGHT_PRECISIONS)
    if kind == "zero-stage":
        return click.IntRange(0, 3)
    return None  # text


def run_options(f: Callable) -> Callable:
    """`run`'s options (shared by compare and sensitivity): one per RunOptions field, then
    --json."""
    options = []
    for fld in RUN_FIELDS:
        meta, flag = fld.metadata, f"--{fld.name.replace('_', '-')}"
        if meta["kind"] == "flag":
            options.append(click.option(flag, is_flag=True, help=meta["help"]))
            continue
        options.append(click.option(flag, type=_click_type(meta), default=fld.default,
                                    show_default=meta.get("show_default", False),
                                    metavar=meta.get("metavar"),
                                    help=meta["help"] or None))  # fmt: skip
    options.append(json_option)
    for option in reversed(options):
        f = option(f)
    return f


def run_options_command() -> click.Command:
    """`run`'s options alone, as a command: what the web page's schema is made from
    (web/schemas.py), without importing cli.py, whose `web` command imports the page."""
    return click.command("run")(run_options(lambda **options: None))
