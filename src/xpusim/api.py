"""The Python API that notebooks use and the CLI wraps: names in, result dataclasses out."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xpusim.cost.dollars import Price, parse_price, priced, priced_table
from xpusim.errors import UserError, closest
from xpusim.files import is_file
from xpusim.hardware.catalog import chip_ids, load_chip
from xpusim.hardware.spec import Chip
from xpusim.hardware.system import System, catalog_id, load_system, system_ids
from xpusim.ir.dtypes import DType
from xpusim.ir.graph import Graph
from xpusim.memo import in_scope, scope
from xpusim.result import Results, Table
from xpusim.scenarios.registry import Scenario, find
from xpusim.workloads.resolve import load_model
from xpusim.workloads.transformer import StepShape, build_step
from xpusim.workloads.transformer_config import TransformerConfig
from xpusim.workloads.zoo import model_ids

if TYPE_CHECKING:
    from xpusim.workloads.imported import ImportedModel


def chip(id_or_path: str | Path) -> Chip:
    """A chip from the catalog by id (`xpusim.chip("h100-sxm")`) or from a TOML file."""
    return load_chip(id_or_path)


def system(system_id: str) -> System:
    """A multi-chip system from the catalog (`xpusim.system("dgx-h100")`)."""
    return load_system(system_id)


def target(id_or_path: str | Path) -> Chip | System:
    """What `--chip` names: a system id, a chip id or a chip TOML path."""
    text = str(id_or_path)
    if text in system_ids():
        return load_system(text)
    if text in chip_ids() or text.endswith(".toml") or is_file(text):
        return load_chip(text)
    named = catalog_id(text)
    if named is not None:
        return target(named)
    raise UserError(f"unknown chip or system {text!r}"
                    + closest(text.lower(), chip_ids() + system_ids()))  # fmt: skip


def model(id_or_path: str | Path, input_shapes: dict[str, tuple[int, ...]] | None = None) -> Any:
    """A model by the name its users type (workloads/resolve.py): a zoo id or hub repo
    (`xpusim.model("deepseek-ai/DeepSeek-R1-0528")`), a HF `config.json` or snapshot folder,
    a repo in the Hugging Face cache or on the hub, or an exported model: a `.onnx` file
    (`input_shapes` fixes its symbolic input dimensions) or a torch.export `.pt2` file."""
    return load_model(id_or_path, input_shapes)


def from_torch(
    module: Any, example_inputs: tuple | list, example_kwargs: dict[str, Any] | None = None,
    *, name: str | None = None,
) -> ImportedModel:  # fmt: skip
    """A PyTorch module traced by torch.export at the example inputs' shapes (build it under
    `torch.device("meta")` to trace without weights); simulate it like any model."""
    from xpusim.workloads.torch_import import from_torch as trace

    return trace(module, example_inputs, example_kwargs, name=name)


def graph(
    model: Any, *, batch: int = 1, prompt: int = 128, precision: str | DType | None = None,
    fused: bool = True,
) -> Graph:  # fmt: skip
    """The IR `xpusim inspect` prints: a transformer's prefill step of `batch` x `prompt`
    tokens (in `precision`, default bf16), or an imported model's graph (in its own dtypes
    unless `precision` recasts it), compiled the way a simulation compiles it unless
    `fused` is False."""
    from xpusim.compiler.fusion import fuse
    from xpusim.compiler.precision import recast
    from xpusim.workloads.cnn import ResNetConfig
    from xpusim.workloads.imported import ImportedModel

    workload = load_model(model) if isinstance(model, str | Path) else model
    dtype = DType.parse(str(precision)) if precision is not None else None
    if isinstance(workload, TransformerConfig):
        return build_step(workload, StepShape(batch, prompt, prompt), dtype or DType.BF16)
    if isinstance(workload, ResNetConfig):
        workload = workload.model(batch, DType.FP32)
    if isinstance(workload, ImportedModel):
        lowered = recast(workload.graph, dtype) if dtype else workload.graph
        return fuse(lowered) if fused else lowered
    raise UserError(f"inspect shows transformers, CNNs and imported models, not a "
                    f"{type(workload).__name__}")


def simulate(
    model: Any, chip: Chip | System | str | Path, mode: str = "inference", **options: Any
) -> Any:
    """Simulates a workload on a chip; the workload's type and the mode pick the scenario.

    A transformer config (zoo id or config.json) runs LLM inference: options `batch`,
    `prompt`, `gen`, `precision`, `weight_precision` (scenarios/llm/inference.py). A DLRM
    config runs recommendation serving: `batch`, `precision`, `weight_precision`, `sla_ms`
    (scenarios/recsys.py). With `mode="training"` a transformer runs one training step:
    `batch` sequences of `prompt` tokens, `recompute`, `optimizer`, `zero`
    (scenarios/training.py). `price` (dollars per chip-hour, or "on-demand" or "tco")
    sets how the result's `cost` is priced (cost/dollars.py); without it the catalog's
    prices are used. An option the scenario does not take is a UserError.
    """
    workload = load_model(model) if isinstance(model, str | Path) else model
    spec = _spec(chip)
    price = parse_price(options.pop("price", None), _chip_id(spec))
    scenario = _scenario(workload, mode)
    _check_options(scenario, options)
    options, notes = checkpoint_defaults(workload, spec, mode, options)
    with scope():  # a block, not a decorator: one frame fewer between the CLI and the costs
        return noted(priced(scenario.function(workload, spec, **options), price), notes)


def simulate_many(
    model: Any, jobs: list[tuple[Chip | System | str | Path, dict[str, Any]]]
) -> list[Any]:
    """Many simulations of one workload, each a target and `simulate`'s options (`mode`
    among them); a job's UserError is returned in its place instead of raised. LLM
    inference jobs are costed together, which is how a sweep runs thousands of points fast,
    and training jobs share their rank graphs; each result equals `simulate`'s for the same
    job, less its per-op reports (and collectives, and a training step's limits)."""
    return list(simulate_table(model, jobs))


@in_scope
def simulate_table(
    model: Any, jobs: list[tuple[Chip | System | str | Path, dict[str, Any]]]
) -> Results:
    """simulate_many's results as columns, no result object made until one is indexed:
    a sweep's chunk becomes rows of its results file straight from them."""
    workload = load_model(model) if isinstance(model, str | Path) else model
    found: list[Any] = [None] * len(jobs)
    prices: list[Price] = [None] * len(jobs)
    # per scenario: its jobs' positions, and their targets and options
    by_scenario: dict[Scenario, tuple[list[int], list[tuple[Chip | System, dict]]]] = {}
    modes: dict[str, Scenario] = {}  # a sweep's jobs share a few modes and option names
    checked: set[tuple[Scenario, tuple[str, ...]]] = set()
    specs: dict[int, Chip | System] = {}  # by the job's chip object: a sweep's share a few
    for i, (chip, options) in enumerate(jobs):
        try:
            mode, price = "inference", None
            if "mode" in options or "price" in options:  # every scenario's: not passed on
                options = dict(options)
                mode, price = options.pop("mode", mode), options.pop("price", price)
            scenario = modes.get(mode) or modes.setdefault(mode, _scenario(workload, mode))
            spec = specs.get(id(chip)) or specs.setdefault(id(chip), _spec(chip))
            if price is not None:
                prices[i] = parse_price(price, _chip_id(spec))
            names = (scenario, tuple(options))
            if names not in checked:
                _check_options(scenario, options)
                checked.add(names)
            options = checkpoint_defaults(workload, spec, mode, options)[0]
        except UserError as error:
            found[i] = error
            continue
        at, group = by_scenario.get(scenario) or by_scenario.setdefault(scenario, ([], []))
        at.append(i)
        group.append((spec, options))
    tables: list[Table] = []
    for scenario, (at, group) in by_scenario.items():
        if scenario.batched:
            part = scenario.batched(workload, group)
        else:
            run = scenario.function
            part = [_or_error(run, workload, spec, options) for spec, options in group]
        part = part if isinstance(part, Results) else Results.of(part)
        row_prices = [[None] * t.size for t in part.tables]
        for i, got in zip(at, part.found, strict=True):
            if type(got) is not tuple:  # its UserError
                found[i] = got
            else:
                row_prices[got[0]][got[1]] = prices[i]
                found[i] = (got[0] + len(tables), got[1]) if tables else got
        for table, its_prices in zip(part.tables, row_prices, strict=True):
            priced_table(table, its_prices)
        tables += part.tables
    for table in tables:
        table.check_finite()  # the result boundary, as Result.to_dict is for one result
    return Results(tables, found)


def checkpoint_defaults(
    workload: Any, spec: Chip | System, mode: str, options: dict[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """The options with a quantized repo's formats filled in where none was given, and the
    notes saying so (workloads/checkpoint.py): what every command runs a model with."""
    if getattr(workload, "checkpoint", None) is None:
        return options, []
    from xpusim.workloads.checkpoint import checkpoint_options

    chip = spec.chip if isinstance(spec, System) else spec
    return checkpoint_options(workload, chip, _taken(_scenario(workload, mode)), options)


def noted(result: Any, notes: list[str]) -> Any:
    """The result with the checkpoint's notes first among its own."""
    if notes:
        result.notes[:0] = notes
    return result


def _spec(chip: Any) -> Chip | System:
    """What a Python caller passed as the chip: a name or path is looked up; anything but a
    Chip or System is a TypeError saying what is taken (not an AttributeError further on)."""
    if isinstance(chip, str | Path):
        return target(chip)
    if not isinstance(chip, Chip | System):
        raise TypeError(f"chip must be a catalog id, a chip TOML path, a Chip or a System, "
                        f"not {type(chip).__name__}")  # fmt: skip
    return chip


def _chip_id(spec: Chip | System) -> str:
    return spec.chip.id if isinstance(spec, System) else spec.id


def _or_error(
    scenario: Callable[..., Any], workload: Any, spec: Chip | System, options: dict[str, Any]
) -> Any:
    try:
        return scenario(workload, spec, **options)
    except UserError as error:
        return error


def check_options(model: Any, mode: str = "inference", **options: Any) -> None:
    """Raises the UserError `simulate` would for these options, without simulating: a sweep
    checks its options once instead of failing on every point. `price` is every
    scenario's (cost/dollars.py)."""
    options.pop("price", None)
    _check_options(_scenario(model, mode), options)


def _scenario(workload: Any, mode: str) -> Scenario:
    """The scenario that simulates this workload in this mode."""
    if mode not in ("inference", "training", "serving"):
        raise UserError(f"unknown mode {mode!r}; choose inference, training or serving")
    scenario = find(getattr(workload, "scenario_kind", None), mode)
    if scenario is not None:
        return scenario
    if getattr(workload, "encoder", False):
        raise UserError(f"{workload.name} is an encoder: one forward pass (inference) is "
                        f"modelled for it, not {mode}")  # fmt: skip
    if mode == "training":
        raise UserError(f"training is modelled for transformers, not {type(workload).__name__}")
    raise TypeError(f"no scenario simulates a {type(workload).__name__}")


@cache
def _taken(scenario: Scenario) -> list[str]:
    """The options a scenario takes: its function's keywords, or what it lists (serving's
    options are dataclass fields, serving/options.py)."""
    function = scenario.function
    listed = getattr(function, "options", None)
    if listed is not None:
        return list(listed())
    return [
        name
        for name, p in inspect.signature(function).parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    ]


def _check_options(scenario: Scenario, options: dict[str, Any]) -> None:
    """Refuses options the workload's scenario does not take (`--prompt` on a DLRM)."""
    taken = _taken(scenario)
    for name in options:
        if name not in taken:
            flags = ", ".join(f"--{t.replace('_', '-')}" for t in taken)
            raise UserError(
                f"--{name.replace('_', '-')} does not apply to this model; its options: {flags}"
            )


def serve(
    model: Any, chip: Chip | System | str | Path, *, progress: Any = None, **options: Any
) -> Any:
    """Serves a model under load (serving/): `concurrency` clients in a closed loop, a
    `rate` of requests/s, or a `trace`; lengths `prompt`, `gen` (`spread`); `scheduler`,
    `engine`, `max_batch`, `token_budget`, `kv_block`, SLOs `slo_ttft_ms` and `slo_tpot_ms`,
    `find` (max-rate, min-chips, pd-split, offline), and `run`'s plan options. A
    recommendation model takes `rate`, `max_batch`, `window_ms` and `sla_ms`. Returns a
    result whose `ttft_s`, `queue_s` (of TTFT, the wait before a prompt's first step),
    `tpot_s`, `itl_s` and `e2e_s` have mean, p50, p90 and p99."""
    from xpusim.serving.serve import serve as serve_

    workload = load_model(model) if isinstance(model, str | Path) else model
    spec = _spec(chip)
    price = parse_price(options.pop("price", None), _chip_id(spec))
    options, notes = checkpoint_defaults(workload, spec, "serving", options)
    return noted(priced(serve_(workload, spec, options, progress)[0], price), notes)


@in_scope  # its chips share the model's graphs
def compare(model: Any, targets: list[Chip | System | str], **options: Any) -> list[Any]:
    """The same workload on several chips or systems, in the order given."""
    return [simulate(model, t, **options) for t in targets]


__all__ = [
    "chip", "chip_ids", "compare", "from_torch", "graph", "model", "model_ids", "simulate",
    "simulate_many", "system", "system_ids", "target",
]  # fmt: skip
