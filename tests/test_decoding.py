"""Beam search, parallel sampling and speculative decoding (scenarios/decoding.py): each
reduces to plain decoding where it should, and costs what its shapes say."""

from __future__ import annotations

from itertools import pairwise

import pytest
from cli_run import refused
from hypothesis import given, settings
from hypothesis import strategies as st

import xpusim
from xpusim.scenarios.decoding import MTP_ACCEPT_LENGTHS, expected_advance, mtp_accept_length
from xpusim.workloads.resolve import load_model

FIGURES = ("ttft_s", "tpot_s", "latency_s", "tokens_per_s", "energy_j", "avg_power_w")


def _figures(result) -> dict:
    return {name: getattr(result, name) for name in FIGURES}


@pytest.mark.parametrize("width", [{"beams": 1}, {"n": 1}])
def test_width_one_is_plain_decoding(width):
    plain = xpusim.simulate("llama-2-7b", "h100-sxm", batch=4, prompt=512, gen=64)
    one = xpusim.simulate("llama-2-7b", "h100-sxm", batch=4, prompt=512, gen=64, **width)
    assert _figures(one) == _figures(plain)
    assert one.memory_bytes == plain.memory_bytes


@settings(max_examples=15, deadline=None)
@given(batch=st.integers(1, 16), prompt=st.integers(1, 3000), gen=st.integers(2, 600),
       width=st.integers(2, 8))  # fmt: skip
def test_samples_prefill_once_and_decode_as_a_wider_batch(batch, prompt, gen, width):
    """n samples per prompt: the prefill of `batch` prompts, then the decode steps of
    batch x n sequences (the same step shapes as a plain batch that wide), the prompt cached
    once per prompt and each sample's tokens apart; beam search has the same cost and
    outputs one sequence per prompt."""
    model = "llama-3-8b"
    samples = xpusim.simulate(model, "h100-sxm", batch=batch, prompt=prompt, gen=gen, n=width)
    beams = xpusim.simulate(model, "h100-sxm", batch=batch, prompt=prompt, gen=gen, beams=width)
    alone = xpusim.simulate(model, "h100-sxm", batch=batch, prompt=prompt, gen=gen)
    wide = xpusim.simulate(model, "h100-sxm", batch=batch * width, prompt=prompt, gen=gen)
    assert samples.ttft_s == alone.ttft_s
    assert samples.prefill_flops == alone.prefill_flops
    assert samples.decode_flops_per_step == wide.decode_flops_per_step
    assert samples.tpot_s == pytest.approx(wide.tpot_s, rel=1e-12)
    per_token = load_model(model).kv_cache_bytes_per_token(2)
    assert samples.memory_bytes.kv_cache == batch * (prompt + width * gen) * per_token
    assert samples.tokens_per_s == pytest.approx(batch * width * gen / samples.latency_s)
    assert beams.latency_s == samples.latency_s
    assert beams.tokens_per_s == pytest.approx(samples.tokens_per_s / width)


def _absorbed(result) -> bool:
    """Whether latent attention's decode steps ran in the absorbed form."""
    return any(op.phase == "decode" and op.name.endswith("q_absorb") for op in result.ops)


def test_latent_attention_keeps_its_absorbed_decode_with_samples():
    """A step of one token per sequence keeps DeepSeek's absorbed decode form."""
    opts = dict(chips=8, precision="fp8", prompt=1024, gen=64)
    two = xpusim.simulate("deepseek-v3", "h200-sxm", batch=2, n=2, **opts)
    wide = xpusim.simulate("deepseek-v3", "h200-sxm", batch=4, **opts)
    assert _absorbed(two) and _absorbed(wide)
    assert two.decode_flops_per_step == wide.decode_flops_per_step


def test_expected_advance_is_leviathans():
    assert expected_advance(0.0, 5) == 1.0
    assert expected_advance(0.8, 5) == pytest.approx((1 - 0.8**6) / 0.2)
    assert expected_advance(0.5, 1) == pytest.approx(1.5)


@settings(max_examples=200, deadline=None)
@given(a=st.floats(0.0, 0.999), b=st.floats(0.0, 0.999), k=st.integers(1, 63))
def test_expected_advance_grows_with_acceptance_and_drafts_and_stays_within_one_to_k_plus_one(
        a, b, k):
    """A step adds its own token and at most the K drafted; more acceptance or one more draft
    token never adds fewer."""
    low, high = sorted((a, b))
    # to rounding: the closed form loses the last bits near a = 1 (a draw of 0.999 vs
    # 0.99899999... read 2e-16 out of order)
    assert 1.0 <= expected_advance(low, k) <= expected_advance(high, k) + 1e-12
    assert expected_advance(high, k) <= k + 1 + 1e-9
    assert expected_advance(high, k) <= expected_advance(high, k + 1) + 1e-12


