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
    # linear attention with a constant state: (q, k, v, gates, ..., state) -> (out, state)
    LINEAR_ATTENTION = "linear_attention"
    # a sparse attention's indexer: (index q, index key cache, head weights) -> top-k key ids
    SPARSE_INDEX = "sparse_index"
    COLLECTIVE = "collective"  # inter-chip communication (used by the partitioner)
    # Training (compiler/autodiff.py, compiler/optimizer.py):
    ATTENTION_GRAD = "attention_grad"  # flash backward: q, k, v, out, lse, d_out -> dq, dk, dv
    SCATTER_ADD = "scatter_add"  # (d_rows, ids[, gradient to add to]) -> table gradient
    TRANSPOSE = "transpose"  # a copy with the last two axes swapped, for matrix units that need it
    OPTIMIZER = "optimizer"  # updates parameters and their optimizer state from gradients


# An op's `stream` attribute: the CUDA stream an engine runs it on where it runs an MoE
# layer's paths on two (cost/aux_stream.py); ops without it run in order on one.
MAIN_STREAM, AUX_STREAM = "main", "aux"

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
        return RULES[self.kind].matrix_flops(self)

    @property
    def vector_flops(self) -> float:
        return RULES[self.kind].vector_flops(self)

    @property
    def flops(self) -> float:
        return self.matrix_flops + self.vector_flops

    def bytes_by_role(self) -> dict[Role, float | np.ndarray]:
        """Bytes this op reads and writes, split by tensor role (placement decides the level)."""
        return RULES[self.kind].bytes_by_role(self)

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


def _every_tensor_bytes(op: Op) -> dict[Role, float | np.ndarray]:
    """Every input read once and every output written once: most kinds' traffic."""
    counts = dict.fromkeys(ROLES, 0.0)
    for t in op.inputs + op.outputs:  # not in place: a shape axis may widen a sum
        counts[t.role] = counts[t.role] + t.nbytes
    return counts


def _gather_bytes(op: Op) -> dict[Role, float | np.ndarray]:
    """A gather reads only the rows it looks up."""
    counts = _every_tensor_bytes(op)
    table, ids = op.inputs
    counts[table.role] -= table.nbytes
    counts[table.role] += ids.numel * table.shape[-1] * table.dtype.itemsize
    return counts


def _scatter_add_bytes(op: Op) -> dict[Role, float | np.ndarray]:
    """Reads and writes back only the rows it adds to."""
    counts = _every_tensor_bytes(op)
    table, ids = op.outputs[0], op.inputs[1]
    for whole in (table, *op.inputs[2:]):  # and the gradient it adds into, if any
        counts[whole.role] -= whole.nbytes
    counts[table.role] += 2 * ids.numel * table.shape[-1] * table.dtype.itemsize
    return counts


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


def chunked_pairs(q_len: Dim, kv_len: Dim, chunk: int) -> float | np.ndarray:
    """Causal query-key pairs of chunked local attention (Llama-4's attention_chunk_size):
    the query at position p sees the keys from the start of its chunk, p mod chunk + 1 of
    them. The queries are the last q_len of kv_len positions: the pairs of the first kv_len
    positions less those of the first kv_len - q_len."""

    def first(n: Dim) -> float | np.ndarray:
        whole, rest = n // chunk, n % chunk
        return whole * chunk * (chunk + 1) / 2 + rest * (rest + 1) / 2

    return first(kv_len) - first(kv_len - q_len)


def chunk_keys(kv_len: Dim, q_len: Dim, chunk: int) -> Dim:
    """The keys some query of a chunked attention sees: from the start of the first
    query's chunk to the last key (what its cache tensors hold)."""
    return kv_len - (kv_len - q_len) // chunk * chunk


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
    """A sliding window's pairs, or a sparse attention's: a query attending the `top_k`
    keys its indexer picked of those it sees scores min(seen, top_k) of them, the count
    a window of top_k gives (DeepSeek-V3.2's DSA: Liu et al. 2025, section 2.1)."""
    chunk = op.attr("chunk")
    if chunk:  # its keys start at the first query's chunk: kv_len counts from there
        return chunked_pairs(q_len, q_len + (kv_len - q_len) % chunk, int(chunk))
    ratio = op.attr("compress")
    if ratio:  # DeepSeek-V4's compressed keys, one per `ratio` tokens, their tensors as long
        # as the tokens and 1/ratio as wide: the tokens' pairs over ratio, a top_k of
        # entries a window of top_k x ratio tokens
        top_k = op.attr("top_k")
        return attention_pairs(q_len, kv_len, True, top_k and top_k * ratio) / ratio
    window = op.attr("window", op.attr("top_k"))
    return attention_pairs(q_len, kv_len, bool(op.attr("causal", True)), window)


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
    q = np.minimum(float(chunk), tokens)  # floats: a count past 2^63 stays a number
    per_head = 2 * q * (states + head_dim) + 4 * states * head_dim
    return _count(np.where(np.asarray(tokens) > 1, batch * tokens * heads * per_head, 0))


