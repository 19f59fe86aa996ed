"""MLA decode kernel tables (cost/kernel_tables.py, kind `mla_decode`): aiconfigurator's
measured TensorRT-LLM MLA generation kernels price absorbed MLA decode ops of their chip,
compute format and cache format by the op's bytes, never past the roofline; GQA decode, an
MLA prefill, sparse (top-k) MLA and chips without a table keep the model they had."""

from __future__ import annotations

import math
import tomllib
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from kernel_floor import assert_more_bandwidth_is_never_slower

from xpusim.compiler.memory_plan import Footprint, place
from xpusim.cost import kernel_tables
from xpusim.cost.kernel_tables import kernel_table, tables_of_kind
from xpusim.cost.op_table import (
    is_decode_attention,
    is_mla_decode,
    kernel_keys,
    kernel_shapes,
    op_table,
)
from xpusim.cost.roofline import HardwareArrays, evaluate, kernel_floor_s
from xpusim.cost.split_layout import busiest_cu_s
from xpusim.errors import UserError
from xpusim.hardware.catalog import load_chip
from xpusim.ir.dtypes import DType
from xpusim.ir.graph import Graph
from xpusim.ir.op import Op, OpKind
from xpusim.ir.tensor import Role, Tensor

TABLES = tables_of_kind("mla_decode")
RANK, ROPE = 512, 64  # DeepSeek-V3/R1's kv_lora_rank and qk_rope_head_dim


def _mla(seqs: int, tokens: int, heads: int, cache: DType = DType.BF16,
         compute: DType = DType.BF16, **attrs):
    """One absorbed MLA decode op as the layer builder emits it (workloads/transformer.py
    latent_attention): each head's query in the latent space over `tokens` cached latents
    of RANK + ROPE per sequence, one KV head, values the latent's first RANK."""
    latent = RANK + ROPE
    ins = (Tensor("q_latent_rope", (seqs, 1, heads, latent), compute),
           Tensor("latent_cache", (seqs, tokens, 1, latent), cache, Role.KV_CACHE),
           Tensor("kv", (seqs, 1, latent), compute))  # fmt: skip
    outs = (Tensor("attn.latent", (seqs, 1, heads * RANK), compute),
            Tensor("latent_new", (seqs, 1, 1, latent), cache, Role.KV_CACHE))  # fmt: skip
    op = Op(OpKind.ATTENTION, "attention", ins, outs,
            (("causal", True), ("compute", compute.value), ("heads", heads),
             ("head_dim", latent), ("kv_heads", 1), ("v_dim", RANK), *attrs.items()))  # fmt: skip
    return op_table(Graph("mla", [op]))


def _time_and_roof(chip_id: str, ops, compute: DType = DType.BF16) -> tuple[float, float]:
    chip = load_chip(chip_id)
    costs = evaluate(ops, HardwareArrays.build(chip, ops), place(chip, Footprint(0.0, 0.0, 1e6)))
    hbm = max(m.bandwidth_bytes_per_s.value for m in chip.memory if m.kind.holds_tensors)
    roof = max(float(ops.matrix_flops.sum()) / chip.peak(compute),
               float(ops.role_bytes.sum()) / hbm)  # fmt: skip
    return float(costs.time_s.sum()), roof


def _measured_s(name: str, row: list[int]) -> float:
    path = kernel_tables.TABLES_DIR / "mla_decode/nvidia-trtllm.toml"
    with path.open("rb") as f:
        (entry,) = [t for t in tomllib.load(f)["table"] if t["name"] == name]
    (micros,) = [r[-1] for r in entry["rows"] if r[:-1] == row]
    return micros * 1e-6


