"""A cycle-by-cycle simulation of a systolic array running a GEMM, to check cost/systolic.py.

Every cycle each cell multiplies the operand that reaches it and passes partial sums on, as
the hardware does, and the simulation computes the product itself: a schedule whose skews or
fold boundaries were wrong would mix rows or folds and give a wrong matrix, so agreement with
A @ B is evidence the cycle count belongs to a schedule that works. Weight-stationary folds
also check their weight buffers every cycle: a cell may only use a fold's weights once they
have fully shifted in and before the next load overwrites them (two buffers when double
buffered, one otherwise), so a fold spacing tighter than the hardware allows is refused.
Output-stationary folds simulate their accumulation; the drain of a finished tile is
assumed to overlap the next fold's fill, as SCALE-Sim assumes, and only counted.

It is slow (rows x cols work per cycle, in numpy) and meant for tests and benchmarks on
small arrays and layers, never for costing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from xpusim.cost.systolic import Dataflow, SystolicArray


class ScheduleHazard(AssertionError):
    """A cell read weights that were not loaded, or were being overwritten."""


@dataclass(frozen=True)
class Simulated:
    product: np.ndarray
    cycles: int  # from the first weight load to the last output leaving the array
    macs: int  # multiply-accumulates of real (not padded) operands


def _pad(x: np.ndarray, rows: int, cols: int) -> np.ndarray:
    out = np.zeros((rows, cols), dtype=x.dtype)
    out[: x.shape[0], : x.shape[1]] = x
    return out


def simulate(array: SystolicArray, a: np.ndarray, b: np.ndarray,
             spacing: int | None = None) -> Simulated:  # fmt: skip
    """A (M x K) @ B (K x N) on one array. `spacing` overrides the cycles between folds'
    first inputs (weight-stationary), to show that a tighter schedule than the array's is
    refused with ScheduleHazard."""
    if array.count != 1:
        raise ValueError("simulate one array; gemm_cycles divides folds among several")
    if array.dataflow is Dataflow.OUTPUT_STATIONARY:
        return _output_stationary(array, a, b)
    return _weight_stationary(array, a, b, spacing)


def _weight_stationary(array: SystolicArray, a: np.ndarray, b: np.ndarray,
                       spacing: int | None) -> Simulated:  # fmt: skip
    r, c = array.rows, array.cols
    m, k = a.shape
    n = b.shape[1]
    k_tiles, n_tiles = -(-k // r), -(-n // c)
    a_pad = _pad(a.astype(np.float64), m, k_tiles * r)
    b_pad = _pad(b.astype(np.float64), k_tiles * r, n_tiles * c)
    folds = [(kt, nt) for nt in range(n_tiles) for kt in range(k_tiles)]
    stream = m + r + c - 2  # first input in to last output out, one fold
    if spacing is None:
        spacing = max(m, r) if array.double_buffered else stream + r
    starts = np.array([r + f * spacing for f in range(len(folds))])  # first input of a fold
    # weight loads: fold f's tile shifts down a column in r cycles, passing cell (i, j) from
    # load_start[f] + j + i and settled at load_start[f] + j + r - 1. Double buffered, a
    # column loads fold f once its top cell has moved on to fold f - 1; with one buffer,
    # once fold f - 1 is done everywhere.
    if array.double_buffered:
        load_start = np.array([0, *(starts[f - 1] for f in range(1, len(folds)))])
        column_offset = np.array([0, *([1] * (len(folds) - 1))])
        buffers = 2
    else:
        load_start = starts - r
        column_offset = np.zeros(len(folds), dtype=int)
        buffers = 1
    rows_i, cols_j = np.indices((r, c))
    out = np.zeros((m, n_tiles * c))
    psum = np.zeros((r, c))
    last = starts[-1] + stream
    for t in range(last):
        u = t - rows_i - cols_j  # when the input now at a cell entered row 0
        f = np.searchsorted(starts, u, side="right") - 1
        row = u - starts[np.maximum(f, 0)]
        live = (f >= 0) & (row >= 0) & (row < m)
        fl = np.where(live, f, 0)
        settled = load_start[fl] + column_offset[fl] * cols_j + r - 1
        nxt = fl + buffers  # the fold whose load next overwrites this buffer
        overwritten = np.where(nxt < len(folds),
                               load_start[np.minimum(nxt, len(folds) - 1)]
                               + column_offset[np.minimum(nxt, len(folds) - 1)] * cols_j
                               + rows_i, np.inf)  # fmt: skip
        if np.any(live & ((settled >= t) | (overwritten <= t))):
            raise ScheduleHazard(f"cycle {t}: a cell used weights not loaded or overwritten")
        kt = np.array([folds[x][0] for x in fl.ravel()]).reshape(r, c)
        nt = np.array([folds[x][1] for x in fl.ravel()]).reshape(r, c)
        act = a_pad[np.clip(row, 0, m - 1), kt * r + rows_i]
        weight = b_pad[kt * r + rows_i, nt * c + cols_j]
        above = np.vstack([np.zeros((1, c)), psum[:-1]])  # partial sums move down a row
        psum = np.where(live, above + act * weight, 0.0)
        bottom = live[-1]
        if bottom.any():  # the bottom row's sums leave into the accumulators
            js = np.nonzero(bottom)[0]
            out[row[-1, js], nt[-1, js] * c + js] += psum[-1, js]
    return Simulated(out[:, :n], int(last), m * k * n)


def _output_stationary(array: SystolicArray, a: np.ndarray, b: np.ndarray) -> Simulated:
    r, c = array.rows, array.cols
    m, k = a.shape
    n = b.shape[1]
    m_tiles, n_tiles = -(-m // r), -(-n // c)
    a_pad = _pad(a.astype(np.float64), m_tiles * r, k)
    b_pad = _pad(b.astype(np.float64), k, n_tiles * c)
    out = np.zeros((m_tiles * r, n_tiles * c))
    rows_i, cols_j = np.indices((r, c))
    t = 0
    for mt in range(m_tiles):
        for nt in range(n_tiles):
            acc = np.zeros((r, c))
            for step in range(k + r + c - 2):  # a[i, kk] and b[kk, j] meet at kk + i + j
                kk = step - rows_i - cols_j
                live = (kk >= 0) & (kk < k)
                kc = np.clip(kk, 0, k - 1)
                acc += np.where(live, a_pad[mt * r + rows_i, kc] * b_pad[kc, nt * c + cols_j], 0)
            # the finished tile drains (r cycles) while the next fold's operands fill the
            # array: assumed, as SCALE-Sim does (an output register beside each
            # accumulator); the drain is not simulated cell by cell
            t += k + r + c - 2
            out[mt * r:(mt + 1) * r, nt * c:(nt + 1) * c] = acc
    return Simulated(out[:m, :n], t + r, m * k * n)  # the last tile's drain
