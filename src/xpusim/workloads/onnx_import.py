"""ONNX front end: a .onnx file, its shapes inferred, lowered op by op to the IR.

    xpusim run model.onnx --chip h100-sxm --input-shape input_ids=1,128

Initializers are weights; graph inputs are activations. An input with symbolic dimensions
(`batch`, `seq`) takes its shape from `input_shapes`; onnx's shape inference then gives every
tensor its shape. Weight data is never read (external data stays on disk), so a file of any
size imports in the memory of its graph. onnx is imported inside the functions.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from xpusim.errors import UserError, closest
from xpusim.files import regular_file
from xpusim.ir.dtypes import DType
from xpusim.ir.tensor import Role
from xpusim.workloads import onnx_ops
from xpusim.workloads.imported import ImportedModel
from xpusim.workloads.lowering import Lowering, Value, reason, require

_DTYPES = {
    "FLOAT": DType.FP32, "FLOAT16": DType.FP16, "BFLOAT16": DType.BF16,
    "FLOAT8E4M3FN": DType.FP8, "FLOAT8E5M2": DType.FP8, "INT8": DType.INT8, "UINT8": DType.INT8,
    "INT4": DType.INT4, "UINT4": DType.INT4, "INT32": DType.INT32, "INT64": DType.INT64,
    "BOOL": DType.BOOL,
}  # fmt: skip

Shapes = dict[str, tuple[int, ...]]


MAX_ONNX_BYTES = 2**31
"""Protobuf's limit on one serialized message: a bigger model keeps its weights in external
data files, so a bigger .onnx file is the wrong file (and onnx.load would read all of it)."""


def load_onnx(path: Path, input_shapes: Shapes | None = None) -> ImportedModel:
    """Reads, checks and shape-infers an ONNX file, then lowers its graph."""
    regular_file(path, "ONNX", MAX_ONNX_BYTES)
    onnx = require("onnx", "onnx")

    try:
        model = onnx.load(str(path), load_external_data=False)
        onnx.checker.check_model(str(path))  # by path: external data resolves beside the file
    except Exception as e:  # unreadable, not protobuf, or failing the ONNX checker
        raise UserError(f"{path}: not a valid ONNX model: {reason(e)}") from None
    inputs = _set_input_shapes(model.graph, input_shapes or {}, path)
    try:
        model = _fold_constants(model, path.parent)
        model = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    except Exception as e:  # inconsistent shapes, given or stored
        raise UserError(f"{path}: shape inference failed: {reason(e)}") from None
    return ImportedModel(path.stem, _lower(model.graph, path.stem), "onnx", inputs)


def _fold_constants(model: Any, folder: Path) -> Any:
    """Folds shape arithmetic (Shape, Gather, Range, ... on sizes) into constants.

    A graph exported with symbolic dimensions computes sizes at run time; once the inputs'
    shapes are fixed, those computations are constants, and folding them lets shape
    inference give every tensor a static shape. onnxscript's optimizer (the one torch.onnx
    runs) does it; it folds only small tensors, so weights stay on disk.
    """
    onnx_ir = require("onnx_ir", "onnx")
    optimizer = require("onnxscript.optimizer", "onnx")

    graph = onnx_ir.from_proto(model)
    onnx_ir.external_data.set_base_dir(graph.graph, folder)
    optimizer.optimize(graph)
    return onnx_ir.to_proto(graph)


def _set_input_shapes(graph: Any, shapes: Shapes, path: Path) -> Shapes:
    """Fixes each graph input's dimensions from `shapes`; every dimension must end up known."""
    weights = {t.name for t in graph.initializer}
    inputs = [i for i in graph.input if i.name not in weights]
    names = [i.name for i in inputs]
    for name in shapes.keys() - set(names):
        raise UserError(f"--input-shape: {path.name} has no input {name!r}" + closest(name, names))
    found: Shapes = {}
    for graph_input in inputs:
        dims = graph_input.type.tensor_type.shape.dim
        given = shapes.get(graph_input.name)
        if given is None:
            symbolic = [d.dim_param or "?" for d in dims if not d.HasField("dim_value")]
            if symbolic:
                raise UserError(
                    f"input {graph_input.name!r} has symbolic dimensions ({', '.join(symbolic)});"
                    f" give its shape with --input-shape {graph_input.name}=D0,D1,..."
                )
        else:
            _fix(graph_input.name, dims, given)
        found[graph_input.name] = tuple(d.dim_value for d in dims)
    return found


