"""Which numeric formats a run uses: one rule for every inference scenario.

`precision` covers weights, activations and caches; `weight_precision` stores weights
narrower, the matrix unit still computing in `precision`: a plain format stores every weight
so (fp8, nvfp4 and mxfp4 all but the embedding table and LM head, 16-bit in their
checkpoints: ir/dtypes.KEPT_WIDE), a checkpoint layout (AWQ's and GPTQ's `int4`,
DeepSeek's `fp8-block`; ir/weight_layouts.toml) its linear layers with their scales, as
checkpoints do (ir/dtypes.weight_parts). A format the
chip lacks is an error naming the ones it has; no format given means the chip's native
16-bit one, and the result's notes say which.
"""

from __future__ import annotations

from xpusim.errors import UserError, closest
from xpusim.hardware.spec import Chip
from xpusim.ir.dtypes import DType, Format, parse_weight_format

DEFAULT_PRECISIONS = (DType.BF16, DType.FP16, DType.INT8)
"""Tried in order when no precision is given: the chip's native 16-bit format, else int8."""


def resolve_formats(
    chip: Chip, precision: str | DType | None, weight_precision: str | Format | None
) -> tuple[DType, Format, list[str]]:
    """(compute and activation format, weight format, notes about defaults chosen)."""
    if precision is not None:
        act = DType.parse(str(precision))
        chip.peak(act)  # raises a UserError naming the supported formats
        notes = []
    else:
        act = next((d for d in DEFAULT_PRECISIONS if d in chip.peak_ops_per_s), None)
        if act is None:
            raise UserError(f"{chip.id}: none of bf16, fp16, int8 is supported; pass --precision")
        notes = [
            f"precision not given: used {act.value}, the first of bf16/fp16/int8 {chip.id} has"
        ]
    weight = parse_weight_format(weight_precision) if weight_precision else act
    if weight.element.bits > act.bits:
        raise UserError(
            f"weight precision {weight.value} is wider than precision {act.value}; "
            f"weight-only quantization stores weights narrower"
        )
    return act, weight, notes


def resolve_kv_format(act: DType, kv_precision: str | DType | None) -> DType | None:
    """The format the KV cache is stored in when it differs from `act`, else None.

    A storage format only: attention reads the cache and widens it to its own compute format
    (the attention kernel's dequantization), so no chip needs a peak in it. Engines keep an
    FP8 cache beside FP4 GEMMs (TensorRT-LLM's NVFP4 engines, kv_cache_dtype fp8) and beside
    16-bit weights (vLLM's --kv-cache-dtype fp8).
    """
    if kv_precision is None:
        return None
    kv = DType.parse(str(kv_precision), "KV cache precision")
    if kv not in KV_FORMATS:
        raise UserError(f"--kv-precision {kv.value}: the KV cache is stored in one of "
                        f"{', '.join(d.value for d in KV_FORMATS)}")  # fmt: skip
    return None if kv == act else kv


KV_FORMATS = (DType.NVFP4, DType.MXFP4, DType.INT8, DType.FP8, DType.BF16, DType.FP16,
              DType.FP32)  # fmt: skip
"""Formats a KV cache may be stored in (indices and masks are not)."""


def resolve_attention_format(
    chip: Chip, act: DType, attention_precision: str | DType | None, kv: DType | None = None
) -> DType | None:
    """The format attention computes in when it differs from `act`, else None.

    An engine may run attention wider than its GEMMs: TensorRT-LLM's GPT attention plugin
    took FP32/FP16/BF16 inputs only, "even if the rest of the network runs in INT8 or FP8"
    (TensorRT-LLM docs/source/gpt_attention.md, INT8/FP8 KV Caches), until FP8 context FMHA
    (`--use_fp8_context_fmha`) came in a later release.

    Not given, beside 4-bit GEMMs (`act` NVFP4, MXFP4 or INT4), it is FP8 where the cache
    (`kv`, the format it is stored in; None for `act`'s own) is FP8 or 4-bit and the chip
    computes FP8, else the chip's 16-bit format: no serving engine's attention kernel
    multiplies in 4 bits. Fused kernels take FP8 queries over an FP8 cache (vLLM docs,
    Quantized KV Cache: "with FP8 KV cache, attention operations are also performed in the
    quantized (FP8) domain", FlashAttention 3; TensorRT-LLM's FP8 context FMHA and FP8 MLA
    generation kernels); others widen the cache to BF16 first (SGLang issue #10083: "dequantize
    to BF16/FP16 at the reading time for attention calculation"), a format
    `--attention-precision bf16` names. A 4-bit cache is widened to FP8 for the product
    (TensorRT-LLM's NVFP4 KV cache). Before this rule a 4-bit run priced attention at the
    chip's 4-bit peak, twice its FP8 rate on a B200.
    """
    if attention_precision is None:
        return None if act.bits >= 8 else _attention_beside_4bit(chip, kv or act)
    attention = DType.parse(str(attention_precision), "attention precision")
    chip.peak(attention, "--attention-precision")  # a UserError naming what the chip has
    return None if attention == act else attention


def _attention_beside_4bit(chip: Chip, cache: DType) -> DType:
    if cache.bits <= 8 and DType.FP8 in chip.peak_ops_per_s:
        return DType.FP8
    return next((d for d in (DType.BF16, DType.FP16) if d in chip.peak_ops_per_s), DType.FP32)


def resolve_moe_backend(name: str | None) -> str:
    """The engine's MoE backend by TensorRT-LLM's name (run_options.MOE_BACKENDS, any case),
    or "" (the default's tables) when not given."""
    from xpusim.run_options import MOE_BACKENDS

    if name is None:
        return ""
    found = str(name).upper()
    if found not in MOE_BACKENDS:
        raise UserError(f"unknown moe backend {name!r}{closest(found, MOE_BACKENDS)}")
    return found
