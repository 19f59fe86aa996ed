"""Recommendation serving on one chip: batches of queries through a DLRM-style model.

A query is one sample (one user-item pair scored); a batch of B of them is one forward pass
(MLPerf's DLRM-v2 queries aggregate 100-700 samples each). The dense part (MLPs, interaction)
is costed op by op with the roofline (cost/roofline.py); the embedding bags as one fused
lookup kernel (cost/embedding.py). On a chip with sparse cores the lookups run there, beside
the dense part; otherwise one after the other:

    latency = dense + lookups                                   (no sparse core)
            = max(dense, lookups, busy time of the busiest memory level under both)
    energy  = dense and lookup energy without static power + static power x latency
    queries_per_s = B / latency,  queries_per_joule = B / energy

Overlap shares memory: both read the same DRAM, so no level can be busier than the latency.
`sla_ms` searches the largest batch whose latency is within the bound (latency grows with the
batch: doubling, then bisection) and reports that batch.

On N chips (`chips`, or a system) the dense part is data parallel (each chip scores
ceil(B / N) samples) and the tables are sharded: table-wise (whole tables, spread by size)
or row-wise (a slice of every table on every chip). Each chip looks up its shard for the
whole batch, then the pooled rows are exchanged: an all-to-all (table-wise) or a
reduce-scatter of partial sums (row-wise), costed on the system's topology
(cost/collectives.py) and added to the slowest chip's time: TorchRec's schedule without
pipelining. A model that does not fit says how many chips its footprint needs (`min_chips`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from xpusim.compiler.memory_plan import Footprint, min_chips, peak_activation_bytes, place
from xpusim.cost.collectives import Collective, collective_time
from xpusim.cost.dollars import Cost
from xpusim.cost.embedding import EmbeddingBags, EmbeddingCost, evaluate_bags, place_tables
from xpusim.cost.op_table import OpTable, op_table
from xpusim.cost.roofline import Bottleneck, HardwareArrays, OpCosts, evaluate
from xpusim.errors import UserError, check_positive
from xpusim.hardware.spec import Chip
from xpusim.hardware.system import System, system_for
from xpusim.ir.dtypes import DType, Format
from xpusim.ir.graph import Graph
from xpusim.ir.op import OpKind
from xpusim.ir.tensor import Role
from xpusim.result import Result
from xpusim.scenarios.formats import resolve_formats
from xpusim.scenarios.op_reports import OpReport
from xpusim.scenarios.registry import register
from xpusim.workloads.dlrm import build_batch
from xpusim.workloads.dlrm_config import DLRMConfig

SHARDINGS = ("table", "row")
MAX_SLA_BATCH = 1 << 16  # the search's ceiling: MLPerf DLRM-v2 trains at global batch 65,536


@dataclass
class RecsysMemory:
    """What one chip holds (the fullest one when tables are sharded)."""

    embeddings: float
    dense_weights: float
    activations: float
    total: float
    capacity: float


@dataclass
class RecsysResult(Result):
    PRICED_BY: ClassVar[tuple[str, str]] = ("queries_per_s", "queries")

    model: str
    chip: str
    chips: int
    batch: int
    precision: str
    weight_precision: str
    mode: str
    fits: bool
    reason: str
    min_chips: int
    memory_bytes: RecsysMemory
    placement: dict[str, str]  # home level of the dense weights and activations
    lookups_served: dict[str, float]  # share of gathered rows each memory level serves
    latency_s: float
    queries_per_s: float
    queries_per_joule: float
    energy_j: float
    joules_per_query: float
    avg_power_w: float
    tdp_w: float
    bottleneck: str
    dense_s: float
    embedding_s: float
    sparse_core: bool  # lookups ran on sparse cores, overlapped with the dense part
    flops_per_query: float
    embedding_bytes_per_query: float  # whole bursts moved
    sharding: str | None = None  # "table" or "row" across chips; None on one chip
    exchange_s: float = 0.0  # the all-to-all (or reduce-scatter) of pooled embeddings
    sla_ms: float | None = None
    cost: Cost | None = None  # cost/dollars.py: filled where a price is known
    notes: list[str] = field(default_factory=list)
    ops: list[OpReport] = field(default_factory=list)


def simulate(
    model: DLRMConfig,
    chip: Chip | System,
    *,
    batch: int = 1,
    precision: str | DType | None = None,
    weight_precision: str | Format | None = None,
    sla_ms: float | None = None,
    chips: int | None = None,
    sharding: str = "auto",
) -> RecsysResult:
    """One batch of `batch` queries; with `sla_ms`, the largest batch within that latency.

    `weight_precision` stores the embedding tables and dense weights narrower than
    `precision` (int8 tables are the serving norm). On several chips the tables are sharded
    table-wise or row-wise (`sharding`; "auto" keeps whichever serves the batch faster
    among those that fit) and the dense part is data parallel.
    """
    system = system_for(chip, chips)
    check_positive(batch=batch)
    if sharding not in ("auto", *SHARDINGS):
        raise UserError(f"--sharding must be auto, table or row, not {sharding!r}")
    act, weight, notes = resolve_formats(system.chip, precision, weight_precision)
    choices = SHARDINGS if sharding == "auto" and system.chips > 1 else (sharding,)

    def at(b: int) -> RecsysResult:
        tried = [_serve(model, system, b, act, weight, notes, how) for how in choices]
        return min(tried, key=lambda r: (not r.fits, r.latency_s))

    if sla_ms is None:
        return at(batch)
    if not sla_ms > 0:
        raise UserError(f"--sla-ms must be positive, got {sla_ms!r}")
    result = _largest_batch_within(sla_ms * 1e-3, at)
    result.sla_ms = sla_ms
    return result


def _largest_batch_within(bound_s: float, at: Callable[[int], RecsysResult]) -> RecsysResult:
    best = at(1)
    if best.latency_s > bound_s:
        best.notes.append(
            f"no batch meets {bound_s * 1e3:g} ms: batch 1 takes {best.latency_s * 1e3:.3g} ms"
        )
        return best
    low, high = 1, 2
    while high <= MAX_SLA_BATCH and (trial := at(high)).latency_s <= bound_s:
        best, low, high = trial, high, high * 2
    high = min(high, MAX_SLA_BATCH + 1)
    while high - low > 1:  # latency(low) meets the bound, latency(high) does not (or is capped)
        mid = (low + high) // 2
        if (trial := at(mid)).latency_s <= bound_s:
            best, low = trial, mid
        else:
            high = mid
    if best.batch == MAX_SLA_BATCH:
        best.notes.append(f"the batch search stops at {MAX_SLA_BATCH}")
    return best


def shard_tables(bags: EmbeddingBags, chips: int, sharding: str) -> list[EmbeddingBags]:
    """Each chip's tables: whole tables spread by size (table-wise), or a slice of every one.

    Table-wise places the largest table first on the chip holding the fewest bytes so far
    (longest-processing-time first), which balances memory; a chip may get no table at all.
    """
    if chips == 1:
        return [bags]
    if sharding == "row":
        return [bags.row_shard(chips)] * chips
    loads, groups = np.zeros(chips), [[] for _ in range(chips)]
    for t in np.argsort(-bags.table_bytes, kind="stable"):
        c = int(np.argmin(loads))
        groups[c].append(int(t))
        loads[c] += bags.table_bytes[t]
    return [bags.subset(g) for g in groups if g]


def _exchange_s(system: System, bags: EmbeddingBags, shards: list[EmbeddingBags],
                sharding: str) -> float:  # fmt: skip
    """Sending pooled embeddings to the chips that own the samples' dense part.

    Table-wise: an all-to-all of each chip's pooled rows (for every sample of the batch);
    row-wise: a reduce-scatter that adds the partial sums and leaves each chip its samples.
    """
    n = system.chips
    if n == 1:
        return 0.0
    if sharding == "row":
        total = float(bags.pooled_bytes.sum())
        return collective_time(system, Collective.REDUCE_SCATTER, total, n).time_s
    largest = max(float(shard.pooled_bytes.sum()) for shard in shards)
    return collective_time(system, Collective.ALL_TO_ALL, largest, n).time_s


def _serve(
    model: DLRMConfig, system: System, batch: int, act: DType, weight: Format,
    notes: list[str], sharding: str,
) -> RecsysResult:  # fmt: skip
    """One batch over the system: each chip runs the dense part for its share of the samples
    and the lookups of its tables for all of them; then the pooled rows are exchanged."""
    chip, n = system.chip, system.chips
    graph = build_batch(model, batch, act, weight)
    bags = EmbeddingBags.of(graph)
    local = graph if n == 1 else build_batch(model, -(-batch // n), act, weight)
    dense = Graph(local.name, [op for op in local if op.kind is not OpKind.EMBEDDING])
    tables = float(bags.table_bytes.sum())
    local_tables = float(EmbeddingBags.of(local).table_bytes.sum())
    footprint = Footprint(
        local.tensor_bytes(Role.WEIGHT) - local_tables, 0.0, peak_activation_bytes(local)
    )
    placement = place(chip, footprint)
    home = np.zeros(len(chip.memory))
    for role, need in footprint.by_role().items():
        home[placement.home[role]] += need

    table = op_table(dense)
    hw = HardwareArrays.build(chip, table)
    costs = evaluate(table, hw, placement)
    dense_s = float(table.count @ costs.time_s)
    static_w = chip.energy.static_power_w.value
    dense_dynamic_j = float(table.count @ costs.energy_j) - static_w * dense_s
    dense_busy = (costs.level_bytes / hw.level_rate) @ table.count  # (L,)

    shards = shard_tables(bags, n, sharding)
    per_chip = []  # (latency, shared_s, lookups, placement) of each chip holding tables
    for shard in shards:
        where = place_tables(chip, shard, home, footprint.total)
        io_level = placement.level_of(Role.ACTIVATION, shard.io_bytes)
        lookups = evaluate_bags(chip, shard, where, io_level)
        if lookups.on_sparse_core:
            shared_s = float((dense_busy + lookups.level_s).max())
            latency_s = max(dense_s, lookups.time_s, shared_s)
        else:
            shared_s, latency_s = 0.0, dense_s + lookups.time_s
        per_chip.append((latency_s, shared_s, lookups, where))
    latency_s, shared_s, lookups, where = max(per_chip, key=lambda c: c[0])
    exchange_s = _exchange_s(system, bags, shards, sharding)
    latency_s += exchange_s
    energy_j = (n * dense_dynamic_j + sum(c[2].dynamic_j for c in per_chip)
                + static_w * latency_s * n)  # fmt: skip

    capacity = chip.capacity_bytes
    fullest = Footprint(footprint.weights + max(float(s.table_bytes.sum()) for s in shards),
                        0.0, footprint.activations)  # fmt: skip
    whole = Footprint(footprint.weights + tables, 0.0, footprint.activations)
    fits = fullest.total <= capacity
    names = [m.name for m in chip.memory]
    slowest = max(range(len(shards)), key=lambda c: per_chip[c][0])
    served = (where.served * shards[slowest].lookups).sum(axis=-1) / shards[slowest].lookups.sum()
    ops = _op_reports(table, costs, lookups, latency_s, float(shards[slowest].pool_flops.sum()))
    needed = min_chips(whole, capacity)
    return RecsysResult(
        model=model.name,
        chip=chip.id,
        chips=n,
        batch=batch,
        precision=act.value,
        weight_precision=weight.value,
        mode="inference",
        fits=fits,
        reason="" if fits else _not_fit_reason(chip, fullest, footprint.weights, n, needed),
        min_chips=needed,
        memory_bytes=RecsysMemory(
            fullest.weights - footprint.weights,
            footprint.weights,
            footprint.activations,
            fullest.total,
            capacity,
        ),
        placement={
            "dense_weights": names[placement.home[Role.WEIGHT]],
            "activations": names[placement.home[Role.ACTIVATION]],
        },
        lookups_served={names[i]: float(s) for i, s in enumerate(served) if s > 0},
        latency_s=latency_s,
        queries_per_s=batch / latency_s,
        queries_per_joule=batch / energy_j,
        energy_j=energy_j,
        joules_per_query=energy_j / batch,
        avg_power_w=energy_j / latency_s / n,
        tdp_w=chip.tdp_w.value,
        bottleneck=_bottleneck(ops, lookups, shared_s, latency_s, exchange_s),
        dense_s=dense_s,
        embedding_s=lookups.time_s,
        sparse_core=lookups.on_sparse_core,
        flops_per_query=graph.flops / batch,
        embedding_bytes_per_query=float(sum(c[2].level_bytes.sum() for c in per_chip)) / batch,
        sharding=sharding if n > 1 else None,
        exchange_s=exchange_s,
        notes=list(notes),
        ops=ops,
    )


def _op_reports(
    table: OpTable, costs: OpCosts, lookups: EmbeddingCost, latency_s: float, pool_flops: float
) -> list[OpReport]:
    """The dense ops, then the fused lookup kernel; shares are of the batch's latency."""
    labels = costs.bottleneck
    dense = [
        OpReport(
            phase="dense",
            name=op.name,
            kind=op.kind.value,
            count=int(table.count[i]),
            flops=op.flops,
            bytes=op.bytes,
            time_s=float(costs.time_s[i]),
            compute_s=float(costs.compute_s[i]),
            memory_s=float(costs.memory_s[i]),
            overhead_s=float(costs.overhead_s[i]),
            comm_s=0.0,
            energy_j=float(costs.energy_j[i]),
            bottleneck=Bottleneck(int(labels[i])).label,
            share=float(table.count[i] * costs.time_s[i] / latency_s),
        )
        for i, op in enumerate(table.ops)
    ]
    bags = OpReport(
        phase="embedding",
        name="embedding_bags",
        kind=OpKind.EMBEDDING.value,
        count=1,
        flops=pool_flops,
        bytes=float(lookups.level_bytes.sum()),
        time_s=lookups.time_s,
        compute_s=lookups.compute_s,
        memory_s=lookups.memory_s,
        overhead_s=lookups.overhead_s,
        comm_s=0.0,
        energy_j=lookups.dynamic_j,
        bottleneck=lookups.bottleneck.label,
        share=lookups.time_s / latency_s,
    )
    return [*dense, bags]


