"""Multi-chip systems: collective formulas, partitioning, plan search, pipeline semantics."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xpusim
from xpusim.compiler.partition import (
    Plan,
    layers_per_stage,
    partition,
    stage_graphs,
    stage_spread,
)
from xpusim.cost.collectives import Collective, collective_time, injection_bytes_per_s
from xpusim.hardware.system import default_system, load_system, system_ids
from xpusim.ir.dtypes import DType
from xpusim.ir.op import OpKind
from xpusim.workloads.transformer import StepShape, build_step

MB = 1e6


@pytest.fixture(scope="module")
def dgx():
    return load_system("dgx-h100")


def test_every_system_loads_and_cites_its_sources():
    for system_id in system_ids():
        system = load_system(system_id)
        assert system.chip.id == system.chip_id
        assert system.levels[-1].size >= system.chips


def test_ring_all_reduce_by_hand(dgx):
    # 6 chips is not a power of two, so the ring runs: 2 (p-1)/p S/B + 2 (p-1) a
    s, b, a = 64 * MB, 18 * 25e9, 2e-6
    cost = collective_time(dgx, Collective.ALL_REDUCE, s, 6)
    assert cost.algorithm == "ring" and cost.level == "nvlink"
    assert cost.time_s == pytest.approx(2 * 5 / 6 * s / b + 2 * 5 * a)


def test_tree_wins_small_all_reduce_on_eight(dgx):
    s, b, a = 16e3, 18 * 25e9, 2e-6
    cost = collective_time(dgx, Collective.ALL_REDUCE, s, 8)
    assert cost.algorithm == "tree"
    assert cost.time_s == pytest.approx(2 * 7 / 8 * s / b + 2 * 3 * a)


def test_all_gather_reduce_scatter_send_and_all_to_all_by_hand(dgx):
    s, b, a = 8 * MB, 18 * 25e9, 2e-6
    assert collective_time(dgx, Collective.ALL_GATHER, s, 6).time_s == pytest.approx(
        5 / 6 * s / b + 5 * a
    )
    assert collective_time(dgx, Collective.REDUCE_SCATTER, s, 6).time_s == pytest.approx(
        5 / 6 * s / b + 5 * a
    )
    assert collective_time(dgx, Collective.SEND_RECV, s, 2).time_s == pytest.approx(s / b + a)
    assert collective_time(dgx, Collective.ALL_TO_ALL, s, 8).time_s == pytest.approx(
        7 / 8 * s / b + 7 * a
    )


def test_groups_beyond_a_node_use_the_slower_fabric(dgx):
    inside = collective_time(dgx, Collective.ALL_REDUCE, 64 * MB, 8)
    across = collective_time(dgx.with_chips(16), Collective.ALL_REDUCE, 64 * MB, 16)
    assert across.level == "infiniband" and across.time_s > 5 * inside.time_s


def test_torus_uses_two_links_per_spanned_dimension():
    """On the pod's wrapped axes each collective pass takes d // 2 hops an axis (the
    scaling book's bidirectional ring; tests/test_torus_collectives.py has the lines)."""
    pod = load_system("tpu-v4-pod")
    s, link, a = 64 * MB, 45e9, 1e-6
    one_dim = collective_time(pod, Collective.ALL_REDUCE, s, 16)
    assert one_dim.algorithm == "ring"
    assert one_dim.time_s == pytest.approx(2 * 15 / 16 * s / (2 * link) + 2 * 8 * a)
    three_dims = collective_time(pod, Collective.ALL_REDUCE, s, 4096)
    assert three_dims.algorithm == "torus 3D (16x16x16)"  # a ring per dimension in turn
    assert three_dims.time_s == pytest.approx(2 * 4095 / 4096 * s / (6 * link) + 2 * 24 * a)
    # all-to-all on a ring of 16 pays a mean of 16/4 hops of bytes, 8 hops of latency
    assert collective_time(pod, Collective.ALL_TO_ALL, s, 16).time_s == pytest.approx(
        15 / 16 * s / (2 * link) * 4 + 8 * a
    )


