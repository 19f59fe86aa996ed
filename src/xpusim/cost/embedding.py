"""Embedding lookups on one chip: random row reads, where the rows live, and pooling.

A batch's embedding bags run as one fused kernel, as FBGEMM's table-batched embedding (TBE)
runs them, so the dispatch overhead is paid once:

    bytes[l]  = sum over tables of lookups x share served by level l x ceil(row B / g_l) x g_l
    memory_s  = max over levels of bytes[l] / (bandwidth_l x random-access efficiency_l)
                (plus the ids read and pooled rows written, streamed like any activation)
    compute_s = pooling FLOPs / pooling rate (the vector units, or the sparse cores)
    time_s    = max(compute_s, memory_s) + one per-op overhead, or longer where the power
                limit says so (cost/roofline.py)
    energy    = bytes x pJ/B at each level + pooling FLOPs x energy per op
                (static power is the scenario's: it depends on what overlaps)

g_l, a level's access granularity: memory returns whole bursts, so a 132-byte int8 row (128
B and a 4 B scale and bias) costs 160 B in 32 B bursts. A level without the figure uses 64 B
for DRAM (one BL8 burst of a 64-bit DDR4 channel, JEDEC JESD79-4) and 32 B on chip (the
sector of NVIDIA's L2, CUDA C++ Best Practices Guide).

Random-access efficiency: a level without the figure reaches the chip's streaming memory
efficiency. That is how Meta's sharding planner costs a fused TBE lookup: at the full HBM
bandwidth it is given (torchrec/distributed/planner/constants.py, kernel_bw_lookup: FUSED =
1 x hbm_mem_bw). A row of 128 B or more is several bursts from one DRAM page; the waste of
small rows is what the granularity charges.

Placement: tables are homed innermost first in the levels that hold tensors, after the
dense part's weights and activations, densest first (lookups per byte stored); the table at
a boundary is split by rows. Lookups are uniform within a table, as in MLPerf's synthetic
multi-hot data, so a level holding a share of a table's rows serves that share of its
lookups. A hardware cache (a GPU's L2) serves the densest DRAM-homed rows likewise, up to its
capacity left over by the dense working set: an ideal cache under uniform traffic. Real
traffic is skewed toward hot rows, so real hit rates are higher (MTIA 2i reports 40-60% SRAM
hits for TBE); these are the hit rates of uniform traffic.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from xpusim.cost.roofline import Bottleneck, bottleneck_of, level_efficiencies, power_limit_s
from xpusim.hardware.spec import Chip, MemoryKind
from xpusim.ir.graph import Graph
from xpusim.ir.op import OpKind

DRAM_GRANULARITY_BYTES = 64.0  # JEDEC JESD79-4: DDR4 burst of 8 on a 64-bit channel
ONCHIP_GRANULARITY_BYTES = 32.0  # CUDA C++ Best Practices Guide: 32-byte L2 sectors


@dataclass(frozen=True)
class EmbeddingBags:
    """A batch's embedding bags as columns, one entry per table."""

    names: tuple[str, ...]
    rows: np.ndarray  # (t,) rows stored
    row_bytes: np.ndarray  # (t,) bytes of one stored row, scale and bias included
    lookups: np.ndarray  # (t,) rows gathered in the batch
    pool_flops: np.ndarray  # (t,)
    io: np.ndarray  # (t,) ids read and pooled rows written
    pooled_bytes: np.ndarray  # (t,) the pooled rows alone: what sharding sends between chips

    @classmethod
    def of(cls, graph: Graph) -> EmbeddingBags:
        ops = [op for op in graph if op.kind is OpKind.EMBEDDING]
        if not ops:
            raise ValueError(f"{graph.name}: no embedding ops")
        tables = [op.inputs[0] for op in ops]
        return cls(
            names=tuple(op.name for op in ops),
            rows=np.array([t.shape[0] for t in tables], dtype=float),
            row_bytes=np.array([t.shape[-1] * t.dtype.itemsize for t in tables]),
            lookups=np.array([op.inputs[1].numel for op in ops], dtype=float),
            pool_flops=np.array([op.vector_flops for op in ops]),
            io=np.array([op.inputs[1].nbytes + op.outputs[0].nbytes for op in ops]),
            pooled_bytes=np.array([op.outputs[0].nbytes for op in ops], dtype=float),
        )

    @property
    def io_bytes(self) -> float:
        return float(self.io.sum())

    @property
    def table_bytes(self) -> np.ndarray:
        return self.rows * self.row_bytes

    def subset(self, tables: list[int]) -> EmbeddingBags:
        """Some of the tables, whole: what one chip holds under table-wise sharding."""
        pick = np.array(tables, dtype=int)
        return EmbeddingBags(
            names=tuple(self.names[i] for i in pick), rows=self.rows[pick],
            row_bytes=self.row_bytes[pick], lookups=self.lookups[pick],
            pool_flops=self.pool_flops[pick], io=self.io[pick],
            pooled_bytes=self.pooled_bytes[pick],
        )  # fmt: skip

    def row_shard(self, parts: int) -> EmbeddingBags:
        """One of `parts` row-wise shards of every table: 1/parts of the rows and lookups.

        Lookups are uniform over rows, so each shard serves its share of them; it writes a
        partial pooled sum for every sample, which a reduce-scatter then adds up.
        """
        return replace(
            self, rows=np.ceil(self.rows / parts), lookups=self.lookups / parts,
            pool_flops=self.pool_flops / parts,
            io=self.io / parts + self.pooled_bytes * (1 - 1 / parts),
        )  # fmt: skip


