"""PyTorch front end: torch.export on meta or fake tensors, lowered op by op to the IR.

    with torch.device("meta"):
        module = LlamaForCausalLM(config)          # no weights are allocated
    model = xpusim.from_torch(module, (torch.zeros(1, 128, dtype=torch.long, device="meta"),))

torch.export traces forward at the example inputs' shapes without computing on data, so a
70B model built on the meta device is traced in seconds. Its graph is ATen before
decomposition (aten.linear, aten.conv2d, aten.scaled_dot_product_attention, ...), high-level
enough that each op maps to one IR op. torch is imported inside the functions: `xpusim
--help` and every zoo simulation run without it.
"""

from __future__ import annotations

import logging
import math
import operator
import os
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from xpusim.errors import UserError
from xpusim.files import regular_file
from xpusim.ir.dtypes import DType
from xpusim.ir.op import OpKind
from xpusim.ir.tensor import Role
from xpusim.workloads import torch_ops
from xpusim.workloads.imported import ImportedModel
from xpusim.workloads.lowering import Lowering, Value, reason, require

_DTYPES = {
    "torch.float32": DType.FP32, "torch.float16": DType.FP16, "torch.bfloat16": DType.BF16,
    "torch.float8_e4m3fn": DType.FP8, "torch.float8_e5m2": DType.FP8, "torch.int8": DType.INT8,
    "torch.uint8": DType.INT8, "torch.int32": DType.INT32, "torch.int64": DType.INT64,
    "torch.bool": DType.BOOL,
}  # fmt: skip


def from_torch(
    module: Any,
    example_inputs: tuple | list,
    example_kwargs: dict[str, Any] | None = None,
    *,
    name: str | None = None,
) -> ImportedModel:
    """Traces `module(*example_inputs, **example_kwargs)` with torch.export and lowers it.

    A Hugging Face model built as anyone builds it returns its KV cache (use_cache=True), a
    DynamicCache that torch.export cannot return; the cost of one forward pass does not
    depend on handing the cache back, so such a model is traced with use_cache=False unless
    the caller says otherwise."""
    import torch

    name = name or type(module).__name__
    example_kwargs = dict(example_kwargs or {})
    if getattr(getattr(module, "config", None), "use_cache", False):
        example_kwargs.setdefault("use_cache", False)
    from xpusim.workloads import torch_kernels

    try:
        with torch_kernels.substituted():
            program = torch.export.export(module, tuple(example_inputs), kwargs=example_kwargs)
    except Exception as e:  # torch.export fails in many types; each is a limit of the model
        raise UserError(f"torch.export could not trace {name}: {reason(e)}") from None
    return lower_program(program, name)


def load_exported(path: Path) -> ImportedModel:
    """A program saved by torch.export.save (a .pt2 file). torch.export.load reads every
    weight in it into memory, so an archive larger than this machine's memory is refused
    before it is opened."""
    memory_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    regular_file(path, "torch.export", memory_bytes)
    torch = require("torch", "torch")

    if not zipfile.is_zipfile(path):  # before torch, which logs a traceback of its own
        raise UserError(f"{path}: not a torch.export program (not a zip archive)")
    from xpusim.workloads import torch_kernels

    torch_kernels.register()  # a program traced by from_torch may hold its ops
    quiet = logging.getLogger("torch.export")
    level, quiet.level = quiet.level, logging.CRITICAL  # its warnings would repeat the error
    try:
        program = torch.export.load(path)
    except Exception as e:  # a missing, truncated or foreign file: all the user's to fix
        raise UserError(f"{path}: not a torch.export program: {reason(e)}") from None
    finally:
        quiet.setLevel(level)
    return lower_program(program, path.stem)


def lower_program(program: Any, name: str) -> ImportedModel:
    """IR ops for an ExportedProgram: parameters and buffers are weights, inputs activations."""
    lw = Lowering(name)
    targets = {s.arg.name: s.target for s in program.graph_signature.input_specs}
    user = set(program.graph_signature.user_inputs)
    values: dict[str, Any] = {}
    inputs: dict[str, tuple[int, ...]] = {}
    for node in program.graph.nodes:
        val = node.meta.get("val")
        if node.op == "placeholder" and _is_tensor(val):
            role = Role.ACTIVATION if node.name in user else Role.WEIGHT
            tensor_name = node.name if node.name in user else targets[node.name]
            values[node.name] = lw.tensor(tensor_name, _shape(val), _dtype(val), role)
            if role is Role.ACTIVATION:
                inputs[node.name] = values[node.name].shape
        elif node.op != "placeholder":
            _lower_node(lw, node, values, program.graph_module, "")
    return ImportedModel(name, lw.finish(), "torch.export", inputs)


