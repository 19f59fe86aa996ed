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
- Skew: some experts are more popular than others, and a chip whose experts are popular
  runs more than chance gives it. Nobody publishes per-batch routing counts of these models
  under the engines' benchmarks, so the skew is a stated assumption, aiconfigurator's (the
  tool NVIDIA's Dynamo team sizes TensorRT-LLM deployments with): each expert's share of the
  step's pairs drawn from a power law of exponent alpha between 1 and 0.8 T tokens
  (ai-dynamo/aiconfigurator collector/helper.py `_generate_power_law_distribution`, commit
  095f58a), each expert capped at T, the experts placed on chips in order (E/ep a
  chip), the layer timed on the busiest chip; alpha 1.01 for DeepSeek-V3/R1 and their kin
  (sdk/models/deepseek.py `_power_law_alpha`), 1.2 for every other MoE (sdk/models/moe.py).
  Its own measured MoE rows say what that costs: TensorRT-LLM's fused MoE on H100, Qwen3-
  235B's shape, FP8, EP 8, 2048 tokens, 205 us balanced, 265 us (1.29x) and 290 us (1.41x)
  at alpha 1.01 and 1.2 (moe_perf.parquet, 1.3.0rc10). `power_law_busiest` is the
  expectation of the busiest chip's pairs under that draw (a fixed-seed average of DRAWS
  draws on a grid of token counts), and the busiest chip runs the larger of it and chance's.
  Engines that rebalance (DeepSeek's EPLB: redundant copies of the heavy experts, DeepSeek-V3
  report, arXiv 2412.19437, section 3.4) carry less; a config's `routing_alpha` of None
  leaves chance alone.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from xpusim.ir.op import Op
from xpusim.ir.tensor import Dim

DRAWS = 1024
"""Draws of aiconfigurator's power law averaged per token count: the busiest chip's mean
share moves by under 2% between two seeds at this count (tests/test_moe_layout.py)."""

TOKEN_GRID = 2.0 ** np.arange(0, 21)
"""Token counts the busiest share is drawn at (1 to 2^20), interpolated in log tokens
between them: the share moves by a few percent from one power of two to the next."""

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


def _power_law_loads(tokens: float, experts: int, topk: int, ep: int, alpha: float,
                     rng: np.random.Generator) -> np.ndarray:
    """DRAWS chips' loads, [draw, chip], of one power-law routing of `tokens` x `topk` pairs
    as aiconfigurator's collector draws it (module docstring), left unrounded: its rounding
    and the touch-up that restores the exact sum move a pair or two an expert, and would
    leave a draw of one token empty."""
    low, high = (1.0, tokens * 0.8) if tokens * topk > experts else (0.01, 2.0)
    u = rng.random((DRAWS, experts))
    e = 1.0 - alpha
    share = ((high**e - low**e) * u + low**e) ** (1.0 / e)
    counts = np.minimum(share / share.sum(axis=1, keepdims=True) * tokens * topk, tokens)
    return counts.reshape(DRAWS, ep, experts // ep).sum(axis=2)


@cache
def _busiest_share(experts: int, topk: int, ep: int, alpha: float) -> np.ndarray:
    """The busiest chip's expected pairs over the mean, pairs/ep, at each TOKEN_GRID count."""
    rng = np.random.default_rng(0)
    shares = []
    for tokens in TOKEN_GRID:
        loads = _power_law_loads(float(tokens), experts, topk, ep, alpha, rng)
        shares.append(float(np.mean(loads.max(axis=1) / loads.sum(axis=1))) * ep)
    return np.array(shares)


def power_law_busiest(tokens: Dim, experts: int, topk: int, ep: int, alpha: float) -> Dim:
    """Expected pairs on the busiest of `ep` chips of `tokens` x `topk` routed by
    aiconfigurator's power law (module docstring), never more than all of them; `tokens`
    may be an int array over a graph's shape axis."""
    if experts % ep:
        raise ValueError(f"{experts} experts do not split over {ep} chips")
    total = np.asarray(tokens, dtype=float) * topk
    share = np.interp(np.log2(np.maximum(np.asarray(tokens, dtype=float), 1.0)),
                      np.log2(TOKEN_GRID), _busiest_share(experts, topk, ep, alpha))  # fmt: skip
    busiest = np.minimum(np.ceil(total / ep * share - 1e-9), total)
    return busiest.astype(np.int64) if isinstance(tokens, np.ndarray) else int(busiest)


def busiest_rank_pairs(tokens: Dim, topk: int, experts: int, ep: int,
                       alpha: float | None) -> Dim:  # fmt: skip
    """Token-expert pairs the busiest of `ep` chips runs of `tokens` x `topk` (module
    docstring): chance's m + sqrt(2 m ln ep) at mean m = pairs / ep, or the routing's power
    law (`alpha`; None: none) where that puts more on it; never more than all the pairs.
    `tokens` may be an int array over a graph's shape axis, and so is the count; one chip
    takes all of them."""
    pairs = tokens * topk
    if ep <= 1:
        return pairs
    total = np.asarray(pairs, dtype=float)
    mean = total / ep
    chance = np.minimum(np.ceil(mean + np.sqrt(2 * mean * np.log(ep)) - 1e-9), total)
    if alpha is not None and experts % ep == 0:
        chance = np.maximum(chance, power_law_busiest(tokens, experts, topk, ep, alpha))
    return chance.astype(np.int64) if isinstance(pairs, np.ndarray) else int(chance)
