"""Which single change to a chip would help a workload most: each figure family doubled in
turn (compute peak, each memory level's bandwidth and capacity, the chip-to-chip links),
the workload simulated again, and the changes ranked by what they buy.

It answers "what would one more generation of bandwidth buy?" for one workload: a
memory-bound decode gains from bandwidth and nothing from peak, a model that does not fit
gains only from capacity (its `min_chips` drops), and links matter only across chips.
A change the chip's own figures rule out (doubling an SRAM's bandwidth can push static and
memory power past the TDP) is reported with its reason instead of a gain.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from xpusim import api
from xpusim.errors import UserError
from xpusim.hardware.spec import Chip, Figure
from xpusim.hardware.system import System, plan_chips, system_for
from xpusim.hardware.whatif import apply
from xpusim.result import Result

FACTOR = 2.0


@dataclass
class Gain:
    change: str
    value: float | None  # the metric after the change
    gain: float | None  # better over before: > 1 helps, whichever way the metric points
    fits: bool | None
    min_chips: int | None
    error: str = ""


@dataclass
class Sensitivity(Result):
    model: str
    chip: str
    metric: str
    higher_is_better: bool
    baseline: float
    fits: bool
    min_chips: int
    changes: list[Gain] = field(default_factory=list)  # best first


def higher_is_better(metric: str) -> bool:
    """Rates and efficiencies up, times, energies and power down."""
    return "_per_s" in metric or metric in ("queries_per_joule", "throughput", "mfu")


def changes(target: Chip | System, factor: float = FACTOR) -> list[tuple[str, Any]]:
    """(label, changed target) for every single-figure-family change, or (label, error)."""
    chip = target.chip if isinstance(target, System) else target
    found: list[tuple[str, list[tuple[str, float]]]] = [
        (f"compute peak x{factor:g}", [
            *((f"peak_ops_per_s.{d.value}", f.value * factor)
              for d, f in chip.peak_ops_per_s.items()),
            ("vector_ops_per_s", chip.vector_ops_per_s.value * factor),
        ]),
    ]  # fmt: skip
    for i, level in enumerate(chip.memory):
        for what in ("bandwidth", "capacity"):
            figure = "bandwidth_bytes_per_s" if what == "bandwidth" else "capacity_bytes"
            value = getattr(level, figure).value * factor
            found.append((f"{level.name} {what} x{factor:g}", [(f"memory[{i}].{figure}", value)]))
    changed: list[tuple[str, Any]] = []
    for label, overrides in found:
        try:
            changed.append((label, apply(target, overrides)))
        except UserError as error:
            changed.append((label, error))
    changed.append((f"chip-to-chip links x{factor:g}", _faster_links(target, factor)))
    return changed


def _faster_links(target: Chip | System, factor: float) -> Chip | System:
    """Every link a chip has (chip-to-chip and host) and every level of its system, faster."""
    chip = target.chip if isinstance(target, System) else target
    links = [name for name in ("chip_to_chip", "host_link") if getattr(chip, name) is not None]
    faster = apply(target, [(f"{name}.bandwidth_bytes_per_s",
                             getattr(chip, name).bandwidth_bytes_per_s.value * factor)
                            for name in links])  # fmt: skip
    if isinstance(faster, System):
        levels = [lv.model_copy(update={"bandwidth_bytes_per_s": _scaled(lv.bandwidth_bytes_per_s,
                                                                          factor)})
                  for lv in faster.levels]  # fmt: skip
        faster = faster.model_copy(update={"levels": levels})
    return faster


def _scaled(figure: Figure, factor: float) -> Figure:
    return figure.model_copy(update={"value": figure.value * factor, "source": "what-if"})


def sensitivity(
    workload: Any, target: Chip | System, metric: str | None = None, **options: Any
) -> Sensitivity:
    """Ranks the changes by their gain on `metric` (default: the workload's first objective)."""
    chips = plan_chips(target, options.get("chips"), options.get("tp"), options.get("pp"),
                       options.get("dp"))  # `--tp 8` alone is eight chips, as run's  # fmt: skip
    if isinstance(target, Chip) and chips and chips > 1:
        target = system_for(target, chips)  # so that its links can change
    base = api.simulate(workload, target, **options)
    metric = metric or _default_metric(base)
    if not isinstance(getattr(base, metric, None), int | float):
        numeric = [k for k, v in vars(base).items() if isinstance(v, float)]
        raise UserError(f"--metric {metric}: not a number in the result; choose from "
                        f"{', '.join(numeric)}")  # fmt: skip
    up = higher_is_better(metric)
    before = float(getattr(base, metric))
    gains = []
    for label, changed in changes(target):
        try:
            if isinstance(changed, UserError):
                raise changed
            result = api.simulate(workload, changed, **options)
        except UserError as error:
            gains.append(Gain(label, None, None, None, None, str(error)))
            continue
        after = float(getattr(result, metric))
        ratio = (after / before if up else before / after) if before and after else 1.0
        gains.append(Gain(label, after, ratio, result.fits, result.min_chips))
    # a change that makes the model fit comes first: no speed-up matters before that
    gains.sort(key=lambda g: (g.gain is None, not (g.fits and not base.fits), -(g.gain or 0),
                              g.min_chips or 0))  # fmt: skip
    return Sensitivity(base.model, base.chip, metric, up, before, base.fits, base.min_chips, gains)


def _default_metric(result: Any) -> str:
    for name in ("tokens_per_s_per_user", "latency_s", "step_time_s"):
        if hasattr(result, name):
            return name
    raise UserError("give --metric: this result has no default metric")
