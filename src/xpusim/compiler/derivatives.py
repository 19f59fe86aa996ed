"""Derivative rules: for each forward op kind, the backward ops it needs (compiler/autodiff.py).

A rule gets the gradients of the op's outputs (None where nothing downstream needs one) and
emits ops that compute the gradients of its inputs and weights. Every backward op reads
forward tensors by name; those reads are the stash. Vector FLOPs of a gradient are counted
from its formula, per element, like the forward ones in workloads/transformer.py:

* matmul Y = X W (+ b): dX = dY W^T and dW = X^T dY, each as many FLOPs as the forward
  (2x in all); the bias gradient sums dY over the rows.
* attention: FlashAttention-2's backward (ir/op.py: 2.5x the forward's matrix FLOPs, since
  it recomputes the scores instead of reading them), reading q, k, v, the output and the
  softmax statistics.
* norm: the input gradient and the weight gradient in one kernel, from the stashed input.
* element-wise: known functions by formula; others at twice the forward's FLOPs, an
  estimate (a gradient evaluates the function's derivative and multiplies by dY).
* cross-entropy: the softmax the forward wrote minus the one-hot label.
* embedding: a scatter-add of the rows' gradients into the table's gradient.

Tensor parallelism: a backward matmul splits over the dimension its forward split (column
parallel: dX contracts over the split N, so it is followed by an all-reduce, Megatron's `f`
operator; row parallel: dX is split, no communication); `tp` tags carry that to
compiler/partition.py.
"""

from __future__ import annotations

from collections.abc import Callable

from xpusim.ir.dtypes import DType
from xpusim.ir.op import Op, OpKind
from xpusim.ir.tensor import Role, Tensor

# Forward `tp` rule of a matmul -> partition rules of (dX, dW, bias gradient). split_k: the
# contraction is split (partial sums, then an all-reduce); split_n / split_m: the output's
# columns / rows are split.
MATMUL_TP = {
    "column": ("split_k", "split_n", "split"),
    "vocab": ("split_k", "split_n", "split"),  # an LM head split over the vocabulary
    "heads": ("split_k", "split_n", "heads"),
    "row": ("split_n", "split_m", None),
}
_SHARED_ATTRS = ("heads", "kv_heads", "head_dim", "compute", "causal")

# Vector FLOPs of a gradient per element of the forward op's output, from the formulas:
ELEMENTWISE_GRAD_FLOPS = {
    # s = sigmoid(g) (3), silu = g s (1), d_up = dy silu (1), silu' = s (1 + g (1 - s)) (4),
    # d_gate = dy up silu' (2)
    "silu_mul": 11,
    "gelu": 14,  # the forward's tanh-approximation terms again (8), the product rule (6)
    "relu": 1,  # select dy where x > 0
}
NORM_GRAD_FLOPS = {
    # rstd again (square, accumulate: 2), x_hat (1), dw += dy x_hat (2), g = dy w (1),
    # sum g x_hat (2), dx = rstd (g - x_hat mean) (3)
    "rmsnorm": 11,
    # the RMSNorm terms, plus the mean (1), its gradient term (2), db += dy (1), centring (1)
    "layernorm": 16,
}
RESIDUAL_ADD_FLOPS = 1  # a fused add + norm adds its two inputs first
CROSS_ENTROPY_GRAD_FLOPS = 2  # (softmax - one_hot(label)) x d_loss: subtract, multiply
SOFTMAX_GRAD_FLOPS = 4  # dx = y (dy - sum(dy y)): multiply-add, subtract, multiply
GENERIC_GRAD_FACTOR = 2  # unknown element-wise function: twice the forward's FLOPs


def differentiable(t: Tensor) -> bool:
    """Float tensors get gradients; token ids, labels and masks do not."""
    return t.dtype not in (DType.INT32, DType.INT64, DType.BOOL) and t.role is not Role.KV_CACHE


