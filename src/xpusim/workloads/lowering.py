"""Building IR from a framework's graph: what the torch.export and ONNX importers share.

A framework tensor is a `Value`: the buffer it lives in (an IR tensor) and the shape read
through it. Views (reshape, transpose, slice, expand) make new Values on the same buffer, so
they cost nothing, and an op reading a view reads the slice it sees; a broadcast (expand)
reads the stored data once, as a kernel does.

Values in a weight's buffer are constants. An op whose tensor inputs are all constants is
folded into a new constant, as exporters and inference compilers fold mask and rotary-table
arithmetic and weight transposes; so only ops on activations reach the IR, and the folded
result counts as a weight. Ops an importer does not know are counted by name and reported
together by `finish`, never dropped.
"""

from __future__ import annotations

import importlib
import math
from collections import Counter
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from xpusim.errors import UserError
from xpusim.ir.dtypes import DType
from xpusim.ir.graph import Graph
from xpusim.ir.op import SOFTMAX_FLOPS_PER_ELEMENT, Op, OpKind
from xpusim.ir.tensor import Role, Tensor
from xpusim.workloads.transformer_config import expected_active_experts

# Vector FLOPs per element of compound functions, counted like the transformer builder's.
SIGMOID_FLOPS = 3  # exp(-x), add 1, reciprocal
BATCHNORM_FLOPS = 4  # inference: subtract mean, scale by rsqrt(var), weight, bias


@dataclass(frozen=True)
class Value:
    """A framework tensor: the buffer it lives in and the shape read through it."""

    storage: Tensor
    shape: tuple[int, ...]

    @property
    def constant(self) -> bool:
        return self.storage.role is Role.WEIGHT

    @property
    def dtype(self) -> DType:
        return self.storage.dtype

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def view(self, shape: tuple[int, ...]) -> Value:
        return Value(self.storage, tuple(shape))

    def tensor(self) -> Tensor:
        """What an op reads: the view's elements, or the stored data under a broadcast."""
        if self.shape == self.storage.shape or self.numel > self.storage.numel:
            return self.storage
        return self.as_shape(self.shape)

    def as_shape(self, shape: tuple[int, ...]) -> Tensor:
        """The buffer read in a layout an op's formula expects (same name, so same buffer)."""
        return Tensor(self.storage.name, tuple(shape), self.storage.dtype, self.storage.role)


