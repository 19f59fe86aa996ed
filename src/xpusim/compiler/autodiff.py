"""Autodiff: a forward graph in, a training graph out (backward ops, stash, recomputation).

Reverse-mode differentiation over the op list: forward ops are visited last to first, and
each kind's derivative rule (compiler/derivatives.py) emits the ops that turn the gradients
of its outputs into gradients of its inputs and weights. A tensor read by several ops gets
the sum of their contributions (one add op per extra contribution, as the residual stream
of a parallel-block transformer needs).

The forward tensors a backward op reads must survive from the forward pass to the backward
pass: they are the *stash*, which dominates a training step's activation memory. Activation
recomputation trades FLOPs for that memory:

* none: every tensor a backward op reads is stashed.
* selective: a vector op's output (a norm, an activation function) is recomputed just
  before its first backward reader, instead of stashed, when everything it is computed from
  is stashed anyway: a few vector FLOPs buy back its bytes. This is the part of Korthikanti
  et al. 2022's selective recomputation that flash attention leaves (it already recomputes
  the attention scores in its backward instead of storing them).
* full: each repeated block (transformer layer) stashes only its input; its backward
  first re-runs the block's forward (Chen et al. 2016, Megatron-LM's full recomputation),
  so a step costs about four forward passes instead of three.

Recomputed tensors get new names (`name@recompute`), so the liveness analysis in
compiler/memory_plan.py sees their short lifetimes. Backward ops keep their forward op's
`layer`, so pipeline stages cut the training graph where they cut the forward pass, and a
`tp` tag saying how tensor parallelism splits them (compiler/partition.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from xpusim.compiler.derivatives import RULES, BackwardEmitter, recompute_form
from xpusim.errors import UserError
from xpusim.ir.graph import Graph
from xpusim.ir.op import Op, OpKind
from xpusim.ir.tensor import Role, Tensor

RECOMPUTED = "@recompute"
# Vector ops cheap enough to recompute under selective recomputation.
_CHEAP = (OpKind.NORM, OpKind.ELEMENTWISE, OpKind.SOFTMAX)


class Recompute(StrEnum):
    NONE = "none"
    SELECTIVE = "selective"
    FULL = "full"

    @classmethod
    def parse(cls, name: str) -> Recompute:
        try:
            return cls(str(name).lower())
        except ValueError:
            raise UserError(
                f"unknown recompute policy {name!r}; choose none, selective or full"
            ) from None


@dataclass(frozen=True)
class Stashed:
    """A forward tensor kept for the backward pass, from its producer to its last reader."""

    tensor: Tensor
    layer: int
    produced_by: str
    last_read_by: str


@dataclass
class TrainingGraph:
    """A training step's ops: forward, then backward (recomputation included, in place)."""

    forward: Graph
    backward: Graph
    stash: list[Stashed] = field(default_factory=list)
    seed: str = ""  # the loss gradient the backward pass starts from (ones)

    @property
    def graph(self) -> Graph:
        """Both passes in execution order, for liveness and for the interpreter."""
        return Graph(f"{self.forward.name}[train]", self.forward.ops + self.backward.ops)

    @property
    def stash_bytes(self) -> float:
        return sum(s.tensor.nbytes for s in self.stash)


def differentiate(
    graph: Graph,
    loss: str = "loss",
    recompute: Recompute | str = Recompute.NONE,
    blocks: Iterable[int] | None = None,
) -> TrainingGraph:
    """The training graph of `graph`, whose tensor `loss` is the loss to minimise.

    `blocks` are the layer ids full recomputation checkpoints (default: every layer id >= 0
    in the graph); ops of other layers (embedding, LM head) always stash.
    """
    policy = Recompute.parse(recompute)
    producers = {t.name: op for op in graph for t in op.outputs}
    if loss not in producers:
        raise ValueError(f"{graph.name}: no op writes the loss tensor {loss!r}")
    emitter = BackwardEmitter()
    seed = emitter.seed(producers[loss].outputs, loss)
    for op in reversed(graph.ops):
        d_outs = [emitter.grads.get(t.name) for t in op.outputs]
        if not any(d_outs):
            continue
        rule = RULES.get(op.kind)
        if rule is None:
            raise ValueError(f"autodiff has no derivative rule for {op.kind.value} op {op.name}")
        rule(emitter, op, d_outs)
    backward = emitter.ops
    if policy is Recompute.FULL:
        layers = set(blocks) if blocks is not None else {op.layer for op in graph if op.layer >= 0}
        backward = _full(graph, backward, layers)
    elif policy is Recompute.SELECTIVE:
        backward = _selective(graph, backward)
    return TrainingGraph(
        forward=graph,
        backward=Graph(f"{graph.name}.backward", backward,
                       layer_copies=dict(graph.layer_copies)),  # a stand-in layer's too
        stash=_stash(graph, backward),
        seed=seed.name,
    )


