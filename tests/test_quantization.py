"""Weight-only quantization as checkpoints store it: grouped int4 layouts count their scales
and zero points, keep the embedding table (and, for AWQ/GPTQ, the LM head) 16-bit, and are
named on the command line by layout and group."""

from __future__ import annotations

import pytest

import xpusim
from tests.cli_run import refused
from xpusim.errors import UserError
from xpusim.ir.dtypes import DType, Grouped, parse_weight_format, weight_layouts
from xpusim.workloads.resolve import load_model

RUN = dict(precision="bf16", batch=1, prompt=8, gen=4)


def test_layout_widths_are_hand_counts():
    """4 bits, plus a 16-bit scale and a 4-bit zero per 128 (AWQ/GPTQ); plus a bf16 scale
    and a bf16 zero per 32 (gpt-fast's G=32)."""
    assert parse_weight_format("int4").bits == 4 + 20 / 128
    assert parse_weight_format("int4-g32").bits == 4 + 20 / 32
    assert parse_weight_format("int4-torchao-g32").bits == 4 + 32 / 32
    assert parse_weight_format("INT4-TORCHAO").bits == 4 + 32 / 128
    assert parse_weight_format("fp8-block").bits == 8 + 32 / (128 * 128)
    assert parse_weight_format("fp8") is DType.FP8  # plain formats are unchanged
    assert all(isinstance(f, Grouped) for f in weight_layouts().values())


@pytest.mark.parametrize(("name", "precision", "head_bits"),
                         [("int4", "bf16", 16), ("int4-torchao-g32", "bf16", 5),
                          ("fp8-block", "fp8", 16)])  # fmt: skip
def test_weights_memory_counts_each_part_in_its_format(name, precision, head_bits):
    """Llama-2-7B: the linear layers at the layout's width, the embedding table 16-bit, the
    LM head 16-bit where the layout leaves it unquantized (AWQ/GPTQ; DeepSeek's FP8 blocks,
    even beside FP8 activations) and quantized under torchao."""
    cfg = load_model("llama-2-7b")
    bits = parse_weight_format(name).bits
    table = head = cfg.vocab_size * cfg.hidden_size
    expected = (cfg.param_count - table - head) * bits / 8 + table * 2 + head * head_bits / 8
    run = {**RUN, "precision": precision}
    r = xpusim.simulate("llama-2-7b", "h100-sxm", weight_precision=name, **run)
    assert r.memory_bytes.weights == pytest.approx(expected)


def test_decode_matmuls_read_the_layouts_bytes():
    """A decode step's projection reads K x N weights at the layout's width; the LM head
    keeps 16 bits under AWQ's layout."""
    cfg = load_model("llama-2-7b")
    h, v = cfg.hidden_size, cfg.vocab_size
    r = xpusim.simulate("llama-2-7b", "h100-sxm", weight_precision="int4", **RUN)
    ops = {o.name: o for o in r.ops if o.phase == "decode"}
    o_proj_weights = h * h * (4 + 20 / 128) / 8
    assert ops["layers.0.o_proj"].bytes == pytest.approx(o_proj_weights + 2 * h * 2)
    assert ops["lm_head"].bytes == pytest.approx(h * v * 2 + (h + v) * 2)


def test_smaller_groups_cost_more_bytes_and_never_less_time():
    """More scales per weight: more bytes, so a memory-bound decode is never faster."""
    runs = [xpusim.simulate("llama-2-7b", "a100-sxm-80gb", weight_precision=name, **RUN)
            for name in ("int4", "int4-g64", "int4-g32")]  # fmt: skip
    weights = [r.memory_bytes.weights for r in runs]
    assert weights == sorted(weights) and weights[0] < weights[-1]
    tpots = [r.tpot_s for r in runs]
    assert tpots == sorted(tpots)
    bf16 = xpusim.simulate("llama-2-7b", "a100-sxm-80gb", **RUN)
    assert tpots[-1] < bf16.tpot_s


