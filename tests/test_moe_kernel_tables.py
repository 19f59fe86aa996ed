"""MoE kernel tables (cost/kernel_tables.py, kind `moe`): aiconfigurator's measured
TensorRT-LLM fused-MoE layers price the routed experts' matmuls of their chip and format,
the layer's two GEMMs add up to the measured layer, never past their roofline, and chips or
formats without a table keep the model they had."""

from __future__ import annotations

import tomllib
from functools import partial

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kernel_floor import assert_more_bandwidth_is_never_slower

import xpusim
from xpusim.compiler.memory_plan import Footprint, place
from xpusim.cost import kernel_tables
from xpusim.cost.kernel_tables import MOE_GEMMS, all_tables, kernel_table
from xpusim.cost.op_table import kernel_keys, op_table
from xpusim.cost.roofline import HardwareArrays, evaluate, kernel_floor_s
from xpusim.errors import UserError
from xpusim.hardware.catalog import load_chip
from xpusim.ir.dtypes import DType, parse_weight_format, stream_format
from xpusim.ir.graph import Graph
from xpusim.ir.op import Op, OpKind
from xpusim.ir.tensor import Role, Tensor
from xpusim.workloads.transformer_config import expected_active_experts

MOE = [t for t in all_tables() if t.kind == "moe"]


def _moe_layer(tokens: int, hidden: int, inter: int, topk: int, experts: int,
               dtype: DType = DType.BF16, weight: str | None = None, expert: bool = True,
               ep: int | None = None, backend: str | None = None,
               random: bool = False, kernels: tuple[str, ...] = (),
               load: tuple[int, int] | None = None):  # fmt: skip
    """A routed-expert layer's two matmuls as the layer builder emits them (workloads/
    transformer.py moe) at balanced routing: the tokens x topk / ep pairs, one row each,
    against the weights of the experts they touch; `random`: routed to the top k of random
    scores, as the builder and AITER's tuner route (expected_active_experts); `expert=False`
    gives the same matmuls as plain ones. With `ep`, one rank's share as partitioning leaves
    it (its experts and ep stamped, so that a moe table's rows of the layer's own shape
    price it); `backend` stamps the MoE backend a run's setting names; `kernels` the
    engine's own kernels (engines.toml), as the layer builder stamps them; `load`, the
    rank's (pairs, experts) in place of balanced routing's."""
    reached = expected_active_experts(tokens, experts, topk) if random else \
        min(experts, tokens * topk)
    touched = reached // (ep or 1)
    pairs = tokens * topk // (ep or 1)
    if load:
        pairs, touched = load
    weights = parse_weight_format(weight) if weight else dtype
    ops = []
    for name, k, n, split in (("gate_up", hidden, 2 * inter, "expert_column"),
                              ("down", inter, hidden, "expert_row")):  # fmt: skip
        ins = (Tensor(f"{name}.x", (1, pairs, k), dtype),
               Tensor(f"{name}.w", (touched, k, n), weights, Role.WEIGHT))  # fmt: skip
        attrs = (("compute", dtype.value), *((("tp", split),) if expert else ()),
                 *((("experts", experts), ("experts_per_token", topk), ("ep", ep))
                   if ep else ()),
                 *((("moe_backend", backend),) if backend else ()),
                 *((("kernels", kernels),) if kernels else ()))  # fmt: skip
        out = Tensor(f"{name}.y", (1, pairs, n), stream_format(dtype))  # as the builder
        ops.append(Op(OpKind.MATMUL, name, ins, (out,), attrs))
    return op_table(Graph("moe", ops))


def _times(chip_id: str, table) -> tuple[np.ndarray, np.ndarray]:
    """Each op's time and its roofline (the larger of its compute and memory times at the
    chip's datasheet peak and bandwidth)."""
    chip = load_chip(chip_id)
    hw = HardwareArrays.build(chip, table)
    weights = float(table.role_bytes[..., 1, :].sum())
    costs = evaluate(table, hw, place(chip, Footprint(weights, 0.0, 1e6)))
    hbm = max(m.bandwidth_bytes_per_s.value for m in chip.memory if m.kind.holds_tensors)
    roof = np.maximum(table.matrix_flops / np.array([chip.peak(d) for d in table.dtypes]),
                      table.role_bytes.sum(axis=-2) / hbm)  # fmt: skip
    return costs.time_s, roof


def test_the_moe_tables_load_with_their_source_engine_and_commit():
    names = {t.name for t in MOE}
    for chip_id in ("h100-sxm", "h200-sxm", "b200", "b300", "gb200"):
        assert f"aiconfigurator-trtllm-moe-fp8-{chip_id}" in names
        assert f"aiconfigurator-trtllm-moe-bfloat16-{chip_id}" in names
    assert "aiconfigurator-trtllm-moe-w4a16-mxfp4-h100-sxm" in names
    for t in (t for t in MOE if t.engine != "aiter" and t.backend == "CUTLASS"):  # AMD's:
        # test_amd_kernel_tables.py; WIDEEP's (power-law routing): test_moe_backend.py
        assert t.engine.startswith("trtllm TensorRT-LLM 1.") or (
            t.engine.startswith(("vllm vLLM 0.14.", "vllm vLLM 0.19."))
            and t.kernel.endswith("-fused-moe")) or (
            t.engine == "vllm vLLM 0.24.0"
            and t.kernel in ("vllm-triton-mxfp4-moe", "flashinfer-mxfp4-bf16-moe")) or (
            t.engine == "sglang SGLang 0.5.14" and t.kernel == "sglang-marlin-moe")
        assert "095f58a51c4ca8e61b66ec108d86f223f8d559ce" in t.url
        assert t.source.startswith("ai-dynamo/aiconfigurator") and "balanced" in t.source
        assert t.chips == (t.measured_on,)  # measured on each chip, none borrowed
        assert len(t.rows_m) >= 20 and np.all(t.fractions <= 1)
        assert t.prices_all_of_dtype is False  # only expert matmuls over its weights' format


def test_a_layer_row_converts_to_pairs_and_two_gemm_rooflines():
    """gpt-oss-20b's layer (2880 x 2880, 32 experts, top-4) at 2,048 tokens on one H100:
    8,192 token-expert pairs, 1.143 ms measured (357 TFLOPS over the layer's 3 x 2 x pairs x
    2880 x 2880 FLOPs); its roofline is the BF16 compute of both GEMMs."""
    table = kernel_table("h100-sxm", DType.BF16, "mxfp4", kind="moe")
    assert table.name == "aiconfigurator-trtllm-moe-w4a16-mxfp4-h100-sxm"
    at = int(np.flatnonzero(table.rows_m == 8192)[0])
    assert table.measured_s[at] == pytest.approx(1.143e-3, rel=2e-3)
    flops = 2 * 8192 * 3 * 2880 * 2880
    assert flops / table.measured_s[at] == pytest.approx(357e12, rel=5e-3)
    bf16 = load_chip("h100-sxm").peak(DType.BF16)
    assert table.roofline_s[at] == pytest.approx(flops / bf16, rel=1e-9)


def _measured_s(table_name: str, row: list[int]) -> float:
    """The measured time of a tabulated layer (its row in the committed TOML)."""
    with kernel_tables.TABLES_DIR.joinpath("moe/nvidia-trtllm.toml").open("rb") as f:
        (entry,) = [t for t in tomllib.load(f)["table"] if t["name"] == table_name]
    (micros,) = [r[-1] for r in entry["rows"] if r[:-1] == row]
    return micros * 1e-6