def _fix(name: str, dims: Any, given: tuple[int, ...]) -> None:
    if len(given) != len(dims):
        raise UserError(f"--input-shape {name}: the model's input has {len(dims)} dimensions")
    for axis, (dim, size) in enumerate(zip(dims, given, strict=True)):
        if dim.HasField("dim_value") and dim.dim_value != size:
            raise UserError(
                f"--input-shape {name}: dimension {axis} is fixed at {dim.dim_value} in the model"
            )
        dim.dim_value = size


def _lower(graph: Any, name: str) -> Any:
    lw = Lowering(name)
    types = {v.name: v.type.tensor_type for v in [*graph.input, *graph.value_info, *graph.output]}
    values: dict[str, Value] = {}
    for t in graph.initializer:
        values[t.name] = lw.tensor(t.name, tuple(t.dims), _dtype(t.data_type, t.name), Role.WEIGHT)
    for graph_input in graph.input:
        if graph_input.name not in values:
            shape, dtype = _type(types, graph_input.name)
            values[graph_input.name] = lw.tensor(graph_input.name, shape, dtype, Role.ACTIVATION)
    for index, node in enumerate(graph.node):
        outs = _call(lw, node, index, values, types)
        values.update((n, v) for n, v in zip(node.output, outs, strict=True) if n)
    return lw.finish()


def _call(lw: Lowering, node: Any, index: int, values: dict, types: dict) -> list[Value]:
    """The Values a node produces, emitting its IR op unless it is a view or a constant."""
    import onnx

    op = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"
    ins = [values[n] if n else None for n in node.input]
    present = [v for v in ins if v is not None]
    if op in onnx_ops.VIEWS:
        return [present[0].view(_type(types, n)[0]) for n in node.output if n]
    constant = op in onnx_ops.CREATION or all(v.constant for v in present)
    role = Role.WEIGHT if constant else Role.ACTIVATION
    outs = [lw.tensor(n, *_type(types, n), role) if n else None for n in node.output]
    if constant:
        return outs
    handler = HANDLERS.get(op)
    if handler is None:
        lw.skip(f"onnx.{op}")
        return outs
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    label = node.name or f"{node.op_type}_{index}"
    replaced = handler(lw, label, f"onnx.{op}", ins, attrs, [o for o in outs if o is not None])
    return replaced or outs


def _type(types: dict, name: str) -> tuple[tuple[int, ...], DType]:
    tensor_type = types.get(name)
    dims = tensor_type.shape.dim if tensor_type is not None else None
    if dims is None or not all(d.HasField("dim_value") for d in dims):
        raise UserError(
            f"shape inference left the shape of {name!r} unknown; give the inputs' shapes "
            f"with --input-shape NAME=D0,D1,..."
        )
    return tuple(d.dim_value for d in dims), _dtype(tensor_type.elem_type, name)


def _dtype(elem_type: int, name: str) -> DType:
    import onnx

    kind = onnx.TensorProto.DataType.Name(elem_type)
    if kind not in _DTYPES:
        known = ", ".join(sorted(_DTYPES))
        raise UserError(f"{name}: tensor type {kind} is not modelled (known: {known})")
    return _DTYPES[kind]


# Handlers: (lowering, op name, source, inputs (None where omitted), attributes, outputs)
# -> a replacement for the outputs, or None to keep them.
Handler = Callable[[Lowering, str, str, list, dict, list[Value]], Any]


def _matmul(lw: Lowering, name: str, src: str, ins: list, attrs: dict, outs: list) -> None:
    lw.matmul(name, src, ins[0], ins[1], outs[0])