class BackwardEmitter:
    """The backward ops emitted so far and the gradient of every forward tensor."""

    def __init__(self) -> None:
        self.grads: dict[str, Tensor] = {}
        self.ops: list[Op] = []
        self._names: set[str] = set()

    def seed(self, outputs: tuple[Tensor, ...], loss: str) -> Tensor:
        t = next(o for o in outputs if o.name == loss)
        self.grads[loss] = self.grad_of(t)
        return self.grads[loss]

    def grad_of(self, t: Tensor, shape: tuple[int, ...] | None = None) -> Tensor:
        """A new tensor for (a contribution to) t's gradient: weights' stay weight-role
        (they persist until the optimizer update), activations' are transient."""
        name, n = f"{t.name}.grad", 1
        while name in self._names:
            name, n = f"{t.name}.grad+{n}", n + 1
        self._names.add(name)
        role = Role.WEIGHT if t.role is Role.WEIGHT else Role.ACTIVATION
        return Tensor(name, shape or t.shape, t.dtype, role)

    def emit(self, kind: OpKind, name: str, ins: list[Tensor], outs: list[Tensor], layer: int,
             **attrs: object) -> Op:  # fmt: skip
        given = tuple(sorted((k, v) for k, v in attrs.items() if v is not None))
        op = Op(kind, name, tuple(ins), tuple(outs), given, layer)
        self.ops.append(op)
        return op

    def contribute(self, t: Tensor, g: Tensor, layer: int) -> None:
        """Adds g to t's gradient (an add op when t already has one)."""
        if t.name not in self.grads:
            self.grads[t.name] = g
            return
        total = self.grad_of(t)
        self.emit(OpKind.ELEMENTWISE, f"{total.name}.add", [self.grads[t.name], g], [total],
                  layer, fn="add", flops_per_element=1)  # fmt: skip
        self.grads[t.name] = total


def _shared(op: Op, tp: str | None) -> dict[str, object]:
    return {"tp": tp, **{k: op.attr(k) for k in _SHARED_ATTRS}}


def _flattened(t: Tensor, shape: tuple[int, ...]) -> Tensor:
    """The same tensor read as rows x columns (a free reshape of contiguous storage)."""
    return Tensor(t.name, shape, t.dtype, t.role)


def _matmul(em: BackwardEmitter, op: Op, d_outs: list[Tensor | None]) -> None:
    if op.attr("transpose_a") or op.attr("transpose_b"):
        raise ValueError(f"{op.name}: autodiff of a transposed matmul is not supported")
    dy = d_outs[0]
    a, b, *bias = op.inputs
    dx_tp, dw_tp, bias_tp = MATMUL_TP.get(str(op.attr("tp")), (None, None, None))
    if differentiable(a):
        da = em.grad_of(a)
        em.emit(OpKind.MATMUL, f"{op.name}.dgrad", [dy, b], [da], op.layer, transpose_b=True,
                **_shared(op, dx_tp))  # fmt: skip
        em.contribute(a, da, op.layer)
    rows = a.numel // a.shape[-1]
    if differentiable(b):
        x, grad_out = a, dy
        if len(b.shape) == 2 and len(a.shape) > 2:  # a shared weight: sum over all rows
            x = _flattened(a, (rows, a.shape[-1]))
            grad_out = _flattened(dy, (rows, dy.shape[-1]))
        db = em.grad_of(b)
        em.emit(OpKind.MATMUL, f"{op.name}.wgrad", [x, grad_out], [db], op.layer,
                transpose_a=True, **_shared(op, dw_tp))  # fmt: skip
        em.contribute(b, db, op.layer)
    for b_in in bias:
        db = em.grad_of(b_in)
        em.emit(OpKind.ELEMENTWISE, f"{op.name}.bgrad", [dy], [db], op.layer, fn="sum_rows",
                flops_per_element=rows, **_shared(op, bias_tp))  # fmt: skip
        em.contribute(b_in, db, op.layer)


def _norm(em: BackwardEmitter, op: Op, d_outs: list[Tensor | None]) -> None:
    """A fused add + norm's gradient flows to both addends; `accumulate` marks the kernel
    that also adds the gradient arriving at its residual output."""
    fused = len(op.outputs) == 2
    d_out, d_res = d_outs[0], d_outs[1] if fused else None
    normed = op.outputs[1] if fused else op.inputs[0]
    addends = [t for t in op.inputs if t.role is Role.ACTIVATION]
    if d_out is None:  # only the residual output is used: its gradient passes through
        for t in addends:
            em.contribute(t, d_res, op.layer)
        return
    weights = [t for t in op.inputs if t.role is Role.WEIGHT]
    fn = str(op.attr("fn"))
    flops = NORM_GRAD_FLOPS.get(fn, GENERIC_GRAD_FACTOR * int(op.attr("flops_per_element", 1)))
    d_in = em.grad_of(normed)
    d_weights = [em.grad_of(w) for w in weights]
    em.emit(OpKind.NORM, f"{op.name}.grad", [d_out, *[d_res] * (d_res is not None), normed,
            *weights], [d_in, *d_weights], op.layer, fn=f"{fn}_grad",
            flops_per_element=flops + RESIDUAL_ADD_FLOPS * (d_res is not None),
            accumulate=d_res is not None or None)  # fmt: skip
    for t in addends:
        em.contribute(t, d_in, op.layer)
    for w, g in zip(weights, d_weights, strict=True):
        em.contribute(w, g, op.layer)


