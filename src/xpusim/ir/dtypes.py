"""Numeric formats shared by the IR (tensor sizes) and the chip specs (peak rate per format).

Widths follow the formats' definitions (IEEE 754 for fp16/fp32, bfloat16, OCP FP8 E4M3,
two's-complement int8/int4); `tf32` is NVIDIA's 19-bit tensor-core input format, stored as
32 bits in memory, so it only appears as a compute rate, never as a storage type.

The block-scaled 4-bit formats count their scales in their width, because the scales move
with the elements: MXFP4 (OCP Microscaling Formats v1.0) is E2M1 elements in blocks of 32
sharing one 8-bit E8M0 scale, 4 + 8/32 = 4.25 bits; NVFP4 (NVIDIA Blackwell) is E2M1 in
blocks of 16 sharing an FP8 E4M3 scale, 4 + 8/16 = 4.5 bits, plus one FP32 scale per tensor
(negligible).
"""

from __future__ import annotations

from enum import StrEnum


class DType(StrEnum):
    MXFP4 = "mxfp4"
    NVFP4 = "nvfp4"
    INT4 = "int4"
    INT8 = "int8"
    FP8 = "fp8"
    BF16 = "bf16"
    FP16 = "fp16"
    TF32 = "tf32"
    FP32 = "fp32"
    INT32 = "int32"  # token ids and indices; never a compute precision
    INT64 = "int64"  # indices as PyTorch and ONNX store them; never a compute precision
    BOOL = "bool"  # masks; stored one per byte

    @property
    def bits(self) -> float:
        """Bits per element in memory, block scales included (4.25 for MXFP4)."""
        return _BITS[self]

    @property
    def itemsize(self) -> float:
        """Bytes per element; 0.5 for int4 (two per byte, as packed in memory)."""
        return self.bits / 8

    @classmethod
    def parse(cls, name: str, what: str = "precision") -> DType:
        from xpusim.errors import UserError, closest

        try:
            return cls(name.lower())
        except ValueError:
            raise UserError(
                f"unknown {what} {name!r}" + closest(name, [d.value for d in cls])
            ) from None


_BITS: dict[DType, float] = {
    DType.MXFP4: 4 + 8 / 32,
    DType.NVFP4: 4 + 8 / 16,
    DType.INT4: 4,
    DType.INT8: 8,
    DType.FP8: 8,
    DType.BF16: 16,
    DType.FP16: 16,
    DType.TF32: 32,
    DType.FP32: 32,
    DType.INT32: 32,
    DType.INT64: 64,
    DType.BOOL: 8,
}
