"""What a request to `xpusim web` may say, as pydantic models the OpenAPI schema is made from.

The options are not declared here a second time: each request's option fields are generated
from the click options of the command it mirrors (`run`, `serve`), with their types, ranges
and choices, so a new option of `xpusim run` is an option of the page's API without a line
here, and the two cannot drift apart. What the simulator checks beyond a field's type (a
precision the chip lacks, a plan that does not divide the chips) it checks as it does for the
command, raising the UserError the server answers as a 400.

Nothing here touches the file system: a model is a zoo id or a config pasted as an object,
a chip a catalog id, and the options that name a file (a serving trace) are left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

import click
from pydantic import BaseModel, ConfigDict, Field, create_model

from xpusim.cli_lists import RANKS, Finite, PriceType
from xpusim.cli_output import run_options_command
from xpusim.cli_plan import plan as plan_command
from xpusim.cli_serve import serve as serve_command
from xpusim.cost.dollars import BASES, MAX_PRICE, MIN_PRICE
from xpusim.errors import UserError, closest


@dataclass(frozen=True)
class Limits:
    """The most work one request may ask for: a server shared by a team must not be held by
    one request. Defaults sized on this project's 2-core machines (docs/web.md, 2026-12-01):
    a sweep of 2,000 LLM points took 0.7 s there, a serving run of 2,000 requests 0.4-1.3 s."""

    body_bytes: int = 256 * 1024  # a config.json is a few kB
    targets: int = 16  # chips or systems compared at once
    sweep_points: int = 2000
    serve_requests: int = 2000
    plan_chips: int = 16  # a plan's --chips or --max-chips: the search grows with the count
    threads: int = 4  # simulations running at once; later ones wait their turn


class Strict(BaseModel):
    """Unknown keys are refused by name: a misspelt option must not be silently ignored."""

    model_config = ConfigDict(extra="forbid")


class ModelSource(Strict):
    """The model: a zoo id (or its Hugging Face hub name), or a pasted config.json."""

    model: str | None = Field(None, max_length=200, description="Zoo id or hub name "
                              "(GET /api/models).", examples=["llama-2-7b"])  # fmt: skip
    config: dict[str, Any] | None = Field(None, description="A Hugging Face config.json "
                                          "(or an xpusim DLRM config), pasted as an object.")

    def workload(self) -> Any:
        """The model this request names, read without the file system."""
        from xpusim.workloads.resolve import resolve
        from xpusim.workloads.zoo import config_from_data

        if (self.model is None) == (self.config is None):
            raise UserError("give either 'model' (a zoo id) or 'config' (a pasted config.json)")
        if self.config is not None:
            return config_from_data(self.config, "config")
        try:  # the zoo, the Hugging Face cache and the hub, never a path on the server
            return resolve(self.model, paths=False).workload
        except UserError as error:
            raise UserError(f"model: {error}") from None


class Target(Strict):
    """A chip or system of the catalog, with how many chips (default: the id's own)."""

    chip: str = Field(max_length=100, examples=["h100-sxm"])
    chips: int | None = Field(None, ge=1, le=2**20, strict=True)

    def spec(self) -> Any:
        from xpusim.hardware.catalog import chip_ids
        from xpusim.hardware.system import catalog_id, system_ids

        named = catalog_id(self.chip)  # a catalog id or its shorthand, as --chip; never a file
        if named is None:
            raise UserError(f"chip: unknown chip or system {self.chip!r}"
                            + closest(self.chip.lower(), chip_ids() + system_ids()))  # fmt: skip
        from xpusim import api

        return api.target(named)


def _price() -> Any:
    """--price: dollars per chip-hour, or a basis of the catalog's prices."""
    return Annotated[float, Field(ge=MIN_PRICE, le=MAX_PRICE)] | Literal[tuple(BASES)]


def _field(param: click.Option, listed: bool) -> tuple[Any, Any] | None:
    """A click option's type as a pydantic field (None: the option names a file)."""
    kind, constraints = param.type, {}
    if param.is_flag:
        annotation: Any = bool
        constraints["strict"] = True
    elif isinstance(kind, click.Path):
        return None
    elif isinstance(kind, click.Choice):
        annotation = Literal[tuple(kind.choices)]
    elif isinstance(kind, click.IntRange):
        annotation, constraints["strict"] = int, True
        constraints["ge" if not kind.min_open else "gt"] = kind.min
        constraints["le" if not kind.max_open else "lt"] = kind.max
    elif isinstance(kind, Finite):
        annotation, constraints["allow_inf_nan"] = float, False
        constraints["ge" if not kind.min_open else "gt"] = kind.min
        constraints["le" if not kind.max_open else "lt"] = kind.max
    elif isinstance(kind, PriceType):
        annotation = _price()
    elif kind is click.STRING:
        annotation, constraints["max_length"] = str, 100
    else:
        raise TypeError(f"no field for option {param.name!r} of type {kind!r}")
    constraints = {k: v for k, v in constraints.items() if v is not None}
    if listed:  # a sweep axis: a list of the option's values
        item = Annotated[annotation, Field(**constraints)]
        return list[item] | None, Field(None, min_length=1, max_length=64, description=param.help)
    return annotation | None, Field(None, description=param.help, **constraints)


def options_model(name: str, command: click.Command, skip: tuple[str, ...],
                  listed: bool = False) -> type[Strict]:  # fmt: skip
    """A request model whose fields are `command`'s options, less `skip`; each defaults to
    None, which means "not given" (the scenario's default applies, as on the command line)."""
    fields = {}
    for param in command.params:
        if isinstance(param, click.Option) and param.name not in skip:
            made = _field(param, listed)
            if made is not None:
                fields[param.name] = made
    return create_model(name, __base__=Strict, **fields)


_NOT_OPTIONS = ("model", "chip_id", "chip_ids", "as_json", "show_ops", "input_shapes", "sets",
                "chips", "offline", "wide")  # fmt: skip
run_command = run_options_command()
RunOptions = options_model("RunOptions", run_command, _NOT_OPTIONS)
SweepAxes = options_model("SweepAxes", run_command, (*_NOT_OPTIONS, "mode"), listed=True)
ServeOptions = options_model("ServeOptions", serve_command, (*_NOT_OPTIONS, "out"))
# --exhaustive is a check on the pruning that simulates thousands: the command line's only
PlanOptions = options_model("PlanOptions", plan_command, (*_NOT_OPTIONS, "exhaustive"))


class RunRequest(ModelSource):
    target: Target
    options: RunOptions = Field(default_factory=RunOptions)  # type: ignore[valid-type]
    set: dict[str, float] = Field(default_factory=dict, max_length=32,
                                  description="What-if chip figures, as `run --set`.")


class CompareRequest(ModelSource):
    targets: list[Target] = Field(min_length=1)
    options: RunOptions = Field(default_factory=RunOptions)  # type: ignore[valid-type]


class SweepRequest(ModelSource):
    targets: list[Target] = Field(min_length=1)
    axes: SweepAxes = Field(default_factory=SweepAxes)  # type: ignore[valid-type]
    rank: Literal[RANKS] = "throughput"  # type: ignore[valid-type]


class ServeRequest(ModelSource):
    target: Target
    options: ServeOptions = Field(default_factory=ServeOptions)  # type: ignore[valid-type]


class PlanRequest(ModelSource):
    chips: list[Annotated[str, Field(max_length=100)]] = Field(
        min_length=1, description="Catalog chip ids to consider (plan sizes their systems).",
        examples=[["h100-sxm", "mi300x"]])  # fmt: skip
    options: PlanOptions  # type: ignore[valid-type]


def given(options: BaseModel) -> dict[str, Any]:
    """The options a request set (None is "not given")."""
    return {k: v for k, v in options.model_dump().items() if v is not None}
