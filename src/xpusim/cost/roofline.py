"""Time and energy of ops on one chip: a roofline per memory level plus a fixed overhead.

    compute_s  = padded matrix FLOPs / (peak[dtype] x matmul efficiency)  (on a systolic
                 unit: its cycles for the GEMM / clock, cost/systolic.py)
               + vector FLOPs / (vector peak x vector efficiency)
    memory_s   = max over levels of bytes at that level / (bandwidth x memory efficiency)
    time_s     = max((compute_s^p + memory_s^p)^(1/p), comm_s) + overhead per op
    dynamic_j  = matrix FLOPs x e_matrix[dtype] + vector FLOPs x e_vector
               + sum over levels of bytes x pJ/B
    power_s    = dynamic_j / (TDP - static power)
    time_s     = max(time_s, power_s)
                 (an op a measured kernel table prices on a chip of borrowed path
                 energy: dynamic_j at most (TDP - static) x its measured time)
    energy_j   = dynamic_j + static power x time_s
                 (a matmul a measured kernel table prices: its arithmetic at the table's
                 compute-bound rate drawing the TDP, measured_gemm_energy_j; any op a
                 table prices: at most TDP x time_s)

Compute and memory overlap because accelerators stream operands while they compute: p is
infinite (the sharp roofline, max(compute_s, memory_s)) for every op except matmuls and
convolutions on a chip whose calibration file fits p from GEMM microbenchmarks (or whose
chip file assumes one): their kernels overlap imperfectly near the ridge (pipeline fill and
drain, tiles waiting on loads), which the p-norm charges, most where compute_s ~ memory_s
and hardly at all far from the ridge (cost/calibration.py). Any p >= 1 keeps the time
between max and sum of the two and growing with each. The overhead does not overlap,
because it is dispatch time when nothing streams. comm_s is
the link time of collective ops (cost/collectives.py), zero for every other op.

A collective's time is the larger of its link time and its own HBM pass (memory_s: its
buffers read and written once), not their sum: the kernel streams its chunks from HBM into
the links while it reduces them, so the two overlap, the slower bounding it (the ring
pipelines each step's read, add and send; NCCL splits a collective into chunks in flight
at once). Where comm_s is a measured floor (nccl-tests, the engines' custom all-reduce
kernels) it timed the whole kernel, HBM traffic and reduction included: nccl-tests reports
algbw = S / t and busbw of the complete operation (NVIDIA/nccl-tests, doc/PERFORMANCE.md),
so adding the HBM pass counted it twice (0.17 ms on a 0.73 ms Llama 3 405B TP all-reduce
on H100). The max keeps the measured time wherever it is at least its own HBM pass (every
table row), and still charges bytes/bandwidth where it is not. The pass's energy stays in
dynamic_j: the bytes move, though their time hides behind the links'.
The efficiencies are below 1 and named in the chip file with their origin, so every op's time
is at least FLOPs/peak and bytes/bandwidth (the physics floor). Energy per op is the chip's
compute power budget over its peak rate (hardware/spec.py) and energy per byte each memory
level's path energy; power_s is the power limit: an op whose arithmetic and traffic would
together draw more than the TDP at its roofline speed takes as long as the TDP allows, as a
power-limited chip lowers its clocks (an H200 streaming HBM at full rate needs about 690 W
for the traffic alone at the path energy measured on GH200). So average power never exceeds
TDP, and more bandwidth never slows an op (power_s does not depend on it). An op a measured
kernel table prices, on a chip whose path energy is another chip's (GH200's on B200, MI300X
and the rest), drew at most its TDP when measured: where the borrowed figure says the chip
cannot stream its HBM as fast as its measured kernels did (a B200 at most 4.4 of its 7.7
TB/s within 850 W, where TensorRT-LLM's fused MoE streamed gpt-oss-120b's experts at 6.0),
the measurement stands (measured_tdp_w).

Everything is numpy arrays with ops on the last axis: any leading axes (decode steps,
configurations of a sweep) broadcast through unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import IntEnum
from typing import Any

import numpy as np

from xpusim.compiler.memory_plan import Placement
from xpusim.compiler.moe_expert import GROUPED_GEMM_EFFICIENCY, is_expert
from xpusim.cost import pe_grid, systolic
from xpusim.cost.calibration import catalog_calibration, dram_bytes_per_s, overlap_time
from xpusim.cost.kernel_tables import (
    GRID_LOG2,
    NODE_FLOPS,
    flops_envelope_s,
    fraction_grid,
    interpolate_grid,
    split_figures,
)
from xpusim.cost.op_table import OpTable
from xpusim.cost.op_times import op_time_s
from xpusim.cost.split_layout import SPLIT_FIGURES, busiest_cu_s
from xpusim.hardware.catalog import chip_ids, load_chip
from xpusim.hardware.spec import Chip, Figure, base_id
from xpusim.ir.op import OpKind
from xpusim.ir.tensor import ROLES, Role
from xpusim.memo import remembered

_KV_CACHE = ROLES.index(Role.KV_CACHE)

# Flash-attention kernels, forward and backward: the calibrated attention efficiency applies
# to both (the backward is measured no better than the forward; FlashAttention-2, Dao 2023).
_ATTENTION = (OpKind.ATTENTION, OpKind.ATTENTION_GRAD)


class Bottleneck(IntEnum):
    COMPUTE = 0
    MEMORY = 1
    OVERHEAD = 2
    INTERCONNECT = 3
    POWER = 4  # the TDP, not a roof, sets the op's time (a power-limited chip's clocks)

    @property
    def label(self) -> str:
        return self.name.lower()


@dataclass(frozen=True)
class MatrixUnit:
    """The matrix unit as the cost formulas read it: floats for one chip, (K, 1, 1) arrays
    for K stacked chips (HardwareArrays.stack)."""

    rows: Any
    cols: Any
    count: Any  # units per chip
    mode: Any  # how a GEMM maps onto it: cost/systolic.MODES, 0 where tiles are padded only
    block_rows: Any  # the output block a pass of a PE grid holds (cost/pe_grid.py); inf:
    # operands read once
    block_cols: Any

    @classmethod
    def of(cls, chip: Chip) -> MatrixUnit:
        unit = chip.matrix_unit
        mode = systolic.MODES[unit.dataflow.value] if unit.dataflow else 0
        if mode == 1 and unit.double_buffered and unit.double_buffered.value:
            mode = 2
        return cls(unit.rows.value, unit.cols.value, unit.count.value, float(mode),
                   *pe_grid.output_block(chip))  # fmt: skip

    def map(self, how: Callable[[str, Any], Any]) -> MatrixUnit:
        """Each field through how(name, value)."""
        return MatrixUnit(**{name: how(name, value) for name, value in vars(self).items()})


@dataclass(frozen=True)
class FigureSources:
    """One figure from its three sources, named in the order they win: a user's what-if
    (`--set`, hardware/whatif.py), the chip's calibration file (a fit; a fitted 0 or none
    is no fit), the chip file's assumed value."""

    what_if: float | None
    fitted: float | None
    assumed: float

    @classmethod
    def of(cls, figure: Figure | None, fitted: float | None, default: float) -> FigureSources:
        return cls(figure.value if _what_if(figure) else None, fitted or None,  # type: ignore[union-attr]
                   figure.value if figure else default)  # fmt: skip

    @property
    def value(self) -> float:
        if self.what_if is not None:
            return self.what_if
        return self.fitted if self.fitted is not None else self.assumed


