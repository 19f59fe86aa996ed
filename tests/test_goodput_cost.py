"""Dollars per million tokens delivered within the SLOs (#44): in serve's result and what
`sweep --rank cost` ranks serving points by, so that a chip missing the objective is not
ranked cheapest for the tokens it makes late."""

from __future__ import annotations

import math

import pytest

import xpusim
from xpusim.explore.pareto import COST, GOODPUT_COST, objectives_for

SHAPE = dict(concurrency=2, prompt=64, gen=8, requests=24)


def test_goodput_cost_prices_only_the_tokens_within_the_slos():
    r = xpusim.serve("llama-3.2-1b", "h100-sxm", slo_ttft_ms=1e4, slo_tpot_ms=1e4, **SHAPE)
    assert r.slo_met == 1.0 and r.goodput_tokens_per_s == r.output_tokens_per_s
    assert r.usd_per_million_goodput == pytest.approx(r.cost.usd_per_million, rel=1e-12)
    # a TTFT objective no request meets: nothing delivered within it, no price per token
    missed = xpusim.serve("llama-3.2-1b", "h100-sxm", slo_ttft_ms=1e-6, **SHAPE)
    assert missed.slo_met == 0.0 and missed.goodput_tokens_per_s == 0.0
    assert missed.cost is not None and missed.usd_per_million_goodput is None


def test_goodput_cost_is_dearer_by_the_share_missed():
    r = xpusim.serve("llama-3.2-1b", "h100-sxm", slo_tpot_ms=1e4, slo_ttft_ms=1e4, price=2.0,
                     **SHAPE)  # fmt: skip
    expected = r.cost.usd_per_hour / 3600.0 / (r.output_tokens_per_s * r.slo_met) * 1e6
    assert math.isclose(r.usd_per_million_goodput, expected, rel_tol=1e-12)


def test_without_slos_there_is_no_goodput_cost():
    r = xpusim.serve("llama-3.2-1b", "h100-sxm", **SHAPE)
    assert r.goodput_tokens_per_s is None and r.usd_per_million_goodput is None


def test_rank_cost_uses_goodput_where_the_rows_have_it():
    columns = ["tokens_per_s_per_user", "tokens_per_s_per_chip", COST.column,
               GOODPUT_COST.column]  # fmt: skip
    with_slos = [{GOODPUT_COST.column: 2.0}, {GOODPUT_COST.column: None}]
    assert objectives_for(columns, "cost", with_slos)[1] == GOODPUT_COST
    assert objectives_for(columns, "cost", [{GOODPUT_COST.column: None}])[1] == COST
    assert objectives_for(columns, "throughput", with_slos)[1].column == "tokens_per_s_per_chip"
