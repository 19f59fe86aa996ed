"""Fused kernels the torch importer traces as one op.

A model written for PyTorch may spell as a Python loop what every engine runs as one fused
kernel: transformers' Mamba scans its tokens one by one when mamba_ssm's CUDA kernel is
absent (`mamba_selective_scan`, its torch path). torch.export unrolls such a loop: a
Mamba-130M at 32 tokens traces to 9,983 nodes in 31-35 s (on this project's 2-core machine),
and the graph is costed as that loop, every token's state written and read back. While
from_torch traces, that function is replaced by a custom op of the same signature, which
the trace keeps as one node per call and the importer lowers to the IR op the kernel is
(OpKind.SCAN, torch_import's handler of `xpusim.selective_scan`). The custom op's
implementation calls the function it replaces, so a module run on real tensors computes
what it computed before.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from functools import cache
from typing import Any
from unittest import mock

import torch  # this module is imported by from_torch and load_exported only

SCAN_FUNCTION = "mamba_selective_scan"
"""transformers' selective scan (integrations/hub_kernels.py), imported by the modeling
modules of mamba, falcon_mamba, jamba and zamba under this name."""

def _modules() -> list[Any]:
    """The loaded transformers modeling modules that call the scan."""
    return [m for name, m in list(sys.modules.items())
            if name.startswith("transformers.models.") and hasattr(m, SCAN_FUNCTION)]  # fmt: skip


@cache
def _original_scan() -> Any:
    """transformers' function, as a modeling module imported it (its defining module does
    not export it by name); first read by `substituted`, before its patch hides it."""
    return next(getattr(m, SCAN_FUNCTION) for m in _modules()
                if getattr(m, SCAN_FUNCTION) is not _scan_as_op)  # fmt: skip


@cache
def register() -> None:
    """Defines torch.ops.xpusim.selective_scan once per process (a saved program that holds
    it needs it defined before torch.export.load)."""

    @torch.library.custom_op("xpusim::selective_scan", mutates_args=())
    def selective_scan(
        x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor,
        D: torch.Tensor | None, z: torch.Tensor | None, delta_bias: torch.Tensor | None,
        delta_softplus: bool,
    ) -> torch.Tensor:  # fmt: skip
        y = _original_scan()(x, dt, A, B, C, D=D, z=z, delta_bias=delta_bias,
                             delta_softplus=delta_softplus)  # fmt: skip
        return y.clone()  # a custom op may not return an alias of an input

    @selective_scan.register_fake
    def _(x, dt, A, B, C, D, z, delta_bias, delta_softplus):
        # y: x's shape (batch, channels, tokens); D x promotes it to D's format (fp32)
        dtype = x.dtype if D is None else torch.promote_types(x.dtype, D.dtype)
        return x.new_empty(x.shape, dtype=dtype)


def _scan_as_op(
    hidden_states: Any, dt: Any, A: Any, B: Any, C: Any, D: Any = None, z: Any = None,
    delta_bias: Any = None, delta_softplus: bool = False, return_last_state: bool = False,
    **kwargs: Any,
) -> Any:  # fmt: skip
    """mamba_selective_scan's signature; a call that wants the final state (to fill a cache)
    is traced as written, there being one output only. Its other options (use_mambapy,
    use_associative_scan) choose among torch spellings of the same scan."""
    if return_last_state:
        return _original_scan()(hidden_states, dt, A, B, C, D=D, z=z, delta_bias=delta_bias,
                                delta_softplus=delta_softplus,
                                return_last_state=return_last_state, **kwargs)  # fmt: skip
    return torch.ops.xpusim.selective_scan(hidden_states, dt, A, B, C, D, z, delta_bias,
                                           delta_softplus)  # fmt: skip


@contextmanager
def substituted() -> Iterator[None]:
    """Within: every loaded transformers modeling module's scan is the custom op."""
    modules = _modules()
    if not modules:
        yield
        return
    register()
    _original_scan()  # read before the patch hides it
    with ExitStack() as stack:
        for module in modules:
            stack.enter_context(mock.patch.object(module, SCAN_FUNCTION, _scan_as_op))
        yield