@dataclass(frozen=True)
class HardwareArrays:
    """A chip's numbers as arrays aligned with an OpTable (ops last, levels second-last)."""

    matrix_rate: np.ndarray  # (n,) achievable matrix ops/s of each op's format
    e_matrix_j: np.ndarray  # (n,) energy per matrix op of each op's format
    vector_rate: float | np.ndarray
    e_vector_j: float | np.ndarray
    level_rate: np.ndarray  # (L, 1) achievable bytes/s per level
    e_byte_j: np.ndarray  # (L, 1)
    overhead_s: np.ndarray  # (n,) dispatch per op, plus a kernel's fixed time for matmuls;
    # an engine's kernel chain measured per call (cost/op_times.py) raises it to that time
    overlap_p: np.ndarray  # (n,) p of (compute^p + memory^p)^(1/p); inf (max) but for matmuls
    static_w: float | np.ndarray
    tdp_w: float | np.ndarray
    kernel_tdp_w: float | np.ndarray  # the TDP its kernel tables' ops drew within
    # (measured_tdp_w; inf where the chip's own path energy was measured)
    unit: MatrixUnit
    # Measured kernel tables (cost/kernel_tables.py): each op's curve of the fraction of
    # its datasheet roofline its kernels reach, sampled at kernel_tables.GRID_LOG2 of M
    # ((n, G); 1 where no table prices the op, a floor no op is below anyway), the
    # datasheet figures that roofline is of, and the dispatch time between kernels.
    kernel_grid: np.ndarray
    kernel_peak: np.ndarray  # (n,) datasheet peak of a priced op's format; inf elsewhere
    kernel_fixed_s: np.ndarray  # (n,) the table's fixed time of a kernel (0 unpriced)
    kernel_sequence_s_per_byte: np.ndarray  # (n,) a decode attention op's least time per
    # sequence (its table's) over its bytes per sequence other than its cache's; 0 elsewhere
    kernel_stream_s_per_byte: np.ndarray  # (n,) an MLA decode op's table's least time per
    # cached byte of one sequence (kernel_tables.KernelTable.stream_s_per_byte); 0 elsewhere
    kernel_split: np.ndarray  # (n, 5) an MLA decode op's table's split of each sequence over
    # the CUs (kernel_tables.split_figures: split_layout.SPLIT_FIGURES); 0 elsewhere
    kernel_bw: float | np.ndarray  # datasheet bandwidth of the memory weights stream from
    dispatch_s: float | np.ndarray

    @classmethod
    def of(cls, chip: Chip, table: OpTable) -> HardwareArrays:
        """build(), kept per chip object and per the table's op kinds and formats (all that
        build reads of it), so the shapes of a sweep share one per chip."""
        return remembered("hardware arrays", (chip,), table.structure,
                          lambda: cls.build(chip, table))

    def take(self, ops: np.ndarray) -> HardwareArrays:
        """The figures of some ops only (by position on the last axis)."""
        return replace(
            self,
            matrix_rate=self.matrix_rate[..., ops],
            e_matrix_j=self.e_matrix_j[..., ops],
            overhead_s=self.overhead_s[..., ops],
            overlap_p=self.overlap_p[..., ops],
            kernel_grid=self.kernel_grid[..., ops, :],
            kernel_peak=self.kernel_peak[..., ops],
            kernel_fixed_s=self.kernel_fixed_s[..., ops],
            kernel_sequence_s_per_byte=self.kernel_sequence_s_per_byte[..., ops],
            kernel_stream_s_per_byte=self.kernel_stream_s_per_byte[..., ops],
            kernel_split=self.kernel_split[..., ops, :],
        )

    def take_configs(self, which: np.ndarray) -> HardwareArrays:
        """Stacked arrays (see stack) of the configurations `which` indexes."""
        return replace(self, **{
            name: value[which] if isinstance(value, np.ndarray) else value
            for name, value in vars(self).items() if name != "unit"
        }, unit=self.unit.map(lambda _, value: value[which]))  # fmt: skip

    @classmethod
    def stack(cls, arrays: Sequence[HardwareArrays]) -> HardwareArrays:
        """K chips' arrays for one table as one, shaped to broadcast against a table with a
        leading step axis: (K, 1, n) per op, (K, 1, L, 1) per level, (K, 1, 1) per chip.
        Chips with fewer memory levels get levels that hold nothing (infinite bandwidth)."""
        n_levels = max(a.level_rate.shape[0] for a in arrays)

        def levels(values: list[np.ndarray], fill: float) -> np.ndarray:
            padded = np.full((len(values), 1, n_levels, 1), fill)
            for k, v in enumerate(values):
                padded[k, 0, : len(v)] = v
            return padded

        def per_op(name: str) -> np.ndarray:
            return np.stack([getattr(a, name) for a in arrays])[:, None, :]

        def per_chip(values: list[float]) -> np.ndarray:
            return np.array(values, dtype=float)[:, None, None]

        return cls(
            matrix_rate=per_op("matrix_rate"),
            e_matrix_j=per_op("e_matrix_j"),
            vector_rate=per_chip([a.vector_rate for a in arrays]),
            e_vector_j=per_chip([a.e_vector_j for a in arrays]),
            level_rate=levels([a.level_rate for a in arrays], np.inf),
            e_byte_j=levels([a.e_byte_j for a in arrays], 0.0),
            overhead_s=per_op("overhead_s"),
            overlap_p=per_op("overlap_p"),
            static_w=per_chip([a.static_w for a in arrays]),
            tdp_w=per_chip([a.tdp_w for a in arrays]),
            kernel_tdp_w=per_chip([a.kernel_tdp_w for a in arrays]),
            unit=arrays[0].unit.map(
                lambda name, _: per_chip([getattr(a.unit, name) for a in arrays])),
            kernel_grid=per_op("kernel_grid"),
            kernel_peak=per_op("kernel_peak"),
            kernel_fixed_s=per_op("kernel_fixed_s"),
            kernel_sequence_s_per_byte=per_op("kernel_sequence_s_per_byte"),
            kernel_stream_s_per_byte=per_op("kernel_stream_s_per_byte"),
            kernel_split=per_op("kernel_split"),
            kernel_bw=per_chip([a.kernel_bw for a in arrays]),
            dispatch_s=per_chip([a.dispatch_s for a in arrays]),
        )

    @classmethod
    def build(cls, chip: Chip, table: OpTable) -> HardwareArrays:
        """The chip's figures, with its calibration file's fitted ones where it has them."""
        cal = catalog_calibration(chip.id)
        has_matrix = table.has_matrix
        peaks = np.array(
            [chip.peak(d) if m else np.inf for d, m in zip(table.dtypes, has_matrix, strict=True)]
        )
        matmul = chip.efficiency.matmul
        attention_eff = cal.attention.efficiency if cal and cal.attention else None
        efficiency = np.array([
            FigureSources.of(matmul, (attention_eff if k in _ATTENTION else None)
                             or (cal and cal.matmul_efficiency(d)), 0.0).value
            for d, k in zip(table.dtypes, table.kinds, strict=True)])  # fmt: skip
        is_matmul = np.array([k in (OpKind.MATMUL, OpKind.CONV) for k in table.kinds])
        grouped = np.array([is_expert(op) for op in table.ops])
        efficiency = np.where(is_matmul & grouped, efficiency * GROUPED_GEMM_EFFICIENCY,
                              efficiency)  # an MoE layer's per-expert GEMMs
        unit = MatrixUnit.of(chip)
        if unit.mode and not _what_if(matmul):  # a systolic unit's cycles are its GEMMs' time
            efficiency = np.where(is_matmul & (table.weight_tile_kn[0] > 0), 1.0, efficiency)
        fixed_s = FigureSources.of(chip.overhead.matmul_fixed_s,
                                   cal and cal.matmul_fixed_s, 0.0).value
        # a fitted overlap without a p is a fit that found the sharp roofline (p infinite)
        fitted_p = (cal.overlap.p or np.inf) if cal and cal.overlap else None
        p = FigureSources.of(chip.efficiency.matmul_overlap_p, fitted_p, np.inf).value
        memory_eff = FigureSources.of(chip.efficiency.memory,
                                      cal and cal.memory_efficiency, 0.0).value
        budget = chip.compute_power_budget_w
        levels = chip.memory
        level_eff = level_efficiencies(chip, memory_eff)
        grid = np.ones((len(table), len(GRID_LOG2)))
        kernel_peak, kernel_fixed_s = np.full(len(table), np.inf), np.zeros(len(table))
        sequence_s_per_byte, stream_s_per_byte = np.zeros(len(table)), np.zeros(len(table))
        split = np.zeros((len(table), len(SPLIT_FIGURES)))
        for i, (dtype, keys, shapes) in enumerate(zip(table.dtypes, table.kernel_keys,
                                                      table.kernel_shapes, strict=True)):
            curve = fraction_grid(chip.id, dtype, keys, shapes) if has_matrix[i] else None
            if curve is not None:
                grid[i], kernel_fixed_s[i], ran_in, sequence_s, stream_s = curve
                if table.sequence_bytes[i]:
                    sequence_s_per_byte[i] = sequence_s / table.sequence_bytes[i]
                    stream_s_per_byte[i] = stream_s
                    split[i] = split_figures(chip.id, dtype, keys, shapes)
                kernel_peak[i] = peaks[i] if ran_in == dtype else chip.peak(ran_in)
        # an engine's own kernel chain measured per call (cost/op_times.py): at least its time
        engine_s = np.array([op_time_s(chip.id, op) for op in table.ops])
        return cls(
            matrix_rate=peaks * efficiency,
            e_matrix_j=budget / peaks,
            vector_rate=chip.vector_ops_per_s.value * chip.efficiency.vector.value,
            e_vector_j=budget / chip.vector_ops_per_s.value,
            level_rate=np.array([[m.bandwidth_bytes_per_s.value * e]
                                 for m, e in zip(levels, level_eff, strict=True)]),
            e_byte_j=np.array([[m.energy_pj_per_byte.value * 1e-12] for m in levels]),
            overhead_s=np.maximum(chip.overhead.per_op_s.value + np.where(is_matmul, fixed_s, 0.0),
                                  engine_s),
            overlap_p=np.where(is_matmul, p, np.inf),
            static_w=chip.energy.static_power_w.value,
            tdp_w=chip.tdp_w.value,
            kernel_tdp_w=measured_tdp_w(chip),
            unit=unit,
            kernel_grid=grid,
            kernel_peak=kernel_peak,
            kernel_fixed_s=kernel_fixed_s,
            kernel_sequence_s_per_byte=sequence_s_per_byte,
            kernel_stream_s_per_byte=stream_s_per_byte,
            kernel_split=split,
            kernel_bw=dram_bytes_per_s(chip),
            dispatch_s=chip.overhead.per_op_s.value,
        )


