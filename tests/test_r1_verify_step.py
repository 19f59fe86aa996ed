"""DeepSeek-R1's MTP verify on 8 B200 under SGLang, op by op (benchmarks/r1_verify_step.py;
docs/validation.md "DeepSeek-R1's MTP verify"; issue #48): the NVFP4 and FP8 checkpoints run
the same kernels in the same formats over the same FP8 cache, so their verifies cost the same
(the NVFP4 one cost 31.6 ms against 20.3 at 493 sequences: kv_b_proj's weights were read once
a sequence, BF16 against FP8)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))
try:
    from r1_verify_step import SETUPS, verify_ops
finally:
    sys.path.remove(str(BENCH))


@pytest.mark.parametrize(("sequences", "context"), [(4, 1024), (493, 1400)])
def test_the_nvfp4_and_fp8_checkpoints_verify_alike(sequences, context):
    nvfp4, fp8 = (verify_ops(*setup[1:], sequences, context) for setup in SETUPS)
    assert [op[:3] for op in nvfp4] == [op[:3] for op in fp8]  # names, formats, weights
    assert [op[1] for op in fp8] == ["bf16", "fp8", "bf16"]
    assert sum(op[3] for op in nvfp4) == pytest.approx(sum(op[3] for op in fp8), rel=0.01)


def test_a_verify_of_more_sequences_reads_the_same_weights():
    few, many = (verify_ops(*SETUPS[0][1:], n, 1400) for n in (1, 493))
    assert [op[2] for op in few] == [op[2] for op in many]
    assert many[0][3] < 20 * few[0][3]  # q_absorb: not 493 reads of 2.1 MB (215 us before)
