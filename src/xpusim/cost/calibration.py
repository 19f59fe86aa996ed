"""Calibration: efficiencies fitted to microbenchmarks of a chip, never to the scored results.

A GEMM of F FLOPs moving B bytes on a matrix unit of peak P and a DRAM of achievable
bandwidth W takes, to a good approximation,

    t = (c^p + m^p)^(1/p) + t0,   c = F / (P x e),   m = B / W

where e is the achievable fraction of peak on large shapes, t0 the fixed cost of a kernel
(launching thread blocks, prologue, epilogue, the last partial wave) and p how well the
kernel overlaps streaming its operands with computing on them: p -> infinity is the sharp
roofline max(c, m), p = 1 no overlap at all (c + m). Near the ridge (c ~ m: GEMMs of 128-256
rows against large weights) a real kernel is slower than either roof, since its pipeline
fills and drains and its tiles wait on loads; the p-norm is the smallest smooth model of
that, and it keeps t >= max(c, m) and is monotone in c and m. Fitting e, t0 and p to a table
of measured GEMM times explains small and ridge shapes without a shape lookup table: on
XLA's H100 table the fit is within ~8% on shapes from 256^3 to 4096^3. Copy kernels give
the achievable memory bandwidth W. The result is a versioned JSON file per chip
(`hardware/calibration/<chip>.json`: date, source, method, the fitted figures and the fit's
own error) that the cost model reads when it exists; the chip's TOML figures apply otherwise.

Input is a CSV with columns kind, dtype, batch, m, n, k, bytes, seconds (kind: gemm, copy,
attention or decode) and, optionally, measured_on: the catalog id of the chip a row was
measured on when that is not the calibrated chip (an H100 table reused for the H200), whose
peak and DRAM bandwidth then cost the row. A GEMM row's bytes are its A, B and C at the
row's precision (batch x (MK + KN + MN) x itemsize) unless its bytes column says otherwise.
For attention rows, batch counts (sequence, head) pairs, m and n are the query and key
lengths, k the head dimension, and the kernel is non-causal, so it does
4 x batch x m x n x k FLOPs; attention kernels reach a lower fraction of peak than GEMMs
(FlashAttention-2: about 37% on an H100), which is why they get their own fit. Decode rows
are kept for comparison and never fitted. `benchmarks/device/measure.py` writes such a CSV.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np

from xpusim.errors import UserError
from xpusim.files import read_json, read_text, write_text
from xpusim.hardware.spec import Chip
from xpusim.ir.dtypes import DType
from xpusim.result import Result

CALIBRATION_DIR = Path(__file__).resolve().parent.parent / "hardware" / "calibration"


@dataclass
class MatmulFit:
    efficiency: float  # achievable fraction of the dtype's peak
    fixed_s: float | None  # per-kernel fixed time; None when the rows cannot separate it
    rows: int
    rms_rel_error: float  # of the fit on its own rows


@dataclass
class OverlapFit:
    """How a matmul kernel's compute time c and memory time m combine: (c^p + m^p)^(1/p)."""

    p: float | None  # None: p = infinity, the sharp roofline max(c, m)
    rows: int  # GEMM rows it was fitted on; 0 when assumed (see note)
    rms_rel_error: float | None  # of the whole GEMM fit (every precision) at this p
    rms_rel_error_max: float | None  # the same fit, e and t0 refitted, with max(c, m)
    rms_rel_error_sum: float | None  # ... with c + m (p = 1); None when not fitted
    note: str = ""


