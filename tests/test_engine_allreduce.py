"""An engine's own all-reduce (cost/collectives.py): an all-reduce stamped with the engine's
kernel costs that kernel's measured time, never under the bytes' time over the links; an
unstamped one keeps the analytic line floored by measurement."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpusim.compiler.partition import collective
from xpusim.cost.collectives import (
    FLASHINFER_ALLREDUCE,
    Collective,
    bandwidth_bound_s,
    comm_seconds,
    engine_curve,
    floored_seconds,
)
from xpusim.cost.op_table import op_table
from xpusim.hardware.system import load_system
from xpusim.ir.dtypes import DType
from xpusim.ir.graph import Graph
from xpusim.ir.op import Op, OpKind
from xpusim.ir.tensor import Tensor

B200 = load_system("dgx-b200")
SGLANG = "sglang-custom-allreduce"


def _comm_s(tokens: int, kernels: tuple[str, ...]) -> float:
    """Link seconds of one tensor-parallel all-reduce over 8 B200s of DeepSeek-R1's hidden
    state (7,168 BF16 a token) after a matmul stamped with `kernels`."""
    x = Tensor("x", (tokens, 7168), DType.BF16)
    attrs = (("kernels", kernels),) if kernels else ()
    after = Op(OpKind.MATMUL, "o_proj", (x,), (x,), attrs)
    table = op_table(Graph("ar", [collective("all_reduce", "tp", 8, x, after)]))
    return float(comm_seconds(table, B200, 8, np.array([x.nbytes]))[0])


def test_a_decode_all_reduce_costs_the_engines_measured_kernel():
    """One token (14 KB): SGLang's custom all-reduce on 8 B200s measured 7.6-7.8 us
    (aiconfigurator, SGLang 0.5.10), where the analytic line (6 steps of the assumed 2 us)
    gives 14; a run without the kernel keeps the line."""
    own, line = _comm_s(1, (SGLANG,)), _comm_s(1, ())
    assert 7.5e-6 < own < 7.9e-6
    assert line > 12e-6
    assert _comm_s(1, ("some-other-kernel",)) == line


def test_the_kernel_is_found_only_where_the_chip_measured_it():
    assert engine_curve(B200, Collective.ALL_REDUCE, 8, 8, (SGLANG,)).kernel == SGLANG
    assert engine_curve(B200, Collective.ALL_GATHER, 8, 8, (SGLANG,)) is None
    assert engine_curve(load_system("mi300x-platform"), Collective.ALL_REDUCE, 8, 8,
                        (SGLANG,)) is None  # fmt: skip


def _links_times(system, factor: float):
    """The system with its NVLink level's bandwidth `factor` times as high."""
    level = system.levels[0]
    rate = level.bandwidth_bytes_per_s
    faster = level.model_copy(update={"bandwidth_bytes_per_s": rate.model_copy(
        update={"value": rate.value * factor})})  # fmt: skip
    return system.model_copy(update={"levels": [faster, *system.levels[1:]]})


@settings(max_examples=100, deadline=None)
@given(nbytes=st.floats(1.0, 2.0**31), factor=st.floats(1.0, 100.0))
def test_the_engines_kernel_never_beats_the_links(nbytes, factor):
    """Physics: at any size, at least the bytes over the links (bandwidth_bound_s), on the
    system as it is and on one with `factor` times the link bandwidth, which is never
    slower."""
    n = np.array([nbytes])
    faster = _links_times(B200, factor)
    for kernel in (SGLANG, "trtllm-allreduce", "vllm-custom-allreduce"):
        own = floored_seconds(B200, Collective.ALL_REDUCE, n, 8, 8, (kernel,))
        assert own[0] >= bandwidth_bound_s(B200, Collective.ALL_REDUCE, n, 8, 8)[0]
        quick = floored_seconds(faster, Collective.ALL_REDUCE, n, 8, 8, (kernel,))
        assert quick[0] >= bandwidth_bound_s(faster, Collective.ALL_REDUCE, n, 8, 8)[0]
        assert quick[0] <= own[0] * (1 + 1e-12)


@pytest.mark.parametrize("tokens", [1, 64, 4096])
def test_the_bandwidth_term_binds_the_kernel_past_its_rows(tokens):
    """The kernel's time is the larger of its curve and the bandwidth term at every size a
    serving step has."""
    n = np.array([tokens * 7168 * 2.0])
    own = floored_seconds(B200, Collective.ALL_REDUCE, n, 8, 8, (SGLANG,))
    curve = engine_curve(B200, Collective.ALL_REDUCE, 8, 8, (SGLANG,)).at(n)
    bound = bandwidth_bound_s(B200, Collective.ALL_REDUCE, n, 8, 8)
    np.testing.assert_allclose(own, np.maximum(curve, bound), rtol=1e-12)


def test_the_first_kernel_listed_prices_it():
    """--allreduce-fusion puts FlashInfer's kernels (TensorRT-LLM's table) ahead of SGLang's
    own: the order of `kernels` decides, not the order of the tables in the file."""
    first = engine_curve(B200, Collective.ALL_REDUCE, 8, 8, (SGLANG, FLASHINFER_ALLREDUCE))
    assert first.kernel == SGLANG
    first = engine_curve(B200, Collective.ALL_REDUCE, 8, 8, (FLASHINFER_ALLREDUCE, SGLANG))
    assert first.kernel == FLASHINFER_ALLREDUCE
    assert _comm_s(1, (FLASHINFER_ALLREDUCE, SGLANG)) < _comm_s(1, (SGLANG,))


