"""LLM inference on one chip: a prefill, then decode steps against a growing KV cache.

Timeline: the prefill of batch x prompt tokens yields the first output token (TTFT); each of
the remaining gen - 1 tokens takes one decode step whose new token attends to the whole cache
so far (prompt + 1 ... prompt + gen - 1 keys). TPOT is the mean step time over that growth,
so latency = TTFT + (gen - 1) x TPOT. With gen = 1 there is no decode; TPOT is then reported
for the one step that would follow, so the rate is still known.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from xpusim.compiler.memory_plan import Footprint, min_chips, peak_activation_bytes, place
from xpusim.cost.op_table import OpTable, op_table
from xpusim.cost.roofline import Bottleneck, HardwareArrays, OpCosts, evaluate
from xpusim.errors import UserError
from xpusim.hardware.spec import Chip
from xpusim.ir.dtypes import DType
from xpusim.workloads.transformer import StepShape, build_step
from xpusim.workloads.transformer_config import TransformerConfig

DEFAULT_PRECISIONS = (DType.BF16, DType.FP16, DType.INT8)
"""Tried in order when no precision is given: the chip's native 16-bit format, else int8."""


@dataclass
class OpReport:
    phase: str
    name: str
    kind: str
    count: int
    flops: float
    bytes: float
    time_s: float
    compute_s: float
    memory_s: float
    overhead_s: float
    energy_j: float
    bottleneck: str
    share: float  # of the phase's total time, all instances included


@dataclass
class MemoryBytes:
    weights: float
    kv_cache: float
    activations: float
    total: float
    capacity: float


@dataclass
class LLMInferenceResult:
    model: str
    chip: str
    chips: int
    batch: int
    prompt: int
    gen: int
    precision: str
    weight_precision: str
    mode: str
    fits: bool
    reason: str
    min_chips: int
    memory_bytes: MemoryBytes
    placement: dict[str, str]
    ttft_s: float
    tpot_s: float
    latency_s: float
    tokens_per_s: float
    tokens_per_s_per_user: float
    energy_j: float
    joules_per_token: float
    avg_power_w: float
    tdp_w: float
    bottleneck: str
    prefill_flops: float
    decode_flops_per_step: float
    notes: list[str] = field(default_factory=list)
    ops: list[OpReport] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def resolve_precision(chip: Chip, precision: str | DType | None) -> tuple[DType, list[str]]:
    if precision is not None:
        dtype = DType.parse(str(precision))
        chip.peak(dtype)  # raises a UserError naming the supported formats
        return dtype, []
    dtype = next((d for d in DEFAULT_PRECISIONS if d in chip.peak_ops_per_s), None)
    if dtype is None:
        raise UserError(f"{chip.id}: none of bf16, fp16, int8 is supported; pass --precision")
    return dtype, [
        f"precision not given: used {dtype.value}, the first of bf16/fp16/int8 "
        f"that {chip.id} supports"
    ]


def _check_positive(**values: int) -> None:
    for name, value in values.items():
        if not isinstance(value, int | np.integer) or isinstance(value, bool) or value < 1:
            raise UserError(f"{name} must be a positive integer, got {value!r}")


