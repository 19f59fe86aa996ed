"""A lone GEMM with its operands where an operator benchmark kept them (scenarios/gemm.py),
the scenario MTIA v1's GEMM points are scored with."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xpusim
from xpusim.errors import UserError
from xpusim.scenarios.gemm import gemm


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(["mtia-v1", "a100-sxm-80gb", "tpu-v4", "h100-sxm"]),
       st.integers(1, 4096), st.integers(1, 4096), st.integers(1, 4096))  # fmt: skip
def test_no_gemm_beats_the_chips_peak(chip_id, m, k, n):
    chip = xpusim.chip(chip_id)
    precision = "int8" if chip_id != "h100-sxm" else "fp8"
    got = gemm(chip, m, k, n, precision)
    assert 0 < got.ops_per_s <= chip.peak(precision) * (1 + 1e-9)
    assert got.ops_per_s * got.time_s == pytest.approx(2 * m * k * n)


def test_operands_in_dram_never_beat_operands_on_chip():
    """MTIA v1: the same GEMM with its operands in 176 GB/s LPDDR5 instead of 800 GB/s SRAM."""
    mtia = xpusim.chip("mtia-v1")
    for m, k, n in [(128, 1024, 1024), (4096, 1024, 1024), (4096, 4096, 4096)]:
        sram, dram = (gemm(mtia, m, k, n, "int8", where) for where in ("on-chip", "dram"))
        assert dram.time_s >= sram.time_s


def test_bad_setups_are_refused_by_name():
    with pytest.raises(UserError, match="bf16"):
        gemm(xpusim.chip("groq-lpu"), 64, 64, 64, "bf16")
    with pytest.raises(UserError, match="no DRAM"):
        gemm(xpusim.chip("groq-lpu"), 64, 64, 64, "int8", "dram")
