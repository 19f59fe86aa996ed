"""Prefill attention kernel tables (cost/kernel_tables.py, kinds `prefill_attention` and
`mla_prefill`): aiconfigurator's measured TensorRT-LLM context attention kernels price a
prefill's attention ops of their chip and cache format by the op's FLOPs, never past the
roofline; decode attention, windowed attention and chips without a table keep the model
they had."""

from __future__ import annotations

import tomllib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpusim.compiler.memory_plan import Footprint, place
from xpusim.cost import kernel_tables
from xpusim.cost.kernel_tables import kernel_table, tables_for_chip
from xpusim.cost.op_table import (
    is_decode_attention,
    is_mla_prefill,
    is_prefill_attention,
    kernel_keys,
    op_table,
)
from xpusim.cost.roofline import HardwareArrays, evaluate, kernel_floor_s
from xpusim.hardware.catalog import load_chip
from xpusim.ir.dtypes import DType
from xpusim.ir.graph import Graph
from xpusim.ir.op import Op, OpKind
from xpusim.ir.tensor import Role, Tensor

CHIPS = ("h100-sxm", "h200-sxm", "b200")
QK, V = 192, 128  # DeepSeek-V3's decompressed key (128 + 64 rope) and value widths


def _gqa(seqs: int, tokens: int, heads: int, kv_heads: int, head_dim: int,
         cache: DType = DType.BF16, prefix: int = 0, compute: DType | None = None, **attrs):
    """One prefill attention op as the layer builder emits it (workloads/transformer.py
    attention_block): `tokens` new queries per sequence over `prefix + tokens` keys, in the
    cache's format unless `compute` says."""
    keys, compute = prefix + tokens, compute or cache
    ins = (Tensor("q", (seqs, tokens, heads, head_dim), compute),
           Tensor("k_cache", (seqs, keys, kv_heads, head_dim), cache, Role.KV_CACHE),
           Tensor("v_cache", (seqs, keys, kv_heads, head_dim), cache, Role.KV_CACHE))
    outs = (Tensor("out", (seqs, tokens, heads * head_dim), DType.BF16),)
    op = Op(OpKind.ATTENTION, "attention", ins, outs,
            (("causal", True), ("compute", compute.value), ("heads", heads),
             ("head_dim", head_dim), ("kv_heads", kv_heads), *attrs.items()))  # fmt: skip
    return op_table(Graph("gqa", [op]))


def _mla(seqs: int, tokens: int, heads: int, fmt: DType = DType.BF16, **attrs):
    """One MLA prefill op (workloads/transformer.py latent_attention, decompressed form),
    its keys, values and compute in `fmt` (--precision fp8 makes them FP8)."""
    ins = (Tensor("q", (seqs, tokens, heads, QK), fmt),
           Tensor("k", (seqs, tokens, heads, QK), fmt),
           Tensor("v", (seqs, tokens, heads, V), fmt))
    outs = (Tensor("out", (seqs, tokens, heads * V), fmt),
            Tensor("latent_new", (seqs, tokens, 1, 576), fmt, Role.KV_CACHE))
    op = Op(OpKind.ATTENTION, "attention", ins, outs,
            (("causal", True), ("compute", fmt.value), ("heads", heads), ("head_dim", QK),
             ("kv_heads", heads), ("v_dim", V), *attrs.items()))  # fmt: skip
    return op_table(Graph("mla", [op]))


def _cost(chip_id: str, ops) -> tuple[float, float, float]:
    """(time, kernel floor, roofline on the op's compute format) of a one-op table."""
    chip = load_chip(chip_id)
    hw = HardwareArrays.build(chip, ops)
    costs = evaluate(ops, hw, place(chip, Footprint(0.0, 0.0, 1e6)))
    hbm = max(m.bandwidth_bytes_per_s.value for m in chip.memory if m.kind.holds_tensors)
    roof = max(float(ops.matrix_flops.sum()) / float(hw.kernel_peak[0]),
               float(ops.role_bytes.sum()) / hbm)  # fmt: skip
    return float(costs.time_s.sum()), float(kernel_floor_s(ops, hw).sum()), roof


