"""How a GEMM maps onto a systolic matrix unit: its cycles, from the dataflow.

A rows x cols array of multiply-accumulate cells computes an M x K by K x N product in
folds: tiles of the stationary operand, one per array's worth of cells.

* Weight-stationary (TPU MXUs, Jouppi et al. ISCA 2017, section 2): each fold holds a
  rows x cols tile of the K x N weights, one per cell; the M rows of activations stream in
  from the left, skewed one cycle per row, and partial sums flow down and leave the bottom.
  A fold loads its weights (rows cycles), then its last output leaves M + rows + cols - 2
  cycles after its first activation enters: 2 rows + cols + M - 2 cycles, over
  ceil(K/rows) x ceil(N/cols) folds. With a second weight buffer ("one 64 KiB tile of
  weights plus one for double-buffering, to hide the 256 cycles it takes to shift a tile
  in", ibid.) the next fold's weights load while this one streams, and folds follow each
  other every max(M, rows) cycles: the first load and the last fold's fill and drain are
  paid once.
* Output-stationary: each fold holds a rows x cols tile of the outputs; rows of A enter from
  the left and columns of B from the top, both skewed, and the K products of every cell
  accumulate in place: K + rows + cols - 2 cycles a fold, over ceil(M/rows) x ceil(N/cols)
  folds. A finished tile drains down its columns (rows cycles) while the next fold's
  operands fill the array (rows + cols - 2 cycles of skew), so only the last drain adds.

These are the per-fold counts SCALE-Sim uses (Samajdar et al., ISPASS 2020; it counts to
the last cycle's index, one below, and leaves out the last output-stationary drain), and
cost/systolic_sim.py checks them against a cycle-by-cycle simulation of the cells, which
also computes the product. Several arrays (a TPU v4's 8 MXUs) share a GEMM's folds.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np


class Dataflow(StrEnum):
    WEIGHT_STATIONARY = "weight-stationary"
    OUTPUT_STATIONARY = "output-stationary"


MODES = {"weight-stationary": 1, "output-stationary": 3}
"""A mapping as a number, so that chips' units stack into arrays (cost/roofline.py); 2 is
weight-stationary with a second weight buffer, 0 no systolic mapping (tiles padded only)."""


@dataclass(frozen=True)
class SystolicArray:
    rows: int
    cols: int
    dataflow: Dataflow = Dataflow.WEIGHT_STATIONARY
    double_buffered: bool = False  # weight-stationary only: the next fold's weights load ahead
    count: int = 1  # arrays sharing a GEMM's folds

    @property
    def mode(self) -> int:
        code = MODES[self.dataflow.value]
        return 2 if code == 1 and self.double_buffered else code


def cycles(m, k, n, rows, cols, units, mode):
    """Cycles of M x K by K x N products on `units` arrays of rows x cols in `mode` (MODES),
    each argument an int or an array broadcasting with the others."""
    m = np.asarray(m, dtype=float)
    k_folds, n_folds = np.ceil(np.divide(k, rows)), np.ceil(np.divide(n, cols))
    ws_folds = np.ceil(k_folds * n_folds / units)  # each array's share of the folds
    os_folds = np.ceil(np.ceil(m / rows) * n_folds / units)
    return np.select(
        [np.equal(mode, 1), np.equal(mode, 2), np.equal(mode, 3)],
        [ws_folds * (2 * rows + cols + m - 2),
         rows + (ws_folds - 1) * np.maximum(m, rows) + m + rows + cols - 2,
         os_folds * (np.asarray(k) + rows + cols - 2) + rows],
        default=np.nan,
    )  # fmt: skip


def gemm_cycles(array: SystolicArray, m, k, n):
    """Cycles of an M x K by K x N product on `array` (ints or arrays broadcasting)."""
    return cycles(m, k, n, array.rows, array.cols, array.count, array.mode)


def utilization(array: SystolicArray, m, k, n):
    """Multiply-accumulates done over what the arrays could do in those cycles."""
    cells = array.rows * array.cols * array.count
    return np.asarray(m) * k * n / (gemm_cycles(array, m, k, n) * cells)