@dataclass
class Calibration(Result):
    chip: str
    date: str
    source: str
    method: str
    matmul: dict[str, MatmulFit] = field(default_factory=dict)
    attention: MatmulFit | None = None  # as a fraction of the peak of the kernel's precision
    memory_efficiency: float | None = None
    overlap: OverlapFit | None = None  # None: not fitted (a chip file's figure, else max)
    notes: list[str] = field(default_factory=list)

    def matmul_efficiency(self, dtype: DType) -> float | None:
        fit = self.matmul.get(dtype.value)
        return fit.efficiency if fit else None

    def replaced_figures(self) -> dict[str, str]:
        """The chip-file figures a run takes from this calibration instead (as
        cost/roofline.py applies them, unless a --set names the figure), each with the
        calibrated value as a person reads it: what `xpusim chip` shows beside the file's."""
        from xpusim.report.units import seconds

        found: dict[str, str] = {}
        if self.matmul:
            found["efficiency.matmul"] = ", ".join(
                f"{dtype} {fit.efficiency:.3g}" for dtype, fit in self.matmul.items()
            ) + (f"; attention {self.attention.efficiency:.3g}" if self.attention else "")
        if self.matmul_fixed_s:
            found["overhead.matmul_fixed_s"] = seconds(self.matmul_fixed_s)
        if self.overlap is not None:
            found["efficiency.matmul_overlap_p"] = (
                "inf" if self.overlap.p is None else f"{self.overlap.p:.3g}")
        if self.memory_efficiency:
            found["efficiency.memory"] = f"{self.memory_efficiency:.3g}"
        return found

    @property
    def matmul_fixed_s(self) -> float:
        """Per-kernel fixed time: fitted on whichever precision had enough shapes."""
        fixed = [f.fixed_s for f in self.matmul.values() if f.fixed_s is not None]
        return max(fixed) if fixed else 0.0


def overlap_time(
    compute_s: np.ndarray | float, memory_s: np.ndarray | float, p: np.ndarray | float
) -> np.ndarray:
    """(c^p + m^p)^(1/p), elementwise and broadcasting; p = inf gives max(c, m) exactly.

    Written as hi x (1 + (lo/hi)^p)^(1/p) so that large p neither overflows nor loses the
    maximum: the result is never below max(c, m), never above c + m, and grows with each.
    """
    c, m = np.asarray(compute_s, dtype=float), np.asarray(memory_s, dtype=float)
    hi, lo = np.maximum(c, m), np.minimum(c, m)
    safe = np.where(hi > 0, hi, 1.0)
    ratio = np.where(hi > 0, lo / safe, 0.0)
    with np.errstate(over="ignore", under="ignore"):
        return hi * (1.0 + ratio**p) ** (1.0 / np.asarray(p, dtype=float))


def fit_gemm(flops: np.ndarray, seconds: np.ndarray, peak: float) -> MatmulFit:
    """Least squares in relative error of t = (F / P) a + t0, with a = 1 / e."""
    ideal = flops / peak
    if len(flops) < 3:  # too few shapes to separate e from t0: all time is throughput
        e = float(np.max(ideal / seconds))
        rel = (ideal / e - seconds) / seconds
        return MatmulFit(min(e, 1.0), None, len(flops), float(np.sqrt(np.mean(rel**2))))
    design = np.stack([ideal / seconds, 1 / seconds], axis=1)  # rows scaled by 1/t
    (a, t0), *_ = np.linalg.lstsq(design, np.ones_like(seconds), rcond=None)
    a, t0 = max(a, 1.0), max(t0, 0.0)  # physics: e <= 1, no negative time
    rel = (ideal * a + t0 - seconds) / seconds
    return MatmulFit(1 / a, float(t0), len(flops), float(np.sqrt(np.mean(rel**2))))


