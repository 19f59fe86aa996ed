"""`serve --find min-chips` searches replica layouts when no plan is given (#44): a TPOT
objective one H100 cannot meet at any replica count (llama-3-8b decodes a token in about
6 ms on one, 4 ms on two in tp 2) is met by one tp 2 replica, not answered "not met"."""

from __future__ import annotations

import xpusim

ASK = dict(rate=2, prompt=256, gen=64, slo_tpot_ms=5.5, find="min-chips", requests=100)


def test_min_chips_finds_the_layout_that_meets_the_objective():
    r = xpusim.serve("llama-3-8b", "h100-sxm", **ASK)
    assert r.search["chips"] == 2 and r.plan["tp"] == 2
    assert r.tpot_s.p99 <= 5.5e-3


def test_a_given_plan_is_kept():
    r = xpusim.serve("llama-3-8b", "h100-sxm", tp=1, **ASK)
    assert r.search["chips"] == 0 and r.plan["tp"] == 1
