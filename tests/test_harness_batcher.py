"""A harness that batches arrivals before the engine sees them (`--hold-s`, `--hold-batch`):
AMD's MLPerf v4.1 harness holds samples until 96 are queued or 0.3 s has passed and sends each
batch whole to one GPU in turn (closed/AMD/code/llama2-70b-99.9/VllmFp8/sync_sut.py)."""

from __future__ import annotations

import pytest

import xpusim
from xpusim.errors import UserError
from xpusim.serving import simulator
from xpusim.serving.load import held


def test_a_batch_leaves_when_full_or_when_the_wait_has_passed():
    # three arrivals within 0.3 s of the first wait for it; the fourth comes past it and
    # takes them along; a lone arrival after an idle spell leaves at once
    dispatch, batch = held([0.0, 0.1, 0.2, 0.35, 1.0], 0.3, 96)
    assert dispatch == [0.35, 0.35, 0.35, 0.35, 1.0] and batch == [0, 0, 0, 0, 1]
    # a batch is at most `most`; the rest wait for the next check
    dispatch, batch = held([0.0, 0.01, 0.02, 0.03], 0.3, 2)
    assert dispatch == [0.01, 0.01, 0.03, 0.03] and batch == [0, 0, 1, 1]
    # with no arrival, the loop checks again `wait` after its last check
    dispatch, _ = held([0.0, 0.05], 0.3, 96)
    assert dispatch == pytest.approx([0.35, 0.35])


def test_a_batcher_of_one_is_round_robin():
    """hold_batch 1: each arrival leaves as it comes, each to the next replica (NVIDIA's MLPerf
    v5.1 harness, closed/NVIDIA/code/llmlib/factory.py round_robin, as its Interactive
    points state it); the wait is never reached."""
    arrivals = [0.0, 0.01, 0.5, 0.51, 2.0]
    dispatch, batch = held(arrivals, 1.0, 1)
    assert dispatch == arrivals and batch == [0, 1, 2, 3, 4]


def test_the_hold_counts_in_ttft_and_each_batch_goes_to_one_replica(monkeypatch, tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,input_tokens,output_tokens\n"
                     + "".join(f"{0.01 * i},64,8\n" for i in range(6)))  # fmt: skip
    runs = []
    original = simulator.simulate
    monkeypatch.setattr("xpusim.serving.run.simulate",
                        lambda *a, **k: runs.append(original(*a, **k)) or runs[-1])
    two = {"chips": 2, "tp": 1, "trace": trace, "warmup": 0}
    free = xpusim.serve("llama-3-8b", "h100-sxm", **two)
    # all six wait for the first one's 0.3 s, checked 0.3 s after the last arrival: 0.35 s
    waited = xpusim.serve("llama-3-8b", "h100-sxm", **two, hold_s=0.3)
    assert waited.ttft_s.mean - free.ttft_s.mean == pytest.approx(0.35 - 0.025, abs=0.02)
    # four fill a batch at 0.03 s and go to replica 0, the other two to replica 1; the
    # shortest-queue routing without the batcher splits them three and three
    xpusim.serve("llama-3-8b", "h100-sxm", **two, hold_s=0.3, hold_batch=4)
    prompts = [sum(n for r, n in zip(run.timeline.replica, run.timeline.prefills, strict=True)
                   if r == k) for run in (runs[0], runs[-1]) for k in (0, 1)]  # fmt: skip
    assert prompts == [3, 3, 4, 2]


def test_hold_needs_arrivals_and_a_positive_wait():
    with pytest.raises(UserError, match="--hold-s batches arrivals"):
        xpusim.serve("llama-3-8b", "h100-sxm", concurrency=4, hold_s=0.3)
    with pytest.raises(UserError, match="hold-s must be a positive"):
        xpusim.serve("llama-3-8b", "h100-sxm", rate=1.0, hold_s=0.0)
    with pytest.raises(UserError, match="--find offline sends every request at once"):
        xpusim.serve("llama-3-8b", "h100-sxm", find="offline", rate=1.0, hold_s=0.3)