def level_efficiencies(chip: Chip, default: float) -> list[float]:
    """The achievable fraction of each memory level's bandwidth: the level's own measured
    figure where the chip has one, else `default` (the chip's memory efficiency or its
    calibration's). A what-if of the chip-wide figure sets every level."""
    if _what_if(chip.efficiency.memory):
        return [default] * len(chip.memory)
    return [m.efficiency.value if m.efficiency else default for m in chip.memory]


def _what_if(figure: Figure | None) -> bool:
    """Set by a user's what-if (hardware/whatif.py), which must win over a calibration."""
    return figure is not None and figure.source == "what-if"


@dataclass(frozen=True)
class OpCosts:
    compute_s: np.ndarray
    memory_s: np.ndarray
    overhead_s: np.ndarray
    comm_s: np.ndarray
    time_s: np.ndarray
    energy_j: np.ndarray
    level_bytes: np.ndarray  # (..., L, n)
    power_s: np.ndarray  # the time the TDP allows the op's energy: time_s is at least this

    @property
    def bottleneck(self) -> np.ndarray:
        """Index of the largest of compute, memory, overhead and comm (a Bottleneck). Where a
        matmul's imperfect overlap (p < inf) adds time near the ridge, the larger roof still
        names the bound: the added time is the pipeline's, neither roof's alone."""
        return bottleneck_of(self.compute_s, self.memory_s, self.overhead_s, self.comm_s,
                             self.power_s)  # fmt: skip


