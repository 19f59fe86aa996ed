"""What each op computes, in numpy: the semantics the reference interpreter runs.

One function per op kind, and per `fn` for vector ops. Shapes follow the IR's conventions
(workloads/transformer.py): attention tensors are [batch, seq, heads, head_dim], grouped KV
heads serve heads / kv_heads query heads each, rotary embedding rotates the two halves of
each head (the Llama convention, base 10000), norms use eps 1e-6. The gradient kernels are
written from the calculus, independently of compiler/derivatives.py, so that the
interpreter checks that pass rather than repeating it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from xpusim.ir.op import Op, OpKind
from xpusim.ir.tensor import Role

Kernel = Callable[[Op, list[np.ndarray]], list[np.ndarray]]
EPS = 1e-6
ROPE_BASE = 10000.0


def _t(x: np.ndarray) -> np.ndarray:
    return np.swapaxes(x, -1, -2)


def _matmul(op: Op, args: list[np.ndarray]) -> list[np.ndarray]:
    a, b, *bias = args
    a = _t(a) if op.attr("transpose_a") else a
    b = _t(b) if op.attr("transpose_b") else b
    return [a @ b + sum(bias)]


# --- element-wise functions and their gradients ---------------------------------------
def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


def _gelu_grad(dy: np.ndarray, x: np.ndarray) -> np.ndarray:
    c = np.sqrt(2 / np.pi)
    t = np.tanh(c * (x + 0.044715 * x**3))
    return dy * (0.5 * (1 + t) + 0.5 * x * (1 - t**2) * c * (1 + 3 * 0.044715 * x**2))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


def _silu_mul(x: np.ndarray) -> np.ndarray:
    gate, up = np.split(x, 2, axis=-1)
    return gate * _sigmoid(gate) * up


def _silu_mul_grad(dy: np.ndarray, x: np.ndarray) -> np.ndarray:
    gate, up = np.split(x, 2, axis=-1)
    s = _sigmoid(gate)
    d_gate = dy * up * s * (1 + gate * (1 - s))
    return np.concatenate([d_gate, dy * gate * s], axis=-1)


def _rope_tables(seq: int, head_dim: int) -> tuple[np.ndarray, np.ndarray]:
    inv_freq = ROPE_BASE ** (-np.arange(0, head_dim, 2) / head_dim)
    angles = np.outer(np.arange(seq), inv_freq)
    angles = np.concatenate([angles, angles], axis=-1)[None, :, None, :]  # [1, s, 1, d]
    return np.cos(angles), np.sin(angles)


def _rotate(x: np.ndarray, sign: float) -> np.ndarray:
    """x [b, s, heads, d] rotated by +/- each position's angles."""
    cos, sin = _rope_tables(x.shape[1], x.shape[-1])
    x1, x2 = np.split(x, 2, axis=-1)
    return x * cos + sign * np.concatenate([-x2, x1], axis=-1) * sin


def _heads(op: Op) -> tuple[int, int, int]:
    return int(op.attr("heads")), int(op.attr("kv_heads")), int(op.attr("head_dim"))


def _rope(op: Op, args: list[np.ndarray]) -> list[np.ndarray]:
    """Fused projection [b, s, (h + 2 kv) d] -> rotated q, rotated k, v (head-major)."""
    h, kv, d = _heads(op)
    x = args[0]
    q, k, v = np.split(x.reshape(*x.shape[:2], h + 2 * kv, d), [h, h + kv], axis=2)
    return [_rotate(q, 1.0), _rotate(k, 1.0), v]


def _rope_grad(op: Op, args: list[np.ndarray]) -> list[np.ndarray]:
    dq, dk, dv = args
    grad = np.concatenate([_rotate(dq, -1.0), _rotate(dk, -1.0), dv], axis=2)
    return [grad.reshape(*grad.shape[:2], -1)]


def _cross_entropy_grad(op: Op, args: list[np.ndarray]) -> list[np.ndarray]:
    probs, labels, d_loss = args
    one_hot = np.eye(probs.shape[-1])[labels.astype(int)]
    return [(probs - one_hot) * d_loss[..., None]]


def _softmax_grad(op: Op, args: list[np.ndarray]) -> list[np.ndarray]:
    dy, y = args
    return [y * (dy - (dy * y).sum(axis=-1, keepdims=True))]


