"""A tensor in the IR: a shape, a numeric format and the role that decides where it lives."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeAlias

import numpy as np

from xpusim.ir.dtypes import Format

Dim: TypeAlias = "int | np.ndarray"
"""A tensor dimension: an int, or an int array over a shape axis. A graph built for many
request shapes at once (workloads/transformer.py with array-valued StepShape) carries its
batch, sequence and cache lengths as arrays, and every FLOP and byte count below is then an
array over those shapes: one build and one tabulation serve them all."""


def dim_key(d: Dim) -> object:
    """A dimension as a hashable identity. Array dimensions are keyed by the array object:
    a builder makes each once and hands the same object to every tensor that has it (and
    the graph holds them, so no other array can take their ids while its ops are keyed)."""
    return ("axis", id(d)) if isinstance(d, np.ndarray) else d


class Role(StrEnum):
    """Why a tensor exists; the memory planner places tensors by role, not by name.

    Weights persist across requests, the KV cache persists across decode steps of one
    request, activations live only between the op that makes them and their last reader.
    """

    WEIGHT = "weight"
    KV_CACHE = "kv_cache"
    ACTIVATION = "activation"


ROLES: tuple[Role, ...] = tuple(Role)


@dataclass(frozen=True, slots=True)
class Tensor:
    name: str
    shape: tuple[Dim, ...]
    dtype: Format
    role: Role = Role.ACTIVATION

    @property
    def numel(self) -> Dim:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> float | np.ndarray:
        return self.numel * self.dtype.itemsize

    @property
    def signature(self) -> tuple:
        """Everything that affects cost; the name does not. (Plain int dimensions are their
        own keys: checked first, as a plan search asks for thousands of signatures.)"""
        shape = self.shape
        if type(shape) is tuple:
            for d in shape:
                if type(d) is not int:
                    break
            else:
                return (shape, self.dtype, self.role)
        return (tuple(map(dim_key, shape)), self.dtype, self.role)
