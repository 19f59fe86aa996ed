"""The engine gates that hold new prompts back: vLLM V0's multi-step scheduling
(--decode-steps), TensorRT-LLM's attention-DP balancer (--adp-balance) and batch waiting
(--batch-wait), and SGLang's receive gate (--recv-interval)."""

from __future__ import annotations

import csv
from collections import deque
from itertools import pairwise
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

import xpusim
from xpusim.cli import cli, main
from xpusim.serving.kv_cache import KVCache
from xpusim.serving.replica import Replica
from xpusim.serving.schedulers import Batch, Sequence, inflight


def _timeline(tmp_path, *args: str) -> list[dict[str, str]]:
    out = tmp_path / "run"
    done = CliRunner().invoke(cli, ["serve", "llama-3-8b", "--chip", "h100-sxm", "--out",
                                    str(out), *args], standalone_mode=False)  # fmt: skip
    assert done.exit_code == 0, done.output
    with (out / "timeline.csv").open() as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("steps", [1, 6])
def test_multi_step_runs_its_decode_steps_between_prefills(tmp_path, steps):
    """vLLM V0 with num_scheduler_steps N: once a decode-only schedule starts, N decode
    iterations run before the scheduler may start a prompt, so between two prefill
    iterations lie 0 or a multiple of N decode iterations (the cohort never empties here:
    about 20 sequences of 200 tokens in flight while requests arrive). Without the gate
    prompts start at the first boundary after they arrive, at any count."""
    rows = _timeline(tmp_path, "--engine", "vllm-v0", "--rate", "40", "--prompt", "128",
                     "--gen", "200", "--requests", "120", "--warmup", "0",
                     "--decode-steps", str(steps))  # fmt: skip
    prefills = [i for i, r in enumerate(rows) if int(r["prefills"]) > 0]
    gaps = [b - a - 1 for a, b in pairwise(prefills)]
    assert len(gaps) > 20
    misaligned = [g for g in gaps if g % 6]
    assert (not misaligned) if steps == 6 else misaligned  # the gate, and that it matters


def test_multi_step_holds_new_prompts_so_ttft_grows_by_its_queue():
    """The hold is before the prompt's first step: TTFT grows by the queued part
    (ServingResult.queue_s, arrival to the first iteration running the prompt)."""
    load = dict(engine="vllm-v0", rate=40, prompt=128, gen=200, requests=120, warmup=20)
    one = xpusim.serve("llama-3-8b", "h100-sxm", **load)
    eight = xpusim.serve("llama-3-8b", "h100-sxm", **load, decode_steps=8)
    assert eight.ttft_s.mean > 2 * one.ttft_s.mean
    for r in (one, eight):
        assert 0 <= r.queue_s.mean < r.ttft_s.mean and r.queue_s.p99 <= r.ttft_s.p99 + 1e-12
    prefill = [r.ttft_s.mean - r.queue_s.mean for r in (one, eight)]
    assert eight.queue_s.mean - one.queue_s.mean > 5 * abs(prefill[1] - prefill[0])


def _replica(ranks: int, waiting: int, decoding: int) -> Replica:
    """Just the state the balancer reads: queues and limits."""
    r = Replica(0, 0, "both", None, None, None, None, 512, 4096, 4096, [0.0],  # type: ignore[arg-type]
                adp_balance=(3, 9), adp_ranks=ranks)  # fmt: skip
    r.waiting = deque(SimpleNamespace() for _ in range(waiting))  # type: ignore[misc]
    r.cohort = {i: SimpleNamespace() for i in range(decoding)}  # type: ignore[misc]
    return r


def test_balancer_holds_a_lone_prompt_until_its_timeout():
    """TensorRT-LLM's _balance_adp_requests: one rank with a prompt, every rank decoding:
    held for timeout_iters - 1 iterations, released on the timeout_iters-th."""
    r = _replica(ranks=8, waiting=1, decoding=64)
    assert [r._admits() for _ in range(9)] == [False] * 8 + [True]


def test_balancer_batches_prompts_on_every_rank_for_its_wait_then_releases():
    r = _replica(ranks=8, waiting=8, decoding=64)
    assert [r._admits() for _ in range(4)] == [False] * 3 + [True]


def test_balancer_releases_at_once_when_a_rank_has_nothing_to_decode():
    assert _replica(ranks=8, waiting=1, decoding=3)._admits()
    assert _replica(ranks=8, waiting=8, decoding=0)._admits()


