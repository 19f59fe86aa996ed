"""Torus inference layouts (compiler/torus_layouts.py): Pope et al.'s partitionings costed."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpusim.compiler.torus_layouts import best_layout, layout, layout_cost, layouts, slice_dims
from xpusim.errors import UserError
from xpusim.hardware.catalog import load_chip
from xpusim.ir.dtypes import DType
from xpusim.workloads.resolve import load_model

PALM = load_model("palm-540b")
TPU = load_chip("tpu-v4")


def test_layouts_are_data_with_known_fields():
    assert {"ws-1d", "ws-2d", "ws-2d-batch-kv-overlap", "wg-xyz-batch-kv-overlap"} <= set(layouts())
    for lay in layouts().values():
        assert lay.weights in ("1d", "2d", "gather") and lay.kv in ("heads", "batch")


def test_unknown_layout_names_the_closest():
    with pytest.raises(UserError, match="did you mean ws-2d"):
        layout("ws2d")


@pytest.mark.parametrize("chips, dims", [(64, (4, 4, 4)), (8, (2, 2, 2)), (256, (8, 8, 4)),
                                         (7, (7,)), (1, (1,))])
def test_slices_are_near_cubic(chips, dims):
    assert slice_dims(chips) == dims and math.prod(dims) == chips


def test_palm_540b_batch_64_int8_fits_on_64_tpu_v4_only_with_kv_split_by_sequence():
    """The issue's case: one KV head held whole on every chip is 15.9 GB at batch 64 x 2,048
    tokens; split by sequence it is 1/64 of that, and the batch-sharded layout is picked."""
    heads = layout_cost(PALM, TPU, 64, "ws-2d", 64, 1, 2048, 1.0)
    batch = layout_cost(PALM, TPU, 64, "ws-2d-batch-kv", 64, 1, 2048, 1.0)
    assert batch.kv_bytes == pytest.approx(heads.kv_bytes / 64)
    best, _ = best_layout(PALM, TPU, 64, 64, 1, 2048, 1.0)
    assert best.total_bytes <= TPU.capacity_bytes and "batch-kv" in best.layout


def test_2d_traffic_falls_as_one_over_sqrt_chips_and_1d_does_not():
    """Pope section 3.2: 1D weight-stationary moves 2BE per chip whatever n; 2D moves
    8BE/sqrt(n) (d_ff = 4 d_model, as PaLM's). Within 15%: 4x4x4 and 8x8x4 slices give
    their axis groups different numbers of links."""
    def link(name, n):
        return layout_cost(PALM, TPU, n, name, 512, 1, 0, 2.0).link_s

    assert link("ws-1d", 256) == pytest.approx(link("ws-1d", 64), rel=0.05)
    assert link("ws-2d", 256) == pytest.approx(link("ws-2d", 64) / 2, rel=0.15)


def test_overlap_hides_the_collectives_behind_the_matmuls():
    plain = layout_cost(PALM, TPU, 64, "ws-2d-batch-kv", 512, 1, 2048, 2.0)
    hidden = layout_cost(PALM, TPU, 64, "ws-2d-batch-kv-overlap", 512, 1, 2048, 2.0)
    work = max(plain.compute_s, plain.memory_s)
    assert plain.step_s == pytest.approx(work + plain.link_s + plain.hop_s)
    assert hidden.step_s == pytest.approx(max(work, hidden.link_s) + hidden.hop_s)


def test_gathered_weights_win_only_when_the_batch_outweighs_a_layer():
    small = [layout_cost(PALM, TPU, 64, n, 1, 2048, 0, 2.0).step_s
             for n in ("wg-xyz-batch-kv-overlap", "ws-2d-batch-kv")]  # fmt: skip
    big = [layout_cost(PALM, TPU, 64, n, 512, 2048, 0, 2.0).step_s
           for n in ("wg-xyz-batch-kv-overlap", "ws-2d-batch-kv")]  # fmt: skip
    assert small[0] > small[1] and big[0] < big[1]


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(sorted(layouts())), chips=st.sampled_from([1, 4, 8, 16, 64, 128]),
       batch=st.integers(1, 1024), tokens=st.sampled_from([1, 16, 2048]),
       context=st.integers(0, 4096), wbytes=st.sampled_from([1.0, 2.0]))
def test_a_layout_never_beats_the_roofline(name, chips, batch, tokens, context, wbytes):
    cost = layout_cost(PALM, TPU, chips, name, batch, tokens, context, wbytes)
    peak = TPU.peak(DType.BF16) * chips
    hbm = TPU.memory[-1].bandwidth_bytes_per_s.value * chips
    assert cost.step_s >= 2 * batch * tokens * PALM.active_param_count / peak
    assert cost.step_s >= PALM.param_count * wbytes / hbm
    assert all(math.isfinite(v) and v >= 0 for v in (cost.step_s, cost.total_bytes))


# Pope et al., "Efficiently Scaling Transformer Inference", MLSys 2023, arXiv 2211.05102,
# Table 2: PaLM 540B on 64 TPU v4, 2048-token context, 64 tokens generated (read from two
# summaries that reproduce the table; the abstract states the 29 ms and the 76% MFU).
# (phase, batch, weight bytes a parameter, the paper's layout, its latency in seconds)
TABLE_2 = [
    ("prefill", 1, 1.0, "ws-2d", 0.29),  # WS 2D, attention by head, int8
    ("decode", 64, 1.0, "ws-2d-batch-kv", 1.82 / 64),  # WS 2D, attention by batch, int8
    ("prefill", 512, 2.0, "wg-xyz-batch-kv", 85.2),  # WG XYZ, attention by batch, bf16
    ("decode", 512, 2.0, "ws-2d-batch-kv", 6.0 / 64),  # WS 2D, attention by batch, bf16
]


@pytest.mark.parametrize(("phase", "batch", "wbytes", "layout_used", "published_s"), TABLE_2)
def test_pope_table_2_within_the_seed_chip_target(phase, batch, wbytes, layout_used,
                                                   published_s):
    """The best layout's step against Table 2 within the issue's bar (none above 2x). Decode
    is 0.5-0.6x of the paper's (docs/chips/tpu-v4.md says why): this pins it from getting
    worse unnoticed, not a fit."""
    tokens, context = (2048, 0) if phase == "prefill" else (1, 2048 + 32)
    best, _ = best_layout(PALM, TPU, 64, batch, tokens, context, wbytes, overlap=False)
    assert best.total_bytes <= TPU.capacity_bytes
    assert 0.5 <= best.step_s / published_s <= 2.0, (layout_used, best.layout, best.step_s)


@pytest.mark.parametrize(("phase", "batch", "wbytes", "layout_used", "published_s"), TABLE_2)
def test_the_search_picks_the_layout_pope_used(phase, batch, wbytes, layout_used,
                                               published_s):
    """Costed from the chip's figures alone, the fastest fitting layout of each phase is
    the one Table 2 names: 2D weight-stationary with attention by head for one prompt,
    weights gathered over all three axes for 512, the cache split by sequence in decode;
    the same with the collectives overlapped."""
    tokens, context = (2048, 0) if phase == "prefill" else (1, 2048 + 32)
    for overlap, suffix in ((False, ""), (True, "-overlap")):
        best, _ = best_layout(PALM, TPU, 64, batch, tokens, context, wbytes, overlap=overlap)
        assert best.layout == layout_used + suffix


def test_a_collective_costs_its_dispatch_and_hops_however_few_bytes():
    """Decode at batch 1: each collective is latency-bound, dispatch plus its hops
    (torus_layouts.toml [collective], the scaling book's 8 us for a 3-hop all-gather)."""
    from xpusim.compiler.torus_layouts import dispatch_s

    one = layout_cost(PALM, TPU, 64, "ws-1d", 1, 1, 0, 1.0)
    hop = TPU.chip_to_chip.latency_s.value
    # ws-1d: an all-gather and a reduce-scatter over the wrapped 4x4x4 slice, each shard
    # sent both ways round each axis: 2 hops an axis (the scaling book's "only 2 hops" on an
    # axis of 4), 6 in all, not the 9 of a one-way ring
    assert one.hop_s == pytest.approx(PALM.num_layers * 2 * (dispatch_s() + 6 * hop))
    assert dispatch_s() == pytest.approx(5e-6)


@pytest.mark.parametrize(("axes", "hops"), [((4, 4, 4), 6), ((4,), 2), ((2,), 1),
                                            ((16,), 8), ((4, 2), 3), ((3,), 1)])
def test_a_collective_reaches_the_farthest_chip_of_each_wrapped_axis(axes, hops):
    """A collective over wrapped axes takes dim // 2 hops an axis; the queries' all-to-all
    of batch-sharded attention is forwarded along the rings the same way (the scaling book:
    it "only has to pass shards part-way around the ring"), so over 64 chips it takes 6
    hops, not the 63 latency steps of pairwise exchange. On lines (no wrap-around) it takes
    dim - 1 an axis, the rule cost/collectives.py applies to every torus collective."""
    from xpusim.compiler.torus_layouts import Collective
    from xpusim.hardware.system import Axis

    assert Collective(1.0, tuple(Axis(d, True) for d in axes)).hops == hops
    assert Collective(1.0, tuple(Axis(d, False) for d in axes)).hops == sum(d - 1 for d in axes)


def test_the_queries_all_to_all_is_forwarded_along_the_rings():
    """ws-2d-batch-kv adds two all-to-alls a layer to ws-2d's collectives, each dispatch
    plus the 6 hops of the 4x4x4 slice."""
    from xpusim.compiler.torus_layouts import dispatch_s

    hop = TPU.chip_to_chip.latency_s.value
    args = (PALM, TPU, 64)
    by_head = layout_cost(*args, "ws-2d", 64, 1, 2048, 1.0)
    by_batch = layout_cost(*args, "ws-2d-batch-kv", 64, 1, 2048, 1.0)
    assert by_batch.hop_s - by_head.hop_s == pytest.approx(
        PALM.num_layers * 2 * (dispatch_s() + 6 * hop))


def test_fewer_tokens_than_mxu_rows_do_not_make_the_matmuls_faster():
    """A weight-stationary 128x128 MXU loads a fold in 128 cycles whatever the tokens that
    stream through it (cost/systolic.py): 16 or 64 tokens a chip cost the same matmul time,
    256 more."""
    compute = {b: layout_cost(PALM, TPU, 64, "ws-2d", b, 1, 0, 2.0).compute_s
               for b in (16, 64, 256)}  # fmt: skip
    assert compute[16] == pytest.approx(compute[64], rel=0.02)
    assert compute[256] > 1.5 * compute[64]


@pytest.mark.parametrize("heads, chips, padded", [(48, 64, 64), (48, 256, 64), (48, 8, 48),
                                                  (64, 16, 64), (40, 16, 48), (32, 64, 32)])
def test_heads_pad_to_a_multiple_of_the_chips_they_split_over(heads, chips, padded):
    from xpusim.compiler.torus_layouts import padded_heads

    assert padded_heads(heads, chips) == padded


def test_palm_540b_on_64_chips_holds_pope_s_18b_padded_parameters():
    """Pope section 4: PaLM-540B's 48 heads padded to 64 on 64+ chips, 18B more parameters
    (queries and outputs of 16 heads of 256 over d_model 18,432 in 118 layers: 17.8B)."""
    cost = layout_cost(PALM, TPU, 64, "ws-2d-batch-kv", 64, 1, 2048, 1.0)
    extra = cost.weight_bytes * 64 - PALM.param_count
    assert extra == pytest.approx(2 * 16 * 256 * 18432 * 118)
    on_8 = layout_cost(PALM, TPU, 8, "ws-2d-batch-kv", 8, 1, 2048, 1.0)
    assert on_8.weight_bytes * 8 == pytest.approx(PALM.param_count)


def test_a_serial_block_moves_one_more_all_reduce_a_layer_over_the_d_ff_axis():
    """Pope section 3.4: PaLM's parallel block needs one d_ff/heads all-reduce a layer, a
    serial block two; the d_model (X) axis traffic is the same."""
    from dataclasses import replace

    serial = replace(PALM, parallel_block=False)
    for name in ("ws-1d", "ws-2d"):
        par = layout_cost(PALM, TPU, 64, name, 512, 1, 2048, 2.0)
        ser = layout_cost(serial, TPU, 64, name, 512, 1, 2048, 2.0)
        assert ser.link_s > par.link_s and ser.hop_s > par.hop_s
    one_d = [layout_cost(c, TPU, 64, "ws-1d", 512, 1, 2048, 2.0) for c in (PALM, serial)]
    assert one_d[1].link_s == pytest.approx(2 * one_d[0].link_s)
    gathered = [layout_cost(c, TPU, 64, "wg-xyz-batch-kv", 512, 2048, 0, 2.0)
                for c in (PALM, serial)]
    assert gathered[0].link_s == pytest.approx(gathered[1].link_s, rel=1e-4)  # its second norm