def measured_tdp_w(chip: Chip) -> float:
    """The TDP an op a kernel table prices is taken to have drawn within when measured, which
    caps its energy (evaluate): its catalog chip's (also for a what-if copy or a lowered
    limit, which keep its tables) where the chip's HBM path energy is borrowed from another
    chip (confidence "assumed": GH200's on B200, MI300X and the rest), so a measured kernel
    faster than that figure allows shows the figure too high for the chip; infinite (no cap)
    where the chip's own architecture's path was measured (GH200 for Hopper, A100), whose
    figure holds the kernels to the limit a sustained run meets: a table's kernel runs for
    milliseconds, under the power limiter's reaction (an assumption: no source times it)."""
    base = load_chip(base_id(chip.id)) if base_id(chip.id) in chip_ids() else chip
    path = [m.energy_pj_per_byte for m in base.memory if m.kind.holds_tensors]
    borrowed = any(f.confidence == "assumed" for f in path)
    return base.tdp_w.value if borrowed else math.inf


def power_limit_s(dynamic_j: Any, tdp_w: Any, static_w: Any) -> Any:
    """The shortest time a chip's power limit allows an op's dynamic energy: at that time it
    draws its TDP, static power included (any array shapes that broadcast)."""
    return dynamic_j / (tdp_w - static_w)


def bottleneck_of(
    compute_s: np.ndarray, memory_s: np.ndarray, overhead_s: np.ndarray, comm_s: np.ndarray,
    power_s: np.ndarray,
) -> np.ndarray:  # fmt: skip
    """The Bottleneck of each op: the largest of compute, memory, overhead and comm, or power
    where the power limit made the op slower than all of its roofs together."""
    terms = np.stack(np.broadcast_arrays(compute_s, memory_s, overhead_s, comm_s))
    slowed = power_s > np.maximum(np.maximum(compute_s, memory_s), comm_s) + overhead_s
    return np.where(slowed, Bottleneck.POWER, np.argmax(terms, axis=0))


def placement_onehot(
    act_bytes: np.ndarray,
    placements: Sequence[Placement],
    n_levels: int,
    which: np.ndarray | None = None,
) -> np.ndarray:
    """(K, L, roles, n): 1 where configuration k's placement keeps op n's tensors of a role
    at level L; configuration k has placements[which[k]] (placements[k] without `which`).

    Weights and the KV cache live at their home level; an op's activations go to the
    on-chip level when they fit there (memory_plan.py). `act_bytes` is each op's activation
    bytes at its largest step (largest_activations): (n,) for all K, or (K, n) where each
    configuration has its own request shape (a sweep of shapes).
    """
    which = np.arange(len(placements)) if which is None else which
    act_bytes = np.atleast_2d(act_bytes)
    homes = np.array([[p.home[role] for role in ROLES] for p in placements])[which]  # (K, roles)
    where = np.repeat(homes[:, :, None], act_bytes.shape[-1], axis=2)  # (K, roles, n)
    onchip = np.array([-1 if p.onchip_level is None else p.onchip_level for p in placements])
    room = np.array([p.onchip_bytes for p in placements])
    fits = (onchip[which, None] >= 0) & (act_bytes <= room[which, None])
    act = ROLES.index(Role.ACTIVATION)
    where[:, act] = np.where(fits, onchip[which, None], where[:, act])
    return (where[:, None] == np.arange(n_levels)[None, :, None, None]).astype(float)


def largest_activations(table: OpTable) -> np.ndarray:
    """(n,) each op's activation bytes at its largest step, over any leading axes."""
    return table.activation_bytes.reshape(-1, len(table)).max(axis=0)


def level_bytes(
    table: OpTable, placement: Placement | np.ndarray, n_levels: int,
    role_bytes: np.ndarray | None = None,
) -> np.ndarray:  # fmt: skip
    """Bytes each op moves at each memory level: (..., L, n). `placement` may be one
    placement or a one-hot from placement_onehot, shaped to broadcast with the table;
    `role_bytes` replaces the table's (a PE grid's re-reads added)."""
    return np.stack(_level_parts(table, placement, n_levels, role_bytes), axis=-2)


def _level_parts(
    table: OpTable, placement: Placement | np.ndarray, n_levels: int,
    role_bytes: np.ndarray | None,
) -> list[np.ndarray]:  # fmt: skip
    """level_bytes a level at a time: L arrays (..., n). The level and role axes are a few
    elements long, and numpy runs an array op with one of them innermost as that many
    short loops; over whole (..., n) arrays a sweep's (K, steps, L, n) costing ran 3.5x
    faster (2026-12-04). The sum over roles is in ROLES order, as numpy's would be, with
    the terms of a one-hot placement's 0s left out and its 1s not multiplied by: the same
    sum, in half the array operations where every configuration keeps a role alike."""
    if isinstance(placement, Placement):
        placement = placement_onehot(largest_activations(table), [placement], n_levels)[0]
    moved = table.role_bytes if role_bytes is None else role_bytes
    shape = np.broadcast_shapes(moved[..., 0, :].shape, placement[..., 0, 0, :].shape)
    parts = []
    for level in range(n_levels):
        part = None
        for role in range(len(ROLES)):
            at = placement[..., level, role, :]
            if not at.any():  # a role kept elsewhere adds 0 bytes (bytes are never -0.0)
                continue
            term = moved[..., role, :] if at.all() else moved[..., role, :] * at  # x 1 is x
            part = term if part is None else part + term
        parts.append(np.broadcast_to(0.0 if part is None else part, shape))
    return parts