def _measured_s(kind: str, chip_id: str, name: str, row: list[int]) -> float:
    with (kernel_tables.TABLES_DIR / kind / f"{chip_id}.toml").open("rb") as f:
        (entry,) = [t for t in tomllib.load(f)["table"] if t["name"] == name]
    (micros,) = [r[-1] for r in entry["rows"] if r[:-1] == row]
    return micros * 1e-6


@pytest.mark.parametrize("chip_id", CHIPS)
def test_the_tables_load_with_their_source_and_no_row_past_the_roofline(chip_id):
    gqa = tables_for_chip(chip_id, "prefill_attention")
    assert {t.scope for t in gqa} == {"bf16", "fp8"}
    mla = tables_for_chip(chip_id, "mla_prefill")
    assert {t.scope for t in mla} == {"bf16", "fp8"}
    assert {t.dtype for t in mla} == {"bf16"}  # both judged at the BF16 peak
    for t in (*gqa, *mla):
        assert t.engine == "trtllm TensorRT-LLM 1.3.0rc20"
        assert "095f58a51c4ca8e61b66ec108d86f223f8d559ce" in t.url and "context_" in t.url
        assert t.chips == (chip_id,)
        assert len(t.rows_m) >= 75 and np.all(t.fractions <= 1)
        # the fit, one curve over head shapes: rms 9-20%, no row off by 70%
        err = t.predict_s(t.rows_m, t.roofline_s) / t.measured_s - 1
        assert np.max(np.abs(err)) < 0.7 and np.sqrt(np.mean(err**2)) < 0.22


def test_a_row_faster_than_its_flops_allow_is_refused():
    """Llama-3-70B at TP8 (8 heads of 128), one prompt of 8,192 tokens, causal: 4 x 8 x 128
    x 8192 x 8193 / 2 = 137 GFLOP, 139 us at the H100's 989.5 TFLOPS BF16; a row of 100 us
    is past the roofline."""
    chip = load_chip("h100-sxm")
    rows = np.array([[1, 8192, 8, 1, 128, 100.0]])
    with pytest.raises(Exception, match="roofline"):
        kernel_tables.roofline_seconds(rows, DType.BF16, chip, "t", "prefill_attention", "bf16")
    m, roof_s, _ = kernel_tables.roofline_seconds(rows * [1, 1, 1, 1, 1, 4], DType.BF16, chip,
                                                  "t", "prefill_attention", "bf16")  # fmt: skip
    flops = 4 * 8 * 128 * 8192 * 8193 / 2
    assert roof_s[0] == pytest.approx(flops / chip.peak(DType.BF16), rel=1e-9)
    assert m[0] == 2.0 ** np.round(np.log2(flops))


@pytest.mark.parametrize(("chip_id", "cache", "shape", "seqs", "tokens"), [
    ("h100-sxm", DType.BF16, (8, 1, 128), 1, 8192),  # Llama-3-70B TP8
    ("h200-sxm", DType.FP8, (64, 8, 128), 4, 2048),  # Llama-3-70B TP1
    ("b200", DType.BF16, (64, 8, 64), 1, 16384),  # gpt-oss TP1
    ("b200", DType.FP8, (16, 1, 128), 16, 1024),  # Llama-3-405B TP8
])  # fmt: skip
def test_a_prefill_op_costs_its_measured_time_at_a_tabulated_shape(chip_id, cache, shape,
                                                                   seqs, tokens):  # fmt: skip
    """A measured shape costs at least the table's model of it (fixed time + roofline /
    f(FLOPs), one curve over the head shapes), near the measured time, and never less than
    the op's roofline."""
    ops = _gqa(seqs, tokens, *shape, cache=cache)
    op = ops.ops[0]
    assert is_prefill_attention(op) and not is_decode_attention(op)
    assert kernel_keys(op) == (("prefill_attention", cache.value),)
    assert ops.keyed_by_flops.tolist() == [True]
    kv = "bfloat16" if cache == DType.BF16 else "fp8"
    name = f"aiconfigurator-trtllm-prefill-attention-{kv}-{chip_id}"
    assert kernel_table(chip_id, cache, cache.value, "prefill_attention").name == name
    time_s, floor_s, roof_s = _cost(chip_id, ops)
    assert time_s >= floor_s >= roof_s
    measured = _measured_s("prefill_attention", chip_id, name, [seqs, tokens, *shape])
    assert 0.6 < floor_s / measured < 1.5


