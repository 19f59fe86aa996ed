"""A graph of ops in execution order.

Edges are implicit: an op reads tensors that earlier ops wrote (matched by name). Workload
builders emit ops in a valid order, which is all the single-stream cost model needs; the
liveness analysis in compiler/memory_plan.py reads the same order.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from xpusim.ir.op import Op
from xpusim.ir.tensor import Role, Tensor


@dataclass
class Graph:
    name: str
    ops: list[Op] = field(default_factory=list)
    # A compact graph emits one layer for a run of identical ones: the ops of layer i stand
    # for layers i .. i + layer_copies[i] - 1 (workloads/transformer.py builds them so that
    # an 80-layer model is built and partitioned as two layers). Other layers stand for one.
    layer_copies: dict[int, int] = field(default_factory=dict)
    # Tensors kept whole in memory of which ops read a part, by name: an imported MoE
    # layer's experts, a few of which a short trace's tokens touch (workloads/lowering.py)
    held: dict[str, Tensor] = field(default_factory=dict)

    def copies(self, op: Op) -> int:
        """How many layers' instances of this op it stands for."""
        return self.layer_copies.get(op.layer, 1)

    def add(self, op: Op) -> Tensor:
        """Appends an op and returns its first output, so builders can chain calls."""
        self.ops.append(op)
        return op.outputs[0]

    def __iter__(self) -> Iterator[Op]:
        return iter(self.ops)

    def __len__(self) -> int:
        return len(self.ops)

    def tensors(self, role: Role) -> dict[str, Tensor]:
        """Distinct tensors of a role by name (a tied embedding read twice counts once); of
        the ops emitted, so a compact graph's copied layers are not in it; a tensor `held`
        whole counts whole."""
        found: dict[str, Tensor] = {n: t for n, t in self.held.items() if t.role is role}
        for op in self.ops:
            for t in op.inputs + op.outputs:
                if t.role is role:
                    found.setdefault(t.name, t)
        return found

    def tensor_bytes(self, role: Role) -> float:
        return sum(t.nbytes for t in self.tensors(role).values())

    @property
    def flops(self) -> float:
        return sum(op.flops * self.copies(op) for op in self.ops)

    @property
    def matrix_flops(self) -> float:
        return sum(op.matrix_flops * self.copies(op) for op in self.ops)

    @property
    def bytes(self) -> float:
        return sum(op.bytes * self.copies(op) for op in self.ops)
