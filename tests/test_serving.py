"""Serving under load (serving/): the step cost against the cost model, the simulation
against `run` where they must agree, queueing laws, the KV cache, and bad input."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import replace
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import xpusim
from xpusim.compiler.partition import partition
from xpusim.cost.op_table import op_table
from xpusim.cost.roofline import HardwareArrays, evaluate, placement_onehot
from xpusim.errors import UserError
from xpusim.ir.op import OpKind
from xpusim.ir.tensor import ROLES, Role
from xpusim.scenarios.llm.inference import chosen_plan
from xpusim.serving.step_cost import Work, step_cost
from xpusim.workloads.transformer import StepShape, build_step


def _cost(model: str, chip: str, max_tokens=4096, max_sampled=64, max_context=8192, **plan):
    cfg, target = xpusim.model(model), xpusim.target(chip)
    setup, cand = chosen_plan(cfg, target, {"batch": 8, "prompt": 512, "gen": 64, **plan})
    one = replace(cand.plan, dp=1)
    cost = step_cost(cfg, cand.setup.system, one, setup.req, cand.placement, max_tokens,
                     max_sampled, max_context)  # fmt: skip
    return cfg, cand, one, setup.req, cost


@pytest.fixture(scope="module")
def llama8b():
    return _cost("llama-3-8b", "h100-sxm")


def _kernel_s(cfg, cand, plan, req, q: list[int], c: list[int], decode: bool = False) -> float:
    """One attention kernel over these sequences, from graphs built for each (the reference
    the step cost's polynomial and table stand in for): counts summed over the sequences,
    then the roofline, times the layers it runs in (one stage); decodes as a decode step's
    (StepShape.decode, as `run` and `serve` build them: priced by decode-attention kernel
    tables), prefill chunks, however short, as a prompt's."""
    step = StepShape(1, np.array(q)[:, None], np.array(c)[:, None], decode=decode)
    graph = partition(build_step(cfg, step, req.act, req.weight, compact=True), plan)
    table = op_table(graph)
    at = [i for i, op in enumerate(table.ops) if op.kind is OpKind.ATTENTION]
    sub = table.subset(ops=np.array(at))

    def summed(values: np.ndarray) -> np.ndarray:
        return np.broadcast_to(values, (len(q), 1, *values.shape[2:])).sum(axis=(0, 1))[None]

    sub = replace(sub, matrix_flops=summed(sub.matrix_flops),
                  vector_flops=summed(sub.vector_flops), role_bytes=summed(sub.role_bytes))
    act = sub.role_bytes[:, ROLES.index(Role.ACTIVATION)]
    where = placement_onehot(act, [cand.placement], len(cand.setup.system.chip.memory))
    costs = evaluate(sub, HardwareArrays.of(cand.setup.system.chip, sub), where)
    return float(costs.time_s[0] @ sub.count)


def test_uniform_iterations_equal_runs_phases(llama8b):
    """A batch of b prompts of p tokens is `run`'s prefill exactly; b sequences decoding at
    context p + 1 are its first decode step."""
    for b, p in ((1, 1024), (4, 300), (16, 64)):
        result = xpusim.simulate("llama-3-8b", "h100-sxm", batch=b, prompt=p, gen=2)
        cost = llama8b[-1]
        prefill = cost(Work.of([], [p] * b, [p] * b, b)).trip_s
        decode = cost(Work.of([p + 1] * b, [], [], b)).trip_s
        assert prefill == pytest.approx(result.ttft_s, rel=1e-12)
        assert decode == pytest.approx(result.tpot_s, rel=1e-3)


@settings(max_examples=25, deadline=None)
@given(decodes=st.lists(st.integers(1, 8000), max_size=40),
       chunks=st.lists(st.tuples(st.integers(1, 700), st.integers(0, 3000)), max_size=4))
def test_step_cost_within_one_percent_of_costing_each_iteration(llama8b, decodes, chunks):
    """Any mix of decodes and prefill chunks (q new tokens after `done` cached ones): the
    tabulated decode kernel and the polynomial prefill kernel against kernels built from
    each sequence's own graph, the token and sampling ops being tables of exact rows."""
    cfg, cand, plan, req, cost = llama8b
    if not decodes and not chunks:
        return
    q = [n for n, _ in chunks]
    c = [n + done for n, done in chunks]
    work = Work.of(decodes, q, c, len(decodes) + len(chunks))
    got = cost(work)
    layers_s = 0.0
    if decodes:
        layers_s += _kernel_s(cfg, cand, plan, req, [1] * len(decodes), decodes, True)
    if chunks:
        layers_s += _kernel_s(cfg, cand, plan, req, q, c)
    token = cost.token_stage_s[work.tokens - 1].sum() + cost.sample_stage_s[work.sampled - 1].sum()
    assert got.trip_s == pytest.approx(token + layers_s, rel=0.01)


def test_decode_table_within_half_a_percent_of_the_roofline(llama8b):
    """The tabulated decode kernel against n sequences' decode graph costed whole (on the
    H100 the decode-attention kernel table floors it; the prefill polynomial no longer
    stands for a decode there, since prefill runs other kernels)."""
    cfg, cand, plan, req, cost = llama8b
    worst = 0.0
    for n in (1, 7, 64):
        for mean in (3, 100, 2047, 7999):
            table = sum(cost._decode(n, n * mean)[:-1])
            exact = _kernel_s(cfg, cand, plan, req, [1] * n, [mean] * n, True)
            worst = max(worst, abs(table / exact - 1))
    assert worst < 0.005


def test_attention_polynomial_matches_the_builders_counts(llama8b):
    cfg, _, plan, req, cost = llama8b
    q, c = np.array([1, 5, 33, 700]), np.array([9, 5, 100, 1800])
    graph = partition(build_step(cfg, StepShape(1, q[:, None], c[:, None]), req.act, req.weight,
                                 compact=True), plan)  # fmt: skip
    table = op_table(graph)
    at = [i for i, op in enumerate(table.ops) if op.kind is OpKind.ATTENTION]
    basis = np.stack([np.ones_like(q), q, c, q * c, q * q], axis=-1).astype(float)
    for name, coef in zip(("matrix_flops", "vector_flops", "role_bytes"),
                          cost.attention.coefficients, strict=True):  # fmt: skip
        built = np.broadcast_to(getattr(table, name), (len(q), 1, *getattr(table, name).shape[2:]))
        built = built[:, 0][..., at]
        fitted = (basis @ coef.reshape(5, -1)).reshape(built.shape)
        np.testing.assert_allclose(fitted, built, rtol=1e-12)


@pytest.fixture(scope="module")
def mla_verify():
    """DeepSeek-V2-Lite (latent attention) on one H100, its table with a verify's kernel,
    and the same table without one."""
    cfg, cand, one, req, plain = _cost("deepseek-v2-lite", "h100-sxm", 4096, 64, 16384)
    cost = step_cost(cfg, cand.setup.system, one, req, cand.placement, 4096, 64, 16384,
                     verify_tokens=4)  # fmt: skip
    return cfg, one, req, cost, plain


def test_a_verifys_polynomial_matches_the_builders_decode_form_counts(mla_verify):
    """A speculative verify's K + 1 tokens attend with the decode kernels (MLA's absorbed
    form, as SGLang's target_verify and TensorRT-LLM's MTP run it): the verify kernel's
    counts at any (q, c) are the decode-form graph's for its ops (q_absorb, the attention
    over the latents, v_absorb), not a prefill chunk's."""
    cfg, plan, req, cost, plain = mla_verify
    assert plain.verify is None
    names = cost.verify.table.names
    assert [n.rsplit(".", 1)[1] for n in names] == ["q_absorb", "attention", "v_absorb"]
    q, c = np.array([1, 2, 4, 6]), np.array([9, 300, 2048, 8191])
    graph = partition(build_step(cfg, StepShape(1, q[:, None], c[:, None], decode=True),
                                 req.act, req.weight, compact=True), plan)  # fmt: skip
    table = op_table(graph)
    at = [table.names.index(n) for n in names]
    basis = np.stack([np.ones_like(q), q, c, q * c, q * q], axis=-1).astype(float)
    for name, coef in zip(("matrix_flops", "vector_flops", "role_bytes"),
                          cost.verify.coefficients, strict=True):  # fmt: skip
        built = np.broadcast_to(getattr(table, name), (len(q), 1, *getattr(table, name).shape[2:]))
        fitted = (basis @ coef.reshape(5, -1)).reshape(built[:, 0][..., at].shape)
        np.testing.assert_allclose(fitted, built[:, 0][..., at], rtol=1e-9)


@given(st.integers(1, 32), st.integers(2, 6), st.integers(16, 8000))
@example(n=1, q=6, c=4096)  # the closest case to the bound
@settings(max_examples=25, deadline=None)
def test_a_verify_costs_more_than_a_decode_and_less_than_a_prefill_chunk(mla_verify, n, q, c):
    """n sequences verifying q tokens each over c keys: a step of more work than their decode
    of one token at the same keys; over a long cache less than the same chunks run as
    prefill, whose attention decompresses every cached latent (kv_b_proj over the context),
    the attention kernels alone under 0.7 of it from 4,096 keys (the most, 0.669, at one
    sequence verifying 6 tokens; 0.53 at 8,000 keys; over a short cache the absorbed form's
    576-wide heads may cost the more). It held them under two thirds until a hypothesis draw
    found that case (the same on the trees before)."""
    _, _, _, cost, plain = mla_verify
    basis = (n, n * q, n * c, n * q * c, n * q * q)
    verify = sum(cost(Work(0, 0, *basis, n, (q,) * n, basis)).stage_s)
    as_prefill = sum(plain(Work(0, 0, *basis, n, (q,) * n)).stage_s)
    decode = sum(cost(Work(n, n * c, 0, 0, 0, 0, 0, n)).stage_s)
    assert decode <= verify
    if c >= 2048:
        assert verify < as_prefill
    if c >= 4096:
        kernels = np.array([basis], dtype=float)
        assert cost.verify.cost(kernels)[0].sum() < 0.7 * cost.attention.cost(kernels)[0].sum()


@given(st.integers(1, 512), st.integers(2, 6), st.integers(16, 8000))
@settings(max_examples=25, deadline=None)
def test_a_verify_reads_its_absorbed_weights_once_whatever_its_sequences(mla_verify, n, q, c):
    """The verify's q_absorb and v_absorb multiply every sequence's tokens by kv_b_proj's
    slices in one batched product, reading those weights once a step: n sequences' verify
    reads the weight bytes one sequence's does (the builder's decode-form graph's), its
    other bytes n times one's. Counted once a sequence, 493 sequences of DeepSeek-R1's MTP
    verify on 8 B200 read them 493 times, 26 ms of a 31.6 ms step (issue #48)."""
    cfg, plan, req, cost, _ = mla_verify
    kernel, seen = cost.verify, []
    with patch.object(type(kernel), "cost_counts", lambda _, m, v, roles: seen.append(roles)):
        kernel.cost(np.array([(n, n * q, n * c, n * q * c, n * q * q)], dtype=float))
        kernel.cost(np.array([(1, q, c, q * c, q * q)], dtype=float))
    many, one = seen[0][0], seen[1][0]
    w = ROLES.index(Role.WEIGHT)
    graph = partition(build_step(cfg, StepShape(1, q, c, decode=True), req.act, req.weight,
                                 compact=True), plan)  # fmt: skip
    table = op_table(graph)
    at = [table.names.index(name) for name in kernel.table.names]
    np.testing.assert_allclose(many[w], table.role_bytes[..., w, at].reshape(-1), rtol=1e-9)
    assert many[w][:1].sum() > 0 and many[w][:1].sum() == one[w][:1].sum()  # q_absorb's
    rest = [r for r in range(len(ROLES)) if r != w]
    np.testing.assert_allclose(many[rest], n * one[rest], rtol=1e-9)


def test_a_tp4_verify_of_one_long_sequence_costs_its_measured_kernel_on_an_mi355x():
    """PR #3003 timed DeepSeek-R1's TP-4 MTP verify on an MI355X, 32 heads x 4 query tokens
    over one sequence of 70,000 tokens, at 95.4 us. The verify's kernel counts its sequences
    at its own K + 1 tokens (OpTable.sequence_bytes; counted at the probes' 7 tokens, one
    sequence of 4 was 4/7 of one and its stream floor 7/4 of its latents: 157 us), and a
    verify of fewer tokens never costs more."""
    cfg, cand, one, req, _ = _cost("deepseek-r1-0528", "mi355x", 512, 8, 80000, chips=4, tp=4,
                                   precision="fp8")  # fmt: skip

    def kernel_s(q: int) -> float:
        verify = step_cost(cfg, cand.setup.system, one, req, cand.placement, 512, 8, 80000,
                           verify_tokens=q).verify  # fmt: skip
        basis = np.array([(1, q, 70000, q * 70000, q * q)], dtype=float)
        matrix, vector, roles = (basis @ c.reshape(5, -1) for c in verify.coefficients)
        table = replace(verify.table, matrix_flops=matrix, vector_flops=vector,
                        role_bytes=roles.reshape(1, len(ROLES), len(verify.table)))  # fmt: skip
        at = verify.table.names.index(next(n for n in verify.table.names if "attention" in n))
        return float(evaluate(table, verify._hw, verify._offchip).time_s[0, at])

    times = [kernel_s(q) for q in (2, 3, 4, 6)]
    assert 0.9 < times[2] / 95.418e-6 < 1.1
    assert np.all(np.diff(times) >= 0)


def test_a_speculative_step_takes_the_blocks_its_tokens_fill():
    """Speculation gains several tokens a step; with SGLang's blocks of one token each step
    takes as many blocks as it gained (it took one, holding a third of the cache it used): 8
    requests of 256 + 512 tokens at once peak at their 6,144 tokens, as without speculation."""
    peaks = []
    for spec in ({}, {"speculative": "eagle", "draft_tokens": 3, "acceptance": 0.8}):
        r = xpusim.serve("llama-3-8b", "h100-sxm", engine="sglang", concurrency=8, requests=8,
                         warmup=0, prompt=256, gen=512, **spec)  # fmt: skip
        assert r.kv_cache.block_tokens == 1
        peaks.append(r.kv_cache.peak_used * r.kv_cache.capacity_tokens)
    assert peaks[1] == pytest.approx(peaks[0], rel=0.01)
    assert peaks[1] == pytest.approx(8 * (256 + 512), rel=0.01)


def test_one_request_at_a_time_is_runs_batch_of_one():
    result = xpusim.serve("llama-3-8b", "h100-sxm", concurrency=1, prompt=1024, gen=128,
                          requests=20, engine="ideal")  # run's step: no host time, no padding
    run = xpusim.simulate("llama-3-8b", "h100-sxm", batch=1, prompt=1024, gen=128)
    assert result.ttft_s.mean == pytest.approx(run.ttft_s, rel=1e-9)
    assert result.tpot_s.mean == pytest.approx(run.tpot_s, rel=1e-3)
    assert result.e2e_s.mean == pytest.approx(run.latency_s, rel=1e-3)


def test_static_batching_of_c_is_runs_batch_of_c():
    for c in (4, 32):
        result = xpusim.serve("llama-3-8b", "h100-sxm", concurrency=c, prompt=512, gen=64,
                              requests=3 * c, scheduler="static", max_batch=c, warmup=0,
                              engine="ideal")
        run = xpusim.simulate("llama-3-8b", "h100-sxm", batch=c, prompt=512, gen=64)
        assert result.ttft_s.mean == pytest.approx(run.ttft_s, rel=1e-9)
        assert result.tpot_s.mean == pytest.approx(run.tpot_s, rel=2e-3)


def test_pipeline_replica_at_concurrency_one_is_runs_trip():
    """A 2-stage replica: one request's tokens cross both stages and the send between."""
    result = xpusim.serve("llama-2-13b", "h100-sxm", chips=2, pp=2, concurrency=1, prompt=256,
                          gen=32, requests=4, warmup=0, engine="ideal")  # fmt: skip
    run = xpusim.simulate("llama-2-13b", "h100-sxm", chips=2, pp=2, microbatches=1, prompt=256,
                          gen=32)  # fmt: skip
    assert result.ttft_s.mean == pytest.approx(run.ttft_s, rel=1e-9)
    assert result.tpot_s.mean == pytest.approx(run.tpot_s, rel=2e-3)


def test_more_clients_raise_ttft_tpot_and_throughput():
    one = xpusim.serve("llama-3-8b", "h100-sxm", concurrency=1, prompt=1024, gen=128,
                       requests=40)  # fmt: skip
    many = xpusim.serve("llama-3-8b", "h100-sxm", concurrency=64, prompt=1024, gen=128,
                        requests=400)  # fmt: skip
    assert many.ttft_s.p50 > one.ttft_s.p50
    assert many.tpot_s.mean > one.tpot_s.mean
    assert many.output_tokens_per_s > 5 * one.output_tokens_per_s


def test_littles_law_and_percentile_order():
    result = xpusim.serve("llama-3-8b", "h100-sxm", rate=8.0, prompt=512, gen=128,
                          spread=0.5, requests=1500, seed=3)  # fmt: skip
    assert result.mean_in_system == pytest.approx(result.requests_per_s * result.e2e_s.mean,
                                                  rel=0.05)  # fmt: skip
    for p in (result.ttft_s, result.tpot_s, result.itl_s, result.e2e_s):
        assert p.p99 >= p.p90 >= p.p50 > 0


def test_more_load_never_lowers_ttft():
    means = [xpusim.serve("llama-3-8b", "h100-sxm", rate=r, prompt=1024, gen=128,
                          requests=400, seed=1).ttft_s.mean for r in (2.0, 8.0, 16.0, 32.0)]
    assert means == sorted(means)


def test_kv_cache_preemptions_counted_and_every_request_finishes():
    roomy = xpusim.serve("llama-3-8b", "h100-sxm", concurrency=32, prompt=512, gen=256,
                         requests=128)  # fmt: skip
    assert roomy.preemptions == 0
    tight = xpusim.serve("llama-3-8b", "h100-sxm", concurrency=32, prompt=512, gen=256,
                         requests=128, kv_blocks=200)  # 3,200 tokens: four requests' worth
    assert tight.preemptions > 0
    assert tight.fits and tight.e2e_s is not None
    assert tight.kv_cache.peak_used <= 1.0
    assert tight.output_tokens_per_s < roomy.output_tokens_per_s


def test_too_small_a_cache_is_an_answer_not_a_crash():
    result = xpusim.serve("llama-3-8b", "h100-sxm", concurrency=2, prompt=512, gen=256,
                          requests=4, kv_blocks=10)  # fmt: skip
    assert not result.fits and "KV cache" in result.reason


def test_same_seed_same_answer_other_seed_other():
    def once(seed):
        return xpusim.serve("llama-3-8b", "h100-sxm", rate=6.0, prompt=512, gen=64, spread=0.5,
                            requests=200, seed=seed).to_dict()  # fmt: skip

    assert once(5) == once(5)
    assert once(5)["ttft_s"] != once(6)["ttft_s"]


def test_chunked_prefill_bounds_the_stall_decodes_see():
    # lengths spread, so that requests arrive while others decode (fixed lengths move in
    # cohorts: every prefill happens between decodes, none in the middle of one)
    options = dict(concurrency=32, prompt=4096, gen=128, spread=0.5, requests=160,
                   token_budget=2048)
    whole = xpusim.serve("llama-3-8b", "h100-sxm", scheduler="continuous", **options)
    chunked = xpusim.serve("llama-3-8b", "h100-sxm", scheduler="chunked", **options)
    assert chunked.itl_s.p99 < whole.itl_s.p99


def test_prefix_caching_shortens_prefills():
    options = dict(concurrency=8, prompt=2048, gen=32, requests=80)
    plain = xpusim.serve("llama-3-8b", "h100-sxm", **options)
    cached = xpusim.serve("llama-3-8b", "h100-sxm", prefix=1536, **options)
    assert cached.ttft_s.mean < 0.6 * plain.ttft_s.mean


def test_engine_host_time_adds_to_every_iteration():
    ideal = xpusim.serve("llama-3-8b", "h100-sxm", concurrency=1, prompt=128, gen=64,
                         requests=5, engine="ideal", scheduler="continuous")  # fmt: skip
    v0 = xpusim.serve("llama-3-8b", "h100-sxm", concurrency=1, prompt=128, gen=64, requests=5,
                      engine="vllm-v0")  # fmt: skip
    assert v0.tpot_s.mean == pytest.approx(ideal.tpot_s.mean + 4e-3 + 35e-6, rel=1e-6)


def test_disaggregation_moves_the_cache_and_finishes():
    result = xpusim.serve("llama-3-8b", "h100-sxm", chips=4, concurrency=32, prompt=1024,
                          gen=64, requests=160, prefill_replicas=1, decode_replicas=3)
    assert result.prefill_replicas == 1 and result.decode_replicas == 3
    assert result.e2e_s.p50 > result.ttft_s.p50 > 0


def test_disaggregated_replicas_each_take_their_own_plan():
    result = xpusim.serve("llama-3-8b", "h100-sxm", chips=8, tp=4, concurrency=32, prompt=1024,
                          gen=64, requests=160, prefill_replicas=1, decode_replicas=2,
                          decode_tp=2)  # fmt: skip
    assert result.plan["tp"] == 4 and result.decode_plan["tp"] == 2
    assert result.chips == 8 and result.e2e_s.p50 > result.ttft_s.p50 > 0
    with pytest.raises(UserError, match="need 12 chips"):
        xpusim.serve("llama-3-8b", "h100-sxm", chips=8, tp=4, concurrency=4, requests=8,
                     prefill_replicas=1, decode_replicas=4, decode_tp=2)


def test_disaggregated_decode_replicas_take_their_own_experts_and_attention_dp():
    """An MoE model's decode replicas with experts over both chips and attention DP while
    the prefill replica splits experts by heads (xpusim plan's per-side layouts), and the
    decode options refused without disaggregation."""
    options = dict(chips=4, tp=2, ep=1, concurrency=8, prompt=512, gen=32, requests=40,
                   prefill_replicas=1, decode_replicas=1)  # fmt: skip
    result = xpusim.serve("deepseek-v2-lite", "h100-sxm", **options, decode_ep=2,
                          decode_dp_attention=True)  # fmt: skip
    assert result.plan["ep"] == 1 and "dp_attention" not in result.plan
    assert result.decode_plan["ep"] == 2 and result.decode_plan["dp_attention"] == 1
    same = xpusim.serve("deepseek-v2-lite", "h100-sxm", **options, decode_ep=1)
    assert same.decode_plan is None  # as the prefill replicas': one plan
    with pytest.raises(UserError, match="decode_dp_attention applies to disaggregation"):
        xpusim.serve("deepseek-v2-lite", "h100-sxm", chips=2, concurrency=2, requests=4,
                     decode_dp_attention=True)  # fmt: skip


def test_find_pd_split_tries_every_split_of_the_smallest_fitting_replicas():
    result = xpusim.serve("llama-3-8b", "h100-sxm", chips=4, rate=20.0, prompt=1024, gen=64,
                          requests=200, find="pd-split", slo_ttft_ms=500, slo_tpot_ms=30)
    assert [t["prefill_replicas"] for t in result.search["trials"]] == [1, 2, 3]
    top = max(t["goodput_requests_per_s"] for t in result.search["trials"])
    chosen = result.search["trials"][result.search["prefill_replicas"] - 1]
    assert chosen["goodput_requests_per_s"] >= 0.99 * top
    assert result.prefill_replicas + result.decode_replicas == 4


def test_find_max_rate_meets_the_slos_and_the_next_rate_up_does_not():
    result = xpusim.serve("llama-3-8b", "h100-sxm", find="max-rate", prompt=512, gen=128,
                          requests=300, slo_ttft_ms=100, slo_tpot_ms=12)  # fmt: skip
    rate = result.search["rate"]
    assert rate > 0 and result.ttft_s.p99 <= 0.1 and result.tpot_s.p99 <= 0.012
    failing = [t["rate"] for t in result.search["trials"] if not t["meets"]]
    assert failing and min(failing) > rate


def test_find_min_chips_for_a_rate():
    result = xpusim.serve("llama-3-8b", "h100-sxm", find="min-chips", rate=100.0, prompt=512,
                          gen=128, requests=400, slo_ttft_ms=500, slo_tpot_ms=30)  # fmt: skip
    chips = result.search["chips"]
    assert chips >= 2 and result.chips == chips
    fewer = [t for t in result.search["trials"] if t["chips"] < chips]
    assert all(not t["meets"] for t in fewer)


def test_recommendation_serving_reports_p99_and_goodput():
    low = xpusim.serve("dlrm-v2", "mtia-v1", rate=2000, sla_ms=10, requests=4000)
    high = xpusim.serve("dlrm-v2", "mtia-v1", rate=20000, sla_ms=10, requests=4000)
    assert high.latency_s.p99 >= high.latency_s.p50 > 0
    assert high.goodput_queries_per_s > low.goodput_queries_per_s
    assert high.mean_batch > low.mean_batch
    assert high.avg_power_w <= high.tdp_w


def test_trace_replay_accepts_azure_columns(tmp_path):
    trace = tmp_path / "azure.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                     "2023-11-16 18:15:46.6805900,374,44\n"
                     "2023-11-16 18:15:50.9951690,396,109\n"
                     "2023-11-16 18:15:51.1200000,879,2\n")  # fmt: skip
    result = xpusim.serve("llama-3-8b", "h100-sxm", trace=str(trace))
    assert result.requests == 3 and result.prompt_mean == pytest.approx((374 + 396 + 879) / 3)


