"""Fusion: what an inference compiler does to an op-by-op graph before running it.

An imported graph arrives one framework op at a time: RMSNorm as pow, mean, add, rsqrt, mul,
mul; a rotary embedding as a dozen multiplies, negations and concatenations. Run like that,
each op writes its result to memory for the next to read back. Compilers (XLA,
TorchInductor, TensorRT) fuse chains of vector ops into one kernel that reads its inputs once
and writes only what later ops need, and fold an inference batch norm into the convolution
before it. This pass does both, so an imported model costs what the zoo's hand-fused builder
costs for the same architecture (tests/test_torch_import.py checks it).

Vector ops (elementwise, norm, softmax) gather into a group that grows until an op needs one
of its results; ops that do not (an independent matmul) run first, as a scheduler that
sinks each fusion group to its first consumer would. A group becomes one op: its inputs are
the tensors it reads but did not make, its outputs the ones it makes that anything after it
reads (or that nothing reads: the graph's outputs), its FLOPs the sum of its members'.
Matrix ops keep their own kernels, and vector work is not fused into a matmul's epilogue,
matching the builder's kernels. A convolution's is: a group of elementwise ops that starts by
reading a convolution's output, alone reads it and keeps its shape (a ReLU, a residual sum and
its ReLU) runs in the convolution's epilogue, as TensorRT fuses convolution + ReLU and
convolution + elementwise sum (its Layer Fusion Catalog) and Ascend's compiler Conv2D + Add +
ReLU: the convolution's result is never written and read back.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

from xpusim.ir.graph import Graph
from xpusim.ir.op import Op, OpKind
from xpusim.ir.tensor import Role, Tensor

VECTOR = frozenset({OpKind.ELEMENTWISE, OpKind.NORM, OpKind.SOFTMAX})


def fuse(graph: Graph) -> Graph:
    ops = _fold_batch_norms(graph.ops)
    readers: dict[str, set[int]] = defaultdict(set)
    for i, op in enumerate(ops):
        for t in op.inputs:
            readers[t.name].add(i)
    fused: list[Op] = []
    group: list[int] = []
    made: set[str] = set()
    for i, op in enumerate(ops):
        if op.kind in VECTOR:
            group.append(i)
            made.update(t.name for t in op.outputs)
            continue
        if made.intersection(t.name for t in op.inputs):
            _flush(fused, ops, group, readers)
            group, made = [], set()
        fused.append(op)
    if group:
        _flush(fused, ops, group, readers)
    return Graph(graph.name, fused, held=dict(graph.held))


def _flush(fused: list[Op], ops: list[Op], group: list[int],
           readers: dict[str, set[int]]) -> None:  # fmt: skip
    """Appends the group (positions in `ops`) as one op; where its first ops qualify as the
    epilogue of the convolution before it, they go into that convolution instead and the
    rest (a pool that follows them) stays an op of its own."""
    conv = fused[-1] if fused else None
    if conv is not None and conv.kind is OpKind.CONV and len(conv.outputs) == 1:
        for k in range(len(group), 0, -1):
            head = [ops[j] for j in group[:k]]
            merged = _merge(head, set(group[:k]), readers)
            if _is_epilogue(conv.outputs[0], head, merged, set(group[:k]), readers):
                fused[-1] = _with_epilogue(conv, merged)
                if k < len(group):
                    fused.append(_merge([ops[j] for j in group[k:]], set(group[k:]), readers))
                return
    fused.append(_merge([ops[j] for j in group], set(group), readers))


def _is_epilogue(out: Tensor, head: list[Op], merged: Op, members: set[int],
                 readers: dict[str, set[int]]) -> bool:  # fmt: skip
    """Elementwise ops that start from the convolution's output, alone read it and write
    one tensor of its shape."""
    return (all(op.kind is OpKind.ELEMENTWISE for op in head)
            and out.name in {t.name for t in head[0].inputs}
            and readers[out.name] <= members
            and len(merged.outputs) == 1 and merged.outputs[0].shape == out.shape)  # fmt: skip


def _with_epilogue(conv: Op, merged: Op) -> Op:
    """The convolution reading the epilogue's other inputs (a shortcut) and writing its output."""
    out = conv.outputs[0]
    extra = tuple(t for t in merged.inputs if t.name != out.name)
    attrs = {**dict(conv.attrs), "epilogue_flops_per_element": merged.vector_flops / out.numel,
             "source": f"{conv.attr('source', 'conv')}+{merged.attr('source', 'elementwise')}"}
    return replace(conv, inputs=conv.inputs + extra, outputs=merged.outputs,
                   attrs=tuple(sorted(attrs.items())))  # fmt: skip


def _merge(group: list[Op], members: set[int], readers: dict[str, set[int]]) -> Op:
    if len(group) == 1:
        return group[0]
    made = {t.name for op in group for t in op.outputs}
    inputs: dict[str, Tensor] = {}
    for op in group:
        for t in op.inputs:  # a buffer read through several views counts at its largest
            seen = inputs.get(t.name)
            if t.name not in made and (seen is None or t.numel > seen.numel):
                inputs[t.name] = t
    last = group[-1]
    produced = [t for op in reversed(group) for t in op.outputs]
    outputs = {t.name: t for t in produced if not readers[t.name] or readers[t.name] - members}
    if not outputs:
        outputs = {t.name: t for t in last.outputs}
    first = next(iter(outputs.values()))
    flops = sum(op.vector_flops for op in group)
    kinds = {op.kind for op in group}
    kind = next(k for k in (OpKind.NORM, OpKind.SOFTMAX, OpKind.ELEMENTWISE) if k in kinds)
    sources = ",".join(str(op.attr("source", op.kind.value)).split(".")[-1] for op in group)
    attrs = {"flops_per_element": flops / max(first.numel, 1), "source": f"fused({sources})"}
    return replace(
        last, kind=kind, inputs=tuple(inputs.values()), outputs=tuple(outputs.values()),
        attrs=tuple(sorted(attrs.items())),
    )  # fmt: skip


def _fold_batch_norms(ops: list[Op]) -> list[Op]:
    """Drops each inference batch norm that alone reads a convolution's output, giving the
    convolution a bias instead (scale and shift fold into its weights)."""
    producer = {t.name: i for i, op in enumerate(ops) for t in op.outputs}
    reads: dict[str, int] = defaultdict(int)
    for op in ops:
        for t in op.inputs:
            reads[t.name] += 1
    folded: list[Op | None] = list(ops)
    for i, op in enumerate(ops):
        source = producer.get(op.inputs[0].name) if op.inputs else None
        if op.attr("norm") != "batch" or source is None or reads[op.inputs[0].name] != 1:
            continue
        conv = folded[source]
        if conv.kind is not OpKind.CONV:
            continue
        inputs = conv.inputs
        if len(inputs) == 2:
            scale = op.inputs[1]
            channels = (conv.inputs[1].shape[0],)
            inputs += (Tensor(f"{op.name}.folded_bias", channels, scale.dtype, Role.WEIGHT),)
        folded[source] = replace(conv, inputs=inputs, outputs=op.outputs)
        folded[i] = None
    return [op for op in folded if op is not None]
