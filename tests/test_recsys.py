"""Recommendation serving: embedding-lookup physics, the scenario and its command line."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import xpusim
from xpusim import api
from xpusim.cli import main
from xpusim.cost.embedding import EmbeddingBags, TablePlacement, evaluate_bags, granularity
from xpusim.hardware.catalog import load_chip
from xpusim.hardware.spec import MemoryKind
from xpusim.hardware.whatif import override
from xpusim.ir.dtypes import DType
from xpusim.workloads.dlrm_config import config_from_json

PROPERTY = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip


def tiny_model():
    return config_from_json({
        "dense_features": 13, "bottom_mlp": [64, 32],
        "tables": [{"rows": 1000, "dim": 32, "pooling": 4, "count": 4},
                   {"rows": 10_000_000, "dim": 32, "pooling": 20}],
        "interaction": "dot", "top_mlp": [64, 1]}, "tiny", "test")  # fmt: skip


ROW_BYTES = [16, 64, 132, 256, 260, 512]  # 132 and 260: int8 rows of 128 and 256 with a scale


@st.composite
def bags(draw):
    n = draw(st.integers(1, 6))
    return EmbeddingBags(
        names=tuple(f"t{i}" for i in range(n)),
        rows=np.array([draw(st.integers(1, 10**8)) for _ in range(n)], dtype=float),
        row_bytes=np.array([draw(st.sampled_from(ROW_BYTES)) for _ in range(n)], dtype=float),
        lookups=np.array([draw(st.integers(1, 10**6)) for _ in range(n)], dtype=float),
        pool_flops=np.array([draw(st.integers(0, 10**8)) for _ in range(n)], dtype=float),
        io=np.array([draw(st.integers(0, 10**6)) for _ in range(n)], dtype=float),
        pooled_bytes=np.array([draw(st.integers(0, 10**5)) for _ in range(n)], dtype=float),
    )


def served_at(chip, level: int, n: int) -> TablePlacement:
    served = np.zeros((len(chip.memory), n))
    served[level] = 1.0
    return TablePlacement(stored=served, served=served)


def dram(chip) -> int:
    return next(i for i, m in enumerate(chip.memory) if m.kind is MemoryKind.DRAM)


def onchip(chip) -> int:
    """The largest on-chip level rows can be served from, as memory_plan picks it."""
    levels = [i for i, m in enumerate(chip.memory) if m.kind in (MemoryKind.SRAM, MemoryKind.CACHE)]
    return max(levels, key=lambda i: chip.memory[i].capacity_bytes.value)


# --- the embedding cost: physics floors and monotonicity ------------------------------


@PROPERTY
@given(data=st.data())
def test_lookups_obey_the_physics_floors_and_the_tdp(any_chip, data):
    b = data.draw(bags())
    level = data.draw(st.sampled_from([i for i, m in enumerate(any_chip.memory)
                                       if m.kind is not MemoryKind.LOCAL]))  # fmt: skip
    cost = evaluate_bags(any_chip, b, served_at(any_chip, level, len(b.rows)), level)
    needed = float(b.lookups @ b.row_bytes) + b.io_bytes
    # within rounding, as the roofline's floors are held (test_cost_properties): a level at
    # an efficiency of exactly 1 (Groq's streams) lands on its floor to the last bit
    bandwidth = any_chip.memory[level].bandwidth_bytes_per_s.value
    assert cost.time_s >= needed / bandwidth * (1 - 1e-12)
    sparse = any_chip.sparse_core
    peak = sparse.vector_ops_per_s.value if sparse else any_chip.vector_ops_per_s.value
    assert cost.time_s >= b.pool_flops.sum() / peak
    power = (cost.dynamic_j + any_chip.energy.static_power_w.value * cost.time_s) / cost.time_s
    assert power <= any_chip.tdp_w.value * (1 + 1e-9)


@PROPERTY
@given(data=st.data(), factor=st.floats(1.0, 16.0))
def test_more_bandwidth_is_never_slower(any_chip, data, factor):
    b = data.draw(bags())
    level = dram(any_chip) if any(m.kind is MemoryKind.DRAM for m in any_chip.memory) else 0
    memory = any_chip.memory[level]  # scaled at constant power, or the chip breaks its TDP
    cooler = override(any_chip, f"memory[{level}].energy_pj_per_byte",
                      memory.energy_pj_per_byte.value / factor)  # fmt: skip
    faster = override(cooler, f"memory[{level}].bandwidth_bytes_per_s",
                      memory.bandwidth_bytes_per_s.value * factor)  # fmt: skip
    where = served_at(any_chip, level, len(b.rows))
    assert (
        evaluate_bags(faster, b, where, level).time_s
        <= evaluate_bags(any_chip, b, where, level).time_s
    )


@pytest.mark.parametrize("chip_id", ["mtia-v1", "tpu-v4", "a100-sxm-80gb", "h100-sxm"])
@PROPERTY
@given(data=st.data())
def test_an_sram_resident_table_is_never_slower_than_a_dram_one(chip_id, data):
    chip = load_chip(chip_id)
    b = data.draw(bags())
    b = dataclasses.replace(b, io=np.zeros_like(b.io))  # the table's reads alone
    near, far = onchip(chip), dram(chip)
    fast = evaluate_bags(chip, b, served_at(chip, near, len(b.rows)), near)
    slow = evaluate_bags(chip, b, served_at(chip, far, len(b.rows)), near)
    assert fast.time_s <= slow.time_s
    assert fast.dynamic_j <= slow.dynamic_j


def test_lookup_cost_scales_with_pooling_and_row_size():
    chip = load_chip("mtia-v1")
    level = dram(chip)
    base = EmbeddingBags(("t",), np.array([1e6]), np.array([256.0]), np.array([1e5]),
                         np.array([0.0]), np.array([0.0]), np.array([0.0]))  # fmt: skip
    where = served_at(chip, level, 1)

    def memory_s(bag):
        return evaluate_bags(chip, bag, where, level).memory_s

    doubled = dataclasses.replace(base, lookups=base.lookups * 2)  # twice the pooling factor
    assert memory_s(doubled) == pytest.approx(2 * memory_s(base))
    wider = dataclasses.replace(base, row_bytes=base.row_bytes * 2)
    assert memory_s(wider) == pytest.approx(2 * memory_s(base))
    g = granularity(chip)[level]  # 32 B LPDDR5 bursts: a 260-byte row costs 288 B
    odd = dataclasses.replace(base, row_bytes=np.array([260.0]))
    assert memory_s(odd) == pytest.approx(memory_s(base) * np.ceil(260 / g) * g / 256)


def test_sparse_cores_take_their_power_out_of_the_compute_budget():
    chip = load_chip("tpu-v4")
    without = chip.model_copy(update={"sparse_core": None})
    assert chip.compute_power_budget_w == pytest.approx(
        without.compute_power_budget_w - chip.sparse_core.power_w.value
    )


# --- the scenario -----------------------------------------------------------------------


@pytest.mark.parametrize("batch", [1, 512])
def test_serving_never_beats_the_floors_or_the_tdp(any_chip, batch):
    r = api.simulate(tiny_model(), any_chip, batch=batch)
    assert r.avg_power_w <= r.tdp_w * (1 + 1e-9)
    peak = max(any_chip.peak_ops_per_s[d].value for d in any_chip.peak_ops_per_s)
    assert r.latency_s >= r.flops_per_query * batch / (peak + any_chip.vector_ops_per_s.value)
    assert r.queries_per_s == pytest.approx(batch / r.latency_s)
    assert r.queries_per_joule == pytest.approx(batch / r.energy_j)


def test_lookups_overlap_dense_work_only_on_a_sparse_core():
    model = api.model("dlrm-v2")
    tpu = api.simulate(model, "tpu-v4", batch=2048)
    assert tpu.sparse_core and tpu.latency_s == pytest.approx(max(tpu.dense_s, tpu.embedding_s))
    assert tpu.avg_power_w <= tpu.tdp_w  # the sparse cores' power is inside the budget
    a100 = api.simulate(model, "a100-sxm-80gb", batch=2048)
    assert not a100.sparse_core
    assert a100.latency_s == pytest.approx(a100.dense_s + a100.embedding_s)


def test_random_access_efficiency_is_a_what_if():
    chip = load_chip("mtia-v1")
    slower = override(chip, "memory.dram.random_access_efficiency", 0.075)  # half the 0.15
    base, what_if = (
        api.simulate("dlrm-v2", c, batch=1024, precision="fp16") for c in (chip, slower)
    )
    assert what_if.embedding_s > base.embedding_s and what_if.dense_s == base.dense_s


def test_small_tables_are_served_from_mtia_sram():
    r = api.simulate("dlrm-v2", "mtia-v1", batch=2048, precision="fp16")
    assert r.placement == {"dense_weights": "sram", "activations": "sram"}
    assert 0 < r.lookups_served["sram"] < 1  # the densest tables; the 40M-row ones stay out
    assert sum(r.lookups_served.values()) == pytest.approx(1.0)


def test_a_model_whose_tables_exceed_memory_says_so():
    r = api.simulate("dlrm-v2", "a100-sxm-80gb", batch=256, precision="fp32")
    assert not r.fits and r.min_chips == 2  # 104.6 GB of fp32 tables, 80 GB per chip
    assert "memory" in r.reason and "embeddings 104.5" in r.reason


def test_sla_search_finds_the_largest_batch_within_the_bound():
    r = api.simulate("dlrm-v2", "mtia-v1", sla_ms=2.0, precision="int8")
    assert r.sla_ms == 2.0 and r.latency_s <= 2e-3
    assert api.simulate("dlrm-v2", "mtia-v1", batch=r.batch + 1, precision="int8").latency_s > 2e-3
    tight = api.simulate("dlrm-v2", "mtia-v1", sla_ms=1e-4)
    assert tight.batch == 1 and any("no batch meets" in n for n in tight.notes)


# --- the command line -------------------------------------------------------------------


def cli_json(capsys, *argv):
    try:
        main([*argv, "--json"])
    except SystemExit as e:
        assert e.code in (0, None), capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("chip_id", ["tpu-v4", "mtia-v1", "a100-sxm-80gb"])
def test_run_dlrm_v2_json(capsys, chip_id):
    d = cli_json(capsys, "run", "dlrm-v2", "--chip", chip_id, "--batch", "2048")
    assert d["batch"] == 2048 and d["queries_per_s"] > 0 and d["queries_per_joule"] > 0
    assert d["latency_s"] == pytest.approx(2048 / d["queries_per_s"])
    assert {"fits", "min_chips", "memory_bytes", "lookups_served", "ops"} <= set(d)


def test_compare_the_family(capsys):
    d = cli_json(capsys, "compare", "meta-lc1", "--chip", "mtia-v1", "--chip", "a100-sxm-80gb",
                 "--precision", "fp16", "--batch", "512")  # fmt: skip
    assert [r["chip"] for r in d["results"]] == ["mtia-v1", "a100-sxm-80gb"]
    main(["compare", "meta-hc1", "--chip", "mtia-v1", "--chip", "a100-sxm-80gb", "--sla-ms", "5"])
    out = capsys.readouterr().out
    assert "queries/J" in out and "within 5 ms" in out


@pytest.mark.parametrize(("argv", "mentions"), [
    (["--prompt", "64"], ["--prompt", "--batch"]),
    (["--sharding", "diagonal"], ["--sharding"]),
    (["--sla-ms", "0"], ["--sla-ms"]),
])  # fmt: skip
def test_options_that_do_not_apply_are_refused(capsys, argv, mentions):
    with pytest.raises(SystemExit) as e:
        main(["run", "dlrm-v2", "--chip", "mtia-v1", *argv])
    _, err = capsys.readouterr()
    assert e.value.code == 2 and len(err.strip().splitlines()) == 1
    for word in mentions:
        assert word in err


def test_tables_shard_over_chips_with_their_exchange():
    """DLRM-v2 on 8 H100s: each chip holds an eighth of the tables; pooled rows are exchanged."""
    one = xpusim.simulate("dlrm-v2", "h100-sxm", batch=2048, precision="fp16",
                          weight_precision="int8")  # fmt: skip
    for how in ("table", "row"):
        eight = xpusim.simulate("dlrm-v2", "h100-sxm", batch=2048, precision="fp16",
                                weight_precision="int8", chips=8, sharding=how)  # fmt: skip
        assert eight.chips == 8 and eight.sharding == how
        assert eight.exchange_s > 0
        assert eight.memory_bytes.embeddings < one.memory_bytes.embeddings / 4
        assert eight.avg_power_w <= eight.tdp_w


def test_sharding_makes_a_model_that_needs_more_chips_fit():
    alone = xpusim.simulate("dlrm-v2", "mtia-v1", batch=512, precision="fp32")
    assert not alone.fits and alone.min_chips >= 2
    spread = xpusim.simulate("dlrm-v2", "mtia-v1", batch=512, precision="fp32",
                             chips=alone.min_chips + 1)  # fmt: skip
    assert spread.fits


def test_table_wise_sharding_balances_bytes():
    from xpusim.scenarios.recsys import shard_tables
    from xpusim.workloads.dlrm import build_batch

    cfg = xpusim.model("dlrm-v2")
    bags = EmbeddingBags.of(build_batch(cfg, 4, DType.FP16, DType.FP16))
    shards = shard_tables(bags, 4, "table")
    assert sorted(n for s in shards for n in s.names) == sorted(bags.names)
    assert sum(float(s.table_bytes.sum()) for s in shards) == pytest.approx(bags.table_bytes.sum())
    rows = shard_tables(bags, 4, "row")
    assert float(rows[0].lookups.sum()) == pytest.approx(float(bags.lookups.sum()) / 4)


def test_gathers_run_at_the_measured_share_else_the_levels_streaming_efficiency():
    """The MTIA paper measured its TBE kernels at 10-20% of LPDDR5 (0.15) and FBGEMM's on
    its A100s at about 60% of HBM; a level with no random-access figure gathers at what
    streaming reaches there (MTIA's SRAM: 66%, its Fig. 13)."""
    from xpusim.cost.embedding import random_read_rate

    mtia, a100 = xpusim.chip("mtia-v1"), xpusim.chip("a100-sxm-80gb")
    by_name = dict(zip([m.name for m in mtia.memory], random_read_rate(mtia), strict=True))
    assert by_name["lpddr5"] == pytest.approx(176e9 * 0.15)
    assert by_name["sram"] == pytest.approx(800e9 * 0.66)
    hbm = [m.name for m in a100.memory].index("hbm2e")
    assert random_read_rate(a100)[hbm] == pytest.approx(2.039e12 * 0.60)
