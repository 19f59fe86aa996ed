"""A reference interpreter: runs a Graph on numpy arrays, to check what compiler passes emit.

It computes what each op means, not what it costs: the backward graph of compiler/autodiff.py
can then be compared with finite differences, and a rewritten graph (explicit transposes)
with the original. Tensors are values by name; an op may read a tensor under another shape
with as many elements (a free reshape of contiguous storage). Values are stored in their
tensor's format (bf16 and fp8 through ml_dtypes, so rounding shows) and computed in fp32, or
everything in `float_dtype` (float64 for gradient checks). Semantics of vector ops come from
their `fn` attr (ir/kernels.py); collectives need every rank and are not interpreted.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from xpusim.ir.dtypes import DType
from xpusim.ir.graph import Graph
from xpusim.ir.kernels import KERNELS
from xpusim.ir.tensor import Tensor

_FLOATS = (DType.FP8, DType.BF16, DType.FP16, DType.TF32, DType.FP32)


def numpy_dtype(dtype: DType) -> np.dtype:
    """The numpy type that stores a format; ml_dtypes provides bfloat16 and fp8."""
    if dtype in (DType.BF16, DType.FP8):
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16 if dtype is DType.BF16 else ml_dtypes.float8_e4m3fn)
    plain = {DType.FP16: np.float16, DType.TF32: np.float32, DType.FP32: np.float32,
             DType.INT8: np.int8, DType.INT32: np.int32, DType.INT64: np.int64,
             DType.BOOL: np.bool_}  # fmt: skip
    if dtype not in plain:
        raise ValueError(f"the interpreter cannot store {dtype.value} tensors")
    return np.dtype(plain[dtype])


def run(
    graph: Graph,
    inputs: Mapping[str, np.ndarray],
    float_dtype: type[np.floating] | None = None,
) -> dict[str, np.ndarray]:
    """Every tensor's value after running the graph's ops in order on `inputs`."""
    env = {name: np.asarray(value) for name, value in inputs.items()}

    def read(t: Tensor) -> np.ndarray:
        if t.name not in env:
            raise ValueError(f"{graph.name}: {t.name} is read before any op writes it")
        value = env[t.name]
        if value.size != t.numel:
            raise ValueError(f"{t.name}: {value.shape} cannot be read as {t.shape}")
        compute = float_dtype or np.float32
        return value.reshape(t.shape).astype(compute if t.dtype in _FLOATS else value.dtype)

    for op in graph:
        kernel = KERNELS.get(op.kind)
        if kernel is None:
            raise ValueError(f"the interpreter has no kernel for {op.kind.value} op {op.name}")
        values = kernel(op, [read(t) for t in op.inputs])
        for t, value in zip(op.outputs, values, strict=True):
            store = float_dtype if float_dtype and t.dtype in _FLOATS else numpy_dtype(t.dtype)
            env[t.name] = np.asarray(value).reshape(t.shape).astype(store)
    return env