def _sum_rows(op: Op, args: list[np.ndarray]) -> list[np.ndarray]:
    dy = args[0]
    return [dy.reshape(-1, dy.shape[-1]).sum(axis=0)]


_ELEMENTWISE: dict[str, Kernel] = {
    "add": lambda op, a: [sum(a)],
    "relu": lambda op, a: [np.maximum(a[0], 0)],
    "relu_grad": lambda op, a: [a[0] * (a[1] > 0)],
    "gelu": lambda op, a: [_gelu(a[0])],
    "gelu_grad": lambda op, a: [_gelu_grad(*a)],
    "silu_mul": lambda op, a: [_silu_mul(a[0])],
    "silu_mul_grad": lambda op, a: [_silu_mul_grad(*a)],
    "rope": _rope,
    "rope_grad": _rope_grad,
    "sum_rows": _sum_rows,
    "cross_entropy_grad": _cross_entropy_grad,
    "softmax_grad": _softmax_grad,
}


def _by_fn(table: dict[str, Kernel]) -> Kernel:
    def kernel(op: Op, args: list[np.ndarray]) -> list[np.ndarray]:
        fn = str(op.attr("fn"))
        if fn not in table:
            raise ValueError(f"the interpreter has no {op.kind.value} function {fn!r} ({op.name})")
        return table[fn](op, args)

    return kernel


# --- norms ---------------------------------------------------------------------------
def _normalized(x: np.ndarray, layer: bool) -> tuple[np.ndarray, np.ndarray]:
    """(x_hat, 1 / std): LayerNorm centres first, RMSNorm does not."""
    centred = x - x.mean(axis=-1, keepdims=True) if layer else x
    rstd = 1 / np.sqrt((centred**2).mean(axis=-1, keepdims=True) + EPS)
    return centred * rstd, rstd


def _norm(op: Op, args: list[np.ndarray]) -> list[np.ndarray]:
    layer = op.attr("fn") == "layernorm"
    weights = sum(t.role is Role.WEIGHT for t in op.inputs)  # the scale, and a bias if any
    acts, (w, *b) = args[:-weights], args[-weights:]
    x = sum(acts)  # a fused residual add writes the sum as its second output
    x_hat, _ = _normalized(x, layer)
    return [x_hat * w + sum(b), x][: len(op.outputs)]


def _norm_grad(op: Op, args: list[np.ndarray]) -> list[np.ndarray]:
    layer = op.attr("fn") == "layernorm_grad"
    d_out, *rest = args
    d_res = rest.pop(0) if op.attr("accumulate") else 0.0
    x, w, *b = rest
    x_hat, rstd = _normalized(x, layer)
    rows = x.reshape(-1, x.shape[-1])
    g = d_out * w
    dx = rstd * (g - x_hat * (g * x_hat).mean(axis=-1, keepdims=True))
    if layer:
        dx = dx - rstd * g.mean(axis=-1, keepdims=True)
    dw = (d_out * x_hat).reshape(rows.shape).sum(axis=0)
    return [dx + d_res, dw, *[d_out.reshape(rows.shape).sum(axis=0)] * len(b)]


def _norm_kind(op: Op, args: list[np.ndarray]) -> list[np.ndarray]:
    backward = str(op.attr("fn")).endswith("_grad")
    return (_norm_grad if backward else _norm)(op, args)


# --- softmax, attention -----------------------------------------------------------------
def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _softmax_op(op: Op, args: list[np.ndarray]) -> list[np.ndarray]:
    probs = _softmax(args[0])
    if op.attr("fn") != "cross_entropy":
        return [probs]
    labels = args[1].astype(int)
    picked = np.take_along_axis(probs, labels[..., None], axis=-1)[..., 0]
    return [probs, -np.log(picked)]