def _scan_vector_flops(op: Op) -> float | np.ndarray:
    batch, tokens, channels, states, _, chunk = _scan_dims(op)
    per_channel = SCAN_FLOPS_PER_CHANNEL
    if not chunk:
        return _real(batch * tokens * channels * (states * SCAN_FLOPS_PER_STATE + per_channel))
    per_state = np.where(np.asarray(tokens) == 1, float(SSD_DECODE_FLOPS_PER_STATE), 0.0)
    return _count(batch * tokens * channels * (states * per_state + per_channel))


# Linear attention (Gated DeltaNet: Yang, Kautz and Hatamizadeh 2024, arXiv 2412.06464,
# section 3.3; its chunkwise form is DeltaNet's, Yang et al. 2024, arXiv 2406.06484, section
# 3.3, with the decay folded in). A prefill splits the tokens into chunks of C and runs, per
# value head and chunk (d_k x d_v state S): K K^T (2 C^2 d_k), its inverse by forward
# substitution (the WY/UT transform: C^3 / 3 multiply-adds), W = T K and U = T V
# (2 C^2 d_k + 2 C^2 d_v), U - W S (2 C d_k d_v), Q K^T (2 C^2 d_k) and its masked product
# with U (2 C^2 d_v), Q S (2 C d_k d_v) and the state's update K^T U (2 C d_k d_v): per
# token 6 C d_k + 4 C d_v + 6 d_k d_v + 2 C^2 / 3 on the matrix unit. Without the delta
# rule (MiniMax's lightning attention: Qin et al. 2024, arXiv 2401.04658, Algorithm 1)
# there is no K K^T, inverse, W, U or U - W S: per token 2 C d_k + 2 C d_v + 4 d_k d_v. A
# decode step updates the state on the vector units (fla's fused_recurrent kernels): decay
# (1), S^T k and the rank-1 update (2 + 2), read-out q^T S (2) per state element; without
# the delta rule decay, k v^T and the read-out (1 + 2 + 2). Per token and head both take
# the gates (exp of the decay, sigmoid of beta, softplus: GATE_FLOPS) and the L2 norms of
# q and k (3 per element, Gated DeltaNet's use_qk_l2norm_in_kernel).
DELTA_DECODE_FLOPS_PER_STATE = 7
LINEAR_DECODE_FLOPS_PER_STATE = 5
LINEAR_GATE_FLOPS_PER_HEAD = 8
L2NORM_FLOPS = 3


def _linear_attention_dims(op: Op) -> tuple[Dim, Dim, int, int, int, int]:
    """(batch, tokens, heads, d_k, d_v, chunk) from q [batch, tokens, ., d_k] and the
    state [batch, value heads, d_k, d_v], the last input."""
    batch, tokens = op.inputs[0].shape[:2]
    _, heads, d_k, d_v = op.inputs[-1].shape
    return batch, tokens, heads, d_k, d_v, int(op.attr("chunk", 64))


def _linear_attention_matrix_flops(op: Op) -> float | np.ndarray:
    batch, tokens, heads, d_k, d_v, chunk = _linear_attention_dims(op)
    c = np.minimum(float(chunk), tokens)  # floats: a count past 2^63 stays a number
    if op.attr("delta", True):
        per_token = 6 * c * d_k + 4 * c * d_v + 6 * d_k * d_v + 2 * c * c / 3
    else:
        per_token = 2 * c * (d_k + d_v) + 4 * d_k * d_v
    return _count(np.where(np.asarray(tokens) > 1, batch * tokens * heads * per_token, 0))


def _linear_attention_vector_flops(op: Op) -> float | np.ndarray:
    batch, tokens, heads, d_k, d_v, _ = _linear_attention_dims(op)
    per_state = DELTA_DECODE_FLOPS_PER_STATE if op.attr("delta", True) else (
        LINEAR_DECODE_FLOPS_PER_STATE)  # fmt: skip
    recurrent = np.where(np.asarray(tokens) == 1, float(per_state * d_k * d_v), 0.0)
    per_head = LINEAR_GATE_FLOPS_PER_HEAD + 2 * L2NORM_FLOPS * d_k * bool(op.attr("delta", True))
    return _count(batch * tokens * heads * (recurrent + per_head))


