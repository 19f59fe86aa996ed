"""Precision: recast a graph's floating-point tensors to the formats being simulated.

An imported model carries the dtypes it was exported in (usually fp32); a deployment runs it
in the chip's format. Activations take `act` and weights `weight` (narrower for weight-only
quantization); integer and boolean tensors (token ids, masks) keep their type. A cast op
left converting a format to itself is removed, as a compiler would.
"""

from __future__ import annotations

from dataclasses import replace

from xpusim.errors import UserError
from xpusim.ir.dtypes import DType, Format, weight_parts
from xpusim.ir.graph import Graph
from xpusim.ir.op import Op, OpKind
from xpusim.ir.tensor import Role, Tensor

FLOATS = frozenset({DType.FP32, DType.TF32, DType.FP16, DType.BF16, DType.FP8, DType.MXFP4,
                    DType.NVFP4})  # fmt: skip


def recast(graph: Graph, act: DType, weight: Format | None = None) -> Graph:
    weight = weight or act
    if weight.element.bits > act.bits:
        raise UserError(
            f"weight precision {weight.value} is wider than precision {act.value}; "
            f"weight-only quantization narrows weights"
        )
    parts = weight_parts(weight, act)
    # tables read by a gather keep their layout's table format (an LM head cannot be told
    # from another linear layer in an imported graph: it takes the linear layers' format)
    tables = {op.inputs[0].name for op in graph.ops if op.kind is OpKind.EMBEDDING}

    def cast(t: Tensor) -> Tensor:
        if t.dtype not in FLOATS:
            return t
        if t.role is not Role.WEIGHT:
            return replace(t, dtype=act)
        return replace(t, dtype=parts.table if t.name in tables else parts.body)

    aliases: dict[str, Tensor] = {}  # outputs of removed casts -> what they converted

    def read(t: Tensor) -> Tensor:
        source = aliases.get(t.name)
        return cast(t) if source is None else replace(source, shape=t.shape)

    ops: list[Op] = []
    for op in graph.ops:
        inputs, outputs = tuple(map(read, op.inputs)), tuple(map(cast, op.outputs))
        if op.attr("cast") and inputs[0].dtype is outputs[0].dtype:
            aliases[outputs[0].name] = inputs[0]
            continue
        attrs = tuple((k, act.value if k == "compute" else v) for k, v in op.attrs)
        ops.append(replace(op, inputs=inputs, outputs=outputs, attrs=attrs))
    return Graph(graph.name, ops, held={n: cast(t) for n, t in graph.held.items()})
