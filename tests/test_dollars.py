"""Cost: prices as dated, sourced data; a result's dollars are its own throughput and power
times a price, on the basis the user asked for; block-scaled FP4 formats move their scales."""

from __future__ import annotations

import json

import pytest
from cli_run import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

import xpusim
from xpusim.cost.dollars import chip_hour_rate, parse_price, priced
from xpusim.errors import UserError
from xpusim.hardware.catalog import chip_ids
from xpusim.hardware.prices import HOURS_PER_YEAR, prices
from xpusim.ir.dtypes import DType
from xpusim.workloads.resolve import load_model


def test_every_price_is_a_catalog_chip_with_a_date_and_a_source():
    table = prices()
    assert set(table.chips) <= set(chip_ids())
    for price in table.chips.values():
        for figure in (price.on_demand_usd_per_chip_hour, price.purchase_usd):
            if figure is not None:
                assert figure.date and figure.source in table.sources


def test_cost_is_throughput_times_price():
    result = xpusim.simulate("llama-2-7b", "h100-sxm", batch=8, price=2.0)
    cost = result.cost
    assert cost.basis == "given" and cost.usd_per_chip_hour == 2.0
    assert cost.usd_per_million == pytest.approx(2.0 / 3600 / result.tokens_per_s * 1e6)
    assert cost.per_s_per_usd_hour == pytest.approx(result.tokens_per_s / 2.0)
    assert any(note.startswith("cost: $2 per chip-hour") for note in result.notes)


def test_catalog_price_prefers_on_demand_and_tco_adds_power():
    on_demand = xpusim.simulate("llama-2-7b", "h100-sxm").cost
    assert on_demand.basis == "on-demand"
    listed = prices().chips["h100-sxm"].on_demand_usd_per_chip_hour
    assert on_demand.usd_per_chip_hour == listed.value
    result = xpusim.simulate("llama-2-7b", "h100-sxm", price="tco")
    own, purchase = prices().ownership, prices().chips["h100-sxm"].purchase_usd.value
    capital = purchase / (own.service_years.value * HOURS_PER_YEAR)
    energy = result.avg_power_w / 1000 * own.pue.value * own.electricity_usd_per_kwh.value
    assert result.cost.basis == "tco"
    assert result.cost.usd_per_chip_hour == pytest.approx(capital + energy)


@settings(max_examples=40, deadline=None)
@given(low=st.floats(0, 2000), more=st.floats(1, 2000))
def test_tco_never_falls_as_power_rises(low, more):
    cheap = chip_hour_rate("h100-sxm", "tco", low)
    dear = chip_hour_rate("h100-sxm", "tco", low + more)
    assert dear[0] > cheap[0]


def test_system_cost_scales_with_its_chips():
    one = xpusim.simulate("llama-2-7b", "h100-sxm", batch=64, price=3.0)
    eight = xpusim.simulate("llama-2-7b", "h100-sxm", batch=64, chips=8, dp=8, price=3.0)
    assert eight.cost.usd_per_hour == pytest.approx(8 * one.cost.usd_per_hour)
    # eight replicas make eight times the tokens: the price of a token is unchanged
    assert eight.cost.usd_per_million == pytest.approx(one.cost.usd_per_million, rel=1e-9)


def test_no_price_no_cost_and_an_unfitted_model_is_not_priced(tmp_path):
    assert priced(xpusim.simulate("llama-2-70b", "h100-sxm"), 2.0).cost is None  # needs 2+
    with pytest.raises(UserError, match="no tco price for h200-sxm"):
        parse_price("tco", "h200-sxm")
    with pytest.raises(UserError, match="dollars per chip-hour"):
        parse_price("-1", "h100-sxm")


@pytest.mark.parametrize("args, words", [
    (("--price", "tco", "--chip", "h200-sxm"), ("no tco price for h200-sxm", "on-demand")),
    (("--price", "free", "--chip", "h100-sxm"), ("--price", "on-demand, tco")),
    (("--price", "inf", "--chip", "h100-sxm"), ("--price",)),
])  # fmt: skip
def test_bad_prices_are_one_line(capsys, args, words):
    code, out, err = run_cli(capsys, "run", "llama-2-7b", *args)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    for word in words:
        assert word in err


def test_compare_prints_dollars_beside_tokens_and_joules(capsys):
    code, out, _ = run_cli(capsys, "compare", "llama-2-7b", "--chip", "h100-sxm",
                           "--chip", "a100-sxm-80gb")  # fmt: skip
    assert code == 0
    header = next(line for line in out.splitlines() if "tok/s" in line)
    assert header.index("tok/s") < header.index("$/M output tokens") < header.index("energy/token")
    assert "note: h100-sxm: cost: $6.88 per chip-hour, on-demand" in out


def test_sweep_ranks_by_cost(capsys, tmp_path):
    code, out, err = run_cli(capsys, "sweep", "llama-2-7b", "--chip", "h100-sxm",
                             "--batch", "1,64", "--price", "2,4", "--rank", "cost",
                             "--out", str(tmp_path), "--no-plots", "--workers", "1",
                             "--json")  # fmt: skip
    assert code == 0, err
    summary = json.loads(out)
    assert summary["objectives"] == ["tokens_per_s_per_user", "cost.usd_per_million"]
    best = summary["best"]["h100-sxm"]
    assert best["price"] == 2 and best["batch"] == 64  # the cheaper hour, the fuller batch


def test_fp4_formats_carry_their_scales():
    assert DType.MXFP4.bits == 4.25 and DType.NVFP4.bits == 4.5
    bf16 = xpusim.simulate("llama-2-7b", "h100-sxm", precision="bf16")
    mx = xpusim.simulate("llama-2-7b", "h100-sxm", precision="bf16", weight_precision="mxfp4")
    ratio = mx.memory_bytes.weights / bf16.memory_bytes.weights
    # the embedding table and the LM head stay bf16, as MXFP4 checkpoints keep them
    # (ir/dtypes.KEPT_WIDE); the linear layers carry the 4.25 bits
    cfg = load_model("llama-2-7b")
    wide = 2 * cfg.vocab_size * cfg.hidden_size / cfg.param_count
    assert ratio == pytest.approx((1 - wide) * 4.25 / 16 + wide)
    assert mx.tpot_s < bf16.tpot_s  # a quarter of the weight bytes to stream per token


def test_a_chip_without_fp4_refuses_it(capsys):
    code, out, err = run_cli(capsys, "run", "llama-2-7b", "--chip", "h100-sxm",
                             "--precision", "nvfp4")  # fmt: skip
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "h100-sxm has no nvfp4 peak" in err and "fp8" in err
