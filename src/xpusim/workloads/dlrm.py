"""Lowers a DLRM-style model's forward pass over one batch of samples to IR ops.

The ops are the kernels an inference stack launches for TorchRec's DLRM and DLRM_DCN:
bottom MLP matmuls; one embedding bag per table (gather `pooling` rows per sample, sum them);
a concatenation of the dense vector and the pooled embeddings; the interaction (dot: one
batched X X^T and a gather of its lower triangle; dcn: per cross layer two low-rank matmuls
and x0 * (.) + x_l); the top MLP; a sigmoid. Bias and ReLU run in each matmul's epilogue, as
cuBLASLt and FBGEMM fuse them; their B x N FLOPs per layer, under 1% of the matmul's
2 B x N x K, are not counted.

Embedding tables are weights in the weight precision; int8 and int4 rows carry a 4-byte fp16
scale and bias, as FBGEMM's table-batched embedding stores them (the rows' last columns).
"""

from __future__ import annotations

from xpusim.ir.dtypes import DType, Format
from xpusim.ir.graph import Graph
from xpusim.ir.op import Op, OpKind
from xpusim.ir.tensor import Role, Tensor
from xpusim.workloads.dlrm_config import DLRMConfig

# fbgemm_gpu split_table_batched_embeddings_ops_common.py, DEFAULT_SCALE_BIAS_SIZE_IN_BYTES:
# "GPU and CPU use 16-bit scale and bias for quantized embedding bags in TBE ... 2 + 2 = 4".
SCALE_BIAS_BYTES = 4
QUANTIZED_ROWS = (DType.INT8, DType.INT4)
# Vector FLOPs per element, counted from each formula.
POOL_FLOPS = 1  # accumulate each gathered element into the bag's sum
DEQUANT_POOL_FLOPS = 3  # x * scale + bias, then accumulate
CROSS_MIX_FLOPS = 2  # x0 * y + x_l
SIGMOID_FLOPS = 4  # negate, exp, add, divide


def stored_row_elements(dim: int, dtype: DType) -> int:
    """Elements of one stored row: the embedding, plus the scale and bias of quantized rows."""
    if dtype in QUANTIZED_ROWS:
        return dim + int(SCALE_BIAS_BYTES / dtype.itemsize)
    return dim


class _Builder:
    """Keeps naming and dtypes consistent while one batch is emitted."""

    def __init__(self, cfg: DLRMConfig, batch: int, act: DType, weight: Format):
        self.cfg, self.batch, self.act, self.weight = cfg, batch, act, weight
        self.graph = Graph(f"{cfg.name}[b={batch}]")

    def t(self, name: str, *shape: int, role: Role = Role.ACTIVATION) -> Tensor:
        return Tensor(name, tuple(shape), self.weight if role is Role.WEIGHT else self.act, role)

    def op(self, kind: OpKind, name: str, ins: list[Tensor], out: Tensor, **attrs) -> Tensor:
        return self.graph.add(Op(kind, name, tuple(ins), (out,), tuple(sorted(attrs.items()))))

    def matmul(self, name: str, x: Tensor, n: int, bias: bool = True) -> Tensor:
        ins = [x, self.t(f"{name}.w", x.shape[-1], n, role=Role.WEIGHT)]
        if bias:
            ins.append(self.t(f"{name}.b", n, role=Role.WEIGHT))
        return self.op(OpKind.MATMUL, name, ins, self.t(f"{name}.out", self.batch, n),
                       compute=self.act.value)  # fmt: skip

    def vector(self, name: str, ins: list[Tensor], out: Tensor, flops: float) -> Tensor:
        return self.op(OpKind.ELEMENTWISE, name, ins, out, flops_per_element=flops)

    def mlp(self, prefix: str, x: Tensor, widths: tuple[int, ...]) -> Tensor:
        for i, n in enumerate(widths):
            x = self.matmul(f"{prefix}.{i}", x, n)
        return x

    def embedding_bags(self) -> list[Tensor]:
        """Tables in the weight format's element type: a quantized row carries its own scale
        and bias (stored_row_elements), whatever grouping the dense layers' weights use."""
        rows = self.weight.element
        quantized = rows in QUANTIZED_ROWS
        pooled = []
        for i, spec in enumerate(self.cfg.tables):
            row = stored_row_elements(spec.dim, rows)
            table = Tensor(f"emb.{i}.w", (spec.rows, row), rows, Role.WEIGHT)
            ids = Tensor(f"emb.{i}.ids", (self.batch, spec.pooling), DType.INT32)
            pooled.append(self.op(
                OpKind.EMBEDDING, f"emb.{i}", [table, ids],
                self.t(f"emb.{i}.out", self.batch, spec.dim),
                flops_per_row_element=DEQUANT_POOL_FLOPS if quantized else POOL_FLOPS,
            ))  # fmt: skip
        return pooled

    def interaction(self, dense: Tensor, pooled: list[Tensor]) -> Tensor:
        cfg, b = self.cfg, self.batch
        if cfg.interaction == "dot":
            f, d = cfg.features, dense.shape[-1]
            stack = self.vector("stack", [dense, *pooled], self.t("stack.out", b, f, d), 0)
            stack_t = Tensor(stack.name, (b, d, f), stack.dtype)  # the same tensor, read as K x N
            gram = self.op(OpKind.MATMUL, "interact", [stack, stack_t],
                           self.t("interact.out", b, f, f), compute=self.act.value)  # fmt: skip
            out = self.t("triangle.out", b, cfg.interaction_width)
            return self.vector("triangle", [gram, dense], out, 0)
        x0 = self.vector("concat", [dense, *pooled], self.t("concat.out", b, cfg.concat_width), 0)
        x = x0
        for layer in range(cfg.dcn_layers):
            p = f"cross.{layer}"
            low = self.matmul(f"{p}.v", x, cfg.dcn_low_rank, bias=False)
            up = self.matmul(f"{p}.w", low, cfg.concat_width)
            x = self.vector(f"{p}.mix", [up, x0, x], self.t(f"{p}.out", b, cfg.concat_width),
                            CROSS_MIX_FLOPS)  # fmt: skip
        return x

    def build(self) -> Graph:
        cfg = self.cfg
        dense = self.mlp("bottom", self.t("dense_in", self.batch, cfg.dense_features),
                         cfg.bottom_mlp)  # fmt: skip
        x = self.interaction(dense, self.embedding_bags())
        logits = self.mlp("top", x, cfg.top_mlp)
        self.vector("sigmoid", [logits], self.t("score", *logits.shape), SIGMOID_FLOPS)
        return self.graph


def build_batch(cfg: DLRMConfig, batch: int, act: DType, weight: Format | None = None) -> Graph:
    """The forward pass of `batch` samples: activations in `act`, weights and tables in `weight`."""
    return _Builder(cfg, batch, act, weight or act).build()
