"""Engine profiles as data (serving/engines.toml) and speculative decoding under load."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xpusim
from xpusim.serving.engines import engines

SMALL = dict(prompt=256, gen=32, requests=12, warmup=0)


def test_every_engine_names_a_version_and_a_source_for_each_figure():
    for profile in engines().values():
        assert profile.version
        for source in (profile.source, profile.limits_source, profile.graph_source,
                       profile.kv_block_source, profile.memory_source):  # fmt: skip
            assert source.strip(), profile.name
    assert {"vllm", "sglang", "trtllm", "atom", "ideal"} <= set(engines())


def test_limits_follow_the_chips_memory_as_the_engines_pick_them():
    vllm, sglang = engines()["vllm"], engines()["sglang"]
    big = vllm.limits_on("h100-sxm", 80e9)
    assert (big.token_budget, big.max_batch, big.graph_max) == (8192, 1024, 512)
    small = vllm.limits_on("a100-sxm-80gb", 80e9)  # A100 kept on the small defaults
    assert (small.token_budget, small.max_batch) == (2048, 256)
    assert sglang.limits_on("h100-sxm", 80e9, tp=1).graph_max == 256
    assert sglang.limits_on("h100-sxm", 80e9, tp=8).graph_max == 512
    assert sglang.limits_on("mi300x", 192e9).token_budget == 16384
    assert vllm.captured(512)[:5] == [1, 2, 4, 8, 16] and vllm.captured(512)[-1] == 512
    assert vllm.padded(3, vllm.captured(512)) == 4 and vllm.padded(600, [1, 512]) == 600


def test_serve_runs_vllm_v1_by_default():
    result = xpusim.serve("llama-3-8b", "h100-sxm", concurrency=2, **SMALL)
    assert (result.engine, result.scheduler) == ("vllm", "decode-first")
    # a bf16 Llama runs none of vLLM's measured kernels (block-FP8 GEMMs, fused and MXFP4
    # MoE): the note named all three (cost/engine_kernels.py)
    assert not [n for n in result.notes if n.startswith("engine kernels")], result.notes


def test_a_batch_of_one_costs_the_host_time_and_three_pad_to_four():
    """vLLM 0.11 at one client: ideal's step plus its 160 us, no padding (1 is captured); at
    three a decode step runs as four (the captured size) and costs more than three's. The
    current vLLM (async scheduling on by default) hides the 160 us behind the step."""
    ideal = xpusim.serve("llama-3-8b", "h100-sxm", concurrency=1, engine="ideal", **SMALL)
    vllm = xpusim.serve("llama-3-8b", "h100-sxm", concurrency=1, engine="vllm-0.11", **SMALL)
    assert vllm.tpot_s.mean == pytest.approx(ideal.tpot_s.mean + 160e-6, rel=1e-6)
    current = xpusim.serve("llama-3-8b", "h100-sxm", concurrency=1, **SMALL)
    assert current.tpot_s.mean == pytest.approx(ideal.tpot_s.mean, rel=1e-6)
    three = [xpusim.serve("llama-3-8b", "h100-sxm", concurrency=3, engine=e, **SMALL)
             for e in ("ideal", "vllm-0.11")]  # fmt: skip
    assert three[1].tpot_s.mean > three[0].tpot_s.mean + 160e-6


def test_inflight_reserves_each_requests_whole_length_so_nothing_is_preempted():
    tight = dict(concurrency=16, prompt=256, gen=256, requests=48, warmup=0, kv_blocks=40,
                 kv_block=32)  # fmt: skip
    v1 = xpusim.serve("llama-3-8b", "h100-sxm", engine="vllm", **tight)
    trt = xpusim.serve("llama-3-8b", "h100-sxm", engine="trtllm", **tight)
    assert v1.preemptions > 0 and trt.preemptions == 0


@pytest.mark.parametrize("engine", ["sglang", "atom", "trtllm"])
def test_each_engine_serves_with_its_own_policy(engine):
    result = xpusim.serve("llama-3-8b", "h100-sxm", concurrency=8, engine=engine, **SMALL)
    assert result.scheduler == engines()[engine].policy
    assert result.ttft_s.mean > 0 and result.tpot_s.mean > 0


def _tpot(engine: str = "ideal", **options) -> float:
    return xpusim.serve("llama-3-8b", "h100-sxm", concurrency=4, engine=engine, prompt=128,
                        gen=48, requests=8, warmup=0, **options).tpot_s.mean  # fmt: skip


@settings(max_examples=4, deadline=None)
@given(k=st.integers(1, 4))
def test_speculation_accepting_nothing_is_never_faster_than_none(k):
    """At acceptance 0 a step yields one token, as without speculation, plus the draft's
    work and a verify of K + 1 tokens: never faster."""
    assert _tpot(speculative="eagle", draft_tokens=k, acceptance=0.0) >= _tpot()


@settings(max_examples=4, deadline=None)
@given(low=st.floats(0, 0.95), more=st.floats(0.01, 0.5))
def test_more_acceptance_is_never_slower(low, more):
    """Within 0.1%: a sequence's steps are whole (ceil of its tokens over the mean gain), so
    two rates that round to the same steps differ only in the keys attended, which more
    acceptance reaches sooner (a few parts in 10^5)."""
    high = min(low + more, 0.99)
    slow = _tpot(speculative="eagle", draft_tokens=3, acceptance=low)
    fast = _tpot(speculative="eagle", draft_tokens=3, acceptance=high)
    assert fast <= slow * (1 + 1e-3)


def test_host_work_in_line_exposes_the_engines_host_time_every_iteration():
    """--no-host-overlap (SGLang's EAGLE without spec v2): every iteration waits for the
    host's 2.2 ms (engines.toml sglang per_iteration_s) on top of the device's, where the
    overlap scheduler hides it behind a longer device step."""
    opts = dict(engine="sglang", speculative="eagle", draft_tokens=2, accept_length=2.0)
    overlapped, in_line = _tpot(**opts), _tpot(host_overlap=False, **opts)
    assert _tpot(host_overlap=True, **opts) == overlapped
    # a step of 2 tokens a sequence on average: about 1.1 ms more a token
    assert in_line - overlapped == pytest.approx(2.2e-3 / 2.0, rel=0.15)
    said = xpusim.serve("llama-3-8b", "h100-sxm", concurrency=4, prompt=128, gen=48,
                        requests=8, warmup=0, host_overlap=False, **opts).notes  # fmt: skip
    assert any("runs in line" in note for note in said)


def test_accepted_tokens_per_step_set_the_decode_speed():
    """Acceptance lengths that always take every draft token: each step yields K + 1."""
    all_in = _tpot(speculative="eagle", draft_tokens=2, acceptance_lengths="0,0,1")
    none = _tpot(speculative="eagle", draft_tokens=2, acceptance_lengths="1,0,0")
    assert all_in < none / 2


def test_attention_dp_splits_sglangs_prefill_budget_over_its_ranks_as_each_version_does():
    """SGLang under --enable-dp-attention: 0.5 gives each of the dp ranks chunked_prefill_size
    / dp, 0.4.2-0.4.3 each half of it; vLLM gives each rank its own max_num_batched_tokens
    (tpu-inference's DPScheduler: 'Per-rank limits'; on GPUs an engine core per rank)."""
    assert engines()["sglang"].prefill_split(8192, 8) == (8192, 1024)
    assert engines()["sglang-0.4"].prefill_split(8192, 8) == (32768, 4096)
    assert engines()["vllm"].prefill_split(8192, 8) == (65536, 8192)
    assert engines()["vllm-0.11"].prefill_split(1024, 4) == (4096, 1024)
    assert engines()["sglang"].prefill_split(8192, 1) == (8192, 8192)


def test_attention_dp_gives_each_tensorrt_llm_rank_its_own_max_num_tokens():
    """TensorRT-LLM's every attention-DP rank runs its own scheduler over its own requests
    within max_num_tokens (executor_request_queue.py, _util.py): the step holds ranks x
    the budget, one rank's prompt chunk at most the budget."""
    assert engines()["trtllm"].prefill_split(3456, 8) == (27648, 3456)
    assert engines()["trtllm"].prefill_split(3456, 1) == (3456, 3456)
    load = dict(chips=2, tp=2, dp_attention=True, engine="trtllm", rate=20, prompt=256,
                gen=16, requests=30, warmup=0, token_budget=512)  # fmt: skip
    served = xpusim.serve("llama-3-8b", "h100-sxm", **load)  # a stated budget is a rank's too
    assert any("2 ranks prefills at most 512 tokens" in n for n in served.notes)


def test_tensorrt_llms_host_time_under_attention_dp_grows_with_the_busiest_ranks_sequences():
    """Under attention DP each TensorRT-LLM rank loops over its own requests every iteration
    (PR #16564's root cause, TorchSampler.update_requests), all ranks at once: the host time
    grows with the busiest rank's sequences, 32 us each (the PR's 8.8 ms bubble at 256 a
    rank); the same sequences over more ranks cost less; without attention DP, flat."""
    trtllm = engines()["trtllm"]
    assert trtllm.dp_attention_per_rank_sequence_s == pytest.approx(32e-6)
    assert "#16564" in trtllm.dp_attention_host_source
    assert trtllm.host_s(512, dp_ranks=2) == pytest.approx(8.8e-3, rel=0.01)
    assert trtllm.host_s(512, dp_ranks=8) < trtllm.host_s(512, dp_ranks=2)
    assert trtllm.host_s(513, dp_ranks=2) > trtllm.host_s(512, dp_ranks=2)  # the busiest rank
    assert trtllm.host_s(512) == trtllm.host_s(1) == trtllm.per_iteration_s
    for name, profile in engines().items():  # no other engine's is measured: none charged
        if name != "trtllm":
            assert profile.host_s(512, dp_ranks=2) == profile.host_s(512), name


def test_attention_dp_host_time_slows_the_served_steps():
    """The same TensorRT-LLM run with and without the per-sequence host time: each of its
    iterations waits for the host, so TPOT rises by about 32 us per sequence of a rank (64
    in flight over 2 ranks)."""
    from dataclasses import replace

    load = dict(chips=2, tp=2, dp_attention=True, engine="trtllm", concurrency=64, prompt=128,
                gen=64, requests=128, warmup=0)  # fmt: skip
    charged = xpusim.serve("llama-3-8b", "h100-sxm", **load)
    table = engines()
    kept = table["trtllm"]
    table["trtllm"] = replace(kept, dp_attention_per_rank_sequence_s=0.0)
    try:
        free = xpusim.serve("llama-3-8b", "h100-sxm", **load)
    finally:
        table["trtllm"] = kept
    extra_s = charged.tpot_s.mean - free.tpot_s.mean
    assert 0.5 * 32 * 32e-6 < extra_s < 1.5 * 32 * 32e-6


def test_a_prompt_longer_than_a_ranks_share_takes_several_steps_under_attention_dp():
    """One 4,096-token prompt on 8 chips with attention DP: SGLang 0.5 prefills it in four
    steps of 1,024 on its rank, so its first token comes later than in one step of 4,096."""
    load = dict(chips=8, tp=8, ep=8, dp_attention=True, precision="fp8", concurrency=1,
                prompt=4096, gen=4, requests=2, warmup=0, engine="sglang")  # fmt: skip
    split = xpusim.serve("deepseek-v3", "h200-sxm", **load)
    whole = xpusim.serve("deepseek-v3", "h200-sxm", **load, chunk=4096)
    assert any("prefills at most 1024 tokens" in n for n in split.notes)
    assert not any("prefills at most" in n for n in whole.notes)
    assert split.ttft_s.mean > whole.ttft_s.mean


def _mixed_steps(tmp_path, engine: str) -> int:
    """Steps that prefill and decode at once, DeepSeek-V3 on 8 H200 with attention DP."""
    import csv

    from click.testing import CliRunner

    from xpusim.cli import cli

    out = tmp_path / engine
    args = ["serve", "deepseek-v3", "--chip", "h200-sxm", "--chips", "8", "--tp", "8", "--ep",
            "8", "--dp-attention", "--precision", "fp8", "--rate", "4", "--prompt", "2048",
            "--gen", "32", "--requests", "24", "--warmup", "0", "--engine", engine,
            "--out", str(out)]  # fmt: skip
    done = CliRunner().invoke(cli, args, standalone_mode=False)
    assert done.exit_code == 0, done.output
    with (out / "timeline.csv").open() as f:
        return sum(int(r["decodes"]) > 0 and int(r["prefills"]) > 0 for r in csv.DictReader(f))


def test_sglang_ranks_with_no_prompt_decode_while_others_prefill(tmp_path):
    """SGLang's attention-DP ranks schedule apart: a prefill-first step with fewer prompts
    than ranks decodes the rest; ATOM's prefill-first (no rank schedulers) never mixes."""
    assert _mixed_steps(tmp_path, "sglang") > 0
    assert _mixed_steps(tmp_path, "atom") == 0


def test_vllm_keeps_its_profiling_samplers_peak_out_of_the_kv_cache():
    """vLLM V1 sizes its KV cache after a profiling run whose dummy sampler holds 14 B per
    logit for max_num_seqs requests (engines.toml). At 1,024 sequences that peak (1.84 GB
    for Llama-3's 128,256-token vocabulary) is above the forward's and takes its place; at
    16 it is below, and vLLM's cache is what the same memory rule leaves without it."""
    def tokens(engine: str, max_batch: int) -> int:
        result = xpusim.serve("llama-3-8b", "h100-sxm", engine=engine, max_batch=max_batch,
                              concurrency=2, **SMALL)  # fmt: skip
        return result.kv_cache.capacity_tokens

    per_token = 32 * 8 * 128 * 2 * 2  # layers x KV heads x head dim x (K, V) x BF16
    sampler = engines()["vllm"].sampler_peak_bytes(1024, 128256)
    assert sampler == 14 * 1024 * 128256
    assert engines()["ideal"].sampler_peak_bytes(1024, 128256) == 0
    h100, vllm = xpusim.chip("h100-sxm"), engines()["vllm"]
    # beside the sampler, vLLM's pool loses what ideal's does not: its profiled non-torch
    # memory, and its fraction of what CUDA keeps from the driver's total (memory_total)
    lost = vllm.runtime_bytes(1) + vllm.memory_fraction * (h100.capacity_bytes
                                                           - h100.runtime_capacity_bytes)
    assert abs((tokens("ideal", 16) - tokens("vllm", 16)) * per_token - lost) \
        <= 16 * per_token  # fmt: skip
    held = (tokens("ideal", 1024) - tokens("vllm", 1024)) * per_token - lost
    assert 0.4 * sampler < held <= sampler + 16 * per_token  # less the forward's own peak