def fit_gemms(
    rows: dict[str, tuple[np.ndarray, np.ndarray]], peaks: dict[str, float]
) -> dict[str, MatmulFit]:
    """Per-precision efficiencies with one fixed time t0 shared by all precisions.

    A kernel's fixed time (launch, thread-block setup, prologue and epilogue) belongs to
    the SMs and the kernel library, not to the operand format, so the rows of every
    precision are fitted together: t = (F / P_p) a_p + t0, least squares in relative error.
    Fitted alone, a precision whose rows are all large shapes (DeepGEMM's M = 4096 FP8 rows)
    cannot separate e from t0 and trades one for the other (t0 = 30-43 us on them, more
    than DeepGEMM's own whole M = 64 kernels take). With too few rows to fit one efficiency
    per precision plus t0, each precision is fitted alone (fit_gemm).
    """
    names = sorted(rows)
    total = sum(len(rows[d][0]) for d in names)
    if total < len(names) + 2:
        return {d: fit_gemm(*rows[d], peaks[d]) for d in names}
    ideal = np.concatenate([rows[d][0] / peaks[d] for d in names])
    seconds = np.concatenate([rows[d][1] for d in names])
    which = np.concatenate([np.full(len(rows[d][0]), i) for i, d in enumerate(names)])
    onehot = which[:, None] == np.arange(len(names))[None, :]
    design = np.concatenate([onehot * (ideal / seconds)[:, None], (1 / seconds)[:, None]], 1)
    solution, *_ = np.linalg.lstsq(design, np.ones_like(seconds), rcond=None)
    a = np.maximum(solution[:-1], 1.0)  # physics: e <= 1
    t0 = max(float(solution[-1]), 0.0)  # no negative time
    rel = (ideal * a[which] + t0 - seconds) / seconds
    return {
        d: MatmulFit(float(1 / a[i]), t0, int((which == i).sum()),
                     float(np.sqrt(np.mean(rel[which == i] ** 2))))
        for i, d in enumerate(names)
    }  # fmt: skip


GemmRows = dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]
"""Per precision: each row's ideal time F / peak, memory time B / W and measured seconds."""


def _fit_at_p(
    ideal: np.ndarray,
    memory_s: np.ndarray,
    seconds: np.ndarray,
    which: np.ndarray,
    start: np.ndarray,
    p: float,
) -> tuple[np.ndarray, np.ndarray]:
    """(a per precision..., t0) minimizing the relative error of overlap_time(ideal a, m, p)
    + t0 at a fixed p, with a >= 1 (e <= 1) and t0 >= 0: projected Levenberg-Marquardt
    from `start`. Returns the parameters and the relative errors."""
    n_prec = len(start) - 1
    floor = np.r_[np.ones(n_prec), 0.0]
    rows = np.arange(len(seconds))

    def residuals(x: np.ndarray) -> np.ndarray:
        return (overlap_time(ideal * x[which], memory_s, p) + x[-1]) / seconds - 1

    x = np.maximum(start, floor)
    r = residuals(x)
    damping = 1e-3
    for _ in range(500):
        c = ideal * x[which]
        total = overlap_time(c, memory_s, p)
        with np.errstate(divide="ignore", invalid="ignore", under="ignore"):
            dt_dc = (c >= memory_s).astype(float) if np.isinf(p) else np.where(
                total > 0, (c / np.where(total > 0, total, 1.0)) ** (p - 1), 0.0)  # fmt: skip
        jac = np.zeros((len(seconds), n_prec + 1))
        jac[rows, which] = dt_dc * ideal / seconds
        jac[:, -1] = 1 / seconds
        normal = jac.T @ jac
        step = np.linalg.solve(normal + damping * np.diag(np.diag(normal) + 1e-300), -jac.T @ r)
        trial = np.maximum(x + step, floor)
        r_trial = residuals(trial)
        if r_trial @ r_trial < r @ r:
            converged = r @ r - r_trial @ r_trial <= 1e-14 * (r @ r)
            x, r, damping = trial, r_trial, damping / 3
            if converged:
                break
        else:
            damping *= 4
            if damping > 1e12:
                break
    return x, r


def _rms(rel: np.ndarray) -> float:
    return float(np.sqrt(np.mean(rel**2)))


