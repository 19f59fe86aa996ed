"""SGLang's admission control (serving/admission.py): the PrefillAdder's budget, its
new_token_ratio, and the exact no-retraction check of requests that ignore EOS."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xpusim
from xpusim.serving.admission import Pass, Reserve, reference_fits
from xpusim.serving.engines import engine
from xpusim.serving.schedulers import Sequence

RULE = engine("sglang").admit_reserve
RUNNING = [(100, 5000, 1000), (4900, 5000, 1000)]  # (output so far, length, prompt)


def _pass(reserve: Reserve, running: list[tuple[int, int, int]]) -> Pass:
    """Pass.of over running requests written as (output so far, length, prompt) rows."""
    columns = np.array(running, dtype=np.int64).reshape(-1, 3).T
    return Pass.of(reserve, *columns)


def _new(prompt: int = 1000, gen: int = 5000) -> Sequence:
    return Sequence(0, 0.0, prompt, gen)


def test_ratio_follows_sglangs_figures():
    """0.7 at first, its floor 0.7 x 0.14, reached in 600 decode steps; a retraction sets
    it to the survivors' (output + 20 each) / (lengths + 1); idle resets it."""
    r = Reserve(RULE)
    assert (r.ratio, RULE.ratio_min) == (0.7, pytest.approx(0.098))
    r.decayed(300)
    assert r.ratio == pytest.approx(0.7 - 300 * 0.602 / 600)
    r.decayed(1000)
    assert r.ratio == pytest.approx(0.098)
    r.retracted([100, 4900], [5000, 5000])
    assert r.ratio == pytest.approx((5000 + 2 * 20) / 10001)
    r.idle()
    assert r.ratio == 0.7
    dp = Reserve(RULE.under_dp_attention())  # conservativeness x 0.3 under attention DP
    assert (dp.ratio, dp.rule.ratio_min) == (pytest.approx(0.21), pytest.approx(0.0294))


def test_budget_by_hand():
    """add_one_req: running requests reserve min(left, 4096) x 0.7 = (4096 + 100) x 0.7 =
    2937.2 of 10,000 free; a 1,000-token prompt of 5,000 outputs needs 1,000 + 4,096 =
    5,096 < 7,062.8: admitted; it charges its 4,096 in full, so a second (its prompt taken
    from the free tokens) sees 9,000 - 2,937.2 - 4,096 = 1,966.8 and waits."""
    gate = _pass(Reserve(RULE), RUNNING)
    assert gate.offset == pytest.approx(2937.2)
    assert gate.fits(_new(), 1000, 10_000)
    gate.took(_new())
    assert not gate.fits(_new(), 1000, 9_000)
    assert gate.fits(_new(100, 100), 100, 9_000)  # 200 < 1,966.8


@pytest.mark.parametrize(("free", "fits"), [(10_000, True), (6_000, True), (4_000, False)])
def test_exact_check_by_hand(free, fits):
    """add_one_req_ignore_eos, sorted by output left: (100 left, 5,900 held), (4,900, 1,100),
    the new one (5,000, 1,000). At 4,000 free: 3,000 after its prompt, and when the first
    finishes the other two have 4,900 more to write: 3,000 + 5,900 - 2 x 4,900 = -900."""
    gate = _pass(Reserve(RULE, exact=True), RUNNING)
    assert gate.fits(_new(), 1000, free) is fits


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3000), st.integers(1, 3000), st.integers(1, 2000)),
                max_size=12),
       st.integers(1, 2000), st.integers(1, 3000), st.integers(0, 40_000))  # fmt: skip
def test_exact_check_equals_sglangs_loop(running, prompt, gen, free):
    """The vectorized check against schedule_policy.py's loop, request by request."""
    running = [(min(o, g), g, p) for o, g, p in running]
    gate = _pass(Reserve(RULE, exact=True), running)
    s = _new(prompt, gen)
    # a budget past the free tokens leaves the exact check alone to decide
    assert gate.reserve.fits(s, prompt, free, float("inf"),
                             (gate.outputs, gate.gens, gate.prompts)) \
        == reference_fits(s, prompt, free, running)  # fmt: skip


def test_sglang_without_radix_cache_holds_what_can_finish():
    """At outputs 4x the prompt and a cache of 40,000 tokens, 32 clients: without the radix
    cache (as InferenceX launches SGLang; every serve request runs to its length, as an
    --ignore-eos client's) SGLang admits only what can all finish, 40,000 / 2,500 = 16 at
    once, and never retracts; with it, the budget counts a fraction of the outputs, so more
    start and the cache runs out (retractions)."""
    load = dict(engine="sglang", concurrency=32, prompt=500, gen=2000, requests=96, warmup=0,
                kv_blocks=40_000)  # fmt: skip
    exact = xpusim.serve("llama-3-8b", "h100-sxm", radix_cache=False, **load)
    ratio = xpusim.serve("llama-3-8b", "h100-sxm", **load)
    assert exact.preemptions == 0 and exact.mean_batch <= 16.5
    assert ratio.preemptions > 0 and ratio.mean_batch > 20


def test_radix_cache_is_sglangs_flag(capsys):
    from xpusim.cli import main

    with pytest.raises(SystemExit) as e:
        main(["serve", "llama-3-8b", "--chip", "h100-sxm", "--concurrency", "2",
              "--requests", "4", "--no-radix-cache"])  # fmt: skip
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "radix-cache must be used with engine sglang or sglang-0.5.6 or sglang-0.4" in err[0]
