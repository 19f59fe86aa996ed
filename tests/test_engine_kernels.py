"""An engine's own kernels (serving/engines.toml `kernels`, cost/kernel_tables.py "An
engine's own kernels"): a table naming the kernel prices the ops of a run of that engine,
in the M range it measured, and no other run's; its floor keeps the physics."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpusim.compiler.memory_plan import Footprint, place
from xpusim.cost.collectives import MEASURED_DIR, measured_curves
from xpusim.cost.kernel_tables import all_tables, engine_scope, kernel_table
from xpusim.cost.op_table import kernel_keys, op_table
from xpusim.cost.op_times import op_times
from xpusim.cost.roofline import HardwareArrays, evaluate, kernel_floor_s
from xpusim.hardware.catalog import load_chip
from xpusim.ir.dtypes import DType, parse_weight_format
from xpusim.ir.graph import Graph
from xpusim.ir.op import Op, OpKind
from xpusim.ir.tensor import Role, Tensor
from xpusim.serving.engines import engines
from xpusim.workloads.transformer import GRAPH_KERNELS

TRITON = "sglang-triton-w8a8-block"
VLLM_LINEAR = "vllm-0.14-w8a8-block-fp8"  # as the vllm-0.11 profile takes them
VLLM_MOE = "vllm-0.14-fused-moe"
TRTLLM_LINEAR = "trtllm-fp8-block-gemm"


def _block_fp8_matmul(m: int, k: int, n: int, kernels: tuple[str, ...] = ()):
    """One matmul over a DeepSeek-style block-scaled FP8 weight, stamped with `kernels` as
    the layer builder stamps an engine's."""
    ins = (Tensor("x", (m, k), DType.FP8),
           Tensor("w", (k, n), parse_weight_format("fp8-block"), Role.WEIGHT))  # fmt: skip
    attrs = (("compute", "fp8"), *((("kernels", kernels),) if kernels else ()))
    op = Op(OpKind.MATMUL, "mm", ins, (Tensor("y", (m, n), DType.BF16),), attrs)
    return op_table(Graph("one", [op]))


def _floor_s(m: int, k: int, n: int, kernels: tuple[str, ...] = (),
             chip_id: str = "h200-sxm") -> float:  # fmt: skip
    table = _block_fp8_matmul(m, k, n, kernels)
    return float(kernel_floor_s(table, HardwareArrays.build(load_chip(chip_id), table))[0])


def test_the_engine_kernel_name_finds_its_table_and_only_it():
    own = kernel_table("h200-sxm", DType.FP8, engine_scope("fp8-block-scaled", TRITON))
    assert own is not None and own.kernel == TRITON and "sglang/pull/3893" in own.url
    every = kernel_table("h200-sxm", DType.FP8, "fp8-block-scaled")
    assert every is not None and not every.kernel  # DeepGEMM's: what other runs take
    assert kernel_table("mi300x", DType.FP8, engine_scope("fp8-block-scaled", TRITON)) is None
    # a table of every FP8 matmul (DeepGEMM's) times no engine's own kernel: an expert's
    # engine key finds nothing, and the expert keeps its moe table
    grouped = engine_scope("fp8-block-scaled-grouped", TRITON)
    assert kernel_table("h200-sxm", DType.FP8, grouped) is None


def test_an_op_of_the_engine_tries_its_kernel_first_and_others_keep_their_keys():
    plain = _block_fp8_matmul(64, 7168, 2112).ops[0]
    stamped = _block_fp8_matmul(64, 7168, 2112, (TRITON,)).ops[0]
    assert kernel_keys(plain) == (("gemm", "fp8-block-scaled"),)
    assert kernel_keys(stamped) == (("gemm", f"fp8-block-scaled@{TRITON}"),
                                    ("gemm", "fp8-block-scaled"))  # fmt: skip


