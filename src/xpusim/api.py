"""The Python API that notebooks use and the CLI wraps: names in, result dataclasses out."""

from __future__ import annotations

from pathlib import Path

from xpusim.hardware.catalog import chip_ids, load_chip
from xpusim.hardware.spec import Chip
from xpusim.scenarios.llm_inference import LLMInferenceResult
from xpusim.scenarios.llm_inference import simulate as _simulate_llm
from xpusim.workloads.transformer_config import TransformerConfig
from xpusim.workloads.zoo import load_model, model_ids


def chip(id_or_path: str | Path) -> Chip:
    """A chip from the catalog by id (`xpusim.chip("h100-sxm")`) or from a TOML file."""
    return load_chip(id_or_path)


def model(id_or_path: str | Path) -> TransformerConfig:
    """A model from the zoo by id (`xpusim.model("llama-2-7b")`) or a HF `config.json` path."""
    return load_model(id_or_path)


def simulate(
    model: TransformerConfig | str,
    chip: Chip | str,
    *,
    batch: int = 1,
    prompt: int = 128,
    gen: int = 128,
    precision: str | None = None,
    weight_precision: str | None = None,
) -> LLMInferenceResult:
    """LLM inference of one request batch on one chip; see scenarios/llm_inference.py."""
    cfg = load_model(model) if isinstance(model, str | Path) else model
    spec = load_chip(chip) if isinstance(chip, str | Path) else chip
    return _simulate_llm(
        cfg, spec, batch=batch, prompt=prompt, gen=gen,
        precision=precision, weight_precision=weight_precision,
    )  # fmt: skip


def compare(
    model: TransformerConfig | str, chips: list[Chip | str], **options
) -> list[LLMInferenceResult]:
    """The same workload on several chips, in the order given."""
    return [simulate(model, c, **options) for c in chips]


__all__ = ["chip", "chip_ids", "compare", "model", "model_ids", "simulate"]
