"""The physical rules benchmarks/heldout_like_grid.py checks over the held-back-like grid
(Llama-3/Qwen3 on H100/H200 under vLLM, SGLang and TensorRT-LLM, fixed lengths), on a
small grid that runs in seconds, so that the rules that held there stay held:

- TPOT does not fall as clients rise (same model, plan, engine and lengths);
- TTFT does not fall as the prompt grows at 4 clients (no request queues);
- at 4 clients decoding, H200 is not slower than H100 (more bandwidth, the same die),
  --precision fp8 not slower than bf16, and two chips not slower than one.

vLLM's block-FP8 checkpoints are left out of the fp8 rule on purpose: their measured
linear layers (kernel_tables/gemm, vllm-0.19-w8a8-block-fp8 and 0.14's) are slower than
BF16's at small batch on an H200 and at small shapes, as vLLM users report
(vllm-project/vllm#17852, #25540); docs/serving.md and docs/validation.md ("Engine
versions") have the numbers.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import xpusim

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))
try:
    import heldout_like_dsr1_grid as dsr1
    import heldout_like_grid as grid
finally:
    sys.path.remove(str(BENCH))

MODEL = "meta-llama/Llama-3.1-8B-Instruct"  # KV for 64 x 4,256 tokens fits one H100 many times
BATCHED = 2048  # the longest prompt four of which fit one step's 8,192 tokens
ENGINES = ("vllm", "sglang", "trtllm")


def serve(clients: int, prompt: int, gen: int, chip: str = "h100-sxm", **options):
    return xpusim.serve(MODEL, chip, concurrency=clients, requests=4 * clients, prompt=prompt,
                        gen=gen, **options)  # fmt: skip


@settings(max_examples=10, deadline=None)
@given(engine=st.sampled_from(ENGINES), prompt=st.integers(64, 4000),
       gen=st.integers(16, 256), clients=st.sampled_from([(4, 16), (16, 64), (4, 64)]))  # fmt: skip
def test_tpot_does_not_fall_as_clients_rise(engine, prompt, gen, clients):
    few, many = (serve(c, prompt, gen, engine=engine).tpot_s.mean for c in clients)
    assert many >= few


@settings(max_examples=10, deadline=None)
@example(engine="trtllm", prompts=(1599, 2048), gen=16)
@given(engine=st.sampled_from(ENGINES), prompts=st.tuples(st.integers(16, BATCHED),
       st.integers(16, BATCHED)), gen=st.integers(16, 256))  # fmt: skip
def test_ttft_does_not_fall_as_the_prompt_grows(engine, prompts, gen):
    """Where the four clients' prompts prefill in one step (every engine's 8,192-token
    budget on an H100 holds four of up to 2,048). Past that the rule is not physics:
    TensorRT-LLM does not chunk prompts, so four of 4,097 tokens prefill one a step, the
    clients fall out of step and a prompt waits for at most one other, where four of 2,000
    prefill together each round (TTFT mean 140 ms at 4,097 against 175 ms at 2,000;
    test_unchunked_prompts_past_the_budget_queue_one_a_step holds that regime). Below the
    prefill attention tables' shortest prompt too
    (test_prefill_attention_below_the_tables_shortest_prompt)."""
    short, long = (serve(4, p, gen, engine=engine).ttft_s.mean for p in sorted(prompts))
    assert long >= short


def test_prefill_attention_below_the_tables_shortest_prompt():
    """Four prompts of 16 tokens cost no more than four of 24 (TTFT 19.28 against 19.19 ms
    on every engine, the attention op 32.3 us against 23.6, before the envelope): the
    prefill attention tables (shortest row 128 tokens) key their curve by FLOPs, fractions
    of a roofline that is the bytes' at so few tokens, and FLOPs grow as tokens squared,
    bytes as tokens, so the time the curve gave fell from 20 to 32 tokens a prompt. An
    op takes the least the curve gives its bytes at any FLOPs at least its own
    (kernel_tables.flops_envelope_s)."""
    short, long = (serve(4, p, 16, engine="vllm").ttft_s.mean for p in (16, 24))
    assert long >= short


def test_unchunked_prompts_past_the_budget_queue_one_a_step():
    """TensorRT-LLM (no chunked prefill): four 2,000-token prompts prefill in one step
    (8,000 of the 8,192 tokens), every TTFT that whole step; four of 4,097 run one a step,
    so the median TTFT is one prompt's prefill and only requests that collide queue."""
    together, apart = (serve(4, p, 16, engine="trtllm") for p in (2000, 4097))
    assert together.ttft_s.p50 == pytest.approx(together.ttft_s.p99, rel=1e-9)
    assert together.queue_s.mean == 0
    assert apart.ttft_s.p50 < together.ttft_s.p50 < apart.ttft_s.p99
    assert apart.queue_s.mean > 0