def test_balancer_counts_iterations_with_no_prompt_waiting():
    """Its count runs whether or not a prompt waits (the code counts every iteration where
    not every rank has one): a prompt arriving 5 iterations into the count waits 4."""
    r = _replica(ranks=8, waiting=0, decoding=64)
    assert not any(r._admits() for _ in range(5))
    r.waiting.append(SimpleNamespace())  # type: ignore[arg-type]
    assert [r._admits() for _ in range(4)] == [False] * 3 + [True]


def test_balancer_lengthens_ttft_and_not_decode():
    load = dict(chips=2, tp=2, dp_attention=True, engine="trtllm", rate=20, prompt=256,
                gen=64, requests=150, warmup=20)  # fmt: skip
    off = xpusim.serve("llama-3-8b", "h100-sxm", **load)
    on = xpusim.serve("llama-3-8b", "h100-sxm", **load, adp_balance="3,9")
    assert on.ttft_s.mean > 2 * off.ttft_s.mean
    assert on.tpot_s.mean == pytest.approx(off.tpot_s.mean, rel=0.1)


def _waiting_batch(decoding: int, prompts: list[int], budget: int = 8192) -> Replica:
    """A replica with TensorRT-LLM's batch waiting at 4 iterations and half the budget,
    `decoding` sequences decoding and `prompts` waiting: its inflight scheduler admits them
    as it would run them."""
    r = Replica(0, 0, "both", None, KVCache(10_000, 32), inflight, None, 512, budget,  # type: ignore[arg-type]
                budget, [0.0], batch_wait=(4, 0.5))  # fmt: skip
    for i in range(decoding):
        s = Sequence(i, 0.0, 100, 50, done=100, blocks=4)
        r.cohort[s.id] = s
    r.waiting.extend(Sequence(1000 + i, 0.0, n, 50) for i, n in enumerate(prompts))
    return r


def _gated(r: Replica) -> Batch:
    """start()'s scheduling and gate, without pricing the step."""
    r.decodes = lambda: bool(r.cohort)  # type: ignore[method-assign]
    batch = r.schedule(r)
    if batch.decode and batch.chunks and r._batch_waits(batch):
        r._hold(batch)
    return batch


def test_batch_waiting_holds_prompts_until_its_timeout_and_gives_their_blocks_back():
    """py_executor._waiting_requests: 300 prompt tokens + 8 decodes < 0.5 x 8192, so the
    prompts are held for 4 schedules (timeout_iters), then run on the 5th; a held prompt
    keeps no blocks and its place at the queue's front."""
    r = _waiting_batch(decoding=8, prompts=[200, 100])
    used = r.kv.used
    seen = [len(_gated(r).chunks) for _ in range(5)]
    assert seen == [0, 0, 0, 0, 2]
    r2 = _waiting_batch(decoding=8, prompts=[200, 100])
    _gated(r2)
    assert r2.kv.used == used and [s.prompt for s in r2.waiting] == [200, 100]
    assert not r2.prefilling and all(s.blocks == s.done == 0 for s in r2.waiting)


def test_batch_waiting_releases_at_its_token_ratio_and_never_without_decodes():
    full = _waiting_batch(decoding=8, prompts=[3000, 1100])  # 4108 >= 4096 tokens
    assert len(_gated(full).chunks) == 2
    idle = _waiting_batch(decoding=0, prompts=[100])  # nothing decodes: no dead wait
    assert len(_gated(idle).chunks) == 1


def test_batch_waiting_lengthens_ttft_and_batches_prompts():
    """Held prompts run together: fewer steps with prompts, each with more of them."""
    load = dict(engine="trtllm", concurrency=32, prompt=256, gen=256, spread=0.5,
                requests=160, warmup=32)  # fmt: skip
    off = xpusim.serve("llama-3-8b", "h100-sxm", **load)
    on = xpusim.serve("llama-3-8b", "h100-sxm", **load, batch_wait="40,0.8")
    assert on.queue_s.mean - off.queue_s.mean > 5 * on.tpot_s.mean
    assert on.tpot_s.mean == pytest.approx(off.tpot_s.mean, rel=0.15)


def _receiving(interval: int, decoding: int) -> Replica:
    r = Replica(0, 0, "both", None, None, None, None, 512, 4096, 4096, [0.0],  # type: ignore[arg-type]
                recv_interval=interval)  # fmt: skip
    r.cohort = {i: SimpleNamespace() for i in range(decoding)}  # type: ignore[misc]
    return r