@pytest.mark.parametrize(("chip_id", "weight", "dtype", "shape", "tokens"), [
    ("h100-sxm", "mxfp4", DType.BF16, (2880, 2880, 4, 32), 2048),  # gpt-oss-20b, w4a16
    ("h100-sxm", "bf16", DType.BF16, (2048, 768, 8, 128), 16384),  # Qwen3-30B-A3B
    ("h200-sxm", "fp8", DType.FP8, (4096, 1536, 8, 128), 4096),  # Qwen3-235B-A22B
    ("b200", "fp8", DType.FP8, (7168, 2048, 8, 256), 16384),  # DeepSeek-V3
    ("b200", "nvfp4", DType.NVFP4, (7168, 2048, 8, 256), 1024),  # DeepSeek-R1 NVFP4
    ("gb200", "nvfp4", DType.NVFP4, (4096, 1536, 8, 128), 64),  # Qwen3-235B-A22B NVFP4
])  # fmt: skip
def test_a_moe_layer_follows_its_table_at_a_tabulated_shape(chip_id, weight, dtype, shape,
                                                            tokens):  # fmt: skip
    """The two expert GEMMs of a measured layer (tp 1, ep 1) take the table's model of the
    row, fixed time + roofline / f(M), and so are as far from the measurement as the
    table's fit is at that row (one curve over the shapes and splits of the zoo's models:
    rms 0.15-0.30, docs/cost.md); each stays at or above its roofline."""
    hidden, inter, topk, experts = shape
    table = kernel_table(chip_id, dtype, weight, kind="moe")
    rows = np.array([[tokens, hidden, inter, topk, experts, 1, 1, 1e9]])  # any slow time
    m, layer_roof_s, _ = kernel_tables.roofline_seconds(rows, dtype, load_chip(chip_id), "t",
                                                        "moe", weight)  # fmt: skip
    measured_s = _measured_s(table.name, [tokens, hidden, inter, topk, experts, 1, 1])
    ops = _moe_layer(tokens, hidden, inter, topk, experts, dtype, weight)
    time_s, roof_s = _times(chip_id, ops)
    assert np.all(time_s >= roof_s * (1 - 1e-9))
    floor_s = kernel_floor_s(ops, HardwareArrays.build(load_chip(chip_id), ops))
    assert np.all(time_s >= floor_s)  # a floor: where the chip's own figures are slower
    model_s = float(table.predict_s(m, layer_roof_s)[0])  # they stand (fp8 on the H200)
    assert floor_s.sum() == pytest.approx(model_s, rel=0.02)  # the ops add up to the table's
    fit_errors = table.predict_s(table.rows_m, table.roofline_s) / table.measured_s
    assert fit_errors.min() * 0.98 <= floor_s.sum() / measured_s <= fit_errors.max() * 1.02
    assert 0.5 < floor_s.sum() / measured_s < 1.6


def test_nvfp4_tables_exist_and_the_min_latency_rows_are_refused():
    """NVFP4 experts have tables on the Blackwell chips, from the CUTLASS (throughput) rows.
    aiconfigurator's min-latency NVFP4 rows route through DeepSeek-V3's group-limited gate
    (4 of 8 groups) whatever the model, so they touch at most half the experts the table's
    balanced routing counts: DeepSeek's layer at 64 tokens on one B200 (all 256 experts,
    6.3 GB of NVFP4 weights, 0.79 ms at 8 TB/s) measured 0.491 ms there, and the roofline
    check refuses it; the CUTLASS row of the same shape is 1.734 ms."""
    names = {t.name for t in MOE}
    for chip_id in ("b200", "b300", "gb200"):
        assert f"aiconfigurator-trtllm-moe-nvfp4-{chip_id}" in names
    b200 = load_chip("b200")
    min_latency = np.array([[64, 7168, 2048, 8, 256, 1, 1, 490.6]])
    with pytest.raises(UserError, match="roofline"):
        kernel_tables.roofline_seconds(min_latency, DType.NVFP4, b200, "t", "moe", "nvfp4")
    cutlass_s = _measured_s("aiconfigurator-trtllm-moe-nvfp4-b200",
                            [64, 7168, 2048, 8, 256, 1, 1])  # fmt: skip
    weights_s = 256 * 3 * 7168 * 2048 * 0.5625 / 8e12
    assert weights_s < cutlass_s and cutlass_s == pytest.approx(1.734e-3, rel=1e-3)


def test_the_layer_fixed_time_is_split_over_its_two_gemms():
    chip = load_chip("h100-sxm")
    ops = _moe_layer(64, 2048, 768, 8, 128)
    hw = HardwareArrays.build(chip, ops)
    table = kernel_table("h100-sxm", DType.BF16, "bf16", kind="moe")
    assert MOE_GEMMS == 2
    assert hw.kernel_fixed_s.sum() == pytest.approx(table.fixed_s, rel=1e-12)


def test_the_moe_table_raises_the_w4a16_gpt_oss_layer_on_an_h100():
    """The case that motivated the tables: gpt-oss-20b's 2,048-token layer, MXFP4 weights
    and BF16 activations (TensorRT-LLM's Hopper path): without the table the chip's model
    costs it near the BF16 dense-GEMM efficiency (0.62 ms); with it, at the table's model
    (1.59 ms: the curve pools this layer with the same shape's EP and TP splits, which run
    less efficiently at the same token-expert pairs) against 1.143 ms measured."""
    ops = _moe_layer(2048, 2880, 2880, 4, 32, DType.BF16, "mxfp4")
    plain = _moe_layer(2048, 2880, 2880, 4, 32, DType.BF16, "mxfp4", expert=False)
    with_table, _ = _times("h100-sxm", ops)
    without, _ = _times("h100-sxm", plain)
    assert without.sum() < 0.7e-3 < 1.0e-3 < with_table.sum() < 1.7e-3


@pytest.mark.parametrize("chip_id", ["tpu-v5e", "a100-sxm-80gb", "l40s"])
def test_chips_without_a_moe_table_are_unchanged(chip_id, monkeypatch):
    """No moe table prices these chips' BF16 experts: an expert layer costs what it cost
    before the moe tables existed (the tables taken away), bit for bit."""
    ops = _moe_layer(1024, 4096, 1536, 8, 128, DType.BF16)
    chip = load_chip(chip_id)
    placement = place(chip, Footprint(float(ops.role_bytes[..., 1, :].sum()), 0.0, 1e6))
    with_tables = evaluate(ops, HardwareArrays.build(chip, ops), placement).time_s
    gemm_only = kernel_tables.tables_of_kind("gemm")
    monkeypatch.setattr(kernel_tables, "tables_of_kind", lambda kind: gemm_only * (kind == "gemm"))
    before = evaluate(ops, HardwareArrays.build(chip, ops), placement).time_s
    assert with_tables.tobytes() == before.tobytes()


def test_formats_without_a_table_and_dense_matmuls_are_unchanged():
    """An expert layer of a format no moe table measured (MXFP4 compute on a B200: the
    table there is MXFP4 weights under FP8 or BF16 activations) and a dense matmul on a
    chip with moe tables keep the floor they had: none, or the gemm table's."""
    b200 = load_chip("b200")
    fp4 = _moe_layer(1024, 2880, 2880, 4, 128, DType.MXFP4, "mxfp4")
    assert not np.isfinite(HardwareArrays.build(b200, fp4).kernel_peak).any()
    dense = _moe_layer(1024, 7168, 2048, 8, 256, DType.FP8, expert=False)
    h100 = load_chip("h100-sxm")
    hw = HardwareArrays.build(h100, dense)
    gemm = kernel_table("h100-sxm", DType.FP8)
    assert gemm.name == "deepgemm-fp8-gemm-h800"
    assert np.all(hw.kernel_fixed_s == gemm.fixed_s)  # the dense GEMM table, not the moe one


def test_more_bandwidth_is_never_slower_through_a_moe_table():
    chip = load_chip("h200-sxm")
    ops = _moe_layer(64, 4096, 1536, 8, 128, DType.FP8, "fp8")
    placement = place(chip, Footprint(float(ops.role_bytes[..., 1, :].sum()), 0.0, 1e6))
    assert_more_bandwidth_is_never_slower(chip, ops, placement)


def test_deepseek_on_ep8_is_priced_by_its_own_rows():
    """DeepSeek-R1's NVFP4 experts on one of 8 EP ranks of B200s: TensorRT-LLM measured
    327.6 / 384.5 us at 2k / 4k tokens (moe/nvidia-trtllm.toml); the pooled curve of every
    model's rows gave 275 / 372 / 358 us at 2k / 4k / 8k, falling with more work. Priced by
    the rows of its own shape (ep 8) the layer is within 5% of those rows and grows with
    the tokens."""
    layer = []
    for tokens in (2048, 4096, 8192):
        ops = _moe_layer(tokens, 7168, 2048, 8, 256, DType.NVFP4, "nvfp4", ep=8)
        layer.append(kernel_floor_s(ops, HardwareArrays.build(load_chip("b200"), ops)).sum())
    assert layer[0] == pytest.approx(327.6e-6, rel=0.05)
    assert layer[1] == pytest.approx(384.5e-6, rel=0.05)
    assert layer[0] < layer[1] < layer[2]


def _layer_s(tokens: int, ep: int, precision: DType, backend: str | None = None,
             floor: bool = False, load: tuple[int, int] | None = None) -> float:  # fmt: skip
    """DeepSeek-R1's routed-expert layer on one of `ep` B200 ranks (balanced routing, or the
    rank's (pairs, experts) `load`), its two GEMMs' time in `precision` (weights and
    activations), or their kernel-table floor alone (no dispatch time)."""
    ops = _moe_layer(tokens, 7168, 2048, 8, 256, precision, precision.value, ep=ep,
                     backend=backend, load=load)  # fmt: skip
    if floor:
        return float(kernel_floor_s(ops, HardwareArrays.build(load_chip("b200"), ops)).sum())
    return float(_times("b200", ops)[0].sum())