def _gemm(lw: Lowering, name: str, src: str, ins: list, attrs: dict, outs: list) -> None:
    a = ins[0].view(ins[0].shape[::-1]) if attrs.get("transA") else ins[0]
    bias = ins[2] if len(ins) > 2 else None
    lw.matmul(name, src, a, ins[1], outs[0], bias=bias, transpose_b=bool(attrs.get("transB")))


def _conv(lw: Lowering, name: str, src: str, ins: list, attrs: dict, outs: list) -> None:
    lw.conv(name, src, ins[0], ins[1], ins[2] if len(ins) > 2 else None, outs[0])


def _gather(lw: Lowering, name: str, src: str, ins: list, attrs: dict, outs: list) -> None:
    """Rows of a weight table are an embedding lookup; any other gather only moves data."""
    table, ids = ins[:2]
    if table.constant and attrs.get("axis", 0) == 0:
        lw.embedding(name, src, table, ids, outs[0])
    else:
        lw.elementwise(name, src, [table, ids], outs, 0)


def _attention(lw: Lowering, name: str, src: str, ins: list, attrs: dict, outs: list) -> None:
    """opset 23 Attention: [B, H, S, D] operands, or [B, S, H x D] with the head counts."""
    if any(v is not None for v in ins[4:]):
        lw.skip(f"{src} (with past_key/past_value)")
        return
    q, k, v = ins[:3]
    if len(q.shape) == 3:
        heads = (attrs["q_num_heads"], attrs["kv_num_heads"], attrs["kv_num_heads"])
        q, k, v = (_heads_first(x, h) for x, h in zip((q, k, v), heads, strict=True))
    mask = ins[3] if len(ins) > 3 else None
    lw.attention(name, src, q, k, v, mask, bool(attrs.get("is_causal", 0)), outs[0])


def _heads_first(x: Value, heads: int) -> Value:
    batch, seq, width = x.shape
    return x.view((batch, heads, seq, width // heads))


def _norm(lw: Lowering, name: str, src: str, ins: list, attrs: dict, outs: list) -> None:
    params, flops, kind = onnx_ops.NORMS[src.removeprefix("onnx.")]
    lw.norm(name, src, ins[0], ins[params], outs[0], flops, kind)


def _softmax(lw: Lowering, name: str, src: str, ins: list, attrs: dict, outs: list) -> None:
    lw.softmax(name, src, ins[0], outs[0])


def _pool(lw: Lowering, name: str, src: str, ins: list, attrs: dict, outs: list) -> None:
    lw.pool(name, src, ins[0], outs, math.prod(attrs["kernel_shape"]))


def _cast(lw: Lowering, name: str, src: str, ins: list, attrs: dict, outs: list) -> Any:
    """A dtype change moves bytes; a cast to the same dtype is a view."""
    if ins[0].dtype is outs[0].dtype:
        return [ins[0].view(outs[0].shape)]
    lw.cast(name, src, ins[0], outs[0])
    return None


def _elementwise(flops: float) -> Handler:
    def handler(lw: Lowering, name: str, src: str, ins: list, attrs: dict, outs: list) -> None:
        lw.elementwise(name, src, [v for v in ins if v is not None], outs, flops)

    return handler


def _reduction(flops: float) -> Handler:
    def handler(lw: Lowering, name: str, src: str, ins: list, attrs: dict, outs: list) -> None:
        lw.reduction(name, src, ins[0], outs, flops)

    return handler


HANDLERS: dict[str, Handler] = {
    "MatMul": _matmul,
    "Gemm": _gemm,
    "Conv": _conv,
    "Gather": _gather,
    "Attention": _attention,
    **dict.fromkeys(onnx_ops.NORMS, _norm),
    **dict.fromkeys(["Softmax", "LogSoftmax"], _softmax),
    **dict.fromkeys(onnx_ops.POOLS, _pool),
    **dict.fromkeys(["Cast", "CastLike"], _cast),
    **{op: _elementwise(flops) for op, flops in onnx_ops.ELEMENTWISE.items()},
    **{op: _reduction(flops) for op, flops in onnx_ops.REDUCTIONS.items()},
}
"""Every ONNX op the importer costs; docs/importers.md lists them."""
