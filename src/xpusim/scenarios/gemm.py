"""One GEMM on one chip, as operator benchmarks measure it (MTIA v1's Figs. 10-11).

Papers report a chip's matrix unit through lone GEMMs whose operands sit in a stated memory:
MTIA v1's "MTIA-SRAM" bars keep them in its 128 MB on-chip SRAM, "MTIA-DDR" in LPDDR5. The
GEMM is costed as any matmul op is (cost/roofline.py), with its operands where the benchmark
kept them.

A dynamically quantized INT8 GEMM (MTIA 2i, ISCA 2025 section 4.4) is measured with its
quantization: the activations stay FP16 between layers, so the FC quantizes its input row by
row at run time and dequantizes its INT32 products back to FP16. Those are two vector passes
beside the matmul, costed as any elementwise op is; the row minima and maxima their scales
come from are the Reduction Engine's by-product of the matmul that produced the input
(section 4.4), so no third pass finds them.
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
Quantization = Literal["static", "dynamic"]

# Vector work per element, counted from each formula (as ir/op.py's DEQUANT_FLOPS_PER_WEIGHT):
# quantize = multiply by the row's inverse scale, round-and-saturate to INT8 = 2; dequantize =
# convert the INT32 sum, multiply by the row's scale and by the weight column's = 3.
QUANTIZE_FLOPS_PER_ELEMENT = 2
DEQUANTIZE_FLOPS_PER_ELEMENT = 3


@dataclass(frozen=True)
class GemmResult:
    time_s: float
    ops_per_s: float  # 2 M K N over the time: achieved multiply-adds, two operations each
    energy_j: float
    bottleneck: str
    bytes_by_level: dict[str, float]  # what the GEMM moves at each memory level, re-reads too


def gemm(chip: Chip, m: int, k: int, n: int, precision: str | DType,
         operands: Operands = "on-chip",
         quantization: Quantization = "static") -> GemmResult:  # fmt: skip
    """An M x K by K x N product in `precision`. Operands "on-chip" sit in the innermost
    memory that holds them (the SRAM where a chip has one that fits them, else DRAM, as
    place() puts any tensor); "dram" keeps every operand in DRAM. `quantization="dynamic"`
    (INT8 only) adds the run-time quantize of the FP16 input and dequantize of the INT32
    output (module docstring); the rate counts the matmul's operations over all three."""
    dtype = DType.parse(str(precision))
    chip.peak(dtype)  # a UserError naming the formats the chip has
    if quantization == "dynamic" and dtype is not DType.INT8:
        raise UserError(f"dynamic quantization is an INT8 GEMM's, not {dtype.value}'s: "
                        "use --precision int8")  # fmt: skip
    a, b = Tensor("a", (m, k), dtype), Tensor("b", (k, n), dtype, Role.WEIGHT)
    out_dtype = DType.INT32 if quantization == "dynamic" else dtype
    op = Op(OpKind.MATMUL, "gemm", (a, b), (Tensor("c", (m, n), out_dtype),),
            (("compute", dtype.value),))  # fmt: skip
    ops = [op]
    if quantization == "dynamic":
        ops = [_vector("quantize", Tensor("a.fp16", (m, k), DType.FP16), a,
                       QUANTIZE_FLOPS_PER_ELEMENT),
               op,
               _vector("dequantize", op.outputs[0], Tensor("c.fp16", (m, n), DType.FP16),
                       DEQUANTIZE_FLOPS_PER_ELEMENT)]  # fmt: skip
    table = op_table(Graph("gemm", ops))
    if operands == "dram":
        dram = next((i for i, level in enumerate(chip.memory) if level.kind is MemoryKind.DRAM),
                    None)  # fmt: skip
        if dram is None:
            raise UserError(f"{chip.id} has no DRAM to keep a GEMM's operands in")
        placement = Placement(home=dict.fromkeys(ROLES, dram), onchip_level=None,
                              onchip_bytes=0.0)  # fmt: skip
    else:
        tensors = {t.name: t for o in ops for t in (*o.inputs, *o.outputs)}
        activations = sum(t.nbytes for t in tensors.values() if t.role is not Role.WEIGHT)
        placement = place(chip, Footprint(b.nbytes, 0.0, activations))
    costs = evaluate(table, HardwareArrays.build(chip, table), placement)
    time_s = float(costs.time_s.sum())
    moved = {level.name: float(b) for level, b in zip(chip.memory, costs.level_bytes.sum(axis=1),
                                                       strict=True)}  # fmt: skip
    at = ops.index(op)
    return GemmResult(time_s, op.flops / time_s, float(costs.energy_j.sum()),
                      Bottleneck(int(costs.bottleneck[at])).label, moved)  # fmt: skip


def _vector(name: str, x: Tensor, out: Tensor, flops_per_element: int) -> Op:
    """One elementwise pass on the vector units: `x` read, `out` written."""
    return Op(OpKind.ELEMENTWISE, name, (x,), (out,), (("flops_per_element", flops_per_element),))
