"""What the page draws, made from the API's results: each function takes what `xpusim.api`
returns and gives plain JSON-ready dicts, so the server's routes stay one line of work each
and a test can check a view without a server."""

from __future__ import annotations

import itertools
from typing import Any

from xpusim.errors import UserError
from xpusim.hardware.spec import Chip
from xpusim.hardware.system import System
from xpusim.ir.dtypes import DType


def figure(chip: Chip, path: str) -> dict[str, Any]:
    """One figure with what the page shows on hover: its source's text and its confidence."""
    f = dict(chip.figure_items())[path]
    return {"value": f.value, "source": chip.sources.get(f.source, f.source),
            "confidence": f.confidence, "note": f.note}  # fmt: skip


def chip_card(chip: Chip) -> dict[str, Any]:
    """A chip's headline figures (peaks, memories, TDP, links), each with its source."""
    items = dict(chip.figure_items())

    def sourced(path: str) -> dict[str, Any] | None:
        return figure(chip, path) if path in items else None

    return {
        "id": chip.id, "name": chip.name, "vendor": chip.vendor, "year": chip.year,
        "process": chip.process, "description": chip.description,
        "tdp_w": sourced("tdp_w"), "clock_hz": sourced("clock_hz"),
        "peak_ops_per_s": {d.value: sourced(f"peak_ops_per_s.{d.value}")
                           for d in chip.peak_ops_per_s},
        "memory": [{"name": m.name, "kind": m.kind.value,
                    "capacity_bytes": sourced(f"memory[{i}].capacity_bytes"),
                    "bandwidth_bytes_per_s": sourced(f"memory[{i}].bandwidth_bytes_per_s")}
                   for i, m in enumerate(chip.memory)],
        "chip_to_chip": None if chip.chip_to_chip is None else {
            "name": chip.chip_to_chip.name,
            "count": sourced("chip_to_chip.count"),
            "bandwidth_bytes_per_s": sourced("chip_to_chip.bandwidth_bytes_per_s")},
    }  # fmt: skip


def system_card(system: System) -> dict[str, Any]:
    return {"id": system.id, "name": system.name, "chip": system.chip_id, "chips": system.chips,
            "description": system.description}


def chip_of(spec: Chip | System) -> Chip:
    return spec.chip if isinstance(spec, System) else spec


def roofs(result: Any, spec: Chip | System) -> dict[str, Any] | None:
    """The roofline's ceilings for a result's ops: the peak of the format it ran in and each
    memory's bandwidth (None for a result without per-op reports)."""
    if not getattr(result, "ops", None):
        return None
    chip = chip_of(spec)
    dtype = DType.parse(result.precision)
    peak = chip.peak_ops_per_s.get(dtype)
    return {"peak_ops_per_s": None if peak is None else peak.value,
            "precision": dtype.value,
            "memory": [{"name": m.name, "bandwidth_bytes_per_s": m.bandwidth_bytes_per_s.value}
                       for m in chip.memory]}  # fmt: skip


def simulated(result: Any, spec: Chip | System) -> dict[str, Any]:
    """A result as the page gets it: `--json`'s object, its roofline's ceilings and its chip."""
    return {"result": result.to_dict(), "roofs": roofs(result, spec),
            "chip": chip_card(chip_of(spec))}  # fmt: skip


def sweep_points(targets: list[tuple[str, int | None]], axes: dict[str, list[Any]]) -> list:
    """Every combination of the axes on every (target, chips) pair, as sweep Points."""
    from xpusim.explore.grid import Point

    names = list(axes)
    points = []
    for target, chips in targets:
        for values in itertools.product(*(axes[n] for n in names)):
            options = tuple(zip(names, values, strict=True))
            if chips is not None:
                options = (*options, ("chips", chips))
            points.append(Point(target, (), options))
    return points


def sweep(workload: Any, specs: dict[str, Chip | System], points: list, rank: str) -> dict:
    """Every point simulated together (api.simulate_many, as a sweep's chunk), then each
    target's Pareto front on the workload's two objectives."""
    from xpusim import api
    from xpusim.explore.pareto import front, objectives_for
    from xpusim.explore.rows import error_row, result_row

    jobs = [(specs[p.target], dict(p.options)) for p in points]
    rows = []
    for point, found in zip(points, api.simulate_many(workload, jobs), strict=True):
        failed = isinstance(found, UserError)
        rows.append(error_row(point, found) if failed else result_row(point, found))
    columns = sorted({c for row in rows for c in row})
    objectives = objectives_for(columns, rank, rows)
    label = {p.key: _label(p) for p in points}
    fronts = {}
    for (target, chips), members in itertools.groupby(
        range(len(points)), key=lambda i: (points[i].target, dict(points[i].options).get("chips"))
    ):
        name = target if chips is None else f"{target} x{chips}"
        fronts[name] = front(rows, objectives, list(members))
    keep = ("fits", "error", "bottleneck", "chips", *(o.column for o in objectives))
    return {
        "objectives": [{"column": o.column, "label": o.label, "maximize": o.maximize}
                       for o in objectives],
        "points": [{"target": p.target, "label": label[p.key], "options": dict(p.options),
                    **{k: row.get(k) for k in keep}} for p, row in zip(points, rows, strict=True)],
        "fronts": fronts,
    }  # fmt: skip


def _label(point: Any) -> str:
    return ", ".join(f"{k} {v}" for k, v in point.options if k != "chips")