def test_recommendation_tables_keep_their_own_row_scales():
    """A DLRM's int4 tables store each row's scale and bias in the row (dlrm.py) whatever
    grouping its dense layers use: the tables' bytes are those of plain int4 rows."""
    from xpusim.ir.tensor import Role
    from xpusim.workloads.dlrm import build_batch, stored_row_elements

    cfg = load_model("dlrm-v2")
    graph = build_batch(cfg, 4, DType.FP16, parse_weight_format("int4"))
    tables = [t for op in graph.ops if op.kind.value == "embedding" for t in op.inputs[:1]]
    assert all(t.role is Role.WEIGHT and t.dtype is DType.INT4 for t in tables)
    spec = cfg.tables[0]
    assert tables[0].shape == (spec.rows, stored_row_elements(spec.dim, DType.INT4))


@pytest.mark.parametrize(("bad", "named"), [("int4-g33", "int4-g32"), ("int3", "int")])
def test_unknown_layout_is_refused_naming_the_closest(capsys, bad, named):
    err = refused(capsys, "run", "llama-2-7b", "--chip", "h100-sxm", "--weight-precision", bad)
    assert named in err


def test_unknown_layout_through_the_api_names_the_closest():
    with pytest.raises(UserError, match="int4-torchao"):
        xpusim.simulate("llama-2-7b", "h100-sxm", weight_precision="int4-torchoa", **RUN)


@pytest.mark.parametrize("precision", ["fp8", "nvfp4"])
def test_plain_low_float_formats_keep_the_head_and_table_16_bit(precision):
    """ModelOpt's FP8/NVFP4 checkpoints (and NVIDIA's MLPerf quantizer, quantize_lm_head
    False) leave the LM head and the embedding table bf16: Llama-3-8B's weights are the
    linear layers at the format's width plus both vocab x hidden matrices at 2 bytes."""
    cfg = load_model("llama-3-8b")
    table = head = cfg.vocab_size * cfg.hidden_size
    body_bits = DType(precision).bits
    expected = (cfg.param_count - table - head) * body_bits / 8 + (table + head) * 2
    r = xpusim.simulate("llama-3-8b", "b200", precision=precision, batch=1, prompt=8, gen=4)
    assert r.memory_bytes.weights == pytest.approx(expected)


def test_int8_still_quantizes_the_head():
    """int8 is left as edge compilers run it (the head quantized too): every weight 1 byte."""
    cfg = load_model("llama-2-7b")
    r = xpusim.simulate("llama-2-7b", "h100-sxm", precision="int8", batch=1, prompt=8, gen=4)
    assert r.memory_bytes.weights == pytest.approx(cfg.param_count)


def test_the_16_bit_head_costs_a_bf16_gemm_that_grows_with_the_sampled_sequences():
    """At B decoding sequences under nvfp4 the LM head is a bf16 GEMM of 2 B h v FLOPs that
    reads h x v bf16 weights and writes B x v bf16 logits: at 460 sequences on a B200 it is
    compute-bound, at least FLOPs over the bf16 peak, and its time grows with B (at 1
    sequence it is the weights' read, at least their bytes over the HBM bandwidth)."""
    cfg = load_model("llama-3-8b")
    h, v = cfg.hidden_size, cfg.vocab_size
    chip = xpusim.chip("b200")

    def head(batch: int):
        r = xpusim.simulate("llama-3-8b", "b200", precision="nvfp4", batch=batch, prompt=8,
                            gen=2)  # fmt: skip
        return next(o for o in r.ops if o.phase == "decode" and o.name == "lm_head")

    big, one = head(460), head(1)
    assert big.flops == pytest.approx(2 * 460 * h * v)
    assert big.bytes == pytest.approx(h * v * 2 + 460 * h * 0.5 + 460 * v * 2, rel=0.01)
    assert big.time_s >= 2 * 460 * h * v / chip.peak(DType.BF16)
    hbm = max(m.bandwidth_bytes_per_s.value for m in chip.memory if m.kind.holds_tensors
              and m.capacity_bytes.value > 1e10)  # fmt: skip
    assert one.time_s >= h * v * 2 / hbm
    assert big.time_s > 2 * one.time_s