def _bottleneck(
    ops: list[OpReport], lookups: EmbeddingCost, shared_s: float, latency_s: float,
    exchange_s: float,
) -> str:  # fmt: skip
    """The label carrying the most time; under overlap, that of whatever set the latency."""
    if exchange_s >= latency_s / 2:
        return Bottleneck.INTERCONNECT.label
    latency_s -= exchange_s
    if shared_s >= latency_s:
        return Bottleneck.MEMORY.label
    if lookups.on_sparse_core:
        setter = "embedding" if lookups.time_s >= latency_s else "dense"
        ops = [op for op in ops if op.phase == setter]
    totals: dict[str, float] = {}
    for op in ops:
        totals[op.bottleneck] = totals.get(op.bottleneck, 0.0) + op.count * op.time_s
    return max(totals, key=totals.__getitem__)


def _not_fit_reason(
    chip: Chip, fullest: Footprint, dense_weights: float, chips: int, chips_needed: int
) -> str:
    gb = 1e9
    where = f"{chip.id} holds" if chips == 1 else f"each of the {chips} {chip.id} chips holds"
    return (
        f"memory: the fullest chip needs {fullest.total / gb:.1f} GB (embeddings "
        f"{(fullest.weights - dense_weights) / gb:.1f}, dense weights {dense_weights / gb:.2f}, "
        f"activations {fullest.activations / gb:.2f}) but {where} "
        f"{chip.capacity_bytes / gb:.2f} GB; the model needs at least {chips_needed} chips"
    )


register("recsys", "inference", simulate)
