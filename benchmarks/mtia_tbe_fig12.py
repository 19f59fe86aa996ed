"""MTIA v1's embedding-bag (TBE) kernels against xpusim's lookup cost, shape by shape.

The ISCA 2023 paper's Fig. 12 gives MTIA's TBE throughput in GB/s per watt for seven table
shapes (pooling, rows, dim; INT8 rows) at batches 64 and 256, read off the chart in
docs/chips/sources/mtia-v1.md; times the paper's 65 W a card (its power basis), GB/s. This
prints xpusim's rate for one bag of each shape (cost/embedding.py: the rows gathered from
where the table is homed, pooled on the vector units, plus one per-op overhead) beside it.
Not a validation point: the paper does not say how many tables a kernel call batched, so a
kernel's fixed cost cannot be placed, and its DRAM figures are what the chip file's LPDDR5
random-access efficiency (0.15) was taken from (docs/chips/mtia-v1.md).

    python benchmarks/mtia_tbe_fig12.py
"""

from __future__ import annotations

import numpy as np

from xpusim.cost.embedding import EmbeddingBags, evaluate_bags, place_tables
from xpusim.hardware.catalog import load_chip
from xpusim.ir.dtypes import DType
from xpusim.workloads.dlrm import build_batch
from xpusim.workloads.dlrm_config import DLRMConfig, TableSpec

PAPER_W = 65.0  # ISCA'23 Table II: 780 W Yosemite V3 over 12 cards
# (pooling, rows, dim): GB/s/W at batch 64 and 256, Fig. 12 read from the chart
FIG12 = {
    (1, 100, 64): (0.19, 0.21),
    (50, 100, 64): (1.00, 1.03),
    (1, 1_000_000, 128): (0.31, 0.34),
    (50, 100, 128): (1.70, 1.76),
    (20, 100, 256): (2.11, 2.24),
    (50, 100, 256): (2.82, 2.90),
    (50, 1_000_000, 256): (1.01, 1.02),
}


def predicted_gb_per_s(pooling: int, rows: int, dim: int, batch: int) -> tuple[float, str]:
    """xpusim's rate of one bag kernel (embedded bytes gathered per second), and where its
    table is homed."""
    chip = load_chip("mtia-v1")
    cfg = DLRMConfig(name="tbe", dense_features=1, bottom_mlp=(dim,),
                     tables=(TableSpec(rows=rows, dim=dim, pooling=pooling),),
                     interaction="cat", top_mlp=(1,))  # fmt: skip
    bags = EmbeddingBags.of(build_batch(cfg, batch, DType.FP16, DType.INT8))
    placement = place_tables(chip, bags, np.zeros(len(chip.memory)), 0.0)
    io_level = next(i for i, m in enumerate(chip.memory) if m.name == "sram")
    cost = evaluate_bags(chip, bags, placement, io_level)
    served = zip(chip.memory, placement.served[:, 0], strict=True)
    home = ", ".join(f"{m.name} {share:.0%}" for m, share in served if share > 0)
    return batch * pooling * dim / cost.time_s / 1e9, home


def main() -> None:
    print(f"{'pooling, rows, dim':>20} {'batch':>5} {'Fig. 12 GB/s':>12} {'xpusim':>8} "
          f"{'ratio':>6}  served from")  # fmt: skip
    for (pooling, rows, dim), per_watt in FIG12.items():
        for batch, gb_per_s_w in zip((64, 256), per_watt, strict=True):
            paper = gb_per_s_w * PAPER_W
            ours, home = predicted_gb_per_s(pooling, rows, dim, batch)
            print(f"{f'{pooling}, {rows:,}, {dim}':>20} {batch:>5} {paper:>12.1f} {ours:>8.1f} "
                  f"{ours / paper:>6.2f}  {home}")  # fmt: skip


if __name__ == "__main__":
    main()