class Lowering:
    """Accumulates the IR graph of one import and the ops it could not lower."""

    def __init__(self, name: str):
        self.graph = Graph(name)
        self.unsupported: Counter[str] = Counter()

    def tensor(self, name: str, shape: tuple[int, ...], dtype: DType, role: Role) -> Value:
        shape = tuple(int(d) for d in shape)
        return Value(Tensor(name, shape, dtype, role), shape)

    def skip(self, op_name: str) -> None:
        self.unsupported[op_name] += 1

    def emit(
        self, kind: OpKind, name: str, source: str, ins: list[Tensor], outs: list[Value], **attrs
    ) -> None:
        attrs["source"] = source
        outputs = tuple(v.storage for v in outs)
        self.graph.add(Op(kind, name, tuple(ins), outputs, tuple(sorted(attrs.items()))))

    def vector(
        self, kind: OpKind, name: str, source: str, ins: list[Value], outs: list[Value],
        flops: float,
    ) -> None:  # fmt: skip
        """An op on the vector unit doing `flops` in all (the IR stores it per output element)."""
        per_element = flops / max(outs[0].numel, 1)
        self.emit(kind, name, source, [v.tensor() for v in ins], outs,
                  flops_per_element=per_element)  # fmt: skip

    def elementwise(
        self, name: str, source: str, ins: list[Value], outs: list[Value], per_element: float
    ) -> None:
        self.vector(OpKind.ELEMENTWISE, name, source, ins, outs, per_element * outs[0].numel)

    def cast(self, name: str, source: str, x: Value, out: Value) -> None:
        """A dtype conversion: bytes, no arithmetic; compiler/precision.py drops it when a
        recast makes both sides one format."""
        self.emit(OpKind.ELEMENTWISE, name, source, [x.tensor()], [out],
                  flops_per_element=0, cast=True)  # fmt: skip

    def reduction(
        self, name: str, source: str, x: Value, outs: list[Value], per_input: float
    ) -> None:
        """Reductions and global pools: the work scales with the elements read, not written."""
        self.vector(OpKind.ELEMENTWISE, name, source, [x], outs, per_input * x.numel)

    def pool(self, name: str, source: str, x: Value, outs: list[Value], window: int) -> None:
        """Windowed pooling: one comparison or add per window element per output."""
        self.vector(OpKind.ELEMENTWISE, name, source, [x], outs, window * outs[0].numel)

    def norm(
        self, name: str, source: str, x: Value, params: list[Value | None], out: Value,
        per_element: float, norm: str,
    ) -> None:  # fmt: skip
        ins = [x.tensor(), *(p.tensor() for p in params if p is not None)]
        self.emit(OpKind.NORM, name, source, ins, [out], flops_per_element=per_element, norm=norm)

    def softmax(self, name: str, source: str, x: Value, out: Value) -> None:
        flops = SOFTMAX_FLOPS_PER_ELEMENT * out.numel
        self.vector(OpKind.SOFTMAX, name, source, [x], [out], flops)

    def matmul(
        self, name: str, source: str, a: Value, b: Value, out: Value,
        bias: Value | None = None, transpose_b: bool = False,
    ) -> None:  # fmt: skip
        """[..., M, K] x [..., K, N] with numpy's rules; b stored [N, K] (nn.Linear) if transposed.

        The IR's formula takes the batch from the first operand, so it is given the broadcast
        batch of both (reading a broadcast operand is then counted once per batch item).
        """
        b_shape = (*b.shape[:-2], b.shape[-1], b.shape[-2]) if transpose_b else b.shape
        a_shape = (1, *a.shape) if len(a.shape) == 1 else a.shape
        b_shape = (*b_shape, 1) if len(b_shape) == 1 else b_shape
        batch = np.broadcast_shapes(a_shape[:-2], b_shape[:-2])
        ins = [a.as_shape((*batch, *a_shape[-2:])), b.as_shape(b_shape)]
        if bias is not None:
            ins.append(bias.tensor())
        self.emit(OpKind.MATMUL, name, source, ins, [out], compute=out.dtype.value)

    def grouped_matmul(self, name: str, source: str, x: Value, w: Value, out: Value) -> None:
        """An MoE layer's expert matmul: rows [S, K] sorted by expert, each multiplied by its
        expert's [K, N] of w [E, K, N]. Costed as the transformer builder costs its experts:
        the weights of the experts the rows are expected to touch (uniform routing: each row
        misses an expert with probability 1 - 1/E), the rows spread evenly over them."""
        rows, k = x.shape
        experts, n = w.shape[0], w.shape[-1]
        used = expected_active_experts(rows, experts, 1)
        self.graph.held[w.storage.name] = w.storage  # every expert stays in memory
        ins = [x.as_shape((used, -(-rows // used), k)), w.as_shape((used, k, n))]
        self.emit(OpKind.MATMUL, name, source, ins, [out], compute=out.dtype.value)

    def conv(
        self, name: str, source: str, x: Value, w: Value, bias: Value | None, out: Value
    ) -> None:
        ins = [x.tensor(), w.tensor(), *([bias.tensor()] if bias is not None else [])]
        self.emit(OpKind.CONV, name, source, ins, [out], compute=out.dtype.value)

    def embedding(self, name: str, source: str, table: Value, ids: Value, out: Value) -> None:
        self.emit(OpKind.EMBEDDING, name, source, [table.tensor(), ids.tensor()], [out])

    def attention(
        self, name: str, source: str, q: Value, k: Value, v: Value, mask: Value | None,
        causal: bool, out: Value,
    ) -> None:  # fmt: skip
        """Scaled dot-product attention on [..., heads, seq, dim] operands, flash-style.

        K and V are read as stored: a GQA model's heads broadcast to the query heads (a
        repeat_kv expand) are read once per KV head, as a fused kernel reads them.
        """
        *batch_dims, heads, q_len, dim = q.shape
        batch, kv_len = math.prod(batch_dims), k.shape[-2]

        def stored(x: Value) -> Tensor:
            per_head = batch * kv_len * x.shape[-1]
            kv_heads = min(x.shape[-3], max(x.storage.numel // per_head, 1))
            return x.as_shape((batch, kv_len, kv_heads, x.shape[-1]))

        ins = [q.as_shape((batch, q_len, heads, dim)), stored(k), stored(v)]
        if mask is not None:
            ins.append(mask.tensor())
        self.emit(OpKind.ATTENTION, name, source, ins, [out], causal=causal,
                  compute=out.dtype.value)  # fmt: skip

    def finish(self) -> Graph:
        """The graph, or one error naming every op that could not be lowered, with counts."""
        if self.unsupported:
            listed = ", ".join(f"{op} x{n}" for op, n in self.unsupported.most_common())
            count = self.unsupported.total()
            raise UserError(
                f"{self.graph.name}: {count} op{'s' * (count > 1)} xpusim cannot cost yet: "
                f"{listed} (supported ops: docs/importers.md)"
            )
        return self.graph


def reason(e: Exception) -> str:
    """A framework's exception as one line: its type and the first line of its message."""
    text = next((line.strip() for line in str(e).splitlines() if line.strip()), "")
    return f"{type(e).__name__}: {text[:300]}"


def require(module: str, extra: str) -> ModuleType:
    """An importer's optional dependency, or a UserError naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise UserError(f"this needs {module}: pip install 'xpusim[{extra}]'") from None
