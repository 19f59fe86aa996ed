"""Autodiff, recomputation, transposes and the optimizer, checked by counting and by running
the IR with numpy (ir/interpreter.py) against finite differences."""

from __future__ import annotations

import numpy as np
import pytest

from xpusim.compiler.autodiff import differentiate
from xpusim.compiler.optimizer import OPTIMIZERS, bytes_per_param, sharded, update_ops
from xpusim.compiler.partition import Plan, partition
from xpusim.compiler.transpose import materialize_transposes
from xpusim.ir.dtypes import DType
from xpusim.ir.graph import Graph
from xpusim.ir.interpreter import run
from xpusim.ir.op import Op, OpKind
from xpusim.ir.tensor import Role, Tensor
from xpusim.workloads.transformer import StepShape, build_step
from xpusim.workloads.transformer_config import TransformerConfig

B, D, H, C = 4, 6, 10, 5  # batch, input width, hidden width, classes


def t(name, *shape, dtype=DType.FP32, role=Role.ACTIVATION):
    return Tensor(name, shape, dtype, role)


def mlp(dtype=DType.FP32) -> Graph:
    """Two-layer MLP with a cross-entropy loss: x W1 + b1 -> gelu -> W2 -> loss."""
    x, labels = t("x", B, D, dtype=dtype), t("labels", B, dtype=DType.INT32)
    w1, b1 = t("w1", D, H, dtype=dtype, role=Role.WEIGHT), t("b1", H, dtype=dtype, role=Role.WEIGHT)
    w2 = t("w2", H, C, dtype=dtype, role=Role.WEIGHT)
    h, a, y = t("h", B, H, dtype=dtype), t("a", B, H, dtype=dtype), t("y", B, C, dtype=dtype)
    probs, loss = t("probs", B, C, dtype=dtype), t("loss", B)
    return Graph("mlp", [
        Op(OpKind.MATMUL, "fc1", (x, w1, b1), (h,), layer=0),
        Op(OpKind.ELEMENTWISE, "act", (h,), (a,), (("fn", "gelu"), ("flops_per_element", 8)), 0),
        Op(OpKind.MATMUL, "fc2", (a, w2), (y,), layer=1),
        Op(OpKind.SOFTMAX, "loss", (y, labels), (probs, loss), (("fn", "cross_entropy"),), 1),
    ])  # fmt: skip


TINY = TransformerConfig(name="tiny", hidden_size=8, intermediate_size=12, num_layers=2,
                         num_heads=2, num_kv_heads=1, head_dim=4, vocab_size=11)  # fmt: skip