def test_the_tables_load_with_their_source_engine_and_commit():
    names = {t.name for t in TABLES}
    for chip_id in ("h200-sxm", "b200"):
        for kv in ("bfloat16", "fp8"):
            assert f"aiconfigurator-trtllm-mla-decode-{kv}-{chip_id}" in names
    for t in (t for t in TABLES if t.engine != "aiter"):  # AMD's: test_amd_kernel_tables.py
        assert t.engine == "trtllm TensorRT-LLM 1.3.0rc20"
        assert "095f58a51c4ca8e61b66ec108d86f223f8d559ce" in t.url
        assert "generation_mla_perf" in t.url
        assert t.chips == (t.measured_on,)
        assert len(t.rows_m) >= 80 and np.all(t.fractions <= 1)


def test_a_row_converts_to_its_latent_stream_and_flops():
    """128 heads (DeepSeek under attention DP) at 128 sequences of 2,047 cached FP8 latents
    on a B200: 128 x 2047 x 576 bytes of cache and 128 x 128 x 1088 x 2 of BF16 Q and
    output (187 MB, 23 us at the HBM's 8 TB/s) against 2 x 128 x 128 x (2 x 512 + 64) x
    2047 FLOPs (73 GFLOP, 16.2 us at 4.5 PFLOPS FP8): the stream decides."""
    from xpusim.cost.calibration import dram_bytes_per_s

    chip = load_chip("b200")
    rows = np.array([[128, 2047, 128, RANK, ROPE, 55.8]])
    m, roof_s, _ = kernel_tables.roofline_seconds(rows, DType.FP8, chip, "t", "mla_decode",
                                                  "fp8")  # fmt: skip
    moved = 128 * (128 * (2 * RANK + ROPE) * 2 + 2047 * (RANK + ROPE))
    flops = 2 * 128 * 128 * (2 * RANK + ROPE) * 2047
    assert flops / chip.peak(DType.FP8) < moved / dram_bytes_per_s(chip)
    assert roof_s[0] == pytest.approx(moved / dram_bytes_per_s(chip), rel=1e-9)
    assert m[0] == 2.0 ** np.round(np.log2(moved))


@pytest.mark.parametrize(("chip_id", "kv", "heads", "seqs", "tokens"), [
    ("b200", DType.FP8, 128, 256, 4095),  # attention DP, an MLPerf-scale rank
    ("b200", DType.BF16, 16, 64, 1023),  # TP8
    ("h200-sxm", DType.BF16, 128, 64, 4095),
    ("h200-sxm", DType.FP8, 128, 1024, 1023),
])  # fmt: skip
def test_an_mla_decode_op_costs_its_measured_time_at_a_tabulated_shape(chip_id, kv, heads,
                                                                       seqs, tokens):  # fmt: skip
    """A measured shape costs the table's model of it (fixed time + roofline / f(bytes),
    the curve of its own heads per GPU), near the measured time, and at or above the op's
    roofline."""
    ops = _mla(seqs, tokens, heads, kv, kv)
    assert is_mla_decode(ops.ops[0]) and not is_decode_attention(ops.ops[0])
    assert kernel_keys(ops.ops[0]) == (("mla_decode", kv.value),)
    kv_name = "bfloat16" if kv == DType.BF16 else "fp8"
    name = f"aiconfigurator-trtllm-mla-decode-{kv_name}-{chip_id}"
    assert kernel_table(chip_id, kv, kv.value, kind="mla_decode").name == name
    floor_s = float(kernel_floor_s(ops, HardwareArrays.build(load_chip(chip_id), ops)).sum())
    time_s, roof_s = _time_and_roof(chip_id, ops, kv)
    assert time_s >= roof_s and time_s >= floor_s
    measured = _measured_s(name, [seqs, tokens, heads, RANK, ROPE])
    assert 0.6 < floor_s / measured < 1.5


