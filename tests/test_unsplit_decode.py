"""Decode attention without split-KV (engines.toml unsplit_decode; serving/step_cost.py
unsplit_floor): TensorRT-LLM's C++ runtime of 2024 (trtllm-cpp) gives each sequence's KV
head one thread block, so a step's attention streams one head's cache at one block's rate."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xpusim
from xpusim.serving import engines as engines_module
from xpusim.serving.engines import DATA, engines
from xpusim.workloads.resolve import load_model

BLOCK_BYTES_PER_S = 21e9  # engines.toml trtllm-cpp on h100-sxm


def _tpot(engine: str, prompt: int, gen: int = 64, chip: str = "h100-sxm", tp: int = 1) -> float:
    """TPOT of one client's requests: decode steps of one sequence at the prompt's context."""
    return xpusim.serve("llama-3-8b", chip, engine=engine, concurrency=1, prompt=prompt, gen=gen,
                        chips=tp, tp=tp, requests=4, warmup=0).tpot_s.mean  # fmt: skip


def _head_bytes_per_token() -> float:
    """One KV head's cache of a token over Llama-3-8B's layers (BF16 keys and values): a
    block's stream at any tp, each chip's blocks one a head it holds."""
    cfg = load_model("llama-3-8b")
    return cfg.num_layers * cfg.head_dim * 2 * 2.0


def test_the_profile_loads_with_its_closed_key_set_and_its_sources():
    cpp = engines()["trtllm-cpp"]
    assert cpp.decode_block_bytes_per_s("h100-sxm") == BLOCK_BYTES_PER_S
    assert cpp.decode_block_bytes_per_s("b200") == 0.0  # not measured there: not modelled
    assert engines()["trtllm"].decode_block_bytes_per_s("h100-sxm") == 0.0  # split-KV
    assert "multi_block_mode" in cpp.unsplit_decode_source and "21 GB/s" in \
        cpp.unsplit_decode_source  # fmt: skip
    assert "unsplit_decode" in DATA.read_text()


def test_an_unknown_or_unsourced_key_in_engines_toml_fails_to_load(tmp_path, monkeypatch):
    """The loader's closed key set: a misspelt field (multi_block for unsplit_decode), a
    rate of 0 or rates without their source is refused, not ignored."""
    text = engines_module.DATA.read_text()
    rate = 'unsplit_decode = { "h100-sxm" = '
    for bad in (text.replace("unsplit_decode = {", "multi_block = {", 1),
                text.replace(rate + "21e9", rate + "0.0", 1),
                text.replace('unsplit_decode_source = "', 'unsplit_decode_source = "" # "', 1)):
        assert bad != text
        path = tmp_path / "engines.toml"
        path.write_text(bad)
        monkeypatch.setattr(engines_module, "DATA", path)
        engines.cache_clear()
        try:
            with pytest.raises((TypeError, AssertionError)):
                engines()
        finally:
            monkeypatch.undo()
            engines.cache_clear()


def test_without_split_kv_a_sequences_decode_slows_with_its_context_at_one_blocks_rate():
    short, long = 200, 6000
    split = _tpot("trtllm", long) - _tpot("trtllm", short)
    unsplit = _tpot("trtllm-cpp", long) - _tpot("trtllm-cpp", short)
    # each of the 8 KV heads' blocks streams its head's cache: the slope is one head's bytes
    # at one block's rate, where split-KV streams all heads' at the chip's bandwidth
    per_token_s = _head_bytes_per_token() / BLOCK_BYTES_PER_S
    assert unsplit == pytest.approx((long - short) * per_token_s, rel=0.1)
    assert unsplit > 4 * split > 0


@settings(max_examples=4, deadline=None)
@given(prompt=st.integers(100, 8000), tp=st.sampled_from([1, 2]))
def test_a_step_is_never_faster_than_its_blocks_stream_nor_than_with_split_kv(prompt, tp):
    unsplit, split = _tpot("trtllm-cpp", prompt, tp=tp), _tpot("trtllm", prompt, tp=tp)
    assert unsplit >= split * (1 - 1e-9)  # the floor only raises the roofline's time
    # at least the mean context's head cache streamed by one block (host time aside)
    assert unsplit >= (prompt + 32) * _head_bytes_per_token() / BLOCK_BYTES_PER_S


def test_on_a_chip_without_the_figure_the_decode_is_the_split_kernels():
    assert _tpot("trtllm-cpp", 4000, chip="b200") == pytest.approx(
        _tpot("trtllm", 4000, chip="b200"), rel=1e-9)


def test_a_run_says_when_its_decode_runs_without_split_kv():
    def notes(engine: str, chip: str) -> str:
        return " ".join(xpusim.serve("llama-3-8b", chip, engine=engine, concurrency=1,
                                     prompt=256, gen=8, requests=2, warmup=0).notes)

    assert "without split-KV" in notes("trtllm-cpp", "h100-sxm")
    assert "without split-KV" not in notes("trtllm-cpp", "b200") + notes("trtllm", "h100-sxm")


def test_a_what_if_copy_keeps_its_base_chips_floor_so_less_bandwidth_is_never_faster():
    """A what-if copy ('h100-sxm[...]') runs its base chip's kernel: the floor stays, and
    a copy with 10% less HBM bandwidth decodes no faster than the catalog chip."""
    from xpusim.hardware.catalog import load_chip
    from xpusim.hardware.whatif import override

    h100 = load_chip("h100-sxm")
    slow = override(h100, "memory.hbm3.bandwidth_bytes_per_s",
                    0.9 * h100.memory[-1].bandwidth_bytes_per_s.value)  # fmt: skip
    assert engines()["trtllm-cpp"].decode_block_bytes_per_s(slow.id) == BLOCK_BYTES_PER_S

    def tpot(chip) -> float:
        return xpusim.serve("llama-3-8b", chip, engine="trtllm-cpp", concurrency=1,
                            prompt=4000, gen=64, requests=4, warmup=0).tpot_s.mean  # fmt: skip

    assert tpot(slow) >= tpot(h100) * (1 - 1e-9)


def test_an_mla_run_is_told_its_floor_is_not_modelled():
    """MLA's cache is one latent a token, not per KV head: unsplit_floor leaves it at the
    split kernel's cost, and the run's note says so rather than claiming the floor."""
    notes = " ".join(xpusim.serve("deepseek-v2-lite", "h100-sxm", engine="trtllm-cpp",
                                  concurrency=1, prompt=256, gen=8, requests=2,
                                  warmup=0).notes)  # fmt: skip
    assert "not modelled for MLA" in notes and "at least one head's cache" not in notes


def test_the_floors_wait_draws_static_power_and_average_power_stays_under_tdp():
    """The time a step waits on its blocks' streams is busy time at the chip's static
    power (step_cost's decode rows): the same profile without the floor spends less a
    token, and neither run's average power exceeds the TDP."""
    cpp = engines()["trtllm-cpp"]

    def run() -> object:
        return xpusim.serve("llama-3-8b", "h100-sxm", engine="trtllm-cpp", concurrency=1,
                            prompt=6000, gen=64, requests=4, warmup=0)  # fmt: skip

    floored = run()
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(engines(), "trtllm-cpp", dataclasses.replace(cpp, unsplit_decode=()))
        plain = run()
    assert floored.tpot_s.mean > 1.2 * plain.tpot_s.mean
    assert floored.joules_per_token > 1.02 * plain.joules_per_token
    assert floored.avg_power_w <= floored.tdp_w and plain.avg_power_w <= plain.tdp_w


def test_a_chips_heads_are_counted_as_partition_splits_them():
    """Qwen2.5-14B's 8 KV heads over tp 5: a chip holds ceil(8 / 5) = 2 of them
    (partition.py), each its own block, so the slope is still one head's cache at one
    block's rate (a floor'd 8 // 5 = 1 head a chip took the chip's 2 heads for one block's)."""
    cfg = load_model("qwen2.5-14b")

    def tpot(prompt: int) -> float:
        return xpusim.serve("qwen2.5-14b", "h100-sxm", engine="trtllm-cpp", concurrency=1,
                            prompt=prompt, gen=64, chips=5, tp=5, requests=4,
                            warmup=0).tpot_s.mean  # fmt: skip

    short, long = 200, 6000
    per_token_s = cfg.num_layers * cfg.head_dim * 2 * 2.0 / BLOCK_BYTES_PER_S
    assert tpot(long) - tpot(short) == pytest.approx((long - short) * per_token_s, rel=0.1)
