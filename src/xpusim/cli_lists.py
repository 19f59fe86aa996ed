"""Option types for `xpusim sweep` and what-if specs: comma lists of another option's values,
and `--set FIELD=VALUE` (a list of values in a sweep).

A sweep takes every option of `xpusim run`, each as a comma list, by deriving them from
`run`'s own option definitions: a new option of `run` is sweepable without a line here.
Only click is imported, so `xpusim --help` stays fast.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import click

from xpusim.ir.dtypes import weight_layouts
from xpusim.run_options import PRECISIONS as RUN_PRECISIONS
from xpusim.run_options import RunOptions

MAX_COUNT = 2**40
"""The largest integer an option takes (batch, tokens, chips, requests, seeds): 2^40 is the
most tokens a simulation holds (scenarios/llm/inference.py), and every narrower limit is
checked where it applies. Past it, an integer is refused as it is parsed, before it can
reach a NumPy array or a Parquet column as a number no 64-bit type holds."""


PRECISIONS = list(RUN_PRECISIONS)
"""Compute formats an option may name (ir/dtypes.py); a chip lacking one refuses it."""
WEIGHT_PRECISIONS = [*weight_layouts(), *PRECISIONS]
"""Storage formats of weights: quantized checkpoints' layouts (ir/weight_layouts.toml; int4
is stored, never computed in) and every compute format."""
RANKS = ("throughput", "cost")
"""What a sweep's Pareto front trades against per-user speed (explore/pareto.py)."""


class Count(click.IntRange):
    """An integer option within [min, MAX_COUNT]. Help shows only the lower bound: the
    upper one guards the arrays, it is not advice (`[x>=1]`, not `[1<=x<=1099511627776]`)."""

    def _describe_range(self) -> str:
        return "" if self.min is None else f"x>={self.min}"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None):
        number = click.INT.convert(value, param, ctx)
        if number > MAX_COUNT:
            self.fail(f"{number} is above {MAX_COUNT} (2^40), the largest accepted", param, ctx)
        return super().convert(number, param, ctx)


def count(min: int | None = 1) -> click.IntRange:
    """An integer option within [min, MAX_COUNT]."""
    return Count(min=min, max=MAX_COUNT)


class Finite(click.FloatRange):
    """A number option that is a number: click's float takes 'inf' and 'nan', which no
    duration, rate or bound of xpusim's can be."""

    name = "number"

    def _describe_range(self) -> str:
        """Nothing for an unbounded number (click would print `x<=None`)."""
        return "" if self.min is None and self.max is None else super()._describe_range()

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None):
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


class PriceType(click.ParamType):
    """`--price`: dollars per chip-hour, or the basis to read from the catalog's prices."""

    name = "USD|on-demand|tco"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None):
        from xpusim.cost.dollars import price_value
        from xpusim.errors import UserError

        try:
            return price_value(value)
        except UserError as e:
            self.fail(str(e).removeprefix(f"--price {value!r}: "), param, ctx)


PRICE_HELP = RunOptions.__dataclass_fields__["price"].metadata["help"]


CHIP_HELP = ("Chip or system id (xpusim chips / xpusim systems), or a chip TOML path; "
             "ID:N for N chips of it (h100-sxm:8, as --chips 8).")


def chip_counts(ctx: click.Context, param: click.Parameter,
                values: str | tuple[str, ...]) -> Any:  # fmt: skip
    """`--chip ID[:N]` -> (ID, N or None), or a tuple of them for a repeatable option: each
    chip of a comparison may have its own count (8 H100s against 4 MI300Xs)."""
    if values is None:
        return None
    if isinstance(values, str):
        return _chip_count(values)
    return tuple(_chip_count(v) for v in values)


def _chip_count(value: str) -> tuple[str, int | None]:
    name, sep, number = value.rpartition(":")
    wrong = click.BadParameter(f"{value!r}: expected ID:N with N a count of chips from 1")
    if not sep or not number.strip().isdigit():  # no count (a path may hold a colon)
        if sep and _in_catalog(name):  # h100-sxm:-2, h100-sxm:x: a count, mistyped
            raise wrong
        return value, None
    chips = int(number)
    if not name or not 1 <= chips <= MAX_COUNT:
        raise wrong
    return name, chips