@pytest.mark.parametrize("chip_id", CHIPS)
@pytest.mark.parametrize("fmt", [DType.BF16, DType.FP8])
@pytest.mark.parametrize(("heads", "seqs", "tokens"), [(128, 1, 8192), (16, 4, 4096),
                                                       (32, 1, 32768)])  # fmt: skip
def test_an_mla_prefill_op_costs_its_measured_time(chip_id, fmt, heads, seqs, tokens):
    """At the BF16 peak whatever the op's format: the FP8-cache rows never beat it."""
    ops = _mla(seqs, tokens, heads, fmt)
    assert is_mla_prefill(ops.ops[0]) and not is_prefill_attention(ops.ops[0])
    assert kernel_keys(ops.ops[0]) == (("mla_prefill", fmt.value),)
    chip = load_chip(chip_id)
    assert HardwareArrays.build(chip, ops).kernel_peak[0] == chip.peak(DType.BF16)
    time_s, floor_s, roof_s = _cost(chip_id, ops)
    assert time_s >= floor_s >= roof_s
    kv = "bfloat16" if fmt == DType.BF16 else "fp8"
    name = f"aiconfigurator-trtllm-mla-prefill-{kv}-{chip_id}"
    measured = _measured_s("mla_prefill", chip_id, name, [seqs, tokens, heads, QK, V])
    assert 0.6 < floor_s / measured < 1.5  # within the fit (one curve over batch x tokens)


def test_the_table_slows_a_short_prompt_on_the_b200_where_the_model_assumed_its_gemm_rate(
        monkeypatch):  # fmt: skip
    """The B200 has no attention calibration and took its matmul efficiency (0.776) for
    flash attention; TensorRT-LLM's context kernel of Llama-3-70B at TP8 over one 4k prompt
    measures 0.20 of the BF16 peak."""
    ops = _gqa(1, 4096, 8, 1, 128)
    with_table, _, roof = _cost("b200", ops)
    _without_prefill_tables(monkeypatch)
    without, _, _ = _cost("b200", ops)
    assert roof < without < with_table
    assert with_table / roof > 3


def test_the_kernel_format_chooses_the_table_whatever_the_cache():
    """TensorRT-LLM measured BF16 context kernels over a BF16 cache and FP8 over FP8: an
    FP16 prefill (one tensor-core rate with BF16) over an FP8 cache takes the bf16 table at
    the 16-bit peak, and is slower than the FP8 kernel at the same shape."""
    chip = load_chip("h100-sxm")
    sixteen = _gqa(1, 2048, 32, 32, 128, cache=DType.FP8, compute=DType.FP16)
    assert kernel_keys(sixteen.ops[0]) == (("prefill_attention", "bf16"),)
    assert HardwareArrays.build(chip, sixteen).kernel_peak[0] == chip.peak(DType.BF16)
    eight = _gqa(1, 2048, 32, 32, 128, cache=DType.FP8)
    assert kernel_keys(eight.ops[0]) == (("prefill_attention", "fp8"),)
    assert _cost("h100-sxm", sixteen)[1] > _cost("h100-sxm", eight)[1]


@pytest.mark.parametrize("attrs", [{"window": 128}, {"decode": True}, {"chunk": 8192}])
def test_windowed_chunked_and_decode_attention_are_not_prefill_table_ops(attrs):
    ops = _gqa(1, 1 if attrs.get("decode") else 4096, 8, 1, 128, prefix=4096, **attrs)
    assert not is_prefill_attention(ops.ops[0]) and not ops.keyed_by_flops.any()


def test_sparse_mla_is_not_priced_by_the_mla_prefill_table():
    ops = _mla(1, 8192, 128, top_k=2048)  # DeepSeek-V3.2's DSA
    assert not is_mla_prefill(ops.ops[0])
    assert not np.isfinite(HardwareArrays.build(load_chip("b200"), ops).kernel_peak).any()


def _priced_s(chip_id: str, ops) -> tuple[float, float]:
    """(time, kernel floor) of a one-op table, the op priced as evaluate prices it."""
    time_s, floor_s, _ = _cost(chip_id, ops)
    return time_s, floor_s


