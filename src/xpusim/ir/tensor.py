"""A tensor in the IR: a shape, a numeric format and the role that decides where it lives."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from xpusim.ir.dtypes import DType


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
    shape: tuple[int, ...]
    dtype: DType
    role: Role = Role.ACTIVATION

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> float:
        return self.numel * self.dtype.itemsize

    @property
    def signature(self) -> tuple:
        """Everything that affects cost; the name does not."""
        return (self.shape, self.dtype, self.role)
