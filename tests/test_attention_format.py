"""Attention's compute format beside 4-bit GEMMs (scenarios/formats.resolve_attention_format):
no serving engine's attention kernel multiplies in 4 bits, so a 4-bit run computes
attention in FP8 over an FP8 or 4-bit cache and in 16 bits over a wider one."""

from __future__ import annotations

import pytest

import xpusim
from xpusim.hardware.catalog import load_chip
from xpusim.ir.dtypes import DType
from xpusim.scenarios.formats import resolve_attention_format


@pytest.mark.parametrize(("chip", "act", "kv", "attention"), [
    ("b200", DType.NVFP4, DType.FP8, DType.FP8),
    ("b200", DType.NVFP4, None, DType.FP8),  # a 4-bit cache is widened to FP8
    ("b200", DType.NVFP4, DType.BF16, DType.BF16),
    ("mi355x", DType.MXFP4, DType.FP8, DType.FP8),
    ("a100-sxm-80gb", DType.INT4, None, DType.BF16),  # no FP8 on the chip
    ("b200", DType.FP8, None, None),  # 8 bits and wider: attention as the GEMMs
    ("h100-sxm", DType.BF16, DType.FP8, None),
])  # fmt: skip
def test_attention_is_never_4_bit_unless_asked(chip, act, kv, attention):
    assert resolve_attention_format(load_chip(chip), act, None, kv) is attention


def test_asked_for_it_is_what_it_computes_in():
    assert resolve_attention_format(load_chip("b200"), DType.NVFP4, "nvfp4", DType.FP8) is None


def test_a_4_bit_prefill_prices_attention_as_fp8():
    """An 8k-token prompt of DeepSeek-R1 (NVFP4 on 8 B200s): attention is a large part of its
    prefill, so the default is the FP8 one and slower than the 4-bit peak would give."""
    kw = dict(chips=8, tp=8, batch=1, prompt=8192, gen=2, precision="nvfp4", kv_precision="fp8")
    default = xpusim.simulate("deepseek-r1-0528-fp4-v2", "b200", **kw)
    fp8 = xpusim.simulate("deepseek-r1-0528-fp4-v2", "b200", attention_precision="fp8", **kw)
    fp4 = xpusim.simulate("deepseek-r1-0528-fp4-v2", "b200", attention_precision="nvfp4", **kw)
    assert default.ttft_s == fp8.ttft_s
    assert default.ttft_s > 1.05 * fp4.ttft_s