def test_the_kernel_prices_prefill_shapes_and_defers_below_its_rows():
    """PR #3893 times the Triton kernel at 2.4-3.0x DeepGEMM at M 4096 (1024-4096 kept);
    below M 1024 the op keeps DeepGEMM's table, to the bit."""
    for m in (1, 8, 64, 512):
        assert _floor_s(m, 7168, 1536, (TRITON,)) == _floor_s(m, 7168, 1536)
    for m in (1024, 4096, 16384):
        assert _floor_s(m, 7168, 1536, (TRITON,)) > 2.0 * _floor_s(m, 7168, 1536)
    # at a measured row the model gives the row's time (the fixed time DeepGEMM's, ~2 us)
    assert _floor_s(4096, 7168, 1536, (TRITON,)) == pytest.approx(295.01e-6, rel=0.05)
    assert _floor_s(4096, 512, 32768, (TRITON,)) == pytest.approx(513.50e-6, rel=0.05)


def test_an_unknown_kernel_name_prices_as_before():
    assert _floor_s(4096, 7168, 1536, ("no-such-kernel",)) == _floor_s(4096, 7168, 1536)


@settings(max_examples=80, deadline=None)
@given(m=st.integers(1, 65536), k=st.integers(128, 16384), n=st.integers(128, 32768),
       factor=st.floats(1.0, 8.0),
       own=st.sampled_from([(TRITON, "h200-sxm"), (VLLM_LINEAR, "h100-sxm"),
                            (VLLM_LINEAR, "h200-sxm"), (TRTLLM_LINEAR, "h100-sxm"),
                            (TRTLLM_LINEAR, "h200-sxm")]))  # fmt: skip
def test_an_engine_kernel_never_beats_either_roof(m, k, n, factor, own):
    kernel, chip_id = own
    chip = load_chip(chip_id)
    table = _block_fp8_matmul(m, k, n, (kernel,))
    placement = place(chip, Footprint(k * n, 0.0, m * (k + 2 * n)))
    hw = HardwareArrays.build(chip, table)
    floor_s = kernel_floor_s(table, hw)[0]
    hbm = max(level.bandwidth_bytes_per_s.value for level in chip.memory
              if level.kind.holds_tensors)  # fmt: skip
    assert floor_s >= 2.0 * m * k * n / chip.peak(DType.FP8) * (1 - 1e-12)
    assert floor_s >= (m * k + k * n + 2 * m * n) / hbm * (1 - 1e-9)
    time_s = evaluate(table, hw, placement).time_s[0]
    assert time_s >= floor_s
    faster = dataclasses.replace(hw, level_rate=hw.level_rate * factor,
                                 kernel_bw=hw.kernel_bw * factor)  # fmt: skip
    assert evaluate(table, faster, placement).time_s[0] <= time_s * (1 + 1e-12)


def test_every_engine_kernel_has_a_table_and_a_source():
    """A kernel is a kernel table's, an all-reduce table's (cost/collectives.py) or one
    that changes the graph the layer builder emits (workloads/transformer.py)."""
    collectives = {c.kernel for path in MEASURED_DIR.glob("*.toml")
                   for curves in measured_curves(path.stem).values() for c in curves}
    timed = {t.kernel for t in op_times()}  # per call, cost/op_times.py
    named = {t.kernel for t in all_tables() if t.kernel} | collectives | GRAPH_KERNELS | timed
    for profile in engines().values():
        assert set(profile.kernels) <= named, profile.name
        assert bool(profile.kernels) == bool(profile.kernels_source), profile.name
        assert all(f"{k}: " in profile.kernels_source for k in profile.kernels), profile.name
    assert engines()["sglang-0.4"].kernels == (TRITON, "sglang-torch-routing")


