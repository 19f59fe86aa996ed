"""A graph's ops as columns of numbers, one column entry per distinct op signature.

Identical layers collapse to one entry with a count, so an 80-layer model costs no more to
evaluate than one layer, and every formula in cost/ runs over numpy arrays: one op or
thousands, one configuration or a whole sweep, with the same code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from xpusim.compiler.moe_expert import is_expert
from xpusim.cost.aux_stream import stream_groups
from xpusim.cost.gemm_allreduce import fused_pairs
from xpusim.cost.kernel_tables import DEFAULT_MOE_BACKEND, KEYED_BY, engine_scope, moe_scope
from xpusim.ir.dtypes import DType
from xpusim.ir.graph import Graph
from xpusim.ir.op import Op, OpKind
from xpusim.ir.tensor import ROLES, Role, Tensor

BLOCK_SCALED_FP8 = "fp8-block-scaled"
"""Kernel scope of FP8 matmuls over 128 x 128 block-scaled weights (DeepSeek's format)."""
GROUPED_BLOCK_SCALED_FP8 = "fp8-block-scaled-grouped"
"""The same over a stack of expert weights: engines run fused-MoE kernels there (AITER's
fused_moe, DeepGEMM's grouped GEMMs), a different family from the dense GEMMs a
BLOCK_SCALED_FP8 table measured."""


def kernel_scope(op: Op) -> str:
    """The kernel family an op runs: BLOCK_SCALED_FP8 for a matmul whose weight is stored
    in the `fp8-block` layout (GROUPED_ over stacked expert weights), else its compute
    format's name (per-tensor FP8 is `fp8`)."""
    if _block_scaled_fp8(op):
        return GROUPED_BLOCK_SCALED_FP8 if len(op.inputs[1].shape) > 2 else BLOCK_SCALED_FP8
    return op.compute_dtype.value


def _block_scaled_fp8(op: Op) -> bool:
    """A matmul computing in FP8 over weights stored in the `fp8-block` layout."""
    weight_format = op.inputs[1].dtype if op.kind == OpKind.MATMUL and len(op.inputs) > 1 else None
    return getattr(weight_format, "name", None) == "fp8-block" and op.compute_dtype == DType.FP8


def is_decode_attention(op: Op) -> bool:
    """An attention op of a decode step (its `decode` attribute, from StepShape.decode: one
    token per sequence, or a speculative verify's K + 1, which the engines run in the same
    generation kernels over the same cache stream) over a cache of keys and values of one
    width: the layer builder's GQA/MHA decode, windowed or not; not latent (MLA) or
    compressed attention, nor a prefill chunk however short (the engines run those in their
    context kernels), which the decode_attention tables did not measure."""
    if op.kind != OpKind.ATTENTION or len(op.inputs) < 3 or op.attr("v_dim") or op.attr(
            "compress"):  # fmt: skip
        return False
    q, k, v = op.inputs[:3]
    return (bool(op.attr("decode")) and len(q.shape) == 4
            and k.role == Role.KV_CACHE and v.role == Role.KV_CACHE
            and k.shape[3] == v.shape[3] == q.shape[3])  # fmt: skip


def is_mla_decode(op: Op) -> bool:
    """An absorbed multi-head latent attention op (workloads/transformer.py latent_attention,
    built so in decode steps only): every head's query over one cached latent per token
    (one KV head, keys the latent and rope part, values the latent's first `v_dim`), dense
    (no sparse indexer's `top_k`, no compressed keys), which the mla_decode tables measured.
    A prefill's MLA (decompressed keys and values) is not one."""
    if op.kind != OpKind.ATTENTION or len(op.inputs) < 2 or op.attr("top_k") or op.attr(
            "compress"):  # fmt: skip
        return False
    q, cache = op.inputs[:2]
    return (op.attr("kv_heads") == 1 and bool(op.attr("v_dim")) and cache.role == Role.KV_CACHE
            and len(q.shape) == 4 and cache.shape[3] == q.shape[3] > op.attr("v_dim"))


def is_prefill_attention(op: Op) -> bool:
    """A causal attention op of a prefill chunk (no `decode` attribute) over keys and values
    of one width from the cache: the layer builder's GQA/MHA prefill, its cached prefix
    included (a chunk's FLOPs count its prefix's pairs), which the prefill_attention tables
    measured (TensorRT-LLM's context FMHA). Not a sliding window, a chunked (Llama-4) or
    compressed attention, a sparse `top_k`, an encoder's bidirectional attention, nor MLA
    (is_mla_prefill): the tables measured full causal attention over every key."""
    qkv = _dense_causal_prefill(op)
    if qkv is None or op.attr("v_dim"):
        return False
    q, k, v = qkv
    return (len(q.shape) == 4 and k.role == Role.KV_CACHE and v.role == Role.KV_CACHE
            and k.shape[3] == v.shape[3] == q.shape[3])  # fmt: skip


def is_mla_prefill(op: Op) -> bool:
    """Multi-head latent attention of a prefill chunk (workloads/transformer.py
    latent_attention's decompressed form: every head its own keys, `v_dim` values), dense
    and causal, which the mla_prefill tables measured; DeepSeek-V3.2's sparse MLA (`top_k`)
    is not."""
    qkv = _dense_causal_prefill(op)
    if qkv is None or not op.attr("v_dim"):
        return False
    q, k, v = qkv
    return (len(q.shape) == 4 and op.attr("kv_heads") == op.attr("heads")
            and k.shape[2] == q.shape[2] and k.shape[3] == q.shape[3] >= v.shape[3])


_NOT_FULL = ("window", "chunk", "compress", "top_k")
"""Attributes of attention that scores fewer pairs than full causal attention, with kernels
(sliding-window, chunked, sparse) the prefill tables did not measure."""


def _dense_causal_prefill(op: Op) -> tuple[Tensor, ...] | None:
    """Q, K and V of an attention op of a prefill chunk that scores every causal pair (no
    `decode`, none of _NOT_FULL), the attention both prefill table kinds measured; else None."""
    if (op.kind != OpKind.ATTENTION or len(op.inputs) < 3 or op.attr("decode")
            or not op.attr("causal", True) or any(op.attr(a) for a in _NOT_FULL)):  # fmt: skip
        return None
    return op.inputs[:3]
_SIXTEEN_BIT = {DType.FP16: DType.BF16}
"""Formats whose attention a table of another format measured: FP16 runs the BF16
tensor-core kernels at the same rate (a prefill's compute format), and an FP16 cache streams
the bytes of a BF16 one through the same generation kernel template (a decode's cache
format: TensorRT-LLM's kernels/decoderMaskedMultiheadAttention instantiates each head size's
launchers, INSTANTIATE_MMHA_LAUNCHERS, for half and __nv_bfloat16 alike)."""
FLOPS_KINDS = tuple(kind for kind, key in KEYED_BY.items() if key == "FLOPs")
"""Kernel table kinds keyed by an op's FLOPs (kernel_tables.KEYED_BY)."""


def kernel_keys(op: Op) -> tuple[tuple[str, str], ...]:
    """The (kind, scope) of the kernel tables that may price an op, in the order tried
    (cost/kernel_tables.py): a routed expert's matmul a moe table of its weights' format
    and its `moe_backend` (a run's setting; the default's table after it, where the chip has
    none of that backend) first, over block-scaled FP8 weights the per-tensor FP8 moe table
    next (_moe_of_layout), then, as every matmul, a gemm table of its kernel family;
    a decode attention op a decode_attention table of its cache's format, an MLA decode op
    an mla_decode table of its cache's format, a prefill's attention a prefill_attention
    table of its kernel's format (its compute format, FP16 runs BF16's kernels at BF16's
    rate), an MLA prefill an mla_prefill table of its keys' format; other ops none. An op
    stamped with its engine's own `kernels` (serving/engines.toml) tries each of those
    keys with each kernel's name before the key itself (kernel_tables.engine_scope): a
    table of that engine's kernel where the chip has one, else the key every engine's op
    takes, and only then the next key, so that an engine's own GEMM (SGLang's NVFP4
    linear) never prices a routed expert a moe table measured."""
    kernels = op.attr("kernels") or ()
    return tuple(key for kind, scope in _kernel_keys(op)
                 for key in (*((kind, engine_scope(scope, kernel)) for kernel in kernels),
                             (kind, scope)))  # fmt: skip


def _kernel_keys(op: Op) -> tuple[tuple[str, str], ...]:
    """kernel_keys of an op whatever its engine."""
    if is_decode_attention(op):
        cache = op.inputs[1].dtype
        return (("decode_attention", _SIXTEEN_BIT.get(cache, cache).value),)
    if is_mla_decode(op):
        return (("mla_decode", op.inputs[1].dtype.value),)
    if is_prefill_attention(op):
        return (("prefill_attention", _SIXTEEN_BIT.get(op.compute_dtype, op.compute_dtype).value),)
    if is_mla_prefill(op):
        return (("mla_prefill", op.inputs[1].dtype.value),)
    if op.kind != OpKind.MATMUL:
        return ()
    gemm = ("gemm", kernel_scope(op))
    if is_expert(op) and len(op.inputs) > 1:
        weight = op.inputs[1].dtype.value
        backend = op.attr("moe_backend") or DEFAULT_MOE_BACKEND
        own = (("moe", moe_scope(weight, backend)),) if backend != DEFAULT_MOE_BACKEND else ()
        return (*own, ("moe", weight), *_moe_of_layout(op), gemm)
    return (gemm,)


def _moe_of_layout(op: Op) -> tuple[tuple[str, str], ...]:
    """The moe key a routed expert over block-scaled FP8 weights tries where its chip has no
    table of that layout: the per-tensor FP8 one, the same grouped kernels over weights of
    the same width. A dense GEMM table is no stand-in for a grouped one: its fraction at the
    op's M (every token-expert pair) is that of one small dense GEMM, most of it the
    kernel's fixed time, and applied to the roofline of all the experts' weights it priced
    Qwen3-235B-A22B-FP8's decode experts on 4 B200 at 803 us a layer (64 sequences), where
    TensorRT-LLM's fused MoE of that shape measured 138 us (aiconfigurator's B200 table,
    FP8 per-tensor). Where both layouts were measured (TensorRT-LLM 1.3 on H100 and H200,
    118 rows of the same shape and tokens on each) the block-scaled layer is 1.15x and 1.11x
    the per-tensor one at the median, 0.84-2.79x in all, the most at prefill sizes
    (docs/cost.md, "Routed experts without a table of their layout")."""
    return (("moe", DType.FP8.value),) if _block_scaled_fp8(op) else ()


def kernel_shapes(op: Op) -> tuple[tuple[str, tuple[float, ...]], ...]:
    """(kind, shape) of an op as the kernel tables' rows name their shapes
    (kernel_tables.row_shapes), so that a table's rows of the op's own shape price it: a
    gemm's (N, K) of its weight; a routed expert's moe (hidden, inter per rank, topk,
    experts, ep), read off its gate_up (K hidden, N two inter) or down (K inter, N hidden)
    and the ep partitioning stamped (1 where it did not split the experts), its fused shared
    experts counted among the top-k and the experts, as the kernel runs them; a decode
    attention's (heads, kv heads, head_dim) on one rank, read off its query
    [batch, q, heads, head_dim] and key cache [batch, keys, kv heads, head_dim]; an MLA
    decode's (heads, kv_lora_rank, rope_dim) on one rank, its query's heads and its latent
    (v_dim) and rope widths: a kernel of 16 heads a GPU (DeepSeek at TP 8) is not timed by
    the 128-head rows of an attention-DP rank, slower at the same bytes."""
    if is_decode_attention(op):
        q, k = op.inputs[:2]
        return (("decode_attention", (float(q.shape[2]), float(k.shape[2]), float(q.shape[3]))),)
    if is_mla_decode(op):
        q, latent = op.inputs[0], float(op.attr("v_dim"))
        return (("mla_decode", (float(q.shape[2]), latent, float(q.shape[3]) - latent)),)
    if op.kind != OpKind.MATMUL:
        return ()
    k, n = (float(d) for d in op.weight_tile)
    shapes: tuple[tuple[str, tuple[float, ...]], ...] = (("gemm", (n, k)),)
    if is_expert(op) and op.attr("experts") and op.attr("experts_per_token"):
        hidden, inter = (k, n / 2) if op.attr("tp") == "expert_column" else (n, k)
        shared = float(op.attr("shared_experts", 0))  # fused into the kernel: top 9 of 257
        shapes += (("moe", (hidden, inter, float(op.attr("experts_per_token")) + shared,
                            float(op.attr("experts")) + shared,
                            float(op.attr("ep", 1)))),)  # fmt: skip
    return shapes


@dataclass(frozen=True)
class OpTable:
    ops: tuple[Op, ...]  # the first op of each signature
    index: np.ndarray  # (graph ops,) row of each op of the graph, in execution order
    count: np.ndarray  # (n,) how many ops share the signature (a compact graph's copies too)
    matrix_flops: np.ndarray  # (..., n)
    vector_flops: np.ndarray  # (..., n)
    role_bytes: np.ndarray  # (..., roles, n), roles in ROLES order
    weight_tile_kn: np.ndarray  # (2, n) K and N of each matmul's or conv's weight; else 0
    member_names: tuple[str, ...] = ()  # (graph ops,) every op's name, for `labels`
    # (GEMM row, all-reduce row, instances) of each GEMM run fused with its all-reduce
    # (cost/gemm_allreduce.py)
    fused: tuple[tuple[int, int, float], ...] = ()
    # (main rows, aux rows, instances) of each MoE layer whose shared experts run on a
    # second stream (cost/aux_stream.py)
    streams: tuple[tuple[tuple[int, ...], tuple[int, ...], float], ...] = ()

    def __len__(self) -> int:
        return len(self.ops)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(op.name for op in self.ops)

    @cached_property
    def labels(self) -> tuple[str, ...]:
        """A name for each row that covers all its ops: ops of one signature but different
        roles share a row (an embedding's all-reduce and every layer's after o_proj and
        down), and the first op's name alone mislabelled all 65 of them `embed.all_reduce`.
        A row of one role keeps its first op's name; a collective row names the ops it
        follows (`all_reduce after embed, o_proj, down`); other rows list their roles."""
        if not self.member_names:  # a subset of another table's rows
            return self.names
        roles: list[dict[str, None]] = [{} for _ in self.ops]
        for row, name in zip(self.index.tolist(), self.member_names, strict=True):
            roles[row].setdefault(_LAYER.sub("", name))
        labels = []
        for op, found in zip(self.ops, roles, strict=True):
            stems = list(found)
            if len(stems) <= 1:
                labels.append(op.name)
            elif op.kind is OpKind.COLLECTIVE:
                kind = str(op.attr("collective"))
                after = [s.removesuffix(f".{kind}") for s in stems]
                labels.append(f"{kind} after {', '.join(after)}")
            else:
                labels.append(", ".join(stems))
        return tuple(labels)

    @property
    def kinds(self) -> tuple[OpKind, ...]:
        return tuple(op.kind for op in self.ops)

    @cached_property
    def is_attention(self) -> np.ndarray:
        """Which ops are attention, as a mask: kernel tables key those by the bytes they
        stream (a prefill's by its FLOPs: keyed_by_flops), not by M
        (roofline.kernel_floor_s, on every costing)."""
        return np.array([op.kind == OpKind.ATTENTION for op in self.ops], dtype=bool)

    @cached_property
    def keyed_by_flops(self) -> np.ndarray:
        """Which ops the kernel tables key by FLOPs (FLOPS_KINDS: prefill attention), as a
        mask; other attention ops by bytes, matmuls by M."""
        return np.array([bool(keys) and keys[0][0] in FLOPS_KINDS for keys in self.kernel_keys],
                        dtype=bool)  # fmt: skip

    @property
    def dtypes(self) -> tuple[DType, ...]:
        """Compute format of each op's matrix work."""
        return tuple(op.compute_dtype for op in self.ops)

    @property
    def kernel_keys(self) -> tuple[tuple[tuple[str, str], ...], ...]:
        """Which kernel tables may price each op (kernel_keys): a matmul over a block-scaled
        FP8 weight (the checkpoint's `fp8-block` layout, workloads/checkpoint.py) runs
        block-scaled FP8 kernels, a routed expert's matmul fused-MoE kernels first."""
        return tuple(kernel_keys(op) for op in self.ops)

    @property
    def kernel_shapes(self) -> tuple[tuple[tuple[str, tuple[float, ...]], ...], ...]:
        """Each op's shape as the kernel tables name it (kernel_shapes)."""
        return tuple(kernel_shapes(op) for op in self.ops)

    @cached_property
    def sequence_bytes(self) -> tuple[float, ...]:
        """Each decode attention or MLA decode op's bytes other than its cache's per sequence
        (its query, the new keys and values it reads, its output), 0 for other ops: what its
        bytes other than the cache's are divided by to count its sequences, on which a decode
        table's least time per sequence floors it, and an MLA decode table's least time per
        cached byte of one sequence (roofline.kernel_floor_s)."""
        return tuple(_sequence_bytes(op) if is_decode_attention(op) or is_mla_decode(op)
                     else 0.0 for op in self.ops)  # fmt: skip

    @cached_property
    def structure(self) -> tuple:
        """What a chip's per-op figures depend on: each op's kind, format, kernel family and
        shape, its bytes per sequence where it is decode attention, and whether it does
        matrix work at all."""
        return (self.kinds, self.dtypes, self.kernel_keys, self.kernel_shapes,
                self.sequence_bytes, tuple(self.has_matrix.tolist()))

    @cached_property
    def has_matrix(self) -> np.ndarray:
        """Whether each op does matrix work in any row: only those are priced by a peak
        and a kernel table (roofline's HardwareArrays.build, engine_kernels.kernels_priced),
        so the one test is kept here for every reader of it."""
        return self.matrix_flops.reshape(-1, len(self)).max(axis=0) > 0

    @cached_property
    def collectives(self) -> tuple[tuple[tuple[int, Op], ...], tuple]:
        """The collective ops (position, op) and what their lines depend on besides their
        bytes (cost/collectives.py). Kept on the table, so that it lives as long as the
        table does: a memo holding tables kept 4,096 of them alive (400 MB in a long-lived
        `xpusim web`, benchmarks/bench_web.py)."""
        collectives = tuple((i, op) for i, op in enumerate(self.ops)
                            if op.kind is OpKind.COLLECTIVE)  # fmt: skip
        signature = tuple((i, op.attr("collective"), op.attr("group"), op.attr("size"),
                           op.attr("kernels")) for i, op in collectives)  # fmt: skip
        return collectives, signature

    @property
    def activation_bytes(self) -> np.ndarray:
        return self.role_bytes[..., ROLES.index(Role.ACTIVATION), :]

    def broadcast(self, leading: tuple[int, ...]) -> OpTable:
        """The table with its leading axes in full (a graph over a shape axis leaves an axis
        its counts do not vary on at 1), so that configurations can index them."""
        n = len(self)
        return replace(self, matrix_flops=np.broadcast_to(self.matrix_flops, (*leading, n)),
                       vector_flops=np.broadcast_to(self.vector_flops, (*leading, n)),
                       role_bytes=np.broadcast_to(self.role_bytes, (*leading, len(ROLES), n)))

    def subset(self, steps: np.ndarray | None = None, ops: np.ndarray | None = None) -> OpTable:
        """Some steps (of a table with a leading step axis) and some ops (by position); a
        table of some ops is for costing them, its `index` no longer says where they run."""
        def cut(values: np.ndarray, op_axis: int = -1) -> np.ndarray:
            if steps is not None:
                values = values[steps]
            return values if ops is None else np.take(values, ops, axis=op_axis)

        return replace(
            self,
            ops=self.ops if ops is None else tuple(self.ops[i] for i in ops),
            count=self.count if ops is None else self.count[ops],
            matrix_flops=cut(self.matrix_flops),
            vector_flops=cut(self.vector_flops),
            role_bytes=cut(self.role_bytes),
            weight_tile_kn=self.weight_tile_kn if ops is None else self.weight_tile_kn[:, ops],
            member_names=self.member_names if ops is None else (),  # `index` no longer holds
            fused=self.fused if ops is None else (),
            streams=self.streams if ops is None else (),
        )


def _sequence_bytes(op: Op) -> float:
    """A decode attention or MLA decode op's bytes other than its cache's over its sequences
    (its query's first dimension): the same at every batch of a shape axis."""
    by_role = op.bytes_by_role()
    other = sum(b for role, b in by_role.items() if role != Role.KV_CACHE)
    return float(np.max(np.asarray(other / op.inputs[0].shape[0], dtype=float)))


def op_table(graph: Graph) -> OpTable:
    """The graph's distinct ops and their counts; for a graph built over a shape axis
    (ir/tensor.py), each count column is an array over it: (shapes, n)."""
    groups: dict[tuple, int] = {}
    first: list[Op] = []
    index = np.empty(len(graph.ops), dtype=np.intp)
    for i, op in enumerate(graph.ops):
        row = groups.setdefault(op.signature, len(first))
        if row == len(first):
            first.append(op)
        index[i] = row
    by_role = [op.bytes_by_role() for op in first]
    role_bytes = np.stack(np.broadcast_arrays(*[_columns([b[r] for b in by_role])
                                                for r in ROLES]), axis=-2)  # fmt: skip
    tiles = np.array([op.weight_tile for op in first], dtype=float).T.reshape(2, len(first))
    copies = [graph.copies(op) for op in graph.ops]
    return OpTable(
        ops=tuple(first),
        index=index,
        count=np.bincount(index, weights=copies, minlength=len(first)),
        matrix_flops=_columns([op.matrix_flops for op in first]),
        vector_flops=_columns([op.vector_flops for op in first]),
        role_bytes=role_bytes,
        weight_tile_kn=tiles,
        member_names=tuple(op.name for op in graph.ops),
        fused=fused_pairs(graph.ops, index, copies),
        streams=stream_groups(graph.ops, index, copies),
    )


_LAYER = re.compile(r"^layers\.\d+\.")  # a layer's index: the same role in every layer


def _columns(values: list[float | np.ndarray]) -> np.ndarray:
    """One value per op, numbers or arrays over a shape axis, as (..., ops) floats."""
    if not any(isinstance(v, np.ndarray) for v in values):
        return np.array(values, dtype=float)
    return np.stack(np.broadcast_arrays(*values), axis=-1).astype(float)


def distinct_stage_counts(
    table: OpTable, op_counts: np.ndarray, mask: np.ndarray | None = None
) -> np.ndarray:
    """(distinct ops, stages) instances each stage runs, from the graph's (ops, stages)
    counts (compiler/partition.op_stage_counts), of the ops where `mask` is set if given."""
    counts = np.zeros((len(table), op_counts.shape[1]))
    np.add.at(counts, table.index, op_counts if mask is None else op_counts * mask[:, None])
    return counts
