"""xpusim's time for each kernel of a measured CSV (measure.py's), beside the measured time.

    python benchmarks/device/predicted.py benchmarks/device/h200-sxm-measured.csv --chip h200-sxm
    python benchmarks/device/predicted.py FILE.csv --chip h200-sxm --calibration other.json

GEMM rows are costed as `scenarios.gemm` costs one GEMM with its operands in DRAM (the
matmul's roofline, the calibration's efficiency, overlap exponent and fixed time, and the
chip's dispatch time per kernel); a decode row is llama-2-7b's 32 x 4 projections one token
at a time (measure.py's `decode_step`), costed as those 128 GEMMs back to back. Copy and
attention rows are left to `xpusim calibrate`, whose fit reports its own error on them.
The calibration used is the chip's committed one unless `--calibration` names another:
comparing the two shows what a new calibration moves, kernel by kernel.
"""

from __future__ import annotations

import argparse
import csv
import statistics
from pathlib import Path

import xpusim
from xpusim.cost import calibration, roofline
from xpusim.scenarios.gemm import gemm

LLAMA_2_7B_DECODE = [(4096, 3 * 4096), (4096, 4096), (4096, 2 * 11008), (11008, 4096)]
LAYERS = 32


def predicted_s(chip: xpusim.api.Chip, row: dict) -> float | None:
    if row["kind"] == "gemm":
        m, n, k = (int(row[d]) for d in ("m", "n", "k"))
        return gemm(chip, m, k, n, row["dtype"], operands="dram").time_s
    if row["kind"] == "decode":
        layer = sum(gemm(chip, 1, k, n, row["dtype"], operands="dram").time_s
                    for k, n in LLAMA_2_7B_DECODE)  # fmt: skip
        return LAYERS * layer
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv_path", type=Path)
    parser.add_argument("--chip", required=True)
    parser.add_argument("--calibration", type=Path, help="a calibration JSON to use instead")
    args = parser.parse_args()
    if args.calibration:
        other = calibration.read_calibration(args.calibration)
        roofline.catalog_calibration = lambda chip_id: other  # what HardwareArrays reads
    chip = xpusim.chip(args.chip)
    errors = []
    print(f"{'kind':6} {'dtype':5} {'m':>6} {'n':>6} {'k':>6} {'measured':>11} "
          f"{'xpusim':>11} {'ratio':>6}")  # fmt: skip
    with args.csv_path.open() as f:
        for row in csv.DictReader(f):
            got = predicted_s(chip, row)
            if got is None:
                continue
            measured = float(row["seconds"])
            errors.append(abs(got / measured - 1))
            print(f"{row['kind']:6} {row['dtype']:5} {row['m']:>6} {row['n']:>6} {row['k']:>6} "
                  f"{measured * 1e6:9.1f}us {got * 1e6:9.1f}us {got / measured:6.2f}")  # fmt: skip
    print(f"{len(errors)} rows: median error {statistics.median(errors):.1%}, "
          f"largest {max(errors):.1%}")  # fmt: skip


if __name__ == "__main__":
    main()