@pytest.mark.parametrize("kv", [DType.BF16, DType.FP8])
def test_sixteen_heads_take_their_own_rows_not_the_128_head_pool(kv):
    """DeepSeek at TP8 runs 16 heads a GPU; the tables time 16, 32, 64 and 128, and the
    128-head kernel is slower at the same bytes. Fitted over every head count, the 16-head
    op at 64 sequences of 4,095 latents on an H200 cost 1.28x (BF16) and 1.24x (FP8) its
    measured row, outside the bound below; its own rows price it at 0.99x and 1.06x. An AMD
    table of 128 heads alone keeps its one curve."""
    ops = _mla(64, 4095, 16, kv, kv)
    op = ops.ops[0]
    assert kernel_shapes(op) == (("mla_decode", (16.0, float(RANK), float(ROPE))),)
    table = kernel_table("h200-sxm", kv, kv.value, kind="mla_decode")
    own = table.of_shape((16.0, float(RANK), float(ROPE)))
    assert 0 < len(own.rows_m) < len(table.rows_m)
    floor_s = float(kernel_floor_s(ops, HardwareArrays.build(load_chip("h200-sxm"), ops)).sum())
    kv_name = "bfloat16" if kv == DType.BF16 else "fp8"
    measured = _measured_s(f"aiconfigurator-trtllm-mla-decode-{kv_name}-h200-sxm",
                           [64, 4095, 16, RANK, ROPE])  # fmt: skip
    assert 0.85 < floor_s / measured < 1.15
    amd = kernel_table("mi300x", DType.FP8, "fp8", kind="mla_decode")
    assert amd.of_shape((16.0, float(RANK), float(ROPE))) is amd


def _without_mla_tables(monkeypatch) -> None:
    others = {k: kernel_tables.tables_of_kind(k) for k in ("gemm", "moe", "decode_attention")}
    monkeypatch.setattr(kernel_tables, "tables_of_kind", lambda kind: others.get(kind, ()))


def test_the_table_raises_deepseeks_mlperf_scale_decode_on_a_b200(monkeypatch):
    """128 heads over 128 sequences of 2,047 FP8 latents on a B200 measured 55.8 us; the
    chip's own model (its memory efficiency and power limit) costs it 45 us, the table's
    model near the measurement."""
    ops = _mla(128, 2047, 128, DType.FP8, DType.FP8)
    with_table, roof = _time_and_roof("b200", ops, DType.FP8)
    _without_mla_tables(monkeypatch)
    without, _ = _time_and_roof("b200", ops, DType.FP8)
    assert roof < without < with_table
    assert 0.85 < with_table / 55.8e-6 < 1.3


def test_sparse_mla_is_not_priced_by_an_mla_table():
    ops = _mla(64, 1024, 128, DType.FP8, DType.FP8, top_k=2048)  # DeepSeek-V3.2's DSA
    assert not is_mla_decode(ops.ops[0])
    assert not np.isfinite(HardwareArrays.build(load_chip("b200"), ops).kernel_peak).any()


def test_the_cache_chooses_the_table_and_its_format_judges_the_floor():
    """SGLang's DeepSeek-R1 on 8 H200 at --precision fp8 with its default BF16 cache runs
    a BF16 MLA kernel: the op (compute FP8 by --precision) takes the bf16 table, and its
    floor's compute roof is at the BF16 peak the table's kernels ran at, not FP8's."""
    chip = load_chip("h200-sxm")
    ops = _mla(64, 4095, 128, DType.BF16, DType.FP8)
    hw = HardwareArrays.build(chip, ops)
    assert hw.kernel_peak[0] == chip.peak(DType.BF16)
    same = _mla(64, 4095, 128, DType.BF16, DType.BF16)
    floor = kernel_floor_s(ops, hw)[0]
    assert floor == pytest.approx(kernel_floor_s(same, HardwareArrays.build(chip, same))[0],
                                  rel=0.02)  # the same kernel; Q's bytes differ  # fmt: skip


@pytest.mark.parametrize("chip_id", ["h100-sxm", "b300", "gaudi3"])
def test_chips_without_a_table_are_unchanged(chip_id, monkeypatch):
    ops = _mla(256, 2047, 128, DType.FP8, DType.FP8)
    with_tables, _ = _time_and_roof(chip_id, ops, DType.FP8)
    _without_mla_tables(monkeypatch)
    without, _ = _time_and_roof(chip_id, ops, DType.FP8)
    assert np.float64(with_tables).tobytes() == np.float64(without).tobytes()


