"""An engine's own kernel chains timed per call (cost/op_times.py, kernel_tables/op_time/):
SGLang 0.4's DeepSeek routing takes its measured 36 us a layer on an H200, only in a run of
that engine on that chip, and never less than the op's roofline."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpusim.compiler.memory_plan import Footprint, place
from xpusim.cost.op_table import op_table
from xpusim.cost.op_times import OP_TIME_DIR, _entry, op_time_s, op_times
from xpusim.cost.roofline import HardwareArrays, evaluate
from xpusim.errors import UserError
from xpusim.hardware.catalog import load_chip
from xpusim.ir.dtypes import DType
from xpusim.ir.graph import Graph
from xpusim.ir.op import Op, OpKind
from xpusim.ir.tensor import Tensor
from xpusim.serving.engines import engines
from xpusim.workloads.transformer import SOFTMAX_FLOPS_PER_ELEMENT

ROUTING = "sglang-torch-routing"


def _routing(tokens: int, experts: int = 256, kernels: tuple[str, ...] = (),
             name: str = "layers.3.router_topk", groups: int = 8) -> Op:  # fmt: skip
    """A router's top-k over `experts` logits of `tokens`, as the layer builder emits it
    (`groups`: DeepSeek's group-limited router, n_group; 0: a plain top-k)."""
    attrs = (("flops_per_element", SOFTMAX_FLOPS_PER_ELEMENT),
             *((("expert_groups", groups),) if groups else ()),
             *((("kernels", kernels),) if kernels else ()))  # fmt: skip
    return Op(OpKind.SOFTMAX, name, (Tensor("logits", (tokens, experts), DType.BF16),),
              (Tensor("out", (tokens, experts), DType.BF16),), attrs)  # fmt: skip


def _time_s(op: Op, chip_id: str = "h200-sxm") -> float:
    chip = load_chip(chip_id)
    table = op_table(Graph("one", [op]))
    nbytes = sum(t.nbytes for t in (*op.inputs, *op.outputs))
    return float(evaluate(table, HardwareArrays.build(chip, table),
                          place(chip, Footprint(0.0, 0.0, nbytes))).time_s[0])  # fmt: skip


def test_sglang_04s_routing_takes_its_measured_time_on_an_h200():
    own, plain = _time_s(_routing(4, kernels=(ROUTING,))), _time_s(_routing(4))
    assert own == pytest.approx(36e-6, rel=0.02)
    assert plain < 10e-6  # one dispatch and a few KB: what every other engine's op costs


def test_the_measurement_prices_only_its_engine_its_op_and_its_chips():
    stamped = _routing(4, kernels=(ROUTING,))
    assert op_time_s("h200-sxm", stamped) == 36e-6
    assert op_time_s("h200-sxm[hbm_bw=2x]", stamped) == 36e-6  # a what-if copy: its base's
    assert op_time_s("mi300x", stamped) == 0.0  # timed on an H200 only
    assert op_time_s("h200-sxm", _routing(4)) == 0.0  # another engine's op
    assert op_time_s("h200-sxm", _routing(4, kernels=("sglang-triton-w8a8-block",))) == 0.0
    assert op_time_s("h200-sxm", _routing(4, kernels=(ROUTING,), name="layers.3.router")) == 0.0
    # SGLang ran the chain for DeepSeek's group-limited routers; a plain softmax top-k
    # (Mixtral's, Qwen's) was one fused kernel, and keeps its cost
    assert op_time_s("h200-sxm", _routing(4, kernels=(ROUTING,), groups=1)) == 36e-6
    assert op_time_s("h200-sxm", _routing(4, kernels=(ROUTING,), groups=0)) == 0.0
    assert _time_s(_routing(4, kernels=(ROUTING,)), "mi300x") == _time_s(_routing(4), "mi300x")


@settings(max_examples=40, deadline=None)
@given(tokens=st.integers(1, 1 << 20), experts=st.sampled_from([64, 128, 256, 512]))
def test_the_routing_is_never_below_the_measurement_or_the_roofline(tokens, experts):
    """The measured time raises the op's dispatch overhead; its work stays on top, so a
    long prefill's routing still costs at least its bytes at the chip's bandwidth."""
    op = _routing(tokens, experts, (ROUTING,))
    own, plain = _time_s(op), _time_s(_routing(tokens, experts))
    chip = load_chip("h200-sxm")
    hbm = max(level.bandwidth_bytes_per_s.value for level in chip.memory
              if level.kind.holds_tensors)  # fmt: skip
    assert own >= 36e-6 and own >= plain
    assert own >= sum(t.nbytes for t in (*op.inputs, *op.outputs)) / hbm * (1 - 1e-9)


def test_every_measurement_names_an_engines_kernel_and_a_source():
    listed = {k for profile in engines().values() for k in profile.kernels}
    for t in op_times():
        assert t.kernel in listed and t.url.startswith("https://") and t.source, t.name
        assert t.measured_on in t.chips, t.name
    assert list(OP_TIME_DIR.glob("*.toml"))


def test_the_builder_marks_group_limited_routers_from_the_models_n_group():
    from xpusim.workloads.resolve import load_model
    from xpusim.workloads.transformer import StepShape, build_step

    def groups(model: str) -> set:
        cfg = load_model(model)
        graph = build_step(cfg, StepShape(1, 1, 64, decode=True), DType.BF16, compact=True)
        return {op.attr("expert_groups") for op in graph.ops if op.name.endswith("router_topk")}

    assert groups("deepseek-r1") == {8}  # n_group 8 of DeepSeek-V3's config
    assert groups("deepseek-v2-lite") == {1}  # one group, still the grouped router
    assert groups("qwen3-30b-a3b") == {None}  # no n_group: a plain top-k


def test_a_bad_table_is_refused_naming_its_field():
    good = dataclasses.asdict(op_times()[0]) | {"chips": ["h200-sxm"]}
    with pytest.raises(UserError, match="h200-sxn"):
        _entry(good | {"chips": ["h200-sxn"]}, "t.toml table 0")
    with pytest.raises(UserError, match="grouped_router"):
        _entry(good | {"grouped_router": "yes"}, "t.toml table 0")
    with pytest.raises(UserError, match="time_s"):
        _entry(good | {"time_s": 0.0}, "t.toml table 0")
    with pytest.raises(UserError, match="missing \\['op'\\]"):
        _entry({k: v for k, v in good.items() if k != "op"}, "t.toml table 0")


def test_serve_runs_sglang_04s_routing_on_every_moe_layer():
    """One client of SGLang 0.4 on 8 H200: each decode step gains 58 MoE layers' routing at
    36 us against xpusim's one dispatch, about 2 ms."""
    import xpusim

    def tpot_s() -> float:
        return xpusim.serve("deepseek-r1", "h200-sxm", chips=8, tp=8, precision="fp8",
                            kv_precision="bf16", engine="sglang-0.4", concurrency=1,
                            requests=1, prompt=512, gen=16).tpot_s.mean  # fmt: skip

    own = tpot_s()
    profile = engines()["sglang-0.4"]
    plain = dataclasses.replace(profile, kernels=tuple(k for k in profile.kernels
                                                       if k != ROUTING))  # fmt: skip
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(engines(), "sglang-0.4", plain)
        before = tpot_s()
    assert 58 * 30e-6 < own - before < 58 * 36e-6


def test_xpusim_chip_lists_the_measurement_on_its_chips_alone():
    from xpusim.report.tables import chip_table

    def listed(chip_id: str) -> list[str]:
        return [str(c).replace("\n", "") for c in chip_table(load_chip(chip_id)).columns[0]._cells]

    assert "op_time.router_topk@sglang-torch-routing" in listed("h200-sxm")
    assert not any(c.startswith("op_time.") for c in listed("mi300x"))
