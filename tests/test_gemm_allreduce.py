"""TensorRT-LLM's fused GEMM + all-reduce (cost/gemm_allreduce.py): which pairs fuse, and a
pair's cost is the longer of its parts, never less than either."""

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xpusim
from xpusim.compiler.memory_plan import Footprint, place
from xpusim.compiler.partition import Plan
from xpusim.cost.gemm_allreduce import KERNEL, overlapped
from xpusim.cost.roofline import OpCosts
from xpusim.hardware.system import load_system
from xpusim.ir.dtypes import DType
from xpusim.scenarios.llm.engine import cost_phases
from xpusim.scenarios.llm.graphs import shape_graphs
from xpusim.scenarios.llm.request import Request


def _phase(kernels: tuple[str, ...], tp: int = 2):
    """Llama-2-7B's prefill of 512 tokens on tp chips of a DGX H100, its table and costs."""
    cfg = xpusim.model("llama-2-7b")
    request = Request(1, 512, 1, DType.BF16, DType.BF16, kernels=kernels)
    graphs = shape_graphs(cfg, [request], tp, 1)
    system = load_system("dgx-h100")
    placement = place(system.chip, Footprint(0.0, 0.0, 0.0))
    (prefill,) = cost_phases(graphs, np.array([0]), [system], [placement], Plan(tp=tp),
                             np.array([1]), phases=(0,))  # fmt: skip
    return prefill


def test_each_layers_o_proj_and_down_fuse_with_their_all_reduce_and_nothing_else():
    """With the kernel, every layer's two row-parallel GEMMs pair with the all-reduce after
    them (32 layers: 64 pairs); the embedding's all-reduce stays apart. Without it, none."""
    table = _phase((KERNEL,)).table
    cfg = xpusim.model("llama-2-7b")
    assert sum(n for _, _, n in table.fused) == 2 * cfg.num_layers
    gemms = {table.labels[g] for g, _, _ in table.fused}
    assert all(op.kind.value == "matmul" for op in (table.ops[g] for g, _, _ in table.fused))
    assert any("o_proj" in name for name in gemms) and any("down" in name for name in gemms)
    reduces = {a for _, a, _ in table.fused}
    assert all(table.count[a] >= 2 * cfg.num_layers for a in reduces)  # the embedding's too
    assert _phase(()).table.fused == ()
    assert _phase((KERNEL,), tp=1).table.fused == ()  # nothing to reduce on one chip


def test_fusing_takes_off_the_step_each_pairs_shorter_part_within_the_power_limit():
    """The step with the fused kernel is the unfused step less Σ min(GEMM, all-reduce) over
    the pairs, so each pair costs max(GEMM, all-reduce), at least either part alone; but an
    all-reduce row keeps the time its own energy takes at the TDP (power_s)."""
    plain, fused = _phase(()), _phase((KERNEL,))
    time, power = plain.costs.time_s[0, 0], plain.costs.power_s[0, 0]
    saved = sum(n * min(time[g], time[a]) for g, a, n in fused.table.fused)
    before, after = plain.totals("time_s")[0, 0], fused.totals("time_s")[0, 0]
    (reduce,) = {a for _, a, _ in fused.table.fused}
    n = fused.table.count[reduce]
    kept = max(time[reduce] - saved / n, power[reduce])
    assert 0 < before - after <= saved
    np.testing.assert_allclose(before - after, n * (time[reduce] - kept), rtol=1e-9)
    assert fused.totals("energy_j")[0, 0] < plain.totals("energy_j")[0, 0]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1e-3), st.floats(0, 1e-3), st.integers(1, 100)),
                min_size=1, max_size=4))
def test_a_fused_pair_is_never_cheaper_than_either_part_nor_dearer_than_both(pairs):
    """Physics: one GEMM and one all-reduce row per pair, `n` instances each; the pair's
    time after fusing is max(GEMM, all-reduce), between the longer part and their sum."""
    k = len(pairs)
    time = np.array([g for g, _, _ in pairs] + [a for _, a, _ in pairs])
    count = np.array([n for _, _, n in pairs] * 2, dtype=float)
    table = SimpleNamespace(fused=tuple((i, k + i, float(n)) for i, (_, _, n) in enumerate(pairs)),
                            count=count)
    zero = np.zeros_like(time)
    costs = OpCosts(zero, zero, zero, time.copy(), time.copy(), time * 700.0,
                    np.zeros((1, len(time))), zero)
    after = overlapped(table, costs, 700.0)
    for i, (g, a, _) in enumerate(pairs):
        pair_s = after.time_s[i] + after.time_s[k + i]
        assert max(g, a) - 1e-15 <= pair_s <= g + a + 1e-15
        np.testing.assert_allclose(pair_s, max(g, a), atol=1e-15)
    assert (after.energy_j >= -1e-12).all()


def test_serve_with_the_plugin_runs_faster_steps_and_says_so(monkeypatch):
    """serve --gemm-allreduce (a point's `gemm_allreduce`) reaches the step costs: TPOT and
    TTFT fall at the same load, and the result notes the bound it took. (Both runs without
    the all-reduce + norm fusion, which the plugin's runs go without: the test below.)"""
    import dataclasses

    from xpusim.serving.engines import engines
    from xpusim.workloads.transformer import ALLREDUCE_NORM

    profile = engines()["trtllm"]
    monkeypatch.setitem(engines(), "trtllm", dataclasses.replace(
        profile, kernels=tuple(k for k in profile.kernels if k != ALLREDUCE_NORM)))
    runs = [xpusim.serve("llama-2-7b", "dgx-h100", chips=2, tp=2, engine="trtllm", rate=5.0,
                         requests=60, gemm_allreduce=fused) for fused in (False, True)]  # fmt: skip
    plain, fused = runs
    assert fused.tpot_s.mean < plain.tpot_s.mean
    assert fused.ttft_s.mean < plain.ttft_s.mean
    assert any("gemm_allreduce_plugin" in n for n in fused.notes)
    assert not any("gemm_allreduce_plugin" in n for n in plain.notes)


def test_only_tensorrt_llm_has_the_plugin():
    """--gemm-allreduce with another engine is refused, naming the engine to give."""
    from xpusim.errors import UserError
    from xpusim.serving.options import Engine

    assert Engine(engine="trtllm", gemm_allreduce=True).gemm_allreduce
    with pytest.raises(UserError, match=r"with engine trtllm .*, got engine 'vllm'"):
        Engine(engine="vllm", gemm_allreduce=True)


def test_the_plugin_leaves_the_norms_after_the_all_reduce_unfused(monkeypatch):
    """NVIDIA's MLPerf v5.1 Llama-3.1-405B configs enable the GEMM + all-reduce fusion and
    disable TensorRT-LLM's all-reduce + norm fusion together: with --gemm-allreduce the steps
    run without ALLREDUCE_NORM, without it the trtllm profile's steps run with it."""
    import xpusim.serving.run as run
    from xpusim.workloads.transformer import ALLREDUCE_NORM

    seen: list[tuple[str, ...]] = []
    table = run._step_table

    def spy(cfg, system, plan, req, *rest, **kw):
        seen.append(req.kernels)
        return table(cfg, system, plan, req, *rest, **kw)

    monkeypatch.setattr(run, "_step_table", spy)
    for fused in (False, True):
        xpusim.serve("llama-2-7b", "dgx-h100", chips=2, tp=2, engine="trtllm", rate=5.0,
                     requests=20, gemm_allreduce=fused)  # fmt: skip
    assert ALLREDUCE_NORM in seen[0] and ALLREDUCE_NORM not in seen[-1]
