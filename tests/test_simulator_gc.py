"""simulate() runs with the cyclic garbage collector paused (serving/simulator.py
_collector_paused): the figures are the same as a run with it on, and the collector is
back as it was after a run, after a failing run, and left off where the caller had it off."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import xpusim
from xpusim.serving import run as serving_run
from xpusim.serving.load import Requests
from xpusim.serving.simulator import simulate

LOADS = [dict(concurrency=8, prompt=512, gen=128, spread=0.4, requests=32),
         dict(rate=400.0, prompt=400, gen=300, requests=300, find="max-rate",
              slo_ttft_ms=300, slo_tpot_ms=40)]  # fmt: skip


def _collecting(seen: list[bool]):
    """simulate's body with the collector as it is (on), noting that it was on."""
    def body(*args, **kwargs):
        seen.append(gc.isenabled())
        return simulate.__wrapped__(*args, **kwargs)

    return body


@pytest.mark.parametrize("load", LOADS, ids=["closed", "max-rate"])
def test_a_paused_collector_changes_no_figure(load, monkeypatch):
    seen: list[bool] = []
    paused = xpusim.serve("llama-3-8b", "h100-sxm", **load).to_dict()
    monkeypatch.setattr(serving_run, "simulate", _collecting(seen))
    collecting = xpusim.serve("llama-3-8b", "h100-sxm", **load).to_dict()
    assert seen and all(seen)  # the reference did run with the collector on
    assert paused == collecting


def test_the_collector_is_paused_within_a_run_and_restored_after():
    seen: list[bool] = []

    def spied(requests, concurrency, replicas, transfer_s, progress, *rest, **kw):
        return simulate(requests, concurrency, replicas, transfer_s,
                        lambda done: seen.append(gc.isenabled()), *rest, **kw)  # fmt: skip

    with pytest.MonkeyPatch.context() as m:
        m.setattr(serving_run, "simulate", spied)
        xpusim.serve("llama-3-8b", "h100-sxm", concurrency=2, prompt=64, gen=8, requests=4)
    assert seen and not any(seen)  # off at every request's end within the run
    assert gc.isenabled()
    arrivals_missing = Requests(np.array([8]), np.array([4]), None)  # an open loop, no times
    with pytest.raises(AssertionError):
        simulate(arrivals_missing, None, [], lambda tokens: 0.0)
    assert gc.isenabled()  # back on after a failing run
    gc.disable()
    try:
        with pytest.raises(AssertionError):
            simulate(arrivals_missing, None, [], lambda tokens: 0.0)
        assert not gc.isenabled()  # the caller's choice is kept
    finally:
        gc.enable()
