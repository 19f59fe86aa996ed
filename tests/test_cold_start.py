"""A cold start (serve's --cold-start): where an engine's dense block-FP8 GEMMs are a Triton
kernel specialized on the step's token count (engines.toml jit_gemm: SGLang on gfx942), the
first prompt step in each bucket of tokens waits on the host for its shapes to compile."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xpusim
from xpusim.errors import UserError
from xpusim.hardware.catalog import load_chip
from xpusim.serving.engines import engine, engines
from xpusim.serving.run import warmed_steps

FP8_BLOCK = dict(engine="sglang", concurrency=1, requests=6, gen=16, warmup=0,
                 precision="fp8", weight_precision="fp8-block")  # fmt: skip
SGLANG = engine("sglang")
LLAMA_SHAPES = 4  # qkv, o_proj, gate_up, down: Llama-3-8B's dense GEMMs on one chip


def _pair(chip: str = "mi300x", client_warmup: int = 0, **options):
    """The same run from a warm and from a cold compile cache (after `client_warmup`)."""
    kw = {**FP8_BLOCK, **options}
    return xpusim.serve("llama-3-8b", chip, **kw), \
        xpusim.serve("llama-3-8b", chip, cold_start=True, client_warmup=client_warmup, **kw)


def test_each_new_bucket_waits_for_its_shapes_to_compile_once():
    """Six 1,000-token prompts one after another all fall in one bucket: the first waits
    for its four shapes to compile, the five after find them compiled; their decode steps
    are untouched (decode batches are compiled at graph capture)."""
    warm, cold = _pair(prompt=1000)
    compile_s = LLAMA_SHAPES * SGLANG.jit_compile_s
    assert cold.ttft_s.mean - warm.ttft_s.mean == pytest.approx(compile_s / 6, rel=1e-6)
    assert cold.tpot_s.mean == pytest.approx(warm.tpot_s.mean, rel=1e-9)
    assert any(f"{LLAMA_SHAPES} shapes" in n for n in cold.notes)


def test_prompts_in_different_buckets_each_compile():
    """Lengths spread over 600-1,400 tokens meet several buckets of 128: more compiles than
    one, at most one a request."""
    warm, cold = _pair(prompt=1000, spread=0.4)
    per_bucket = LLAMA_SHAPES * SGLANG.jit_compile_s
    compiles = (cold.ttft_s.mean - warm.ttft_s.mean) * 6 / per_bucket
    assert 1.5 < compiles <= 6 + 1e-6
    assert compiles == pytest.approx(round(compiles), abs=1e-6)


def test_a_client_warm_up_leaves_its_buckets_compiled():
    """A client that sent copies of its first prompt before the run (as a wave arriving
    together) compiled that prompt's bucket: equal prompts then never wait."""
    warm, cold = _pair(prompt=1000, client_warmup=1)
    assert cold.ttft_s.mean == pytest.approx(warm.ttft_s.mean, rel=1e-9)


def test_inferencex_warm_up_is_waves_of_copies_with_no_lone_prompt():
    """InferenceX's client: 2 x C copies, C at a time, each wave one prompt step of C x L
    tokens (--disable-radix-cache: no copy is a cache hit), chunked by the token budget; no
    single test prompt, so a lone prompt's bucket is not compiled by it."""
    assert warmed_steps(8, 900, 4, 131072) == (3600, 3600)
    assert warmed_steps(9, 900, 4, 131072) == (3600, 3600, 900)  # a last, partial wave
    assert warmed_steps(8, 900, None, 4096) == (4096, 3104)  # all at once, in two chunks
    assert warmed_steps(128, 1000, 64, 32768) == (32768, 31232) * 2
    assert warmed_steps(0, 900, 4, 131072) == ()
    # four clients: the waves compiled 4 x 1,000 tokens' bucket, which the first four meet;
    # the fifth prompt, alone, meets 1,000's and compiles it (the lone test prompt would have)
    warm, cold = _pair(prompt=1000, concurrency=4, requests=5, client_warmup=8)
    compile_s = LLAMA_SHAPES * SGLANG.jit_compile_s
    assert cold.ttft_s.mean - warm.ttft_s.mean == pytest.approx(compile_s / 5, rel=1e-6)


@settings(max_examples=40, deadline=None)
@given(copies=st.integers(0, 600), prompt=st.integers(1, 9000),
       concurrency=st.one_of(st.none(), st.integers(1, 512)),
       budget=st.integers(256, 65536))  # fmt: skip