def work_factors(
    table: OpTable, rows: Any, cols: Any, units: Any, mode: Any
) -> tuple[np.ndarray, np.ndarray]:
    """(time, energy) work of the matrix unit over the work needed, per op. Both count a
    matmul's K x N weight tiled onto rows x cols cells, the padding computed on zeros. On a
    systolic unit the time is its cycles times its cells over the multiply-accumulates
    (cost/systolic.py; M is the rows streamed, FLOPs / 2KN): the cycles its cells wait
    while a fold's weights load or its pipeline fills take time, not arithmetic energy."""
    k, n = table.weight_tile_kn
    is_matmul = k > 0
    k, n = np.where(is_matmul, k, 1.0), np.where(is_matmul, n, 1.0)
    padded = np.where(is_matmul, (np.ceil(k / rows) * rows / k) * (np.ceil(n / cols) * cols / n),
                      1.0)  # fmt: skip
    if not np.any(mode):
        return padded, padded
    m = np.maximum(table.matrix_flops / (2 * k * n), 1.0)
    mapped = systolic.cycles(m, k, n, rows, cols, units, np.maximum(mode, 1)) * (
        rows * cols * units / (m * k * n))
    return np.where(is_matmul & (mode > 0), mapped, padded), padded


def kernel_m(table: OpTable) -> np.ndarray:
    """The key each op reads its kernel table at (kernel_tables.KEYED_BY), as the table's
    rows_m name theirs: a matmul's M, its FLOPs over 2 K N (a routed expert's, its rank's
    token-expert pairs: the rows of its grouped GEMM, workloads/transformer.py moe), a
    decode attention op's bytes, a prefill attention op's FLOPs."""
    k, n = table.weight_tile_kn
    moved = table.role_bytes.sum(axis=-2)
    m = np.where(table.is_attention, moved,
                 table.matrix_flops / (2 * np.where(k > 0, k * n, 1.0)))  # fmt: skip
    if table.keyed_by_flops.any():
        m = np.where(table.keyed_by_flops, table.matrix_flops, m)
    return m


def kernel_floor_s(table: OpTable, hw: HardwareArrays) -> np.ndarray:
    """Each op's time on its kernel table's measurements (cost/kernel_tables.py): the
    table's fixed kernel time plus the op's roofline on the chip's datasheet peak and
    bandwidth over the fraction of it the table's kernels reach at the op's M (its rows
    over all batch dimensions; a decode attention op's at its bytes, a prefill attention
    op's at its FLOPs, no more than the curve gives its bytes at larger FLOPs:
    kernel_tables.flops_envelope_s), a decode attention op at least its sequences times the table's
    least time per sequence (KernelTable.sequence_floor_s), its sequences its bytes other
    than the cache's over those of one (OpTable.sequence_bytes), an MLA decode op at least
    the fixed time plus one of its sequences' cached bytes at its table's least time per
    cached byte of one sequence (KernelTable.stream_s_per_byte), and at least the fixed time
    plus its busiest CU's work items where its table splits each sequence over the CUs
    (KernelTable.split; split_layout.busiest_cu_s); 0 for ops no table prices.
    All the op's bytes count as streamed from DRAM, as the tables' kernels stream theirs."""
    k, _ = table.weight_tile_kn
    moved = table.role_bytes.sum(axis=-2)
    priced = np.isfinite(hw.kernel_peak) & ((k > 0) | table.is_attention)
    m = kernel_m(table)
    memory_s = moved / hw.kernel_bw
    roof_s = np.maximum(table.matrix_flops / hw.kernel_peak, memory_s)
    in_time = table.is_attention  # time_isotonic (bytes-keyed); flops_envelope_s
    past_s = roof_s / interpolate_grid(hw.kernel_grid, m, in_time)
    if table.keyed_by_flops.any():
        past_s = np.where(table.keyed_by_flops, flops_envelope_s(
            hw.kernel_grid, m, memory_s, hw.kernel_peak, past_s), past_s)  # fmt: skip
    floor_s = hw.kernel_fixed_s + past_s
    if hw.kernel_sequence_s_per_byte.any():
        per_sequence = moved - table.role_bytes[..., _KV_CACHE, :]
        floor_s = np.maximum(floor_s, per_sequence * hw.kernel_sequence_s_per_byte)
    sequence_bytes = np.asarray(table.sequence_bytes, dtype=float)
    streamed = (hw.kernel_stream_s_per_byte > 0) & (sequence_bytes > 0)
    laid = (hw.kernel_split[..., -1] > 0) & (sequence_bytes > 0)
    if streamed.any() or laid.any():  # an MLA decode op's cache and sequences
        cache = table.role_bytes[..., _KV_CACHE, :]
        sequences = (moved - cache) / np.where(sequence_bytes > 0, sequence_bytes, 1.0)
        one_s = hw.kernel_fixed_s + cache / sequences * hw.kernel_stream_s_per_byte
        floor_s = np.where(streamed, np.maximum(floor_s, one_s), floor_s)
        split_s = busiest_cu_s(hw.kernel_split, cache, sequences)
        floor_s = np.where(laid, np.maximum(floor_s, hw.kernel_fixed_s + split_s), floor_s)
    return np.where(priced, floor_s, 0.0)


