"""One GEMM on one chip, as operator benchmarks measure it (MTIA v1's Figs. 10-11).

Papers report a chip's matrix unit through lone GEMMs whose operands sit in a stated memory:
MTIA v1's "MTIA-SRAM" bars keep them in its 128 MB on-chip SRAM, "MTIA-DDR" in LPDDR5. The
GEMM is costed as any matmul op is (cost/roofline.py), with its operands where the benchmark
kept them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from xpusim.compiler.memory_plan import Footprint, Placement, place
from xpusim.cost.op_table import op_table
from xpusim.cost.roofline import Bottleneck, HardwareArrays, evaluate
from xpusim.errors import UserError
from xpusim.hardware.spec import Chip, MemoryKind
from xpusim.ir.dtypes import DType
from xpusim.ir.graph import Graph
from xpusim.ir.op import Op, OpKind
from xpusim.ir.tensor import ROLES, Role, Tensor

Operands = Literal["on-chip", "dram"]


@dataclass(frozen=True)
class GemmResult:
    time_s: float
    ops_per_s: float  # 2 M K N over the time: achieved multiply-adds, two operations each
    energy_j: float
    bottleneck: str
    bytes_by_level: dict[str, float]  # what the GEMM moves at each memory level, re-reads too


def gemm(chip: Chip, m: int, k: int, n: int, precision: str | DType,
         operands: Operands = "on-chip") -> GemmResult:  # fmt: skip
    """An M x K by K x N product in `precision`. Operands "on-chip" sit in the innermost
    memory that holds them (the SRAM where a chip has one that fits them, else DRAM, as
    place() puts any tensor); "dram" keeps every operand in DRAM."""
    dtype = DType.parse(str(precision))
    chip.peak(dtype)  # a UserError naming the formats the chip has
    a, b = Tensor("a", (m, k), dtype), Tensor("b", (k, n), dtype, Role.WEIGHT)
    op = Op(OpKind.MATMUL, "gemm", (a, b), (Tensor("c", (m, n), dtype),),
            (("compute", dtype.value),))  # fmt: skip
    table = op_table(Graph("gemm", [op]))
    if operands == "dram":
        dram = next((i for i, level in enumerate(chip.memory) if level.kind is MemoryKind.DRAM),
                    None)  # fmt: skip
        if dram is None:
            raise UserError(f"{chip.id} has no DRAM to keep a GEMM's operands in")
        placement = Placement(home=dict.fromkeys(ROLES, dram), onchip_level=None,
                              onchip_bytes=0.0)  # fmt: skip
    else:
        placement = place(chip, Footprint(b.nbytes, 0.0, a.nbytes + op.outputs[0].nbytes))
    costs = evaluate(table, HardwareArrays.build(chip, table), placement)
    time_s = float(costs.time_s[0])
    moved = {level.name: float(b) for level, b in zip(chip.memory, costs.level_bytes[:, 0],
                                                       strict=True)}  # fmt: skip
    return GemmResult(time_s, op.flops / time_s, float(costs.energy_j[0]),
                      Bottleneck(int(costs.bottleneck[0])).label, moved)  # fmt: skip
