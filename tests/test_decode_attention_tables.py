"""Decode-attention kernel tables (cost/kernel_tables.py, kind `decode_attention`):
aiconfigurator's measured TensorRT-LLM generation-attention kernels price GQA/MHA decode
attention ops of their chip and KV format by the op's bytes, never past the roofline; prefill,
latent (MLA) attention and chips without a table keep the model they had (the mla_decode
tables price MLA: tests/test_mla_decode_tables.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kernel_floor import assert_more_bandwidth_is_never_slower

import xpusim
from xpusim.compiler.memory_plan import Footprint, place
from xpusim.cost import kernel_tables
from xpusim.cost.kernel_tables import kernel_table, tables_of_kind
from xpusim.cost.op_table import is_decode_attention, kernel_keys, kernel_shapes, op_table
from xpusim.cost.roofline import HardwareArrays, evaluate, kernel_floor_s
from xpusim.hardware.catalog import load_chip
from xpusim.ir.dtypes import DType
from xpusim.ir.graph import Graph
from xpusim.ir.op import Op, OpKind
from xpusim.ir.tensor import Role, Tensor

TABLES = tables_of_kind("decode_attention")


def _attention(seqs: int, tokens: int, heads: int, kv_heads: int, head_dim: int,
               kv: DType = DType.BF16, q_len: int = 1, **attrs):
    """One attention op as the layer builder emits it (workloads/transformer.py): `q_len`
    new tokens per sequence over a cache of `tokens` keys and values in format `kv`, a
    decode step's where q_len is 1, a prefill chunk's otherwise."""
    cache = (seqs, tokens, kv_heads, head_dim)
    ins = (Tensor("q", (seqs, q_len, heads, head_dim), DType.BF16),
           Tensor("k_cache", cache, kv, Role.KV_CACHE),
           Tensor("v_cache", cache, kv, Role.KV_CACHE))  # fmt: skip
    out = (Tensor("out", (seqs, q_len, heads * head_dim), DType.BF16),)
    decode = (("decode", True),) if q_len == 1 else ()  # a decode step (StepShape.decode)
    op = Op(OpKind.ATTENTION, "attention", ins, out,
            (("causal", True), ("compute", "bf16"), *decode, *attrs.items()))  # fmt: skip
    return op_table(Graph("attention", [op]))


def _time_and_roof(chip_id: str, table) -> tuple[float, float]:
    chip = load_chip(chip_id)
    costs = evaluate(table, HardwareArrays.build(chip, table), place(chip, Footprint(0.0, 0.0,
                                                                               1e6)))  # fmt: skip
    hbm = max(m.bandwidth_bytes_per_s.value for m in chip.memory if m.kind.holds_tensors)
    roof = max(float(table.matrix_flops.sum()) / chip.peak(DType.BF16),
               float(table.role_bytes.sum()) / hbm)  # fmt: skip
    return float(costs.time_s.sum()), roof


def test_the_tables_load_with_their_source_engine_and_commit():
    names = {t.name for t in TABLES}
    for chip_id in ("h100-sxm", "h200-sxm", "b200"):
        for kv in ("bfloat16", "fp8"):
            assert f"aiconfigurator-trtllm-decode-attention-{kv}-{chip_id}" in names
    for t in TABLES:
        assert t.engine == "trtllm TensorRT-LLM 1.3.0rc20"
        assert "095f58a51c4ca8e61b66ec108d86f223f8d559ce" in t.url and "rc20" in t.url
        assert t.chips == (t.measured_on,)
        assert len(t.rows_m) >= 100 and np.all(t.fractions <= 1)


def test_a_row_converts_to_its_cache_stream():
    """Llama-3-70B's TP2 shape (32 heads, 4 KV heads of 128) at 256 sequences of 1,023
    cached tokens on an H200: the cache is 256 x 1023 x 2 x 4 x 128 x 2 bytes (536 MB),
    0.113 ms at 4.8 TB/s, against 0.141 ms measured (0.80 of it)."""
    table = kernel_table("h200-sxm", DType.BF16, "bf16", kind="decode_attention")
    rows = np.array([[256, 1023, 32, 4, 128, 141.0]])
    m, roof_s, _ = kernel_tables.roofline_seconds(
        rows, DType.BF16, load_chip("h200-sxm"), "t", "decode_attention", "bf16")
    moved = 256 * (2 * 32 * 128 * 2 + 2 * 4 * 1023 * 128 * 2)
    assert roof_s[0] == pytest.approx(moved / 4.8e12, rel=1e-3)
    assert m[0] == 2.0 ** np.round(np.log2(moved))
    assert table.name == "aiconfigurator-trtllm-decode-attention-bfloat16-h200-sxm"


@pytest.mark.parametrize(("chip_id", "kv", "shape", "seqs", "tokens"), [
    ("h200-sxm", DType.BF16, (32, 4, 128), 64, 1023),  # Llama-3-70B TP2
    ("h100-sxm", DType.FP8, (64, 8, 128), 64, 4095),  # Llama-3-70B TP1
    ("b200", DType.BF16, (64, 8, 64), 64, 4095),  # gpt-oss TP1
])  # fmt: skip
def test_a_decode_op_follows_its_table_and_stays_above_the_roofline(chip_id, kv, shape, seqs,
                                                                     tokens):  # fmt: skip
    heads, kv_heads, head_dim = shape
    ops = _attention(seqs, tokens, heads, kv_heads, head_dim, kv)
    assert is_decode_attention(ops.ops[0])
    table = kernel_table(chip_id, DType.BF16, kv.value, kind="decode_attention")
    hw = HardwareArrays.build(load_chip(chip_id), ops)
    floor_s = float(kernel_floor_s(ops, hw).sum())
    time_s, roof_s = _time_and_roof(chip_id, ops)
    assert time_s >= roof_s and time_s >= floor_s
    own = table.of_shape((float(heads), float(kv_heads), float(head_dim)))
    assert len(own.rows_m) < len(table.rows_m)  # the layout's own rows, not the pool
    grid, fixed_s = table.grid_of((float(heads), float(kv_heads), float(head_dim)))
    assert fixed_s == own.fixed_s  # the layout's own fit, its curve made isotonic in time
    model_s = fixed_s + roof_s / float(kernel_tables.interpolate_grid(
        grid, np.array(float(ops.role_bytes.sum())), True))  # fmt: skip
    assert floor_s == pytest.approx(model_s, rel=1e-6)
    (at,) = [i for i, r in enumerate(_rows(table.name)) if r[:5] == [seqs, tokens, *shape]]
    assert 0.7 < floor_s / table.measured_s[at] < 1.4  # as near as the fit is there


def test_gpt_oss_on_one_hopper_gpu_takes_its_own_rows():
    """gpt-oss's layout on one GPU (64 heads, 8 KV heads of 64) over a BF16 cache, as
    TensorRT-LLM runs it on Hopper: its generation kernel costs about 0.27 us a sequence
    however few the keys (1,024 sequences of 127: 276 us measured on an H200, 3.2x the
    85.6 us of Llama-3-8B-like rows of the same bytes). Priced by the pooled curve, the op
    took 123 us; by its own rows 215 us. A decode step of a layout the table measured must
    not fall back to the pool."""
    ops = _attention(1024, 127, 64, 8, 64)
    time_s, _ = _time_and_roof("h200-sxm", ops)
    (measured,) = [r[5] for r in _rows("aiconfigurator-trtllm-decode-attention-bfloat16-h200-sxm")
                   if r[:5] == [1024, 127, 64, 8, 64]]  # fmt: skip
    assert 0.7 < time_s / (measured * 1e-6) < 1.1
    assert kernel_shapes(ops.ops[0]) == (("decode_attention", (64.0, 8.0, 64.0)),)


def test_a_layout_the_table_did_not_measure_takes_the_pooled_curve():
    """Llama-3-405B at TP8 (16 heads, 1 KV head of 128) is not among the tables' layouts:
    its op takes the curve of them all, as before the tables had shapes."""
    table = kernel_table("h200-sxm", DType.FP8, "fp8", kind="decode_attention")
    assert table.of_shape((16.0, 1.0, 128.0)) is table


def _rows(name: str) -> list[list]:
    import tomllib

    path = kernel_tables.TABLES_DIR / "decode_attention/nvidia-trtllm.toml"
    with path.open("rb") as f:
        (entry,) = [t for t in tomllib.load(f)["table"] if t["name"] == name]
    return entry["rows"]


def _without_decode_tables(monkeypatch) -> None:
    """Every table but the decode_attention ones, as before they existed."""
    others = {k: kernel_tables.tables_of_kind(k) for k in ("gemm", "moe")}
    monkeypatch.setattr(kernel_tables, "tables_of_kind", lambda kind: others.get(kind, ()))


def test_the_table_raises_a_mid_size_decode_above_the_chips_own_model(monkeypatch):
    """64 sequences of 1,023 tokens of Llama-3-70B's TP2 shape on an H200 (134 MB of cache,
    a 28 us roofline): the measured kernel takes 64.8 us (0.43 of the roofline), the table's
    model 70 us; the chip's own model (its memory efficiency and 2 us per op) 33.5 us."""
    ops = _attention(64, 1023, 32, 4, 128)
    with_table, _ = _time_and_roof("h200-sxm", ops)
    _without_decode_tables(monkeypatch)
    without, _ = _time_and_roof("h200-sxm", ops)
    assert without < 36e-6 < 60e-6 < with_table < 80e-6