def fit_gemms_with_memory(
    rows: GemmRows, assumed_p: float | None = None, assumed_fixed_s: float | None = None
) -> tuple[dict[str, MatmulFit], OverlapFit | None]:
    """Per-precision efficiencies, one shared fixed time t0 and one overlap exponent p.

    Least squares in relative error of t = (c^p + m^p)^(1/p) + t0 with c = ideal / e: e and
    t0 at each p of a grid over 1/p in [0, 1] (max at 0, sum at 1), then refined around the
    best. p is the kernel library's, not a precision's, so it is shared like t0. With too
    few rows to fit p as well as e and t0 (fewer than precisions + 3), p and t0 are the
    chip file's assumed figures (None: max and no fixed time) and e is solved from them,
    so that the efficiency written is the one that, under the form the cost model applies,
    reproduces the rows; with fewer than precisions + 2 rows each precision is fitted alone.
    """
    names = sorted(rows)
    ideal = np.concatenate([rows[d][0] for d in names])
    memory_s = np.concatenate([rows[d][1] for d in names])
    seconds = np.concatenate([rows[d][2] for d in names])
    which = np.concatenate([np.full(len(rows[d][0]), i) for i, d in enumerate(names)])
    if len(seconds) < len(names) + 3:
        return _fit_assumed(rows, names, assumed_p, assumed_fixed_s), None
    linear = fit_gemms({d: (rows[d][0], rows[d][2]) for d in names}, dict.fromkeys(names, 1.0))
    start = np.r_[[1 / linear[d].efficiency for d in names], linear[names[0]].fixed_s or 0.0]

    @cache  # the search below asks again for points it has fitted
    def fit(inverse_p: float) -> tuple[np.ndarray, np.ndarray]:
        p = np.inf if inverse_p <= 0 else 1 / inverse_p
        return _fit_at_p(ideal, memory_s, seconds, which, start, p)

    grid = np.linspace(0.0, 1.0, 101)
    errors = [_rms(fit(q)[1]) for q in grid]
    best = int(np.argmin(errors))
    low, high = grid[max(best - 1, 0)], grid[min(best + 1, len(grid) - 1)]
    golden = (np.sqrt(5) - 1) / 2
    for _ in range(30):  # golden-section search of the bracket around the grid's best
        a, b = high - golden * (high - low), low + golden * (high - low)
        if _rms(fit(a)[1]) <= _rms(fit(b)[1]):
            high = b
        else:
            low = a
    inverse_p = min([(low + high) / 2, grid[best]], key=lambda q: _rms(fit(q)[1]))
    x, rel = fit(inverse_p)
    overlap = OverlapFit(
        p=None if inverse_p <= 0 else float(1 / inverse_p), rows=len(seconds),
        rms_rel_error=_rms(rel), rms_rel_error_max=errors[0], rms_rel_error_sum=errors[-1],
        note="fitted with e per precision and t0 shared, least squares in relative error",
    )  # fmt: skip
    fits = {
        d: MatmulFit(float(1 / x[i]), float(x[-1]), int((which == i).sum()), _rms(rel[which == i]))
        for i, d in enumerate(names)
    }
    return fits, overlap


def _fit_assumed(
    rows: GemmRows, names: list[str], p: float | None, fixed_s: float | None
) -> dict[str, MatmulFit]:
    """Too few rows for p: each row's e solved under the assumed p and t0, and the best
    row's kept per precision (the rows are best shapes, as in fit_gemm's one-row case).
    Without assumed figures this is fit_gemms on the compute term alone."""
    if p is None and fixed_s is None:
        return fit_gemms({d: (rows[d][0], rows[d][2]) for d in names}, dict.fromkeys(names, 1.0))
    exponent, t0 = p or np.inf, fixed_s or 0.0
    fits = {}
    for d in names:
        ideal, memory_s, seconds = rows[d]
        left = np.maximum(seconds - t0, 0.0)
        with np.errstate(over="ignore", under="ignore"):  # c such that overlap(c, m) = t - t0
            compute_s = left if np.isinf(exponent) else np.maximum(
                left**exponent - memory_s**exponent, 0.0) ** (1 / exponent)  # fmt: skip
        valid = compute_s > 0
        e = min(float(np.max(ideal[valid] / compute_s[valid])), 1.0) if valid.any() else 1.0
        rel = (overlap_time(ideal / e, memory_s, exponent) + t0 - seconds) / seconds
        fits[d] = MatmulFit(e, None, len(seconds), _rms(rel))
    return fits


