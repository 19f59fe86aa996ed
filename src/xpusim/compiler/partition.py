"""Partitioning: one model graph and a parallelism plan in, per-chip graphs out.

Tensor parallelism follows Megatron-LM (Shoeybi et al. 2019, section 3): the first matmul of
a block is split by columns and the second by rows, so each block needs one all-reduce of
its output; attention is split by heads (KV heads are replicated when there are fewer of
them than ranks, as in Megatron's GQA support); the embedding and LM head are split over
the vocabulary. Expert parallelism spreads an MoE layer's experts over `ep` chips with an
all-to-all to send tokens to their experts and one to bring them back. Pipeline parallelism
cuts the layer sequence into `pp` stages; data parallelism replicates everything.

The builder tags each op with how it splits (`tp` attribute) and with its layer; this pass
only applies those rules, so it knows no model by name. All ranks of a tensor/expert group
run the same graph, so one rank's graph stands for all of them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xpusim.errors import UserError
from xpusim.ir.graph import Graph
from xpusim.ir.op import Op, OpKind
from xpusim.ir.tensor import Tensor
from xpusim.workloads.transformer_config import TransformerConfig, expected_active_experts


@dataclass(frozen=True)
class Plan:
    tp: int = 1  # tensor parallel
    pp: int = 1  # pipeline stages
    dp: int = 1  # data-parallel replicas
    ep: int = 1  # expert parallel (MoE only)

    @property
    def chips(self) -> int:
        return self.tp * self.pp * self.dp * self.ep

    def to_dict(self) -> dict[str, int]:
        return {"tp": self.tp, "pp": self.pp, "dp": self.dp, "ep": self.ep}

    def __str__(self) -> str:
        return " x ".join(f"{k}{v}" for k, v in self.to_dict().items() if v > 1) or "1 chip"


def check_plan(plan: Plan, cfg: TransformerConfig, chips: int) -> None:
    """Raises a UserError saying why a plan cannot run this model on this many chips."""
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
    if plan.dp < 1 or plan.chips != chips:
        raise UserError(
            f"plan tp {plan.tp} x pp {plan.pp} x dp {plan.dp} x ep {plan.ep} = {plan.chips} "
            f"chips, but --chips is {chips}"
        )


def stage_of_layer(num_layers: int, pp: int) -> list[int]:
    """Pipeline stage of each layer: as even as possible, remainders to the inner stages.

    The first stage also holds the embedding and the last the LM head, so the stages that
    get one layer more than the others are the inner ones.
    """
    base, extra = divmod(num_layers, pp)
    inner = [*range(1, pp - 1), 0, pp - 1] if pp > 2 else list(range(pp))
    counts = [base] * pp
    for stage in inner[:extra]:
        counts[stage] += 1
    return [s for s, n in enumerate(counts) for _ in range(n)]


def op_stages(graph: Graph, num_layers: int, pp: int) -> list[int]:
    """Stage of every op: ops before the first layer go to stage 0, after the last to pp-1."""
    layer_stage = stage_of_layer(num_layers, pp)
    return [
        0 if op.layer < 0 else pp - 1 if op.layer >= num_layers else layer_stage[op.layer]
        for op in graph.ops
    ]


def _ceil_div(n: int, parts: int) -> int:
    return -(-n // parts)


def _resized(t: Tensor, *shape: int) -> Tensor:
    return Tensor(t.name, tuple(shape), t.dtype, t.role)


def _last(t: Tensor, width: int) -> Tensor:
    return _resized(t, *t.shape[:-1], width)


def collective(kind: str, group: str, size: int, t: Tensor, after: Op) -> Op:
    out = Tensor(f"{t.name}.{kind}", t.shape, t.dtype, t.role)
    attrs = (("collective", kind), ("group", group), ("size", size))
    return Op(OpKind.COLLECTIVE, f"{after.name}.{kind}", (t,), (out,), attrs, after.layer)


class _Sharder:
    def __init__(self, plan: Plan):
        self.tp, self.ep = plan.tp, plan.ep

    def split(self, n: int) -> int:
        return _ceil_div(n, self.tp)

    def __call__(self, op: Op) -> list[Op]:
        rule = op.attr("tp")
        if rule is None or (self.tp == 1 and self.ep == 1):
            return [op]
        return getattr(self, f"_{rule}")(op)

    def _with(self, op: Op, ins: list[Tensor], outs: list[Tensor]) -> Op:
        return Op(op.kind, op.name, tuple(ins), tuple(outs), op.attrs, op.layer)

    def _all_reduce(self, op: Op) -> list[Op]:
        return [op] + [collective("all_reduce", "tp", self.tp, op.outputs[0], op)] * (self.tp > 1)

    def _column(self, op: Op) -> list[Op]:
        x, w, *bias = op.inputs
        n = self.split(w.shape[-1])
        ins = [x, _last(w, n), *(_last(b, n) for b in bias)]
        return [self._with(op, ins, [_last(op.outputs[0], n)])]

    def _row(self, op: Op) -> list[Op]:
        x, w, *bias = op.inputs
        k = self.split(w.shape[-2])
        ins = [_last(x, k), _resized(w, *w.shape[:-2], k, w.shape[-1]), *bias]
        return self._all_reduce(self._with(op, ins, list(op.outputs)))

    def _split(self, op: Op) -> list[Op]:
        def shard(t: Tensor) -> Tensor:
            return _last(t, self.split(t.shape[-1]))

        return [self._with(op, list(map(shard, op.inputs)), list(map(shard, op.outputs)))]

    def _heads(self, op: Op) -> list[Op]:
        """QKV projection, rotary embedding and attention: split by (KV) heads."""
        h, kvh, d = (int(op.attr(k)) for k in ("heads", "kv_heads", "head_dim"))
        h_rank, kv_rank = self.split(h), max(1, self.split(kvh))
        widths = {(h + 2 * kvh) * d: (h_rank + 2 * kv_rank) * d,
                  (h + kvh) * d: (h_rank + kv_rank) * d, h * d: h_rank * d}  # fmt: skip
        heads = {h: h_rank, kvh: kv_rank}

        def shard(t: Tensor) -> Tensor:
            if len(t.shape) == 4:  # [batch, seq, heads, head_dim]
                b, s, n, hd = t.shape
                return _resized(t, b, s, heads[n], hd)
            return _last(t, widths.get(t.shape[-1], t.shape[-1]))

        # a projection's input is the full hidden state, whatever its width happens to equal
        ins = (
            op.inputs[:1] + tuple(map(shard, op.inputs[1:]))
            if op.kind is OpKind.MATMUL
            else (tuple(map(shard, op.inputs)))
        )
        return [self._with(op, list(ins), [shard(t) for t in op.outputs])]

    def _vocab(self, op: Op) -> list[Op]:
        """Vocabulary-parallel embedding (then all-reduce) and LM head (then all-gather)."""
        if op.kind is OpKind.EMBEDDING:
            table, ids = op.inputs
            sharded = self._with(op, [_resized(table, self.split(table.shape[0]),
                                               table.shape[1]), ids], list(op.outputs))  # fmt: skip
            return self._all_reduce(sharded)
        head = self._column(op)[0]
        if self.tp == 1:
            return [head]
        return [head, collective("all_gather", "tp", self.tp, head.outputs[0], op)]

    def _experts(self, op: Op) -> tuple[int, int]:
        """(experts held by one chip, rows each runs) once ep chips pool their tokens."""
        tokens = int(op.attr("tokens")) * self.ep
        experts, per_token = int(op.attr("experts")), int(op.attr("experts_per_token"))
        used = expected_active_experts(tokens, experts, per_token)
        return _ceil_div(used, self.ep), _ceil_div(tokens * per_token, used)

    def _expert_column(self, op: Op) -> list[Op]:
        x, w = op.inputs
        e, rows = self._experts(op)
        n = self.split(w.shape[-1])
        sharded = self._with(op, [_resized(x, e, rows, x.shape[-1]), _resized(w, e, w.shape[1], n)],
                             [_resized(op.outputs[0], e, rows, n)])  # fmt: skip
        if self.ep == 1:
            return [sharded]
        return [collective("all_to_all", "ep", self.ep, op.inputs[0], op), sharded]

    def _expert_split(self, op: Op) -> list[Op]:
        e, rows = self._experts(op)

        def shard(t: Tensor) -> Tensor:
            return _resized(t, e, rows, self.split(t.shape[-1]))

        return [self._with(op, list(map(shard, op.inputs)), list(map(shard, op.outputs)))]

    def _expert_row(self, op: Op) -> list[Op]:
        x, w = op.inputs
        e, rows = self._experts(op)
        k = self.split(w.shape[-2])
        out = _resized(op.outputs[0], e, rows, w.shape[-1])
        ops = self._all_reduce(self._with(op, [_resized(x, e, rows, k),
                                               _resized(w, e, k, w.shape[-1])], [out]))  # fmt: skip
        if self.ep > 1:
            ops.append(collective("all_to_all", "ep", self.ep, op.outputs[0], op))
        return ops


def partition(graph: Graph, plan: Plan) -> Graph:
    """The graph one tensor/expert-parallel rank runs, collectives included, all stages."""
    sharder = _Sharder(plan)
    rank = Graph(f"{graph.name}[{plan}]")
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


def weights_per_chip_bytes(cfg: TransformerConfig, plan: Plan, itemsize: float) -> list[float]:
    """Weight bytes one chip of each pipeline stage holds (all experts, not only active ones)."""
    h_rank, kv_rank = (
        _ceil_div(cfg.num_heads, plan.tp),
        max(1, _ceil_div(cfg.num_kv_heads, plan.tp)),
    )
    q_o = 2 * cfg.hidden_size * cfg.num_heads * cfg.head_dim
    k_v = 2 * cfg.hidden_size * cfg.num_kv_heads * cfg.head_dim
    attn = q_o * h_rank / cfg.num_heads + k_v * kv_rank / cfg.num_kv_heads
    experts = math.ceil(cfg.num_experts / plan.ep) * cfg.expert_params / plan.tp
    layer = attn + experts + cfg.router_params + cfg.norm_params_per_layer
    stages = stage_of_layer(cfg.num_layers, plan.pp)
    per_stage = [layer * stages.count(s) for s in range(plan.pp)]
    per_stage[0] += cfg.embedding_params / plan.tp
    per_stage[-1] += cfg.lm_head_params / plan.tp + cfg.final_norm_params
    return [params * itemsize for params in per_stage]