def weights_of(graph: Graph, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {
        x.name: rng.normal(size=x.shape) * 0.5
        for op in graph
        for x in op.inputs
        if x.role is Role.WEIGHT
    }


def check_gradients(graph: Graph, values: dict, rng, recompute="none", transposes=False, n=4):
    """Every weight's gradient from the backward graph against central differences."""
    trained = differentiate(graph, recompute=recompute)
    backward = materialize_transposes(trained.graph) if transposes else trained.graph
    loss_shape = next(x.shape for op in graph for x in op.outputs if x.name == "loss")
    env = run(backward, {**values, trained.seed: np.ones(loss_shape)}, np.float64)

    def loss(v):
        return run(graph, v, np.float64)["loss"].sum()

    for name, w in values.items():
        if f"{name}.grad" not in env:
            continue
        for _ in range(n):
            i = tuple(rng.integers(0, s) for s in w.shape)
            up, down = w.copy(), w.copy()
            up[i] += 1e-6
            down[i] -= 1e-6
            numeric = (loss({**values, name: up}) - loss({**values, name: down})) / 2e-6
            assert env[f"{name}.grad"].reshape(w.shape)[i] == pytest.approx(
                numeric, rel=1e-4, abs=1e-7
            ), name
    return trained


def test_matmul_backward_is_twice_the_forward():
    trained = differentiate(mlp())
    fc1 = next(op for op in mlp() if op.name == "fc1")
    grads = [op for op in trained.backward if op.name in ("fc1.dgrad", "fc1.wgrad")]
    assert sum(op.matrix_flops for op in grads) == 2 * fc1.matrix_flops
    assert {op.attr("transpose_b") for op in grads} == {True, None}  # dY W^T and X^T dY


def test_mlp_gradients_match_finite_differences():
    rng = np.random.default_rng(0)
    graph = mlp()
    values = weights_of(graph, rng) | {"x": rng.normal(size=(B, D)),
                                       "labels": rng.integers(0, C, size=B)}  # fmt: skip
    check_gradients(graph, values, rng)
    check_gradients(graph, values, rng, transposes=True)  # explicit copies: same numbers


def test_stash_of_a_two_layer_mlp_is_the_hand_count():
    """fc1's weight gradient needs x, gelu's gradient its input h, fc2's weight gradient
    a, the loss gradient the softmax it wrote and the labels; nothing else is kept."""
    stash = differentiate(mlp()).stash
    assert {s.tensor.name for s in stash} == {"x", "h", "a", "probs", "labels"}
    assert sum(s.tensor.nbytes for s in stash) == 4 * (B * D + 2 * B * H + B * C + B)
    assert {s.tensor.name: s.last_read_by for s in stash}["x"] == "fc1.wgrad"


@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
def test_transformer_gradients_match_finite_differences(recompute):
    """Every derivative rule of a llama layer (fused add + norm, rotary, grouped-query
    attention, SwiGLU, embedding, cross-entropy), under each recomputation policy."""
    rng = np.random.default_rng(1)
    graph = build_step(TINY, StepShape(2, 5, 5), DType.FP32, training=True)
    values = weights_of(graph, rng) | {"ids": rng.integers(0, 11, (2, 5)),
                                       "labels": rng.integers(0, 11, (2, 5))}  # fmt: skip
    check_gradients(graph, values, rng, recompute=recompute, n=2)


def test_parallel_block_layernorm_gradients():
    """GPT-J's layout: one norm feeds attention and MLP, whose sum joins the residual, so
    the residual stream's gradient is accumulated from two readers."""
    cfg = TransformerConfig(name="tiny-j", hidden_size=8, intermediate_size=12, num_layers=2,
                            num_heads=2, num_kv_heads=2, head_dim=4, vocab_size=11,
                            gated_mlp=False, norm="layernorm", parallel_block=True,
                            attention_bias=True, mlp_bias=True, lm_head_bias=True)  # fmt: skip
    rng = np.random.default_rng(2)
    graph = build_step(cfg, StepShape(2, 5, 5), DType.FP32, training=True)
    values = weights_of(graph, rng) | {"ids": rng.integers(0, 11, (2, 5)),
                                       "labels": rng.integers(0, 11, (2, 5))}  # fmt: skip
    trained = check_gradients(graph, values, rng, n=2)
    assert any(op.attr("fn") == "add" for op in trained.backward)


def test_dense_step_is_three_forwards_and_four_with_full_recomputation(llama7b):
    graph = build_step(llama7b, StepShape(1, 512, 512), DType.BF16, training=True)
    layers = range(llama7b.num_layers)
    plain = differentiate(graph)
    full = differentiate(graph, recompute="full", blocks=layers)
    selective = differentiate(graph, recompute="selective")
    assert plain.graph.matrix_flops / graph.matrix_flops == pytest.approx(3.0, abs=0.05)
    assert full.graph.matrix_flops / graph.matrix_flops == pytest.approx(4.0, abs=0.1)
    assert selective.graph.matrix_flops == plain.graph.matrix_flops
    assert selective.graph.flops > plain.graph.flops  # the recomputed vector ops
    # memory the other way round; full keeps about one tensor of the residual stream a layer
    assert full.stash_bytes < selective.stash_bytes < plain.stash_bytes
    per_layer = 512 * llama7b.hidden_size * 2
    assert full.stash_bytes < (llama7b.num_layers + 4) * per_layer + 512 * 32000 * 2


def test_partitioned_backward_conserves_matrix_flops(llama7b):
    """Tensor-parallel rules for backward ops: per-rank matrix FLOPs x tp = unpartitioned,
    with and without sequence parallelism, which shards the vector work of norms too."""
    cfg = TransformerConfig(name="small", hidden_size=256, intermediate_size=512, num_layers=2,
                            num_heads=8, num_kv_heads=4, head_dim=32, vocab_size=1000)  # fmt: skip
    backward = differentiate(build_step(cfg, StepShape(2, 64, 64), DType.BF16, training=True))
    whole = backward.backward
    for sp in (False, True):
        rank = partition(whole, Plan(tp=4), sequence_parallel=sp)
        assert rank.matrix_flops * 4 == pytest.approx(whole.matrix_flops, rel=1e-9)
        kinds = {op.attr("collective") for op in rank if op.kind is OpKind.COLLECTIVE}
        assert kinds == ({"all_reduce", "reduce_scatter", "all_gather"} if sp else {"all_reduce"})
    norms = [op for op in partition(whole, Plan(tp=4), sequence_parallel=True)
             if op.kind is OpKind.NORM]  # fmt: skip
    assert sum(op.vector_flops for op in norms) * 4 == pytest.approx(
        sum(op.vector_flops for op in whole if op.kind is OpKind.NORM)
    )


def test_explicit_transposes_show_as_memory_ops():
    trained = differentiate(mlp())
    copied = materialize_transposes(trained.backward)
    transposes = [op for op in copied if op.kind is OpKind.TRANSPOSE]
    assert len(transposes) == 4  # W^T for each dX, the input^T for each dW
    assert all(op.flops == 0 and op.bytes > 0 for op in transposes)
    assert copied.matrix_flops == trained.backward.matrix_flops


def test_adam_mixed_precision_holds_16_bytes_per_parameter():
    adam = bytes_per_param(OPTIMIZERS["adam"], DType.BF16)
    assert (adam.weights, adam.gradients, adam.optimizer_state) == (2, 2, 12)
    assert bytes_per_param(OPTIMIZERS["adam"], DType.FP32).total == 16  # no master copy
    assert bytes_per_param(OPTIMIZERS["sgd"], DType.BF16).total == 8
    zero3 = sharded(adam, 3, dp=8)
    assert zero3.total == 2


def test_adam_update_op_runs_and_streams_28_bytes_per_parameter():
    w = t("w", 3, 4, dtype=DType.BF16, role=Role.WEIGHT)
    forward = Graph("one", [Op(OpKind.MATMUL, "mm", (t("x", 2, 3), w), (t("y", 2, 4),))])
    (update,) = update_ops(forward, OPTIMIZERS["adam"], DType.BF16, zero=0, dp=1).ops
    assert update.bytes == 28 * 12
    assert update.vector_flops == 15 * 12
    rng = np.random.default_rng(3)
    g, p = rng.normal(size=12), rng.normal(size=12)
    out = run(Graph("u", [update]), {"w.grad": g, "w.master": p, "w.m0": np.zeros(12),
                                     "w.m1": np.zeros(12)}, np.float64)  # fmt: skip
    # the first Adam step moves every parameter by lr against the sign of its gradient
    np.testing.assert_allclose(out["w.master"], p - 1e-3 * np.sign(g), rtol=1e-6)
    half = update_ops(forward, OPTIMIZERS["adam"], DType.BF16, zero=1, dp=4).ops[0]
    assert half.outputs[0].numel == 3  # ZeRO-1: a quarter of the parameters per chip


def test_interpreter_rounds_to_bf16():
    rng = np.random.default_rng(4)
    graph = mlp(DType.BF16)
    values = weights_of(graph, rng) | {"x": rng.normal(size=(B, D)),
                                       "labels": rng.integers(0, C, size=B)}  # fmt: skip
    low, exact = run(graph, values)["loss"], run(graph, values, np.float64)["loss"]
    assert run(graph, values)["h"].dtype.name == "bfloat16"
    np.testing.assert_allclose(low, exact, rtol=0.05)
    assert not np.array_equal(low, exact)