_LIMITS = {"batch": 2.0**40, "m": 2.0**40, "n": 2.0**40, "k": 2.0**40, "bytes": 1e18,
           "seconds": 1e6}
"""Largest value a column takes: a microbenchmark's sizes and times, far past any real one
and short of float overflow in 2 x batch x m x n x k."""


def _float(row: dict, key: str, where: str) -> float:
    """A column's value: a positive, finite number within _LIMITS (a zero, negative or nan
    time or size would reach the fit as a division by zero or a nan efficiency)."""
    try:
        value = float(row[key])
    except (KeyError, TypeError, ValueError):
        raise UserError(f"{where}: column {key!r} must be a number, got {row.get(key)!r}") from None
    if not 0 < value <= _LIMITS[key]:
        raise UserError(f"{where}: column {key!r} must be a positive number of at most "
                        f"{_LIMITS[key]:.3g}, got {row[key]!r}")  # fmt: skip
    return value


def _dtype(row: dict, where: str) -> DType:
    name = (row.get("dtype") or "").strip()  # a row shorter than the header holds None
    if not name:
        raise UserError(f"{where}: column 'dtype' is empty")
    return DType.parse(name, f"dtype at {where}")


def dram_bytes_per_s(chip: Chip) -> float:
    """The bandwidth of the memory a microbenchmark's operands stream from: the chip's
    outermost level that holds tensors (its DRAM; SRAM on a chip without DRAM, as Groq's)."""
    home = next((m for m in reversed(chip.memory) if m.kind.holds_tensors), None)
    if home is None:
        raise UserError(f"{chip.id} has no memory level that holds tensors to stream from")
    return home.bandwidth_bytes_per_s.value


def _measured_on(row: dict, chip: Chip, where: str) -> Chip:
    """The chip a row was measured on: its measured_on column's catalog chip, else `chip`."""
    name = (row.get("measured_on") or "").strip()
    if not name or name == chip.id:
        return chip
    from xpusim.hardware.catalog import load_chip

    try:
        return load_chip(name)
    except UserError as e:
        raise UserError(f"{where}: measured_on: {e}") from None


