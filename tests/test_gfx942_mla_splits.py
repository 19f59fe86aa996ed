"""AITER's gfx942 MLA decode work layout (cost/split_layout.py, which
benchmarks/gfx942_mla_splits.py prints; docs/validation.md "gfx942 MLA decode at long
context"): the split rule, AITER's fake non-persistent metadata on gfx942
(csrc/kernels/mla/metadata/v1_0_device.cuh), cuts a sequence into at most 16 shares of whole
16-token blocks that cover it, 16 of them once it is long, and the benchmark's printed step
is the decode step over the FP8 cache the MI300X runs keep, not the BF16 one of the H200
runs the shared helper was written for."""

from __future__ import annotations

import math
import sys
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))
try:
    from gfx942_mla_splits import LAYOUT, MLA_OP
    from sglang_r1_step import xpusim_us
finally:
    sys.path.remove(str(BENCH))

SPLITS, KV_GRANULARITY, fake_nps_shares = LAYOUT.splits, LAYOUT.kv_granularity, LAYOUT.shares


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 200_000))
@example(1)
@example(17)
@example(260)
@example(1024)
def test_shares_cover_the_sequence_in_at_most_sixteen_block_runs(tokens):
    """At most 16 shares; each but the last a whole number of blocks, the same for all; the
    last no larger than one share plus a folded remainder of at most 4 tokens; together the
    whole sequence, but for the remainder of at most 4 tokens that a one-share sequence's
    rule leaves out (17-20 tokens: one share of 16; AITER's own rule, kept as it is)."""
    shares = fake_nps_shares(tokens)
    share = (
        shares[0]
        if len(shares) > 1
        else math.ceil(tokens / KV_GRANULARITY / SPLITS) * KV_GRANULARITY
    )
    assert 1 <= len(shares) <= SPLITS
    assert all(s == share and s % KV_GRANULARITY == 0 for s in shares[:-1])
    assert 0 < shares[-1] <= share + 4
    assert tokens - 4 <= sum(shares) <= tokens
    assert sum(shares) == tokens or len(shares) == 1


def _aiters_loop(tokens: int) -> list[int]:
    """The rule as kn_get_mla_metadata_v1_0 steps through it (the eighteenth session's
    transcription, before it moved to src as a closed form): the count, the tail dropped
    from it, the ends, the tail folded into the last."""
    blocks = math.ceil(tokens / KV_GRANULARITY)
    share = math.ceil(blocks / SPLITS) * KV_GRANULARITY
    splits = math.ceil(tokens / share)
    if 0 < tokens % share <= 4 and splits > 1:
        splits -= 1
    ends = [min((sid + 1) * share, tokens) for sid in range(splits)]
    if splits > 1 and tokens - ends[-1] <= 4:
        ends[-1] = tokens
    return [end - sid * share for sid, end in enumerate(ends)]


@settings(max_examples=500, deadline=None)
@given(st.integers(1, 300_000))
@example(17)
@example(260)
@example(4100)
def test_the_closed_form_is_aiters_loop(tokens):
    """split_layout.split_shares, which the cost model takes over arrays, gives the shares
    the metadata kernel's loop does, for every length."""
    assert fake_nps_shares(tokens) == _aiters_loop(tokens)


@settings(max_examples=100, deadline=None)
@given(st.integers(4096, 200_000))
def test_a_long_sequence_takes_sixteen_work_items(tokens):
    """From 4,096 tokens on, the gfx942 rule splits every sequence 16 ways, so 4 sequences
    occupy 64 of the MI300X's 304 CUs however long their context; shorter ones may take
    fewer (260 tokens: 17 blocks in shares of 2, the last 4 tokens folded into the eighth)."""
    assert len(fake_nps_shares(tokens)) == SPLITS
    assert fake_nps_shares(260) == [32] * 7 + [36]


def test_the_step_is_priced_over_the_fp8_cache():
    """The MI300X step's MLA op over the FP8 cache is AITER's table's (over 13 us of fixed
    time), not the HBM roofline a BF16 cache with no gfx942 table would give (about 3 us at
    4 sequences of 1,024 tokens)."""
    fp8_us = xpusim_us(4, 1024, "mi300x", "AMD", "fp8")[MLA_OP][1]
    bf16_us = xpusim_us(4, 1024, "mi300x", "AMD", "bf16")[MLA_OP][1]
    assert fp8_us > 13.0 > bf16_us