@pytest.mark.parametrize("ops", [
    _attention(4, 1024, 32, 4, 128, q_len=1024),  # prefill
    _attention(4, 1024, 32, 4, 128, q_len=6),  # a chunk of prefill
    _attention(64, 1024, 128, 1, 576, v_dim=512),  # latent (MLA) decode
])  # fmt: skip
def test_prefill_and_latent_attention_are_not_priced(ops):
    """Not by a decode_attention table: a prefill's attention has its own tables
    (prefill_attention, tests/test_prefill_attention_tables.py), MLA decode its own."""
    assert not is_decode_attention(ops.ops[0])
    assert all(kind != "decode_attention" for kind, _ in kernel_keys(ops.ops[0]))


@pytest.mark.parametrize("chip_id", ["mi300x", "a100-sxm-80gb", "tpu-v5e", "b300"])
def test_chips_without_a_table_are_unchanged(chip_id, monkeypatch):
    ops = _attention(256, 2047, 8, 1, 128)
    with_tables, _ = _time_and_roof(chip_id, ops)
    _without_decode_tables(monkeypatch)
    without, _ = _time_and_roof(chip_id, ops)
    assert np.float64(with_tables).tobytes() == np.float64(without).tobytes()


def test_more_bandwidth_is_never_slower_through_a_decode_table():
    chip = load_chip("h100-sxm")
    for seqs in (1, 16, 256):
        ops = _attention(seqs, 4095, 8, 1, 128, DType.FP8)
        assert_more_bandwidth_is_never_slower(chip, ops, place(chip, Footprint(0.0, 0.0, 1e6)))


