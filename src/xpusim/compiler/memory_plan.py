"""Memory planning: how many bytes each role needs and which memory level holds it.

Placement is whole-role and greedy, innermost first: a role lives in the innermost memory
that can hold all of it after the roles placed before it. That is what a compiler for an
SRAM-rich chip does with a model that fits (Groq keeps everything in SRAM; MTIA keeps a small
model in its 128 MB SRAM) and degrades to "weights and KV cache in DRAM" for large models.
Activations move op by op: an op whose activations fit the largest on-chip memory (a cache
or scratchpad) reads and writes them there; otherwise they spill to their home level.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from xpusim.hardware.spec import Chip, MemoryKind
from xpusim.ir.graph import Graph
from xpusim.ir.tensor import Role


def peak_activation_bytes(graph: Graph) -> float | np.ndarray:
    """Largest total of live activations at any op, from first write to last read; for a
    graph built over a shape axis, each shape's (an array)."""
    last_use: dict[str, int] = {}
    for i, op in enumerate(graph.ops):
        for t in op.inputs + op.outputs:
            if t.role is Role.ACTIVATION:
                last_use[t.name] = i
    freed: dict[int, list[str]] = {}  # the tensors each op reads or writes for the last time
    for name, i in last_use.items():
        freed.setdefault(i, []).append(name)
    live: dict[str, float] = {}
    total = peak = 0.0
    for i, op in enumerate(graph.ops):
        for t in op.inputs + op.outputs:
            if t.role is Role.ACTIVATION and t.name not in live:
                live[t.name] = t.nbytes
                total = total + t.nbytes  # not in place: shapes over an axis may widen it
        peak = np.maximum(peak, total)
        for name in freed.get(i, ()):
            total = total - live.pop(name)
    return peak if isinstance(peak, np.ndarray) else float(peak)


@dataclass(frozen=True)
class Footprint:
    weights: float
    kv_cache: float
    activations: float

    @property
    def total(self) -> float:
        return self.weights + self.kv_cache + self.activations

    def by_role(self) -> dict[Role, float]:
        return {
            Role.WEIGHT: self.weights,
            Role.KV_CACHE: self.kv_cache,
            Role.ACTIVATION: self.activations,
        }


@dataclass(frozen=True)
class Placement:
    """Index into chip.memory of each role's home, and of the on-chip level for activations."""

    home: dict[Role, int]
    onchip_level: int | None  # largest cache/SRAM level; None on a chip without one
    onchip_bytes: float

    def level_of(self, role: Role, op_activation_bytes: float) -> int:
        if (
            role is Role.ACTIVATION
            and self.onchip_level is not None
            and op_activation_bytes <= self.onchip_bytes
        ):
            return self.onchip_level
        return self.home[role]


def footprint_matters(chip: Chip) -> bool:
    """Whether place() depends on the footprint: only when more than one level can be a
    role's home (a GPU's one HBM is every role's home whatever the sizes)."""
    return len(chip.tensor_levels) > 1


def place(chip: Chip, footprint: Footprint) -> Placement:
    holding = chip.tensor_levels
    free = {i: chip.memory[i].capacity_bytes.value for i in holding}
    home: dict[Role, int] = {}
    for role, need in footprint.by_role().items():
        level = next((i for i in holding if free[i] >= need), holding[-1])
        free[level] -= need
        home[role] = level
    onchip = [
        i for i, m in enumerate(chip.memory) if m.kind.on_chip and m.kind is not MemoryKind.LOCAL
    ]
    best = max(onchip, key=lambda i: chip.memory[i].capacity_bytes.value, default=None)
    size = chip.memory[best].capacity_bytes.value if best is not None else 0.0
    return Placement(home=home, onchip_level=best, onchip_bytes=size)


def min_chips(footprint: Footprint, capacity_bytes: float) -> int:
    """Fewest chips whose pooled memory holds the footprint (a lower bound for any plan)."""
    return max(1, -int(-footprint.total // capacity_bytes))
