"""What one chip of an expert-parallel group runs of an MoE layer: the busiest chip's
token-expert pairs, and the grouped GEMM's efficiency.

A step's T tokens each pick k experts, T k token-expert pairs in all, spread over `ep` chips
that each hold E/ep experts. The layer ends when the busiest chip ends, so its pairs, not the
mean T k / ep, set the time. Two things put more on it:

- Chance. With routing independent and uniform over the experts (each pair lands on a chip
  with probability 1/ep) the chips' loads are a multinomial draw, and the largest of ep loads
  of mean m is about m + sqrt(2 m ln ep) (balls into bins, heavily loaded case: Raab and
  Steger, "Balls into Bins - A Simple and Tight Analysis", RANDOM 1998, theorem 1; tight for
  m >= ep ln ep, an upper bound below). At decode batch sizes this is the main effect: 64
  tokens x top-8 over 8 chips is m = 64, busiest about 81 (+27%); at 8192 prefill tokens it
  is +2%. Together with expected_active_experts (the distinct experts the tokens touch, whose
  weights each chip reads), it is the physical small-batch cost of expert parallelism.
- Skew: some experts are more popular than others in real traffic. ROUTING_SKEW multiplies
  the busiest chip's pairs for it. Its default, 1.0, is a stated assumption, not a
  measurement: DeepSeek-V3 trains its router with an auxiliary-loss-free balancing bias
  (DeepSeek-V3 technical report, arXiv 2412.19437, section 2.1.2) and deploys redundant
  copies of the heavy experts placed by its load balancer (section 3.4; the EPLB repository,
  github.com/deepseek-ai/EPLB) so that GPUs carry near-equal loads. Engines without EPLB on
  skewed traffic run slower: a measured per-model skew replaces the constant.
"""

from __future__ import annotations

import numpy as np

from xpusim.ir.op import Op
from xpusim.ir.tensor import Dim

ROUTING_SKEW = 1.0
"""Busiest chip's pairs over the balanced-by-chance busiest's: a stated assumption (see the
module docstring), >= 1."""

GROUPED_GEMM_EFFICIENCY = 1288 / 1304
"""A grouped (per-expert) GEMM's throughput relative to one dense GEMM of the same per-group
shape: DeepGEMM's README (deepseek-ai/DeepGEMM, revision of 2025-02-26; H800, FP8), grouped
contiguous layout 8 groups x M 4096, N 4096, K 7168 at 1288 TFLOPS against the normal GEMM
M 4096, N 4096, K 7168 at 1304 TFLOPS. Small per-expert row counts are slower still, which
the GEMM's own shape costs (cost/roofline.py's padding and ridge). One named figure until
per-vendor grouped-GEMM tables replace it (cost/ calibration data)."""


def is_expert(op: Op) -> bool:
    """An op of the routed experts (the builder's expert_* split rules): what expert
    parallelism spreads, and what runs as grouped GEMMs."""
    return str(op.attr("tp")).startswith("expert")


def busiest_rank_pairs(pairs: Dim, ep: int, skew: float = ROUTING_SKEW) -> Dim:
    """Token-expert pairs the busiest of `ep` chips runs, of `pairs` spread over them by
    routing (module docstring): m + sqrt(2 m ln ep) at mean m = pairs / ep, times `skew`,
    never more than all the pairs. `pairs` may be an int array over a graph's shape axis,
    and so is the count; one chip takes all of them."""
    if skew < 1:
        raise ValueError(f"routing skew must be at least 1, got {skew}")
    if ep <= 1:
        return pairs
    total = np.asarray(pairs, dtype=float)
    mean = total / ep
    busiest = np.minimum(np.ceil((mean + np.sqrt(2 * mean * np.log(ep))) * skew - 1e-9), total)
    return busiest.astype(np.int64) if isinstance(pairs, np.ndarray) else int(busiest)