def _lower_node(lw: Lowering, node: Any, values: dict[str, Any], root: Any, prefix: str) -> None:
    """Records what a node produces; `prefix` keeps an inlined subgraph's names apart."""
    if node.op == "get_attr":  # a subgraph, read by the higher-order op that calls it
        values[node.name] = None
    elif node.op == "call_function":
        values[node.name] = _call(lw, node, values, root, prefix)


def _call(lw: Lowering, node: Any, values: dict[str, Any], root: Any, prefix: str) -> Any:
    """The Value(s) a node produces, emitting its IR op unless it is a view or a constant."""
    from torch.fx.node import map_arg

    val = node.meta.get("val")
    op = _op_name(node.target)
    if node.target is operator.getitem:
        got = values[node.args[0].name]
        return got[node.args[1]] if isinstance(got, list) else None
    if op in torch_ops.INLINED:
        return _inline(lw, node, values, root, prefix)
    if not _has_tensor(val):  # asserts, symbolic sizes, scalars
        return None
    args, kwargs = map_arg((node.args, node.kwargs), lambda n: values[n.name])
    ins = [v for v in _leaves((args, kwargs)) if isinstance(v, Value)]
    if op in torch_ops.VIEWS and ins:
        return _map(val, lambda v, _: ins[0].view(_shape(v)))
    constant = op in torch_ops.CREATION or all(v.constant for v in ins)
    role = Role.WEIGHT if constant else Role.ACTIVATION
    name = prefix + node.name
    out = _map(val, lambda v, i: _new(lw, name if i == 0 else f"{name}.{i}", v, role))
    if constant:
        return out
    handler = HANDLERS.get(op)
    if handler is None:
        lw.skip(op if "." in op else f"aten.{op}")
        return out
    return handler(lw, _label(node), f"aten.{op}", args, kwargs, out) or out


def _inline(lw: Lowering, node: Any, values: dict[str, Any], root: Any, prefix: str) -> list:
    """Lowers the subgraph a context manager's higher-order op calls, in place."""
    from torch.fx import Node

    at = next(i for i, a in enumerate(node.args) if isinstance(a, Node) and a.op == "get_attr")
    sub = getattr(root, node.args[at].target)
    operands = iter([values[a.name] if isinstance(a, Node) else a for a in node.args[at + 1 :]])
    inner: dict[str, Any] = {}
    for inner_node in sub.graph.nodes:
        if inner_node.op == "placeholder":
            inner[inner_node.name] = next(operands)
        elif inner_node.op == "output":
            return [inner[n.name] if isinstance(n, Node) else None for n in inner_node.args[0]]
        else:
            _lower_node(lw, inner_node, inner, sub, f"{prefix}{node.name}/")
    return []


def _new(lw: Lowering, name: str, val: Any, role: Role) -> Value:
    return lw.tensor(name, _shape(val), _dtype(val), role)


def _map(val: Any, fn: Callable[[Any, int], Value]) -> Any:
    """fn(tensor, index) over a node's one tensor or each of its tensors."""
    if isinstance(val, list | tuple):
        return [fn(v, i) if _is_tensor(v) else None for i, v in enumerate(val)]
    return fn(val, 0)


def _leaves(tree: Any) -> list[Any]:
    if isinstance(tree, list | tuple):
        return [leaf for item in tree for leaf in _leaves(item)]
    if isinstance(tree, dict):
        return _leaves(list(tree.values()))
    return [tree]


def _op_name(target: Any) -> str:
    """`linear` for aten.linear.default, in-place `relu_` as `relu`; other namespaces kept
    (`higher_order.cond`)."""
    packet = getattr(target, "overloadpacket", None)
    if packet is None:
        return f"{target.namespace}.{target}" if hasattr(target, "namespace") else str(target)
    name = packet.__name__
    if name.endswith("_") and not name.startswith("__"):
        name = name[:-1]
    return name if target.namespace == "aten" else f"{target.namespace}.{name}"