def test_a_torus_slice_is_near_a_cube_and_its_groups_span_its_dimensions():
    """Cloud TPU's v4 slices: 64 chips are 4x4x4 and 128 are 4x4x8, so 16 chips of a
    64-chip slice are 4 x 4: an all-reduce runs a ring on each of two dimensions (four
    links, 2 x (3 + 3) steps) where 16 chips along one dimension of the whole pod run one
    ring of 16 (two links, 2 x 15 steps)."""
    pod = load_system("tpu-v4-pod")
    assert pod.with_chips(64).levels[0].dims == (4, 4, 4)
    assert pod.with_chips(128).levels[0].dims == (4, 4, 8)
    assert pod.with_chips(96).levels[0].dims == (4, 4, 6)
    assert pod.with_chips(4096).levels[0].dims == (16, 16, 16)
    assert pod.with_chips(17 * 2).levels[0].dims == (16, 16, 16)  # no 17-wide sub-torus
    level = pod.with_chips(64).levels[0]
    assert level.group_shape(16) == (4, 4) and level.group_shape(8) == (4, 2)
    assert level.group_shape(6) == () and level.group_shape(64) == (4, 4, 4)
    s, link, a = 64 * MB, 45e9, 1e-6
    sliced = collective_time(pod.with_chips(64), Collective.ALL_REDUCE, s, 16)
    assert sliced.algorithm == "torus 2D (4x4)"
    assert sliced.time_s == pytest.approx(2 * 15 / 16 * s / (4 * link) + 2 * 4 * a)
    assert sliced.time_s < collective_time(pod, Collective.ALL_REDUCE, s, 16).time_s
    # a group that is no sub-torus (6 chips) keeps a ring over contiguous chips
    assert collective_time(pod.with_chips(64), Collective.ALL_REDUCE, s, 6).algorithm == "ring"


@pytest.mark.parametrize("chips", [8, 16, 64, 128, 512, 4096])
@pytest.mark.parametrize("kind", [Collective.ALL_REDUCE, Collective.ALL_GATHER])
def test_dimension_rings_never_lose_to_one_ring(chips, kind):
    """The per-dimension schedule is chosen only where it is faster: for every group a
    slice holds, at small and large sizes, it is never slower than a ring of the group."""
    system = load_system("tpu-v4-pod").with_chips(chips)
    level = system.levels[0]
    for group in (2, 4, 8, 16, 32, 64):
        if group > chips:
            continue
        for nbytes in (4e3, 64 * MB):
            got = collective_time(system, kind, nbytes, group)
            ring = (2 if kind is Collective.ALL_REDUCE else 1) * (group - 1)
            ring_s = ring * level.latency_s.value + nbytes * (ring / group) / (
                injection_bytes_per_s(level, group))
            assert got.time_s <= ring_s * (1 + 1e-12)


def test_chips_without_a_fabric_talk_over_the_host():
    system = default_system(xpusim.chip("mtia-v1"), 4)
    assert system.levels[0].bandwidth_bytes_per_s.value == 16e9


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_partitioning_conserves_matrix_flops(tp):
    cfg = xpusim.model("llama-2-70b")
    graph = build_step(cfg, StepShape(2, 64, 64), DType.BF16)
    rank = partition(graph, Plan(tp=tp, pp=1))
    assert rank.matrix_flops * tp == pytest.approx(graph.matrix_flops, rel=1e-12)
    collectives = [op for op in rank if op.kind is OpKind.COLLECTIVE]
    # per layer two all-reduces, plus the embedding's all-reduce and the logits' all-gather
    assert len(collectives) == (2 * cfg.num_layers + 2 if tp > 1 else 0)


@pytest.mark.parametrize("model", ["llama-2-7b", "mixtral-8x7b", "gpt-j-6b"])
@pytest.mark.parametrize("training", [False, True])
def test_one_rank_partition_is_the_graph_itself(model, training):
    """partition() skips the sharder at tp = ep = 1; the sharder would give back the very
    same ops (what makes the shortcut safe), with or without sequence parallelism."""
    from xpusim.compiler.partition import _Sharder

    graph = build_step(xpusim.model(model), StepShape(2, 64, 64), DType.BF16, training=training)
    for sequence_parallel in (False, True):
        sharder = _Sharder(Plan(), sequence_parallel)
        sharded = [new for op in graph.ops for new in sharder(op)]
        assert sharded == graph.ops
    assert partition(graph, Plan()).ops == graph.ops


def test_pipeline_stages_add_up_to_the_rank_and_send_between_them():
    cfg = xpusim.model("llama-2-7b")
    rank = partition(build_step(cfg, StepShape(1, 1, 100), DType.BF16), Plan(tp=2, pp=4))
    stages = stage_graphs(rank, cfg.num_layers, 4)
    compute = [op for g in stages for op in g if op.kind is not OpKind.COLLECTIVE]
    assert sum(op.flops for op in compute) == pytest.approx(
        sum(op.flops for op in rank if op.kind is not OpKind.COLLECTIVE)
    )
    sends = [op for g in stages for op in g if op.attr("collective") == "send_recv"]
    assert len(sends) == 3