def _cli(*argv):
    from click.testing import CliRunner

    from xpusim.cli import cli

    return CliRunner().invoke(cli, list(argv), standalone_mode=False)


@pytest.mark.parametrize("argv, says", [
    (["--concurrency", "0"], "concurrency"),
    (["--rate", "-1"], "rate"),
    (["--concurrency", "4", "--gen", "0"], "gen"),
    (["--concurrency", "4", "--slo-ttft-ms", "0"], "--slo-ttft-ms"),  # as typed
    (["--concurrency", "4", "--slo-tpot-ms", "nan"], "--slo-tpot-ms"),
    (["--concurrency", "4", "--scheduler", "chunkd"], "chunked"),
    (["--concurrency", "4", "--engine", "vlm"], "vllm"),
    (["--concurrency", "4", "--rate", "3"], "exactly one"),
    (["--find", "max-rate"], "slo"),
    (["--rate", "2", "--chips", "8", "--prefill-replicas", "1", "--decode-replicas", "1",
      "--decode-tp", "3"], "--decode-tp 3"),  # the message named --tp
    # a block of 2^40 tokens left an H100 "room for 0 tokens of KV cache"
    (["--concurrency", "4", "--kv-block", str(2**40)], "--kv-block"),
    # a shared prefix longer than the prompts that begin with it was cut short unsaid
    (["--concurrency", "4", "--prompt", "100", "--prefix", "5000"], "prefix (5000 tokens)"),
    (["--concurrency", "2", "--acceptance", "0.5"], "--speculative"),
    (["--concurrency", "2", "--speculative", "mtp", "--acceptance", "0.5"],
     "multi-token-prediction"),
    (["--concurrency", "2", "--engine", "sglng"], "sglang"),
])  # fmt: skip
def test_bad_input_exits_2_with_one_line(argv, says):
    import subprocess
    import sys

    code = "from xpusim.cli import main; main()"
    done = subprocess.run([sys.executable, "-c", code, "serve", "llama-3-8b", "--chip",
                           "h100-sxm", *argv], capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in done.stderr


@pytest.mark.parametrize(("rows", "argv", "says"), [
    # a max-rate search draws its own arrivals: a trace's would be dropped unsaid (it raised)
    ("0,100,10\n0.5,200,20\n", ["--find", "max-rate", "--slo-ttft-ms", "100"], "--lengths"),
    # arrivals whose span overflows a float: refused, without a warning line or an 'inf'
    ("1e308,100,10\n-1e308,100,10\n", [], "span past any float"),
    ("0,100\n", [], "line 2: no value in column 'output_tokens'"),  # said float(None) failed
])  # fmt: skip
def test_bad_trace_use_exits_2_with_one_line(tmp_path, rows, argv, says):
    import subprocess
    import sys

    trace = tmp_path / "trace.csv"
    trace.write_text("arrival_s,input_tokens,output_tokens\n" + rows)
    code = "from xpusim.cli import main; main()"
    done = subprocess.run([sys.executable, "-c", code, "serve", "llama-3.2-1b", "--chip",
                           "h100-sxm", "--trace", str(trace), *argv], capture_output=True,
                          text=True)  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "inf" not in lines[0], done.stderr


def test_a_trace_line_that_does_not_parse_is_named(tmp_path):
    trace = tmp_path / "bad.jsonl"
    trace.write_text('{"arrival_s": 0, "input_tokens": 10, "output_tokens": 5}\n'
                     '{"arrival_s": 1, "input_tokens": "ten", "output_tokens": 5}\n')  # fmt: skip
    with pytest.raises(UserError, match="line 2"):
        xpusim.serve("llama-3-8b", "h100-sxm", trace=str(trace))
    trace.write_text('{"arrival_s": 0, "input_tokens": 10, "output_tokens": 0}\n')
    with pytest.raises(UserError, match="line 1"):
        xpusim.serve("llama-3-8b", "h100-sxm", trace=str(trace))
    trace.write_text('{"arrival_s": 0, "input_tokens": true, "output_tokens": 5}\n')
    with pytest.raises(UserError, match="line 1: token count True"):  # was read as 1 token
        xpusim.serve("llama-3-8b", "h100-sxm", trace=str(trace))


def test_cli_json_is_the_results_dict_and_out_writes_rows(tmp_path):
    out = tmp_path / "serve"
    done = _cli("serve", "llama-3-8b", "--chip", "h100-sxm", "--concurrency", "4",
                "--requests", "20", "--json", "--out", str(out))  # fmt: skip
    assert done.exit_code == 0, done.output
    data = json.loads(done.output)
    assert set(data["ttft_s"]) == {"mean", "p50", "p90", "p99"}
    rows = (out / "requests.csv").read_text().splitlines()
    assert len(rows) == 21 and rows[0].startswith("id,arrival_s")
    assert (out / "timeline.csv").exists()
    if importlib.util.find_spec("matplotlib"):  # the `plot` extra: TTFT/TPOT distributions
        assert str(out / "latency.png") in data["written"]
        assert (out / "latency.png").stat().st_size > 0


def test_a_sweep_with_a_load_serves_each_point(tmp_path):
    """Serving options in `xpusim sweep` make each point an `xpusim serve`; the front is
    tokens/s per chip against tokens/s per user, under load."""
    done = _cli("sweep", "llama-3-8b", "--chip", "h100-sxm", "--concurrency", "1,16",
                "--prompt", "512", "--gen", "64", "--requests", "40", "--out", str(tmp_path),
                "--workers", "1", "--no-plots", "--json")  # fmt: skip
    assert done.exit_code == 0, done.output
    summary = json.loads(done.output)
    assert summary["objectives"] == ["tokens_per_s_per_user", "tokens_per_s_per_chip"]
    header = (tmp_path / "results.csv").read_text().splitlines()[0].split(",")
    assert {"ttft_s.p99", "tpot_s.mean", "concurrency"} <= set(header)
    direct = xpusim.serve("llama-3-8b", "h100-sxm", concurrency=16, prompt=512, gen=64,
                          requests=40)  # fmt: skip
    rows = [r for r in summary["pareto"] if r["concurrency"] == 16]
    assert rows and rows[0]["tokens_per_s_per_chip"] == pytest.approx(direct.tokens_per_s_per_chip)


@pytest.mark.parametrize("chip", ["mtia-v1", "tpu-v4", "groq-lpu", "apple-m2-ane", "mi300x",
                                  "a100-sxm-80gb", "h200-sxm"])  # fmt: skip
def test_every_chip_serves_or_says_why_not(chip):
    result = xpusim.serve("llama-2-7b", chip, concurrency=4, prompt=256, gen=32, requests=12,
                          precision="int8")  # fmt: skip
    if result.fits:
        assert 0 < result.ttft_s.p50 <= result.e2e_s.p50
        assert 0 < result.avg_power_w <= result.tdp_w
    else:
        assert result.reason and result.ttft_s is None


@settings(max_examples=12, deadline=None)
@given(clients=st.integers(1, 24), prompt=st.integers(8, 600), gen=st.integers(2, 48),
       scheduler=st.sampled_from(["static", "continuous", "chunked"]),
       spread=st.sampled_from([0.0, 0.5]))  # fmt: skip
def test_any_load_keeps_the_invariants(clients, prompt, gen, scheduler, spread):
    """Every request finishes; no request sees tokens faster than it would alone (more work
    in an iteration never makes it shorter); average power stays within TDP."""
    result = xpusim.serve("llama-3-8b", "h100-sxm", concurrency=clients, prompt=prompt,
                          gen=gen, spread=spread, requests=3 * clients, scheduler=scheduler,
                          warmup=0, token_budget=512)  # fmt: skip
    alone = xpusim.simulate("llama-3-8b", "h100-sxm", prompt=prompt, gen=gen)
    assert result.fits and result.e2e_s.p99 >= result.e2e_s.p50 >= result.ttft_s.p50 > 0
    if spread == 0:
        assert result.tpot_s.p50 >= alone.tpot_s * (1 - 1e-3)
        assert result.ttft_s.p50 >= alone.ttft_s * (1 - 1e-9)
    assert 0 < result.avg_power_w <= result.tdp_w


def test_what_serving_does_not_model_of_attention_is_said():
    """Serving's attention polynomial for prefill chunks is read off prefill graphs at small
    probe shapes: a sliding window is not in it, and the result says so. Latent attention's
    absorbed decode is costed (on run's decode graph) and so is not named."""
    from xpusim.serving.run import unmodelled_attention

    r = xpusim.serve("gemma-2-9b", "h100-sxm", concurrency=2, requests=20, prompt=256, gen=16)
    assert any("4096-token sliding window of 21 of 42 layers" in n for n in r.notes)
    assert unmodelled_attention(xpusim.model("deepseek-v3")) == []
    assert unmodelled_attention(xpusim.model("llama-2-7b")) == []


@pytest.mark.parametrize(("options", "says"), [
    ({"concurrency": 2.5}, "concurrency must be a positive integer"),  # said "batch"
    ({"rate": "x"}, "rate must be a positive number"),  # a TypeError in math.isfinite
    ({"concurrency": 2, "spread": "a"}, "spread must be in"),
    ({"rate": 1, "burstiness": True}, "burstiness must be a positive number"),
])  # fmt: skip
def test_python_callers_get_the_option_named(options, says):
    with pytest.raises(UserError, match=says):
        xpusim.serve("llama-3.2-1b", "h100-sxm", **options)


def test_a_result_says_when_the_largest_batch_held_requests_back():
    """64 clients against --max-batch 16: iterations sit at 16 sequences with requests
    waiting and the KV cache nearly empty, and the result says the setting bound; with
    room for every client it says nothing."""
    run = dict(concurrency=64, prompt=256, gen=32, requests=256, precision="bf16")
    bound = xpusim.serve("llama-3-8b", "h100-sxm", max_batch=16, **run)
    (note,) = [n for n in bound.notes if n.startswith("--max-batch 16 bound")]
    assert "a larger --max-batch would admit them" in note
    free = xpusim.serve("llama-3-8b", "h100-sxm", max_batch=64, **run)
    assert not [n for n in free.notes if "--max-batch" in n]


def test_disaggregated_decode_replica_runs_under_chunked_scheduler():
    """A decode replica whose only new sequences were prefilled elsewhere decodes them: the
    chunked scheduler asked its cohort before they joined and returned an empty batch, so
    every request hung ("500 requests never finished", a RuntimeError traceback)."""
    runs = {s: xpusim.serve("llama-3-8b", "h100-sxm", chips=2, prefill_replicas=1,
                            decode_replicas=1, scheduler=s, concurrency=4, requests=40)
            for s in ("chunked", "continuous")}  # fmt: skip
    assert runs["chunked"].tpot_s.mean == pytest.approx(runs["continuous"].tpot_s.mean, rel=0.05)