def _rows(table, ep: int) -> dict[int, float]:
    """A DeepSeek-R1 moe table's measured layer times at EP `ep`, by tokens: a row's M is
    its rank's pairs, balanced routing's 8 / ep a token, or, through the TRTLLM rows'
    group-limited gate, what its rank ran (gate_load: 5 a token at EP 8, 6 at EP 4)."""
    shape = table.of_shape((7168.0, 2048.0, 8.0, 256.0, float(ep)))
    per_token = kernel_tables.gate_load(1, 256, 8, ep)[0] if table.backend == "TRTLLM" \
        else 8 / ep
    return {round(m / per_token): s for m, s in zip(shape.rows_m, shape.measured_s,
                                                    strict=True)}  # fmt: skip


def test_the_trtllm_rows_count_what_the_gate_gave_their_rank():
    """TensorRT-LLM's TRTLLM-backend (trtllm-gen) NVFP4 rows, and SGLang's of the same
    kernels on B300, were routed by DeepSeek-V3's group-limited gate: each row is counted at
    the pairs and experts its rank ran (gate_load: 5 pairs a token at EP 8, 6 at EP 4, 8 on
    a TP-split rank), at 1-256 tokens, and prices only the M its rows span (window). On one
    GPU holding all 256 experts the gate reaches half of what balanced routing does, and
    the roofline check refuses such a row read as balanced (16 tokens: 248.5 us measured,
    412 us to stream the 128 experts balanced routing touches). SGLang's own rows of
    TP-split ranks price SGLang's runs alone
    (test_sglang_runs_its_tp_split_experts_at_its_flashinfer_trtllm_rows)."""
    trtllm = [t for t in MOE if t.backend == "TRTLLM" and not t.kernel]
    assert {t.measured_on for t in trtllm} == {"b200", "gb200", "b300"}
    for t in trtllm:
        assert t.window and t.key_scope == "nvfp4@TRTLLM" and np.all(t.fractions <= 1)
        kernel = "sglang_flashinfer_trtllm_moe" if t.measured_on == "b300" \
            else "moe_torch_flow_min_latency"  # B300: SGLang's rows of the same kernels
        assert kernel in t.source and "a window" in t.describe()[1]
        # EP 4 and 8; TensorRT-LLM's own rows TP 4 (EP 1) too, SGLang's (B300) not
        tp_split = t.measured_on != "b300"
        assert {s[-1] for s in t.row_shapes} == {4.0, 8.0} | ({1.0} if tp_split else set())
        assert ("TP 4 (EP 1) too" in t.conditions) == tp_split and "gate_load" in t.conditions
        for ep in {int(s[-1]) for s in t.row_shapes}:
            per_token = {1: 8, 4: 6, 8: 5}[ep]  # the rank's pairs a token
            shape = t.of_shape((7168.0, 2048.0 / (4 if ep == 1 else 1), 8.0, 256.0, float(ep)))
            assert set((shape.rows_m / per_token).tolist()) == {1, 2, 4, 8, 16, 32, 64, 128,
                                                                 256}  # fmt: skip
    one_gpu = np.array([[16, 7168, 2048, 8, 256, 1, 1, 248.5]])
    with pytest.raises(UserError, match="roofline"):
        kernel_tables.roofline_seconds(one_gpu, DType.NVFP4, load_chip("b200"), "t", "moe",
                                       "nvfp4")  # fmt: skip
    with pytest.raises(UserError, match="window"):
        kernel_tables._table({"name": "x", "kind": "moe", "window": "yes", "dtype": "nvfp4",
                              "scope": "nvfp4", "measured_on": "b200", "chips": ["b200"],
                              "source": "s", "url": "u", "date": "d", "conditions": "c",
                              "rows": [[1, 7168, 2048, 8, 256, 1, 8, 40]]},
                             kernel_tables.TABLES_DIR / "t.toml")  # fmt: skip
    with pytest.raises(UserError, match="window: a prefill_attention table's rows name no"):
        kernel_tables._table({"name": "x", "kind": "prefill_attention", "window": True,
                              "dtype": "bf16", "scope": "bf16", "measured_on": "h100-sxm",
                              "chips": ["h100-sxm"], "source": "s", "url": "u", "date": "d",
                              "conditions": "c", "rows": [[1, 1024, 32, 128, 128, 40]]},
                             kernel_tables.TABLES_DIR / "t.toml")  # fmt: skip


def _tp4_layer_s(tokens: int, backend: str | None) -> float:
    """DeepSeek-R1's routed-expert layer on one of 4 B200 ranks with the experts TP-split
    (EP 1: every expert's 2048 / 4 slice), balanced routing, its kernel-table floor."""
    ops = _moe_layer(tokens, 7168, 2048 // 4, 8, 256, DType.NVFP4, "nvfp4", ep=1,
                     backend=backend)  # fmt: skip
    return float(kernel_floor_s(ops, HardwareArrays.build(load_chip("b200"), ops)).sum())


def test_tp_split_experts_take_the_trtllm_rows_at_the_experts_the_gate_reached():
    """TensorRT-LLM's TP 4 NVFP4 DeepSeek runs (moe_backend TRTLLM, EP 1) launch the
    trtllm-gen kernels: aiconfigurator timed them at 22.8 and 78.7 us at 1 and 16 tokens
    (CUTLASS's rows of the same split: 93.0 and 250.4). Through the group-limited gate a
    rank holding a slice of every group runs all 8 picks of one token (4 hot experts and 4
    tied ones), as balanced routing would, but 66 experts of 16 tokens where balanced
    routing reaches 128: the 16-token row read as balanced is faster than its roofline
    (refused), and read through the gate streams 66 experts' slices. The layer of balanced
    routing's experts costs what the row does at one token, more than the row at 16, less
    than the CUTLASS rows."""
    assert kernel_tables.gate_load(1, 256, 8, 1) == (8, 8)
    assert kernel_tables.gate_load(16, 256, 8, 1) == (128, 66)
    chip = load_chip("b200")
    row = np.array([[16, 7168, 2048, 8, 256, 4, 1, 78.71]])
    with pytest.raises(UserError, match="roofline"):
        kernel_tables.roofline_seconds(row, DType.NVFP4, chip, "t", "moe", "nvfp4")
    gated = partial(kernel_tables.roofline_seconds, dtype=DType.NVFP4, chip=chip, where="t",
                    kind="moe", scope="nvfp4", routing="group-limited")
    _, gate_s, _ = gated(row)
    _, whole_s, _ = kernel_tables.roofline_seconds(row * [1, 1, 1, 1, 1, 1, 1, 10], DType.NVFP4,
                                                   chip, "t", "moe", "nvfp4")  # fmt: skip
    assert gate_s[0] == pytest.approx(whole_s[0] * 66 / 128, rel=0.01)  # the weights' stream
    one = np.array([[1, 7168, 2048, 8, 256, 4, 1, 22.84]])
    assert np.array_equal(gated(one)[1], kernel_tables.roofline_seconds(
        one, DType.NVFP4, chip, "t", "moe", "nvfp4")[1])  # fmt: skip
    # one token: balanced routing's load is the row's (8 pairs over 8 experts)
    assert _tp4_layer_s(1, "TRTLLM") == pytest.approx(22.84e-6, rel=1e-6)
    assert 78.71e-6 < _tp4_layer_s(16, "TRTLLM") < 0.8 * _tp4_layer_s(16, None)
    assert _tp4_layer_s(4096, "TRTLLM") == pytest.approx(_tp4_layer_s(4096, None),
                                                         rel=1e-12)  # past the window