def simulate(
    model: TransformerConfig,
    chip: Chip,
    *,
    batch: int = 1,
    prompt: int = 128,
    gen: int = 128,
    precision: str | DType | None = None,
    weight_precision: str | DType | None = None,
) -> LLMInferenceResult:
    _check_positive(batch=batch, prompt=prompt, gen=gen)
    act, notes = resolve_precision(chip, precision)
    weight = DType.parse(str(weight_precision), "weight precision") if weight_precision else act
    if weight.bits > act.bits:
        raise UserError(
            f"weight precision {weight.value} is wider than precision {act.value}; "
            f"weight-only quantization narrows weights"
        )

    prefill = build_step(model, StepShape(batch, prompt, prompt), act, weight)
    first_kv, last_kv = prompt + 1, prompt + max(gen - 1, 1)
    decode_a = build_step(model, StepShape(batch, 1, first_kv), act, weight)
    decode_b = build_step(model, StepShape(batch, 1, last_kv), act, weight)

    footprint = Footprint(
        weights=model.param_count * weight.itemsize,
        kv_cache=batch * (prompt + gen) * model.kv_cache_bytes_per_token(act.itemsize),
        activations=max(peak_activation_bytes(prefill), peak_activation_bytes(decode_b)),
    )
    capacity = chip.capacity_bytes
    fits = footprint.total <= capacity
    placement = place(chip, footprint)

    pre_table = op_table(prefill)
    pre_costs = evaluate(pre_table, HardwareArrays.build(chip, pre_table), placement)
    ttft_s = float(pre_table.count @ pre_costs.time_s)
    pre_energy = float(pre_table.count @ pre_costs.energy_j)

    dec_a, dec_b = op_table(decode_a), op_table(decode_b)
    steps = max(gen - 1, 1)
    span = last_kv - first_kv
    fraction = np.arange(steps) / span if span else np.zeros(steps)
    dec_table = dec_a.lerp(dec_b, fraction)
    dec_costs = evaluate(dec_table, HardwareArrays.build(chip, dec_a), placement)
    step_time = dec_costs.time_s @ dec_a.count  # (steps,)
    step_energy = dec_costs.energy_j @ dec_a.count
    tpot_s = float(step_time.mean())
    decode_steps = gen - 1
    latency_s = ttft_s + decode_steps * tpot_s
    energy_j = pre_energy + decode_steps * float(step_energy.mean())

    ops = _op_reports("prefill", pre_table, pre_costs, ttft_s) + _op_reports(
        "decode", dec_a, _mean_over_steps(dec_costs), tpot_s, dec_table
    )
    bottleneck = _overall_bottleneck(ops, decode_steps)
    level_names = [m.name for m in chip.memory]
    return LLMInferenceResult(
        model=model.name,
        chip=chip.id,
        chips=1,
        batch=batch,
        prompt=prompt,
        gen=gen,
        precision=act.value,
        weight_precision=weight.value,
        mode="inference",
        fits=fits,
        reason="" if fits else _not_fit_reason(chip, footprint),
        min_chips=min_chips(footprint, capacity),
        memory_bytes=MemoryBytes(
            footprint.weights, footprint.kv_cache, footprint.activations, footprint.total, capacity
        ),
        placement={role.value: level_names[i] for role, i in placement.home.items()},
        ttft_s=ttft_s,
        tpot_s=tpot_s,
        latency_s=latency_s,
        tokens_per_s=batch * gen / latency_s,
        tokens_per_s_per_user=1.0 / tpot_s,
        energy_j=energy_j,
        joules_per_token=energy_j / (batch * gen),
        avg_power_w=energy_j / latency_s,
        tdp_w=chip.tdp_w.value,
        bottleneck=bottleneck,
        prefill_flops=prefill.flops,
        decode_flops_per_step=float(
            (dec_table.matrix_flops + dec_table.vector_flops).mean(0) @ dec_a.count
        ),
        notes=notes,
        ops=ops,
    )


def _mean_over_steps(costs: OpCosts) -> OpCosts:
    return OpCosts(*(getattr(costs, f).mean(axis=0) for f in OpCosts.__dataclass_fields__))


def _op_reports(
    phase: str, table: OpTable, costs: OpCosts, phase_s: float, values: OpTable | None = None
) -> list[OpReport]:
    values = values or table
    flops = np.atleast_2d(values.matrix_flops + values.vector_flops).mean(axis=0)
    moved = np.atleast_2d(values.role_bytes.sum(axis=-2)).mean(axis=0)
    labels = costs.bottleneck
    return [
        OpReport(
            phase=phase,
            name=table.names[i],
            kind=table.kinds[i].value,
            count=int(table.count[i]),
            flops=float(flops[i]),
            bytes=float(moved[i]),
            time_s=float(costs.time_s[i]),
            compute_s=float(costs.compute_s[i]),
            memory_s=float(costs.memory_s[i]),
            overhead_s=float(costs.overhead_s[i]),
            energy_j=float(costs.energy_j[i]),
            bottleneck=Bottleneck(int(labels[i])).label,
            share=float(table.count[i] * costs.time_s[i] / phase_s) if phase_s else 0.0,
        )
        for i in range(len(table))
    ]


def _overall_bottleneck(ops: list[OpReport], decode_steps: int) -> str:
    """The label carrying the most time over the whole request."""
    totals: dict[str, float] = {}
    for op in ops:
        weight = decode_steps if op.phase == "decode" else 1
        totals[op.bottleneck] = totals.get(op.bottleneck, 0.0) + op.count * op.time_s * weight
    return max(totals, key=totals.__getitem__)


def _not_fit_reason(chip: Chip, fp: Footprint) -> str:
    gb = 1e9
    return (
        f"memory: needs {fp.total / gb:.1f} GB (weights {fp.weights / gb:.1f}, KV cache "
        f"{fp.kv_cache / gb:.2f}, activations {fp.activations / gb:.2f}) but {chip.id} holds "
        f"{chip.capacity_bytes / gb:.2f} GB"
    )