# DeepSeek Sparse Attention's lightning indexer (DeepSeek-V3.2-Exp report, section 2.1:
# I_ts = sum_j w_tj ReLU(q_tj . k_s)): per causal query-key pair and index head, the dot
# product on the matrix unit (2 x index_head_dim), then ReLU, the head weight's
# multiply-add (3 vector FLOPs); per pair one comparison of the top-k selection.
INDEX_FLOPS_PER_PAIR_HEAD = 3
TOPK_FLOPS_PER_SCORE = 1


def _index_dims(op: Op) -> tuple[Dim, int, int, Dim, Dim]:
    """(batch, index heads, index head width, q_len, kv_len) of an indexer op."""
    q, keys = op.inputs[:2]
    batch, q_len, heads, width = q.shape
    return batch, heads, width, q_len, keys.shape[1]


def _index_matrix_flops(op: Op) -> float | np.ndarray:
    batch, heads, width, q_len, kv_len = _index_dims(op)
    return 2.0 * batch * heads * width * _pairs(op, q_len, kv_len)


def _index_vector_flops(op: Op) -> float | np.ndarray:
    batch, heads, _, q_len, kv_len = _index_dims(op)
    per_pair = INDEX_FLOPS_PER_PAIR_HEAD * heads + TOPK_FLOPS_PER_SCORE
    return batch * per_pair * _pairs(op, q_len, kv_len)


def _count(values: np.ndarray) -> float | np.ndarray:
    """_real of what numpy made an array of even for one shape (np.where)."""
    return float(values) if np.ndim(values) == 0 else values.astype(float)


@dataclass(frozen=True, slots=True)
class CostRule:
    """How one op kind's work is counted from its tensors (as JAX's roofline registers a
    rule per primitive): FLOPs on the matrix unit, on the vector unit, and bytes by role."""

    matrix_flops: Callable[[Op], float | np.ndarray]
    vector_flops: Callable[[Op], float | np.ndarray]
    bytes_by_role: Callable[[Op], dict[Role, float | np.ndarray]] = _every_tensor_bytes


RULES: dict[OpKind, CostRule] = {}
"""Every op kind's rule; a kind without one is refused when this module is imported."""


def register(
    kind: OpKind,
    matrix_flops: Callable[[Op], float | np.ndarray],
    vector_flops: Callable[[Op], float | np.ndarray],
    bytes_by_role: Callable[[Op], dict[Role, float | np.ndarray]] = _every_tensor_bytes,
) -> None:
    """Registers `kind`'s rule, once: a second rule for a kind is a programming error."""
    if kind in RULES:
        raise ValueError(f"op kind {kind.value!r} already has a cost rule")
    RULES[kind] = CostRule(matrix_flops, vector_flops, bytes_by_role)


register(OpKind.MATMUL, _matmul_flops, _dequant_flops)
register(OpKind.CONV, _conv_flops, _conv_epilogue_flops)
register(OpKind.ATTENTION, _attention_matrix_flops, _attention_vector_flops)
register(OpKind.ATTENTION_GRAD, _attention_grad_matrix_flops, _attention_grad_vector_flops)
register(OpKind.SCAN, _scan_matrix_flops, _scan_vector_flops)
register(OpKind.LINEAR_ATTENTION, _linear_attention_matrix_flops, _linear_attention_vector_flops)
register(OpKind.SPARSE_INDEX, _index_matrix_flops, _index_vector_flops)
# vector ops: `flops_per_element` (an attr, counted from each formula by the builder) per
# output element
register(OpKind.ELEMENTWISE, _zero, _per_output_element)
register(OpKind.NORM, _zero, _per_output_element)
register(OpKind.SOFTMAX, _zero, _per_output_element)
register(OpKind.OPTIMIZER, _zero, _per_output_element)
register(OpKind.EMBEDDING, _zero, _embedding_vector_flops, _gather_bytes)
register(OpKind.SCATTER_ADD, _zero, _scatter_add_vector_flops, _scatter_add_bytes)
register(OpKind.COLLECTIVE, _zero, _zero)  # links move its bytes (cost/collectives.py)
register(OpKind.TRANSPOSE, _zero, _zero)  # a copy: bytes only


def check_rules(kinds: type[OpKind] = OpKind, rules: dict[OpKind, CostRule] = RULES) -> None:
    """Refuses op kinds without a cost rule: one would otherwise be costed as nothing."""
    missing = [k.value for k in kinds if k not in rules]
    if missing:
        raise ImportError(f"op kinds without a cost rule (ir/op.py register): {missing}")


check_rules()
