"""A model brought in through torch.export or ONNX: the IR of one forward pass at fixed shapes.

Unlike a zoo transformer, whose steps are rebuilt for every batch and prompt, an imported
graph is traced at the shapes of its inputs; it is simulated as one pass
(scenarios/graph_inference.py). Kept free of torch and onnx so that dispatching on it never
imports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xpusim.errors import UserError
from xpusim.ir.graph import Graph


@dataclass(frozen=True)
class ImportedModel:
    name: str
    scenario_kind: ClassVar[str] = "graph"  # what simulates it (scenarios/registry.py)
    graph: Graph  # as lowered, in the model's own dtypes; compiler passes run per simulation
    source: str  # "torch.export" or "onnx"
    inputs: dict[str, tuple[int, ...]]  # the model's tensor inputs and the shapes traced

    def __post_init__(self) -> None:
        """A pass with no ops, or over an empty tensor, has nothing to cost: per-item
        figures would divide by zero items."""
        if not self.graph.ops:
            raise UserError(f"{self.name}: the {self.source} graph has no ops to simulate")
        for op in self.graph.ops:
            empty = next((t for t in (*op.inputs, *op.outputs) if 0 in t.shape), None)
            if empty is not None:
                raise UserError(f"{self.name}: op {op.name!r} has tensor {empty.name!r} of "
                                f"shape {tuple(empty.shape)}, with a dimension of size 0: "
                                "nothing to simulate (give the input's shape with "
                                "--input-shape NAME=D0,D1,...)")  # fmt: skip

    @property
    def batch(self) -> int:
        """Leading dimension of the first input: the items (images, sequences) of one pass."""
        first = next(iter(self.inputs.values()), ())
        return first[0] if first else 1