def measured_gemm_energy_j(
    table: OpTable,
    hw: HardwareArrays,
    byte_j: np.ndarray,
    energy_factor: np.ndarray,
    time_s: np.ndarray,
    energy_j: np.ndarray,
) -> np.ndarray:
    """Energy of the matmuls a gemm or moe kernel table prices, with their arithmetic charged
    at the energy per op the table's own kernels show, not the datasheet's.

    A large GEMM on an H100 runs at its power limit: with random inputs its clocks drop
    until it draws the TDP, and it runs faster on zeros only because they switch fewer
    transistors (H. He, "Strangely, Matrix Multiplications on GPUs Run Faster When Given
    'Predictable' Data!", thonking.ai, 2024: "matmuls on the H100 are primarily not compute
    or bandwidth limited, they are power limited"). So the table's compute-bound rate, its
    fraction f_top of the datasheet peak at its largest M, is the rate at which arithmetic
    draws TDP - static power, and each op costs (TDP - static) / (f_top x peak): the
    stalls, tile overheads and lower clocks that keep the kernel below the datasheet peak
    burn power, as the chip's TDP says they do. The datasheet-derived energy
    (e_matrix_j, arithmetic at the datasheet peak drawing the TDP) is the lower bound kept.
    Other chips' tables are assumed to behave as the H100's (no per-chip source).

    Time is not touched: the table measured the kernel with its power limiter at work, so
    its time already includes the lowered clocks; the op's average power is held at the
    TDP (energy at most TDP x time). Decode attention tables (priced by bytes) and
    unpriced ops keep energy_j as given."""
    k, _ = table.weight_tile_kn
    gemm = np.isfinite(hw.kernel_peak) & (k > 0) & ~table.is_attention
    if not np.any(gemm):
        return energy_j
    f_top = hw.kernel_grid[..., -1]  # flat past the table's largest M
    e_kernel_j = (hw.tdp_w - hw.static_w) / np.where(gemm, hw.kernel_peak * f_top, 1.0)
    e_op_j = np.maximum(hw.e_matrix_j * energy_factor, e_kernel_j)
    measured_j = (table.matrix_flops * e_op_j + table.vector_flops * hw.e_vector_j + byte_j
                  + hw.static_w * time_s)  # fmt: skip
    capped_j = np.minimum(measured_j, hw.tdp_w * time_s)
    return np.where(gemm, np.maximum(capped_j, energy_j), energy_j)


def evaluate(
    table: OpTable,
    hw: HardwareArrays,
    placement: Placement | np.ndarray,
    comm_s: np.ndarray | float = 0.0,
) -> OpCosts:
    """Per-op costs; with stacked hardware (HardwareArrays.stack) and a stacked one-hot
    placement, of many configurations at once on a leading axis."""
    unit = hw.unit
    time_factor, energy_factor = work_factors(table, unit.rows, unit.cols, unit.count, unit.mode)
    compute_s = table.matrix_flops * time_factor / hw.matrix_rate + (
        table.vector_flops / hw.vector_rate)
    rereads = pe_grid.operand_rereads(table, unit.block_rows, unit.block_cols)
    parts = _level_parts(table, placement, hw.level_rate.shape[-2], rereads)
    rate, e_byte_j = hw.level_rate, hw.e_byte_j
    memory_s, byte_j = parts[0] / rate[..., 0, :], parts[0] * e_byte_j[..., 0, :]
    for level, part in enumerate(parts[1:], 1):  # max and sum over levels, in level order
        memory_s = np.maximum(memory_s, part / rate[..., level, :])
        byte_j = byte_j + part * e_byte_j[..., level, :]
    overhead_s = np.broadcast_to(hw.overhead_s, compute_s.shape)
    comm_s = np.broadcast_to(comm_s, compute_s.shape)
    if np.isinf(hw.overlap_p).all():  # the sharp roofline everywhere: skip the p-norm's powers
        on_chip_s = np.maximum(compute_s, memory_s)
    else:
        on_chip_s = overlap_time(compute_s, memory_s, hw.overlap_p)
    time_s = np.maximum(on_chip_s, comm_s) + overhead_s  # a collective's HBM pass under its links
    dynamic_j = (
        table.matrix_flops * energy_factor * hw.e_matrix_j
        + table.vector_flops * hw.e_vector_j
        + byte_j
    )
    measured = np.isfinite(hw.kernel_peak).any()
    if measured:  # the measured kernels' floor, as overhead: the time a kernel spends
        # past the chip's figures is its own (latency, partial waves)
        floor_s = kernel_floor_s(table, hw)
        floored = np.maximum(time_s, np.maximum(floor_s, comm_s) + hw.dispatch_s)
        overhead_s, time_s = overhead_s + (floored - time_s), floored
        # a measured kernel ran within its chip's TDP: it drew no more than that allows
        # (where the chip's path energy is another chip's: measured_tdp_w)
        if np.isfinite(hw.kernel_tdp_w).any():
            with np.errstate(invalid="ignore"):  # inf x 0 where no table prices the op
                drawn_j = (hw.kernel_tdp_w - hw.static_w) * time_s
            dynamic_j = np.where((floor_s > 0) & np.isfinite(drawn_j),
                                 np.minimum(dynamic_j, drawn_j), dynamic_j)  # fmt: skip
    power_s = power_limit_s(dynamic_j, hw.tdp_w, hw.static_w)
    time_s = np.maximum(time_s, power_s)
    energy_j = dynamic_j + hw.static_w * time_s
    if measured:
        energy_j = measured_gemm_energy_j(table, hw, byte_j, energy_factor, time_s, energy_j)
    return OpCosts(compute_s, memory_s, overhead_s, comm_s, time_s, energy_j,
                   np.stack(parts, axis=-2), power_s)  # fmt: skip


