"""Performance per watt across several models and chips: what `xpusim compare M1 M2 ...`
ends with. Each result's work rate (its PRICED_BY: tokens, queries or samples a second) over
the power it is charged: the chips' simulated draw (energy over time, `avg_power_w` a chip),
or a provisioned power per chip that the user gives (a server's power over its accelerators,
the basis of the MTIA v1 paper's comparison). Each chip is then put against the first chip,
model by model, and summarized by the geometric mean of those ratios, as benchmark suites
average speed-ups.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.table import Table

from xpusim.report.units import si


@dataclass(frozen=True)
class PerfPerWatt:
    chips: tuple[str, ...]  # as the user named them; the first is the reference
    basis: str  # "simulated power" or "provisioned power"
    unit: str  # what the rate counts (output tokens, queries, samples); "" when models differ
    by_model: dict[str, tuple[float | None, ...]]  # work per joule, per chip; None: not fitting
    shown: bool  # several models, or a provisioned basis: worth a table of its own

    @classmethod
    def of(cls, runs: dict[str, Sequence[Any]], chips: Sequence[str],
           provisioned: dict[str, float]) -> PerfPerWatt:  # fmt: skip
        units = {type(r).PRICED_BY[1] for results in runs.values() for r in results
                 if getattr(r, "fits", True)}  # a refused chip (cli.py) has no rate
        return cls(
            chips=tuple(chips),
            basis="provisioned power" if provisioned else "simulated power",
            unit=units.pop() if len(units) == 1 else "",
            by_model={
                model: tuple(_per_joule(r, provisioned.get(chip))
                             for r, chip in zip(results, chips, strict=True))
                for model, results in runs.items()
            },
            shown=len(runs) > 1 or bool(provisioned),
        )

    def ratios(self, model: str) -> tuple[float | None, ...]:
        """Each chip's work per joule over the first chip's, for one model."""
        values = self.by_model[model]
        return tuple(None if v is None or values[0] is None else v / values[0] for v in values)

    @property
    def geometric_mean(self) -> tuple[float | None, ...]:
        """Of each chip's ratios over the models where both it and the first chip ran."""
        means = []
        for i in range(len(self.chips)):
            found = [r[i] for r in map(self.ratios, self.by_model) if r[i] is not None]
            means.append(math.exp(sum(map(math.log, found)) / len(found)) if found else None)
        return tuple(means)

    def to_dict(self) -> dict[str, Any]:
        return {
            "basis": self.basis, "unit": self.unit, "relative_to": self.chips[0],
            "per_joule": {m: dict(zip(self.chips, v, strict=True))
                          for m, v in self.by_model.items()},
            "relative": {m: dict(zip(self.chips, self.ratios(m), strict=True))
                         for m in self.by_model},
            "geometric_mean": dict(zip(self.chips, self.geometric_mean, strict=True)),
        }  # fmt: skip

    def table(self) -> Table:
        per = f"{self.unit} per joule" if self.unit else "work per joule"
        table = Table(title=f"performance per watt on {self.basis}: {per}, and against "
                            f"{self.chips[0]}")  # fmt: skip
        table.add_column("model")
        for chip in self.chips:
            table.add_column(chip, justify="right")
        for model, values in self.by_model.items():
            cells = [_cell(v, r) for v, r in zip(values, self.ratios(model), strict=True)]
            table.add_row(model, *cells)
        table.add_row("geometric mean", *("—" if g is None else f"{g:.2f}x"
                                          for g in self.geometric_mean))  # fmt: skip
        return table


def _per_joule(result: Any, provisioned_w: float | None) -> float | None:
    """Work a joule: the rate over the chips' power (simulated or provisioned); None where
    the workload does not fit (its rate is not a running system's)."""
    if not getattr(result, "fits", True):
        return None
    watts = provisioned_w if provisioned_w is not None else result.avg_power_w
    return getattr(result, type(result).PRICED_BY[0]) / (watts * result.chips)


def _cell(value: float | None, ratio: float | None) -> str:
    if value is None:
        return "does not fit"
    return si(value) if ratio is None else f"{si(value)} ({ratio:.2f}x)"