def test_serve_runs_the_engines_kernels():
    """SGLang 0.4 on 8 H200 prefills DeepSeek-R1 slower with its Triton GEMMs than the same
    run on every engine's tables; one client's decode steps (M 1) cost the same."""
    import xpusim

    def run(clients: int) -> object:
        return xpusim.serve("deepseek-r1", "h200-sxm", chips=8, tp=8, precision="fp8",
                            kv_precision="bf16", engine="sglang-0.4", concurrency=clients,
                            requests=clients, prompt=3200, gen=32)  # fmt: skip

    own = [run(4), run(1)]
    assert any("engine kernels: sglang-triton-w8a8-block" in n for n in own[0].notes)
    profile = engines()["sglang-0.4"]
    plain = dataclasses.replace(profile, kernels=tuple(k for k in profile.kernels if k != TRITON))
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(engines(), "sglang-0.4", plain)
        before = [run(4), run(1)]
    assert own[0].ttft_s.mean > 1.2 * before[0].ttft_s.mean
    assert own[1].tpot_s.mean == pytest.approx(before[1].tpot_s.mean, rel=1e-12)


def test_a_kernel_name_with_a_scope_separator_is_refused(tmp_path):
    """`scope@kernel` keys are split at '@': a kernel named with one would price nothing."""
    import tomllib

    from xpusim.cost.kernel_tables import TABLES_DIR, _read
    from xpusim.errors import UserError

    text = (TABLES_DIR / "engine-sglang-triton.toml").read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace(f'kernel = "{TRITON}"', 'kernel = "triton@0.4"'))
    assert tomllib.loads(bad.read_text())["table"][0]["kernel"] == "triton@0.4"
    with pytest.raises(UserError, match="a name without '@'"):
        _read(bad, "gemm")


def test_the_vllm_profile_lists_its_kernels_and_their_tables_exist():
    """vLLM's block-FP8 linear and fused MoE (kernel_tables/gemm/<chip>.toml and
    moe/engine-vllm.toml, benchmarks/vllm_kernel_tables.py) on the Hopper chips measured."""
    assert set(engines()["vllm-0.11"].kernels) >= {VLLM_LINEAR, VLLM_MOE}
    for chip_id in ("h100-sxm", "h200-sxm"):
        gemm = kernel_table(chip_id, DType.FP8, engine_scope("fp8-block-scaled", VLLM_LINEAR))
        assert gemm is not None and gemm.kernel == VLLM_LINEAR and "gemm/vllm/0.14.0" in gemm.url
        moe = kernel_table(chip_id, DType.FP8, engine_scope("fp8-block", VLLM_MOE), kind="moe")
        assert moe is not None and moe.kernel == VLLM_MOE and "moe/vllm/0.14.0" in moe.url
    assert kernel_table("b200", DType.FP8, engine_scope("fp8-block-scaled", VLLM_LINEAR)) is None
    assert all(VLLM_LINEAR not in p.kernels for name, p in engines().items()
               if name != "vllm-0.11")


def test_vllm_decode_linears_cost_what_vllm_measured_and_others_keep_deepgemm():
    """Qwen3-8B's qkv_proj (6144 x 4096) at M 1-64 on an H100: aiconfigurator times vLLM
    0.14's block-FP8 layer at 35.4-38.2 us, where DeepGEMM's table gives other engines ~11."""
    for m, measured_us in ((1, 35.40), (32, 37.33)):
        assert _floor_s(m, 4096, 6144, (VLLM_LINEAR,), "h100-sxm") == pytest.approx(
            measured_us * 1e-6, rel=0.08)
    for m in (1, 8, 64):
        assert _floor_s(m, 4096, 6144, (VLLM_LINEAR,), "h100-sxm") > 2.5 * _floor_s(
            m, 4096, 6144, chip_id="h100-sxm")  # fmt: skip