def test_more_bandwidth_is_never_slower_through_an_mla_table():
    chip = load_chip("b200")
    for seqs in (1, 16, 256):
        ops = _mla(seqs, 4095, 128, DType.FP8, DType.FP8)
        assert_more_bandwidth_is_never_slower(chip, ops, place(chip, Footprint(0.0, 0.0, 1e6)))


def test_the_layer_builders_mla_decode_op_is_the_one_priced():
    """DeepSeek-R1's steps from the layer builder: a decode step's attention ops are MLA
    decode ops (absorbed, over the FP8 latent cache), a prefill's (decompressed keys and
    values, multi-head) are not; GQA decode is not one either."""
    from xpusim.workloads.transformer import StepShape, build_step
    from xpusim.workloads.zoo import zoo_entry

    cfg = zoo_entry("deepseek-r1").config
    for step, expected in ((StepShape(8, 1, 2048, decode=True), True),
                           (StepShape(1, 512, 512), False)):
        graph = build_step(cfg, step, DType.FP8, attention=DType.FP8, kv=DType.FP8)
        attention = [op for op in graph if op.kind is OpKind.ATTENTION]
        assert attention and all(is_mla_decode(op) is expected for op in attention)
    gqa = build_step(zoo_entry("llama-3.1-8b").config, StepShape(8, 1, 2048, decode=True),
                     DType.BF16)
    assert not any(is_mla_decode(op) for op in gqa if op.kind is OpKind.ATTENTION)


AMD_TABLES = {t.measured_on: t for t in TABLES if t.engine == "aiter"}


def test_the_amd_tables_are_aiters_own():
    """AMD's chips have MLA decode tables of AMD's kernels measured on AMD chips (AITER's
    asm MLA decode, transcribed from its pull requests), not NVIDIA's scaled: the MI300X's
    prices the MI325X too (the same gfx942 die and CU count)."""
    assert set(AMD_TABLES) == {"mi300x", "mi355x"}
    assert AMD_TABLES["mi300x"].chips == ("mi300x", "mi325x")
    assert AMD_TABLES["mi355x"].chips == ("mi355x",)
    for chip_id in ("mi300x", "mi325x", "mi355x"):
        table = kernel_table(chip_id, DType.FP8, "fp8", kind="mla_decode")
        assert table.engine == "aiter" and table.url.startswith("https://github.com/ROCm/aiter/pull/")
        assert np.all(table.fractions <= 1)
    assert kernel_table("mi355x", DType.BF16, "bf16", kind="mla_decode") is None  # FP8 only


def _amd_measured_s(name: str, row: list[int]) -> float:
    with (kernel_tables.TABLES_DIR / "mla_decode/amd-aiter.toml").open("rb") as f:
        (entry,) = [t for t in tomllib.load(f)["table"] if t["name"] == name]
    (micros,) = [r[-1] for r in entry["rows"] if r[:-1] == row]
    return micros * 1e-6


@pytest.mark.parametrize(("chip_id", "seqs", "tokens", "heads"), [
    ("mi355x", 1, 5200, 128),  # PR #3003: 32 heads x 4 query tokens
    ("mi355x", 16, 23333, 128),  # PR #3072
    ("mi355x", 1, 70000, 128),  # PR #3003's longest: one sequence's stream
    ("mi300x", 64, 21, 128),  # PR #2039
    ("mi300x", 1, 21, 128),
])  # fmt: skip
def test_an_amd_mla_decode_op_costs_its_measured_time(chip_id, seqs, tokens, heads):
    """A shape AITER measured costs the table's model of it, near the measured time (one
    curve over head counts and sequences, keyed by bytes), at or above its roofline."""
    ops = _mla(seqs, tokens, heads, DType.FP8, DType.FP8)
    floor_s = float(kernel_floor_s(ops, HardwareArrays.build(load_chip(chip_id), ops)).sum())
    time_s, roof_s = _time_and_roof(chip_id, ops, DType.FP8)
    assert time_s >= roof_s and time_s >= floor_s
    measured = _amd_measured_s(AMD_TABLES[chip_id].name, [seqs, tokens, heads, RANK, ROPE])
    assert 0.6 < floor_s / measured < 1.5


