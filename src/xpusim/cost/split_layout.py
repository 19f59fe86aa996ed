"""How an MLA decode kernel that cuts each sequence into a fixed number of work items spreads
them over the chip's compute units, and the least time that layout allows.

AITER's MLA decode on gfx942 (MI300X, MI325X) under SGLang's AITER backend at 16 heads a GPU
(DeepSeek-V3/R1 at TP 8) runs AITER's "fake non-persistent" metadata (SGLang
python/sglang/srt/layers/attention/aiter_backend.py: `fast_mode = False, intra_batch_mode =
True` at 16 heads), whose split count is a constant on gfx942: `get_local_splits` returns 16
under `__gfx942__` (ROCm/aiter csrc/kernels/mla/metadata/v1_0_device.cuh, PR #1472 of
2025-12-08, unchanged to 1e8c33fd62 of 2026-08-14), each split a run of whole
kv_granularity-token blocks (SGLang passes max(page size, 16)), and each CU takes a run of
consecutive work items. So 4 sequences keep 64 of 304 CUs busy however long their context,
and the kernel takes at least the busiest CU's share of the cache at the rate one CU
streams it: not the chip's bandwidth, which the kernel tables' bytes-keyed curve prices
(docs/validation.md, "gfx942 MLA decode at long context" and "... the split floor at one
CU's read rate").

An mla_decode kernel table says so with a `split` field (kernel_tables.py, module
docstring, "A fixed split"): its layout's constants and one CU's read rate (the MI300X's:
51 GB/s, AMD TransferBench's one-CU HBM read), with their source."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

FOLDED_TOKENS = 4
"""A last share of at most this many tokens is folded into the one before it, where there is
one (kn_get_mla_metadata_v1_0: `tail <= 4 && tail != 0 && split_local > 1`, `kv_offset <= 4
&& split_local > 1`); a sequence of one share keeps that share and drops the rest."""


@dataclass(frozen=True)
class SplitLayout:
    """A kernel's fixed split of each sequence over a chip's CUs, and one CU's read rate."""

    splits: int  # work items a sequence is cut into, at most
    kv_granularity: int  # cached tokens of one block; a share is whole blocks
    cus: int  # the chip's compute units, among which the work items are spread
    heads: int  # an op's heads a GPU that run this layout (SGLang's fake non-persistent
    # mode is its 16-head path); an op of another count is not laid out
    cu_bytes_per_s: float  # HBM read bytes a second one CU streams
    source: str

    @classmethod
    def parse(cls, entry: dict) -> SplitLayout:
        """From a kernel table's `split` field; ValueError naming the field otherwise."""
        try:
            counts = {key: entry[key] for key in ("splits", "kv_granularity", "cus", "heads")}
            rate, source = entry["cu_bytes_per_s"], str(entry["source"]).strip()
        except KeyError as e:
            raise ValueError(f"split: missing field {e}") from None
        for key, value in counts.items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"split.{key} {value!r}: a whole number, at least 1")
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not rate > 0:
            raise ValueError(f"split.cu_bytes_per_s {rate!r}: a positive number")
        if not source:
            raise ValueError("split.source is empty")
        return cls(**counts, cu_bytes_per_s=float(rate), source=source)

    def shares(self, tokens: int) -> list[int]:
        """The cached tokens of each work item of a sequence of `tokens` (split_shares)."""
        items, share, last = (int(v) for v in split_shares(tokens, self.splits,
                                                           self.kv_granularity))  # fmt: skip
        return [share] * (items - 1) + [last]

    def figures(self, token_bytes: float) -> np.ndarray:
        """The layout as the cost model's per-op row (SPLIT_FIGURES order) for an op whose
        cached token is `token_bytes`."""
        return np.array([self.splits, self.kv_granularity, self.cus, token_bytes,
                         1.0 / self.cu_bytes_per_s])  # fmt: skip


SPLIT_FIGURES = ("splits", "kv_granularity", "cus", "token_bytes", "s_per_byte")
"""The columns of an op's split row (roofline.HardwareArrays.kernel_split), all 0 for an op
no layout prices."""


def split_shares(tokens: ArrayLike, splits: ArrayLike,
                 granularity: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(work items, the tokens of each but the last, the last's tokens) of a sequence of
    `tokens` cached tokens under the layout (arrays or numbers, broadcast): shares of
    ceil(blocks / splits) whole blocks, the last share of at most FOLDED_TOKENS tokens
    folded into the one before it (FOLDED_TOKENS)."""
    tokens = np.asarray(tokens, dtype=float)
    share = np.maximum(np.ceil(np.ceil(tokens / granularity) / splits), 1.0) * granularity
    items = np.ceil(tokens / share)
    tail = tokens - (items - 1) * share  # (0, share]
    items = np.where((tail <= FOLDED_TOKENS) & (items > 1), items - 1, items)
    last = np.where(items > 1, tokens - (items - 1) * share, np.minimum(share, tokens))
    return items, share, last


def busiest_cu_s(split: np.ndarray, cache_bytes: ArrayLike, sequences: ArrayLike) -> np.ndarray:
    """The least time past a kernel's fixed time of an op of `sequences` sequences reading
    `cache_bytes` of cached latents in all, under each op's split row `split` (SPLIT_FIGURES
    on the last axis; 0 where it has none): the busiest CU's work items, ceil(items /
    CUs), each of a sequence's largest share, at one CU's rate."""
    splits, granularity, cus, token_bytes, s_per_byte = np.moveaxis(split, -1, 0)
    laid = s_per_byte > 0
    sequences = np.maximum(np.round(sequences), 1.0)
    tokens = cache_bytes / sequences / np.where(laid, token_bytes, 1.0)
    items, share, last = split_shares(tokens, np.where(laid, splits, 1.0),
                                      np.where(laid, granularity, 1.0))  # fmt: skip
    per_cu = np.ceil(sequences * items / np.where(laid, cus, 1.0))
    return np.where(laid, per_cu * np.maximum(share * (items > 1), last) * token_bytes
                    * s_per_byte, 0.0)  # fmt: skip
