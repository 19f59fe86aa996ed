"""A convolutional network from the zoo run once over a batch of images: what serving an
image classifier costs. The graph is built at the batch asked for (workloads/cnn.py) and
costed as any one-pass graph (scenarios/graph_inference.py): latency is the sum of its ops'
times, throughput `batch / latency` images per second.
"""

from __future__ import annotations

from xpusim.errors import check_positive
from xpusim.hardware.spec import Chip
from xpusim.hardware.system import System
from xpusim.ir.dtypes import DType, Format
from xpusim.scenarios import graph_inference
from xpusim.scenarios.graph_inference import GraphInferenceResult, one_chip
from xpusim.scenarios.registry import register
from xpusim.workloads.cnn import ResNetConfig


def simulate(
    model: ResNetConfig,
    chip: Chip | System,
    *,
    batch: int = 1,
    precision: str | DType | None = None,
    weight_precision: str | Format | None = None,
    chips: int | None = None,
) -> GraphInferenceResult:
    """One forward pass of `batch` images; precision defaults to the chip's bf16/fp16/int8."""
    check_positive(batch=batch)
    spec = one_chip(chip, chips, "a CNN")
    return graph_inference.simulate(model.model(batch, DType.FP32), spec, precision=precision,
                                    weight_precision=weight_precision)  # fmt: skip


register("cnn", "inference", simulate)
