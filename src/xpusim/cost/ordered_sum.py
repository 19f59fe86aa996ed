"""Sums whose rounding does not depend on how many configurations are summed together.

A sweep costs thousands of configurations as one array and a plan search a few; the same
configuration must get the same bits either way (tests/test_shapes_as_arrays.py), and
numpy's own sum groups its terms differently with the array's shape. The LLM engine and
timeline (scenarios/llm/) and serving's step tables sum per-op and per-stage costs so.
"""

from __future__ import annotations

import numpy as np


def ordered_sum(values: np.ndarray, axis: int) -> np.ndarray:
    """A sum over `axis` as a tree (padded with zeros to a power of two, halved until one
    term is left): numpy's own sum groups terms differently with the array's shape, and a
    configuration's result must not depend on how many were costed beside it. Zeros past
    the last term change nothing: 3 stages padded to 16 sum exactly as they do alone."""
    values = np.moveaxis(values, axis, 0)
    n = len(values)
    size = 1 << max(n - 1, 0).bit_length()
    if size != n:  # the first halving, without the zeros: x + 0.0 is x, except for -0.0
        half = size // 2
        head = values[:half].astype(float)  # a copy
        head[: n - half] += values[half:]
        values = head
    while len(values) > 1:
        half = len(values) // 2
        values = values[:half] + values[half:]
    # where a zero was added, the sum is never -0.0 (0.0 + -0.0 is 0.0): nor is it here
    return values[0] + 0.0 if size != n else values[0]
