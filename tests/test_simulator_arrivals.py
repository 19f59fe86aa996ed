"""An open loop's arrivals come from a cursor merged with the event heap, and a Steady or
Decision is asked only at instants with an end (serving/simulator.py simulate): every
figure equals the plain loop's (`reference`: every arrival in the heap, the check at every
instant), on one replica (its decode stretches), on several (join the shortest queue),
disaggregated, with a harness's held arrivals (equal dispatch times, out of arrival order),
a max-rate search (Verdicts and Decisions stopping trials) and a run until steady; and a
closed loop's first requests, one a client at one instant, from the same cursor (a closed
loop, a burst, an offline burst and a closed loop behind an engine's front end)."""

from __future__ import annotations

import pytest

import xpusim
from xpusim.serving import run as serving_run
from xpusim.serving.simulator import simulate

OPEN = dict(rate=60.0, prompt=512, gen=96, spread=0.5, requests=400)
LOADS = {
    "one-replica": dict(OPEN),
    "replicas": dict(OPEN, chips=4, tp=1, rate=240.0),
    "disaggregated": dict(OPEN, chips=4, prefill_replicas=1, decode_replicas=3),
    "max-rate": dict(rate=400.0, prompt=400, gen=300, requests=300, find="max-rate",
                     slo_ttft_ms=300, slo_tpot_ms=40),
    "steady": dict(rate=20.0, requests=3_000, prompt=256, gen=32, spread=0.5, chips=2, tp=1,
                   until="steady"),
    # closed loops: the clients' first requests from the cursor, the rest from the heap
    "closed": dict(concurrency=24, prompt=512, gen=96, spread=0.5, requests=200, chips=2,
                   tp=1),
    "burst": dict(concurrency=300, prompt=300, gen=40, spread=0.5, requests=300, warmup=0),
    "offline": dict(find="offline", prompt=128, gen=64, requests=600, chips=2, tp=1,
                    warmup=0),
    "closed-frontend": dict(concurrency=8, prompt=256, gen=32, spread=0.5, requests=64,
                            engine="vllm-0.11"),
}


def _plain(*args, **kwargs):
    return simulate(*args, **kwargs, reference=True)


@pytest.mark.parametrize("load", LOADS.values(), ids=LOADS.keys())
def test_the_arrival_cursor_changes_no_figure(load, monkeypatch):
    fast = xpusim.serve("llama-3-8b", "h100-sxm", **load).to_dict()
    monkeypatch.setattr(serving_run, "simulate", _plain)
    assert xpusim.serve("llama-3-8b", "h100-sxm", **load).to_dict() == fast


@pytest.mark.parametrize("hold", [{}, {"hold_s": 0.05, "hold_batch": 4}], ids=["tied", "held"])
def test_tied_and_held_arrivals_keep_the_heap_order(hold, monkeypatch, tmp_path):
    """Arrivals at one time (a trace's, or a harness's batch released at once) are handled in
    request order; a batcher can send a later arrival before an earlier one's batch."""
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,input_tokens,output_tokens\n"
                     + "".join(f"{0.02 * (i // 3)},{64 + 400 * (i % 5)},{8 + 9 * (i % 7)}\n"
                               for i in range(90)))  # fmt: skip
    load = {"chips": 2, "tp": 1, "trace": trace, "warmup": 0, **hold}
    fast = xpusim.serve("llama-3-8b", "h100-sxm", **load).to_dict()
    monkeypatch.setattr(serving_run, "simulate", _plain)
    assert xpusim.serve("llama-3-8b", "h100-sxm", **load).to_dict() == fast


HOLDING = {
    "replicas": dict(OPEN, chips=4, tp=1, rate=240.0),
    "disaggregated": dict(OPEN, chips=4, prefill_replicas=1, decode_replicas=3),
    "sglang-receive-gate": dict(OPEN, chips=2, tp=1, rate=120.0, engine="sglang",
                                recv_interval=10),
    "preempting": dict(OPEN, chips=2, tp=1, rate=200.0, kv_blocks=150),
    "batch-wait": dict(OPEN, chips=2, tp=1, rate=120.0, engine="trtllm", batch_wait="6,0.5"),
    "pipeline": dict(OPEN, model="llama-2-13b", chips=2, pp=2, rate=20.0),
    "static": dict(OPEN, chips=2, tp=1, rate=60.0, scheduler="static", max_batch=32),
}


@pytest.mark.parametrize("load", HOLDING.values(), ids=HOLDING.keys())
def test_a_replicas_load_is_the_requests_it_holds(load, monkeypatch):
    """Replica.load, kept as requests arrive and finish, is its queues' lengths counted
    (Replica.queued) after every arrival, every iteration begun and every finish: through
    preemptions, a receive gate's inbox, batch waiting's held prompts, pipeline lanes and
    a prefill replica handing its prompts on."""
    from xpusim.serving.replica import Replica

    checked = []

    def holding(method):
        def checked_call(self, *args):
            out = method(self, *args)
            assert self.load == self.queued
            checked.append(self.load)
            return out
        return checked_call

    for name in ("arrive", "start", "finish"):
        monkeypatch.setattr(Replica, name, holding(getattr(Replica, name)))
    load = dict(load)
    xpusim.serve(load.pop("model", "llama-3-8b"), "h100-sxm", **load)
    assert max(checked) > 1