@dataclass(frozen=True)
class OneWork:
    """evaluate() of one work of a table's ops on one chip, in Python floats.

    A serving run prices each new set of prefill chunks as one work of its attention ops
    (serving/step_cost.py): a table of one to a few ops, on which evaluate's sixty-odd numpy
    calls cost about 150 us, nearly all of it per-call overhead; most of a max-rate search's
    prefill chunk sets are new. This does per op the same IEEE operations in the same order
    (a product, quotient, sum or maximum of float64s is the same rounded value in Python as
    in numpy), so its time_s and energy_j are evaluate's bit for bit (tests/test_one_work.py
    holds them equal); the measured kernels' floor and energy go through OneFloor (their
    log2 through numpy) and a finite overlap p through calibration.overlap_time.

    It covers one chip's arrays (not HardwareArrays.stack's), a matrix unit whose GEMMs are
    padded tiles only (not a systolic unit's cycles, which depend on M) and no PE grid's
    operand re-reads: `of` is None otherwise, and the caller uses evaluate. Its ops have no
    link time (evaluate's comm_s of 0: the max with 0.0 is evaluate's max with comm_s)."""

    padded: list[float]  # work_factors' time and energy factor of each op (M-independent)
    matrix_rate: list[float]
    e_matrix_j: list[float]
    vector_rate: float
    e_vector_j: float
    level_rate: list[float]
    e_byte_j: list[float]
    overhead_s: list[float]
    overlap_p: np.ndarray | None  # None where every op has the sharp roofline
    power_w: float  # TDP less static power: power_limit_s's divisor
    kernel_power_w: float  # the same of measured_tdp_w (inf: no cap)
    static_w: float
    floor: OneFloor | None  # kernel_floor_s's figures, where a table prices an op
    dispatch_s: float

    @classmethod
    def of(cls, table: OpTable, hw: HardwareArrays) -> OneWork | None:
        unit = hw.unit
        if np.ndim(hw.static_w) or np.any(unit.mode) or not (
                np.all(np.isinf(unit.block_rows)) and np.all(np.isinf(unit.block_cols))):
            return None
        padded, _ = work_factors(table, unit.rows, unit.cols, unit.count, unit.mode)
        n = len(table)
        p = None if np.isinf(hw.overlap_p).all() else hw.overlap_p
        return cls(
            np.broadcast_to(padded, (n,)).tolist(), hw.matrix_rate.tolist(),
            hw.e_matrix_j.tolist(), float(hw.vector_rate), float(hw.e_vector_j),
            hw.level_rate[:, 0].tolist(), hw.e_byte_j[:, 0].tolist(),
            np.broadcast_to(hw.overhead_s, (n,)).tolist(), p,
            float(hw.tdp_w - hw.static_w), float(hw.kernel_tdp_w - hw.static_w),
            float(hw.static_w),
            OneFloor.of(table, hw, padded) if np.isfinite(hw.kernel_peak).any() else None,
            float(hw.dispatch_s),
        )  # fmt: skip

    @staticmethod
    def kept(onehot: np.ndarray) -> list[list[list[int]]]:
        """A one-hot placement (L, roles, n) as each op's roles kept at each level."""
        levels, roles, n = onehot.shape
        return [[[r for r in range(roles) if onehot[level, r, i]] for level in range(levels)]
                for i in range(n)]  # fmt: skip

    def costs(self, matrix: list[float], vector: list[float], roles: list[list[float]],
              kept: list[list[list[int]]]) -> tuple[list[float], list[float]]:  # fmt: skip
        """time_s and energy_j of each op at FLOPs matrix[i], vector[i] and bytes roles[r][i]
        (by ROLES), its tensors kept as `kept` (from `kept`) says."""
        n = len(matrix)
        compute, memory, byte_j = [], [], []
        for i in range(n):
            compute.append(matrix[i] * self.padded[i] / self.matrix_rate[i]
                           + vector[i] / self.vector_rate)  # fmt: skip
            slowest = joules = 0.0
            for level, at in enumerate(kept[i]):
                part = 0.0
                for j, r in enumerate(at):  # ROLES order, as _level_parts sums them
                    part = roles[r][i] if j == 0 else part + roles[r][i]
                if level == 0:
                    slowest, joules = part / self.level_rate[0], part * self.e_byte_j[0]
                else:
                    slowest = max(slowest, part / self.level_rate[level])
                    joules = joules + part * self.e_byte_j[level]
            memory.append(slowest)
            byte_j.append(joules)
        if self.overlap_p is None:
            time_s = [max(max(c, m), 0.0) + o
                      for c, m, o in zip(compute, memory, self.overhead_s, strict=True)]
        else:
            both = overlap_time(np.array(compute), np.array(memory), self.overlap_p).tolist()
            time_s = [max(t, 0.0) + o for t, o in zip(both, self.overhead_s, strict=True)]
        dynamic = [matrix[i] * self.padded[i] * self.e_matrix_j[i] + vector[i] * self.e_vector_j
                   + byte_j[i] for i in range(n)]  # fmt: skip
        floor = self.floor
        if floor is not None:
            least = floor.floor_s(matrix, roles)
            time_s = [max(t, max(f, 0.0) + self.dispatch_s)
                      for t, f in zip(time_s, least, strict=True)]  # fmt: skip
            if self.kernel_power_w < math.inf:  # evaluate's drawn_j
                dynamic = [min(d, self.kernel_power_w * t) if f > 0 else d
                           for d, t, f in zip(dynamic, time_s, least, strict=True)]  # fmt: skip
        time_s = [max(t, d / self.power_w) for t, d in zip(time_s, dynamic, strict=True)]
        energy_j = [d + self.static_w * t for d, t in zip(dynamic, time_s, strict=True)]
        if floor is not None:  # evaluate's measured-kernel energy
            energy_j = floor.gemm_energy_j(matrix, vector, byte_j, time_s, energy_j)
        return time_s, energy_j


_NODE_FLOPS: list[float] = NODE_FLOPS.tolist()
"""kernel_tables.NODE_FLOPS as Python floats, made once, indexed by node (GRID_LOG2 being
0, 1, 2 ...): OneFloor.floor_s turned GRID_LOG2 and NODE_FLOPS into lists at each call and
walked all 47 nodes for those above an op's FLOPs (0.9 of the 11 s the MLPerf v4.1 Mixtral
search's step prices took under cProfile, issue #46)."""
_LAST_NODE = float(GRID_LOG2[-1])


