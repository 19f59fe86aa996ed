"""Rich tables for the terminal. Only formatting: every number comes from a result object."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.table import Table

from xpusim.hardware.spec import Chip, display_id
from xpusim.hardware.system import System
from xpusim.ir.dtypes import DType
from xpusim.report.fit import keyed
from xpusim.report.units import cost_cell, cost_column, figure, gigabytes, seconds, si, watts
from xpusim.workloads.transformer_config import TransformerConfig

if TYPE_CHECKING:  # for annotations only: `xpusim run` on an LLM loads no other scenario
    from xpusim.scenarios.llm.inference import LLMInferenceResult
    from xpusim.scenarios.recsys import RecsysResult
    from xpusim.validation.score import Validation
    from xpusim.workloads.resolve import Listed

_PRECISION_ORDER = [DType.NVFP4, DType.MXFP4, DType.INT8, DType.FP8, DType.BF16, DType.FP16,
                    DType.FP32]  # fmt: skip


def chips_table(chips: Sequence[Chip]) -> Table:
    table = Table(title="xpusim chip catalog (dense peaks)")
    for col in ["id", "vendor", "year", *(d.value for d in _PRECISION_ORDER), "memory", "TDP"]:
        table.add_column(col, justify="left" if col in ("id", "vendor") else "right")
    for chip in chips:
        peaks = [
            si(chip.peak_ops_per_s[d].value, "") if d in chip.peak_ops_per_s else "—"
            for d in _PRECISION_ORDER
        ]
        memory = " + ".join(
            f"{gigabytes(m.capacity_bytes.value)} {m.name}"
            for m in chip.memory
            if m.kind.holds_tensors
        )
        table.add_row(
            chip.id, chip.vendor, str(chip.year), *peaks, memory, f"{chip.tdp_w.value:g} W"
        )
    return table


def chip_table(chip: Chip) -> Table:
    """Every figure of the chip file, and where a run uses a calibrated figure instead
    (cost/calibration.py), that one beside it, marked with its calibration. Three columns,
    where each figure comes from in one (its source, confidence and note), so that the
    table reads at 80 columns: five left the note a word a line."""
    from xpusim.cost.calibration import catalog_calibration
    from xpusim.cost.kernel_tables import tables_for_chip
    from xpusim.cost.op_times import op_times_for_chip

    cal = catalog_calibration(chip.id)
    replaced = cal.replaced_figures() if cal else {}
    title = f"{chip.name} ({chip.id}), {chip.process}, {chip.year}"
    if replaced:
        title += (f"; * a run uses the calibrated figure (hardware/calibration/"
                  f"{cal.chip}.json, {cal.date})")  # fmt: skip
    table = keyed(Table(title=title), 0)
    table.add_column("field", no_wrap=True)
    table.add_column("value", overflow="fold")
    table.add_column("source (confidence): note", overflow="fold")

    def add(path: str, value: str, confidence: str, source: str, note: str) -> None:
        where = f"{source} ({confidence})" if source else confidence
        table.add_row(field_lines(path), value, f"{where}: {note}" if note else where)

    shown = set()
    for path, fig in chip.figure_items():
        value = figure(path, fig.value)
        if path in replaced:
            shown.add(path)
            value = f"{replaced[path]} * (file: {value})"
        add(path, value, fig.confidence, fig.source, fig.note)
    for path in replaced.keys() - shown:  # fitted where the chip file assumes nothing
        add(path, f"{replaced[path]} *", "calibrated", "", "")
    for kernels in tables_for_chip(chip.id):  # measured kernels' floor (cost/kernel_tables.py)
        add(*kernels.describe(), "derived" if kernels.derived else "measured", kernels.source,
            kernels.conditions)  # fmt: skip
    for timed in op_times_for_chip(chip.id):  # an engine's kernel chain (cost/op_times.py)
        add(*timed.describe(), "measured", timed.source, timed.conditions)
    return table


FIELD_WIDTH = 22
"""The widest line of a figure's name in `xpusim chip`: the name breaks after a '.' or before
an '@' to fit, never inside a part, so that the other columns keep room at 80 columns."""


def field_lines(path: str, width: int = FIELD_WIDTH) -> str:
    """`path` on lines of at most `width` characters where its parts allow, broken after a
    '.' or before an '@': 'memory[1].bandwidth_bytes_per_s' -> 'memory[1].' and
    'bandwidth_bytes_per_s'. A part longer than `width` has a line of its own."""
    lines = [""]
    for part in re.findall(r"@?[^.@]+\.?", path):
        if lines[-1] and len(lines[-1]) + len(part) > width:
            lines.append("")
        lines[-1] += part
    return "\n".join(lines)


def sources_table(chip: Chip) -> Table:
    table = keyed(Table(title="sources"), 0)
    table.add_column("key")
    table.add_column("source", overflow="fold")
    for key, text in chip.sources.items():
        table.add_row(key, text)
    return table


def systems_table(systems: Sequence[System]) -> Table:
    table = Table(title="xpusim systems (a collective over p chips runs on the first level >= p)")
    for col in ["id", "chip", "default for chip", "levels: name kind size, links x GB/s, latency"]:
        table.add_column(col)
    for s in systems:
        levels = "; ".join(
            f"{lv.name} {lv.kind} {lv.size}, {lv.links_per_chip.value:g} x "
            f"{lv.bandwidth_bytes_per_s.value / 1e9:g} GB/s, {seconds(lv.latency_s.value)}"
            for lv in s.levels
        )
        table.add_row(s.id, s.chip_id, "yes" if s.default_for_chip else "", levels)
    return table


def models_table(entries: Sequence[Listed]) -> Table:
    table = Table(title="models by name, without the network (xpusim models --json: sources)")
    for col in ["id", "from", "hub repo", "params", "active", "published", "layers", "hidden",
                "heads/kv", "experts", "vocab", "checkpoint"]:  # fmt: skip
        table.add_column(col, justify="left" if col in ("id", "from", "hub repo", "checkpoint")
                         else "right")  # fmt: skip
    for e in entries:
        c = e.config
        published = si(e.published_params) if e.published_params else "—"
        head = [e.id, e.origin, e.hf_repo or "—"]
        if c is None:  # bundled before this tree builds its architecture
            why = e.error.split(": ", 1)[-1].split(" (supported")[0]  # less its file, its list
            table.add_row(*head, "—", "—", published, *["—"] * 5, f"not built: {why}")
            continue
        if not isinstance(c, TransformerConfig):  # a recommendation model has none of these
            table.add_row(*head, si(c.param_count), "—", published, *["—"] * 6)
            continue
        experts = f"{c.experts_per_token}/{c.num_experts}" if c.is_moe else "—"
        active = si(c.active_param_count) if c.is_moe else "—"
        checkpoint = c.checkpoint.describe() if c.checkpoint else "—"
        table.add_row(
            *head, si(c.param_count), active, published, str(c.num_layers),
            str(c.hidden_size), f"{c.num_heads}/{c.num_kv_heads}", experts, str(c.vocab_size),
            checkpoint,
        )  # fmt: skip
    return table


def _plan(r: LLMInferenceResult) -> str:
    degrees = " x ".join(f"{k}{v}" for k, v in r.plan.items() if v > 1 and k != "dp_attention")
    degrees += ", dp-attention" if r.plan.get("dp_attention") else ""
    degrees = r.layout or degrees  # a torus layout's name says more than its tp
    return f"{r.chips} ({degrees})" if degrees else str(r.chips)


def results_table(results: Sequence[LLMInferenceResult], title: str) -> Table:
    """Side by side: one row per result; timings only where the model fits."""
    table = Table(title=title)
    money = cost_column(results)
    columns = ["chip", "chips", "precision", "fits", "TTFT", "TPOT", "tok/s/user", "tok/s",
               *money, "energy/token", "tok/J", "power/chip", "bound by"]  # fmt: skip
    for col in columns:
        table.add_column(col, justify="left" if col in ("chip", "precision", "fits") else "right")
    for r in results:
        head = [display_id(r.chip), _plan(r), r.precision]
        if not r.fits:
            head.append(_not_fit(r))
            table.add_row(*head, *["—"] * (len(columns) - len(head)))
            continue
        table.add_row(
            *head, "yes", seconds(r.ttft_s), seconds(r.tpot_s),
            si(r.tokens_per_s_per_user), si(r.tokens_per_s), *cost_cell(r, money),
            si(r.joules_per_token, "J"), si(1 / r.joules_per_token),
            watts(r.avg_power_w, r.tdp_w), r.bottleneck,
        )  # fmt: skip
    return keyed(table, 3)


def _not_fit(r: LLMInferenceResult) -> str:
    """Why a result does not fit, in a cell: too few chips to hold one copy of the model
    and its cache (a lower bound), or, with enough of them, a plan whose fullest chip is
    over (a pipeline stage's activations and cache do not shrink with more replicas)."""
    if r.min_chips > r.chips:
        return f"no: needs {r.min_chips}+ chips"
    mem = r.per_chip_memory_bytes
    return f"no: fullest chip {gigabytes(mem.total)} of {gigabytes(mem.capacity)}"


def recsys_table(results: Sequence[RecsysResult], title: str) -> Table:
    """Recommendation serving side by side; timings only where the model fits."""
    table = Table(title=title)
    money = cost_column(results)
    columns = ["chip", "chips", "precision", "fits", "batch", "latency", "queries/s", *money,
               "queries/J", "energy/query", "power/chip", "lookups", "bound by"]  # fmt: skip
    for col in columns:
        table.add_column(col, justify="left" if col in ("chip", "precision", "fits") else "right")
    for r in results:
        chips = f"{r.chips} ({r.sharding}-wise)" if r.sharding else str(r.chips)
        head = [display_id(r.chip), chips, f"{r.precision}/{r.weight_precision}"]
        if not r.fits:
            head.append(f"no: needs {r.min_chips} chips")
            table.add_row(*head, *["—"] * (len(columns) - len(head)))
            continue
        lookups = "sparse core" if r.sparse_core else f"{r.embedding_s / r.latency_s:.0%} of time"
        table.add_row(
            *head, "yes", str(r.batch), seconds(r.latency_s), si(r.queries_per_s),
            *cost_cell(r, money), si(r.queries_per_joule), si(r.joules_per_query, "J"),
            watts(r.avg_power_w, r.tdp_w), lookups, r.bottleneck,
        )  # fmt: skip
    return keyed(table, 3)


def ops_table(result: LLMInferenceResult, top: int = 12) -> Table:
    """The ops that take most of TTFT and TPOT, each with its share of the whole figure, then
    the rest of the figure as rows of its own: the ops not shown, and the time outside the
    ops, each part named by its cause (result.ops' "wait" rows: a pipeline's microbatches
    queued at its slowest stage, collectives hidden by --overlap), so that a phase's rows
    add up to it."""
    table = Table(title=f"where the time goes (top {top} ops of TTFT and TPOT, with the rest)")
    for col in ["phase", "op", "kind", "count", "time each", "share", "bound by"]:
        table.add_column(col, justify="left" if col in ("phase", "op", "kind") else "right")
    whole = {"prefill": result.ttft_s, "decode": result.tpot_s}
    for phase in ("decode", "prefill"):
        ops = [o for o in result.ops if o.phase == phase and o.kind != "wait"]
        waits = [o for o in result.ops if o.phase == phase and o.kind == "wait"]
        total = whole[phase]
        if not ops or not total:
            continue
        ranked = sorted(ops, key=lambda o: -o.count * o.time_s)
        for op in ranked[:top]:
            table.add_row(phase, op.name, op.kind, str(op.count), seconds(op.time_s),
                          f"{op.count * op.time_s / total:.1%}", op.bottleneck)  # fmt: skip
        if rest := ranked[top:]:
            rest_s = sum(o.count * o.time_s for o in rest)
            table.add_row(phase, f"{len(rest)} other ops", "", "", "", f"{rest_s / total:.1%}",
                          "")  # fmt: skip
        for wait in waits:
            shown = seconds(abs(wait.time_s))
            table.add_row(phase, wait.name, "wait", "", shown if wait.time_s > 0 else f"-{shown}",
                          f"{wait.time_s / total:.1%}", "")  # fmt: skip
    return keyed(table, 2)


def validation_table(v: Validation) -> Table:
    table = Table(title="predicted vs published, grouped by chip and workload")
    for col in ["point", "metric", "measured", "predicted", "error", "chip", "workload",
                "plan", "bound by"]:  # fmt: skip
        table.add_column(
            col, justify="right" if col in ("measured", "predicted", "error") else "left"
        )
    for p in sorted(v.points, key=lambda p: (p.chip, p.workload, p.id)):
        sign = "+" if p.ratio > 1 else "-"
        table.add_row(
            p.id, p.metric, si(p.measured), si(p.predicted), f"{sign}{p.ape:.0%}", p.chip,
            p.workload, p.detail, p.bottleneck,
        )  # fmt: skip
    return keyed(table, 1)