@pytest.mark.parametrize("chip_id", ["mi300x", "mi325x", "mi355x"])
def test_amd_long_context_decode_grows_with_the_context(chip_id, monkeypatch):
    """DeepSeek-R1 at TP 8 (16 heads a GPU) decoding 4 sequences over an FP8 latent cache:
    AITER's kernel takes at least its fixed time (the tables' fitted 13.6 and 17.5 us) and
    more as the context grows, never less; the chip's roofline model alone priced the
    layer's attention at 2.3-2.6 us at 1k tokens (issue #48: TPOT flat from 1k to 8k of
    context on these chips)."""
    times = [_time_and_roof(chip_id, _mla(4, tokens, 16, DType.FP8, DType.FP8), DType.FP8)[0]
             for tokens in (1024, 2048, 4096, 8192, 16384, 32768, 70000)]  # fmt: skip
    assert times[0] > 10e-6 and np.all(np.diff(times) > 0)
    assert times[-1] > 2 * times[0]
    _without_mla_tables(monkeypatch)
    assert _time_and_roof(chip_id, _mla(4, 1024, 16, DType.FP8, DType.FP8), DType.FP8)[0] < 4e-6


def test_more_bandwidth_is_never_slower_through_an_amd_mla_table():
    chip = load_chip("mi355x")
    for seqs in (1, 16, 128):
        ops = _mla(seqs, 8191, 16, DType.FP8, DType.FP8)
        assert_more_bandwidth_is_never_slower(chip, ops, place(chip, Footprint(0.0, 0.0, 1e6)))



def test_one_long_sequence_costs_its_measured_stream_on_an_mi355x(monkeypatch):
    """PR #3003's one sequence of 70,000 tokens takes 95.4 us on an MI355X, where 5
    sequences of 23,333 (more bytes) take 57.6: keyed by bytes alone the table priced the
    one sequence at 47 us. Keyed by sequences and tokens (`sequence_stream`), its floor per
    cached byte of one sequence prices it near its measured time, every sequence count
    costs more with more context, and without that floor it falls back under 60 us."""
    table = AMD_TABLES["mi355x"]
    one = _mla(1, 70000, 128, DType.FP8, DType.FP8)
    assert 0.9 < _time_and_roof("mi355x", one, DType.FP8)[0] / 95.418e-6 < 1.1
    for seqs in (1, 3, 16, 64):
        times = [_time_and_roof("mi355x", _mla(seqs, tokens, 128, DType.FP8, DType.FP8),
                                DType.FP8)[0]
                 for tokens in (1024, 4096, 8192, 23333, 32768, 49152, 70000)]  # fmt: skip
        assert np.all(np.diff(times) > 0)
    unfloored = replace(table, stream_s_per_byte=0.0)
    monkeypatch.setattr(kernel_tables, "tables_of_kind", lambda kind: tuple(
        unfloored if t is table else t for t in TABLES) if kind == "mla_decode" else ())
    assert _time_and_roof("mi355x", one, DType.FP8)[0] < 60e-6


def test_the_stream_floor_prices_no_row_above_its_measured_time():
    """Every row of the MI355X table, the one-sequence rows its curve leaves out with them,
    is at or above the fixed time plus its one sequence's latents at the table's least
    time per cached byte of one sequence, and its longest row sets that rate."""
    with (kernel_tables.TABLES_DIR / "mla_decode/amd-aiter.toml").open("rb") as f:
        (entry,) = [t for t in tomllib.load(f)["table"] if t["measured_on"] == "mi355x"]
    rows = np.array(entry["rows"], dtype=float)
    table = AMD_TABLES["mi355x"]
    floor_s = table.fixed_s + table.stream_s_per_byte * \
        kernel_tables._latent_bytes_per_sequence(rows, "fp8", "test")  # fmt: skip
    assert np.all(floor_s <= rows[:, 5] * 1e-6 * (1 + 1e-12))
    assert np.argmax(floor_s / rows[:, 5]) == np.argmax(rows[:, 1])
    assert len(table.rows_m) < len(rows)  # one-sequence rows beside several sequences' left out


