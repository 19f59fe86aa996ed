"""Partitioning: one model graph and a parallelism plan in, per-chip graphs out.

Tensor parallelism follows Megatron-LM (Shoeybi et al. 2019, section 3): the first matmul of
a block is split by columns and the second by rows, so each block needs one all-reduce of
its output; attention is split by heads (KV heads are replicated when there are fewer of
them than ranks, as in Megatron's GQA support); the embedding and LM head are split over
the vocabulary. Expert parallelism works as the serving engines run it (SGLang, vLLM,
TensorRT-LLM): an MoE layer's experts are spread over `ep` of the SAME `tp` chips that run
attention, each expert split tensor-parallel over the tp/ep chips left (SGLang's
moe_tp_size = tp_size / ep_size, TensorRT-LLM's moe_tp x moe_ep = tp). Attention is split
by heads over the tp chips, or, with `dp_attention` (SGLang's and TensorRT-LLM's attention
data parallelism), runs whole on every chip for its own 1/tp of the sequences. Tokens reach
their experts as engines send them: with attention split by heads every chip already holds
every token, and the experts' partial outputs are all-reduced (moe_expert.py); with
attention data parallelism an all-to-all dispatches each token to the chips of its top-k
experts and another brings the results back (DeepEP's dispatch and combine) when every chip
holds whole experts (ep = tp), else an all-gather brings every token to every chip and a
reduce-scatter returns each chip's (SGLang's gather into a tensor-parallel MoE). Pipeline
parallelism cuts the layer sequence into `pp` stages; data parallelism replicates everything.

The builder tags each op with how it splits (`tp` attribute) and with its layer; this pass
only applies those rules, so it knows no model by name. All ranks of a tensor/expert group
run the same graph, so one rank's graph stands for all of them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from xpusim.compiler import moe_expert
from xpusim.errors import UserError
from xpusim.ir.dtypes import DType, Format, kept_wide, weight_parts
from xpusim.ir.graph import Graph
from xpusim.ir.op import Op, OpKind
from xpusim.ir.tensor import Dim, Role, Tensor, dim_key
from xpusim.memo import remembered, scoped
from xpusim.workloads.transformer_config import (
    TransformerConfig,
    expected_active_experts,
    routed_load,
)


@dataclass(frozen=True)
class Plan:
    tp: int = 1  # chips of one pipeline stage of one replica, which attention splits by heads
    pp: int = 1  # pipeline stages
    dp: int = 1  # data-parallel replicas
    ep: int = 1  # MoE: the tp chips the experts are spread over (engines' --ep; divides tp)
    # chips each pipeline stage's layers run across in turn, consecutive slices of its ops
    # on consecutive chips: a pipeline deeper than the model's layers (Groq's 576 chips are
    # 72 stages of 8, cost/stream_machine.py). 1: a stage is one chip (of its tp group).
    chain: int = 1
    # attention data parallelism (SGLang's --enable-dp-attention, TensorRT-LLM's
    # enable_attention_dp): each of the tp chips runs attention whole for its own 1/tp of
    # the sequences, with its own KV cache, instead of splitting heads
    dp_attention: bool = False

    @property
    def chips(self) -> int:
        return self.tp * self.pp * self.dp * self.chain

    @property
    def attention_tp(self) -> int:
        """Chips attention (and the dense layers, embedding and LM head) is split over."""
        return 1 if self.dp_attention else self.tp

    @property
    def attention_dp(self) -> int:
        """Chips of a stage that each run attention for their own share of the sequences."""
        return self.tp if self.dp_attention else 1

    @property
    def expert_tp(self) -> int:
        """Chips each expert's matrices are split over: the tp chips ep leaves."""
        return max(self.tp // self.ep, 1)

    @property
    def rank(self) -> Plan:
        """What shapes one chip's graph: the split, not the pipeline or the replicas."""
        return Plan(tp=self.tp, ep=self.ep, dp_attention=self.dp_attention)

    @property
    def hops(self) -> int:
        """Sends on a token's trip through the pipeline: one between consecutive chips."""
        return self.pp * self.chain - 1

    def to_dict(self) -> dict[str, int]:
        degrees = {"tp": self.tp, "pp": self.pp, "dp": self.dp, "ep": self.ep}
        return (degrees | ({"chain": self.chain} if self.chain > 1 else {})
                | ({"dp_attention": 1} if self.dp_attention else {}))  # fmt: skip

    def __str__(self) -> str:
        return plan_text(self.to_dict())


def plan_text(degrees: Mapping[str, int | None], sep: str = " x ") -> str:
    """A plan as people write it (also from a result row's plan.* columns): the degrees
    that multiply chips joined by `sep` ('tp8 x pp2'), then the two that add none, experts
    spread over the tp chips and attention data parallelism ('tp8, ep8, dp-attention');
    '1 chip' when nothing is split."""
    text = sep.join(f"{k}{degrees[k]}" for k in ("tp", "pp", "dp", "chain")
                    if (degrees.get(k) or 1) > 1) or "1 chip"  # fmt: skip
    text += f", ep{degrees['ep']}" if (degrees.get("ep") or 1) > 1 else ""
    return text + (", dp-attention" if degrees.get("dp_attention") == 1 else "")


def complete_plan(chips: int, tp: int | None, pp: int | None, dp: int | None,
                  ep: int | None, dp_attention: bool = False) -> Plan:  # fmt: skip
    """Missing degrees are 1, except dp, which takes up the chips the others leave, and,
    under attention data parallelism, tp, which takes the chips pp and dp leave (--ep
    spreads experts over the tp chips: it adds none)."""
    pp, ep = pp or 1, ep or 1
    tp = tp or (max(chips // (pp * (dp or 1)), 1) if dp_attention else 1)
    return Plan(tp=tp, pp=pp, dp=dp or max(chips // (tp * pp), 1), ep=ep,
                dp_attention=bool(dp_attention))


def check_plan(plan: Plan, cfg: TransformerConfig, chips: int) -> None:
    """Raises a UserError saying why a plan cannot run this model on this many chips."""
    if cfg.ssm and plan.tp > 1:
        raise UserError(f"--tp {plan.tp}: tensor parallelism of {cfg.name}'s state-space "
                        "layers is not modelled yet; split it with --pp or --dp")  # fmt: skip
    if cfg.is_encoder_decoder and plan.pp > 1:
        raise UserError(f"--pp {plan.pp}: pipeline stages over {cfg.name}'s encoder and "
                        "decoder are not modelled yet; split it with --tp or --dp")  # fmt: skip
    if cfg.num_heads % plan.tp:
        raise UserError(
            f"--tp {plan.tp} does not divide {cfg.name}'s {cfg.num_heads} attention heads"
        )
    if plan.pp > cfg.num_layers:
        raise UserError(f"--pp {plan.pp} exceeds {cfg.name}'s {cfg.num_layers} layers")
    if plan.ep > 1 and (not cfg.is_moe or cfg.num_experts % plan.ep):
        raise UserError(
            f"--ep {plan.ep} needs an MoE model whose expert count it divides "
            f"({cfg.name} has {cfg.num_experts} expert(s) per layer)"
        )
    check_expert_plan(plan.tp, plan.ep, plan.pp, chips)
    if plan.dp_attention and plan.pp > 1:
        raise UserError("--dp-attention with --pp is not modelled; give --pp 1")
    if plan.dp < 1 or plan.chips != chips:
        raise UserError(
            f"plan tp {plan.tp} x pp {plan.pp} x dp {plan.dp} = {plan.chips} "
            f"chips, but --chips is {chips}"
        )


def check_expert_plan(tp: int, ep: int, pp: int, chips: int) -> None:
    """--ep spreads experts over the --tp chips, as engines mean it; the product form (tp x
    ep chips, this project's before 2026-12) is refused with the engines' spelling."""
    if ep <= tp and tp % ep == 0:
        return
    if tp * ep * pp == chips:
        raise UserError(f"--tp {tp} --ep {ep} is {tp * ep * pp} chips in the old product "
                        "form; --ep now spreads experts over the --tp chips, as engines "
                        f"mean it: write --tp {tp * ep} --ep {ep} (add --dp-attention for "
                        "attention data parallelism)")  # fmt: skip
    raise UserError(f"--ep {ep} must divide --tp {tp}: experts are spread over the chips "
                    "attention runs on (engines' meaning)")


@scoped(maxsize=1024)
def layers_per_stage(num_layers: int, pp: int) -> tuple[int, ...]:
    """Layers each pipeline stage holds, in order: as even as possible, remainders to the
    inner stages (the first stage also holds the embedding and the last the LM head).
    Stages hold contiguous runs of layers, so counts say everything and cost O(pp), not
    O(layers): a model's size never enters as a loop."""
    base, extra = divmod(num_layers, pp)
    inner = [*range(1, pp - 1), 0, pp - 1] if pp > 2 else list(range(pp))
    counts = [base] * pp
    for stage in inner[:extra]:
        counts[stage] += 1
    return tuple(counts)


def stage_spread(num_layers: int, pp: int, first: int, copies: int = 1) -> np.ndarray:
    """(pp,) how many of the layers first .. first + copies - 1 each stage holds."""
    counts = np.array(layers_per_stage(num_layers, pp))
    ends = np.cumsum(counts)
    starts = ends - counts
    return np.clip(np.minimum(ends, first + copies) - np.maximum(starts, first), 0, None)


def op_stage_counts(graph: Graph, num_layers: int, pp: int) -> np.ndarray:
    """(ops, pp): how many instances of each op each stage runs; an op of a compact graph's
    copied layer counts once in the stage of every layer it stands for."""
    ends = np.cumsum(layers_per_stage(num_layers, pp))
    layers = np.array([op.layer for op in graph.ops], dtype=int)
    inside = np.searchsorted(ends, np.clip(layers, 0, num_layers - 1), side="right")
    stage = np.where(layers < 0, 0, np.where(layers >= num_layers, pp - 1, inside))
    counts = np.zeros((len(graph.ops), pp))
    counts[np.arange(len(graph.ops)), stage] = 1.0
    for layer, copies in graph.layer_copies.items():  # a compact graph's stand-in layers
        if copies > 1:
            counts[layers == layer] = stage_spread(num_layers, pp, layer, copies)
    return counts


def op_stages(graph: Graph, num_layers: int, pp: int) -> list[int]:
    """Stage of every op of a full (not compact) graph, where each op runs on one stage:
    ops before the first layer go to stage 0, after the last to pp-1."""
    if graph.layer_copies:
        raise ValueError("a compact graph's ops run on several stages: use op_stage_counts")
    return op_stage_counts(graph, num_layers, pp).argmax(axis=1).tolist()


def _ceil_div(n: Dim, parts: Dim) -> Dim:
    return -(-n // parts)


def _resized(t: Tensor, *shape: Dim) -> Tensor:
    return Tensor(t.name, tuple(shape), t.dtype, t.role)


def _last(t: Tensor, width: int) -> Tensor:
    return _resized(t, *t.shape[:-1], width)


def collective(kind: str, group: str, size: int, t: Tensor, after: Op) -> Op:
    """A collective over t for the op `after` (which reads t as it was). Its output is named
    after that op: under sequence parallelism a forward matmul and its weight gradient each
    gather the same tensor, and two outputs of one name would be one tensor to the liveness
    analysis, kept whole from the forward pass to the backward (Megatron-LM gathers again
    instead; Korthikanti et al. 2022, section 4.2.2). It carries that op's engine `kernels`
    (serving/engines.toml): an engine's own all-reduce prices it (cost/collectives.py)."""
    out = Tensor(f"{after.name}.{kind}.out", t.shape, t.dtype, t.role)
    attrs: tuple[tuple[str, object], ...] = (("collective", kind), ("group", group),
                                             ("size", size))  # fmt: skip
    if after.attr("kernels"):
        attrs = (*attrs, ("kernels", after.attr("kernels")))
    return Op(OpKind.COLLECTIVE, f"{after.name}.{kind}", (t,), (out,), attrs, after.layer)


class _Sharder:
    def __init__(self, plan: Plan, sequence_parallel: bool = False):
        self.plan = plan
        self.tp, self.ep = plan.attention_tp, plan.ep  # self.tp: what splits attention
        self.sp = sequence_parallel and plan.tp > 1
        self.experts: dict[tuple, tuple[Dim, Dim]] = {}
        # under attention data parallelism, what a chip gets back of each expert output:
        # its own tokens' (x top-k after an all-to-all combine, summed after a reduce-scatter)
        self.expert_outputs: dict[str, Tensor] = {}
        self.parts: dict[tuple, tuple[Dim, Dim]] = {}  # dimension, parts -> (it, its part)

    def split(self, n: int) -> int:
        return _ceil_div(n, self.tp)

    def __call__(self, op: Op) -> list[Op]:
        if op.attr("fused") == "all_reduce" and self.tp > 1:
            return []  # the all-reduce before it runs it (transformer.ALLREDUCE_NORM)
        rule = op.attr("tp")
        if self.sp and rule is None:
            return self._sequence(op)
        expert = moe_expert.is_expert(op)
        if self.plan.dp_attention and not expert:
            return [self._own_sequences(op)]
        if rule is None or (self.plan.tp == 1 and self.ep == 1):
            return [op]
        ops = getattr(self, f"_{rule}")(op)
        if self.sp and self._gathers(op, str(rule)):
            ops.insert(0, collective("all_gather", "tp", self.tp, op.inputs[0], op))
        return ops

    def _with(self, op: Op, ins: list[Tensor], outs: list[Tensor]) -> Op:
        return Op(op.kind, op.name, tuple(ins), tuple(outs), op.attrs, op.layer)

    def _all_reduce(self, op: Op) -> list[Op]:
        """Partial sums are all-reduced, or reduce-scattered over the sequence under
        sequence parallelism (the same bytes cross the links: half now, half in the
        all-gather before the next column-split op)."""
        kind = "reduce_scatter" if self.sp else "all_reduce"
        return [op] + [collective(kind, "tp", self.tp, op.outputs[0], op)] * (self.tp > 1)

    # --- sequence parallelism (Korthikanti et al. 2022) ---------------------------------
    def _gathers(self, op: Op, rule: str) -> bool:
        """Ops that read a whole sequence a sequence-split op wrote: column-split matmuls
        (forward, and their weight gradient, which gathers its input again rather than
        stash it whole), a row-split matmul's input gradient and the embedding gradient."""
        if op.kind is OpKind.SCATTER_ADD:
            return True
        return op.kind is OpKind.MATMUL and rule in ("column", "heads", "split_n")

    def _sequence(self, op: Op) -> list[Op]:
        """An op tensor parallelism replicates (norms, residual adds) runs on 1/tp of the
        tokens instead; the weight gradients it computes from them are then partial sums."""

        def shard(t: Tensor) -> Tensor:
            if t.role is not Role.ACTIVATION or len(t.shape) < 3:
                return t
            return _resized(t, t.shape[0], self.split(t.shape[1]), *t.shape[2:])

        sharded = self._with(op, list(map(shard, op.inputs)), list(map(shard, op.outputs)))
        partial = [t for t in op.outputs if t.role is Role.WEIGHT]
        return [sharded, *(collective("all_reduce", "tp", self.tp, t, op) for t in partial)]

    def _column(self, op: Op) -> list[Op]:
        x, w, *bias = op.inputs
        n = self.split(w.shape[-1])
        ins = [x, _last(w, n), *(_last(b, n) for b in bias)]
        return [self._with(op, ins, [_last(op.outputs[0], n)])]

    def _row(self, op: Op) -> list[Op]:
        """A row-split matmul: partial sums, all-reduced; a shared expert's down projection
        (`reduced_with` "experts") leaves its partial sums to the routed experts' all-reduce
        of the same tokens over the same chips (_dispatch), as engines sum the two first.
        Under sequence parallelism (training) it keeps its own reduce-scatter."""
        x, w, *bias = op.inputs
        k = self.split(w.shape[-2])
        sharded = self._with(op, [_last(x, k), _resized(w, *w.shape[:-2], k, w.shape[-1]),
                                  *bias], list(op.outputs))  # fmt: skip
        if op.attr("reduced_with") == "experts" and not self.sp:
            return [sharded]
        return self._all_reduce(sharded)

    def _split(self, op: Op) -> list[Op]:
        def shard(t: Tensor) -> Tensor:
            return _last(t, self.split(t.shape[-1]))

        return [self._with(op, list(map(shard, op.inputs)), list(map(shard, op.outputs)))]

    def _head_split(self, op: Op) -> tuple[dict[int, int], dict[int, int]]:
        """One rank's widths of the fused head dimensions, and its (KV) head counts."""
        h, kvh, d = (int(op.attr(k)) for k in ("heads", "kv_heads", "head_dim"))
        h_rank, kv_rank = self.split(h), max(1, self.split(kvh))
        widths = {(h + 2 * kvh) * d: (h_rank + 2 * kv_rank) * d,
                  (h + kvh) * d: (h_rank + kv_rank) * d, h * d: h_rank * d}  # fmt: skip
        if op.attr("gated"):  # q_proj also writes the output gate (Qwen3-Next)
            widths[(2 * h + 2 * kvh) * d] = (2 * h_rank + 2 * kv_rank) * d
        v = op.attr("v_dim")  # values narrower or wider than the keys (latent attention)
        if v is not None:
            widths[h * int(v)] = h_rank * int(v)
        return widths, {h: h_rank, kvh: kv_rank}

    def _heads(self, op: Op) -> list[Op]:
        """QKV projection, rotary embedding and attention: split by (KV) heads."""
        widths, heads = self._head_split(op)

        def shard(t: Tensor) -> Tensor:
            if len(t.shape) == 4:  # [batch, seq, heads, head_dim]; one latent head stays
                b, s, n, hd = t.shape
                return _resized(t, b, s, heads.get(n, n), hd)
            return _last(t, widths.get(t.shape[-1], t.shape[-1]))

        # a projection's input is the full hidden state, whatever its width happens to equal
        ins = (
            op.inputs[:1] + tuple(map(shard, op.inputs[1:]))
            if op.kind is OpKind.MATMUL
            else (tuple(map(shard, op.inputs)))
        )
        return [self._with(op, list(ins), [shard(t) for t in op.outputs])]

    def _whole_heads(self, op: Op) -> list[Op]:
        """MiniMax-M2's q and k norms each span every head, so a rank split by heads holds
        part of each one's sum of squares: the engines all-reduce those sums, q's and k's
        concatenated, two FP32 a token, once a layer, between a sum-of-squares kernel and
        the scaling (vLLM's MiniMaxText01RMSNormTP.forward_qk; SGLang's MiniMaxM2QKRMSNorm
        ._forward_naive, its default). The norm's own work splits as the heads do."""
        ops = self._heads(op)
        if self.tp == 1:
            return ops
        out = op.outputs[0]
        sums = Tensor(f"{out.name}.sum_sq", (*out.shape[:-1], 2), DType.FP32, Role.ACTIVATION)
        return [*ops, collective("all_reduce", "tp", self.tp, sums, op)]

    def _linear_heads(self, op: Op) -> list[Op]:
        """Linear attention, its convolution and its gated norm, split by heads: the head
        axis of [batch, tokens, heads, width] activations and of [batch, heads, d_k, d_v]
        states, the channels (heads x a head's width) of [..., channels] tensors and of a
        convolution's [channels, kernel] weight; a norm weight one head wide, shared by
        the heads, is whole on every rank."""
        heads = int(op.attr("heads"))

        def shard(t: Tensor) -> Tensor:
            shape = list(t.shape)
            if len(shape) == 4:
                axis = 1 if t.role is Role.KV_CACHE else 2
            elif t.role is Role.WEIGHT:
                axis = 0
                if len(shape) == 1 and shape[0] != heads:
                    return t
            else:
                axis = len(shape) - 1
            shape[axis] = self.split(shape[axis])
            return _resized(t, *shape)

        return [self._with(op, list(map(shard, op.inputs)), list(map(shard, op.outputs)))]

    def _head_batch(self, op: Op) -> list[Op]:
        """A matmul batched over heads ([heads, tokens, k] x [heads, k, n], latent
        attention's absorbed projections): each rank runs its heads."""
        def shard(t: Tensor) -> Tensor:
            return _resized(t, self.split(t.shape[0]), *t.shape[1:])

        return [self._with(op, list(map(shard, op.inputs)), list(map(shard, op.outputs)))]

    def _part(self, op: Op, n: int) -> int:
        """One rank's share of a dimension of n split by tensor parallelism."""
        if op.attr("heads") is None:
            return self.split(n)
        return self._head_split(op)[0].get(n, self.split(n))

    def _split_dim(self, op: Op, dim: str) -> Op:
        """A matmul with its logical dimension `dim` (m, k or n of [M, K] x [K, N]) split,
        whatever layout its operands are stored in (transpose flags)."""
        a, b, *rest = op.inputs
        ta, tb = bool(op.attr("transpose_a")), bool(op.attr("transpose_b"))
        axes = {  # (operand index: 0 = a, 1 = b, 2 = output; its stored axis)
            "m": ((0, -1 if ta else -2), (2, -2)),
            "k": ((0, -2 if ta else -1), (1, -1 if tb else -2)),
            "n": ((1, -2 if tb else -1), (2, -1)),
        }[dim]
        tensors = [a, b, op.outputs[0]]
        first, axis = axes[0]
        part = self._part(op, tensors[first].shape[axis])
        for i, axis in axes:
            shape = list(tensors[i].shape)
            shape[axis] = part
            tensors[i] = _resized(tensors[i], *shape)
        return self._with(op, [tensors[0], tensors[1], *rest], [tensors[2]])

    def _split_k(self, op: Op) -> list[Op]:
        """Backward of a column-split matmul's input: partial sums, then an all-reduce."""
        return self._all_reduce(self._split_dim(op, "k"))

    def _split_n(self, op: Op) -> list[Op]:
        return [self._split_dim(op, "n")]

    def _split_m(self, op: Op) -> list[Op]:
        return [self._split_dim(op, "m")]

    def _vocab(self, op: Op) -> list[Op]:
        """Vocabulary-parallel embedding (then all-reduce) and LM head (then all-gather);
        in training, the embedding's gradient, and the cross-entropy over split logits
        (Megatron's: all-reduces of each token's max, sum of exponentials and target logit)."""
        if op.kind in (OpKind.SOFTMAX, OpKind.ELEMENTWISE, OpKind.SCATTER_ADD):
            return self._vocab_training(op)
        if op.kind is OpKind.EMBEDDING:
            table, ids = op.inputs
            sharded = self._with(op, [_resized(table, self.split(table.shape[0]),
                                               table.shape[1]), ids], list(op.outputs))  # fmt: skip
            return self._all_reduce(sharded)
        head = self._column(op)[0]
        if self.tp == 1:
            return [head]
        # over the whole logits, as every collective's tensor is the whole one: the bytes
        # cost/collectives.py's S and nccl-tests' all_gather_perf size count (its output);
        # it was the rank's shard, costing the gather 1/tp of its bytes
        return [head, collective("all_gather", "tp", self.tp, op.outputs[0], op)]

    def _vocab_training(self, op: Op) -> list[Op]:
        vocab = op.outputs[0].shape[0] if op.kind is OpKind.SCATTER_ADD else op.inputs[0].shape[-1]

        def shard(t: Tensor) -> Tensor:  # the axis of the vocabulary, if t has one
            shape = list(t.shape)
            if vocab in shape[-2:]:
                shape[shape.index(vocab, len(shape) - 2)] = self.split(vocab)
            return _resized(t, *shape)

        keep = 2 if op.kind is OpKind.SCATTER_ADD else 0  # a gradient and its ids
        ins = [*op.inputs[:keep], *map(shard, op.inputs[keep:])]
        sharded = self._with(op, ins, list(map(shard, op.outputs)))
        if op.kind is not OpKind.SOFTMAX or self.tp == 1:
            return [sharded]
        loss = op.outputs[-1]
        stats = Tensor(f"{loss.name}.stats", (*loss.shape, 3), loss.dtype, loss.role)
        return [sharded, collective("all_reduce", "tp", self.tp, stats, op)]

    def _part_of(self, d: Dim, parts: int) -> Dim:
        """ceil(d / parts), one object per dimension object: layers that shared an array
        dimension share its part, and stay one op signature (ir/tensor.dim_key)."""
        key = (dim_key(d), parts)
        if key not in self.parts:
            self.parts[key] = (d, _ceil_div(d, parts))  # d kept: its id stays its own
        return self.parts[key][1]

    # --- attention data parallelism ---------------------------------------------------
    def _own_sequences(self, op: Op) -> Op:
        """An op outside the experts under attention data parallelism: whole weights, on
        this chip's 1/tp of the sequences (the leading axis of its activations and cache;
        the second of a head-batched matmul's [heads, tokens, k]); an expert output it
        reads is what the combine brought back of it (_expert_row)."""
        axis = 1 if op.attr("tp") == "head_batch" else 0
        parts = self.plan.attention_dp

        def shard(t: Tensor) -> Tensor:
            if t.name in self.expert_outputs:
                return self.expert_outputs[t.name]
            if t.role is Role.WEIGHT or len(t.shape) < 2:
                return t
            shape = list(t.shape)
            shape[axis] = self._part_of(shape[axis], parts)
            return _resized(t, *shape)

        return self._with(op, list(map(shard, op.inputs)), list(map(shard, op.outputs)))

    # --- experts (engines' expert parallelism over the tp chips) ------------------------
    def _experts(self, op: Op) -> tuple[Dim, Dim]:
        """(experts one chip runs, its token-expert pairs) for the stage's tokens, on the
        busiest chip: its pairs (moe_expert.busiest_rank_pairs) land on the distinct
        experts of its experts / ep they are expected to touch (expected_active_experts, a
        pair at a time: at small batch a chip reads only those experts' weights); the pairs
        are its grouped GEMMs' rows (workloads/transformer.py moe). One chip (ep 1) runs
        the experts the tokens touch, k at a time, and the shared experts an engine runs
        inside the routed kernel (`shared_experts`, workloads/transformer.py
        FUSED_SHARED_EXPERT; never under expert parallelism), every token's. Kept per token
        count, so that every expert op of the graph gets the same dimensions."""
        tokens, experts, per_token, alpha = (op.attr(k) for k in (
            "tokens", "experts", "experts_per_token", "routing_alpha"))  # fmt: skip
        shared = int(op.attr("shared_experts", 0))
        key = (dim_key(tokens), experts, per_token, alpha, shared)
        if key not in self.experts:
            if self.ep == 1:
                mine, pairs = routed_load(tokens, int(experts), int(per_token), shared)
            else:
                assert not shared, "fused shared experts under expert parallelism"
                pairs = moe_expert.busiest_rank_pairs(tokens, int(per_token), int(experts),
                                                      self.ep, alpha)  # fmt: skip
                mine = expected_active_experts(pairs, _ceil_div(int(experts), self.ep), 1)
            self.experts[key] = mine, pairs
        return self.experts[key]

    def _tokens(self, op: Op, name: str, parts: int = 1, copies: int = 1) -> Tensor:
        """The stage's tokens (1/parts of them) as [tokens, copies, hidden] activations: what
        a dispatch, combine or all-reduce moves."""
        x = op.outputs[0] if op.attr("tp") == "expert_row" else op.inputs[0]
        tokens = self._part_of(op.attr("tokens"), parts)
        return Tensor(f"{op.name}.{name}", (tokens, copies, x.shape[-1]), x.dtype, x.role)

    def _dispatch(self, op: Op, combine: bool) -> list[Op]:
        """How tokens reach their experts and come back (the module docstring's three
        forms): nothing to send and an all-reduce of the partial sums with attention split
        by heads; with attention data parallelism, all-to-alls of each chip's tokens x
        top-k (DeepEP's dispatch, combine) where chips hold whole experts, else an
        all-gather and a reduce-scatter of every token."""
        plan, k = self.plan, int(op.attr("experts_per_token"))
        if plan.tp == 1:
            return []
        if not plan.dp_attention:
            return [collective("all_reduce", "ep", plan.tp, self._tokens(op, "sum"), op)] \
                if combine else []
        if plan.ep == plan.tp:
            sent = self._tokens(op, "routed", plan.tp, k)
            a2a = collective("all_to_all", "ep", plan.tp, sent, op)
            # which of the two it is: their measured kernels differ (cost/ep_alltoall.py)
            step = ("step", "combine" if combine else "dispatch")
            return [Op(a2a.kind, a2a.name, a2a.inputs, a2a.outputs, (*a2a.attrs, step), a2a.layer)]
        kind = "reduce_scatter" if combine else "all_gather"
        return [collective(kind, "ep", plan.tp, self._tokens(op, "all"), op)]

    def _expert_column(self, op: Op) -> list[Op]:
        x, w = op.inputs
        e, pairs = self._experts(op)
        n = _ceil_div(w.shape[-1], self.plan.expert_tp)
        sharded = self._expert_matmul(op, [_resized(x, 1, pairs, x.shape[-1]),
                                           _resized(w, e, w.shape[1], n)],
                                      [_resized(op.outputs[0], 1, pairs, n)])  # fmt: skip
        return [*self._dispatch(op, combine=False), sharded]

    def _expert_split(self, op: Op) -> list[Op]:
        _, pairs = self._experts(op)

        def shard(t: Tensor) -> Tensor:
            return _resized(t, 1, pairs, _ceil_div(t.shape[-1], self.plan.expert_tp))

        return [self._with(op, list(map(shard, op.inputs)), list(map(shard, op.outputs)))]

    def _expert_row(self, op: Op) -> list[Op]:
        x, w = op.inputs
        e, pairs = self._experts(op)
        k = _ceil_div(w.shape[-2], self.plan.expert_tp)
        out = _resized(op.outputs[0], 1, pairs, w.shape[-1])
        if self.plan.dp_attention:
            copies = int(op.attr("experts_per_token")) if self.plan.ep == self.plan.tp else 1
            self.expert_outputs[op.outputs[0].name] = self._tokens(op, "mine", self.plan.tp,
                                                                   copies)  # fmt: skip
        sharded = self._expert_matmul(op, [_resized(x, 1, pairs, k),
                                           _resized(w, e, k, w.shape[-1])], [out])  # fmt: skip
        return [sharded, *self._dispatch(op, combine=True)]

    def _expert_matmul(self, op: Op, ins: list[Tensor], outs: list[Tensor]) -> Op:
        """A rank's share of an expert GEMM, stamped with the ep its experts are split over:
        a moe kernel table prices it by the rows of its own shape, ep included
        (op_table.kernel_shapes)."""
        return Op(op.kind, op.name, tuple(ins), tuple(outs), (*op.attrs, ("ep", self.ep)),
                  op.layer)  # fmt: skip


def partition(graph: Graph, plan: Plan, sequence_parallel: bool = False) -> Graph:
    """The graph one tensor/expert-parallel rank runs, collectives included, all stages.

    With `sequence_parallel` the ops tensor parallelism would replicate split the sequence
    instead, trading each all-reduce for a reduce-scatter and an all-gather (training).
    """
    rank = Graph(f"{graph.name}[{plan}]", layer_copies=dict(graph.layer_copies))
    if plan.tp == 1:  # one rank runs every op whole (tested): nothing to split
        rank.ops.extend(graph.ops)
        return rank
    sharder = _Sharder(plan, sequence_parallel)
    for op in graph.ops:
        rank.ops.extend(sharder(op))
    return rank


def stage_graphs(rank: Graph, num_layers: int, pp: int) -> list[Graph]:
    """Per-stage graphs (each chip of a stage runs one), with the sends between stages."""
    stages = op_stages(rank, num_layers, pp)
    graphs = [Graph(f"{rank.name}.stage{s}") for s in range(pp)]
    for op, s in zip(rank.ops, stages, strict=True):
        graphs[s].ops.append(op)
    for g in graphs[:-1]:
        boundary = next(op for op in reversed(g.ops) if op.kind is not OpKind.COLLECTIVE)
        g.ops.append(collective("send_recv", "pp", 2, boundary.outputs[0], boundary))
    return graphs


def _split_params(cfg: TransformerConfig, plan: Plan) -> tuple[float, float]:
    """(dense layer, expert layer) parameters that tensor and expert parallelism split, as
    one rank of `plan` holds them: attention heads' projections, the MLP or the rank's
    experts and the shared experts. A state-space mixer is not split (its tensor
    parallelism is refused)."""
    if cfg.ssm:
        return 0.0, 0.0
    attn = _split_attention_params(cfg, plan)
    experts = math.ceil(cfg.num_experts / plan.ep) * cfg.expert_params / plan.expert_tp
    tp = plan.attention_tp  # whole on every chip under attention data parallelism
    shared = cfg.shared_expert_params / tp  # split as a dense MLP is (its gate aside)
    return attn + cfg.dense_mlp_params / tp, attn + experts + shared


def _split_attention_params(cfg: TransformerConfig, plan: Plan) -> float:
    """The attention parameters of a layer that one rank of `plan` holds of those tensor
    parallelism splits by heads (the output gate's share of q_proj too)."""
    h_rank, kv_rank = (
        _ceil_div(cfg.num_heads, plan.attention_tp),
        max(1, _ceil_div(cfg.num_kv_heads, plan.attention_tp)),
    )
    if cfg.is_mla:  # the latents' projections whole on every rank, the heads' split
        return cfg.mla_replicated_params + cfg.mla_head_params * h_rank / cfg.num_heads
    if cfg.compress_ratios:  # DeepSeek-V4: the same, its one KV head whole
        heads = cfg.compressed_head_params + cfg.sink_params
        return cfg.compressed_attention_params - cfg.compressed_head_params + (
            heads * h_rank / cfg.num_heads)
    q_o = (2 + cfg.attention_output_gate) * cfg.hidden_size * cfg.num_heads * cfg.head_dim
    k_v = 2 * cfg.hidden_size * cfg.num_kv_heads * cfg.head_dim
    attn = q_o * h_rank / cfg.num_heads + k_v * kv_rank / cfg.num_kv_heads
    return attn + cfg.sink_params * h_rank / cfg.num_heads


def _linear_layer_difference(cfg: TransformerConfig, plan: Plan) -> float:
    """What one rank holds of a linear-attention layer beyond an attention layer: its mixer
    split by value heads (the norm weight one head wide whole) in place of the attention's
    rank share (linear_mixer_difference on one chip)."""
    if not cfg.linear_layers:
        return 0.0
    norm = cfg.linear_norm_params
    linear = (cfg.linear_attention_params - norm) * _ceil_div(
        cfg.linear_value_heads, plan.attention_tp) / cfg.linear_value_heads + norm  # fmt: skip
    whole, mine = _split_attention_params(cfg, Plan()), _split_attention_params(cfg, plan)
    attention = cfg.attention_params - whole + mine + (2 * cfg.head_dim if cfg.qk_norm else 0)
    return linear - attention


@scoped(maxsize=1024)
def weights_per_chip_bytes(
    cfg: TransformerConfig, plan: Plan, itemsize: float, table_itemsize: float | None = None,
    head_itemsize: float | None = None,
) -> tuple[float, ...]:
    """Weight bytes one chip of each pipeline stage holds (all experts, not only active ones).

    Layers count what the config counts (layer_params, dense_layer_params): the parts that
    tensor and expert parallelism split as one rank holds them (_split_params), the rest
    (norms, routers, biases, a state-space mixer, a decoder's cross-attention) whole on every
    rank, so one chip of a one-chip plan holds param_count. An encoder-decoder's encoder
    sits on the first stage. The embedding table and the LM head take their own widths
    where they are stored apart from the linear layers (ir/dtypes.weight_parts: a grouped
    int4 layout keeps them 16-bit); by default every weight is `itemsize` wide. An
    encoder's pooler, counted where a decoder's LM head is, is a linear layer like the rest.
    A chained stage (Plan.chain) spreads its weights evenly over its chips.
    """
    table_itemsize = itemsize if table_itemsize is None else table_itemsize
    head_itemsize = itemsize if head_itemsize is None or cfg.encoder else head_itemsize
    split, whole = _split_params(cfg, plan), _split_params(cfg, Plan())
    dense = cfg.dense_layer_params - whole[0] + split[0]
    layer = cfg.layer_params - whole[1] + split[1]
    per_stage, start = [], 0
    for n in layers_per_stage(cfg.num_layers, plan.pp):  # an MoE model's dense layers first
        dense_here = sum(not cfg.is_expert_layer(i) for i in range(start, start + n)) \
            if cfg.is_moe else 0
        linear_here = sum(start <= i < start + n for i in cfg.linear_layers)
        compressors = sum(map(cfg.layer_compression_params, range(start, start + n))) \
            if cfg.compress_ratios else 0  # DeepSeek-V4's, whole on every rank
        per_stage.append(dense * dense_here + layer * (n - dense_here) + compressors
                         + _linear_layer_difference(cfg, plan) * linear_here)
        start += n
    per_stage[0] += cfg.encoder_params - cfg.encoder_layers * (whole[0] - split[0])
    per_stage = [params * itemsize for params in per_stage]
    per_stage[0] += cfg.embedding_params / plan.attention_tp * table_itemsize
    per_stage[-1] += (cfg.lm_head_params / plan.attention_tp * head_itemsize
                      + (cfg.final_norm_params + cfg.hc_head_params) * itemsize)  # fmt: skip
    return tuple(b / plan.chain for b in per_stage)  # a chained stage's chips share its weights


def weight_bytes(
    cfg: TransformerConfig, plan: Plan, weight: Format, act: DType
) -> tuple[float, ...]:
    """weights_per_chip_bytes with each part in its format (ir/dtypes.weight_parts), and the
    matmuls a quantized run keeps 16-bit (_wide_params) at that width. Kept per config
    object: a sweep asks for the same few thousands of times."""

    def made() -> tuple[float, ...]:
        parts = weight_parts(weight, act)
        body = weights_per_chip_bytes(cfg, plan, parts.body.itemsize, parts.table.itemsize,
                                      parts.head.itemsize)  # fmt: skip
        wide = kept_wide(act)  # as the layer builder keeps them (transformer.py)
        extra = wide.itemsize - parts.body.itemsize
        if weight == wide or extra <= 0 or not parts.keeps_wide:
            return body
        stages, start = [], 0
        for n in layers_per_stage(cfg.num_layers, plan.pp):
            wide_params = sum(_wide_params(cfg, plan, i) for i in range(start, start + n))
            stages.append(wide_params * extra / plan.chain)
            start += n
        return tuple(b + e for b, e in zip(body, stages, strict=True))

    return remembered("weight bytes", (cfg,), (plan, weight, act), made)


def _wide_params(cfg: TransformerConfig, plan: Plan, layer: int) -> float:
    """Parameters of `layer` that one rank of `plan` holds and a quantized run keeps 16-bit,
    as the layer builder does (TransformerBuilder.unquantized_matmul): an MoE layer's router,
    whole on every rank, and the attention projections and dense MLP the checkpoint leaves
    unquantized (checkpoint.unquantized_module), split by heads as _split_attention_params
    splits them (MLA's latent projections whole) and the MLP as _split_params does. Without
    it a checkpoint's 16-bit attention was priced 16-bit in time but stored at the body
    format: DeepSeek-R1-0528-FP4-V2's 4.25B BF16 attention parameters, about 6.1 GB a chip
    under attention DP (review r4); Meta's 405B FP8, 60.95 GB a GPU at TP8 as vLLM loads it,
    was 51.3 GB."""
    from xpusim.workloads.checkpoint import unquantized_module

    router = cfg.hidden_size * cfg.num_experts if cfg.is_moe and cfg.is_expert_layer(layer) \
        else 0
    if not cfg.unquantized or cfg.compress_ratios:  # DeepSeek-V4 keeps its own attention
        return router
    h, heads = cfg.hidden_size, cfg.num_heads
    share = _ceil_div(heads, plan.attention_tp) / heads
    if cfg.is_mla:
        d, v, rope = cfg.head_dim, cfg.v_head_dim, cfg.qk_rope_head_dim
        q = {"q_a_proj": h * cfg.q_lora_rank, "q_b_proj": cfg.q_lora_rank * heads * d * share} \
            if cfg.q_lora_rank else {"q_proj": h * heads * d * share}
        modules = {**q, "kv_a_proj": h * (cfg.kv_lora_rank + rope),
                   "kv_b_proj": cfg.kv_lora_rank * heads * (d - rope + v) * share,
                   "o_proj": heads * v * h * share}  # fmt: skip
    else:
        kv = max(1, _ceil_div(cfg.num_kv_heads, plan.attention_tp)) * cfg.head_dim
        modules = {"qkv": h * heads * cfg.head_dim * share + 2 * h * kv,
                   "o_proj": heads * cfg.head_dim * h * share}  # fmt: skip
    if cfg.gated_mlp and not cfg.is_expert_layer(layer):  # a dense SwiGLU MLP
        mlp = h * cfg.intermediate_size / plan.attention_tp
        modules |= {"gate_up": 2 * mlp, "down": mlp}
    return router + sum(params for op, params in modules.items()
                        if unquantized_module(cfg.unquantized, layer, op))