def _renamed(t: Tensor, names: dict[str, str]) -> Tensor:
    return Tensor(names[t.name], t.shape, t.dtype, t.role) if t.name in names else t


def _rewire(op: Op, names: dict[str, str]) -> Op:
    """The op reading recomputed tensors instead of stashed ones."""
    ins = tuple(_renamed(t, names) for t in op.inputs)
    return Op(op.kind, op.name, ins, op.outputs, op.attrs, op.layer)


def _copy(op: Op, names: dict[str, str]) -> Op:
    """A recomputation of a forward op: its outputs get fresh names, recorded in `names`."""
    ins = tuple(_renamed(t, names) for t in op.inputs)
    for t in op.outputs:
        names[t.name] = t.name + RECOMPUTED
    outs = tuple(_renamed(t, names) for t in op.outputs)
    attrs = (*op.attrs, ("recompute", True))
    return Op(op.kind, f"{op.name}.recompute", ins, outs, attrs, op.layer)


def _full(graph: Graph, backward: list[Op], blocks: set[int]) -> list[Op]:
    """Before a block's first backward op, its forward ops run again; the block's backward
    ops read what they recompute, so only the block's inputs stay stashed (a fused add +
    norm whose addends both come from before the block stashes their sum instead)."""
    out: list[Op] = []
    names: dict[int, dict[str, str]] = {}
    for op in backward:
        layer = op.layer
        if layer in blocks and layer not in names:
            names[layer] = {}
            block = [f for f in graph if f.layer == layer]
            made = {t.name for f in block for t in f.outputs}
            for f in block:
                outside = [t for t in f.inputs if t.role is Role.ACTIVATION and t.name not in made]
                out.append(_copy(recompute_form(f) if len(outside) > 1 else f, names[layer]))
        out.append(_rewire(op, names.get(layer, {})))
    return out


def _selective(graph: Graph, backward: list[Op]) -> list[Op]:
    """Cheap vector ops whose inputs are stashed anyway are recomputed, not stashed."""
    read = {t.name for op in backward for t in op.inputs}
    candidates = {
        op.name: op
        for op in graph
        if op.kind in _CHEAP
        and any(t.name in read for t in op.outputs)
        and all(t.role is Role.WEIGHT or t.name in read for t in recompute_form(op).inputs)
    }
    while True:  # no chains: an op whose inputs are themselves recomputed stays stashed
        made = {t.name for op in candidates.values() for t in recompute_form(op).outputs}
        chained = [n for n, op in candidates.items()
                   if any(t.name in made for t in recompute_form(op).inputs)]  # fmt: skip
        if not chained:
            break
        for name in chained:
            del candidates[name]
    produced_by = {t.name: op for op in candidates.values() for t in recompute_form(op).outputs}
    names: dict[str, str] = {}
    out: list[Op] = []
    for op in backward:
        for t in op.inputs:
            source = produced_by.get(t.name)
            if source is not None:
                out.append(_copy(recompute_form(source), names))
                for made in recompute_form(source).outputs:
                    produced_by.pop(made.name, None)
        out.append(_rewire(op, names))
    return out


def _stash(graph: Graph, backward: list[Op]) -> list[Stashed]:
    """Forward activations that backward ops read, with their producer and last reader; a
    graph input (the batch, the labels) counts from its first reader, as "input"."""
    first: dict[str, tuple[Tensor, Op]] = {}
    for op in graph:
        for t in op.inputs + op.outputs:
            if t.role is Role.ACTIVATION:
                first.setdefault(t.name, (t, op))
    produced = {t.name for op in graph for t in op.outputs}
    last: dict[str, Op] = {}
    for op in backward:
        for t in op.inputs:
            if t.name in first:
                last[t.name] = op
    found = []
    for name, reader in last.items():
        tensor, op = first[name]
        found.append(Stashed(tensor, op.layer, op.name if name in produced else "input",
                             reader.name))  # fmt: skip
    return found
