"""Primitive ops: the small set of kinds every workload lowers to.

Each kind knows its arithmetic (FLOPs on the matrix unit and on the vector unit) and the
bytes it must move, from its tensors' shapes alone. Nothing here knows about chips: the cost
model (cost/) turns these counts into time on a given chip.

FLOP conventions: a multiply-add is 2 FLOPs; matrix FLOPs are the ones a matrix unit can run,
vector FLOPs the element-wise remainder (norms, softmax, activations) that runs on vector
or SIMD units.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

from xpusim.ir.dtypes import DType
from xpusim.ir.tensor import ROLES, Dim, Role, Tensor, dim_key


class OpKind(StrEnum):
    MATMUL = "matmul"  # [..., M, K] x [..., K, N]; batched when both carry batch dims
    CONV = "conv"  # x [N, Cin, *spatial] * w [Cout, Cin / groups, *kernel] -> [N, Cout, *out]
    ATTENTION = "attention"  # flash-style: scores never leave the chip
    ELEMENTWISE = "elementwise"
    NORM = "norm"
    SOFTMAX = "softmax"
    EMBEDDING = "embedding"  # gather rows of a table
    SCAN = "scan"  # a state-space model's scan: (x, dt, B and C, ..., state) -> (y, state)
    COLLECTIVE = "collective"  # inter-chip communication (used by the partitioner)
    # Training (compiler/autodiff.py, compiler/optimizer.py):
    ATTENTION_GRAD = "attention_grad"  # flash backward: q, k, v, out, lse, d_out -> dq, dk, dv
    SCATTER_ADD = "scatter_add"  # (d_rows, ids[, gradient to add to]) -> table gradient
    TRANSPOSE = "transpose"  # a copy with the last two axes swapped, for matrix units that need it
    OPTIMIZER = "optimizer"  # updates parameters and their optimizer state from gradients


# Vector FLOPs per element for ops whose formula is fixed by the algorithm:
# softmax = max, subtract, exp, sum, divide; attention's online softmax does the same per score.
SOFTMAX_FLOPS_PER_ELEMENT = 5
# FlashAttention-2's backward (Dao 2023, Algorithm 2) per score: recompute P = exp(S - lse)
# (subtract, exp) and form dS = P * (dP - D) (subtract, multiply) = 4; per output element
# D = rowsum(dO * O) is a multiply-add = 2.
ATTENTION_GRAD_FLOPS_PER_SCORE = 4
ATTENTION_GRAD_FLOPS_PER_OUTPUT = 2


@dataclass(frozen=True, slots=True)
class Op:
    kind: OpKind
    name: str
    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]
    attrs: tuple[tuple[str, object], ...] = field(default=())
    # Which repeated block the op belongs to (-1 before the first, num_layers after the
    # last); pipeline partitioning cuts stages by it. Not part of the cost signature.
    layer: int = -1

    def attr(self, key: str, default: object = None) -> object:
        for name, value in self.attrs:  # a few pairs: a scan beats building a dict
            if name == key:
                return value
        return default

    @property
    def compute_dtype(self) -> DType:
        """Format the matrix unit runs in: the op's activations, not its (maybe packed) weights."""
        return DType(self.attr("compute", self.outputs[0].dtype))

    @property
    def signature(self) -> tuple:
        """Identity for memoization: two ops with equal signatures cost the same on any chip."""
        return (
            self.kind,
            tuple((k, dim_key(v)) for k, v in self.attrs),  # MoE ops carry their token count
            tuple(t.signature for t in self.inputs),
            tuple(t.signature for t in self.outputs),
        )

    @property
    def matrix_flops(self) -> float:
        return _MATRIX_FLOPS.get(self.kind, _zero)(self)

    @property
    def vector_flops(self) -> float:
        return _VECTOR_FLOPS.get(self.kind, _per_output_element)(self)

    @property
    def flops(self) -> float:
        return self.matrix_flops + self.vector_flops

    def bytes_by_role(self) -> dict[Role, float | np.ndarray]:
        """Bytes this op reads and writes, split by tensor role (placement decides the level)."""
        counts = dict.fromkeys(ROLES, 0.0)
        for t in self.inputs + self.outputs:  # not in place: a shape axis may widen a sum
            counts[t.role] = counts[t.role] + t.nbytes
        if self.kind is OpKind.EMBEDDING:  # a gather reads only the rows it looks up
            table, ids = self.inputs
            counts[table.role] -= table.nbytes
            counts[table.role] += ids.numel * table.shape[-1] * table.dtype.itemsize
        if self.kind is OpKind.SCATTER_ADD:  # reads and writes back only the rows it adds to
            table, ids = self.outputs[0], self.inputs[1]
            for whole in (table, *self.inputs[2:]):  # and the gradient it adds into, if any
                counts[whole.role] -= whole.nbytes
            counts[table.role] += 2 * ids.numel * table.shape[-1] * table.dtype.itemsize
        return counts

    @property
    def bytes(self) -> float:
        return sum(self.bytes_by_role().values())

    @property
    def weight_tile(self) -> tuple[int, int]:
        """K x N of the weight a matrix unit holds; (0, 0) for ops without one.

        A convolution runs as a matmul over im2col patches: K = Cin / groups x kernel, N = Cout.
        """
        if self.kind is OpKind.MATMUL:
            _, _, k, n = matmul_dims(self)
            return k, n
        if self.kind is OpKind.CONV:
            w = self.inputs[1].shape
            return math.prod(w[1:]), w[0]
        return 0, 0

    def padded_matrix_flops(self, rows: int, cols: int) -> float:
        """Matrix FLOPs after rounding the weight tile (K x N) up to the matrix unit's shape."""
        k, n = self.weight_tile
        if not k:
            return self.matrix_flops
        return self.matrix_flops * (_round_up(k, rows) / k) * (_round_up(n, cols) / n)