LAYOUTS = [(8, 1, 64), (8, 1, 128), (32, 8, 128), (64, 8, 64), (16, 1, 128)]
"""(heads, kv heads, head_dim) of the tables' rows: GPT-J-like small heads, Llama-3-70B TP8,
Llama-3-8B TP1, gpt-oss TP1, Llama-3-405B TP8."""


@settings(max_examples=40, deadline=None)
@given(chip_id=st.sampled_from(CHIPS), cache=st.sampled_from([DType.BF16, DType.FP8]),
       layout=st.sampled_from(LAYOUTS), seqs=st.integers(1, 64), tokens=st.integers(1, 16384),
       more=st.integers(1, 4096), prefix=st.sampled_from([0, 0, 3000]))  # fmt: skip
def test_prefill_attention_never_costs_less_for_more_work(chip_id, cache, layout, seqs, tokens,
                                                          more, prefix):  # fmt: skip
    """More tokens, one more sequence, twice the heads (and KV heads: half the TP) or a
    longer cached prefix never cost a prefill attention op less, below the tables' shortest
    prompt (128 tokens) as above it (kernel_tables.flops_envelope_s)."""
    heads, kv_heads, head_dim = layout
    base = _priced_s(chip_id, _gqa(seqs, tokens, *layout, cache=cache, prefix=prefix))
    for bigger in (_gqa(seqs, tokens + more, *layout, cache=cache, prefix=prefix),
                   _gqa(seqs + 1, tokens, *layout, cache=cache, prefix=prefix),
                   _gqa(seqs, tokens, 2 * heads, 2 * kv_heads, head_dim, cache=cache,
                        prefix=prefix),
                   _gqa(seqs, tokens, *layout, cache=cache, prefix=prefix + more)):  # fmt: skip
        for priced, least in zip(_priced_s(chip_id, bigger), base, strict=True):
            assert priced >= least * (1 - 1e-12)


@settings(max_examples=20, deadline=None)
@given(chip_id=st.sampled_from(CHIPS), fmt=st.sampled_from([DType.BF16, DType.FP8]),
       heads=st.sampled_from([16, 32, 128]), seqs=st.integers(1, 16),
       tokens=st.integers(1, 16384), more=st.integers(1, 4096))  # fmt: skip
def test_mla_prefill_never_costs_less_for_more_work(chip_id, fmt, heads, seqs, tokens, more):
    base = _priced_s(chip_id, _mla(seqs, tokens, heads, fmt))
    for bigger in (_mla(seqs, tokens + more, heads, fmt), _mla(seqs + 1, tokens, heads, fmt),
                   _mla(seqs, tokens, 2 * heads, fmt)):  # fmt: skip
        for priced, least in zip(_priced_s(chip_id, bigger), base, strict=True):
            assert priced >= least * (1 - 1e-12)


def _model_s(ops, hw: HardwareArrays) -> float:
    """The table's model of a one-op table's op before the envelope: fixed time + its
    roofline / f(FLOPs) on the curve the cost model samples (GRID_LOG2)."""
    roof_s = max(float(ops.matrix_flops[0]) / float(hw.kernel_peak[0]),
                 float(ops.role_bytes.sum()) / float(hw.kernel_bw))  # fmt: skip
    fraction = kernel_tables.interpolate_grid(hw.kernel_grid, ops.matrix_flops)
    return float(hw.kernel_fixed_s[0] + roof_s / fraction[0])


@pytest.mark.parametrize("chip_id", CHIPS)
@pytest.mark.parametrize("kind", ["prefill_attention", "mla_prefill"])
def test_the_envelope_only_lowers_rows_and_fits_them_as_well(chip_id, kind):
    """At each measured row's own shape the op costs at most the table's model of it
    (fixed time + roofline / f(FLOPs)), lower only where a larger FLOPs node prices the
    row's bytes faster, and the floor fits the measured times as well as the model does
    (rms within 0.01, most rows unchanged)."""
    chip = load_chip(chip_id)
    with (kernel_tables.TABLES_DIR / kind / f"{chip_id}.toml").open("rb") as f:
        entries = tomllib.load(f)["table"]
    for entry in entries:
        fmt = DType.BF16 if "bfloat16" in entry["name"] else DType.FP8
        rows = [r for r in entry["rows"] if kind == "prefill_attention" or r[3:5] == [QK, V]]
        model, floor, measured = [], [], []
        for seqs, tokens, heads, a, b, micros in rows:
            ops = _gqa(seqs, tokens, heads, a, b, cache=fmt) if kind == "prefill_attention" \
                else _mla(seqs, tokens, heads, fmt)
            hw = HardwareArrays.build(chip, ops)
            model.append(_model_s(ops, hw))
            floor.append(float(kernel_floor_s(ops, hw)[0]))
            measured.append(micros * 1e-6)
        model, floor, measured = map(np.array, (model, floor, measured))
        assert np.all(floor <= model * (1 + 1e-9))
        assert np.mean(np.isclose(floor, model, rtol=1e-9)) > 0.6
        rms = [np.sqrt(np.mean((t / measured - 1) ** 2)) for t in (model, floor)]
        assert rms[1] < rms[0] + 0.01