def test_trtllm_prices_its_window_and_cutlass_above_it():
    """DeepSeek-R1's NVFP4 layer on one of 8 B200 EP ranks: the TRTLLM rows measured 37.4,
    84.4 and 145.6 us at 1, 16 and 64 tokens (CUTLASS 59.7, 198.5 and about 280: another
    kernel than the trtllm-gen one the engines launch); the TRTLLM backend's layer at the
    pairs and experts the gate gave the measured rank follows them there, and past its
    largest M (1,280 pairs) is the CUTLASS backend's layer (its curve converted to the
    window's fixed time, engine_grid: equal to rounding); a layer of a shape it did not
    time is the CUTLASS layer to the bit.
    Below its smallest M (5 pairs: one token's on the measured rank) the layer takes its
    first row's fraction: xpusim's busiest rank at one token (4 pairs over 4 experts) costs
    less than the row's 5 and more than half of it."""
    trtllm, cutlass = partial(_layer_s, backend="TRTLLM", floor=True), partial(_layer_s,
                                                                               floor=True)
    for tokens, measured_us in ((1, 37.4), (16, 84.4), (64, 145.6)):  # at the rows' load
        load = kernel_tables.gate_load(tokens, 256, 8, 8)
        assert trtllm(tokens, 8, DType.NVFP4, load=load) == pytest.approx(measured_us * 1e-6,
                                                                          rel=0.05)  # fmt: skip
    assert cutlass(1, 8, DType.NVFP4) == pytest.approx(59.7e-6, rel=0.05)
    assert cutlass(64, 8, DType.NVFP4) > 1.5 * trtllm(64, 8, DType.NVFP4)
    for tokens in (2048, 4096):
        assert _layer_s(tokens, 8, DType.NVFP4, "TRTLLM") == pytest.approx(
            _layer_s(tokens, 8, DType.NVFP4), rel=1e-12)  # fmt: skip
    # a shape it has no rows of (EP 2) is the CUTLASS table's alone, at any M
    assert _layer_s(1, 2, DType.NVFP4, "TRTLLM") == _layer_s(1, 2, DType.NVFP4)
    row_s = trtllm(1, 8, DType.NVFP4, load=(5, 5))
    assert 0.5 * row_s < trtllm(1, 8, DType.NVFP4, load=(4, 4)) < row_s


@settings(max_examples=25, deadline=None)
@given(tokens=st.integers(1, 4096), ep=st.sampled_from([4, 8]),
       backend=st.sampled_from(["TRTLLM", None]))  # fmt: skip
def test_fp4_experts_cost_no_more_than_fp8_unless_the_rows_say_so(tokens, ep, backend):
    """Half the weight bytes: an NVFP4 expert layer costs no more than the same layer in
    FP8 unless the NVFP4 table's own rows (of the layer's shape) are slower than the FP8
    table's at a measured token count bracketing it (TensorRT-LLM's CUTLASS NVFP4 rows
    are: 59.7 against 45.8 us at one token with EP 8; its TRTLLM rows, 37.4, are not). FP8
    has no TRTLLM table; its layer takes the CUTLASS rows either way."""
    fp4, fp8 = _layer_s(tokens, ep, DType.NVFP4, backend), _layer_s(tokens, ep, DType.FP8)
    if fp4 <= fp8:
        return
    fp4_rows = _rows(kernel_table("b200", DType.NVFP4, "nvfp4", kind="moe"), ep)
    if backend:  # its window's rows, the CUTLASS rows outside it
        fp4_rows |= _rows(kernel_table("b200", DType.NVFP4, "nvfp4@TRTLLM", kind="moe"), ep)
    fp8_rows = _rows(kernel_table("b200", DType.FP8, "fp8", kind="moe"), ep)
    measured = sorted(set(fp4_rows) & set(fp8_rows))
    below = max((t for t in measured if t <= tokens), default=measured[0])
    above = min((t for t in measured if t >= tokens), default=measured[-1])
    assert any(fp4_rows[t] > fp8_rows[t] for t in (below, above)), (tokens, ep, fp4, fp8)


@pytest.mark.parametrize(("dtype", "weight", "name", "shape", "tokens"), [
    (DType.MXFP4, "mxfp4", "aiter-mxfp4-fmoe-mi355x", (256, 8, 256), 1),
    (DType.MXFP4, "mxfp4", "aiter-mxfp4-fmoe-mi355x", (256, 8, 256), 8),
    (DType.MXFP4, "mxfp4", "aiter-mxfp4-fmoe-mi355x", (256, 8, 256), 64),
    (DType.MXFP4, "mxfp4", "aiter-mxfp4-fmoe-mi355x", (256, 8, 256), 1024),
    (DType.FP8, "fp8-block", "aiter-fp8-blockscale-fmoe-mi355x", (512, 9, 257), 8),
    (DType.FP8, "fp8-block", "aiter-fp8-blockscale-fmoe-mi355x", (512, 9, 257), 1024),
])  # fmt: skip
def test_deepseeks_experts_on_an_mi355x_take_aiters_fused_moe(dtype, weight, name, shape,
                                                              tokens):  # fmt: skip
    """DeepSeek-R1's routed experts on an MI355X take AITER's tuned fused MoE of their
    shape, within the table's fit and never under the roofline: in MXFP4 at TP 8 (inter
    256 a GPU, all 256 experts on each; amd/DeepSeek-R1-0528-MXFP4-Preview under SGLang or
    ATOM; dsv3_fp4_tuned_fmoe.csv: 18.9 us at 1 token, 45.5 at 8, 137 at 64), where the
    chip's roofline model priced 8 tokens' layer at 27.6 us; in block-scaled FP8 at TP 4
    with the shared expert fused (257 experts, top 9: 128 us at 8 tokens)."""
    inter, topk, experts = shape
    table = kernel_table("mi355x", dtype, weight, kind="moe")
    assert table.name == name and table.measured_on == "mi355x"
    with kernel_tables.TABLES_DIR.joinpath("moe/amd-aiter.toml").open("rb") as f:
        (entry,) = [t for t in tomllib.load(f)["table"] if t["name"] == table.name]
    row = [tokens, 7168, inter, topk, experts, 1, 1]
    (micros,) = [r[-1] for r in entry["rows"] if r[:-1] == row]
    ops = _moe_layer(tokens, 7168, inter, topk, experts, dtype, weight, ep=1, random=True)
    time_s, roof_s = _times("mi355x", ops)
    assert np.all(time_s >= roof_s * (1 - 1e-9))
    floor_s = kernel_floor_s(ops, HardwareArrays.build(load_chip("mi355x"), ops)).sum()
    own = table.of_shape((7168.0, float(inter), float(topk), float(experts), 1.0))
    fit = own.predict_s(own.rows_m, own.roofline_s) / own.measured_s
    assert fit.min() * 0.98 <= floor_s / (micros * 1e-6) <= fit.max() * 1.02
    assert 0.8 < floor_s / (micros * 1e-6) < 1.25


def test_b300_takes_sglangs_rows_of_the_trtllm_gen_kernels():
    """B300 has no TensorRT-LLM min-latency rows; SGLang 0.5.14's flashinfer_trtllm rows
    (36.1 and 168.7 us a DeepSeek-R1 layer at 1 and 64 tokens, EP 8) price the TRTLLM
    backend there, well under the CUTLASS rows the chip kept before."""
    ops = _moe_layer(1, 7168, 2048, 8, 256, DType.NVFP4, "nvfp4", ep=8, backend="TRTLLM",
                     load=kernel_tables.gate_load(1, 256, 8, 8))  # the row's rank's
    one = kernel_floor_s(ops, HardwareArrays.build(load_chip("b300"), ops)).sum()
    assert one == pytest.approx(36.1e-6, rel=0.05)
    table = kernel_table("b300", DType.NVFP4, "nvfp4@TRTLLM", kind="moe")
    assert table.engine.startswith("sglang") and _rows(table, 8)[64] == pytest.approx(
        168.7e-6, rel=1e-3)


def _pooled_or_own_shapes() -> list[tuple[object, tuple[float, ...]]]:
    """(table, shape) of every moe table with each of its rows' shapes, and each with four
    times the experts, a shape no table has rows of, which its pooled curve prices."""
    cases = []
    for table in MOE:
        for hidden, width, topk, experts, ep in sorted(set(table.row_shapes)):
            cases += [(table, (hidden, width, topk, experts, ep)),
                      (table, (hidden, width, topk, 4 * experts, ep))]  # fmt: skip
    return cases


@settings(max_examples=60, deadline=None)
@given(case=st.sampled_from(_pooled_or_own_shapes()))
def test_a_moe_layers_time_never_falls_as_its_pairs_grow(case):
    """At every node of the curve an op of a table's shape takes (its own rows or the
    pooled curve), fixed time + roofline / fraction never falls as the rank's pairs grow
    (kernel_tables._moe_envelope: a smaller batch can run the larger one's kernel), and no
    fraction passes 1 (no op faster than its roofline)."""
    table, shape = case
    grid, fixed_s = table.grid_of(shape)
    time_s = fixed_s + table.moe_roofline_s(shape) / grid
    assert np.all(grid <= 1 + 1e-12)
    assert np.all(np.diff(time_s) >= -1e-12 * time_s[1:])


