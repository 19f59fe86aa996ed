"""`run` sizes a long prefill's activations as engines run it, in chunks of the default
engine's token budget (issue #46: "run and serve share the prefill policy"), so `run` and
`serve` agree on what fits: the batch serve holds at once is the largest batch run fits."""

from __future__ import annotations

import pytest

import xpusim
from xpusim.scenarios.llm.chunking import PrefillChunks, prefill_chunks
from xpusim.scenarios.llm.reference import simulate_reference


def test_long_prompts_fit_where_only_their_activations_did_not():
    """Llama-2-70B, 8 prompts of 126k on 8 H100s: 66 GB of whole-batch prefill activations
    per chip said it needed more chips before; one 8,192-token chunk's are 0.5 GB."""
    result = xpusim.simulate("llama-2-70b", "h100-sxm", chips=8, batch=8, prompt=126_000)
    assert result.fits
    assert result.per_chip_memory_bytes.activations < 1e9
    assert any("124 chunks of at most 8,192" in note for note in result.notes)


def test_chunking_moves_memory_not_time():
    """A prefill over the budget is sized by a chunk; its time is the whole prefill's (about
    twice one sequence's: a little under, the H100's measured BF16 GEMM rows of these
    shapes running 16,384 rows at a higher fraction of peak than 8,192; a chunk's time
    alone would be about 1x)."""
    short = xpusim.simulate("llama-2-7b", "h100-sxm", batch=1, prompt=8192, gen=8)
    long_ = xpusim.simulate("llama-2-7b", "h100-sxm", batch=2, prompt=8192, gen=8)
    assert long_.per_chip_memory_bytes.activations == pytest.approx(
        short.per_chip_memory_bytes.activations, rel=1e-9
    )
    assert long_.ttft_s > 1.8 * short.ttft_s
    assert not any("chunk" in note for note in short.notes)


def test_the_reference_chunks_as_the_engine_does():
    cfg, chip = xpusim.model("llama-2-7b"), xpusim.chip("h100-sxm")
    ref = simulate_reference(cfg, chip, batch=4, prompt=8192, gen=2)
    run = xpusim.simulate(cfg, chip, batch=4, prompt=8192, gen=2)
    assert ref.memory_bytes.activations == pytest.approx(
        run.per_chip_memory_bytes.activations, rel=1e-9
    )


def test_chunks():
    assert prefill_chunks(xpusim.chip("h100-sxm"), 16, 126_000) == PrefillChunks(2_016_000, 8192)
    assert PrefillChunks(2_016_000, 8192).chunks == 247
    assert PrefillChunks(100, 8192).scale == 1.0 and PrefillChunks(100, 8192).note() == ""
    assert PrefillChunks(16_384, 8192).peak_bytes(10.0, 1.0) == 5.0


CASES = [  # (model, chip, chips, prompt, gen)
    ("llama-2-70b", "h100-sxm", 8, 126_000, 128),
    ("llama-3-8b", "h100-sxm", 1, 32_000, 256),
    ("llama-2-7b", "tpu-v4", 1, 8_000, 128),
]


@pytest.mark.parametrize(("model", "chip", "chips", "prompt", "gen"), CASES,
                         ids=[c[0] + "-" + c[1] for c in CASES])  # fmt: skip
def test_run_fits_the_batch_serve_holds(model, chip, chips, prompt, gen):
    """With the ideal engine's memory fraction at 1 (run holds the whole chip, the ideal
    engine the same memory: engines.toml memory_total), the sequences of `prompt + gen`
    serve's KV blocks hold at once are the largest batch run fits: both hold the weights,
    the cache and one token budget's activations. Before chunking, run refused every such
    batch whose whole prefill's activations overflowed."""
    served = xpusim.serve(model, chip, chips=chips, tp=chips, concurrency=1, prompt=prompt,
                          gen=gen, requests=2, warmup=0, kv_utilization=1.0, engine="ideal",
                          max_batch=16)  # fmt: skip
    blocks = -(-(prompt + gen) // served.kv_cache.block_tokens)
    held = served.kv_cache.blocks // blocks
    assert held >= 2

    def fits(batch: int) -> bool:
        return xpusim.simulate(model, chip, chips=chips, tp=chips, batch=batch, prompt=prompt,
                               gen=gen).fits  # fmt: skip

    assert fits(held)
    assert not fits(held + 1)