def _zero(op: Op) -> float:
    return 0.0


def _real(count: Dim | float) -> float | np.ndarray:
    """A count as a float, or as a float array over a graph's shape axis."""
    return count.astype(float) if isinstance(count, np.ndarray) else float(count)


def _per_output_element(op: Op) -> float | np.ndarray:
    return _real(op.outputs[0].numel * op.attr("flops_per_element", 1))


def matmul_dims(op: Op) -> tuple[Dim, Dim, int, int]:
    """(batch, M, K, N) of op(A) [..., M, K] x op(B) [..., K, N].

    Attrs `transpose_a` / `transpose_b` say an operand is stored with its last two axes
    swapped and read as its transpose, as BLAS's op(A) flag does: backpropagation's
    dX = dY W^T and dW = X^T dY read stored tensors that way, at no cost on a matrix unit
    that reads either layout (compiler/transpose.py materializes them where it cannot).
    """
    a, b = op.inputs[:2]
    *batch, m, k = a.shape
    if op.attr("transpose_a"):
        m, k = k, m
    kb, n = b.shape[-2:]
    if op.attr("transpose_b"):
        kb, n = n, kb
    if kb != k:
        raise ValueError(f"{op.name}: inner dims differ: {a.shape} x {b.shape}")
    return math.prod(batch), m, k, n


def _matmul_flops(op: Op) -> float:
    batch, m, k, n = matmul_dims(op)
    return 2.0 * batch * m * n * k


# Vector work to widen one stored weight to the compute format, counted from the formula:
# int8 (symmetric, per channel): convert, multiply by the scale = 2;
# int4 (grouped, with zero point): shift and mask to unpack, convert, subtract the zero
# point, multiply by the scale = 5; MXFP4 and NVFP4 (block-scaled E2M1): shift and mask to
# unpack, convert, multiply by the block's scale = 4. Formats as wide as the compute format
# need none.
DEQUANT_FLOPS_PER_WEIGHT = {DType.INT8: 2, DType.FP8: 2, DType.INT4: 5, DType.MXFP4: 4,
                            DType.NVFP4: 4}  # fmt: skip


def _dequant_flops(op: Op) -> float:
    """Weight-only quantization: every stored weight is widened once per call.

    Once per call, not per row: a decode step (M = 1) pays it for every weight, a long
    prefill amortizes it over many rows, which is why int4 helps decode less than 4x.
    """
    weight = op.inputs[1]
    if weight.dtype.element.bits >= op.compute_dtype.bits:
        return 0.0
    return _real(weight.numel * DEQUANT_FLOPS_PER_WEIGHT.get(weight.dtype.element, 2))