def test_sequence_stream_is_an_mla_decode_tables_alone():
    entry = {"name": "x", "kind": "gemm", "dtype": "fp8", "scope": "fp8", "measured_on": "mi300x",
             "chips": ["mi300x"], "source": "s", "url": "u", "date": "d", "conditions": "c",
             "rows": [[64, 4096, 4096, 100.0]], "sequence_stream": True}  # fmt: skip
    with pytest.raises(UserError, match="sequence_stream"):
        kernel_tables._table(entry, kernel_tables.TABLES_DIR / "x.toml")


@settings(max_examples=40, deadline=None)
@given(seqs=st.integers(1, 256), heads=st.sampled_from([16, 32, 128]),
       tokens=st.lists(st.integers(16, 131072), min_size=2, max_size=2, unique=True))
def test_more_context_never_costs_less_on_an_mi355x(seqs, heads, tokens):
    """Through the MI355X's sequence_stream table (its curve isotonic in time, its floor
    per cached byte of one sequence), an MLA decode op of more tokens a sequence never costs
    less (but for the last bit, where the time holds a node's through an interval)."""
    fewer, more = (_time_and_roof("mi355x", _mla(seqs, t, heads, DType.FP8, DType.FP8),
                                  DType.FP8)[0] for t in sorted(tokens))  # fmt: skip
    assert more >= fewer * (1 - 1e-12)


def _split_row(chip_id: str, ops) -> np.ndarray:
    return HardwareArrays.build(load_chip(chip_id), ops).kernel_split[0]


def test_the_split_floor_is_gfx942_aiters_at_sixteen_heads_alone():
    """AITER's gfx942 split layout (amd-aiter.toml `split`) lays out the 16-head op of
    DeepSeek at TP 8 on an MI300X and an MI325X; a 128-head op there (SGLang's fast mode, not
    this layout), the MI355X's (gfx950: its own split rule) and an H200's are not laid out."""
    sixteen, all_heads = (_mla(4, 8192, h, DType.FP8, DType.FP8) for h in (16, 128))
    layout = AMD_TABLES["mi300x"].split
    for chip_id in ("mi300x", "mi325x"):
        assert _split_row(chip_id, sixteen).tolist() == layout.figures(RANK + ROPE).tolist()
        assert not _split_row(chip_id, all_heads).any()
    for chip_id in ("mi355x", "h200-sxm"):
        assert not _split_row(chip_id, sixteen).any()
    assert layout.figures(RANK + ROPE)[-1] == 1 / 51e9  # TransferBench's one-CU read


def test_one_long_sequence_streams_from_sixteen_cus_on_an_mi300x(monkeypatch):
    """One sequence of 32,768 tokens runs on 16 CUs (2,048 tokens, 1.18 MB each): at least
    the table's fixed time plus 23 us at 51 GB/s a CU, where the bytes-keyed curve alone
    priced its 18.9 MB at 3.7 TB/s, 230 GB/s for each CU that holds it."""
    table = AMD_TABLES["mi300x"]
    one = _mla(1, 32768, 16, DType.FP8, DType.FP8)
    least_s = table.fixed_s + 2048 * (RANK + ROPE) / 51e9
    floored = _time_and_roof("mi300x", one, DType.FP8)[0]
    assert floored >= least_s
    unsplit = replace(table, split=None)
    monkeypatch.setattr(kernel_tables, "tables_of_kind", lambda kind: tuple(
        unsplit if t is table else t for t in TABLES) if kind == "mla_decode" else ())
    assert _time_and_roof("mi300x", one, DType.FP8)[0] < least_s < floored