def _label(node: Any) -> str:
    """The op's name in reports: the module path it ran in, then the node."""
    stack = node.meta.get("nn_module_stack")
    scope = next(reversed(stack.values()))[0] if stack else ""
    return f"{scope}/{node.name}" if scope else node.name


def _is_tensor(val: Any) -> bool:
    return hasattr(val, "shape") and hasattr(val, "dtype")


def _has_tensor(val: Any) -> bool:
    return _is_tensor(val) or (isinstance(val, list | tuple) and any(map(_is_tensor, val)))


def _shape(val: Any) -> tuple[int, ...]:
    if not all(isinstance(d, int) for d in val.shape):
        raise UserError(
            f"shape {tuple(val.shape)} has dynamic dimensions; export with static shapes"
        )
    return tuple(val.shape)


def _dtype(val: Any) -> DType:
    try:
        return _DTYPES[str(val.dtype)]
    except KeyError:
        known = ", ".join(sorted(k.removeprefix("torch.") for k in _DTYPES))
        raise UserError(f"tensor dtype {val.dtype} is not modelled (known: {known})") from None


def _arg(args: tuple, kwargs: dict, index: int, key: str, default: Any = None) -> Any:
    return args[index] if len(args) > index else kwargs.get(key, default)


def _one(out: Any) -> Value:
    return out[0] if isinstance(out, list) else out


def _all(out: Any) -> list[Value]:
    return [v for v in out if v is not None] if isinstance(out, list) else [out]


# Handlers: (lowering, op name, source, args, kwargs, outputs) -> a replacement for the
# outputs, or None to keep them.
Handler = Callable[[Lowering, str, str, tuple, dict, Any], Any]


def _linear(lw: Lowering, name: str, src: str, a: tuple, kw: dict, out: Any) -> None:
    bias = _arg(a, kw, 2, "bias")
    lw.matmul(name, src, a[0], a[1], _one(out), bias=bias, transpose_b=True)


def _matmul(lw: Lowering, name: str, src: str, a: tuple, kw: dict, out: Any) -> None:
    lw.matmul(name, src, a[0], a[1], _one(out))


def _addmm(lw: Lowering, name: str, src: str, a: tuple, kw: dict, out: Any) -> None:
    lw.matmul(name, src, a[1], a[2], _one(out), bias=a[0])


def _conv(lw: Lowering, name: str, src: str, a: tuple, kw: dict, out: Any) -> None:
    if src.endswith("convolution") and _arg(a, kw, 6, "transposed"):
        lw.skip(f"{src} (transposed)")
        return
    lw.conv(name, src, a[0], a[1], _arg(a, kw, 2, "bias"), _one(out))


def _embedding(lw: Lowering, name: str, src: str, a: tuple, kw: dict, out: Any) -> None:
    lw.embedding(name, src, a[0], a[1], _one(out))


def _norm(params: slice, flops: float, kind: str) -> Handler:
    def handler(lw: Lowering, name: str, src: str, a: tuple, kw: dict, out: Any) -> None:
        given = [p for p in a[params] if isinstance(p, Value)]
        lw.norm(name, src, a[0], given, _one(out), flops, kind)

    return handler


def _softmax(lw: Lowering, name: str, src: str, a: tuple, kw: dict, out: Any) -> None:
    lw.softmax(name, src, a[0], _one(out))


def _attention(lw: Lowering, name: str, src: str, a: tuple, kw: dict, out: Any) -> None:
    mask, causal = _arg(a, kw, 3, "attn_mask"), bool(_arg(a, kw, 5, "is_causal", False))
    lw.attention(name, src, a[0], a[1], a[2], mask, causal, _one(out))


def _pool(lw: Lowering, name: str, src: str, a: tuple, kw: dict, out: Any) -> None:
    kernel = _arg(a, kw, 1, "kernel_size")
    window = 1
    for k in kernel if isinstance(kernel, list | tuple) else [kernel]:
        window *= k
    lw.pool(name, src, a[0], _all(out), window)