@settings(max_examples=100, deadline=None)
@given(k=st.integers(1, 63))
def test_deepseeks_mtp_accept_length_grows_with_drafts_within_one_to_k_plus_one(k):
    """The published MTP curve: one more draft token never adds fewer tokens a step, and a
    step adds its own token and at most the K drafted."""
    assert 1.0 <= mtp_accept_length(k) <= mtp_accept_length(k + 1) <= k + 2
    assert mtp_accept_length(k) <= k + 1


def test_deepseeks_mtp_accept_length_is_the_published_figures():
    """1.875 at one draft token (DeepSeek-V3 report's 85-90%), 2.58, 2.82, 2.99 and 3.01 at
    two to five (TensorRT-LLM's DeepSeek-R1 B200 blog), the last past five; `serve`/`run
    --speculative mtp` take it without a rate."""
    assert MTP_ACCEPT_LENGTHS == (1.875, 2.58, 2.82, 2.99, 3.01)
    assert [mtp_accept_length(k) for k in range(7)] == pytest.approx(
        [1.0, 1.875, 2.58, 2.82, 2.99, 3.01, 3.01])
    from xpusim.serving.options import Engine

    how = Engine(speculative="mtp", draft_tokens=3).decoding
    assert (how.step_tokens, how.advance) == (4, pytest.approx(2.82))
    assert how.published and not Engine(speculative="mtp", accept_length=2.0).decoding.published


def test_deepseeks_mtp_figures_are_a_chain_of_drafts():
    """A chain of drafts reaches each depth on no more steps than the depth before it: the
    token each further draft adds, the share of steps reaching its depth, is at most 1 and
    never more than the previous one's; and the rate given the depth before falls with
    depth, as a reused layer's does (not held constant, which gave 2.95 at K = 3)."""
    added = [b - a for a, b in pairwise((1.0, *MTP_ACCEPT_LENGTHS))]
    assert all(1.0 >= x >= y >= 0.0 for x, y in pairwise(added))
    assert added[2] / added[1] < added[1] / added[0]  # acceptance falls with depth


def test_a_measured_accept_length_is_the_tokens_a_step_adds():
    """--accept-length (as engines log it: SGLang's accept len) is the step's advance, the
    same as the acceptance rate that gives it: a step costs what its K drafts cost."""
    a = 0.6
    by_rate = xpusim.simulate("llama-3-70b", "h100-sxm", acceptance=a, draft_tokens=2, **SPEC)
    by_length = xpusim.simulate("llama-3-70b", "h100-sxm", accept_length=1 + a + a * a,
                                draft_tokens=2, **SPEC)  # fmt: skip
    assert by_length.decoding["tokens_per_step"] == pytest.approx(1 + a + a * a)
    assert by_length.decoding["acceptance"] is None
    assert by_length.tpot_s == pytest.approx(by_rate.tpot_s, rel=1e-12)
    none_kept = xpusim.simulate("llama-3-70b", "h100-sxm", accept_length=1, draft_tokens=2,
                                **SPEC)  # fmt: skip
    assert none_kept.tpot_s > by_length.tpot_s


SPEC = dict(chips=8, batch=1, prompt=1024, gen=256, speculative="llama-3-8b")


def test_speculative_decoding_at_acceptance_zero_outputs_a_token_a_step_and_gains_nothing():
    plain = xpusim.simulate("llama-3-70b", "h100-sxm", chips=8, batch=1, prompt=1024, gen=256)
    spec = xpusim.simulate("llama-3-70b", "h100-sxm", acceptance=0.0, **SPEC)
    assert spec.decoding["tokens_per_step"] == 1.0
    assert spec.plan == plain.plan
    assert spec.tpot_s > plain.tpot_s  # a verify of 6 tokens and 5 draft steps per token
    assert spec.ttft_s > plain.ttft_s  # the draft prefills too
    draft = xpusim.simulate("llama-3-8b", "h100-sxm", chips=8, tp=8, batch=1, prompt=1024,
                            gen=256)  # fmt: skip
    # the draft's weights beside the target's on every chip
    assert spec.per_chip_memory_bytes.weights == pytest.approx(
        plain.per_chip_memory_bytes.weights + draft.per_chip_memory_bytes.weights)
    # its step is the target's verify of 6 tokens (at least a plain step) and 5 draft steps
    assert spec.tpot_s >= plain.tpot_s + 5 * draft.tpot_s


def test_speculative_tpot_falls_as_acceptance_rises():
    tpots = [xpusim.simulate("llama-3-70b", "h100-sxm", acceptance=a, **SPEC).tpot_s
             for a in (0.0, 0.3, 0.6, 0.8, 0.95)]  # fmt: skip
    assert tpots == sorted(tpots, reverse=True)
    steps = [xpusim.simulate("llama-3-70b", "h100-sxm", acceptance=a, **SPEC)
             for a in (0.3, 0.9)]  # fmt: skip
    # a step costs about the same whatever is accepted (only the cache grows faster)
    step_s = [r.tpot_s * r.decoding["tokens_per_step"] for r in steps]
    assert step_s[1] == pytest.approx(step_s[0], rel=0.02)