def test_serve_prices_vllms_block_fp8_layers_slower_than_deepgemm():
    """Qwen3-30B-A3B-FP8 on one H100 under vLLM 0.11 (0.14's timings): a decode step with
    vLLM's own kernels costs more than the same run on every engine's tables (DeepGEMM's
    linears, TensorRT-LLM's fused MoE), as aiconfigurator's vLLM rows time its layers
    slower."""
    import xpusim

    def run() -> object:
        return xpusim.serve("qwen3-30b-a3b-fp8", "h100-sxm", precision="fp8",
                            kv_precision="bf16", engine="vllm-0.11", concurrency=4, requests=4,
                            prompt=256, gen=32)  # fmt: skip

    own = run()
    (note,) = [n for n in own.notes if n.startswith("engine kernels")]
    assert note.startswith(f"engine kernels: {VLLM_LINEAR}, {VLLM_MOE} (their measurements")
    assert "mxfp4" not in note  # vLLM's MXFP4 MoE prices none of an FP8 model's experts
    assert note.endswith("(their measurements on this chip price ops of this run; engines.toml "
                         "kernels_source)")  # its sources cited, not a kernel's name again
    plain = dataclasses.replace(engines()["vllm-0.11"], kernels=(), kernels_source="")
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(engines(), "vllm-0.11", plain)
        before = run()
    assert own.tpot_s.mean > 1.1 * before.tpot_s.mean


SGLANG_FP4 = "sglang-nvfp4-gemm"


def _nvfp4_floor_s(m: int, k: int, n: int, kernels: tuple[str, ...] = ()) -> float:
    """One NVFP4 matmul's measured floor on a B200 (an SGLang run's, with `kernels`)."""
    ins = (Tensor("x", (m, k), DType.NVFP4), Tensor("w", (k, n), DType.NVFP4, Role.WEIGHT))
    attrs = (("compute", "nvfp4"), *((("kernels", kernels),) if kernels else ()))
    table = op_table(Graph("one", [Op(OpKind.MATMUL, "o_proj", ins,
                                      (Tensor("y", (m, n), DType.BF16),), attrs)]))  # fmt: skip
    return float(kernel_floor_s(table, HardwareArrays.build(load_chip("b200"), table))[0])


def test_sglang_nvfp4_linears_cost_what_sglang_measured():
    """DeepSeek-R1's o_proj at TP 8 (7168 x 2048) on a B200: aiconfigurator times SGLang
    0.5.9's NVFP4 linear at 7.32 us at M 1 (7.30 at 128), where TensorRT-LLM's rows, which
    priced SGLang's runs before, give 9.60 (9.99; their fitted model 9.1): SGLang's runs
    take their own rows, other engines keep TensorRT-LLM's."""
    assert SGLANG_FP4 in engines()["sglang"].kernels
    for m, measured_us in ((1, 7.32), (128, 7.30)):
        assert _nvfp4_floor_s(m, 2048, 7168, (SGLANG_FP4,)) == pytest.approx(
            measured_us * 1e-6, rel=0.03)
        assert _nvfp4_floor_s(m, 2048, 7168) > 1.2 * _nvfp4_floor_s(m, 2048, 7168,
                                                                     (SGLANG_FP4,))  # fmt: skip
    assert kernel_table("h200-sxm", DType.NVFP4, engine_scope("nvfp4", SGLANG_FP4)) is None


def test_an_engines_own_gemm_never_prices_a_routed_expert():
    """An expert op's keys keep their kinds' order, each kind's engine key before its
    plain key: SGLang's NVFP4 GEMM table (scope nvfp4, as an NVFP4 expert's gemm key) comes
    after the moe keys, so the trtllm-gen MoE rows still price DeepSeek-R1's routed experts
    in an SGLang run (tried first, it priced them at 44 us where the MoE rows give 31)."""
    ins = (Tensor("x", (1, 8, 7168), DType.NVFP4),
           Tensor("w", (8, 7168, 4096), DType.NVFP4, Role.WEIGHT))  # fmt: skip
    attrs = (("compute", "nvfp4"), ("tp", "expert_column"), ("moe_backend", "TRTLLM"),
             ("kernels", (SGLANG_FP4,)))  # fmt: skip
    op = Op(OpKind.MATMUL, "experts.gate_up", ins, (Tensor("y", (1, 8, 4096), DType.BF16),),
            attrs)  # fmt: skip
    assert kernel_keys(op) == (
        ("moe", f"nvfp4@TRTLLM@{SGLANG_FP4}"), ("moe", "nvfp4@TRTLLM"),
        ("moe", f"nvfp4@{SGLANG_FP4}"), ("moe", "nvfp4"),
        ("gemm", f"nvfp4@{SGLANG_FP4}"), ("gemm", "nvfp4"))  # fmt: skip


