"""The optimizer step: bytes per parameter, ZeRO sharding, and the update ops.

Mixed precision (Micikevicius et al. 2018) computes in a 16-bit format but keeps an fp32
master copy of the weights and fp32 optimizer state, so Adam holds per parameter 2 B of
16-bit weights, 2 B of 16-bit gradients, 4 B of master weights and 4 + 4 B of moments: the
16 bytes of the ZeRO paper (Rajbhandari et al. 2020, section 3.1). Training in fp32 needs no
master copy: 4 + 4 + 8 = 16 B as well, plain SGD 8 B.

ZeRO shards that state over the data-parallel chips: stage 1 the optimizer state (master
weights and moments), stage 2 the gradients too, stage 3 the weights too (PyTorch FSDP's
full sharding). Each chip then updates 1/dp of the parameters, and the gradient all-reduce
becomes a reduce-scatter followed by an all-gather of the updated weights; stage 3 gathers
every layer's weights for each microbatch's forward and backward pass instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xpusim.errors import UserError
from xpusim.ir.dtypes import DType
from xpusim.ir.graph import Graph
from xpusim.ir.op import Op, OpKind
from xpusim.ir.tensor import Role, Tensor

MASTER = DType.FP32  # master weights and optimizer state


@dataclass(frozen=True)
class OptimizerSpec:
    name: str
    moments: int  # fp32 tensors of state per parameter besides the master weights
    flops_per_param: int  # vector FLOPs of one update, from the formula below
    hyper: tuple[tuple[str, float], ...]  # defaults, as attrs of the update ops


OPTIMIZERS = {
    # p -= lr g (2), then the 16-bit copy (1)
    "sgd": OptimizerSpec("sgd", 0, 3, (("lr", 1e-2),)),
    # m = b1 m + (1 - b1) g (3); v = b2 v + (1 - b2) g^2 (4); bias corrections (2);
    # p -= lr m_hat / (sqrt(v_hat) + eps) (5); the 16-bit copy (1). Kingma and Ba 2015.
    "adam": OptimizerSpec(
        "adam", 2, 15, (("lr", 1e-3), ("beta1", 0.9), ("beta2", 0.999), ("eps", 1e-8))
    ),
    # Adam plus decoupled weight decay p -= lr wd p (2). Loshchilov and Hutter 2019.
    "adamw": OptimizerSpec(
        "adamw",
        2,
        17,
        (("lr", 1e-3), ("beta1", 0.9), ("beta2", 0.999), ("eps", 1e-8), ("weight_decay", 0.01)),
    ),
}
ZERO_STAGES = (0, 1, 2, 3)


def optimizer_spec(name: str) -> OptimizerSpec:
    spec = OPTIMIZERS.get(str(name).lower())
    if spec is None:
        raise UserError(f"unknown optimizer {name!r}; choose one of {', '.join(OPTIMIZERS)}")
    return spec


def check_zero(stage: int) -> int:
    if stage not in ZERO_STAGES:
        raise UserError(f"--zero must be 0, 1, 2 or 3, got {stage!r}")
    return stage


@dataclass(frozen=True)
class StateBytes:
    """Bytes of training state: per parameter, or a chip's total."""

    weights: float
    gradients: float
    optimizer_state: float

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer_state

    def scaled(self, params: float) -> StateBytes:
        return StateBytes(self.weights * params, self.gradients * params,
                          self.optimizer_state * params)  # fmt: skip


def bytes_per_param(spec: OptimizerSpec, compute: DType) -> StateBytes:
    """Weights and gradients in the compute format; an fp32 master copy when that is narrower."""
    master = MASTER.itemsize if compute.itemsize < MASTER.itemsize else 0.0
    return StateBytes(compute.itemsize, compute.itemsize, master + spec.moments * MASTER.itemsize)


def sharded(per_param: StateBytes, zero: int, dp: int) -> StateBytes:
    """What one data-parallel chip holds of each part under a ZeRO stage."""
    return StateBytes(
        per_param.weights / (dp if zero >= 3 else 1),
        per_param.gradients / (dp if zero >= 2 else 1),
        per_param.optimizer_state / (dp if zero >= 1 else 1),
    )


def update_ops(rank: Graph, spec: OptimizerSpec, compute: DType, zero: int, dp: int) -> Graph:
    """One update op per weight tensor one rank holds, over its 1/dp share under ZeRO >= 1.

    Reads the gradient, the master weights (when kept) and the moments; writes them back
    and the compute-format weights the next step reads.
    """
    weights: dict[str, tuple[Tensor, int]] = {}
    for op in rank:
        for t in op.inputs:
            if t.role is Role.WEIGHT:
                weights.setdefault(t.name, (t, op.layer))
    share = dp if zero >= 1 else 1
    has_master = compute.itemsize < MASTER.itemsize
    graph = Graph(f"{rank.name}.{spec.name}", layer_copies=dict(rank.layer_copies))
    for name, (w, layer) in weights.items():
        n = (math.ceil(w.numel / share),)

        def state(kind: str, dtype: DType, name: str = name, n: tuple[int] = n) -> Tensor:
            return Tensor(f"{name}.{kind}", n, dtype, Role.WEIGHT)

        moments = [state(f"m{i}", MASTER) for i in range(spec.moments)]
        params = state("master" if has_master else "w", MASTER if has_master else compute)
        ins = (state("grad", compute), params, *moments)
        outs = (params, *moments, *[state("w", compute)] * has_master)
        attrs = (("fn", spec.name), ("flops_per_element", spec.flops_per_param), *spec.hyper)
        graph.ops.append(Op(OpKind.OPTIMIZER, f"{name}.update", ins, outs, attrs, layer))
    return graph


def dp_traffic(zero: int) -> tuple[tuple[str, str, str], ...]:
    """Data-parallel collectives of a step: (collective, what it moves, how often).

    What: "gradients" or "weights" of a chip's stage; how often: once per "step", or per
    "microbatch" (stage >= 2 reduce-scatters each microbatch's gradients so as never to hold
    them whole; stage 3 gathers weights for each forward and each backward pass).
    """
    return {
        0: (("all_reduce", "gradients", "step"),),
        1: (("reduce_scatter", "gradients", "step"), ("all_gather", "weights", "step")),
        2: (("reduce_scatter", "gradients", "microbatch"), ("all_gather", "weights", "step")),
        3: (("reduce_scatter", "gradients", "microbatch"),
            ("all_gather", "weights", "microbatch"), ("all_gather", "weights", "microbatch")),
    }[zero]  # fmt: skip