def _grouped_mm(lw: Lowering, name: str, src: str, a: tuple, kw: dict, out: Any) -> None:
    """transformers' MoE experts (grouped_mm, or its fallback loop as one custom op)."""
    lw.grouped_matmul(name, src, a[0], a[1], _one(out))


def _selective_scan(lw: Lowering, name: str, src: str, a: tuple, kw: dict, out: Any) -> None:
    """Mamba's scan as one fused kernel (torch_kernels.py): x, dt and z are (batch, channels,
    tokens), A (channels, states); the scan op reads x as (batch, tokens, channels), A last
    for its state size (ir/op.py's SCAN rule)."""
    x, dt, a_log, b, c, d, z, bias = a[:8]
    batch, channels, tokens = x.shape
    ins = [x.as_shape((batch, tokens, channels)), dt.tensor(), b.tensor(), c.tensor()]
    ins += [v.tensor() for v in (z, d, bias) if isinstance(v, Value)]
    lw.emit(OpKind.SCAN, name, src, [*ins, a_log.tensor()], [_one(out)], heads=channels, chunk=0)


def _sort(lw: Lowering, name: str, src: str, a: tuple, kw: dict, out: Any) -> None:
    """A sort along a dimension: log2(n) comparisons per element (a merge or radix pass
    each), as a reduction over what it reads."""
    x, dim = a[0], _arg(a, kw, 1, "dim", -1)
    n = x.shape[dim] if x.shape else 1
    lw.reduction(name, src, x, _all(out), max(math.log2(max(n, 1)), 1.0))


def _cast(lw: Lowering, name: str, src: str, a: tuple, kw: dict, out: Any) -> Value | None:
    """A dtype change moves bytes; a cast to the same dtype (or a device move) is a view."""
    x, y = a[0], _one(out)
    if x.dtype is y.dtype:
        return x.view(y.shape)
    lw.cast(name, src, x, y)
    return None


def _elementwise(flops: float) -> Handler:
    def handler(lw: Lowering, name: str, src: str, a: tuple, kw: dict, out: Any) -> None:
        ins = [v for v in _leaves((a, kw)) if isinstance(v, Value)]
        lw.elementwise(name, src, ins, _all(out), flops)

    return handler


def _reduction(flops: float) -> Handler:
    def handler(lw: Lowering, name: str, src: str, a: tuple, kw: dict, out: Any) -> None:
        lw.reduction(name, src, a[0], _all(out), flops)

    return handler


HANDLERS: dict[str, Handler] = {
    "linear": _linear,
    **dict.fromkeys(["mm", "bmm", "matmul"], _matmul),
    **dict.fromkeys(["addmm", "baddbmm"], _addmm),
    **dict.fromkeys(["conv1d", "conv2d", "conv3d", "convolution", "_convolution"], _conv),
    **dict.fromkeys(["embedding", "embedding_bag", "_embedding_bag"], _embedding),
    **dict.fromkeys(["layer_norm", "native_layer_norm"], _norm(slice(2, 4), *torch_ops.LAYER)),
    "rms_norm": _norm(slice(2, 3), *torch_ops.RMS),
    "batch_norm": _norm(slice(1, 5), *torch_ops.BATCH),
    "_native_batch_norm_legit_no_training": _norm(slice(1, 5), *torch_ops.BATCH),
    "group_norm": _norm(slice(2, 4), *torch_ops.GROUP),
    **dict.fromkeys(["softmax", "_softmax", "log_softmax", "_log_softmax"], _softmax),
    "scaled_dot_product_attention": _attention,
    **dict.fromkeys(torch_ops.POOLS, _pool),
    **dict.fromkeys(["to", "_to_copy", "type_as"], _cast),
    **dict.fromkeys(["_grouped_mm", "grouped_mm", "transformers.grouped_mm_fallback"],
                    _grouped_mm),
    **dict.fromkeys(["sort", "argsort"], _sort),
    "xpusim.selective_scan": _selective_scan,
    **{op: _elementwise(flops) for op, flops in torch_ops.ELEMENTWISE.items()},
    **{op: _reduction(flops) for op, flops in torch_ops.REDUCTIONS.items()},
}
"""Every ATen op the importer costs; docs/importers.md lists them."""