@dataclass(frozen=True)
class TablePlacement:
    stored: np.ndarray  # (L, t) bytes of each table homed at each memory level
    served: np.ndarray  # (L, t) share of each table's lookups each level serves


def _fill(sizes: np.ndarray, capacity: float) -> np.ndarray:
    """Greedy fill in the given order: how much of each item fits; the boundary item splits."""
    before = np.cumsum(sizes) - sizes
    return np.clip(capacity - before, 0.0, sizes)


def place_tables(
    chip: Chip, bags: EmbeddingBags, dense_home_bytes: np.ndarray, dense_working_bytes: float
) -> TablePlacement:
    """Homes and cache hits of every table; see the module docstring for the rules.

    `dense_home_bytes[l]` is what the dense part already keeps at level l; the outermost level
    that holds tensors takes whatever is left, fitting or not (the scenario reports the fit).
    """
    levels, sizes = chip.memory, bags.table_bytes
    order = np.argsort(-bags.lookups / sizes, kind="stable")
    stored = np.zeros((len(levels), len(sizes)))
    left = sizes[order]
    holding = [i for i, m in enumerate(levels) if m.kind.holds_tensors]
    for i in holding:
        free = levels[i].capacity_bytes.value - dense_home_bytes[i] if i != holding[-1] else np.inf
        taken = _fill(left, max(free, 0.0))
        stored[i, order] = taken
        left = left - taken
    served = stored / sizes
    dram = [i for i, m in enumerate(levels) if m.kind is MemoryKind.DRAM]
    caches = [i for i, m in enumerate(levels) if m.kind is MemoryKind.CACHE]
    if caches:  # the largest one, as memory_plan picks it for activations
        c = max(caches, key=lambda i: levels[i].capacity_bytes.value)
        free = max(levels[c].capacity_bytes.value - dense_working_bytes, 0.0)
        in_dram = stored[dram].sum(axis=0)
        hits = np.zeros_like(sizes)
        hits[order] = _fill(in_dram[order], free)
        miss = np.divide(in_dram - hits, in_dram, out=np.ones_like(sizes), where=in_dram > 0)
        served[dram] *= miss
        served[c] = hits / sizes
    return TablePlacement(stored=stored, served=served)


@dataclass(frozen=True)
class EmbeddingCost:
    compute_s: float
    memory_s: float
    overhead_s: float
    power_s: float  # the time the TDP allows the kernel's energy
    time_s: float
    dynamic_j: float  # energy without static power
    level_bytes: np.ndarray  # (L,) bytes moved at each level, whole bursts
    level_s: np.ndarray  # (L,) time each level is busy
    on_sparse_core: bool

    @property
    def bottleneck(self) -> Bottleneck:
        return Bottleneck(int(bottleneck_of(self.compute_s, self.memory_s, self.overhead_s, 0.0,
                                            self.power_s)))  # fmt: skip


def granularity(chip: Chip) -> np.ndarray:
    """Access granularity of each memory level, (L,)."""
    return np.array([
        m.access_granularity_bytes.value if m.access_granularity_bytes
        else DRAM_GRANULARITY_BYTES if m.kind is MemoryKind.DRAM else ONCHIP_GRANULARITY_BYTES
        for m in chip.memory
    ])  # fmt: skip


def random_read_rate(chip: Chip) -> np.ndarray:
    """Achievable bytes/s of random row reads at each level, (L,): its random-access
    efficiency where the chip has one, else what streaming reaches there."""
    streaming = level_efficiencies(chip, chip.efficiency.memory.value)
    return np.array([
        m.bandwidth_bytes_per_s.value
        * (m.random_access_efficiency.value if m.random_access_efficiency else e)
        for m, e in zip(chip.memory, streaming, strict=True)
    ])  # fmt: skip


def evaluate_bags(
    chip: Chip, bags: EmbeddingBags, placement: TablePlacement, io_level: int
) -> EmbeddingCost:
    """Time and energy of the fused lookup kernel; `io_level` holds its ids and outputs."""
    g = granularity(chip)[:, None]
    whole_bursts = np.ceil(bags.row_bytes / g) * g  # (L, t)
    random_bytes = (placement.served * bags.lookups * whole_bursts).sum(axis=-1)
    io_bytes = np.zeros(len(chip.memory))
    io_bytes[io_level] = bags.io_bytes
    streaming = np.array([m.bandwidth_bytes_per_s.value for m in chip.memory]) * np.array(
        level_efficiencies(chip, chip.efficiency.memory.value))
    level_s = random_bytes / random_read_rate(chip) + io_bytes / streaming
    level_bytes = random_bytes + io_bytes
    pool_flops = float(bags.pool_flops.sum())
    sparse = chip.sparse_core
    peak = sparse.vector_ops_per_s.value if sparse else chip.vector_ops_per_s.value
    power = sparse.power_w.value if sparse else chip.compute_power_budget_w
    compute_s = pool_flops / (peak * chip.efficiency.vector.value)
    memory_s = float(level_s.max())
    overhead_s = chip.overhead.per_op_s.value
    pj = np.array([m.energy_pj_per_byte.value for m in chip.memory])
    dynamic_j = float(level_bytes @ pj) * 1e-12 + pool_flops * power / peak
    power_s = float(power_limit_s(dynamic_j, chip.tdp_w.value, chip.energy.static_power_w.value))
    return EmbeddingCost(
        compute_s=compute_s,
        memory_s=memory_s,
        overhead_s=overhead_s,
        power_s=power_s,
        time_s=max(max(compute_s, memory_s) + overhead_s, power_s),
        dynamic_j=dynamic_j,
        level_bytes=level_bytes,
        level_s=level_s,
        on_sparse_core=sparse is not None,
    )