@dataclass(frozen=True)
class OneFloor:
    """kernel_floor_s and measured_gemm_energy_j of one work, per op in Python floats
    (OneWork's measured kernels): what does not depend on the work (which ops a table
    prices, M's divisor, the grid rows, the energy per op) is worked out once by numpy
    itself, the rest is the same IEEE operations in the same order; log2 goes through
    np.log2 on all the ops at once, as kernel_floor_s takes it. This made a serving run's
    new prefill chunk sets about three times cheaper: each went through both functions'
    twenty-odd numpy calls on a one-row copy of the table."""

    priced: list[bool]
    by_bytes: list[bool]  # M is the op's bytes (decode attention)
    by_flops: list[bool]  # M is the op's FLOPs (prefill attention)
    divisor: list[float]  # a matmul's M is its FLOPs over this (2 K N)
    peak: list[float]
    bw: list[float]
    fixed_s: list[float]
    sequence_s_per_byte: list[float]  # a decode attention op's sequences' (0 elsewhere)
    stream_s_per_byte: list[float]  # an MLA decode op's one sequence's (0 elsewhere)
    split: list[list[float]]  # an MLA decode op's split row (all 0 elsewhere)
    sequence_bytes: list[float]  # OpTable.sequence_bytes
    grid: list[list[float]]  # each op's curve at GRID_LOG2
    gemm: list[bool]  # measured_gemm_energy_j's ops
    e_op_j: list[float]  # energy per matrix op of those, the table's or the datasheet's
    e_vector_j: float
    static_w: float
    tdp_w: float

    @classmethod
    def of(cls, table: OpTable, hw: HardwareArrays, energy_factor: np.ndarray) -> OneFloor:
        k, n = table.weight_tile_kn
        by_bytes = table.is_attention
        priced = np.isfinite(hw.kernel_peak) & ((k > 0) | by_bytes)
        gemm = np.isfinite(hw.kernel_peak) & (k > 0) & ~by_bytes
        f_top = hw.kernel_grid[..., -1]
        e_kernel_j = (hw.tdp_w - hw.static_w) / np.where(gemm, hw.kernel_peak * f_top, 1.0)
        ops = len(table)

        def each(values: Any) -> list:
            return np.broadcast_to(values, (ops,)).tolist()

        return cls(
            priced.tolist(), by_bytes.tolist(), table.keyed_by_flops.tolist(),
            each(2 * np.where(k > 0, k * n, 1.0)), each(hw.kernel_peak), each(hw.kernel_bw),
            each(hw.kernel_fixed_s), each(hw.kernel_sequence_s_per_byte),
            each(hw.kernel_stream_s_per_byte), hw.kernel_split.tolist(),
            list(table.sequence_bytes),
            hw.kernel_grid.tolist(), gemm.tolist(),
            each(np.maximum(hw.e_matrix_j * energy_factor, e_kernel_j)), float(hw.e_vector_j),
            float(hw.static_w), float(hw.tdp_w),
        )  # fmt: skip

    def floor_s(self, matrix: list[float], roles: list[list[float]]) -> list[float]:
        """kernel_floor_s of the work: each op's FLOPs matrix[i], bytes roles[r][i]."""
        moved = [sum(role[i] for role in roles) for i in range(len(matrix))]
        m = [f if by_flops else (b if by_bytes else f / d) for f, b, by_flops, by_bytes, d
             in zip(matrix, moved, self.by_flops, self.by_bytes, self.divisor, strict=True)]
        position = np.log2(np.maximum(np.array(m), 1.0)).tolist()
        memory_s = [b / bw for b, bw in zip(moved, self.bw, strict=True)]
        crossover = np.log2(np.maximum(np.array(  # flops_envelope_s's, of priced ops
            [s * p if math.isfinite(p) else s for s, p in zip(memory_s, self.peak, strict=True)]),
            1.0)).tolist()  # fmt: skip
        out = []
        for i, x in enumerate(position):
            if not self.priced[i]:
                out.append(0.0)
                continue
            roof_s = max(matrix[i] / self.peak[i], memory_s[i])
            past_s = roof_s / self._fraction(i, x)
            if self.by_flops[i]:  # flops_envelope_s
                x, crossed = (min(max(v, 0.0), _LAST_NODE) for v in (x, crossover[i]))
                # the nodes above x, in the grid's order (GRID_LOG2 being 0, 1, 2 ...)
                for node in range(math.floor(x) + 1, len(_NODE_FLOPS)):
                    past_s = min(past_s, max(_NODE_FLOPS[node] / self.peak[i], memory_s[i])
                                 / self.grid[i][node])  # fmt: skip
                if crossed > x:
                    past_s = min(past_s, memory_s[i] / self._fraction(i, crossed))
            floor_s = self.fixed_s[i] + past_s
            if self.sequence_s_per_byte[i]:
                per_sequence = moved[i] - roles[_KV_CACHE][i]
                floor_s = max(floor_s, per_sequence * self.sequence_s_per_byte[i])
            if self.sequence_bytes[i] > 0 and (self.stream_s_per_byte[i] > 0
                                               or self.split[i][-1] > 0):
                cache = roles[_KV_CACHE][i]
                sequences = (moved[i] - cache) / self.sequence_bytes[i]
                if self.stream_s_per_byte[i] > 0:
                    floor_s = max(floor_s, self.fixed_s[i]
                                  + cache / sequences * self.stream_s_per_byte[i])
                if self.split[i][-1] > 0:
                    floor_s = max(floor_s, self.fixed_s[i] + float(
                        busiest_cu_s(np.array(self.split[i]), cache, sequences)))  # fmt: skip
            out.append(floor_s)
        return out

    def _fraction(self, i: int, x: float) -> float:
        """interpolate_grid of op i's curve at log2 M `x` (`in_time` for attention)."""
        x = min(max(x, 0.0), _LAST_NODE)  # GRID_LOG2 being 0, 1, 2 ...
        low = int(min(math.floor(x), _LAST_NODE - 1))
        below, above = self.grid[i][low], self.grid[i][low + 1]
        fraction = below + (above - below) * (x - low)
        if self.by_bytes[i]:
            fraction = min(fraction, below * 2.0 ** (x - low))
        return fraction

    def gemm_energy_j(self, matrix: list[float], vector: list[float], byte_j: list[float],
                      time_s: list[float], energy_j: list[float]) -> list[float]:  # fmt: skip
        """measured_gemm_energy_j of the work, given evaluate's figures for it."""
        out = []
        for i, e in enumerate(energy_j):
            if self.gemm[i]:
                t = time_s[i]
                measured = (matrix[i] * self.e_op_j[i] + vector[i] * self.e_vector_j
                            + byte_j[i] + self.static_w * t)  # fmt: skip
                e = max(min(measured, self.tdp_w * t), e)
            out.append(e)
        return out