def test_receive_gate_reads_new_requests_every_interval_decode_steps():
    """SGLang's SchedulerRecvSkipper: each decode loop adds 1, receiving at the interval."""
    r = _receiving(interval=4, decoding=8)
    r.arrive(SimpleNamespace())  # type: ignore[arg-type]
    seen = []
    for _ in range(4):
        r._receive()
        seen.append(len(r.waiting))
    assert seen == [0, 0, 0, 1] and not r.inbox


def test_receive_gate_reads_after_a_prefill_and_when_idle():
    """A prefill weighs 1000: the next loop receives; an idle engine receives at once."""
    r = _receiving(interval=30, decoding=8)
    r._recv_weight = 1000
    r.arrive(SimpleNamespace())  # type: ignore[arg-type]
    r._receive()
    assert len(r.waiting) == 1
    idle = _receiving(interval=30, decoding=0)
    idle.arrive(SimpleNamespace())  # type: ignore[arg-type]
    idle._receive()
    assert len(idle.waiting) == 1


@pytest.mark.parametrize("interval", [1, 12])
def test_receive_gate_spaces_prefills_by_its_interval(tmp_path, interval):
    """Between two prefill iterations lie 0 decode iterations (received right after a
    prefill) or a multiple of the interval; without the gate, any count."""
    rows = _timeline(tmp_path, "--engine", "sglang", "--concurrency", "24", "--prompt", "128",
                     "--gen", "200", "--spread", "0.5", "--requests", "120", "--warmup", "0",
                     "--recv-interval", str(interval))  # fmt: skip
    prefills = [i for i, r in enumerate(rows) if int(r["prefills"]) > 0]
    gaps = [b - a - 1 for a, b in pairwise(prefills)]
    assert len(gaps) > 20
    misaligned = [g for g in gaps if g % 12]
    assert (not misaligned) if interval == 12 else misaligned


def test_receive_gate_lengthens_ttft_by_its_wait_and_not_decode():
    load = dict(engine="sglang", concurrency=32, prompt=256, gen=256, spread=0.5,
                requests=160, warmup=32)  # fmt: skip
    off = xpusim.serve("llama-3-8b", "h100-sxm", **load)
    on = xpusim.serve("llama-3-8b", "h100-sxm", **load, recv_interval=30)
    assert on.queue_s.mean - off.queue_s.mean > 5 * on.tpot_s.mean
    assert on.tpot_s.mean == pytest.approx(off.tpot_s.mean, rel=0.15)


@pytest.mark.parametrize(("args", "says"), [
    (["--adp-balance", "3"], "adp-balance must be WAIT,TIMEOUT"),
    (["--adp-balance", "3,0"], "adp-balance must be WAIT,TIMEOUT"),
    (["--adp-balance", "3,9"], "give --dp-attention"),
    (["--decode-steps", "4"], "with --scheduler continuous"),
    (["--decode-steps", "0"], "decode-steps must be a positive integer"),
    (["--recv-interval", "0"], "recv-interval must be a positive integer"),
    (["--recv-interval", "10", "--engine", "vllm"], "--recv-interval must be used with engine"),
    (["--eager-prefill", "--engine", "trtllm"], "--eager-prefill must be used with engine sglang"),
    (["--batch-wait", "40,0.8"], "--batch-wait must be used with engine trtllm"),
    (["--batch-wait", "40", "--engine", "trtllm"], "batch-wait must be ITERS,RATIO"),
    (["--batch-wait", "40,1.5", "--engine", "trtllm"], "batch-wait must be ITERS,RATIO"),
    (["--batch-wait", "-1,0.8", "--engine", "trtllm"], "batch-wait must be ITERS,RATIO"),
    (["--batch-wait", "40,nan", "--engine", "trtllm"], "batch-wait must be ITERS,RATIO"),
    (["--batch-wait", "40,0.8", "--engine", "trtllm", "--chips", "2", "--tp", "2",
      "--dp-attention"], "drop --dp-attention or --batch-wait"),
])  # fmt: skip
def test_gates_refuse_bad_input_in_one_line(capsys, args, says):
    with pytest.raises(SystemExit) as e:
        main(["serve", "llama-3-8b", "--chip", "h100-sxm", "--concurrency", "2",
              "--requests", "4", *args])  # fmt: skip
    out, err = capsys.readouterr()
    assert e.value.code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert says in err
