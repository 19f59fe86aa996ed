"""Calibration: efficiencies fitted to microbenchmarks of a chip, never to the scored results.

A GEMM of F FLOPs on a matrix unit of peak P takes, to a good approximation,

    t = F / (P x e) + t0

where e is the achievable fraction of peak on large shapes and t0 the fixed cost of a kernel
(launching thread blocks, prologue, epilogue, the last partial wave). Fitting both to a
table of measured GEMM times explains small shapes without a shape lookup table: on XLA's
H100 table the fit is within ~15% on shapes from 256^3 to 4096^3. Copy kernels give the
achievable memory bandwidth the same way. The result is a versioned JSON file per chip
(`hardware/calibration/<chip>.json`: date, source, method, the fitted figures and the fit's
own error) that the cost model reads when it exists; the chip's TOML figures apply otherwise.

Input is a CSV with columns kind, dtype, batch, m, n, k, bytes, seconds (kind: gemm, copy,
attention or decode). For attention rows, batch counts (sequence, head) pairs, m and n are
the query and key lengths, k the head dimension, and the kernel is non-causal, so it does
4 x batch x m x n x k FLOPs; attention kernels reach a lower fraction of peak than GEMMs
(FlashAttention-2: about 37% on an H100), which is why they get their own fit. Decode rows
are kept for comparison and never fitted. `benchmarks/device/measure.py` writes such a CSV.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np

from xpusim.errors import UserError
from xpusim.hardware.spec import Chip, MemoryKind
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
class Calibration(Result):
    chip: str
    date: str
    source: str
    method: str
    matmul: dict[str, MatmulFit] = field(default_factory=dict)
    attention: MatmulFit | None = None  # as a fraction of the peak of the kernel's precision
    memory_efficiency: float | None = None
    notes: list[str] = field(default_factory=list)

    def matmul_efficiency(self, dtype: DType) -> float | None:
        fit = self.matmul.get(dtype.value)
        return fit.efficiency if fit else None

    @property
    def matmul_fixed_s(self) -> float:
        """Per-kernel fixed time: fitted on whichever precision had enough shapes."""
        fixed = [f.fixed_s for f in self.matmul.values() if f.fixed_s is not None]
        return max(fixed) if fixed else 0.0


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


def _float(row: dict, key: str, where: str) -> float:
    try:
        return float(row[key])
    except (KeyError, TypeError, ValueError):
        raise UserError(f"{where}: column {key!r} must be a number, got {row.get(key)!r}") from None


def calibrate(csv_path: Path, chip: Chip) -> Calibration:
    """Fits a chip's calibration from a CSV of microbenchmark times."""
    try:
        rows = list(csv.DictReader(csv_path.open()))
    except OSError as e:
        raise UserError(f"{csv_path}: cannot read: {e.strerror}") from None
    if not rows or "kind" not in rows[0]:
        raise UserError(f"{csv_path}: expected a CSV with a header including 'kind'")
    cal = Calibration(
        chip=chip.id,
        date=dt.date.today().isoformat(),
        source=f"{csv_path.name}: "
        + "; ".join(sorted({r.get("source") or "" for r in rows} - {""})),
        method="least-squares fit of t = F/(peak x e) + t0 to GEMM rows, e per precision and "
        "t0 shared by all precisions, and to attention rows; copy rows give the achievable "
        "fraction of DRAM bandwidth (best row)",
    )
    gemms: dict[str, list[tuple[float, float]]] = {}
    attention: list[tuple[float, float, float]] = []  # flops, seconds, peak
    for i, row in enumerate(rows, start=2):
        where = f"{csv_path}:{i}"
        kind = row["kind"]
        if kind == "gemm":
            dtype = DType.parse(row["dtype"], f"dtype at {where}")
            flops = 2 * _float(row, "batch", where) * _float(row, "m", where) * _float(
                row, "n", where) * _float(row, "k", where)  # fmt: skip
            gemms.setdefault(dtype.value, []).append((flops, _float(row, "seconds", where)))
        elif kind == "copy":
            dram = next(m for m in reversed(chip.memory) if m.kind is MemoryKind.DRAM)
            achieved = _float(row, "bytes", where) / _float(row, "seconds", where)
            share = achieved / dram.bandwidth_bytes_per_s.value
            cal.memory_efficiency = min(1.0, max(cal.memory_efficiency or 0.0, share))
        elif kind == "attention":
            dtype = DType.parse(row["dtype"], f"dtype at {where}")
            flops = 4 * _float(row, "batch", where) * _float(row, "m", where) * _float(
                row, "n", where) * _float(row, "k", where)  # fmt: skip
            attention.append((flops, _float(row, "seconds", where), chip.peak(dtype)))
        elif kind != "decode":
            raise UserError(f"{where}: kind must be gemm, copy, attention or decode, not {kind!r}")
    arrays = {d: tuple(np.array(v) for v in zip(*pairs, strict=True)) for d, pairs in gemms.items()}
    cal.matmul = fit_gemms(arrays, {d: chip.peak(DType(d)) for d in arrays})  # type: ignore[arg-type]
    if attention:
        flops, seconds, peaks = (np.array(v) for v in zip(*attention, strict=True))
        cal.attention = fit_gemm(flops / peaks, seconds, 1.0)  # in fractions of each row's peak
    if not cal.matmul and cal.memory_efficiency is None:
        raise UserError(f"{csv_path}: no gemm or copy rows to fit")
    return cal


def write_calibration(cal: Calibration, path: Path) -> None:
    path.write_text(json.dumps(cal.to_dict(), indent=2) + "\n")


def read_calibration(path: Path) -> Calibration:
    try:
        data = json.loads(path.read_text())
        data["matmul"] = {k: MatmulFit(**v) for k, v in data.get("matmul", {}).items()}
        if data.get("attention"):
            data["attention"] = MatmulFit(**data["attention"])
        return Calibration(**data)
    except (OSError, ValueError, TypeError) as e:
        raise UserError(f"{path}: not a calibration file: {e}") from None


@cache
def catalog_calibration(chip_id: str) -> Calibration | None:
    """The committed calibration of a catalog chip; what-if copies share their base's."""
    path = CALIBRATION_DIR / f"{chip_id.split('[', 1)[0]}.json"
    return read_calibration(path) if path.exists() else None
