"""Where a chip falls short for training, in words: memory, compute, bandwidth, interconnect.

Each sentence names the resource, the numbers behind it and the share of the step it costs,
so that "can MTIA v1 train a 7B model?" gets an answer a person can check: which limit
binds first, and by how much.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xpusim.compiler.optimizer import StateBytes
from xpusim.hardware.spec import Chip, MemoryKind
from xpusim.hardware.system import System
from xpusim.ir.dtypes import DType

if TYPE_CHECKING:
    from xpusim.scenarios.training import TrainingMemory, TrainingResult

GB = 1e9
SHOWN_SHARE = 0.1  # parts of the step below this share are not worth a sentence
_COMM = ("tensor_parallel_comm", "data_parallel_comm", "pipeline_sends")
_PASSES = ("forward", "backward", "recompute")


def not_fit_reason(chip: Chip, mem: TrainingMemory, chips: int, per_param: StateBytes) -> str:
    where = f"{chip.id} holds" if chips == 1 else f"each of the {chips} {chip.id} chips holds"
    return (
        f"memory: the fullest chip needs {mem.total / GB:.1f} GB (weights "
        f"{mem.weights / GB:.1f}, gradients {mem.gradients / GB:.1f}, optimizer state "
        f"{mem.optimizer_state / GB:.1f}, stashed activations {mem.activations / GB:.1f}) "
        f"but {where} {mem.capacity / GB:.2f} GB; training keeps {per_param.total:g} B per "
        f"parameter before activations"
    )


def limits(result: TrainingResult, chip: Chip, system: System, per_param: StateBytes) -> list[str]:
    """Sentences, the binding limit first: memory when it does not fit, then the parts of
    the step that take at least SHOWN_SHARE of it."""
    lines = []
    if not result.fits:
        lines.append(
            f"{result.reason}: at least {result.min_chips} chips to hold the training state "
            f"(ZeRO-3 shards it over data-parallel chips; --recompute full shrinks activations)"
        )
    step, parts = result.step_time_s, result.time_breakdown_s
    shares = {
        "passes": sum(parts[k] for k in _PASSES) / step,
        "interconnect": sum(parts[k] for k in _COMM) / step,
        "optimizer": parts["optimizer"] / step,
        "bubble": parts["pipeline_bubble"] / step,
    }
    words = {
        "passes": lambda s: _passes(result, chip, s),
        "interconnect": lambda s: _interconnect(result, system, s),
        "optimizer": lambda s: _optimizer(result, chip, per_param, s),
        "bubble": lambda s: _bubble(result, s),
    }
    for part, share in sorted(shares.items(), key=lambda kv: -kv[1]):
        if share >= SHOWN_SHARE:
            lines.append(words[part](share))
    return lines


def _bubble(result: TrainingResult, share: float) -> str:
    """The bubble in slots of one microbatch's passes on a rank: pp - 1 of m + pp - 1 under
    1F1B, (pp - 1) / v of m + (pp - 1) / v interleaved."""
    pp, m, v = result.plan["pp"], result.microbatches, result.virtual_stages
    if v == 1:
        return (f"pipeline: the 1F1B bubble leaves stages idle {share:.0%} of the step "
                f"({pp - 1} of {m + pp - 1} microbatch slots); more microbatches per step "
                f"shrink it")  # fmt: skip
    idle = (pp - 1) / v
    return (f"pipeline: the interleaved 1F1B bubble ({v} chunks a rank) leaves stages idle "
            f"{share:.0%} of the step ({idle:.3g} of {m + idle:.3g} microbatch slots); more "
            f"microbatches or chunks per rank shrink it")  # fmt: skip


def _passes(result: TrainingResult, chip: Chip, share: float) -> str:
    op_time = {"compute": 0.0, "memory": 0.0}
    for op in result.ops:
        if op.phase != "optimizer" and op.bottleneck in op_time:
            op_time[op.bottleneck] += op.share
    bound = max(op_time, key=op_time.__getitem__)
    dtype = DType(result.precision)
    floor = result.model_flops_per_step / (chip.peak(dtype) * result.chips)
    what = (
        f"compute: forward, backward and recomputation take {share:.0%} of the step, "
        f"mostly bound by {bound}; the model's {result.model_flops_per_step / 1e15:.3g} PFLOP "
        f"per step need {floor:.3g} s at the {chip.peak(dtype) / 1e12:.4g} TFLOPS {dtype.value} "
        f"peak of {result.chips} chip(s) (MFU {result.mfu:.0%})"
    )
    if dtype is DType.FP32:
        what += f"; {chip.id} trains in fp32 here, without a 16-bit matrix format"
    return what


def _interconnect(result: TrainingResult, system: System, share: float) -> str:
    what = f"interconnect: collectives take {share:.0%} of the step"
    if not result.collectives:
        return f"{what} (sends between pipeline stages)"
    c = max(result.collectives, key=lambda c: c["time_s"])
    level = next((lv for lv in system.levels if lv.name == c["level"]), system.levels[-1])
    per_chip = level.all_links_bytes_per_s
    link = level.name
    if level.name == "host":  # hardware/system.py: host_system
        link = f"the host link ({system.chip.host_link.name}, no chip-to-chip fabric)"
    kind = c["collective"].replace("_", "-")
    return (
        f"{what}; the slowest is {'an' if kind[0] in 'aeiou' else 'a'} {kind} of "
        f"{c['bytes'] / GB:.3g} GB over {c['size']} chips ({c['op']}): {c['time_s']:.3g} s "
        f"each ({c['algorithm']}; {link} gives {per_chip / GB:.3g} GB/s per chip)"
    )


def _optimizer(result: TrainingResult, chip: Chip, per_param: StateBytes, share: float) -> str:
    dram = next((m for m in chip.memory if m.kind is MemoryKind.DRAM), chip.memory[-1])
    moved = sum(op.bytes * op.count for op in result.ops if op.phase == "optimizer")
    return (
        f"bandwidth: the {result.optimizer} update takes {share:.0%} of the step: it streams "
        f"{moved / GB:.3g} GB per chip (state of {per_param.total:g} B per parameter, read "
        f"and written) through {dram.name} at {dram.bandwidth_bytes_per_s.value / GB:.4g} GB/s"
    )