def test_a_sliding_window_decode_takes_its_sequences_measured_time():
    """gpt-oss's 128-token sliding-window layers at the batch TensorRT-LLM settles at on
    one H200 (2,006 sequences, 1k/1k max load): the op streams the bytes of 64 sequences
    of 4,095 keys (153 us measured), but the generation kernel's 0.27 us a sequence makes
    2,006 of them take 540 us (aiconfigurator's 2,048 sequences of 63 keys). Keyed by bytes
    alone the op took 165 us, below the 1,024 sequences of 127 keys it is twice."""
    half = _rows("aiconfigurator-trtllm-decode-attention-bfloat16-h200-sxm")
    (measured_us,) = [r[5] for r in half if r[:5] == [1024, 127, 64, 8, 64]]
    time_s, _ = _time_and_roof("h200-sxm", _attention(2006, 128, 64, 8, 64))
    assert 2006 / 1024 * measured_us * 1e-6 <= time_s < 1.05 * 2006 / 1024 * measured_us * 1e-6


@settings(max_examples=40, deadline=None)
@given(seqs=st.integers(1024, 4096), tokens=st.integers(1, 255),
       table=st.sampled_from([t.name for t in TABLES]))
def test_more_sequences_at_few_keys_are_never_cheaper(seqs, tokens, table):
    """Twice the sequences at the same few keys each (a sliding window's, a short prompt's)
    is twice the work: never less time, on any table's chip, layout and cache format. Keyed
    by bytes alone, 2,048 sequences of 127 keys of gpt-oss's layout on an H200 took 0.69 of
    1,024's time. Fewer sequences of more keys still can (docs/validation.md, "gpt-oss
    under trtllm-bench, op by op"): the bytes' curve pools both regimes."""
    (t,) = [t for t in TABLES if t.name == table]
    kv = DType.parse(t.scope)
    heads, kv_heads, head_dim = t.row_shapes[0]
    one, two = (_time_and_roof(t.measured_on, _attention(n, tokens, int(heads), int(kv_heads),
                                                         int(head_dim), kv))[0]
                for n in (seqs, 2 * seqs))  # fmt: skip
    assert two >= one


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.name)
def test_the_sequence_floor_prices_no_row_above_its_measured_time(table):
    """The least time per sequence over a layout's rows bounds each of its rows from below:
    the floor adds time only where the bytes' curve runs under the measured sequences."""
    for shape in set(table.row_shapes):
        own = table.of_shape(shape)
        assert own.sequence_floor_s > 0
        assert np.all(own.sequences * own.sequence_floor_s <= own.measured_s)
        assert np.any(own.sequences * own.sequence_floor_s == own.measured_s)