def test_warm_up_steps_hold_every_copys_tokens_within_the_budget(copies, prompt, concurrency,
                                                                   budget):  # fmt: skip
    steps = warmed_steps(copies, prompt, concurrency, budget)
    assert sum(steps) == copies * prompt
    assert all(0 < s <= budget for s in steps)


def test_chips_wait_at_static_power_while_the_host_compiles():
    warm, cold = _pair(prompt=1000)
    static_w = load_chip("mi300x").energy.static_power_w.value
    wait_s = LLAMA_SHAPES * SGLANG.jit_compile_s
    assert cold.energy_j - warm.energy_j == pytest.approx(static_w * wait_s, rel=1e-6)


def test_only_the_listed_chips_compile_per_bucket():
    """SGLang on an H100 runs DeepGEMM/FlashInfer block-FP8 GEMMs (not this kernel); a BF16
    checkpoint has no block-FP8 GEMM: --cold-start changes nothing and says so."""
    warm, cold = _pair("h100-sxm", prompt=1000)
    assert cold.ttft_s.mean == warm.ttft_s.mean
    assert any("changes nothing" in n for n in cold.notes)
    kw = {**FP8_BLOCK, "precision": "bf16", "weight_precision": "bf16"}
    bf16 = xpusim.serve("llama-3-8b", "mi300x", prompt=1000, **kw)
    assert xpusim.serve("llama-3-8b", "mi300x", prompt=1000, cold_start=True,
                        **kw).ttft_s.mean == bf16.ttft_s.mean  # fmt: skip


def test_deepseek_r1_at_tp8_compiles_sglangs_six_shapes():
    """The IR's dense block-FP8 GEMMs of DeepSeek-R1 at TP 8 are five of the seven (N, K)
    SGLang routes to AITER's Triton GEMM on gfx950
    (fp8_utils.use_aiter_triton_gemm_w8a8_tuned_gfx950: fused q_a/kv_a 2112 x 7168, q_b
    3072 x 1536, o_proj 7168 x 2048, the dense layers'
    4608 x 7168 and 7168 x 2304) and kv_b_proj (4096 x 512): the other two, the shared
    expert's 512 x 7168 and 7168 x 256, are not dense linears where SGLang fuses the shared
    expert into the routed MoE kernel (FUSED_SHARED_EXPERT), as on gfx942."""
    run = xpusim.serve("deepseek-r1-0528", "mi300x", chips=8, tp=8, engine="sglang",
                       precision="fp8", concurrency=1, requests=2, prompt=900, gen=4,
                       cold_start=True)  # fmt: skip
    assert any("compiles its 6 shapes" in n for n in run.notes)


def test_profiles_state_a_source_and_bad_input_is_refused():
    for p in engines().values():
        assert bool(p.jit_gemm) == bool(p.jit_source) == (p.jit_compile_s > 0)
    assert SGLANG.jit_on("mi300x") and SGLANG.jit_on("mi325x")
    assert not SGLANG.jit_on("mi355x") and not SGLANG.jit_on("h100-sxm")
    with pytest.raises(UserError, match="client_warmup needs cold_start"):
        xpusim.serve("llama-3-8b", "mi300x", **FP8_BLOCK, prompt=100, client_warmup=4)
    with pytest.raises(UserError, match="client_warmup must be a non-negative"):
        xpusim.serve("llama-3-8b", "mi300x", **FP8_BLOCK, prompt=100, cold_start=True,
                     client_warmup=-1)  # fmt: skip


def test_a_bucket_counts_the_kernels_row_tiles_and_m_divisible_by_16():
    """GRID_MN = cdiv(M, 128) x ...: 1-128 tokens one bucket, 129 the next, 1,024 the eighth
    with 897, 1,025 the ninth (a floor would put 1,024 with 1,025 and 1,023 apart); and Triton
    keys M by its divisibility by 16, so 1,008 and 1,000 (one bucket) are two variants."""
    from types import SimpleNamespace

    from xpusim.serving.replica import Replica

    def bucket(tokens: int) -> tuple[int, bool]:
        return Replica._bucket(SimpleNamespace(jit_bucket_tokens=SGLANG.jit_bucket_tokens), tokens)

    assert SGLANG.jit_bucket_tokens == 128
    assert [bucket(t)[0] for t in (1, 128, 129, 897, 1023, 1024, 1025)] == [1, 1, 2, 8, 8, 8, 9]
    assert bucket(1008) != bucket(1000) == bucket(1001)
    assert bucket(1008) == bucket(1024)