def _conv_flops(op: Op) -> float:
    """2 x N x Cout x out positions x Cin / groups x kernel positions; the bias add is free."""
    out, w = op.outputs[0], op.inputs[1]
    return 2.0 * out.numel * math.prod(w.shape[1:])


def _conv_epilogue_flops(op: Op) -> float | np.ndarray:
    """Vector work fused into a convolution's epilogue (compiler/fusion.py): a ReLU, a
    residual sum; none for a bare convolution."""
    return _real(op.outputs[0].numel * op.attr("epilogue_flops_per_element", 0))


def attention_pairs(
    q_len: Dim, kv_len: Dim, causal: bool, window: int | None = None
) -> float | np.ndarray:
    """Query-key pairs scored per (sequence, head).

    Causal queries are the last `q_len` positions of `kv_len`: query i sees
    kv_len - q_len + 1 + i keys. This covers prefill (q_len == kv_len: s(s+1)/2) and decode
    against a cache (q_len == 1: kv_len) with one formula. With a sliding `window` a query
    sees at most that many keys (the last ones), so the first n queries see a, a + 1, ...
    keys (a = kv_len - q_len + 1) and the rest see `window`. A windowed op's key tensors
    hold only the keys some query sees, min(kv_len, q_len + window - 1) of them, and given
    that length in place of kv_len the sum is the same (past the window every query sees
    exactly `window` keys).
    """
    if not causal:
        return _real(q_len * kv_len)
    if window is None:
        return q_len * (kv_len - q_len + 1) + q_len * (q_len - 1) / 2
    first = kv_len - q_len + 1
    growing = np.clip(window - first + 1, 0, q_len)  # queries whose keys still fit the window
    return growing * first + growing * (growing - 1) / 2 + (q_len - growing) * window


def windowed(kv_len: Dim, q_len: Dim, window: int) -> Dim:
    """The keys some query of a windowed attention sees: what its cache tensors hold. An int
    for int lengths (a Dim is an int or an array, never a NumPy scalar: one would reach
    `inspect --json` as an int64 no JSON encoder takes)."""
    if type(kv_len) is int and type(q_len) is int:
        return min(kv_len, q_len + window - 1)
    return np.minimum(kv_len, q_len + window - 1)


def _attention_dims(op: Op) -> tuple[Dim, int, int, Dim, Dim]:
    q, k = op.inputs[:2]
    batch, q_len, heads, head_dim = q.shape
    return batch, heads, head_dim, q_len, k.shape[1]


def _attention_matrix_flops(op: Op) -> float:
    """QK^T over the key width and PV over the value width (`v_dim`: latent attention's
    differ), 2 FLOPs per MAC each."""
    batch, heads, head_dim, q_len, kv_len = _attention_dims(op)
    pairs = _pairs(op, q_len, kv_len)
    v_dim = op.attr("v_dim", head_dim)
    return 2.0 * batch * heads * (head_dim + v_dim) * pairs


def _pairs(op: Op, q_len: Dim, kv_len: Dim) -> float | np.ndarray:
    return attention_pairs(q_len, kv_len, bool(op.attr("causal", True)), op.attr("window"))


def _attention_vector_flops(op: Op) -> float:
    batch, heads, _, q_len, kv_len = _attention_dims(op)
    pairs = _pairs(op, q_len, kv_len)
    return SOFTMAX_FLOPS_PER_ELEMENT * batch * heads * pairs


def _attention_grad_matrix_flops(op: Op) -> float:
    """FlashAttention-2's backward runs five matmuls per score where the forward runs two
    (recompute S = QK^T, dV = P^T dO, dP = dO V^T, dQ = dS K, dK = dS^T Q): 2.5x forward."""
    return 2.5 * _attention_matrix_flops(op)


def _attention_grad_vector_flops(op: Op) -> float:
    batch, heads, _, q_len, kv_len = _attention_dims(op)
    pairs = _pairs(op, q_len, kv_len)
    per_output = ATTENTION_GRAD_FLOPS_PER_OUTPUT * op.inputs[0].numel
    return ATTENTION_GRAD_FLOPS_PER_SCORE * batch * heads * pairs + per_output