def test_moe_expert_parallel_holds_fewer_experts_and_adds_all_to_all():
    """Experts spread over the tp chips (engines' --ep); tokens reach them by all-to-all
    under attention data parallelism (tests/test_moe_layout.py has the other forms)."""
    cfg = xpusim.model("mixtral-8x7b")
    graph = build_step(cfg, StepShape(8, 256, 256), DType.BF16)
    rank = partition(graph, Plan(tp=4, ep=4, dp_attention=True))
    experts = [op for op in rank if op.name.endswith("experts.gate_up")]
    assert experts[0].inputs[1].shape[0] == 2  # 8 experts over 4 chips
    assert sum(op.attr("collective") == "all_to_all" for op in rank) == 2 * cfg.num_layers


def test_uneven_stages_give_the_extra_layers_to_inner_stages():
    counts = layers_per_stage(80, 72)
    assert sum(counts) == 80 and max(counts) == 2 and counts[0] == counts[-1] == 1


def test_a_run_of_layers_spreads_over_the_stages_that_hold_them():
    counts = layers_per_stage(10, 4)  # (2, 3, 3, 2): contiguous runs
    assert counts == (2, 3, 3, 2)
    assert stage_spread(10, 4, 0, 10).tolist() == list(counts)
    assert stage_spread(10, 4, 1, 5).tolist() == [1, 3, 1, 0]
    assert stage_spread(10, 4, 9).tolist() == [0, 0, 0, 1]
    assert stage_spread(10**9, 8, 0, 10**9).sum() == 10**9  # no loop over layers


def test_one_chip_holds_the_configs_parameter_count():
    """Per-chip weights count what the config counts, for every built-in transformer: the
    biases, a state-space mixer, an encoder-decoder's encoder and cross-attention (Mamba
    was once charged 1.6-1.9x its parameters and T5 without its encoder)."""
    from xpusim.compiler.partition import weights_per_chip_bytes
    from xpusim.workloads.resolve import load_model
    from xpusim.workloads.transformer_config import TransformerConfig
    from xpusim.workloads.zoo import built_ids

    configs = [c for c in map(load_model, built_ids()) if isinstance(c, TransformerConfig)]
    assert len(configs) > 60
    for cfg in configs:
        assert sum(weights_per_chip_bytes(cfg, Plan(), 1.0)) == cfg.param_count, cfg.name
        if not cfg.ssm:  # tensor parallelism splits what it splits, never adds
            assert sum(weights_per_chip_bytes(cfg, Plan(tp=2), 1.0)) < cfg.param_count


def test_memory_per_chip_falls_with_tp_and_pp():
    def per_chip(**plan):
        r = xpusim.simulate("llama-2-70b", "h100-sxm", precision="fp16", chips=8, **plan)
        return r.per_chip_memory_bytes.weights

    assert per_chip(tp=8) < per_chip(tp=4, dp=2) < per_chip(tp=2, dp=4)
    assert per_chip(pp=8) < per_chip(pp=4, dp=2)


def test_70b_fits_eight_h100s_but_not_one():
    eight = xpusim.simulate("llama-2-70b", "h100-sxm", precision="fp16", chips=8, tp=8)
    assert eight.fits and eight.plan == {"tp": 8, "pp": 1, "dp": 1, "ep": 1}
    one = xpusim.simulate("llama-2-70b", "h100-sxm", precision="fp16", chips=1)
    assert not one.fits and one.min_chips >= 2


def test_groq_serves_70b_from_576_chips():
    r = xpusim.simulate("llama-2-70b", "groq-lpu", chips=576, precision="int8")
    assert r.fits and r.chips == 576 and r.system == "groq-system"
    assert r.tokens_per_s_per_user > 0 and r.ttft_s > 0
    search = r.plan_search
    # Groq's system serves as a pure pipeline (its deployment): only the one replica of
    # 576 chips fits, so there is no runner-up; the replicas of fewer chips do not fit
    assert search["chosen"] == r.plan == {"tp": 1, "pp": 16, "dp": 1, "ep": 1, "chain": 36}
    assert search["feasible"] == 1 < search["candidates"]


def test_plan_search_never_chooses_a_plan_that_does_not_fit():
    r = xpusim.simulate("llama-2-70b", "groq-lpu", chips=576, precision="int8",
                        objective="throughput")  # fmt: skip
    assert r.fits


