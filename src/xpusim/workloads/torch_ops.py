"""The ATen ops the PyTorch importer knows, by what they cost.

Names are ATen op packets without overload (`add` covers add.Tensor and add.Scalar) and with
in-place forms folded into their out-of-place names (`relu_` is `relu`). FLOPs per element
are counted as the transformer builder counts them: 1 per basic arithmetic or comparison,
named constants for compound functions, 0 for ops that only move data.
"""

from __future__ import annotations

from xpusim.workloads.lowering import BATCHNORM_FLOPS, SIGMOID_FLOPS
from xpusim.workloads.transformer import GELU_FLOPS, LAYERNORM_FLOPS, RMSNORM_FLOPS, SILU_FLOPS


def _names(text: str) -> list[str]:
    """Op names written as one string: long lists read better that way."""
    return text.split()


VIEWS = frozenset(
    _names(
        "view _unsafe_view reshape view_as transpose permute t movedim swapaxes unsqueeze squeeze "
        "expand expand_as slice select narrow split split_with_sizes chunk unbind tensor_split "
        "flatten unflatten alias detach contiguous clone lift_fresh_copy dropout feature_dropout "
        "native_dropout as_strided diagonal"
    )
)
"""Cost nothing: a new shape or stride on the same buffer. Layout copies (contiguous, clone)
are counted here too, because an inference compiler folds them into the consumer."""

INLINED = frozenset({"higher_order.wrap_with_set_grad_enabled", "higher_order.wrap_with_autocast"})
"""Higher-order ops that a context manager (no_grad, autocast) becomes: a call of a subgraph,
lowered in place. Other higher-order ops (cond, while_loop, map) are reported as unknown."""

CREATION = frozenset(
    _names(
        "arange zeros ones full empty empty_strided zeros_like ones_like full_like empty_like "
        "new_zeros new_ones new_full new_empty scalar_tensor linspace eye tril_indices "
        "triu_indices"
    )
)
"""Make tensors whose values do not depend on any input: constants, folded at compile time."""

_ONE_FLOP = (
    "add sub rsub mul div neg abs pow sqrt rsqrt reciprocal exp exp2 expm1 log log2 log1p sin "
    "cos tan tanh erf sign floor ceil round trunc relu clamp clamp_min clamp_max maximum minimum "
    "fmod remainder floor_divide where masked_fill eq ne lt le gt ge logical_and logical_or "
    "logical_not logical_xor __and__ __or__ __xor__ bitwise_and bitwise_or bitwise_not isnan "
    "isinf hardtanh leaky_relu elu square tril triu"
)
_DATA_MOVEMENT = (
    "cat stack index index_select gather scatter scatter_add index_put index_add "
    "constant_pad_nd pad repeat roll flip copy fill masked_scatter"
)
ELEMENTWISE: dict[str, float] = {
    **dict.fromkeys(_names(_ONE_FLOP), 1),
    **dict.fromkeys(_names(_DATA_MOVEMENT), 0),
    "sigmoid": SIGMOID_FLOPS,
    "silu": SILU_FLOPS,
    "hardsigmoid": SIGMOID_FLOPS,
    "hardswish": SILU_FLOPS,
    "gelu": GELU_FLOPS,
    "softplus": SIGMOID_FLOPS,
}
"""Vector FLOPs per output element."""

REDUCTIONS: dict[str, float] = {
    **dict.fromkeys(
        _names(
            "sum mean amax amin max min prod any all argmax argmin cumsum cumprod logsumexp "
            "topk histc bincount "
            "adaptive_avg_pool1d adaptive_avg_pool2d adaptive_avg_pool3d _adaptive_avg_pool2d "
            "adaptive_max_pool1d adaptive_max_pool2d adaptive_max_pool3d"
        ),
        1,
    ),
    **dict.fromkeys(_names("norm linalg_vector_norm"), 2),  # square, accumulate
    **dict.fromkeys(_names("var std var_mean std_mean"), 3),  # subtract mean, square, add
}
"""Vector FLOPs per input element."""

POOLS = frozenset(
    _names(
        "max_pool1d max_pool2d max_pool3d max_pool2d_with_indices max_pool3d_with_indices "
        "avg_pool1d avg_pool2d avg_pool3d"
    )
)
"""Windowed pools: kernel-size FLOPs per output element."""

# Norms: (vector FLOPs per element, the IR's norm attribute).
LAYER = (LAYERNORM_FLOPS, "layer")
RMS = (RMSNORM_FLOPS, "rms")
BATCH = (BATCHNORM_FLOPS, "batch")
GROUP = (LAYERNORM_FLOPS, "group")
