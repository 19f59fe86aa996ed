"""Tables for graphs: the IR listing of `xpusim inspect` and one-pass results of imported
models. Only formatting: every number comes from the graph or the result."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.table import Table

from xpusim.hardware.spec import display_id
from xpusim.ir.graph import Graph
from xpusim.ir.op import Op
from xpusim.ir.tensor import Role, Tensor
from xpusim.report.fit import keyed
from xpusim.report.units import cost_cell, cost_column, seconds, si, watts

if TYPE_CHECKING:
    from xpusim.scenarios.graph_inference import GraphInferenceResult


def tensor_label(t: Tensor) -> str:
    """`2x16x256 bf16`, weights marked `w:` (their bytes stay in memory between passes)."""
    shape = "x".join(map(str, t.shape)) or "scalar"
    return f"{'w:' if t.role is Role.WEIGHT else ''}{shape} {t.dtype.value}"


def op_row(op: Op) -> dict:
    """One op as `inspect --json` prints it."""
    return {
        "name": op.name,
        "kind": op.kind.value,
        "source": op.attr("source", ""),
        "inputs": [_tensor_dict(t) for t in op.inputs],
        "outputs": [_tensor_dict(t) for t in op.outputs],
        "flops": op.flops,
        "matrix_flops": op.matrix_flops,
        "bytes": op.bytes,
    }


def _tensor_dict(t: Tensor) -> dict:
    return {"name": t.name, "shape": list(t.shape), "dtype": t.dtype.value, "role": t.role.value}


def ir_table(graph: Graph, title: str) -> Table:
    """Every op in execution order with its tensors, FLOPs and bytes, and the totals."""
    table = Table(title=title, caption=f"{len(graph)} ops, {si(graph.flops, 'FLOP')}, "
                                      f"{si(graph.bytes, 'B')} moved")  # fmt: skip
    for col in ["#", "op", "kind", "source", "inputs", "outputs", "FLOPs", "bytes"]:
        table.add_column(col, justify="right" if col in ("#", "FLOPs", "bytes") else "left",
                         overflow="fold")  # fmt: skip
    for i, op in enumerate(graph):
        table.add_row(
            str(i), op.name, op.kind.value, str(op.attr("source", "")),
            ", ".join(map(tensor_label, op.inputs)), ", ".join(map(tensor_label, op.outputs)),
            si(op.flops), si(op.bytes, "B"),
        )  # fmt: skip
    return table


def graph_results_table(results: Sequence[GraphInferenceResult], title: str) -> Table:
    """Side by side: one row per result; timings only where the model fits."""
    table = Table(title=title)
    money = cost_column(results)
    columns = ["chip", "precision", "fits", "latency", "items/s", *money, "energy/item", "items/J",
               "power", "bound by"]  # fmt: skip
    for col in columns:
        table.add_column(col, justify="left" if col in ("chip", "precision", "fits") else "right")
    for r in results:
        if not r.fits:
            fits = f"no: needs {r.min_chips} chips"
            table.add_row(display_id(r.chip), r.precision, fits, *["—"] * (len(columns) - 3))
            continue
        table.add_row(
            display_id(r.chip), r.precision, "yes", seconds(r.latency_s), si(r.throughput),
            *cost_cell(r, money), si(r.joules_per_item, "J"), si(1 / r.joules_per_item),
            watts(r.avg_power_w, r.tdp_w), r.bottleneck,
        )  # fmt: skip
    return keyed(table, 2)
