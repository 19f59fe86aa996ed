"""An encoder (BERT, RoBERTa) run once over a batch of sequences: what serving an embedding
or classification model costs. There is no decode phase: every token is known, every token
attends every other, and one forward pass is the whole request.

The graph is the transformer builder's (workloads/transformer.py) in encoder mode, costed
like any one-pass graph (scenarios/graph_inference.py): latency is the sum of its ops' times,
throughput `batch / latency` sequences per second.
"""

from __future__ import annotations

from xpusim.errors import UserError, check_positive
from xpusim.hardware.spec import Chip
from xpusim.hardware.system import System
from xpusim.ir.dtypes import DType, Format
from xpusim.scenarios.formats import resolve_formats
from xpusim.scenarios.graph_inference import GraphInferenceResult, one_chip, one_pass
from xpusim.scenarios.registry import register
from xpusim.workloads.imported import ImportedModel
from xpusim.workloads.transformer import StepShape, build_step
from xpusim.workloads.transformer_config import TransformerConfig


def simulate(
    model: TransformerConfig,
    chip: Chip | System,
    *,
    batch: int = 1,
    prompt: int = 128,
    precision: str | DType | None = None,
    weight_precision: str | Format | None = None,
    chips: int | None = None,
) -> GraphInferenceResult:
    """One forward pass of `batch` sequences of `prompt` tokens."""
    check_positive(batch=batch, prompt=prompt)
    if model.max_position_embeddings and prompt > model.max_position_embeddings:
        raise UserError(f"--prompt {prompt} exceeds {model.name}'s {model.max_position_embeddings} "
                        "positions (max_position_embeddings)")  # fmt: skip
    spec = one_chip(chip, chips, "an encoder")
    act, weight, notes = resolve_formats(spec, precision, weight_precision)
    graph = build_step(model, StepShape(batch, prompt, prompt), act, weight)
    inputs = {"input_ids": (batch, prompt)}
    return one_pass(ImportedModel(model.name, graph, "config.json", inputs), graph, spec, act,
                    weight, notes)  # fmt: skip


register("encoder", "inference", simulate)