def _scatter_add_vector_flops(op: Op) -> float:
    """One add per element of every row added into the table."""
    d_rows, ids = op.inputs[:2]
    return _real(ids.numel * d_rows.shape[-1])


def _embedding_vector_flops(op: Op) -> float:
    """Pooling work of an embedding bag: `flops_per_row_element` per element of every gathered
    row (accumulate; dequantize too for int8 rows). A plain gather (no attr) computes nothing."""
    ids = op.inputs[1]
    return _real(ids.numel * op.outputs[0].shape[-1] * op.attr("flops_per_row_element", 0))


def _round_up(x: int, multiple: int) -> int:
    return -(-x // multiple) * multiple


# A state-space scan, per token (Mamba: Gu and Dao 2023, Algorithm 2; Mamba-2: Dao and Gu
# 2024, section 6). Mamba's selective scan runs on the vector units in prefill and decode
# alike: per channel and state, discretize (exp(dt A): 2), dt B x (2), h = dA h + dBx (2),
# y += C h (2). Mamba-2's SSD splits a prompt into chunks of Q tokens and runs as matmuls:
# per head and token, C B^T within its chunk (2 Q N) and its masked product with x (2 Q P),
# the chunk's state B^T x (2 N P) and the output from the carried state C h (2 N P), Q the
# chunk or the prompt if shorter; its decode step updates the state (dt B x, dA h + .: 3 per
# state element) and reads it out (2). Both take the softplus of dt, D x and the decay's exp
# per channel.
SCAN_FLOPS_PER_STATE = 8
SSD_DECODE_FLOPS_PER_STATE = 5
SCAN_FLOPS_PER_CHANNEL = 6


def _scan_dims(op: Op) -> tuple[Dim, Dim, int, int, int, int]:
    """(batch, tokens, channels, states, heads, chunk) of a scan; chunk 0: Mamba's scan."""
    x, state = op.inputs[0], op.inputs[-1]
    batch, tokens, channels = x.shape
    heads = op.attr("heads", channels)
    return batch, tokens, channels, state.shape[-1], heads, op.attr("chunk", 0)


def _scan_matrix_flops(op: Op) -> float | np.ndarray:
    batch, tokens, channels, states, heads, chunk = _scan_dims(op)
    if not chunk:
        return 0.0
    head_dim = channels // heads
    q = np.minimum(chunk, tokens)
    per_head = 2 * q * (states + head_dim) + 4 * states * head_dim
    return _count(np.where(np.asarray(tokens) > 1, batch * tokens * heads * per_head, 0))


def _scan_vector_flops(op: Op) -> float | np.ndarray:
    batch, tokens, channels, states, _, chunk = _scan_dims(op)
    per_channel = SCAN_FLOPS_PER_CHANNEL
    if not chunk:
        return _real(batch * tokens * channels * (states * SCAN_FLOPS_PER_STATE + per_channel))
    per_state = np.where(np.asarray(tokens) == 1, SSD_DECODE_FLOPS_PER_STATE, 0)
    return _count(batch * tokens * channels * (states * per_state + per_channel))


def _count(values: np.ndarray) -> float | np.ndarray:
    """_real of what numpy made an array of even for one shape (np.where)."""
    return float(values) if np.ndim(values) == 0 else values.astype(float)


_MATRIX_FLOPS: dict[OpKind, Callable[[Op], float]] = {
    OpKind.MATMUL: _matmul_flops,
    OpKind.CONV: _conv_flops,
    OpKind.ATTENTION: _attention_matrix_flops,
    OpKind.ATTENTION_GRAD: _attention_grad_matrix_flops,
    OpKind.SCAN: _scan_matrix_flops,
}
_VECTOR_FLOPS: dict[OpKind, Callable[[Op], float]] = {
    OpKind.MATMUL: _dequant_flops,
    OpKind.CONV: _conv_epilogue_flops,
    OpKind.ATTENTION: _attention_vector_flops,
    OpKind.SCAN: _scan_vector_flops,
    OpKind.EMBEDDING: _embedding_vector_flops,
    OpKind.COLLECTIVE: _zero,
    OpKind.ATTENTION_GRAD: _attention_grad_vector_flops,
    OpKind.SCATTER_ADD: _scatter_add_vector_flops,
    OpKind.TRANSPOSE: _zero,
}
