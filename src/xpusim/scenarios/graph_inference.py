"""One forward pass of an imported graph on one chip: a ResNet on a batch of images, a
traced LLM prefill, any model brought in through torch.export or ONNX.

The graph is compiled for the run (recast to the precision, then fused, as an inference
compiler would: compiler/precision.py, compiler/fusion.py), planned like every workload
(compiler/memory_plan.py) and costed op by op with the roofline (cost/roofline.py):

    latency = sum over ops of time,  throughput = batch / latency
    energy  = sum over ops of energy (static power included),  avg_power = energy / latency

`batch` is the leading dimension of the graph's first input, fixed when it was traced.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from xpusim.compiler.fusion import fuse
from xpusim.compiler.memory_plan import Footprint, min_chips, peak_activation_bytes, place
from xpusim.compiler.precision import recast
from xpusim.cost.dollars import Cost
from xpusim.cost.op_table import op_table
from xpusim.cost.roofline import HardwareArrays, evaluate
from xpusim.errors import UserError
from xpusim.hardware.spec import Chip
from xpusim.hardware.system import System
from xpusim.ir.dtypes import DType, Format
from xpusim.ir.graph import Graph
from xpusim.ir.tensor import Role
from xpusim.result import Result
from xpusim.scenarios.formats import resolve_formats
from xpusim.scenarios.op_reports import OpReport, op_reports
from xpusim.scenarios.registry import register
from xpusim.workloads.imported import ImportedModel


@dataclass
class GraphMemory:
    weights: float
    activations: float
    total: float
    capacity: float


@dataclass
class GraphInferenceResult(Result):
    PRICED_BY: ClassVar[tuple[str, str]] = ("throughput", "samples")

    model: str
    source: str  # "torch.export", "onnx" or "config.json" (an encoder)
    chip: str
    chips: int
    batch: int
    inputs: dict[str, list[int]]
    precision: str
    weight_precision: str
    mode: str
    fits: bool
    reason: str
    min_chips: int
    memory_bytes: GraphMemory
    placement: dict[str, str]
    latency_s: float
    throughput: float  # batch items (images, sequences) per second
    energy_j: float
    joules_per_item: float
    avg_power_w: float
    tdp_w: float
    bottleneck: str
    total_flops: float
    total_bytes: float
    cost: Cost | None = None  # cost/dollars.py: filled where a price is known
    notes: list[str] = field(default_factory=list)
    ops: list[OpReport] = field(default_factory=list)


def simulate(
    model: ImportedModel,
    chip: Chip | System,
    *,
    precision: str | DType | None = None,
    weight_precision: str | Format | None = None,
    chips: int | None = None,
) -> GraphInferenceResult:
    """One pass at the traced shapes; precision defaults to the chip's bf16/fp16/int8."""
    spec = one_chip(chip, chips, "an imported graph")
    act, weight, notes = resolve_formats(spec, precision, weight_precision)
    graph = fuse(recast(model.graph, act, weight))
    return one_pass(model, graph, spec, act, weight, notes)


def one_pass(
    model: ImportedModel, graph: Graph, spec: Chip, act: DType, weight: Format, notes: list[str]
) -> GraphInferenceResult:
    """The result of running `graph`, compiled for `spec`, once: what every one-pass
    workload reports (an imported graph, an encoder)."""
    footprint = Footprint(
        weights=graph.tensor_bytes(Role.WEIGHT),
        kv_cache=graph.tensor_bytes(Role.KV_CACHE),
        activations=peak_activation_bytes(graph),
    )
    capacity = spec.capacity_bytes
    fits = footprint.total <= capacity
    placement = place(spec, footprint)
    table = op_table(graph)
    costs = evaluate(table, HardwareArrays.build(spec, table), placement)
    latency_s = float(table.count @ costs.time_s)
    energy_j = float(table.count @ costs.energy_j)
    ops = op_reports("forward", table, costs, latency_s)
    by_label: dict[str, float] = {}
    for op in ops:
        by_label[op.bottleneck] = by_label.get(op.bottleneck, 0.0) + op.count * op.time_s
    levels = [m.name for m in spec.memory]
    return GraphInferenceResult(
        model=model.name,
        source=model.source,
        chip=spec.id,
        chips=1,
        batch=model.batch,
        inputs={name: list(shape) for name, shape in model.inputs.items()},
        precision=act.value,
        weight_precision=weight.value,
        mode="inference",
        fits=fits,
        reason="" if fits else _not_fit_reason(spec, footprint),
        min_chips=min_chips(footprint, capacity),
        memory_bytes=GraphMemory(
            footprint.weights, footprint.activations, footprint.total, capacity
        ),
        placement={role.value: levels[i] for role, i in placement.home.items()},
        latency_s=latency_s,
        throughput=model.batch / latency_s,
        energy_j=energy_j,
        joules_per_item=energy_j / model.batch,
        avg_power_w=energy_j / latency_s,
        tdp_w=spec.tdp_w.value,
        bottleneck=max(by_label, key=by_label.__getitem__),
        total_flops=graph.flops,
        total_bytes=graph.bytes,
        notes=notes,
        ops=ops,
    )


def one_chip(target: Chip | System, chips: int | None, what: str) -> Chip:
    if (chips or 1) > 1 or (isinstance(target, System) and target.chips > 1):
        raise UserError(
            f"{what} runs on one chip for now: partitioning it over chips is not "
            "modelled yet; a one-chip run reports min_chips"
        )
    return target.chip if isinstance(target, System) else target


def _not_fit_reason(chip: Chip, fp: Footprint) -> str:
    gb = 1e9
    return (
        f"memory: needs {fp.total / gb:.2f} GB (weights {fp.weights / gb:.2f}, activations "
        f"{fp.activations / gb:.2f}) but {chip.id} holds {chip.capacity_bytes / gb:.2f} GB"
    )


register("graph", "inference", simulate)