@settings(max_examples=30, deadline=None)
@given(tokens=st.integers(1, 1024), more=st.integers(1, 1024))
def test_gpt_oss_120b_experts_on_an_h100_cost_no_less_for_more_tokens(tokens, more):
    """gpt-oss-120b's expert layer (128 experts, top 4) on an H100, which the MXFP4 table
    has no rows of, on its pooled curve of gpt-oss-20b's EP 1, 4 and 8 rows: 1.76 ms at 32
    tokens and 0.93 ms at 64 before the envelope. More tokens never cost less, but for the
    linear interpolation of the fraction between the curve's nodes (a doubling apart):
    within 3%, the most any batch of 1-512 tokens fell below a smaller one's (2.5%)."""
    shape = (2880, 2880, 4, 128)
    few, many = sorted((tokens, tokens + more))
    cost = [_times("h100-sxm", _moe_layer(t, *shape, DType.BF16, "mxfp4", ep=1,
                                          random=True))[0].sum() for t in (few, many)]  # fmt: skip
    assert cost[1] >= cost[0] * 0.97


@pytest.mark.parametrize(("experts", "tokens", "micros"), [
    (128, 1, 62.9), (128, 32, 687.0), (128, 64, 689.1), (128, 1024, 856.2),
    (32, 8, 196.9), (32, 256, 235.6), (32, 4096, 1483.2),
])  # fmt: skip
def test_vllm_runs_gpt_oss_experts_on_an_h100_at_its_own_triton_kernels_rows(experts, tokens,
                                                                             micros):  # fmt: skip
    """vLLM 0.11 runs gpt-oss's MXFP4 experts on Hopper through OpenAI's triton_kernels
    (engines.toml vllm `kernels`), which aiconfigurator timed at vLLM 0.24.0 on an H100:
    a vLLM run's layer (balanced, EP 1) takes those rows, within 7% (the fixed time of the
    TensorRT-LLM table below it: engine_grid), where another engine's takes TensorRT-LLM's
    W4A16 kernels (1.41 ms for gpt-oss-120b at 32 tokens, against vLLM's 0.69)."""
    from xpusim.serving.engines import engine

    shape = (2880, 2880, 4, experts)
    vllm = _moe_layer(tokens, *shape, DType.BF16, "mxfp4", ep=1,
                      kernels=engine("vllm").kernels_on("NVIDIA"))  # fmt: skip
    other = _moe_layer(tokens, *shape, DType.BF16, "mxfp4", ep=1)
    vllm_s, other_s = (_times("h100-sxm", ops)[0].sum() for ops in (vllm, other))
    assert vllm_s == pytest.approx(micros * 1e-6, rel=0.07)
    assert other_s > vllm_s


@pytest.mark.parametrize(("chip", "experts", "tokens", "micros"), [
    ("b200", 128, 1, 31.2), ("b200", 128, 64, 382.1), ("b200", 128, 1024, 682.9),
    ("b200", 32, 256, 0.0), ("b300", 128, 64, 377.2), ("gb200", 128, 64, 367.4),
])  # fmt: skip
def test_vllm_runs_gpt_oss_experts_on_blackwell_at_flashinfers_mxfp4_bf16_rows(
        chip, experts, tokens, micros):  # fmt: skip
    """On an SM100 GPU vLLM runs gpt-oss's MXFP4 experts through FlashInfer's trtllm-gen
    MXFP4 x BF16 kernels (Mxfp4Backend.SM100_FI_MXFP4_BF16, its default there), timed by
    aiconfigurator at vLLM 0.24.0 on B200, B300 and GB200: a vLLM run's layer takes those
    rows, about a third of TensorRT-LLM's W4A16 rows that priced it before (1,256 us for
    gpt-oss-120b at 64 tokens on a B200): within 1%, and within 15% at one token, where
    the kernel's fixed time is the default table's (engine_grid: 25 us an op, 35 us the
    layer against vLLM's 31). `micros` 0: the row read from the table (gpt-oss-20b's)."""
    from xpusim.serving.engines import engine

    shape = (2880, 2880, 4, experts)
    tables = tomllib.loads((kernel_tables.TABLES_DIR / "moe/nvidia-trtllm.toml").read_text())
    table = next(t for t in tables["table"]
                 if t.get("kernel") == "flashinfer-mxfp4-bf16-moe" and t["chips"] == [chip])
    row = next(r for r in table["rows"] if r[:7] == [tokens, 2880, 2880, 4, experts, 1, 1])
    assert micros == 0 or row[-1] == pytest.approx(micros, rel=1e-3)
    kernels = engine("vllm").kernels_on("NVIDIA", chip_id=chip)
    vllm = _moe_layer(tokens, *shape, DType.BF16, "mxfp4", ep=1, kernels=kernels)
    other = _moe_layer(tokens, *shape, DType.BF16, "mxfp4", ep=1)
    vllm_s, other_s = (_table_s(chip, ops) for ops in (vllm, other))
    assert vllm_s == pytest.approx(row[-1] * 1e-6, rel=0.15 if tokens == 1 else 0.01)
    assert other_s > 1.5 * vllm_s


def _table_s(chip_id: str, table) -> float:
    """A layer's time as its kernel tables price it: roofline.kernel_floor_s, the floor
    evaluate takes before its power limit."""
    return float(kernel_floor_s(table, HardwareArrays.build(load_chip(chip_id), table)).sum())


