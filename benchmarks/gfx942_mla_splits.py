"""Prices DeepSeek-R1 FP8's decode step under SGLang on 8 MI300X (TP 8) op by op at 4
sequences of 1,024 and 5,000 cached tokens, and sets xpusim's MLA decode op beside the work
layout AITER gives that op on gfx942 (docs/validation.md "gfx942 MLA decode at long context";
issue #48: InferenceX's MI300X/MI325X SGLang TPOT at 0.44-0.84x).

    python benchmarks/gfx942_mla_splits.py            # MI300X
    python benchmarks/gfx942_mla_splits.py mi325x

Needs xpusim on the path; it changes nothing and reads no measurement.

At TP 8 each GPU decodes 16 of DeepSeek-R1's 128 heads over the FP8 latent cache; SGLang's
AITER backend (python/sglang/srt/layers/attention/aiter_backend.py: at 16 heads `fast_mode =
False`, `intra_batch_mode = True`, "fake non-persistent") builds AITER's metadata through
get_mla_metadata_v1_0_device (ROCm/aiter csrc/kernels/mla/metadata.cu, `else if
(intra_batch_mode)`), whose split rule on gfx942 is a constant: `get_local_splits` returns 16
under `__gfx942__` (csrc/kernels/mla/metadata/v1_0_device.cuh, unchanged from PR #1472 of
2025-12-08 to 1e8c33fd62 of 2026-08-14). So each sequence is cut into at most 16 work items
of whole 16-token blocks, each CU takes a run of consecutive items, and 4 sequences keep 64
of the 304 CUs busy: the op's time past its fixed part goes with the busiest CU's tokens, not
with the chip's bandwidth. xpusim prices the op at least its table's fixed time plus the
busiest CU's items at one CU's HBM read rate (51 GB/s, AMD TransferBench's one-CU read on an
MI300X: cost/split_layout.py). The table prints, per sequences and tokens, xpusim's op, the
work items, the CUs they occupy, one split's tokens, the busiest CU's time at that rate, and
the rate per CU that xpusim's price of the extra tokens implies (the increment over 1,024
tokens). No timing of AITER's kernel on gfx942 past 64 tokens is published (the docs section
says which row would set its own rate).
"""

from __future__ import annotations

import math
import sys

from sglang_r1_step import xpusim_us

from xpusim.cost.kernel_tables import tables_of_kind

LAYOUT = next(t.split for t in tables_of_kind("mla_decode") if t.split is not None)
"""AITER's gfx942 split layout and one CU's read rate (kernel_tables/mla_decode/amd-aiter.toml
`split`; cost/split_layout.py): 16 work items a sequence, of whole 16-token blocks, over 304
CUs, at 51 GB/s a CU."""
LATENT_BYTES = 512 + 64
"""One cached token's FP8 latent: kv_lora_rank 512 + rope 64, one byte each."""
MLA_OP = "layers.0.attention"
STEP_SEQUENCES, STEP_CONTEXTS = 4, (1024, 5000)
SEQUENCES = (1, 4, 8, 16, 64)
CONTEXTS = (1024, 5000, 8700)


def print_step(chip: str, batch: int) -> None:
    """One decode step's ops at each of STEP_CONTEXTS, largest first."""
    for context in STEP_CONTEXTS:
        ops = xpusim_us(batch, context, chip, "AMD", "fp8")
        total_us = sum(count * us for count, us in ops.values())
        print(f"\n{chip} TP8, {batch} decodes of {context} tokens: step {total_us / 1e3:.2f} ms")
        for name, (count, us) in sorted(ops.items(), key=lambda kv: -kv[1][0] * kv[1][1])[:12]:
            print(f"  {name:40s} {count:4d} x {us:7.2f} us = {count * us / 1e3:6.3f} ms")


def print_splits(chip: str) -> None:
    """xpusim's MLA decode op beside AITER's gfx942 work layout (module docstring): each CU
    takes a run of consecutive work items, the busiest ceil(items / CUs) of them
    (kn_get_mla_metadata_v1_0's work_indptr), which at one CU's rate take the time in
    `busiest CU us` (the op's floor past its fixed time); the rate per CU xpusim's op
    implies is one split's extra bytes times that count over the op's extra time."""
    print(f"\n{chip} MLA decode, 16 heads, FP8 latents: xpusim's op and AITER's layout")
    print(f"  {'seqs':>4s} {'tokens':>6s} {'xpusim us':>9s} {'work items':>10s} {'CUs busy':>8s} "
          f"{'split tokens':>12s} {'busiest CU us':>13s} {'GB/s per CU':>11s}")  # fmt: skip
    for sequences in SEQUENCES:
        base_us = xpusim_us(sequences, CONTEXTS[0], chip, "AMD", "fp8")[MLA_OP][1]
        base_tokens = max(LAYOUT.shares(CONTEXTS[0]))
        for context in CONTEXTS:
            us = xpusim_us(sequences, context, chip, "AMD", "fp8")[MLA_OP][1]
            shares = LAYOUT.shares(context)
            items, tokens = sequences * len(shares), max(shares)
            per_cu = math.ceil(items / LAYOUT.cus)
            busiest_us = per_cu * tokens * LATENT_BYTES / LAYOUT.cu_bytes_per_s * 1e6
            extra_bytes = (tokens - base_tokens) * LATENT_BYTES * per_cu
            rate = f"{extra_bytes / (us - base_us) / 1e3:11.0f}" if us > base_us else ""
            busy = min(items, LAYOUT.cus)
            print(f"  {sequences:4d} {context:6d} {us:9.2f} {items:10d} {busy:8d} "
                  f"{tokens:12d} {busiest_us:13.1f} {rate}")  # fmt: skip


def main() -> int:
    chip = sys.argv[1] if len(sys.argv) > 1 else "mi300x"
    print_step(chip, STEP_SEQUENCES)
    print_splits(chip)
    return 0


if __name__ == "__main__":
    sys.exit(main())
