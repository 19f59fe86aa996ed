"""Numeric formats shared by the IR (tensor sizes) and the chip specs (peak rate per format).

Widths follow the formats' definitions (IEEE 754 for fp16/fp32, bfloat16, OCP FP8 E4M3,
two's-complement int8/int4); `tf32` is NVIDIA's 19-bit tensor-core input format, stored as
32 bits in memory, so it only appears as a compute rate, never as a storage type.

The block-scaled 4-bit formats count their scales in their width, because the scales move
with the elements: MXFP4 (OCP Microscaling Formats v1.0) is E2M1 elements in blocks of 32
sharing one 8-bit E8M0 scale, 4 + 8/32 = 4.25 bits; NVFP4 (NVIDIA Blackwell) is E2M1 in
blocks of 16 sharing an FP8 E4M3 scale, 4 + 8/16 = 4.5 bits, plus one FP32 scale per tensor
(negligible).

Quantized checkpoints' weight formats are `Grouped`: an element format in groups that each
carry a scale (and a zero point), in the layouts checkpoints use (weight_layouts.toml: AWQ's
and GPTQ's int4, torchao's, DeepSeek-V3's FP8 128 x 128 blocks). Their width counts the
group's scale and zero for the same reason. Scales that do not grow with the weights are
not counted: a per-tensor FP8 or INT8 scale (one number) and a per-channel INT8 scale (16
bits per row of K >= 1024 weights, under 0.016 bits a weight).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import TypeAlias


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

    @property
    def element(self) -> DType:
        """The format one value is stored in: itself (a Grouped format's is its element's)."""
        return self

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


@dataclass(frozen=True)
class Grouped:
    """Weights as a checkpoint layout stores them: `element` values in groups of `group`,
    each group with a scale and (for integers) a zero point."""

    name: str  # as the command line names it: "int4", "int4-g32", "int4-torchao-g32"
    element: DType
    group: int
    scale_bits: int
    zero_bits: int
    head: bool  # the LM head is stored so too (else it keeps the activations' format)

    @property
    def value(self) -> str:
        return self.name

    @property
    def bits(self) -> float:
        """Bits per weight, its group's scale and zero point included."""
        return self.element.bits + (self.scale_bits + self.zero_bits) / self.group

    @property
    def itemsize(self) -> float:
        return self.bits / 8


Format: TypeAlias = "DType | Grouped"
"""How a tensor is stored: a plain format, or grouped integers (weights only)."""


@cache
def weight_layouts() -> dict[str, Grouped]:
    """Every grouped weight format by name: each layout at its default group and at the
    other groups it is published with (weight_layouts.toml)."""
    data = tomllib.loads(Path(__file__).with_name("weight_layouts.toml").read_text())
    found: dict[str, Grouped] = {}
    for name, layout in data.items():
        others = [g for g in layout["groups"] if g != layout["group"]]
        for group in [layout["group"], *others]:
            label = name if group == layout["group"] else f"{name}-g{group}"
            found[label] = Grouped(label, DType(layout["element"]), group, layout["scale_bits"],
                                   layout["zero_bits"], layout["head"])  # fmt: skip
    return found


def parse_weight_format(name: str | Format) -> Format:
    """A weight format by name (or one already parsed): a checkpoint layout, else a plain
    format."""
    from xpusim.errors import UserError, closest

    if isinstance(name, DType | Grouped):
        return name
    grouped = weight_layouts().get(name.lower())
    if grouped is not None:
        return grouped
    try:
        return DType(name.lower())
    except ValueError:
        known = [*weight_layouts(), *(d.value for d in DType)]
        raise UserError(f"unknown weight precision {name!r}" + closest(name, known)) from None


@dataclass(frozen=True)
class WeightParts:
    """The formats a model's weights are stored in: its linear layers' (`body`), its
    embedding table's and its LM head's."""

    body: Format
    table: Format
    head: Format

    @property
    def keeps_wide(self) -> bool:
        """Whether the format leaves some weights 16-bit (the checkpoints' formats: KEPT_WIDE
        and grouped layouts keep the embedding table so), and with them the matmuls a
        checkpoint leaves unquantized (routers, excluded projections); int8's edge compilers
        quantize every weight, on chips that may have no 16-bit float peak at all."""
        return self.table != self.body


KEPT_WIDE = frozenset({DType.FP8, DType.NVFP4, DType.MXFP4})
"""Plain formats whose checkpoints quantize the linear layers alone, leaving the embedding
table and the LM head 16-bit: NVIDIA ModelOpt's FP8 and NVFP4 configs disable '*lm_head*'
(modelopt/torch/quantization/config.py _default_disabled_quantizer_cfg; NVIDIA's MLPerf
v5.1 quantizer, closed/NVIDIA/code/llmlib/hf_quantize.py, quantize_lm_head=False), so its
checkpoints list it in hf_quant_config.json exclude_modules; llm-compressor's FP8 recipes
ignore ["lm_head"] (RedHatAI/*-FP8 config.json); vLLM's online --quantization fp8
quantizes LinearBase layers only, never ParallelLMHead; DeepSeek-V3/R1's FP8 and gpt-oss's
MXFP4 checkpoints keep the head and embedding bf16 (their config.json). int8 is not here:
edge compilers (TFLite full integer, Hailo, MTIA's int8) quantize the head too."""


def stream_format(act: DType) -> DType:
    """The format an inference engine keeps activations in between its matmuls when they
    compute in `act`: BF16 under the KEPT_WIDE formats, whose engines quantize a GEMM's
    input alone and write its output in 16 bits (TensorRT-LLM's FP8 and NVFP4 GEMMs,
    vLLM's and SGLang's Fp8LinearMethod: out_dtype = the input's bf16), else `act` itself
    (int8's edge compilers keep integer activations throughout)."""
    return DType.BF16 if act in KEPT_WIDE else act


def kept_wide(act: DType) -> DType:
    """The format a quantized run keeps its unquantized weights in (the embedding table, the
    LM head, MoE routers, a checkpoint's excluded projections): the activations' where they
    are 16 bits or wider, else BF16, as the checkpoints store them."""
    return act if act.bits >= 16 else DType.BF16


def weight_parts(weight: Format, act: DType) -> WeightParts:
    """A grouped layout quantizes the linear layers, and the LM head only where the layout
    says so, as the checkpoints do, leaving the rest 16-bit (or in `act` where it is
    wider); so does a plain low-precision float format (KEPT_WIDE); another plain format
    stores every weight."""
    plain = kept_wide(act)
    if isinstance(weight, Grouped):
        return WeightParts(weight, plain, weight if weight.head else plain)
    if weight in KEPT_WIDE:
        return WeightParts(weight, plain, plain)
    return WeightParts(weight, weight, weight)