def _scores(op: Op, q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Scaled, masked scores [b, heads, s_q, s_k], KV heads repeated over their group."""
    groups = q.shape[2] // k.shape[2]
    k = np.repeat(k, groups, axis=2)
    s = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(q.shape[-1])
    if op.attr("causal", True):
        s = np.where(np.tril(np.ones(s.shape[-2:], dtype=bool)), s, -np.inf)
    return s


def _attention(op: Op, args: list[np.ndarray]) -> list[np.ndarray]:
    q, k, v = args
    s = _scores(op, q, k)
    lse = np.log(np.exp(s - s.max(-1, keepdims=True)).sum(-1, keepdims=True)) + s.max(
        -1, keepdims=True
    )
    out = np.einsum("bhqk,bkhd->bqhd", np.exp(s - lse), np.repeat(v, q.shape[2] // v.shape[2], 2))
    return [out.reshape(*out.shape[:2], -1), np.moveaxis(lse, 1, 2)]


def _attention_grad(op: Op, args: list[np.ndarray]) -> list[np.ndarray]:
    q, k, v, out, lse, d_out = args
    groups = q.shape[2] // k.shape[2]
    d_out = d_out.reshape(q.shape)
    p = np.exp(_scores(op, q, k) - np.moveaxis(lse, 2, 1))  # [b, h, q, k]
    v_rep, k_rep = np.repeat(v, groups, 2), np.repeat(k, groups, 2)
    d_v = np.einsum("bhqk,bqhd->bkhd", p, d_out)
    d_p = np.einsum("bqhd,bkhd->bhqk", d_out, v_rep)
    d_s = p * (d_p - (d_out * out.reshape(q.shape)).sum(-1).transpose(0, 2, 1)[..., None])
    scale = 1 / np.sqrt(q.shape[-1])
    d_q = np.einsum("bhqk,bkhd->bqhd", d_s, k_rep) * scale
    d_k = np.einsum("bhqk,bqhd->bkhd", d_s, q) * scale

    def fold(x: np.ndarray) -> np.ndarray:  # sum the query heads sharing each KV head
        return x.reshape(*x.shape[:2], k.shape[2], groups, x.shape[-1]).sum(axis=3)

    return [d_q, fold(d_k), fold(d_v)]


# --- embeddings, layout ----------------------------------------------------------------
def _embedding(op: Op, args: list[np.ndarray]) -> list[np.ndarray]:
    table, ids = args
    rows = table[ids.astype(int)]
    pooled = op.outputs[0].numel != rows.size  # an embedding bag sums each bag's rows
    return [rows.sum(axis=-2) if pooled else rows]


def _scatter_add(op: Op, args: list[np.ndarray]) -> list[np.ndarray]:
    d_rows, ids, *into = args
    shape = op.outputs[0].shape
    table = into[0].reshape(shape).copy() if into else np.zeros(shape, d_rows.dtype)
    ids = ids.astype(int)
    if d_rows.size != ids.size * shape[-1]:  # a bag: every id gets its bag's gradient
        d_rows = np.broadcast_to(d_rows[..., None, :], (*ids.shape, shape[-1]))
    np.add.at(table, ids.reshape(-1), d_rows.reshape(-1, shape[-1]))
    return [table]


def _optimizer(op: Op, args: list[np.ndarray]) -> list[np.ndarray]:
    """One step (`step`, default 1) of SGD, Adam or AdamW on (grad, params, *moments);
    writes params, moments and, when params are a master copy, the compute-format weights."""
    g, p, *moments = args
    lr, fn = float(op.attr("lr")), op.attr("fn")
    if fn == "sgd":
        new, state = p - lr * g, []
    else:
        b1, b2, eps = (float(op.attr(k)) for k in ("beta1", "beta2", "eps"))
        t = int(op.attr("step", 1))
        m, v = b1 * moments[0] + (1 - b1) * g, b2 * moments[1] + (1 - b2) * g * g
        decayed = p * (1 - lr * float(op.attr("weight_decay", 0.0)))
        new = decayed - lr * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps)
        state = [m, v]
    return [new, *state, new][: len(op.outputs)]


KERNELS: dict[OpKind, Kernel] = {
    OpKind.MATMUL: _matmul,
    OpKind.ELEMENTWISE: _by_fn(_ELEMENTWISE),
    OpKind.NORM: _norm_kind,
    OpKind.SOFTMAX: _softmax_op,
    OpKind.ATTENTION: _attention,
    OpKind.ATTENTION_GRAD: _attention_grad,
    OpKind.EMBEDDING: _embedding,
    OpKind.SCATTER_ADD: _scatter_add,
    OpKind.TRANSPOSE: lambda op, a: [_t(a[0])],
    OpKind.OPTIMIZER: _optimizer,
}