def calibrate(csv_path: Path, chip: Chip) -> Calibration:
    """Fits a chip's calibration from a CSV of microbenchmark times."""
    rows = list(csv.DictReader(io.StringIO(read_text(csv_path, "microbenchmark CSV"))))
    if not rows or "kind" not in rows[0]:
        raise UserError(f"{csv_path}: expected a CSV with a header including 'kind'")
    cal = Calibration(
        chip=chip.id,
        date=dt.date.today().isoformat(),
        source=f"{csv_path.name}: "
        + "; ".join(sorted({r.get("source") or "" for r in rows} - {""})),
        method="least-squares fit, in relative error, of t = (c^p + m^p)^(1/p) + t0 to GEMM "
        "rows, c = F/(peak x e) and m = (A + B + C bytes)/(DRAM bandwidth x memory "
        "efficiency) of the chip that measured the row, e per precision, t0 and p shared by "
        "all precisions (p over a grid of 1/p in [0, 1], refined; fewer than precisions + 3 "
        "rows: p and t0 the chip file's assumed figures, e solved from them); attention rows: "
        "t = F/(peak x e) + t0; copy rows give the achievable fraction of DRAM bandwidth "
        "(best row)",
    )
    for i, row in enumerate(rows, start=2):  # copy rows first: GEMMs' memory time needs them
        if row["kind"] == "copy":
            where = f"{csv_path}:{i}"
            achieved = _float(row, "bytes", where) / _float(row, "seconds", where)
            share = achieved / dram_bytes_per_s(_measured_on(row, chip, where))
            cal.memory_efficiency = min(1.0, max(cal.memory_efficiency or 0.0, share))
    memory_eff = cal.memory_efficiency or chip.efficiency.memory.value
    gemms: dict[str, list[tuple[float, float, float]]] = {}  # ideal s, memory s, seconds
    attention: list[tuple[float, float, float]] = []  # flops, seconds, peak
    for i, row in enumerate(rows, start=2):
        where = f"{csv_path}:{i}"
        kind = row["kind"]
        if kind == "gemm":
            dtype = _dtype(row, where)
            on = _measured_on(row, chip, where)
            batch, m, n, k = (_float(row, key, where) for key in ("batch", "m", "n", "k"))
            given = (row.get("bytes") or "").strip()
            moved = _float(row, "bytes", where) if given else (
                batch * (m * k + k * n + m * n) * dtype.itemsize)  # fmt: skip
            peak = on.peak(dtype, f"{where}: dtype")
            ideal_s, seconds = 2 * batch * m * n * k / peak, _float(row, "seconds", where)
            if seconds < ideal_s:
                raise UserError(f"{where}: {seconds:.3g} s is faster than {on.id}'s {dtype.value} "
                                f"peak allows ({ideal_s:.3g} s): check the units (seconds) "
                                "and the chip")  # fmt: skip
            gemms.setdefault(dtype.value, []).append(
                (ideal_s, moved / (dram_bytes_per_s(on) * memory_eff), seconds))
        elif kind == "attention":
            dtype = _dtype(row, where)
            flops = 4 * _float(row, "batch", where) * _float(row, "m", where) * _float(
                row, "n", where) * _float(row, "k", where)  # fmt: skip
            peak = _measured_on(row, chip, where).peak(dtype, f"{where}: dtype")
            attention.append((flops, _float(row, "seconds", where), peak))
        elif kind not in ("copy", "decode"):
            raise UserError(f"{where}: kind must be gemm, copy, attention or decode, not {kind!r}")
    arrays = {d: tuple(np.array(v) for v in zip(*triples, strict=True))
              for d, triples in gemms.items()}  # fmt: skip
    assumed_p = chip.efficiency.matmul_overlap_p
    assumed_fixed = chip.overhead.matmul_fixed_s
    if arrays:
        cal.matmul, cal.overlap = fit_gemms_with_memory(
            arrays,  # type: ignore[arg-type]
            assumed_p.value if assumed_p else None,
            assumed_fixed.value if assumed_fixed else None,
        )
    if cal.matmul and cal.overlap is None and assumed_p:
        gemm_rows = sum(len(v) for v in gemms.values())
        cal.overlap = OverlapFit(
            p=assumed_p.value, rows=0, rms_rel_error=None, rms_rel_error_max=None,
            rms_rel_error_sum=None,
            note=f"not fitted ({gemm_rows} GEMM rows): the chip file's assumed "
            f"efficiency.matmul_overlap_p ({assumed_p.source}, {assumed_p.confidence}): "
            f"{assumed_p.note}",
        )  # fmt: skip
    if attention:
        flops, seconds, peaks = (np.array(v) for v in zip(*attention, strict=True))
        cal.attention = fit_gemm(flops / peaks, seconds, 1.0)  # in fractions of each row's peak
    if not cal.matmul and cal.memory_efficiency is None:
        raise UserError(f"{csv_path}: no gemm or copy rows to fit")
    return cal


def write_calibration(cal: Calibration, path: Path) -> None:
    write_text(path, json.dumps(cal.to_dict(), indent=2, allow_nan=False) + "\n")


def read_calibration(path: Path) -> Calibration:
    data = read_json(path, "calibration")
    try:
        data["matmul"] = {k: MatmulFit(**v) for k, v in data.get("matmul", {}).items()}
        if data.get("attention"):
            data["attention"] = MatmulFit(**data["attention"])
        if data.get("overlap"):
            data["overlap"] = OverlapFit(**data["overlap"])
        return Calibration(**data)
    except (AttributeError, ValueError, TypeError) as e:
        raise UserError(f"{path}: not a calibration file: {e}") from None


@cache
def catalog_calibration(chip_id: str) -> Calibration | None:
    """The committed calibration of a catalog chip; what-if copies share their base's."""
    path = CALIBRATION_DIR / f"{chip_id.split('[', 1)[0]}.json"
    return read_calibration(path) if path.exists() else None
