"""FLOP and byte counts of the primitive ops against hand counts."""

from __future__ import annotations

import pytest

from xpusim.ir.dtypes import DType
from xpusim.ir.op import Op, OpKind, attention_pairs
from xpusim.ir.tensor import Role, Tensor


def t(name, *shape, dtype=DType.BF16, role=Role.ACTIVATION):
    return Tensor(name, shape, dtype, role)


def test_matmul_flops_and_bytes():
    op = Op(OpKind.MATMUL, "mm", (t("x", 4, 8, 16), t("w", 16, 32, role=Role.WEIGHT)),
            (t("y", 4, 8, 32),))  # fmt: skip
    assert op.matrix_flops == 2 * 4 * 8 * 16 * 32
    assert op.vector_flops == 0
    by_role = op.bytes_by_role()
    assert by_role[Role.WEIGHT] == 16 * 32 * 2
    assert by_role[Role.ACTIVATION] == (4 * 8 * 16 + 4 * 8 * 32) * 2


def test_batched_matmul_counts_the_batch():
    op = Op(OpKind.MATMUL, "bmm", (t("a", 3, 5, 7), t("b", 3, 7, 11)), (t("c", 3, 5, 11),))
    assert op.matrix_flops == 2 * 3 * 5 * 7 * 11


def test_matmul_rejects_mismatched_inner_dims():
    op = Op(OpKind.MATMUL, "bad", (t("a", 5, 7), t("b", 6, 11)), (t("c", 5, 11),))
    with pytest.raises(ValueError, match="inner dims"):
        _ = op.matrix_flops


@pytest.mark.parametrize(("q", "kv", "causal", "pairs"), [
    (4, 4, True, 10),  # 1 + 2 + 3 + 4
    (1, 9, True, 9),  # decode: the new token sees the whole cache
    (2, 5, True, 4 + 5),
    (3, 6, False, 18),
])  # fmt: skip
def test_attention_pairs(q, kv, causal, pairs):
    assert attention_pairs(q, kv, causal) == pairs


def test_attention_flops_are_flash_style():
    b, s, h, kvh, d = 2, 16, 8, 2, 64
    op = Op(OpKind.ATTENTION, "attn",
            (t("q", b, s, h, d), t("k", b, s, kvh, d, role=Role.KV_CACHE),
             t("v", b, s, kvh, d, role=Role.KV_CACHE)),
            (t("o", b, s, h * d),), (("causal", True),))  # fmt: skip
    pairs = s * (s + 1) / 2
    assert op.matrix_flops == 4 * b * h * d * pairs
    # no seq x seq score matrix is read or written: bytes are q, k, v, o only
    assert op.bytes == 2 * (b * s * h * d * 2 + 2 * b * s * kvh * d)


def test_embedding_reads_only_looked_up_rows():
    table = t("emb", 32000, 4096, role=Role.WEIGHT)
    op = Op(OpKind.EMBEDDING, "embed", (table, t("ids", 2, 5, dtype=DType.INT32)),
            (t("x", 2, 5, 4096),))  # fmt: skip
    assert op.bytes_by_role()[Role.WEIGHT] == 10 * 4096 * 2


def test_elementwise_flops_per_element():
    op = Op(OpKind.ELEMENTWISE, "act", (t("x", 3, 10),), (t("y", 3, 10),),
            (("flops_per_element", 5),))  # fmt: skip
    assert op.vector_flops == 150


def test_signature_ignores_names():
    a = Op(OpKind.NORM, "l0.norm", (t("x0", 4, 8),), (t("y0", 4, 8),))
    b = Op(OpKind.NORM, "l1.norm", (t("x1", 4, 8),), (t("y1", 4, 8),))
    c = Op(OpKind.NORM, "l1.norm", (t("x1", 4, 9),), (t("y1", 4, 9),))
    assert a.signature == b.signature != c.signature


def test_padding_rounds_the_weight_tile_up():
    op = Op(OpKind.MATMUL, "mm", (t("x", 1, 100), t("w", 100, 130, role=Role.WEIGHT)),
            (t("y", 1, 130),))  # fmt: skip
    assert op.padded_matrix_flops(128, 128) == pytest.approx(op.matrix_flops * 1.28 * 256 / 130)


def test_dtype_sizes():
    assert DType.INT4.itemsize == 0.5
    assert DType.BF16.itemsize == 2
    assert DType.FP8.itemsize == 1