def test_the_kernels_note_names_an_all_reduce_kernel_only_where_the_plan_runs_one():
    """SGLang's custom all-reduce prices a tp 2 run's all-reduces; one chip runs none, and
    its note named the kernel (and SGLang's NVFP4 GEMM, on an H100 without its table)."""
    import xpusim

    def kernels(**plan: int) -> list[str]:
        r = xpusim.serve("llama-3-8b", "h100-sxm", engine="sglang", concurrency=2, requests=4,
                         prompt=64, gen=8, **plan)  # fmt: skip
        return [n for n in r.notes if n.startswith("engine kernels")]

    assert kernels() == []
    (note,) = kernels(chips=2, tp=2)
    assert note.startswith("engine kernels: sglang-custom-allreduce (their measurements")
    # disaggregated: the one-chip prefill replica runs none, the tp 2 decode replica does
    # (its own plan's notes are not shown: the note was lost)
    assert kernels(chips=3, tp=1, prefill_replicas=1, decode_replicas=1, decode_tp=2) == [note]


SGLANG_FP8 = "sglang-w8a8-block-fp8"


def test_sglang_block_fp8_linears_on_hopper_cost_what_sglang_measured():
    """Qwen3-8B-FP8's o_proj (4096 x 4096) on an H100: aiconfigurator times SGLang 0.5.9's
    block-FP8 linear (per-group quantization, then DeepGEMM) at 13.5 us at M 4 and its down
    projection (4096 x 12288) at 27.1 us, where DeepGEMM's README table, which priced SGLang's
    runs before, gives 7.9 and 20.3 (the GEMM alone, DeepSeek's shapes from M 64): SGLang's
    runs take their own rows on Hopper, other engines keep DeepGEMM's, no AMD chip has them."""
    assert SGLANG_FP8 in engines()["sglang"].kernels
    assert SGLANG_FP8 in engines()["sglang"].nvidia_only
    for k, n, measured_us in ((4096, 4096, 13.49), (12288, 4096, 27.09)):
        own = _floor_s(4, k, n, (SGLANG_FP8,), "h100-sxm")
        assert own == pytest.approx(measured_us * 1e-6, rel=0.1)
        assert own > 1.3 * _floor_s(4, k, n, (), "h100-sxm")
    assert kernel_table("h200-sxm", DType.FP8, engine_scope("fp8-block-scaled", SGLANG_FP8))
    assert kernel_table("mi300x", DType.FP8, engine_scope("fp8-block-scaled", SGLANG_FP8)) \
        is None


@pytest.mark.parametrize(("k", "n", "rows_us"), [
    (1536, 3072, {4: 7.846, 16: 5.828, 32: 6.986, 64: 5.94}),  # q_b_proj at TP 8
    (2048, 7168, {4: 9.993, 16: 9.297, 32: 9.379, 64: 10.23}),  # o_proj at TP 8
])  # fmt: skip
def test_sglang_prices_deepseek_r1s_projections_by_their_own_rows(k, n, rows_us):
    """DeepSeek-R1's block-FP8 MLA projections at TP 8 on an H200 under SGLang take SGLang
    0.5.9's rows of their own (N, K) (gemm/h200-sxm.toml, benchmarks/sglang_kernel_tables.py
    mla_shapes), where the curve pooled over Qwen3's and Llama's shapes priced q_b_proj at
    0.76x its row at M 4 and 1.17x at 16 and 32."""
    for m, measured_us in rows_us.items():
        assert _floor_s(m, k, n, (SGLANG_FP8,)) == pytest.approx(measured_us * 1e-6, rel=0.01)
    # the fused qkv_a (2112 x 7168, replicated) takes the rows of 2048 x 7168, its snapped
    # shape (17.02 us at M 4), its weight 3% larger
    assert _floor_s(4, 7168, 2112, (SGLANG_FP8,)) == pytest.approx(17.5e-6, rel=0.02)