def test_a_model_layers_decode_counts_its_sequences():
    """The layer builder's decode op reads more than its query and writes more than its
    output (gpt-oss's reads the new keys and values and its sinks): its sequences are its
    bytes other than the cache's over one sequence's, not the table rows' query and output
    bytes, which counted gpt-oss's 2,006 sequences as 3,260 (845 us, not 540)."""
    r = xpusim.simulate("gpt-oss-20b", "h200-sxm", batch=2006, prompt=1536, gen=2,
                        precision="bf16", weight_precision="mxfp4")  # fmt: skip
    (window_s,) = {o.time_s for o in r.ops if o.phase == "decode"
                   and o.name == "layers.0.attention"}  # fmt: skip
    (measured,) = [r[5] for r in _rows("aiconfigurator-trtllm-decode-attention-bfloat16-h200-sxm")
                   if r[:5] == [1024, 127, 64, 8, 64]]  # fmt: skip
    assert 1.0 <= window_s / (2006 / 1024 * measured * 1e-6) < 1.05


@settings(max_examples=60, deadline=None)
@given(table=st.sampled_from([t.name for t in TABLES]), layout=st.integers(0, 16),
       seqs=st.sampled_from([1, 2, 4, 16, 64, 256, 1024]),
       tokens=st.lists(st.integers(1, 131072), min_size=2, max_size=2, unique=True))
def test_more_context_is_never_cheaper_at_the_same_sequences(table, layout, seqs, tokens):
    """A decode step of more cached tokens a sequence, at the same sequences, never costs
    less, on every table's chip, cache format and layout (its own rows' curve) or an
    unmeasured one (the pool's): the curve is isotonic in time (kernel_tables.
    time_isotonic), and more bandwidth is never slower through it."""
    (t,) = [t for t in TABLES if t.name == table]
    shapes = [*sorted(set(t.row_shapes)), (16.0, 1.0, 128.0)]  # the last: no rows, the pool
    heads, kv_heads, head_dim = (int(d) for d in shapes[layout % len(shapes)])
    fewer, more = (_time_and_roof(t.measured_on, _attention(seqs, n, heads, kv_heads, head_dim,
                                                            DType.parse(t.scope)))[0]
                   for n in sorted(tokens))  # fmt: skip
    assert more >= fewer * (1 - 1e-12)
    chip = load_chip(t.measured_on)
    ops = _attention(seqs, max(tokens), heads, kv_heads, head_dim, DType.parse(t.scope))
    assert_more_bandwidth_is_never_slower(chip, ops, place(chip, Footprint(0.0, 0.0, 1e6)))


def test_one_sequence_of_llama_3_8b_costs_more_at_2000_tokens_than_at_1000():
    """Issue #48: TensorRT-LLM's H100 kernel for Llama-3-8B's layout (32 heads, 8 KV heads
    of 128) measured 12.6 us for one sequence of 4 MB and 10.1 us for 16 sequences of 8 MB;
    the bytes' curve priced one sequence of 2,000 tokens under one of 1,000 (a decode step
    6,707 us against 6,791). Isotonic in time, the nodes of 2-8 MB take their rows' pooled
    time: both rows' kernel floors move towards each other (12.5 -> 11.2 us and 10.1 ->
    11.3 us), each within 12% of its measurement."""
    one_k, two_k = (_time_and_roof("h100-sxm", _attention(1, n, 32, 8, 128))[0]
                    for n in (1000, 2000))  # fmt: skip
    assert two_k >= one_k
    rows = _rows("aiconfigurator-trtllm-decode-attention-bfloat16-h100-sxm")
    for seqs, tokens in ((1, 1023), (16, 127)):
        (measured,) = [r[5] for r in rows if r[:5] == [seqs, tokens, 32, 8, 128]]
        ops = _attention(seqs, tokens, 32, 8, 128)
        floor_s = float(kernel_floor_s(ops, HardwareArrays.build(load_chip("h100-sxm"), ops))[0])
        assert 0.88 < floor_s / (measured * 1e-6) < 1.12


def test_an_fp16_cache_streams_through_the_bf16_table():
    """An FP16 cache is a BF16 one's bytes in the same generation kernel template (NIM's FP16
    Llama-3 engines): it takes the bf16 table, to the bit, where it had no table before and
    fell to the chip's own model (Llama-3-70B TP4, 256 sequences of 1,023 keys on an H100:
    TensorRT-LLM's BF16 row 109 us)."""
    fp16, bf16 = (_attention(256, 1023, 16, 2, 128, kv) for kv in (DType.FP16, DType.BF16))
    assert kernel_keys(fp16.ops[0]) == (("decode_attention", "bf16"),)
    hw = HardwareArrays.build(load_chip("h100-sxm"), fp16)
    assert float(kernel_floor_s(fp16, hw)[0]) == float(kernel_floor_s(bf16, hw)[0]) > 100e-6
    assert _time_and_roof("h100-sxm", fp16) == _time_and_roof("h100-sxm", bf16)
