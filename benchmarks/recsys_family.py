"""MTIA v1 against an A100 on the low-to-high-complexity DLRM family: the docs/recsys.md table.

    python benchmarks/recsys_family.py                      # fp16, batches 256 and 2048
    python benchmarks/recsys_family.py --precision int8 --batch 512
    python benchmarks/recsys_family.py --mtia-set tdp_w=35      # a what-if MTIA v1

Prints one markdown row per model with each chip's queries/s, queries/J and bottleneck and
the perf/W ratio (MTIA over A100), then the same ratio for the two limits every DLRM lies
between: a lone GEMM (the operator the MTIA v1 paper's abstract quotes at 2x) and the lookups
alone (dlrm-v2's embedding bags, every row from DRAM). Nothing is fitted: it runs
`xpusim.compare` as a user would; `--mtia-set FIELD=VALUE` (repeatable) changes one MTIA v1
figure, as `--set` would.
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np

import xpusim
from xpusim.cost.embedding import EmbeddingBags, evaluate_bags, place_tables
from xpusim.hardware.spec import Chip
from xpusim.hardware.whatif import override
from xpusim.ir.dtypes import DType
from xpusim.report.perf_per_watt import PerfPerWatt
from xpusim.scenarios.gemm import gemm
from xpusim.workloads.dlrm import build_batch

FAMILY = ["meta-lc1", "meta-lc2", "meta-lc3", "meta-lc4", "meta-lc5",
          "meta-hc1", "meta-hc2", "meta-hc3", "meta-hc4"]  # fmt: skip
PLATFORM_W_PER_CARD = (780 / 12, 4500 / 8)
"""The MTIA v1 paper's power basis (Firoozshahian et al., ISCA 2023, section 6 and Table II):
provisioned platform power over accelerator cards, "as opposed to using the maximum TDP": a
Yosemite V3 server of 12 MTIA cards at 780 W (65 W a card), a Zion4S server of 8 A100s at
4,500 W (562.5 W a GPU). The last column divides each chip's predicted queries/s by these."""


def family_rows(
    chips: list[Chip], batch: int, precision: str, weight_precision: str | None
) -> list[float]:
    print(f"\n{chips[0].id} vs {chips[1].id}: batch {batch}, precision {precision}, "
          f"weights {weight_precision or precision}\n")  # fmt: skip
    print(
        "| model | MFLOP/query | MTIA q/s | MTIA q/J | MTIA bound | A100 q/s | A100 q/J "
        "| A100 bound | perf/W MTIA / A100 | on the paper's power basis |"
    )
    print("|---|---:|---:|---:|---|---:|---:|---|---:|---:|")
    runs = {model: xpusim.compare(model, chips, batch=batch, precision=precision,
                                  weight_precision=weight_precision)
            for model in FAMILY}  # fmt: skip
    ids = [chip.id for chip in chips]
    # xpusim compare's perf/W against the first chip (report/perf_per_watt.py), on each
    # chip's simulated power and on the paper's provisioned power
    own, paper = (PerfPerWatt.of(runs, ids, basis)
                  for basis in ({}, dict(zip(ids, PLATFORM_W_PER_CARD, strict=True))))  # fmt: skip
    ratios = [1 / own.ratios(model)[1] for model in FAMILY]  # MTIA over the A100
    platform = [1 / paper.ratios(model)[1] for model in FAMILY]
    for model, ratio, on_platform in zip(FAMILY, ratios, platform, strict=True):
        mtia, a100 = runs[model]
        print(f"| {model} | {mtia.flops_per_query / 1e6:.0f} "
              f"| {mtia.queries_per_s:,.0f} | {mtia.queries_per_joule:,.0f} | {mtia.bottleneck} "
              f"| {a100.queries_per_s:,.0f} | {a100.queries_per_joule:,.0f} | {a100.bottleneck} "
              f"| {ratio:.2f} | {on_platform:.2f} |")  # fmt: skip
    for label, values in (("perf/W", ratios), ("on the paper's power basis", platform)):
        print(f"\n{label}: geometric mean {statistics.geometric_mean(values):.2f}, LC "
              f"{statistics.geometric_mean(values[:5]):.2f}, HC "
              f"{statistics.geometric_mean(values[5:]):.2f}")  # fmt: skip
    return ratios


def gemm_flops_per_joule(chip: Chip, n: int, dtype: DType) -> float:
    """An n x n x n matmul, its operands in the chip's innermost memory that holds them."""
    got = gemm(chip, n, n, n, dtype)
    return got.ops_per_s * got.time_s / got.energy_j


def lookup_queries_per_joule(chip: Chip, batch: int, dtype: DType) -> float:
    """dlrm-v2's embedding bags alone, no SRAM or cache hits: an embedding-bound model."""
    bags = EmbeddingBags.of(build_batch(xpusim.model("dlrm-v2"), batch, dtype))
    no_dense = np.full(len(chip.memory), np.inf)  # every on-chip byte taken: rows stay in DRAM
    where = place_tables(chip, bags, no_dense, np.inf)
    cost = evaluate_bags(chip, bags, where, io_level=len(chip.memory) - 1)
    return batch / (cost.dynamic_j + chip.energy.static_power_w.value * cost.time_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precision", default="fp16")
    parser.add_argument("--weight-precision", default=None)
    parser.add_argument("--batch", type=int, action="append")
    parser.add_argument("--mtia-set", action="append", default=[], metavar="FIELD=VALUE")
    args = parser.parse_args()
    mtia = xpusim.chip("mtia-v1")
    for change in args.mtia_set:
        field, value = change.split("=")
        mtia = override(mtia, field, float(value))
    chips = [mtia, xpusim.chip("a100-sxm-80gb")]
    for batch in args.batch or [256, 2048]:
        family_rows(chips, batch, args.precision, args.weight_precision)
    dtype = DType(args.precision)
    for n in (512, 2048):
        mtia, a100 = (gemm_flops_per_joule(c, n, dtype) for c in chips)
        print(
            f"GEMM {n}^3 {dtype.value}: perf/W MTIA / A100 = {mtia / a100:.2f} "
            f"({mtia / 1e12:.2f} vs {a100 / 1e12:.2f} TFLOP/J)"
        )
    mtia, a100 = (lookup_queries_per_joule(c, 2048, dtype) for c in chips)
    print(
        f"lookups alone, batch 2048 {dtype.value}: perf/W MTIA / A100 = {mtia / a100:.2f} "
        f"({mtia:,.0f} vs {a100:,.0f} queries/J)"
    )


if __name__ == "__main__":
    main()
