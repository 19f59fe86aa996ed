"""A GEMM on a grid of processing elements: the operand traffic of its output blocks.

MTIA v1 (Firoozshahian et al., ISCA 2023, section 4 and Figs. 7-8) spreads a GEMM's m, n and
k over its 8 x 8 PEs in multiples of 64, 64 and 32. Each PE's reduction engine holds 2 x 2
blocks of 32 x 32 partial sums (64 x 64 outputs), so every 32 x 32 input block is used
twice; A blocks reach a grid row with one multicast read and B blocks a grid column with
one (hardware/spec.py PeGrid). So a pass of the grid holds at most a 512 x 512 block of C
while all of K streams by, and a GEMM is a sequence of passes: B is read once for every
block of C's rows, A once for every block of its columns. Those re-reads land on the memory
that holds each operand (cost/roofline.py charges each level its bytes over its achievable
bandwidth): in SRAM they cost little, in LPDDR5 they bind.

Why multicast decides the achievable peak: a PE at its 1,024 INT8 MACs a cycle consumes 32 B
of operands a cycle with its 2 x 2 blocks (the paper's figure), 64 PEs x 32 B x 0.8 GHz =
1.64 TB/s, twice the SRAM's 800 GB/s. With multicast each operand block is read once for
eight PEs, 205 GB/s, a quarter of the SRAM; without it (`--set pe_grid.multicast=0`) every
PE reads its own, the pass's reuse shrinks to one PE's 64 x 64 block, and an SRAM-resident
GEMM is bound by the SRAM at a third of the peak (the SRAM at its measured 66%: a 4096^3
INT8 GEMM falls from 94 to 34 TOPS).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from xpusim.cost.op_table import OpTable
from xpusim.hardware.spec import Chip
from xpusim.ir.tensor import ROLES, Role


def output_block(chip: Chip) -> tuple[float, float]:
    """Rows x columns of C a pass of the chip's PE grid holds; infinite (operands read once)
    for a chip that declares no grid."""
    return chip.pe_grid.output_block if chip.pe_grid else (np.inf, np.inf)


def operand_rereads(table: OpTable, block_rows: Any, block_cols: Any) -> np.ndarray | None:
    """The table's bytes by role with the re-reads of a grid that computes each GEMM in
    output blocks of block_rows x block_cols: the weight B (K x N) is read once per block
    of M's rows, the input A (M x K) once per block of N's columns; None where every block
    is infinite (operands read once).

    A is the share K / (K + N) of the op's activation bytes (A and C, M x K and M x N
    elements of one format). M is the matmul's rows over all its batch dimensions, so a
    batched weight (grouped experts) is charged as one weight seen by every row.
    """
    if np.all(np.isinf(block_rows)) and np.all(np.isinf(block_cols)):
        return None
    k, n = table.weight_tile_kn
    has_weight = k > 0
    k, n = np.where(has_weight, k, 1.0), np.where(has_weight, n, 1.0)
    m = np.maximum(table.matrix_flops / (2 * k * n), 1.0)
    moved = table.role_bytes
    w, a = ROLES.index(Role.WEIGHT), ROLES.index(Role.ACTIVATION)
    again = {
        w: np.where(has_weight, _passes(m, block_rows) - 1, 0.0),
        a: np.where(has_weight, (_passes(n, block_cols) - 1) * k / (k + n), 0.0),
    }
    return np.stack(np.broadcast_arrays(*(
        moved[..., r, :] * (1.0 + again[r]) if r in again else moved[..., r, :]
        for r in range(len(ROLES))
    )), axis=-2)  # fmt: skip


def _passes(length: np.ndarray, block: Any) -> np.ndarray:
    """Blocks of `block` that cover `length`: at least one, also for an infinite block (a
    chip without a grid stacked beside one), whose ceiling would be 0."""
    return np.maximum(np.ceil(length / block), 1.0)