@pytest.mark.parametrize(("chip", "precision", "tp", "depths"), [
    ("h100-sxm", "fp16", 1, (4, 8)),
    ("groq-lpu", "int8", 16, (40, 80)),
])  # fmt: skip
def test_pipelining_adds_throughput_not_per_token_speed(chip, precision, tp, depths):
    """Going deeper cuts TPOT at batch 1 by at most 10%, but aggregate tokens/s rises."""
    shallow, deep = (
        xpusim.simulate("llama-2-70b", chip, precision=precision, chips=tp * pp, tp=tp, pp=pp)
        for pp in depths
    )
    assert shallow.fits and deep.fits
    assert deep.tpot_s >= 0.9 * shallow.tpot_s
    batch = 64 if chip == "h100-sxm" else 1
    busy = [
        xpusim.simulate(
            "llama-2-70b", chip, precision=precision, chips=tp * pp, tp=tp, pp=pp, batch=batch
        )
        for pp in depths
    ]
    assert busy[1].tokens_per_s > busy[0].tokens_per_s


def test_tensor_parallelism_cuts_tpot_until_collectives_dominate():
    tpots = [
        xpusim.simulate("llama-2-70b", "h100-sxm", precision="fp16", chips=tp, tp=tp).tpot_s
        for tp in (2, 4, 8)
    ]
    assert tpots[0] > tpots[1] > tpots[2]
    comm = xpusim.simulate("llama-2-70b", "h100-sxm", precision="fp16", chips=8, tp=8)
    assert 0 < comm.comm_share < 1


@pytest.mark.parametrize(("model", "target", "options"), [
    ("llama-2-70b", "dgx-h100", {"precision": "fp16", "tp": 8}),
    # a prefill already slowed to the power limit: hiding its all-reduces must not push
    # the link traffic's energy past the TDP (it did: 197 W of 192 W)
    ("llama-3-70b", "tpu-v4", {"chips": 64, "tp": 16, "batch": 32, "prompt": 2048}),
])  # fmt: skip
def test_overlap_never_slows_and_power_stays_under_tdp(model, target, options):
    serial = xpusim.simulate(model, target, **options)
    hidden = xpusim.simulate(model, target, **options, overlap=True)
    assert hidden.tpot_s <= serial.tpot_s and hidden.ttft_s <= serial.ttft_s
    for r in (serial, hidden):
        assert r.avg_power_w <= r.tdp_w * (1 + 1e-9)


@settings(max_examples=20, deadline=None)
@given(
    chip=st.sampled_from(["h100-sxm", "tpu-v4", "mi300x", "mtia-v1", "a100-sxm-80gb"]),
    tp=st.sampled_from([2, 4, 8]),
    batch=st.integers(1, 64),
    prompt=st.sampled_from([128, 1024, 4096]),
)
def test_overlap_keeps_average_power_under_tdp(chip, tp, batch, prompt):
    """Property: whatever the load, hiding collectives never lifts average power past the
    TDP, and never slows a run."""
    options = {"chips": tp, "tp": tp, "batch": batch, "prompt": prompt, "gen": 16}
    serial = xpusim.simulate("llama-2-13b", chip, **options)
    hidden = xpusim.simulate("llama-2-13b", chip, **options, overlap=True)
    assert hidden.latency_s <= serial.latency_s * (1 + 1e-12)
    assert hidden.avg_power_w <= hidden.tdp_w * (1 + 1e-9)


@pytest.mark.parametrize(("target", "options"), [
    ("dgx-h100", {"tp": 2, "pp": 4}),
    ("groq-lpu", {"chips": 576, "precision": "int8"}),
])  # fmt: skip
def test_op_shares_with_the_pipeline_hops_make_up_the_phase(target, options):
    """--ops accounts for a token's whole trip: every op's share and the pipeline's hops."""
    r = xpusim.simulate("llama-2-70b", target, **options)
    assert r.plan["pp"] > 1
    for phase in ("prefill", "decode"):
        ops = [op for op in r.ops if op.phase == phase]
        sends = [op for op in ops if op.name == "pipeline.send"]
        hops = r.plan["pp"] * r.plan.get("chain", 1) - 1  # one between consecutive chips
        assert len(sends) == 1 and sends[0].count == hops and sends[0].share > 0
        assert sum(op.share for op in ops) == pytest.approx(1.0, rel=1e-9)


def test_data_parallel_replicas_multiply_throughput():
    one = xpusim.simulate("llama-2-7b", "h100-sxm", precision="fp16", chips=1)
    four = xpusim.simulate("llama-2-7b", "h100-sxm", precision="fp16", chips=4, dp=4)
    assert four.tokens_per_s == pytest.approx(4 * one.tokens_per_s, rel=1e-9)
    assert four.tpot_s == pytest.approx(one.tpot_s, rel=1e-9)
    assert math.isclose(four.joules_per_token, one.joules_per_token, rel_tol=1e-9)