@settings(max_examples=60, deadline=None)
@given(seqs=st.integers(1, 64), tokens=st.integers(16, 200_000))
def test_sequences_spread_over_the_cus_before_a_cu_takes_two(seqs, tokens):
    """The busiest CU's time is one sequence's largest share for up to 304 / 16 = 19 long
    sequences, then grows in whole steps of it: ceil(16 x sequences / 304) shares."""
    row = AMD_TABLES["mi300x"].split.figures(RANK + ROPE)
    cache = tokens * (RANK + ROPE)
    one = float(busiest_cu_s(row, cache, 1.0))
    items = len(AMD_TABLES["mi300x"].split.shares(tokens))
    many = float(busiest_cu_s(row, seqs * cache, float(seqs)))
    assert many == pytest.approx(math.ceil(items * seqs / 304) * one, rel=1e-12)
    if items == 16 and seqs <= 19:
        assert many == one


@settings(max_examples=40, deadline=None)
@given(seqs=st.integers(1, 128), tokens=st.lists(st.integers(16, 131072), min_size=2,
                                                 max_size=2, unique=True))
@example(seqs=1, tokens=[3364, 3365])
@example(seqs=20, tokens=[3605, 3841])
@example(seqs=39, tokens=[3605, 3841])
def test_more_context_never_costs_less_on_an_mi300x_at_sixteen_heads(seqs, tokens):
    """Through the split floor and the bytes-keyed curve under it, an MLA decode op of more
    tokens a sequence never costs less on gfx942. The floor alone can fall: a tail of 4
    tokens folded into the last share stops folding one token later (3,364 -> 3,365 tokens:
    the busiest CU's 228 tokens -> 224), and past 19 sequences a sequence cut into fewer
    items takes fewer a CU (20 sequences of 3,605 -> 3,841: 2 items of 240 -> one of 257);
    the examples hold those steps, where the curve is above the floor."""
    row = AMD_TABLES["mi300x"].split.figures(RANK + ROPE)
    floors = [float(busiest_cu_s(row, seqs * t * (RANK + ROPE), float(seqs)))
              for t in sorted(tokens)]  # fmt: skip
    if (seqs, sorted(tokens)) in ((1, [3364, 3365]), (20, [3605, 3841])):
        assert floors[1] < floors[0]  # the floor alone falls there
    fewer, more = (_time_and_roof("mi300x", _mla(seqs, t, 16, DType.FP8, DType.FP8),
                                  DType.FP8)[0] for t in sorted(tokens))  # fmt: skip
    assert more >= fewer * (1 - 1e-12)


@pytest.mark.parametrize(("split", "named"), [
    ({"splits": 16, "kv_granularity": 16, "cus": 304, "heads": 16, "source": "s"},
     "cu_bytes_per_s"),
    ({"splits": 0, "kv_granularity": 16, "cus": 304, "heads": 16, "cu_bytes_per_s": 5e10,
      "source": "s"}, "split.splits"),
    ({"splits": 16, "kv_granularity": 16, "cus": 304, "heads": 16, "cu_bytes_per_s": -1.0,
      "source": "s"}, "split.cu_bytes_per_s"),
    ({"splits": 16, "kv_granularity": 16, "cus": 304, "heads": 16, "cu_bytes_per_s": 5e10,
      "source": " "}, "split.source"),
    ("16", "split"),
])  # fmt: skip
def test_a_bad_split_layout_names_its_field(split, named):
    entry = {"name": "x", "kind": "mla_decode", "dtype": "fp8", "scope": "fp8",
             "measured_on": "mi300x", "chips": ["mi300x"], "source": "s", "url": "u",
             "date": "d", "conditions": "c", "rows": [[1, 21, 128, 512, 64, 15.5]],
             "split": split}  # fmt: skip
    with pytest.raises(UserError, match=named):
        kernel_tables._table(entry, kernel_tables.TABLES_DIR / "x.toml")