def test_a_row_that_a_larger_kernel_beats_is_priced_at_the_larger():
    """H100 BF16 rows: one 128-token prompt of 8 heads of 64 takes 17.18 us, of 8 heads of
    128 (twice the FLOPs and bytes) 15.51 us. A cost of FLOPs and bytes alone gives 16
    heads of 64 (and 2 KV heads) the second row's price, so no such cost both keeps both
    rows and never falls with more heads: the first row is priced at most the second's,
    which keeps its own."""
    small, large = _gqa(1, 128, 8, 1, 64), _gqa(1, 128, 8, 1, 128)
    twice_the_heads = _gqa(1, 128, 16, 2, 64)
    assert float(twice_the_heads.role_bytes.sum()) == float(large.role_bytes.sum())
    assert float(twice_the_heads.matrix_flops[0]) == float(large.matrix_flops[0])
    (_, small_s), (_, large_s) = (_priced_s("h100-sxm", o) for o in (small, large))
    assert small_s <= large_s
    hw = HardwareArrays.build(load_chip("h100-sxm"), small)
    assert small_s < 0.95 * _model_s(small, hw)
    assert large_s == pytest.approx(_model_s(large, HardwareArrays.build(load_chip("h100-sxm"),
                                                                         large)), rel=1e-12)


def _without_prefill_tables(monkeypatch) -> None:
    """The cost model as it was before the prefill kinds: no table keys a prefill's
    attention."""
    real = kernel_tables.fraction_grid

    def without(chip_id, dtype, keys, shapes):
        return real(chip_id, dtype, tuple(k for k in keys if k[0] not in ("prefill_attention",
                                                                          "mla_prefill")), shapes)

    monkeypatch.setattr("xpusim.cost.roofline.fraction_grid", without)


@pytest.mark.parametrize("chip_id", ["a100-sxm-80gb", "mi300x", "b300"])
def test_a_chip_without_a_table_is_unchanged(chip_id, monkeypatch):
    """No prefill table for the chip: its prefill attention (GQA and MLA) costs exactly
    what it did with no prefill kinds at all."""
    assert not tables_for_chip(chip_id, "prefill_attention")
    assert not tables_for_chip(chip_id, "mla_prefill")
    ops = [_gqa(2, 4096, 64, 8, 128), _mla(1, 8192, 128)]
    before = [_cost(chip_id, o)[0] for o in ops]
    _without_prefill_tables(monkeypatch)
    assert [_cost(chip_id, o)[0] for o in ops] == before


@pytest.mark.parametrize("chip_id", CHIPS)
def test_the_curve_reaches_every_rows_flops(chip_id):
    """Every measured prefill row lies inside the grid the cost model samples its curve at
    (kernel_tables.GRID_LOG2): a grid ending at 2^40 had priced the rows of 16k-token
    prompts of many heads (up to 2^45.3 FLOPs) at the 2^40 node's fraction."""
    for kind in ("prefill_attention", "mla_prefill"):
        with (kernel_tables.TABLES_DIR / kind / f"{chip_id}.toml").open("rb") as f:
            entries = tomllib.load(f)["table"]
        for entry in entries:
            for seqs, tokens, heads, a, b, _ in entry["rows"]:
                ops = _gqa(seqs, tokens, heads, a, b) if kind == "prefill_attention" \
                    else _mla(seqs, tokens, heads)
                assert np.log2(float(ops.matrix_flops[0])) <= kernel_tables.GRID_LOG2[-1]
