"""`--ops` accounts for the whole TTFT and TPOT (issue #46): on a pipeline the time outside
the ops (sends, microbatches waiting at the slowest stage, collectives hidden by --overlap)
has its own named rows, so each phase's rows sum to its figure."""

from __future__ import annotations

import pytest

import xpusim

CASES = [  # (chip, options)
    ("h100-sxm", {"chips": 8, "tp": 8}),
    ("h100-sxm", {"chips": 8, "pp": 4, "tp": 2}),
    ("h100-sxm", {"chips": 8, "pp": 4, "tp": 2, "overlap": True}),
    ("groq-lpu", {"chips": 576, "precision": "int8"}),
]


@pytest.mark.parametrize(("chip", "options"), CASES, ids=["tp8", "pp4", "pp4-overlap", "groq"])
def test_rows_sum_to_ttft_and_tpot(chip, options):
    r = xpusim.simulate("llama-2-70b", chip, **options)
    for phase, total in (("prefill", r.ttft_s), ("decode", r.tpot_s)):
        rows = [o for o in r.ops if o.phase == phase]
        assert sum(o.count * o.time_s for o in rows) == pytest.approx(total, rel=1e-9)
        assert sum(o.share for o in rows) == pytest.approx(1.0, rel=1e-9)


def test_a_pipeline_names_its_wait():
    """Four microbatches on four stages: a step is 4 x the slowest stage, longer than a
    token's trip; the difference is the wait row, not spread over the ops."""
    r = xpusim.simulate("llama-2-70b", "h100-sxm", chips=8, pp=4, tp=2)
    wait = next(o for o in r.ops if o.name == "pipeline.wait")
    trip = sum(o.count * o.time_s for o in r.ops if o.phase == "decode" and o.kind != "wait")
    assert wait.phase == "decode" and wait.time_s > 0
    assert wait.time_s == pytest.approx(r.tpot_s - trip, rel=1e-9)
