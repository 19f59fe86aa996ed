"""`xpusim demo`: the spec-sheet argument settled with numbers, on embedded defaults.

Five very different chips run one 7B model in int8 and in 16-bit: which is faster, which
spends fewer joules per token, and which cannot hold the model at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xpusim.hardware.catalog import load_chip
from xpusim.ir.dtypes import DType
from xpusim.report.units import si
from xpusim.scenarios.llm.inference import LLMInferenceResult, simulate
from xpusim.workloads.resolve import load_model

DEMO_MODEL = "llama-2-7b"
DEMO_CHIPS = ("mtia-v1", "tpu-v4", "groq-lpu", "apple-m2-ane", "h100-sxm")
DEMO_PRECISIONS = (DType.INT8, DType.FP16)
DEMO_SHAPE = dict(batch=1, prompt=128, gen=128)
_SIXTEEN_BIT = (DType.FP16, DType.BF16)


@dataclass
class Demo:
    model: str
    shape: dict[str, int]
    results: list[LLMInferenceResult]
    notes: list[str] = field(default_factory=list)
    summary: list[str] = field(default_factory=list)


def run_demo() -> Demo:
    model = load_model(DEMO_MODEL)
    demo = Demo(model=DEMO_MODEL, shape=dict(DEMO_SHAPE), results=[])
    for precision in DEMO_PRECISIONS:
        for chip_id in DEMO_CHIPS:
            chip = load_chip(chip_id)
            dtype = precision
            if precision not in chip.peak_ops_per_s and precision in _SIXTEEN_BIT:
                dtype = next((d for d in _SIXTEEN_BIT if d in chip.peak_ops_per_s), precision)
                demo.notes.append(f"{chip_id} has no {precision.value}: its {dtype.value} is shown")
            demo.results.append(simulate(model, chip, precision=dtype, **DEMO_SHAPE))
    demo.summary = _summarize(demo.results)
    return demo


def _summarize(results: list[LLMInferenceResult]) -> list[str]:
    lines = []
    for bits, group in (("int8", [r for r in results if r.precision == "int8"]),
                        ("16-bit", [r for r in results if r.precision != "int8"])):  # fmt: skip
        fit = [r for r in group if r.fits]
        if fit:
            fastest = max(fit, key=lambda r: r.tokens_per_s_per_user)
            frugal = min(fit, key=lambda r: r.joules_per_token)
            lines.append(
                f"{bits}: fastest per user is {fastest.chip} "
                f"({si(fastest.tokens_per_s_per_user, 'tokens/s')}); most efficient is "
                f"{frugal.chip} ({si(frugal.joules_per_token, 'J')} a token)"
            )
        lines += [
            f"{bits}: {r.chip} cannot hold the model ({r.memory_bytes.total / 1e9:.1f} GB needed, "
            f"{r.memory_bytes.capacity / 1e9:.2f} GB on chip): at least {r.min_chips} chips"
            for r in group
            if not r.fits
        ]
    return lines
