"""The ONNX ops the ONNX importer knows, by what they cost (default domain, any opset).

The counting rules are the PyTorch importer's (workloads/torch_ops.py), so a model imported
both ways gets the same FLOPs: 1 per basic arithmetic or comparison, named constants for
compound functions, 0 for ops that only move data.
"""

from __future__ import annotations

from xpusim.workloads.lowering import BATCHNORM_FLOPS, SIGMOID_FLOPS
from xpusim.workloads.transformer import (
    GELU_FLOPS,
    LAYERNORM_FLOPS,
    RMSNORM_FLOPS,
    ROTARY_FLOPS,
    SILU_FLOPS,
)


def _names(text: str) -> list[str]:
    """Op names written as one string: long lists read better that way."""
    return text.split()


VIEWS = frozenset(
    _names("Reshape Transpose Squeeze Unsqueeze Flatten Expand Slice Split Identity Dropout")
)
"""Cost nothing: a new shape or stride on the same buffer."""

CREATION = frozenset(
    _names(
        "Constant ConstantOfShape Range Shape Size EyeLike RandomNormal RandomNormalLike "
        "RandomUniform RandomUniformLike"
    )
)
"""Make tensors whose values do not depend on any input's data: folded at compile time."""

_ONE_FLOP = (
    "Add Sub Mul Div Neg Abs Pow Sqrt Reciprocal Exp Log Sin Cos Tan Tanh Erf Sign Floor Ceil "
    "Round Relu Clip Max Min Sum Mean Mod Where Equal Less LessOrEqual Greater GreaterOrEqual And "
    "Or Not Xor IsNaN IsInf LeakyRelu Elu Selu PRelu Trilu BitwiseAnd BitwiseOr BitwiseNot"
)
_DATA_MOVEMENT = "Concat GatherElements GatherND ScatterElements ScatterND Pad Tile"
ELEMENTWISE: dict[str, float] = {
    **dict.fromkeys(_names(_ONE_FLOP), 1),
    **dict.fromkeys(_names(_DATA_MOVEMENT), 0),
    "Sigmoid": SIGMOID_FLOPS,
    "HardSigmoid": SIGMOID_FLOPS,
    "Swish": SILU_FLOPS,
    "HardSwish": SILU_FLOPS,
    "Gelu": GELU_FLOPS,
    "RotaryEmbedding": ROTARY_FLOPS,
    "Softplus": SIGMOID_FLOPS,
}
"""Vector FLOPs per output element."""

REDUCTIONS: dict[str, float] = {
    **dict.fromkeys(
        _names(
            "ReduceMean ReduceSum ReduceMax ReduceMin ReduceProd ReduceL1 ReduceLogSumExp ArgMax "
            "ArgMin CumSum GlobalAveragePool GlobalMaxPool"
        ),
        1,
    ),
    **dict.fromkeys(_names("ReduceL2 ReduceSumSquare"), 2),  # square, accumulate
}
"""Vector FLOPs per input element."""

POOLS = frozenset(_names("MaxPool AveragePool LpPool"))
"""Windowed pools: kernel-size FLOPs per output element."""

# Norms: input positions of their parameters, FLOPs per element, the IR's norm attribute.
NORMS: dict[str, tuple[slice, float, str]] = {
    "LayerNormalization": (slice(1, 3), LAYERNORM_FLOPS, "layer"),
    "RMSNormalization": (slice(1, 2), RMSNORM_FLOPS, "rms"),
    "SimplifiedLayerNormalization": (slice(1, 2), RMSNORM_FLOPS, "rms"),
    "BatchNormalization": (slice(1, 5), BATCHNORM_FLOPS, "batch"),
    "GroupNormalization": (slice(1, 3), LAYERNORM_FLOPS, "group"),
    "InstanceNormalization": (slice(1, 3), LAYERNORM_FLOPS, "group"),
}