def _elementwise(em: BackwardEmitter, op: Op, d_outs: list[Tensor | None]) -> None:
    fn = op.attr("fn")
    inputs = [t for t in op.inputs if differentiable(t)]
    if fn == "add":  # the gradient of a sum reaches every addend unchanged: no op
        for t in inputs:
            em.contribute(t, d_outs[0], op.layer)
        return
    grads_in = [g for g in d_outs if g is not None]
    forward_flops = op.vector_flops
    if fn == "rope":  # a rotation: its gradient is the inverse rotation, as many FLOPs
        saved, grad_flops = [], forward_flops
    elif fn in ELEMENTWISE_GRAD_FLOPS:
        saved, grad_flops = inputs, ELEMENTWISE_GRAD_FLOPS[str(fn)] * op.outputs[0].numel
    else:
        saved, grad_flops = inputs, GENERIC_GRAD_FACTOR * forward_flops
    d_ins = [em.grad_of(t) for t in inputs]
    em.emit(OpKind.ELEMENTWISE, f"{op.name}.grad", [*grads_in, *saved], d_ins, op.layer,
            fn=f"{fn}_grad", flops_per_element=grad_flops / d_ins[0].numel,
            **_shared(op, op.attr("tp")))  # fmt: skip
    for t, g in zip(inputs, d_ins, strict=True):
        em.contribute(t, g, op.layer)


def _softmax(em: BackwardEmitter, op: Op, d_outs: list[Tensor | None]) -> None:
    x = op.inputs[0]
    dx = em.grad_of(x)
    if op.attr("fn") == "cross_entropy":  # reads the softmax it wrote, not the logits
        probs, labels = op.outputs[0], op.inputs[1]
        em.emit(OpKind.ELEMENTWISE, f"{op.name}.grad", [probs, labels, d_outs[1]], [dx],
                op.layer, fn="cross_entropy_grad", flops_per_element=CROSS_ENTROPY_GRAD_FLOPS,
                tp=op.attr("tp"))  # fmt: skip
    else:
        em.emit(OpKind.ELEMENTWISE, f"{op.name}.grad", [d_outs[0], op.outputs[0]], [dx],
                op.layer, fn="softmax_grad", flops_per_element=SOFTMAX_GRAD_FLOPS,
                tp=op.attr("tp"))  # fmt: skip
    em.contribute(x, dx, op.layer)


def _attention(em: BackwardEmitter, op: Op, d_outs: list[Tensor | None]) -> None:
    if len(op.inputs) != 3 or len(op.outputs) != 2:
        raise ValueError(
            f"{op.name}: attention against a KV cache has no backward; build the forward "
            "pass with build_step(..., training=True)"
        )
    grads = [em.grad_of(t) for t in op.inputs]
    em.emit(OpKind.ATTENTION_GRAD, f"{op.name}.grad", [*op.inputs, *op.outputs, d_outs[0]],
            grads, op.layer, **_shared(op, op.attr("tp")))  # fmt: skip
    for t, g in zip(op.inputs, grads, strict=True):
        em.contribute(t, g, op.layer)


def _embedding(em: BackwardEmitter, op: Op, d_outs: list[Tensor | None]) -> None:
    """Scatter-add into the table's gradient; a tied LM head's gradient, written earlier in
    the backward pass, is added into in place (only the looked-up rows are touched)."""
    table, ids = op.inputs[:2]
    earlier = em.grads.get(table.name)
    g = em.grad_of(table)
    em.emit(OpKind.SCATTER_ADD, f"{op.name}.grad", [d_outs[0], ids, *[earlier] * bool(earlier)],
            [g], op.layer, tp=op.attr("tp"))  # fmt: skip
    em.grads[table.name] = g


def recompute_form(op: Op) -> Op:
    """The op as recomputation runs it: a fused add + norm recomputes only the norm, from
    the sum it wrote (which its own backward stashes anyway), not from both addends."""
    if op.kind is not OpKind.NORM or len(op.outputs) != 2:
        return op
    weights = tuple(t for t in op.inputs if t.role is Role.WEIGHT)
    attrs = dict(op.attrs)
    attrs["flops_per_element"] = int(attrs.get("flops_per_element", 1)) - RESIDUAL_ADD_FLOPS
    return Op(op.kind, op.name, (op.outputs[1], *weights), op.outputs[:1],
              tuple(sorted(attrs.items())), op.layer)  # fmt: skip


RULES: dict[OpKind, Callable[[BackwardEmitter, Op, list[Tensor | None]], None]] = {
    OpKind.MATMUL: _matmul,
    OpKind.NORM: _norm,
    OpKind.ELEMENTWISE: _elementwise,
    OpKind.SOFTMAX: _softmax,
    OpKind.ATTENTION: _attention,
    OpKind.EMBEDDING: _embedding,
}
