"""The training scenario: the issue's acceptance checks, physics floors and the 1F1B timeline."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xpusim
from xpusim.cli import main
from xpusim.errors import UserError
from xpusim.scenarios.training import in_flight, model_flops_per_token, simulate_training
from xpusim.scenarios.training_step import _fill_drain_s
from xpusim.workloads.resolve import load_model

SPLIT = ("weights", "gradients", "optimizer_state", "activations", "total", "capacity")


def train(model="llama-2-7b", chip="h100-sxm", **options):
    return xpusim.simulate(model, chip, mode="training", **options)


def test_llama_7b_on_8_h100s_fits_with_step_time_mfu_and_memory_split():
    r = train(chips=8, batch=8, prompt=4096)
    assert r.fits and r.mode == "training"
    assert set(SPLIT) <= set(r.to_dict()["memory_bytes"])
    chip = r.per_chip_memory_bytes
    assert chip.total <= chip.capacity
    assert chip.total == pytest.approx(
        chip.weights + chip.gradients + chip.optimizer_state + chip.activations
    )
    floor = r.model_flops_per_step / (8 * 989.5e12)  # model FLOPs at peak on every chip
    assert r.step_time_s > floor / 0.8  # no better than the matmul efficiency allows
    assert 0.3 < r.mfu < 0.8 and r.hfu <= 1
    assert r.tokens_per_s == pytest.approx(8 * 4096 / r.step_time_s)
    assert sum(r.time_breakdown_s.values()) == pytest.approx(r.step_time_s)
    assert r.plan_search["feasible"] >= 1


def test_mtia_v1_says_where_it_falls_short_for_a_7b_model():
    r = train(chip="mtia-v1", batch=8, prompt=2048)
    assert not r.fits
    assert r.limits[0].startswith("memory:") and "16 B per parameter" in r.limits[0]
    assert r.min_chips == 2  # 6.74B x 16 B = 108 GB of state over 64 GB chips
    assert any(line.startswith("compute:") and "51.2 TFLOPS" in line for line in r.limits)
    four = train(chip="mtia-v1", chips=4, batch=8, prompt=2048, zero=3)
    assert four.fits
    # no chip-to-chip fabric: tensor parallelism runs over the host link (PCIe), which the
    # step pays for; at LPDDR5's measured 40% the memory-bound compute still takes most of it
    assert four.time_breakdown_s["tensor_parallel_comm"] > 0
    assert {c["level"] for c in four.collectives if c["group"] == "tp"} == {"host"}
    assert any(line.startswith("compute:") and "bound by memory" in line for line in four.limits)


def test_adam_state_is_16_bytes_per_parameter_and_zero_shards_it(llama7b):
    state = [train(chips=8, dp=8, batch=8, prompt=512, zero=z).per_chip_memory_bytes
             for z in range(4)]  # fmt: skip
    params = llama7b.param_count
    assert state[0].weights + state[0].gradients + state[0].optimizer_state == 16 * params
    assert state[1].optimizer_state == pytest.approx(12 * params / 8)
    assert state[2].gradients == pytest.approx(2 * params / 8)
    assert state[3].weights == pytest.approx(2 * params / 8)


def test_recomputation_trades_time_for_memory():
    runs = {rc: train(batch=1, prompt=1024, recompute=rc) for rc in ("none", "selective", "full")}
    act = {rc: r.per_chip_memory_bytes.activations for rc, r in runs.items()}
    assert act["full"] < act["selective"] < act["none"]
    assert runs["full"].step_time_s > runs["none"].step_time_s
    assert runs["full"].hfu > runs["full"].mfu  # recomputed FLOPs count as hardware FLOPs
    assert (
        runs["full"].time_breakdown_s["recompute"] > 0 == runs["none"].time_breakdown_s["recompute"]
    )


@pytest.mark.parametrize(("model", "chip", "chips"), [
    ("llama-2-7b", "tpu-v4", 64), ("llama-2-70b", "tpu-v4", 64), ("llama-2-7b", "h100-sxm", 8),
])  # fmt: skip
def test_overlap_never_slows_a_step_and_power_stays_under_tdp(model, chip, chips):
    """Hidden collectives shorten the step; the static power of the hidden time is counted
    once (it was counted in both overlapped ops: 227 W of TPU v4's 192 W)."""
    serial = train(model, chip, chips=chips)
    hidden = train(model, chip, chips=chips, overlap=True)
    assert hidden.step_time_s <= serial.step_time_s
    for r in (serial, hidden):
        assert r.avg_power_w <= r.tdp_w * (1 + 1e-9)
        assert sum(r.time_breakdown_s.values()) == pytest.approx(r.step_time_s)


@pytest.mark.parametrize(("model", "chip", "chips", "batch"), [
    ("llama-2-70b", "h100-sxm", 64, 64),  # some plans fit, some do not
    ("llama-2-70b", "h100-sxm", 8, 8),  # none fits: ranked by memory
    ("llama-2-7b", "tpu-v4", 16, 16),
])  # fmt: skip
def test_the_search_chooses_as_costing_every_plan_would(model, chip, chips, batch):
    """The search costs the step of only the plans that fit (and the runner-up): its choice
    and runner-up are those of every candidate costed in full and ranked."""
    from xpusim.scenarios.llm.plans import candidate_plans
    from xpusim.scenarios.training import _score

    cfg = load_model(model)
    found = train(cfg, chip, chips=chips, batch=batch)
    every = []
    for plan in candidate_plans(cfg, chips):
        try:
            every.append(train(cfg, chip, chips=chips, batch=batch, tp=plan.tp, pp=plan.pp,
                               dp=plan.dp, ep=plan.ep))  # fmt: skip
        except UserError:
            continue
    every.sort(key=_score)
    search = found.plan_search
    assert found.plan == every[0].plan and found.step_time_s == every[0].step_time_s
    assert search["runner_up"]["plan"] == every[1].plan
    assert search["runner_up"]["step_time_s"] == every[1].step_time_s
    assert search["feasible"] == sum(r.fits for r in every)


def test_1f1b_bubble_is_pp_minus_1_slots():
    """Four even stages (32 layers) and eight microbatches: the step is 8 + 3 slots."""
    r = train(chips=4, pp=4, batch=8, prompt=512)
    assert r.microbatches == 8 and r.micro_batch == 1
    work = (
        r.step_time_s - r.time_breakdown_s["optimizer"] - r.time_breakdown_s["data_parallel_comm"]
    )
    assert r.time_breakdown_s["pipeline_bubble"] / work == pytest.approx(3 / 11, rel=0.15)


def test_interleaved_1f1b_divides_the_bubble_by_the_chunks_per_rank():
    """Narayanan et al. 2021 (section 2.2.2), the ratio the Llama 3 paper gives for its
    schedule: (pp - 1) / (v m); each microbatch is sent v times as often."""
    plain, interleaved = (train(chips=4, pp=4, batch=8, prompt=512, virtual_stages=v)
                          for v in (1, 2))  # fmt: skip
    assert (plain.virtual_stages, interleaved.virtual_stages) == (1, 2)
    bubble = {v: r.time_breakdown_s["pipeline_bubble"] for v, r in ((1, plain), (2, interleaved))}
    assert bubble[2] == pytest.approx(bubble[1] / 2, rel=0.1)
    sends = {v: r.time_breakdown_s["pipeline_sends"] for v, r in ((1, plain), (2, interleaved))}
    assert sends[2] == pytest.approx(2 * sends[1])
    assert interleaved.step_time_s < plain.step_time_s
    assert any("(1.5 of 9.5 microbatch slots)" in line for line in interleaved.limits)


@given(st.lists(st.floats(0.01, 10.0), min_size=1, max_size=16), st.integers(1, 8))
def test_fill_and_drain_is_the_slowest_rank_plus_a_chunk_of_each_other(per_micro, v):
    """Between the slowest rank's passes and all ranks' (plain 1F1B), falling with v."""
    times = np.array(per_micro)
    fill = _fill_drain_s(times, v)
    assert times.max() * (1 - 1e-12) <= fill <= times.sum() * (1 + 1e-12)
    assert fill <= _fill_drain_s(times, max(v - 1, 1)) * (1 + 1e-12)
    if v == 1:
        assert fill == times.sum()


def test_interleaved_warm_up_holds_korthikantis_first_stage_stash():
    """Megatron-LM's interleaved warm-up, 2 (pp - s - 1) + (v - 1) pp chunk passes of 1/v
    of a rank each (plus the one in flight): on the first stage pp (1 + (pp - 1) / (pp v))
    microbatches' stash (Korthikanti et al. 2022, section 4.2.3); plain 1F1B pp - s."""
    assert [in_flight(4, s, 8) for s in range(4)] == [4, 3, 2, 1]
    assert in_flight(16, 0, 32, 8) == pytest.approx(16 * (1 + 15 / (16 * 8)))
    assert in_flight(4, 0, 2, 2) == 2  # never more microbatches than the step runs
    plain, interleaved = (train(chips=4, pp=4, batch=8, prompt=512, virtual_stages=v)
                          for v in (1, 2))  # fmt: skip
    assert (interleaved.per_chip_memory_bytes.activations
            > plain.per_chip_memory_bytes.activations)


def test_sequence_parallel_sends_each_ranks_shard_between_stages():
    """With sequence parallelism a stage boundary's hidden state is split over the tp ranks,
    each sending its 1/tp (Korthikanti et al. 2022, section 4.2.2)."""
    whole, shard = (train(chips=8, tp=2, pp=4, batch=8, prompt=1024, sequence_parallel=sp)
                    for sp in (False, True))  # fmt: skip
    assert (shard.time_breakdown_s["pipeline_sends"]
            < whole.time_breakdown_s["pipeline_sends"] / 1.5)


def test_explicit_transposes_cost_time_on_mtia():
    r = train(chip="mtia-v1", batch=1, prompt=512, recompute="full")
    transposes = [op for op in r.ops if op.kind == "transpose"]
    assert transposes and all(op.phase == "backward" for op in transposes)
    assert not [op for op in train(batch=1, prompt=512).ops if op.kind == "transpose"]


def test_model_flops_follow_palm_appendix_b():
    palm = load_model("palm-540b")
    per_token = model_flops_per_token(palm, 2048)
    assert per_token == 6 * palm.param_count + 12 * 118 * 48 * 256 * 2048
    # PaLM's own check: 238.3K tokens/s on 6144 chips of 275 TFLOPS is 46.2% MFU
    assert 238.3e3 * per_token / (6144 * 275e12) == pytest.approx(0.462, abs=0.001)


@pytest.mark.parametrize(("model", "chip", "setup"), [
    ("palm-540b", "tpu-v4-palm", dict(chips=6144, tp=12, dp=512, batch=2048, prompt=2048,
                                      recompute="full", zero=3, sequence_parallel=True)),
    ("megatron-530b", "a100-sxm-80gb", dict(chips=2520, tp=8, pp=35, dp=9, batch=2520,
                                             prompt=2048, recompute="full")),
    ("llama-3-405b", "h100-sxm", dict(chips=8192, tp=8, pp=16, dp=64, batch=2048, prompt=8192,
                                      recompute="selective", zero=1, sequence_parallel=True)),
])  # fmt: skip
def test_published_training_runs_are_expressible_and_fit(model, chip, setup):
    r = simulate_training(load_model(model), xpusim.target(chip), precision="bf16", **setup)
    assert r.fits, r.reason
    assert 0.2 < r.mfu < 0.7


def test_training_options_are_checked():
    with pytest.raises(UserError, match="bf16, fp16 or fp32"):
        train(precision="int8")
    with pytest.raises(UserError, match="optimizer"):
        train(optimizer="lion")
    with pytest.raises(UserError, match="microbatches"):
        train(chips=2, dp=2, batch=4, microbatches=3)
    with pytest.raises(UserError, match="--gen"):
        train(gen=16)
    with pytest.raises(UserError, match="not modelled"):
        train("mixtral-8x7b", chips=2, tp=2, batch=2, prompt=64)
    with pytest.raises(UserError, match="--pp > 1"):
        train(chips=2, dp=2, batch=4, virtual_stages=2)
    with pytest.raises(UserError, match="at most 8 per rank"):
        train(chips=4, pp=4, batch=8, virtual_stages=9)


def test_cli_training_json_and_compare(capsys):
    main(["run", "llama-2-7b", "--mode", "training", "--chip", "h100-sxm", "--chips", "8",
          "--batch", "8", "--prompt", "4096", "--json"])  # fmt: skip
    d = json.loads(capsys.readouterr().out)
    for key in ("step_time_s", "tokens_per_s", "mfu", "fits", "reason", "min_chips"):
        assert key in d
    assert set(SPLIT) <= set(d["memory_bytes"]) and d["fits"]
    main(["compare", "llama-2-7b", "--mode", "training", "--chip", "mtia-v1", "--chip", "tpu-v4",
          "--batch", "2", "--prompt", "512"])  # fmt: skip
    out = capsys.readouterr().out
    assert "where the step goes" in out and "memory:" in out


def test_gradient_sync_runs_level_by_level_across_pods():
    """PaLM's 512 data-parallel replicas: 256 in each pod on ICI, then the two pods over
    the datacenter network with 1/256 of the bytes, far cheaper than all of it over DCN."""
    from xpusim.cost.collectives import Collective, collective_time, hierarchical_time

    system = xpusim.system("tpu-v4-palm")
    nbytes = 90e9  # one tensor-parallel rank's 16-bit gradients of PaLM 540B (540e9 x 2 / 12)
    levels = hierarchical_time(system, Collective.ALL_REDUCE, nbytes, 512, stride=12)
    assert "256 on ici" in levels.algorithm and "2 on dcn" in levels.algorithm
    inside = collective_time(system, Collective.ALL_REDUCE, nbytes, 256, 3072)
    across = collective_time(system, Collective.ALL_REDUCE, nbytes / 256, 2, 6144)
    assert levels.time_s == pytest.approx(inside.time_s + across.time_s)
    flat = collective_time(system, Collective.ALL_REDUCE, nbytes, 512, 6144)
    assert levels.time_s < flat.time_s / 10
    dgx = xpusim.system("dgx-h100").with_chips(64)  # tp 8 fills a node: one level, flat
    one = hierarchical_time(dgx, Collective.ALL_REDUCE, 1e9, 8, stride=8)
    assert one == collective_time(dgx, Collective.ALL_REDUCE, 1e9, 8, 64)


@pytest.mark.parametrize("model", ["llama-2-7b", "gpt-j-6b", "mixtral-8x7b"])
@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
@pytest.mark.parametrize("sequence_parallel", [False, True])
def test_compact_training_ranks_equal_full_ones(model, recompute, sequence_parallel):
    """A rank built as two layers (one standing for the others) has the full rank's op
    counts, FLOPs and bytes, stash and per-stage activation peaks, for every depth."""
    import numpy as np

    from xpusim.compiler.autodiff import Recompute
    from xpusim.compiler.optimizer import optimizer_spec
    from xpusim.compiler.partition import Plan
    from xpusim.ir.dtypes import DType
    from xpusim.scenarios.training_graphs import build_rank

    cfg = xpusim.model(model)
    tp = 1 if cfg.is_moe else 2
    args = (cfg, Plan(tp=tp), 2, 256, DType.BF16, Recompute(recompute), True, sequence_parallel)
    full, compact = build_rank(*args, compact=False), build_rank(*args)
    assert len(compact.forward) < len(full.forward) / 4
    spec = optimizer_spec("adam")
    for f, c in ((full.forward, compact.forward), (full.backward, compact.backward),
                 (full.update(spec, DType.BF16, 1, 4), compact.update(spec, DType.BF16, 1, 4))):
        a, b = full.table(f), compact.table(c)
        for name in ("matrix_flops", "vector_flops"):
            assert getattr(b, name) @ b.count == pytest.approx(getattr(a, name) @ a.count,
                                                               rel=1e-12)  # fmt: skip
        assert (b.role_bytes @ b.count) == pytest.approx(a.role_bytes @ a.count, rel=1e-12)
    for pp in (1, 2, 3, 5):
        np.testing.assert_allclose(compact.peak_per_stage(pp), full.peak_per_stage(pp),
                                   rtol=1e-12)  # fmt: skip
        np.testing.assert_allclose(compact.stash_per_stage(pp), full.stash_per_stage(pp),
                                   rtol=1e-12)  # fmt: skip
        for which in ("all", "comm", "recompute"):  # instances each stage runs
            assert np.array_equal(compact.stage_counts(compact.backward, pp, which).sum(axis=0),
                                  full.stage_counts(full.backward, pp, which).sum(axis=0))


def test_sequence_parallel_gathers_are_not_kept_into_the_backward():
    """Under sequence parallelism a forward matmul and its weight gradient each gather the
    same sharded tensor: two collectives, two outputs. What a layer keeps live into the
    backward pass is then exactly its stash, as without sequence parallelism."""
    from xpusim.compiler.autodiff import Recompute
    from xpusim.compiler.partition import Plan
    from xpusim.ir.dtypes import DType
    from xpusim.scenarios.training_graphs import build_rank

    cfg = xpusim.model("llama-2-7b")
    rank = build_rank(cfg, Plan(tp=2), 1, 512, DType.BF16, Recompute.NONE, False, True)
    gathers = [op for op in rank.forward.ops + rank.backward.ops
               if op.attr("collective") == "all_gather" and op.layer == 1]  # fmt: skip
    assert len({op.outputs[0].name for op in gathers}) == len(gathers) > 2
    kept = rank._kept_into_backward
    assert kept[1] == pytest.approx(rank.stash_by_layer[1], rel=1e-12)


def test_ranks_kept_across_simulations_give_what_fresh_ones_give():
    """A training rank outlives the simulation that built it within a memo scope (a sweep's
    chunk: scenarios/training_graphs.py build_rank), and its op costs are kept per chip
    object: a what-if chip that reuses a freed chip's id, a second search and another batch
    with the same microbatch each get what a scope with no kept rank computes."""
    import dataclasses
    import gc

    from xpusim import memo
    from xpusim.hardware.whatif import apply

    cfg = load_model("llama-2-7b")
    cases = [("h100-sxm", (), 8, 8), ("h100-sxm", (), 16, 16), ("h100-sxm", (), 8, 8),
             ("h100-sxm", (("memory.dram.bandwidth_bytes_per_s", 1.0e12),), 8, 8),
             ("h100-sxm", (("memory.dram.bandwidth_bytes_per_s", 5.0e12),), 8, 8)]
    kept = []
    with memo.scope() as scope:
        for chip, sets, chips, batch in cases:
            target = apply(xpusim.target(chip), sets)
            kept.append(dataclasses.asdict(train(cfg, target, chips=chips, batch=batch)))
            del target
            gc.collect()  # the next what-if copy may take this one's id
        assert len(scope.memo("training rank", 1)._found) > 0
    for (chip, sets, chips, batch), got in zip(cases, kept, strict=True):
        fresh = dataclasses.asdict(train(cfg, apply(xpusim.target(chip), sets), chips=chips,
                                         batch=batch))  # fmt: skip
        for found in (got, fresh):
            found["plan_search"].pop("search_s")
        assert got == fresh
    assert kept[3]["step_time_s"] > kept[4]["step_time_s"]  # the what-ifs were costed apart