def test_a_verify_step_computes_logits_at_every_fed_token():
    one = xpusim.simulate("llama-3-70b", "h100-sxm", acceptance=0.5, draft_tokens=1, **{
        k: v for k, v in SPEC.items() if k != "speculative"}, speculative="llama-3-8b")
    plain = xpusim.simulate("llama-3-70b", "h100-sxm", chips=8, batch=1, prompt=1024, gen=256)
    # two tokens through every matmul, the LM head included: twice the FLOPs, and a little
    # more attention
    ratio = one.decode_flops_per_step / plain.decode_flops_per_step
    assert 2.0 <= ratio < 2.05


@pytest.mark.parametrize("args, message", [
    (["--speculative", "llama-3-8b"], "--speculative needs --acceptance"),
    (["--acceptance", "0.5"], "--acceptance needs --speculative"),
    (["--beams", "2", "--n", "2"], "give one"),
    (["--beams", "65"], "--beams must be 1-64"),
    (["--speculative", "llama-3-8b", "--acceptance", "0.5", "--n", "2"], "not modelled"),
    (["--speculative", "llama-3-8b", "--acceptance", "0.5", "--chips", "2", "--pp", "2"],
     "--pp 1"),
    (["--speculative", "no-such-model", "--acceptance", "0.5"], "unknown model"),
    (["--acceptance", "1"], "--acceptance"),
    (["--speculative", "llama-3-8b", "--acceptance-lengths", "0.5,0.6"], "add up to 1.1"),
    (["--speculative", "llama-3-8b", "--acceptance-lengths", "0.5,x"], "numbers separated"),
    (["--speculative", "llama-3-8b", "--acceptance-lengths", "0.5,0.5", "--draft-tokens", "3"],
     "--draft-tokens is 3"),
    (["--acceptance-lengths", "0.5,0.5"], "needs --speculative"),
    (["--accept-length", "2"], "--accept-length needs --speculative"),
    (["--speculative", "llama-3-8b", "--accept-length", "4.5", "--draft-tokens", "3"],
     "--accept-length must be in [1, 4]"),
    (["--speculative", "llama-3-8b", "--accept-length", "2", "--acceptance", "0.5"],
     "--acceptance and --accept-length say the same"),
])  # fmt: skip
def test_bad_decoding_options_are_one_line_and_exit_2(capsys, args, message):
    assert message in refused(capsys, "run", "llama-3-70b", "--chip", "h100-sxm", *args)


def test_acceptance_lengths_give_the_advance_their_shares_say():
    """Shares of steps accepting 0, 1, 2 of 2 draft tokens: 1, 2 or 3 tokens a step."""
    spec = xpusim.simulate("llama-3-70b", "h100-sxm", acceptance_lengths="0.2,0.3,0.5",
                           **SPEC)  # fmt: skip
    assert spec.decoding["tokens_per_step"] == pytest.approx(0.2 + 0.6 + 1.5)
    assert spec.decoding["draft_tokens"] == 2
    # a rate gives the same as the geometric shares it implies
    a = 0.6
    shares = ",".join(str(x) for x in ((1 - a), a * (1 - a), a * a))
    by_rate = xpusim.simulate("llama-3-70b", "h100-sxm", acceptance=a, draft_tokens=2, **SPEC)
    by_shares = xpusim.simulate("llama-3-70b", "h100-sxm", acceptance_lengths=shares, **SPEC)
    assert by_shares.tpot_s == pytest.approx(by_rate.tpot_s, rel=1e-12)


def test_a_model_drafts_with_its_own_multi_token_prediction_module():
    """DeepSeek's MTP: one layer of the model's own kind and its LM head per draft token,
    verified in the absorbed (decode) form of latent attention."""
    opts = dict(chips=8, precision="fp8", batch=8, prompt=1024, gen=256)
    plain = xpusim.simulate("deepseek-v3", "h200-sxm", **opts)
    mtp = xpusim.simulate("deepseek-v3", "h200-sxm", speculative="mtp", draft_tokens=1,
                          acceptance=0.8, **opts)  # fmt: skip
    assert mtp.decoding["draft"] == "deepseek-v3-mtp"
    assert mtp.decoding["tokens_per_step"] == pytest.approx(1.8)
    assert mtp.tpot_s < plain.tpot_s
    assert _absorbed(mtp)
    # the verify's two tokens read the latent cache, not a decompressed one: its step
    # costs far less than a prefill's form would (which decompresses the whole context)
    assert mtp.decode_flops_per_step < 3 * plain.decode_flops_per_step
    # the module holds its own 11.5B parameters; the embedding and head are the model's
    # (DeepSeek-V3's README_WEIGHTS.md), so each of 8 chips adds about 11.5B / 8 FP8 bytes
    # (a little more: tensor parallelism replicates the latent projections)
    added = mtp.per_chip_memory_bytes.weights - plain.per_chip_memory_bytes.weights
    assert 11.5e9 / 8 < added < 1.03 * 11.5e9 / 8
    with pytest.raises(xpusim.api.UserError, match="no multi-token-prediction module"):
        xpusim.simulate("llama-3-8b", "h100-sxm", speculative="mtp", acceptance=0.5)