def _in_catalog(name: str) -> bool:
    """Whether `name` is a chip or system id or its shorthand, as --chip takes it (the
    catalog read only on this path)."""
    from xpusim.hardware.system import catalog_id

    return catalog_id(name) is not None


def merged_chips(chip: tuple[str, int | None], given: dict[str, Any]) -> dict[str, Any]:
    """The options with the count of `--chip ID:N` as their `chips`; a different --chips
    beside it is refused (which one was meant cannot be known)."""
    name, chips = chip
    if chips is None:
        return given
    if given.get("chips") not in (None, chips):
        from xpusim.errors import UserError

        raise UserError(f"--chip {name}:{chips} and --chips {given['chips']} disagree: give "
                        "the count once")  # fmt: skip
    return {**given, "chips": chips}


class CommaList(click.ParamType):
    """A comma list (or an `A,B,...,END` progression) of values of another option type."""

    def __init__(self, item: click.ParamType):
        self.item = item
        self.name = f"{item.name}[,...]"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None):
        if isinstance(value, tuple):
            return value
        from xpusim.errors import UserError
        from xpusim.explore.grid import split

        try:
            items = split(str(value))
        except UserError as e:
            self.fail(str(e), param, ctx)
        return tuple(self.item.convert(item, param, ctx) for item in items)


def listed(command: click.Command, skip: Iterable[str]) -> Callable[[Callable], Callable]:
    """Decorator adding `command`'s options, less `skip`, each taking a comma list (flags
    stay flags), all defaulting to None so that only what was typed becomes an axis."""

    def decorate(f: Callable) -> Callable:
        for p in reversed(command.params):
            if not isinstance(p, click.Option) or p.name in skip:
                continue
            decls = [*p.opts, p.name]
            if p.is_flag:
                f = click.option(*decls, is_flag=True, help=p.help)(f)
            else:
                help_text = f"{p.help or ''} A comma list sweeps it.".strip()
                f = click.option(*decls, type=CommaList(p.type), default=None, help=help_text)(f)
        return f

    return decorate


def _number(text: str, setting: str) -> float:
    try:
        number = float(text)
    except ValueError:
        raise click.BadParameter(f"{setting!r}: {text!r} is not a number") from None
    if not math.isfinite(number):
        raise click.BadParameter(f"{setting!r}: {text!r} is not a finite number")
    return number


def _field_and_values(setting: str) -> tuple[str, str]:
    path, sep, values = setting.partition("=")
    if not sep or not path.strip() or not values.strip():
        raise click.BadParameter(f"{setting!r} is not FIELD=VALUE")
    return path.strip(), values


def parse_sets(
    ctx: click.Context, param: click.Parameter, settings: tuple[str, ...]
) -> list[tuple[str, float]]:
    """FIELD=VALUE (repeatable) -> [(FIELD, VALUE)], applied in order."""
    parsed = []
    for setting in settings:
        path, value = _field_and_values(setting)
        parsed.append((path, _number(value, setting)))
    return parsed


def parse_set_lists(
    ctx: click.Context, param: click.Parameter, settings: tuple[str, ...]
) -> tuple[tuple[str, tuple[float, ...]], ...]:
    """FIELD=V1,V2,... (repeatable; progressions allowed) -> one sweep axis per field."""
    from xpusim.errors import UserError
    from xpusim.explore.grid import split

    parsed = []
    for setting in settings:
        path, values = _field_and_values(setting)
        try:
            items = split(values)
        except UserError as e:
            raise click.BadParameter(f"{setting!r}: {e}") from None
        parsed.append((path, tuple(_number(v, setting) for v in items)))
    return tuple(parsed)


def _go_offline(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    """--offline: no model name is looked up on the Hugging Face hub for this command (as
    HF_HUB_OFFLINE=1 does), the zoo, paths and the local cache still are."""
    if value:
        from xpusim.offline import FLAG

        ctx.meta[FLAG] = True  # read by xpusim.offline while this command runs


offline_option = click.option(
    "--offline", is_flag=True, expose_value=False, callback=_go_offline,
    help="Resolve MODEL from the zoo, a path or the Hugging Face cache only, never the hub "
    "(as HF_HUB_OFFLINE=1).",
)  # fmt: skip