def _collector_picks(tokens: int, experts: int, topk: int) -> list[list[int]]:
    """Each token's experts as aiconfigurator's collector routes them, one token at a time
    in plain Python: balanced_logits (collector/helper.py) through DeepSeek-V3's gate of 8
    groups keeping 4 (each group scored by its two best experts; ties to the lower index,
    as the group top-k and the expert top-k break them)."""
    stride = -(-experts // topk)
    n_group, topk_group = kernel_tables.GATE_GROUPS
    size = experts // n_group
    picks = []
    for t in range(tokens):
        if tokens >= stride:
            hot = {(t + j * stride) % experts for j in range(topk)}
        else:
            hot = {int((np.float32(t) * np.float32(stride) / np.float32(tokens) + j * stride)
                       % experts) for j in range(topk)}  # fmt: skip
        score = [1.0 if e in hot else 0.0 for e in range(experts)]
        group = [sum(sorted(score[g * size:(g + 1) * size], reverse=True)[:2])
                 for g in range(n_group)]  # fmt: skip
        kept = sorted(range(n_group), key=lambda g: (-group[g], g))[:topk_group]
        eligible = [e for e in range(experts) if e // size in kept]
        picks.append(sorted(eligible, key=lambda e: (-score[e], e))[:topk])
    return picks


@settings(max_examples=25, deadline=None)
@given(tokens=st.integers(1, 280), ep=st.sampled_from([1, 2, 4, 8, 16, 32, 64, 128, 256]))
def test_gate_load_counts_the_collectors_rank_zero(tokens, ep):
    """gate_load is the collector's routing counted on rank 0 (experts 0 to 256 / ep - 1):
    its pairs and distinct experts, as a token-by-token replay of balanced_logits through
    the group-limited gate gives them; each token's 8 picks lie in groups 0-3, 4 of them
    its hot experts and 4 tied ones, the lowest-numbered of the rest (among experts 0-4)."""
    picks = _collector_picks(tokens, 256, 8)
    mine = [e for token in picks for e in token if e < 256 // ep]
    assert kernel_tables.gate_load(tokens, 256, 8, ep) == (len(mine), len(set(mine)))
    assert all(max(token) < 128 and len(set(token) & set(range(5))) >= 4 for token in picks)


def test_gate_load_is_what_the_rows_at_one_token_read():
    """SGLang 0.5.14's flashinfer_trtllm NVFP4 layer on a B200 at one token: 36.6, 37.0 and
    36.5 us at EP 8, 16 and 32, 25.3 at EP 64, 19.6 at 128, 19.3 at 256, 46.0 at EP 1 and
    44.9 at EP 2 (b200_sxm/moe/sglang/0.5.14): the measured rank holds the same 5 experts
    from EP 8 to 32, 4 at 64, 2 at 128, 1 at 256 and all 8 picks at EP 1 and 2."""
    experts = {ep: kernel_tables.gate_load(1, 256, 8, ep)[1]
               for ep in (1, 2, 4, 8, 16, 32, 64, 128, 256)}  # fmt: skip
    assert experts == {1: 8, 2: 8, 4: 6, 8: 5, 16: 5, 32: 5, 64: 4, 128: 2, 256: 1}
    assert [kernel_tables.gate_load(t, 256, 8, 8)[0] for t in (1, 16, 256)] == [5, 80, 1280]


def test_a_moe_window_prices_on_its_own_fixed_time():
    """The TRTLLM rows start at one token, so the time every row spends past its roofline is
    the kernel's own (20.7 us a layer at EP 8 on B200, the CUTLASS table's 1.7): no layer
    costs less, and a layer of 9 pairs over 8 experts (xpusim's busiest rank at 4
    sequences) costs about what the 4-token row of 20 pairs over the same 8 experts
    measured (47.6 us), where on the CUTLASS fixed time it scaled the whole row by its
    experts a pair (57 us)."""
    table = kernel_table("b200", DType.NVFP4, "nvfp4@TRTLLM", kind="moe")
    own = table.of_shape((7168.0, 2048.0, 8.0, 256.0, 8.0))
    fixed_s = float(np.min(own.measured_s - own.roofline_s))
    assert fixed_s == pytest.approx(20.7e-6, rel=0.01)
    layer = partial(_layer_s, 1, 8, DType.NVFP4, "TRTLLM", True)
    assert layer(load=(1, 1)) >= fixed_s
    assert kernel_tables.gate_load(4, 256, 8, 8) == (20, 8)
    assert layer(load=(9, 8)) == pytest.approx(47.6e-6, rel=0.05)


def test_xpusim_chip_lists_a_moe_window_on_the_fixed_time_it_prices_by():
    """`xpusim chip` lists a moe window's model on its own fixed time (engine_grid's), not
    the pooled fit (0 for the B200 TRTLLM rows, one row a node): a table of one shape at the
    time that shape prices on, a table of several at the least of theirs, so that the
    fractions it prints are of the model the ops take."""
    table = kernel_table("b200", DType.NVFP4, "nvfp4@TRTLLM", kind="moe")
    assert table.fixed_s == 0.0 and len(set(table.row_shapes)) == 3
    ep8 = table.of_shape((7168.0, 2048.0, 8.0, 256.0, 8.0))
    _, fixed_s = kernel_tables.engine_grid(ep8, None, None, ep8.row_shapes[0])
    assert fixed_s * MOE_GEMMS == pytest.approx(20.7e-6, rel=0.01)
    assert f"t0 {fixed_s * MOE_GEMMS * 1e6:.3g} us + roofline" in ep8.describe()[1]
    least_us = min(table.of_shape(s).own_fixed_s for s in set(table.row_shapes)) * 1e6
    assert f"t0 {least_us:.3g} us (the least of its shapes') + " in table.describe()[1]


def _sglang_tp_layer_s(tokens: int, tp: int, precision: DType, weight: str,
                       engine_name: str = "sglang") -> float:  # fmt: skip
    """DeepSeek-R1's routed-expert layer on one of `tp` B200 ranks with the experts TP-split
    (EP 1), balanced routing, --moe-backend TRTLLM, stamped with `engine_name`'s kernels."""
    from xpusim.serving.engines import engine

    ops = _moe_layer(tokens, 7168, 2048 // tp, 8, 256, precision, weight, ep=1,
                     backend="TRTLLM", kernels=engine(engine_name).kernels_on("NVIDIA"))
    return float(_times("b200", ops)[0].sum())


@pytest.mark.parametrize(("tp", "tokens"), [(8, 1), (8, 32), (8, 1536), (8, 16384),
                                            (4, 1024), (4, 16384)])  # fmt: skip
def test_sglang_runs_its_tp_split_experts_at_its_flashinfer_trtllm_rows(tp, tokens):
    """SGLang under --moe-runner-backend flashinfer_trtllm runs the routed experts through
    FlashInfer's trtllm-gen MoE at every step size (engines.toml sglang-flashinfer-trtllm-
    moe), which aiconfigurator timed at SGLang 0.5.14 on a B200 through DeepSeek's
    group-limited gate: a TP-split rank of its block-FP8 layer costs no less than its row
    (its rank ran the experts of 4 of the gate's 8 groups: gate_load) and at most twice
    it, from one token up;
    TensorRT-LLM's layer (no such kernel) takes the tables it takes without SGLang: its
    block-FP8 experts the per-tensor FP8 moe rows (no block-FP8 table of its own on a B200),
    1.63 ms at a 16,384-token prompt step against SGLang's measured 2.36 ms, and its NVFP4
    price there twice SGLang's."""
    rows = {(int(r[5]), int(r[0])): r[7] * 1e-6 for t in MOE
            if t.kernel == "sglang-flashinfer-trtllm-moe" and t.measured_on == "b200"
            and t.scope == "fp8-block" for r in _table_rows(t)}  # fmt: skip
    measured_s = rows[(tp, tokens)]
    sglang_s = _sglang_tp_layer_s(tokens, tp, DType.FP8, "fp8-block")
    assert measured_s * (1 - 1e-9) <= sglang_s <= 2 * measured_s
    trtllm_s = _sglang_tp_layer_s(tokens, tp, DType.FP8, "fp8-block", "trtllm")
    assert trtllm_s != sglang_s
    per_tensor_s = _sglang_tp_layer_s(tokens, tp, DType.FP8, "fp8", "trtllm")
    assert trtllm_s == pytest.approx(per_tensor_s, rel=1e-3)  # the scales' bytes aside
    if (tp, tokens) == (8, 16384):
        assert trtllm_s < 0.75 * measured_s
        nvfp4_row_s = 1.083e-3  # the NVFP4 row of the same kernel, split and tokens
        assert nvfp4_row_s <= _sglang_tp_layer_s(tokens, tp, DType.NVFP4, "nvfp4") \
            < 0.5 * _sglang_tp_layer_s(tokens, tp, DType.NVFP4, "nvfp4", "trtllm")


@pytest.mark.parametrize("weight", ["fp8-block", "nvfp4"])
def test_sglangs_tp_split_rows_count_what_the_gate_gave_their_rank(weight):
    """aiconfigurator's SGLang collector routes these rows through the same group-limited
    gate as the TRTLLM windows (collector/sglang/collect_moe.py TopK use_grouped_topk over
    balanced_logits), so a TP-split rank ran all 8 picks a token over the experts of 4
    groups (gate_load: 8 at one token, 128 from 32), and each row is counted so, from one
    token up: a row's M is 8 pairs a token, and the layer at the load the harness gave its
    rank costs its row within 5% (its kernel-table floor), at one token as at 32 and
    1,024."""
    tables = [t for t in MOE if t.kernel == "sglang-flashinfer-trtllm-moe"]
    assert {(t.measured_on, t.scope) for t in tables} == {
        (chip, w) for chip in ("b200", "b300") for w in ("fp8-block", "nvfp4")}
    assert min(r[0] for t in tables for r in _table_rows(t)) == 1
    table = next(t for t in tables if t.measured_on == "b200" and t.scope == weight)
    dtype = DType.FP8 if weight == "fp8-block" else DType.NVFP4
    rows = {(int(r[5]), int(r[0])): r[7] * 1e-6 for r in _table_rows(table)}
    from xpusim.serving.engines import engine

    for tp in (4, 8):
        shape = table.of_shape((7168.0, 2048.0 / tp, 8.0, 256.0, 1.0))
        tokens = sorted(t for split, t in rows if split == tp)
        assert shape.rows_m.tolist() == [8.0 * t for t in tokens]
        for t in (1, 32, 1024):
            ops = _moe_layer(t, 7168, 2048 // tp, 8, 256, dtype, weight, ep=1,
                             backend="TRTLLM", kernels=engine("sglang").kernels_on("NVIDIA"),
                             load=kernel_tables.gate_load(t, 256, 8, 1))  # fmt: skip
            floor_s = kernel_floor_s(ops, HardwareArrays.build(load_chip("b200"), ops))
            assert float(floor_s.sum()) == pytest.approx(rows[(tp, t)], rel=0.05)


@pytest.mark.parametrize("tokens", [64, 1024, 16384])
def test_sglangs_ep_ranks_keep_the_tables_they_took(tokens):
    """The SGLang rows are a window of TP-split shapes: an EP 8 rank (each expert whole,
    32 of them), whose rows the gate makes upper bounds past 16 tokens, is priced as
    before, whatever the engine."""
    from xpusim.serving.engines import engine

    layers = [_moe_layer(tokens, 7168, 2048, 8, 256, DType.NVFP4, "nvfp4", ep=8,
                         backend="TRTLLM", kernels=engine(name).kernels_on("NVIDIA"))
              for name in ("sglang", "trtllm")]  # fmt: skip
    sglang_s, trtllm_s = (_times("b200", ops)[0].sum() for ops in layers)
    assert sglang_s == pytest.approx(trtllm_s, rel=1e-12)


@pytest.mark.parametrize(("chip_id", "tp", "tokens"), [("h200-sxm", 8, 1), ("h200-sxm", 8, 16),
                                                      ("h200-sxm", 4, 128),
                                                      ("h100-sxm", 8, 1024)])  # fmt: skip
def test_sglang_runs_int4_experts_on_hopper_at_its_marlin_rows(chip_id, tp, tokens):
    """SGLang runs a compressed-tensors INT4 MoE (Kimi-K2.5's experts, groups of 32) on Hopper
    through Marlin (engines.toml sglang-marlin-moe), which aiconfigurator timed at SGLang
    0.5.14 at Kimi-K2's shape, balanced routing: a TP-split rank's layer under SGLang costs
    its row (the experts it touches are the row's) as a floor under what the chip's own
    figures give, which an engine without that kernel (vLLM) pays alone: 16 tokens on a TP-8
    H200 rank 161 us, the row, where the chip's figures give 152."""
    from xpusim.serving.engines import engine

    (row_us,) = [r[7] for t in MOE if t.kernel == "sglang-marlin-moe"
                 and t.measured_on == chip_id for r in _table_rows(t)
                 if (int(r[0]), int(r[5])) == (tokens, tp)]  # fmt: skip

    def layer_s(name: str) -> float:
        ops = _moe_layer(tokens, 7168, 2048 // tp, 8, 384, DType.BF16, "int4-g32", ep=1,
                         kernels=engine(name).kernels_on("NVIDIA"))  # fmt: skip
        return float(_times(chip_id, ops)[0].sum())

    own_s = layer_s("vllm")
    floor_s = max(row_us * 1e-6, own_s)  # the row, or the chip's figures where slower
    launches_s = 2 * load_chip(chip_id).overhead.per_op_s.value  # the layer's two GEMMs'
    assert floor_s * (1 - 1e-9) <= layer_s("sglang") <= floor_s * 1.02 + launches_s
    if (chip_id, tokens) == ("h200-sxm", 16):
        assert own_s < 0.96 * row_us * 1e-6


def _table_rows(table) -> list[list[float]]:
    """A table's rows as its TOML file states them."""
    path = kernel_tables.TABLES_DIR / "moe" / "nvidia-trtllm.toml"
    found = tomllib.loads(path.read_text())["table"]
    return next(t["rows"] for t in found if t["name"] == table.name)


def test_block_fp8_experts_try_the_per_tensor_moe_table_before_a_dense_gemm():
    """A routed expert over block-scaled FP8 weights tries its layout's moe table, then the
    per-tensor FP8 one (the same grouped kernels over weights of the same width), and only
    then a gemm table; a dense matmul of that layout is not an expert and keeps its key."""
    experts = _moe_layer(64, 4096, 384, 8, 128, DType.FP8, "fp8-block", ep=1)
    assert kernel_keys(experts.ops[0]) == (("moe", "fp8-block"), ("moe", "fp8"),
                                           ("gemm", "fp8-block-scaled-grouped"))  # fmt: skip
    dense = _moe_layer(64, 4096, 384, 8, 128, DType.FP8, "fp8-block", expert=False)
    assert kernel_keys(dense.ops[0]) == (("gemm", "fp8-block-scaled-grouped"),)
    plain = _moe_layer(64, 4096, 384, 8, 128, DType.FP8, "fp8", ep=1)
    assert kernel_keys(plain.ops[0]) == (("moe", "fp8"), ("gemm", "fp8"))


@pytest.mark.parametrize("chip_id", ["b200", "b300", "gb200"])
def test_block_fp8_experts_on_blackwell_take_the_fp8_moe_rows_of_their_shape(chip_id):
    """No table measured block-scaled FP8 experts on these chips (SGLang's window aside).
    Qwen3-235B-A22B-FP8's layer on one of 4 ranks (inter 1536 / 4) at 64 tokens is then the
    per-tensor FP8 layer TensorRT-LLM measured at that shape (137.8 us on a B200), and the
    block-scaled weights are the same bytes. A dense FP8 GEMM table priced it before: its
    fraction at 512 pairs is one 4096 x 768 GEMM's, mostly fixed time, and over the roofline
    of 128 experts' weights that gave 803 us, 4x the same layer in BF16."""
    block = _moe_layer(64, 4096, 384, 8, 128, DType.FP8, "fp8-block", ep=1)
    per_tensor = _moe_layer(64, 4096, 384, 8, 128, DType.FP8, "fp8", ep=1)
    bf16 = _moe_layer(64, 4096, 384, 8, 128, DType.BF16, "bf16", ep=1)
    block_s, per_tensor_s, bf16_s = (_times(chip_id, ops)[0].sum()
                                     for ops in (block, per_tensor, bf16))  # fmt: skip
    assert block_s == pytest.approx(per_tensor_s, rel=1e-3)  # the same rows; the scales add
    # a little to the bytes
    assert block_s < bf16_s  # half the weight bytes at a memory-bound size
    if chip_id == "b200":
        measured = _measured_s("aiconfigurator-trtllm-moe-fp8-b200",
                               [64, 4096, 1536, 8, 128, 4, 1])  # fmt: skip
        assert block_s == pytest.approx(measured, rel=0.25)  # the table's fit at that row


def test_bf16_experts_on_an_mi355x_take_aiters_fused_moe_rows():
    """AITER's tuned BF16 fused MoE on an MI355X (Qwen3-235B-A22B's experts at TP 4, 211 us
    at 64 tokens) prices its layer, within the table's fit: before, the dense BF16 GEMM
    table's fraction of one small GEMM priced it at 388 us, 1.8x a B200's (211 us, the same
    8 TB/s). The layer stays above its roofline."""
    table = kernel_table("mi355x", DType.BF16, "bf16", kind="moe")
    assert table.name == "aiter-bf16-fmoe-mi355x"
    ops = _moe_layer(64, 4096, 384, 8, 128, DType.BF16, "bf16", ep=1, random=True)
    time_s, roof_s = _times("mi355x", ops)
    assert np.all(time_s >= roof_s * (1 - 1e-9))
    assert time_s.sum() == pytest.approx(211.057e-6, rel=0.15)


def test_gpt_oss_experts_on_an_mi355x_take_aiters_a16w4_rows():
    """gpt-oss-120b's MXFP4 experts under BF16 activations on an MI355X: AITER's tuned CK-tile
    kernel of that layer (padded to hidden 3072, inter 3072 at TP 1) measured 290.6 us at 64
    tokens; the op, at the model's own 2880 x 2880, takes the rows' fraction of its own
    roofline, so about (2880 / 3072)^2 of it. The dense BF16 GEMM table priced it at 432 us."""
    table = kernel_table("mi355x", DType.BF16, "mxfp4", kind="moe")
    assert table.name == "aiter-a16w4-fmoe-mi355x"
    ops = _moe_layer(64, 2880, 2880, 4, 128, DType.BF16, "mxfp4", ep=1, random=True)
    time_s, roof_s = _times("mi355x", ops)
    assert np.all(time_s >= roof_s * (1 - 1e-9))
    assert time_s.sum() == pytest.approx(290.56e-6 * (2880 / 3072) ** 2, rel=0.15)


@pytest.mark.parametrize(("weight", "act", "expert_compute"), [
    ("mxfp4", DType.BF16, "fp8"), ("bf16", DType.BF16, "bf16"), ("mxfp4", DType.FP8, "fp8"),
    ("nvfp4", DType.BF16, "bf16"),
])  # fmt: skip
def test_an_mxfp8_moe_input_engine_runs_mxfp4_experts_in_fp8(weight, act, expert_compute):
    """An engine that quantizes a 16-bit run's input to MXFP4 experts to MXFP8
    (workloads/transformer.py MXFP8_MOE_INPUT) builds the routed experts' GEMMs computing in
    FP8, their input still the run's 16 bits; other matmuls, and other weight formats'
    experts, keep the run's format."""
    from xpusim.workloads.transformer import MXFP8_MOE_INPUT, StepShape, build_step

    cfg = xpusim.model("gpt-oss-120b")
    graph = build_step(cfg, StepShape(8, 1, 1024), act, parse_weight_format(weight),
                       kernels=(MXFP8_MOE_INPUT,))  # fmt: skip
    plain = build_step(cfg, StepShape(8, 1, 1024), act, parse_weight_format(weight))
    for op, was in zip(graph.ops, plain.ops, strict=True):
        expert = op.name.endswith(("experts.gate_up", "experts.down"))
        assert op.attr("compute") == (expert_compute if expert else was.attr("compute"))
        assert op.inputs[0].dtype == was.inputs[0].dtype


def test_mxfp8_moe_input_runs_on_the_chips_the_engine_lists():
    """TensorRT-LLM runs gpt-oss's MXFP4 experts under MXFP8 activations on Blackwell
    alone (engines.toml chips_only): the kernel is among its kernels on B200, B300 and
    GB200 (a what-if copy of one too), not on Hopper, nor without a chip."""
    from xpusim.serving.engines import engine
    from xpusim.workloads.transformer import MXFP8_MOE_INPUT

    trtllm = engine("trtllm")
    for chip in ("b200", "b300", "gb200", "b200[hbm=9e12]"):
        assert MXFP8_MOE_INPUT in trtllm.kernels_on("NVIDIA", chip_id=chip)
    for chip in ("h100-sxm", "h200-sxm", ""):
        assert MXFP8_MOE_INPUT not in trtllm.kernels_on("NVIDIA", chip_id=chip)
    assert MXFP8_MOE_INPUT not in engine("vllm").kernels_on("NVIDIA", chip_id="b200")


def test_a_measured_kernel_is_not_slowed_by_the_modelled_power_limit():
    """gpt-oss-120b's experts at 64 tokens on a B200 under MXFP8 input stream 1.69 GB in
    TensorRT-LLM's measured 281 us (6.0 TB/s); the GH200 path energy the B200 takes (144
    pJ/B from HBM) would allow 4.4 TB/s within its 850 W, so the power limit had priced the
    layer at 460 us. The table's kernel ran under the chip's own limiter: its time stands,
    its average power is at most the TDP, and under a lowered limit (a what-if TDP of 600 W)
    the layer slows again, as the limiter would slow the measured kernel."""
    from xpusim.hardware.whatif import override

    layer = _moe_layer(64, 2880, 2880, 4, 128, DType.FP8, "mxfp4", ep=1)
    chip = load_chip("b200")
    floor_s = _table_s("b200", layer)
    assert floor_s == pytest.approx(281.3e-6, rel=0.01)
    for tdp_w, slower in ((chip.tdp_w.value, False), (600.0, True)):
        target = override(chip, "tdp_w", tdp_w)
        hw = HardwareArrays.build(target, layer)
        weights = float(layer.role_bytes[..., 1, :].sum())
        costs = evaluate(layer, hw, place(target, Footprint(weights, 0.0, 1e6)))
        assert bool(costs.time_s.sum() > 1.2 * floor_s) is slower
        assert costs.time_s.sum() >= floor_s
        assert np.all(costs.energy_j <= tdp_w * costs.time_s * (1 + 1e-12))


def test_serve_moe_input_sets_the_experts_format_and_refuses_another(capsys):
    """--moe-input mxfp8 gives vLLM's experts on a B200 MXFP8 input (its
    VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1), faster than its BF16 default there; on a run
    without MXFP4 experts it says it changes nothing; a format it does not know is one line
    naming the closest, exit status 2."""
    from cli_run import run_cli

    import xpusim

    def tpot(**more) -> float:
        return xpusim.serve("gpt-oss-120b", "b200", engine="vllm", concurrency=16,
                            requests=16, prompt=512, gen=64, **more).tpot_s.mean  # fmt: skip

    assert tpot(moe_input="mxfp8") < 0.9 * tpot()
    dense = xpusim.serve("llama-3-8b", "b200", engine="vllm", concurrency=2, requests=2,
                         prompt=64, gen=4, moe_input="mxfp8")  # fmt: skip
    assert any(n.startswith("--moe-input mxfp8: changes nothing here") for n in dense.notes)
    code, out, err = run_cli(capsys, "serve", "gpt-oss-120b", "--chip", "b200",
                             "--moe-input", "mxfp9")  # fmt: skip
    assert code == 2 and not out and err.count("\n") == 1 and "mxfp8" in err


def test_the_measured_draw_caps_only_chips_of_borrowed_path_energy():
    """measured_tdp_w: a chip whose HBM path energy is another chip's (GH200's, 'assumed')
    caps a table-priced op's energy at its catalog TDP, a what-if copy or a lowered limit
    at the catalog chip's; Hopper and the A100, whose own architecture's path was measured,
    keep the modelled power limit over their tables (no cap)."""
    from xpusim.cost.roofline import measured_tdp_w
    from xpusim.hardware.whatif import override

    assert measured_tdp_w(load_chip("b200")) == 1000.0
    assert measured_tdp_w(override(load_chip("b200"), "tdp_w", 600.0)) == 1000.0
    assert measured_tdp_w(load_chip("mi300x")) == load_chip("mi300x").tdp_w.value
    for chip in ("h100-sxm", "h200-sxm", "a100-sxm-80gb"):
        assert measured_tdp_w(load_chip(chip)) == float("inf")


def test_every_engine_kernels_curve_keeps_its_fractions_between_0_and_1():
    """An engine's own kernel prices the M it measured on a fixed time at most the least time
    any of its rows spends past its roofline: on `under`'s larger fixed time (TensorRT-LLM's
    MoE rows', 65 us a layer on an H200) vLLM's MXFP4 rows at TP 4 (51.6 us at 4 tokens)
    took fractions below 0, and the curve between such a node and the next priced 22 pairs
    at 225 us. Every engine table's own shapes, on every chip it prices."""
    from xpusim.cost.kernel_tables import all_tables, engine_scope, fraction_grid

    checked = 0
    for table in all_tables():
        if not table.kernel or table.kind not in ("moe", "gemm"):
            continue
        for chip in table.chips:
            for shape in sorted(set(table.row_shapes)):
                keys = ((table.kind, engine_scope(table.scope, table.kernel)),
                        (table.kind, table.scope))  # fmt: skip
                found = fraction_grid(chip, DType(table.dtype), keys, ((table.kind, shape),))
                if found is not None:
                    checked += 1
                    assert np.all((found[0] > 0) & (found[0] <= 1 + 1e-9)), (table.name, shape)
    assert checked > 500


def test_vllms_mxfp4_moe_at_tp4_costs_its_rows_and_between_them():
    """gpt-oss-120b's layer at TP 4 on an H200 (vLLM's Triton MXFP4 rows, 51.6 us at 4
    tokens, 73.3 at 8): its measured time at a measured M, and between two measured M
    between their times."""
    from xpusim.cost.kernel_tables import GRID_LOG2, fraction_grid, interpolate_grid, tables_of_kind

    name = "aiconfigurator-vllm-moe-w4a16-mxfp4-h200-sxm"
    table = next(t for t in tables_of_kind("moe") if t.name == name)
    shape = (2880.0, 720.0, 4.0, 128.0, 1.0)
    keys = (("moe", "mxfp4@vllm-triton-mxfp4-moe"), ("moe", "mxfp4"))
    grid, fixed_s = fraction_grid("h200-sxm", DType.BF16, keys, (("moe", shape),))[:2]
    roofline_s = table.moe_roofline_s(shape)

    def layer_us(pairs: float) -> float:
        fraction = interpolate_grid(grid, np.array([pairs]))[0]
        return 1e6 * (2 * fixed_s + np.interp(np.log2(pairs), GRID_LOG2, roofline_s) / fraction)

    assert layer_us(16) == pytest.approx(51.61, rel=1e-3)
    assert 51.6 < layer_us(22.6) < layer_us(32) < 80


def test_a_split_between_two_timed_splits_takes_rows_between_theirs():
    """aiconfigurator timed vLLM's MXFP4 MoE of gpt-oss-120b at TP 1 and TP 4 (widths 2,880
    and 720 a rank), not TP 2: an op at TP 2 (1,440) takes rows at every M both measured,
    each the geometric mean of theirs (half way in log2 width), not the pooled curve of every
    layer and split; outside the two (TP 8) there are none."""
    name = "aiconfigurator-vllm-moe-w4a16-mxfp4-h200-sxm"
    table = next(t for t in kernel_tables.tables_of_kind("moe") if t.name == name)
    layer = {tp: (2880.0, 2880.0 / tp, 4.0, 128.0, 1.0) for tp in (1, 2, 4, 8)}
    tp1, tp2, tp4 = (table.of_shape(layer[tp]) for tp in (1, 2, 4))
    assert table.has_shape(layer[2]) and not table.has_shape(layer[8])
    assert table.of_shape(layer[8]) is table
    at = {float(m): t for m, t in zip(tp1.rows_m, tp1.measured_s, strict=True)}
    at4 = {float(m): t for m, t in zip(tp4.rows_m, tp4.measured_s, strict=True)}
    assert len(tp2.rows_m) == len(at.keys() & at4.keys()) > 10
    for m, t in zip(tp2.rows_m, tp2.measured_s, strict=True):
        assert t == pytest.approx((at[float(m)] * at4[float(m)]) ** 0.5, rel=1e-12)
    assert set(tp2.row_shapes) == {layer[2]}