@pytest.mark.parametrize("engine", ENGINES)
def test_more_bandwidth_fp8_and_more_chips_do_not_slow_a_small_batchs_decode(engine):
    h100 = {p: serve(4, 1000, 200, precision=p, engine=engine).tpot_s.mean
            for p in ("bf16", "fp8")}  # fmt: skip
    for precision, tpot in h100.items():
        assert serve(4, 1000, 200, "h200-sxm", precision=precision,
                     engine=engine).tpot_s.mean <= tpot  # fmt: skip
        assert serve(4, 1000, 200, precision=precision, engine=engine,
                     tp=2).tpot_s.mean <= tpot  # fmt: skip
    assert h100["fp8"] <= h100["bf16"]


def _point(config, tpot_ms, clients=4, prompt=1000, gen=1000, ttft_ms=100.0):
    return grid.Point(config, clients, prompt, gen, ttft_s=ttft_ms / 1e3, tpot_s=tpot_ms / 1e3,
                      tokens_per_s=1.0)  # fmt: skip


def test_the_grid_names_each_broken_rule():
    """The grid's own checks flag what they are for (a check that never fires hides the
    failures the grid exists to find)."""
    h100 = grid.Config("Qwen/Qwen3-32B", "h100-sxm", 2, precision="bf16")
    points = {(c, *grid.PAIR_LOAD): _point(c, ms) for c, ms in [
        (h100, 20.0), (grid._replace(h100, chip="h200-sxm"), 21.0),
        (grid._replace(h100, precision="fp8"), 12.0),
        (grid._replace(h100, model="Qwen/Qwen3-32B-FP8", precision=None), 25.0),
        (grid._replace(h100, tp=4), 30.0)]}  # fmt: skip
    found = grid.check_pairs(points)
    assert [line.split(":")[0] for line in found] == [
        "h200 slower than h100", "fp8 slower than bf16", "2x tp slower"]
    points[(h100, 16, 1000, 1000)] = _point(h100, 19.0, clients=16)
    points[(h100, 4, 8000, 1000)] = _point(h100, 20.0, prompt=8000, ttft_ms=50.0)
    found = grid.check_curves(points, [h100])
    assert [line.split(":")[0] for line in found] == [
        "TPOT falls with clients", "TTFT falls as the prompt grows"]
    assert grid.nonsense(_point(h100, math.nan)) == "tpot_s = nan"
    refused = grid.Point(h100, 4, 1000, 1000, status="refused", message="memory: the weights "
                         "(32.80 GB on the fullest chip) and activations (0.1 GB) leave ...")
    assert grid.suspicious_refusal(refused).startswith("weights 32.8 of 86 GB")


def test_the_deepseek_grid_holds_its_orderings_where_the_engines_defaults_are_modelled():
    """benchmarks/heldout_like_dsr1_grid.py: under SGLang on 8 B200 and B300, NVFP4 decodes
    no slower than FP8 (InferenceX measured it faster) and B300 no slower than B200, asked
    with the plan alone, and nothing errs."""
    points = [dsr1.serve(dsr1.Point(chip, checkpoint, "sglang", (("tp", 8),), 4, 1024, 64))
              for chip in ("b200", "b300") for checkpoint in ("fp8", "nvfp4")]  # fmt: skip
    assert all(p.status == "ok" for p in points), [p.message for p in points]
    assert dsr1.broken(points, (4, 1024, 64)) == []  # 64 outputs keep the test short