def test_only_sglang_and_vllm_take_the_flashinfer_fusion_flag():
    """--allreduce-fusion with another engine is refused, naming the engines to give; a
    published point's `allreduce_fusion` reaches serve: SGLang's launches that set
    --enable-flashinfer-allreduce-fusion, vLLM's that set the fuse_allreduce_rms pass."""
    from xpusim.errors import UserError
    from xpusim.serving.options import Engine
    from xpusim.validation.points import DATA

    for engine in ("sglang", "vllm", "vllm-0.11"):
        assert Engine(engine=engine, allreduce_fusion=True).allreduce_fusion
    with pytest.raises(UserError, match=r"with engine sglang or .*vllm-0.11 .*, got engine "
                                        r"'trtllm'"):  # fmt: skip
        Engine(engine="trtllm", allreduce_fusion=True)
    flagged = [p for p in json.loads(DATA.read_text())["points"] if p.get("allreduce_fusion")]
    flag = {"sglang": "--enable-flashinfer-allreduce-fusion", "vllm-0.11": "fuse_allreduce_rms"}
    assert {p["engine_profile"] for p in flagged} == set(flag)
    assert all(p["chip"] in ("b200", "b300") and flag[p["engine_profile"]] in p["notes"]
               and p["tp"] > 1 for p in flagged)  # fmt: skip


def test_the_flashinfer_fusion_runs_the_norms_inside_its_all_reduce(monkeypatch):
    """Under --enable-flashinfer-allreduce-fusion SGLang's all-reduce kernel adds the
    residual and applies the RMSNorm after it (layernorm.py forward_with_allreduce_fusion)
    at steps of up to 2,048 tokens: the steps are costed with ALLREDUCE_NORM_DECODE, so a
    decode step of DeepSeek-R1 at TP 8 is at least its fused norms' dispatch (two a layer,
    2 us each) shorter than the same step with them, and a prefill keeps its norms."""
    import xpusim
    import xpusim.serving.run as serving_run
    from xpusim.workloads.transformer import ALLREDUCE_NORM_DECODE

    kernels: list[tuple[str, ...]] = []
    real = serving_run.step_cost

    def spy(cfg, system, plan, formats, *args, **kwargs):
        kernels.append(formats.kernels)
        return real(cfg, system, plan, formats, *args, **kwargs)

    monkeypatch.setattr(serving_run, "step_cost", spy)

    def served():
        return xpusim.serve("deepseek-r1-0528-fp4-v2", "dgx-b200", chips=8, tp=8, ep=8,
                            engine="sglang", precision="nvfp4", kv_precision="fp8",
                            concurrency=1, requests=2, prompt=4096, gen=16,
                            allreduce_fusion=True)  # fmt: skip

    fused = served()
    assert kernels and all(ALLREDUCE_NORM_DECODE in k for k in kernels)
    kept = serving_run.replace  # the same run, its norms priced as ops of their own

    def unfused(request, **changes):
        if "kernels" in changes:
            changes["kernels"] = tuple(k for k in changes["kernels"]
                                       if k != ALLREDUCE_NORM_DECODE)  # fmt: skip
        return kept(request, **changes)

    monkeypatch.setattr(serving_run, "replace", unfused)
    plain = served()
    assert fused.tpot_s.mean < plain.tpot_s.mean - 2 * 60 * 2e-6
    assert fused.ttft_s.mean == pytest.approx(plain.ttft_s.mean, rel=1e-9)


VLLM = "vllm-custom-allreduce"


@pytest.mark.parametrize(("system", "gpus", "below"), [
    ("hgx-h200", 8, 256 * 1024), ("hgx-h200", 2, 8 << 20), ("dgx-b200", 8, 1 << 20),
])  # fmt: skip
def test_vllm_runs_its_kernel_only_below_its_size(system, gpus, below):
    """vLLM's custom all-reduce takes a tensor of fewer bytes than min(8 MiB,
    CUSTOM_ALL_REDUCE_MAX_SIZES[capability][tp]) (the table's below_bytes) and hands a larger
    one on: under it the kernel's measured time, from it what the collective costs without
    the kernel (the line, floored by every measured table)."""
    target = load_system(system)
    n = np.array([below / 2, below - 16, below, 2.0 * below])
    own = floored_seconds(target, Collective.ALL_REDUCE, n, gpus, gpus, (VLLM,))
    bare = floored_seconds(target, Collective.ALL_REDUCE, n, gpus, gpus)
    curve = engine_curve(target, Collective.ALL_REDUCE, gpus, gpus, (VLLM,))
    assert curve.below_bytes == below
    kernel = np.maximum(curve.at(n), bandwidth_bound_s(target, Collective.ALL_REDUCE, n, gpus,
                                                       gpus))  # fmt: skip
    np.testing.assert_allclose(own[:2], kernel[:2], rtol=1e-12)
    np.testing.assert_array_equal(own[2:], bare[2:])


@pytest.mark.parametrize("system", ["hgx-h200", "dgx-b200"])
def test_a_decode_all_reduce_over_8_gpus_takes_vllms_measured_kernel(system):
    """A few tokens' tensor (16 KiB) over 8 GPUs: vLLM's kernel, measured at 5.2 us (H200)
    and 8.2 us (B200), where the line's 6 steps of the assumed 2 us give 12."""
    target, n = load_system(system), np.array([16384.0])
    own = floored_seconds(target, Collective.ALL_REDUCE, n, 8, 8, (VLLM,))[0]
    assert own < 9e-6 < 12e-6 < floored_seconds(target, Collective.ALL_REDUCE, n, 8, 8)[0]


def test_a_kernel_without_a_size_bound_runs_at_every_size():
    """SGLang's and TensorRT-LLM's tables state no bound: the kernel prices every size."""
    for kernel in (SGLANG, FLASHINFER_ALLREDUCE):
        assert engine_curve(B200, Collective.ALL_REDUCE, 8, 8, (kernel,)).below_bytes == np.inf
