"""Explicit transposes, for matrix units that cannot read an operand transposed.

Backpropagation reads stored tensors transposed (dX = dY W^T, dW = X^T dY); the autodiff
marks those operands with `transpose_a` / `transpose_b` (ir/op.py). A GPU's tensor cores
read either layout, so the flags cost nothing there. A chip whose spec sets
`matrix_unit.explicit_transpose` first copies the operand with its last two axes swapped,
which this pass makes an op of its own, so that its time and bytes show in the cost.
"""

from __future__ import annotations

from xpusim.ir.graph import Graph
from xpusim.ir.op import Op, OpKind
from xpusim.ir.tensor import Role, Tensor

_FLAGS = (("transpose_a", 0), ("transpose_b", 1))


def _transposed(t: Tensor) -> Tensor:
    """The copy: a transient value, even when it is a weight's."""
    return Tensor(f"{t.name}^T", (*t.shape[:-2], t.shape[-1], t.shape[-2]), t.dtype,
                  Role.ACTIVATION)  # fmt: skip


def materialize_transposes(graph: Graph) -> Graph:
    """The graph with every transposed matmul operand copied by a TRANSPOSE op first."""
    out = Graph(graph.name, layer_copies=dict(graph.layer_copies))
    for op in graph:
        flagged = (
            [(key, i) for key, i in _FLAGS if op.attr(key)] if op.kind is OpKind.MATMUL else []
        )
        if not flagged:
            out.ops.append(op)
            continue
        inputs = list(op.inputs)
        for key, i in flagged:
            copy = _transposed(inputs[i])
            out.ops.append(Op(OpKind.TRANSPOSE, f"{op.name}.{key}", (inputs[i],), (copy,),
                              layer=op.layer))  # fmt: skip
            inputs[i] = copy
        attrs = tuple((k, v) for k, v in op.attrs if k not in dict(_FLAGS))
        out.ops.append(Op(op.kind, op.name, tuple(inputs), op.outputs, attrs, op.layer))
    return out
