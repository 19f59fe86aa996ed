"""Kernel efficiency tables: measured kernel times at serving shapes, per vendor and chip.

A chip's calibration (cost/calibration.py) fits one efficiency per precision, a fixed time
and an overlap exponent to large, square-ish GEMMs. Serving runs other shapes: decode GEMMs
of 1-256 rows against a large weight, grouped expert GEMMs, which the vendors' kernels run
well below both roofs (AITER's FP8 GEMM of 1 x 2112 x 7168 on an MI355X streams its weight
at 0.68 TB/s of 8). These tables hold what the kernels measurably do there, as data
(`kernel_tables/*.toml`, each table with its source, date and conditions), never a serving
end-to-end number.

Each row is one measured kernel: M, N, K, microseconds (and the groups of a grouped GEMM,
whose weight is groups x K x N). Its roofline time is

    r = max(2MNK / peak, bytes / DRAM bandwidth)

on the datasheet figures of the chip that measured it, and a row faster than r is refused.
A table's model of its kernels is t = t0 + r / f(M): t0 a fixed time of the kernels (launch,
prologue, the last partial wave; fitted, fit_fixed_s) and f(M) the fraction of the roofline
they reach past it, at each measured M the rows' total r over their total t - t0 (at most
1), piecewise linear in log2 M between them and flat beyond the ends. The cost model
(cost/roofline.py) reads it for each matmul of a listed chip and precision as a floor: the
op takes at least t0 + its roofline on that chip / f(M); where the chip's own figures make
it slower they stand. So a table only ever adds time, no op is faster than either roof, and
more bandwidth is never slower (the floor falls with the roofline). Chips and precisions
without a table keep the model they had.

A table pools rows of many shapes (a gemm table's N and K, a moe table's models), and one
curve of them all misprices the shapes far from its mean: B200 NVFP4 at 128 x 1536 x 8192
runs at 21.5 us where the pooled curve gave DeepSeek-R1's q_a_proj 11 us. So where a table
has rows of an op's own shape (row_shapes: gemm (N, K), moe (hidden, inter / tp, topk,
experts, ep); a gemm table's nearest shape within SNAP_LOG2, as its rows are the zoo's
shapes snapped to the measured grid), the same model fitted to those rows alone prices it
(KernelTable.of_shape), else the pooled curve; the guarantees above hold for either, as
each is a table of rows no faster than their roofline. A decode_attention table's shape is
the head layout on one GPU (heads, kv heads, head_dim), exact: TensorRT-LLM's generation
kernel for gpt-oss on one Hopper GPU (64, 8, 64 over a BF16 cache) costs about 0.27 us a
sequence however few its keys (1,024 sequences of 127 keys: 276 us on an H200, where the
pooled curve of every layout, keyed by bytes, gave gpt-oss's op 123 us and its own rows give
215 us: the curve still interpolates in bytes towards the long-context rows' fraction), so a
layout the table measured is priced by its own rows. An mla_decode table's shape is likewise
(heads, kv_lora_rank, rope_dim) on one GPU, exact: TensorRT-LLM's MLA generation kernel at
128 heads (DeepSeek under attention DP) is slower at the same bytes than at 16 (TP 8), and a
curve over all four head counts priced the 16-head ops 1.12-1.43x their own rows on an H200
(tests/test_mla_decode_tables.py).

Tables are of a kind, the op family they price; an op tries the kinds its rule lists
(op_table.kernel_keys), the first table found pricing it:

- `gemm`: one measured GEMM a row (above); it prices matmuls of its format (or of a narrower
  kernel family, its `scope`). Filed in the shared files or in a chip's own file
  (`gemm/<chip>.toml`, CHIP_FILES: aiconfigurator's TensorRT-LLM tables, one per chip and
  format, written by benchmarks/gemm_kernel_tables.py).
- `moe`: one measured MoE layer on one rank a row, [tokens, hidden, inter, topk, experts,
  tp, ep, microseconds] (an engine's fused-MoE module: routing, the two grouped expert
  GEMMs, finalize), converted to the rank's token-expert pairs M = tokens x topk / ep and
  the roofline of its two expert GEMMs (gate_up: M x hidden x 2 inter / tp; down: M x
  inter / tp x hidden; the weights of the experts the rows touch, min(experts, tokens x
  topk) / ep of them under balanced routing (aiconfigurator's collector), in the table's
  weight format, its `scope`). A table whose harness routed each token to its top k of
  random scores says so, `routing = "random"` (AITER's tuners: `torch.randn` scores,
  `fused_topk`), and its rows touch the experts uniform routing is expected to reach
  (workloads/transformer_config.expected_active_experts: 58 of 256 for 8 tokens' 64
  pairs), as the ops it prices count theirs. An op's M is its rank's pairs as well, the
  rows of its grouped GEMMs (workloads/transformer.py moe), so a row prices an op of its
  own tokens and shape at the row's measured time (tests/test_kernel_table_keys.py).
  A table timed on the busiest rank under a power law of expert popularity names it,
  `routing_alpha` (aiconfigurator's WIDEEP rows: 1.01), and its M is that rank's expected
  pairs (compiler/moe_expert.power_law_busiest), as the ops it prices count theirs.
  It prices the routed experts' matmuls of its compute format whose weights are stored in
  that format, ahead of any gemm table: aiconfigurator's TensorRT-LLM layers run at 0.36 of
  the H100's BF16 peak where a dense GEMM of the same work runs near 0.7. A layer's fixed
  time is split evenly over its two GEMMs (MOE_GEMMS), so that the layer's ops add up to
  it. Each table names the engine and version that measured it; a table that names no
  engine's own `kernel` (below) prices every engine's ops, so these TensorRT-LLM tables
  price every engine's expert GEMMs on their chips. A moe table names the engine's
  MoE `backend` whose kernels it timed (MOE_BACKENDS, TensorRT-LLM's `moe_backend` names;
  CUTLASS, the default fused MoE, where it names none): a run's `moe_backend` setting stamps
  the routed experts' ops (workloads/transformer.py), and those take that backend's table
  first, then the default's where the chip has none of that backend (op_table.kernel_keys).
  An op's curve is lowered to its time's envelope over M, so that more tokens never cost
  less (_moe_envelope: a curve pooled over splits and shapes does not know that).
- `decode_attention`: one measured decode (generation) attention kernel a row, [sequences,
  cached tokens, heads, kv heads, head_dim, microseconds] (one new token per sequence over a
  paged KV cache), its roofline the larger of its FLOPs (4 x heads x head_dim x tokens per
  sequence) at the peak of `dtype` and its bytes (Q and output in BF16, K and V of every
  cached token in the KV format, its `scope`) at the DRAM bandwidth. Its "M" is the row's
  bytes rounded to a power of two (so that the rows of many head shapes pool into one curve,
  as a gemm table's rows pool at their M): decode attention is a stream of the cache, and
  how far a kernel gets from that stream's bandwidth is a matter of how much it streams.
  It prices decode attention ops (op_table.is_decode_attention: a decode step's, keys and values of
  one width, no latent or compressed form) over a cache of its KV format (an FP16 cache
  the bf16 table's: op_table._SIXTEEN_BIT), whatever the compute format; the cost model
  keys those ops by their bytes, not their M. Its curve, and an mla_decode table's, is
  isotonic in time (time_isotonic): an op of more bytes at the same sequences, a decode step
  of more context, never costs less.
- `mla_decode`: one measured absorbed multi-head latent attention (MLA) decode kernel a row,
  [sequences, cached tokens, heads, kv_lora_rank, rope_dim, microseconds] (one new query per
  sequence, every head attending one latent per cached token, kv_lora_rank + rope_dim wide;
  values are the latent's first kv_lora_rank), its roofline the larger of its FLOPs (2 x
  heads x (2 kv_lora_rank + rope_dim) x tokens per sequence) at the peak of `dtype` and its
  bytes (Q of kv_lora_rank + rope_dim and the output of kv_lora_rank per head in BF16, the
  latents in the cache's format, its `scope`) at the DRAM bandwidth, keyed by its bytes as
  a decode_attention row is. It prices MLA decode ops (op_table.is_mla_decode) of its
  compute format over a cache of its scope: the attention that decode_attention leaves out,
  whose kernels (FlashMLA-like, TensorRT-LLM's trtllm-gen) differ from GQA's.

  One sequence's stream: an MLA decode kernel's time depends on its sequences and their
  tokens, not on its bytes alone. AITER's asm kernel on an MI355X streams one sequence of
  70,000 tokens (40 MB of FP8 latents) in 95 us and 5 sequences of 23,333 (67 MB) in 58 us:
  one sequence's latents stream no faster than the CUs a split of its context reaches.
  A table that says so (`sequence_stream = true`, an mla_decode table whose one-sequence
  rows are long) keys its rows by both: its curve, keyed by bytes, is fitted to the rows of
  several sequences at each bytes node where it measured any (_curve_rows), and every row
  sets its least time per cached byte of one sequence past the fixed time
  (KernelTable.stream_s_per_byte), so that an op takes at least the fixed time plus one of
  its sequences' latents at that rate (roofline.kernel_floor_s), which is no row's time
  above its measured one. So every measured row is kept, and more context never costs less.

  A fixed split: a kernel that cuts each sequence into a fixed number of work items runs a
  few sequences on a few CUs, whatever its bytes (AITER's gfx942 MLA decode at 16 heads:
  16 items a sequence, so 4 sequences on 64 of 304 CUs). A table that says so (`split`, a
  table of `splits`, `kv_granularity`, `cus`, `heads`, `cu_bytes_per_s` and `source`;
  split_layout.SplitLayout) prices an op of that many heads at least its fixed time plus
  the busiest CU's work items at one CU's read rate (split_layout.busiest_cu_s;
  roofline.kernel_floor_s), the rows of other head counts it was fitted to having another
  layout.
- `prefill_attention`: one measured prefill (context) attention kernel a row, [sequences,
  tokens, heads, kv heads, head_dim, microseconds] (causal, no cached prefix), its roofline
  the larger of its FLOPs (4 x heads x head_dim x tokens (tokens + 1) / 2 per sequence) at
  the peak of `dtype` and its bytes (Q, K, V and the output of every token, Q and output in
  `dtype`, K and V in the cache's format, its `scope`) at the DRAM bandwidth. Its "M" is the
  row's FLOPs rounded to a power of two: a prefill's attention is compute bound, and how far
  a flash kernel gets from the peak is a matter of how much work it has to fill the chip's
  SMs with (a 1k-token prompt of 8 heads runs at 0.07 of the H100's BF16 peak, 16k tokens
  of 64 heads at 0.54); the cost model keys those ops by their FLOPs, and an op takes the
  least the curve gives its bytes at any FLOPs at least its own (flops_envelope_s), so that
  a prompt shorter than the rows' shortest, more bytes per FLOP than theirs, never costs
  less than a shorter one. It prices prefill attention ops (op_table.is_prefill_attention)
  whose kernel format is its scope: the table's rows are BF16 attention over a BF16 cache
  and FP8 over FP8, so a 16-bit op (BF16 or FP16, one tensor-core rate) takes the bf16
  table and an FP8 op the fp8 one, whatever its cache; a chunk with a cached prefix at its
  FLOPs too.
- `mla_prefill`: the same for DeepSeek's MLA prefill, which attends the decompressed keys
  (qk head_dim wide) and values (v head_dim) as multi-head attention, rows [sequences,
  tokens, heads, qk head_dim, v head_dim, microseconds], FLOPs 2 x heads x (qk + v) x the
  causal pairs; `scope` is the format of the decompressed keys (op_table.is_mla_prefill).

Derived rows: a table whose rows no one measured at its shapes, built from measurements of
another shape by a stated rule, says so (`derived = true`, the rule in its conditions), and
`xpusim chip` lists it as derived, not measured: vLLM's Marlin MXFP4 MoE at gpt-oss's shapes
(benchmarks/moe_kernel_tables.py marlin_table). It prices as any table does.

A window: a table that timed its kernels over part of the M and of the shapes an op may
have says so (`window = true`) and prices only ops of its rows' shapes (row_shapes), up to
the largest M its rows reach, with the curve of the table found after it above; an op of
another shape takes that table alone. Its rows start at one token, the smallest step: an
op of fewer pairs than its first row's takes that row's fraction (an engine's own kernel
defers below its smallest M instead, below), and a moe window's fixed time is its own, the
least time any of its rows of the op's shape spends past its roofline (20.7 us a DeepSeek
layer at EP 8 on B200, where the CUTLASS table's is 1.7: one row a node fits any fixed time,
and fit_fixed_s returns 0), the curve above converted to it (engine_grid). TensorRT-LLM's
TRTLLM-backend NVFP4 MoE (trtllm-gen kernels, min-latency mode), and SGLang's rows of the
same kernels, were timed through DeepSeek-V3's group-limited gate: its rows are DeepSeek's at
EP 4 and 8 and 1-256 tokens, and at TP 4 (EP 1), each counted at the pairs and experts the
gate gave the measured rank (`routing = "group-limited"`, gate_load: 5 pairs a token at EP
8 where balanced routing gives 1; benchmarks/moe_kernel_tables.py), and the default
backend's table prices the rest. A table of an engine's own kernel (below) that is a
window prices only ops of its rows' shapes, at every M (its first row's fraction below it,
its curve past its largest): SGLang's flashinfer_trtllm MoE on TP-split ranks, which the
engine runs at every step size, timed through the same gate and counted by gate_load (all
8 picks a token on the rank), its EP ranks keeping the tables above.

An engine's own kernels: a table of any kind may name the `kernel` it timed (an engine
version's kernel, `sglang-triton-w8a8-block`), and then prices only the ops of a run whose
engine profile lists that kernel (serving/engines.toml `kernels`, stamped on the ops by the
layer builder): such an op tries the `scope@kernel` key of each of its keys first
(op_table.kernel_keys). The other tables price every engine's ops, as before. An engine's
kernel was often timed at prefill shapes only (below them the benchmarks sit at their
harness's launch floor), so it prices the M it measured, from its smallest row up; below
that, the op keeps the curve and fixed time of the table it took without the engine's
choice, and the engine table's fractions are taken on that fixed time (engine_grid), so
that one fixed time and one curve still price the op.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import cache, cached_property, partial
from pathlib import Path

import numpy as np

from xpusim.cost.split_layout import SPLIT_FIGURES, SplitLayout
from xpusim.disk_cache import cached
from xpusim.errors import UserError
from xpusim.hardware.spec import Chip
from xpusim.ir.dtypes import DType, Format, parse_weight_format, stream_format
from xpusim.run_options import MOE_BACKENDS

TABLES_DIR = Path(__file__).resolve().parent / "kernel_tables"
GRID_LOG2 = np.arange(0.0, 47.0)
"""Nodes (log2 of M) a table's curve is sampled at for the cost model: M from 1 to 2^46,
each node exact where a table has a row at a power of two, linear between. Past 2^40 for the
prefill attention tables, keyed by FLOPs: their rows reach 2^45.3 (16k-token prompts of 64
heads), which a grid ending at 2^40 priced at that node's fraction, 0.99-1.32x the table's
own model of them."""

_OUTPUT_ITEMSIZE = 2  # the gemm tables' GEMMs write BF16 (their conditions say so)
KEYED_BY = {"gemm": "M", "moe": "M", "decode_attention": "bytes", "mla_decode": "bytes",
            "prefill_attention": "FLOPs", "mla_prefill": "FLOPs"}  # fmt: skip
"""What each kind's rows and curve are keyed by: a matmul's rows M, a decode's bytes
streamed, a prefill's FLOPs (roofline.kernel_floor_s; op_table.OpTable.keyed_by_flops)."""
ATTENTION_KINDS = tuple(kind for kind, key in KEYED_BY.items() if key != "M")
"""Kinds whose tables are chosen by the scope op_table.kernel_keys gives (the cache's format;
a GQA prefill's, its kernel's format) alone, whatever the op's compute format."""
_PRICED = {"decode_attention": "decode attention over a {scope} cache",
           "mla_decode": "MLA decode over a {scope} cache",
           "prefill_attention": "{scope} prefill attention kernels",
           "mla_prefill": "MLA prefill of {scope} keys"}  # fmt: skip
"""What an attention kind's table prices, as `xpusim chip` lists it (KernelTable.describe)."""
DEFAULT_MOE_BACKEND = "CUTLASS"
"""The backend of a moe table that names none, and of an op no setting stamps: TensorRT-LLM's
default (MoeConfig.backend "CUTLASS"), whose throughput rows benchmarks/moe_kernel_tables.py
keeps."""
ROUTINGS = ("balanced", "random", "group-limited")
"""How a moe table's harness routed its tokens (module docstring): every pair to another
expert while any is left (aiconfigurator's balanced rows), each token to the top k of
random scores (AITER's tuners), or balanced logits through DeepSeek-V3's group-limited gate
(aiconfigurator's TRTLLM-backend rows, GATE_GROUPS)."""
GATE_GROUPS = (8, 4)
"""(n_group, topk_group) of the group-limited gate aiconfigurator's collector routes the
TRTLLM backend's rows by (collector/trtllm/collect_moe.py: "all use deepseek setting for
now"; collector/sglang/collect_moe.py likewise, with a zero correction bias): gate_load
counts what the measured rank ran under it."""


@cache
def gate_load(tokens: int, experts: int, topk: int, ep: int) -> tuple[int, int]:
    """(token-expert pairs, distinct experts) the measured rank runs of `tokens` routed as
    aiconfigurator's TRTLLM-backend rows were: the collector's balanced logits
    (collector/helper.py balanced_logits: token t's j-th hot expert at t + 32 j, or t 32 / T
    + 32 j under 32 tokens, modulo the experts: one in each of DeepSeek's 8 groups of 32)
    through DeepSeek-V3's group-limited gate (GATE_GROUPS: each group scored by its two
    best experts, the best topk_group groups kept, the top k of their experts picked), on
    rank 0 of `ep` (Mapping's default rank: experts 0 to E/ep - 1, all of them at EP 1).
    Every group ties, and so do all but each token's hot expert in a group: the kernel
    breaks the ties by index, so the gate keeps groups 0-3 and picks each token's 4 hot
    experts there and 4 tied ones, the lowest-numbered of the rest (experts 0-4). The rows
    say so: SGLang 0.5.14's flashinfer_trtllm NVFP4 layer on B200 at one token reads 36.6,
    37.0 and 36.5 us at EP 8, 16 and 32 (the rank holds experts 0-4 at each), 25.3 at EP 64
    (0-3), 19.6 at 128 (0-1), and 46.0 at EP 1 and 44.9 at EP 2 (all 8 picks). So the rank
    of EP 8 runs 5 pairs a token, not balanced routing's 1, over 5 experts at one token and
    all 32 from 32 tokens; a TP-split rank (EP 1) 8 pairs a token over the experts of 4
    groups (128 of 256 from 32 tokens, all 8 picks at one)."""
    n_group, topk_group = GATE_GROUPS
    stride = -(-experts // topk)
    token = np.arange(tokens, dtype=np.float32)[:, None]
    pick = np.arange(topk, dtype=np.float32)[None, :] * stride
    start = token if tokens >= stride else token * np.float32(stride) / np.float32(tokens)
    hot = ((start + pick) % experts).astype(np.int64)  # torch's .long(): truncation
    score = np.zeros((tokens, experts))
    np.add.at(score, (np.arange(tokens)[:, None], hot), 1.0)  # the softmax keeps this order
    per_group = experts // n_group
    best_two = -np.sort(-score.reshape(tokens, n_group, per_group), axis=2)[:, :, :2]
    kept = np.argsort(-best_two.sum(axis=2), axis=1, kind="stable")[:, :topk_group]
    in_kept = np.zeros((tokens, n_group), dtype=bool)
    np.put_along_axis(in_kept, kept, True, axis=1)
    eligible = np.where(np.repeat(in_kept, per_group, axis=1), score, -1.0)
    picks = np.argsort(-eligible, axis=1, kind="stable")[:, :topk]
    mine = picks[picks < experts // ep]
    return int(mine.size), int(np.unique(mine).size)


MOE_GEMMS = 2
"""Expert GEMMs of one MoE layer that a moe table's fixed time is split over: the layer
builder's gate_up and down (workloads/transformer.py moe), TensorRT-LLM's fc1 and fc2."""


@dataclass(frozen=True)
class KernelTable:
    name: str
    kind: str  # the op family it prices: "gemm" (matmuls), "moe" (routed experts' matmuls)
    # "decode_attention", "mla_decode", "prefill_attention" or "mla_prefill"
    dtype: str
    scope: str  # gemm: dtype (all of that format) or a narrower kernel family; moe: the
    # expert weights' format; attention kinds: the KV cache's format (prefill_attention:
    # the kernel's, BF16 over BF16 or FP8 over FP8; mla_prefill: the decompressed keys')
    measured_on: str  # catalog id of the chip whose peak and bandwidth judge the rows
    chips: tuple[str, ...]  # catalog ids whose matmuls of `dtype` it prices
    source: str
    url: str
    date: str
    conditions: str
    rows_m: np.ndarray
    roofline_s: np.ndarray  # of each row on measured_on's datasheet peak and bandwidth
    measured_s: np.ndarray
    engine: str = ""  # "trtllm 1.3.0rc10": the engine whose kernels were measured, if one
    backend: str = DEFAULT_MOE_BACKEND  # a moe table's MoE backend (MOE_BACKENDS)
    row_shapes: tuple[tuple[float, ...], ...] = ()  # each row's shape (row_shapes), if its
    # kind has one
    kernel: str = ""  # an engine's own kernel it timed (engines.toml `kernels`), if one
    window: bool = False  # prices only the M its rows span (module docstring, "A window")
    sequences: np.ndarray | None = None  # a decode_attention row's sequences
    stream_s_per_byte: float = 0.0  # an mla_decode table's least time per cached byte of one
    # sequence (module docstring, "One sequence's stream"); 0 where it has none
    split: SplitLayout | None = None  # an mla_decode kernel's fixed split of each sequence
    # over the CUs (module docstring, "A fixed split"); None where it has none
    derived: bool = False  # rows derived from measurements of other shapes, not measured
    # themselves (`derived = true`; its conditions say how): `xpusim chip` says "derived"

    @cached_property
    def _grids(self) -> dict[tuple[float, ...] | None, tuple[np.ndarray, float]]:
        """grid_of's fits, per shape (a table of the committed files lives as long as the
        process; one a test builds, as long as the test)."""
        return {}

    def grid_of(self, shape: tuple[float, ...] | None) -> tuple[np.ndarray, float]:
        """The curve of the rows of `shape` (of_shape) sampled at GRID_LOG2, and their fixed
        time, fitted once per table and shape: a model's ops ask again at every plan and
        batch, and the fit is most of a chip's arrays' build (roofline.HardwareArrays)."""
        if shape not in self._grids:
            table = self.of_shape(shape)
            fixed_s = table.fixed_s
            grid = table.fraction_at(2.0**GRID_LOG2, fixed_s)
            if KEYED_BY[self.kind] == "bytes":
                grid = time_isotonic(grid, table.rows_m)
            if self.kind == "moe" and shape is not None:
                grid = _moe_envelope(grid, fixed_s, self.moe_roofline_s(shape), table.rows_m)
            grid.setflags(write=False)  # one array for every caller
            self._grids[shape] = (grid, fixed_s)
        return self._grids[shape]

    def _near(self, shape: tuple[float, ...] | None) -> tuple[float, ...] | None:
        """Its row shape that stands for an op's `shape` (a gemm table's nearest within
        SNAP_LOG2), or None where it has none."""
        return _nearest_shape(shape, set(self.row_shapes), SNAP_LOG2.get(self.kind, 0.0))

    def has_shape(self, shape: tuple[float, ...] | None) -> bool:
        """Whether it has rows of an op's `shape` (of_shape would narrow to them)."""
        return self._near(shape) is not None or self._between(shape) is not None

    def _between(self, shape: tuple[float, ...] | None) -> tuple[tuple, tuple, float] | None:
        """A moe table's two row shapes of the op's layer (hidden, topk, experts, ep) at the
        nearest narrower and wider width per rank, one each side of the op's, and where
        between them its width lies in log2: the same kernel timed at two tensor-parallel
        splits of the layer, the op's split between them (vLLM's MXFP4 rows of gpt-oss at
        TP 1 and 4, an op at TP 2). None where it has not both."""
        if self.kind != "moe" or shape is None:
            return None
        layer = (shape[0], *shape[2:])
        widths = {s[1]: s for s in self.row_shapes if (s[0], *s[2:]) == layer}
        lo = max((w for w in widths if w < shape[1]), default=None)
        hi = min((w for w in widths if w > shape[1]), default=None)
        if lo is None or hi is None:
            return None
        return widths[lo], widths[hi], float(np.log2(shape[1] / lo) / np.log2(hi / lo))

    def of_shape(self, shape: tuple[float, ...] | None) -> KernelTable:
        """The table of its rows of an op's `shape` (row_shapes) alone, where it has any (a
        gemm table's nearest shape within SNAP_LOG2, as its rows stand for the zoo's shapes
        snapped to the measured grid): the same model fitted to the kernel the op runs, not
        to every shape's pooled; a moe op's split between two it timed (_between), rows
        interpolated between theirs; itself where it has none."""
        near = self._near(shape)
        if near is None:
            between = self._between(shape)
            return self if between is None else self._interpolated(shape, *between)
        mine = np.array([s == near for s in self.row_shapes], dtype=bool)
        sequences = None if self.sequences is None else self.sequences[mine]
        return replace(self, rows_m=self.rows_m[mine], roofline_s=self.roofline_s[mine],
                       measured_s=self.measured_s[mine], sequences=sequences,
                       row_shapes=(near,) * int(mine.sum()))  # fmt: skip

    def _interpolated(self, shape: tuple[float, ...], lo: tuple, hi: tuple,
                      f: float) -> KernelTable:  # fmt: skip
        """Rows of `shape` at every M both `lo` and `hi` measured: each row's time and
        roofline log-linear in log2 width between theirs, `f` of the way (time and work both
        grow with the width per rank, the roofline near proportionally), so that the
        kernel's time at a split between two it timed is taken between theirs, not from the
        pooled curve of every layer and split."""
        def rows(of: tuple) -> dict[float, tuple[float, float]]:
            return {float(m): (r, t) for m, r, t, s in zip(
                self.rows_m, self.roofline_s, self.measured_s, self.row_shapes, strict=True)
                if s == of}  # fmt: skip

        low, high = rows(lo), rows(hi)
        m = np.array(sorted(low.keys() & high.keys()))
        between = [[low[x][i] ** (1 - f) * high[x][i] ** f for i in (0, 1)] for x in m]
        roofline_s, measured_s = np.array(between).T
        return replace(self, rows_m=m, roofline_s=roofline_s, measured_s=measured_s,
                       sequences=None, row_shapes=(shape,) * len(m))

    def node_roofline_s(self, shape: tuple[float, ...] | None) -> np.ndarray | None:
        """The roofline of an op of `shape` at each M of GRID_LOG2, as the table's rows
        count theirs: a moe layer's (moe_roofline_s), a gemm's (N, K) in the table's
        format; None for other kinds, or without a shape."""
        if shape is None or self.kind not in ("moe", "gemm"):
            return None
        if self.kind == "moe":
            return self.moe_roofline_s(shape)
        where, dtype, (n, k) = f"kernel table {self.name}", DType(self.dtype), shape
        return _gemm_roofline_s(2.0**GRID_LOG2, n, k, 1.0, dtype, dtype, _OUTPUT_ITEMSIZE,
                                catalog_chip(self.measured_on, where), where)  # fmt: skip

    def moe_roofline_s(self, shape: tuple[float, ...]) -> np.ndarray:
        """The roofline of an MoE layer of `shape` (hidden, inter per rank, topk, experts,
        ep; op_table.kernel_shapes) on the chip that measured the table, at each M of
        GRID_LOG2 (the rank's token-expert pairs): its two expert GEMMs over the experts
        uniform routing is expected to reach (transformer_config.expected_active_experts),
        as the layer builder counts them for the op (_moe_envelope's time profile)."""
        hidden, width, topk, experts, ep = shape
        tokens = np.maximum(np.round(2.0**GRID_LOG2 * ep / topk), 1.0)
        rows = np.array([[t, hidden, width, topk, experts, 1.0, ep, 0.0] for t in tokens])
        where = f"kernel table {self.name}"
        _, roofline_s, _ = _moe_rows(rows, DType(self.dtype), self.scope,
                                     catalog_chip(self.measured_on, where), where, routing="random")
        return roofline_s

    @property
    def sequence_floor_s(self) -> float:
        """A decode_attention table's least measured time per sequence over its rows (0 for
        other kinds): its kernels' time per sequence at the fewest keys, where the cache
        stream is no longer what takes the time. TensorRT-LLM's BF16 generation kernel for
        gpt-oss on one Hopper GPU (64 heads, 8 KV heads of 64) costs 0.27 us a sequence at
        127 keys or at 1 (1,024 sequences: 275.6 us on an H200; aiconfigurator's rows at
        2,048 sequences of 63 keys, not kept here, 540 us), a cost keyed by bytes alone
        cannot see: 2,006 sequences of 128 keys (a sliding-window layer's) stream the bytes
        of 64 sequences of 4,095 keys, which the rows time at 153 us, and were priced near
        that (165 us). The least over the rows bounds every row from below: the floor prices
        no row's sequences above its measured time (roofline.kernel_floor_s)."""
        if self.sequences is None:
            return 0.0
        return float(np.min(self.measured_s / self.sequences))

    @property
    def key_scope(self) -> str:
        """The scope an op's kernel key names this table by (op_table.kernel_keys): a moe
        table of a backend other than the default's is keyed with it (moe_scope), an
        engine's own kernel's with its name (engine_scope)."""
        scope = moe_scope(self.scope, self.backend) if self.kind == "moe" else self.scope
        return engine_scope(scope, self.kernel) if self.kernel else scope

    @property
    def fractions(self) -> np.ndarray:
        """Each row's fraction of its roofline (<= 1, checked on loading)."""
        return self.roofline_s / self.measured_s

    @property
    def fixed_s(self) -> float:
        """The kernels' fixed time (fit_fixed_s)."""
        return fit_fixed_s(self.rows_m, self.roofline_s, self.measured_s)

    @property
    def own_fixed_s(self) -> float:
        """A moe window's fixed time a row: the least time any of its rows spends past its
        roofline (module docstring, "A window"; engine_grid takes it over the rows of the
        op's shape, KernelTable.of_shape)."""
        return float(np.min(self.measured_s - self.roofline_s))

    def curve(self) -> tuple[np.ndarray, np.ndarray]:
        """(log2 M, fraction) at each M the table measured, ascending in M (_fractions)."""
        return _fractions(self.rows_m, self.roofline_s, self.measured_s, self.fixed_s)

    @property
    def ops_per_row(self) -> int:
        """The ops a row's time is split over: a moe row's over the layer's MOE_GEMMS expert
        GEMMs (each charged its share of the fixed time)."""
        return MOE_GEMMS if self.kind == "moe" else 1

    @property
    def prices_all_of_dtype(self) -> bool:
        """Whether it prices every matmul of its format; a narrower scope (block-scaled FP8)
        prices only the ops whose kernel family it is (op_table.kernel_scope); a moe table
        only expert matmuls over weights of its scope."""
        return self.kind == "gemm" and self.scope == self.dtype and not self.kernel

    def prices(self, kind: str, dtype: DType, scope: str) -> bool:
        """Whether it prices an op that looks for `kind` tables, of compute format `dtype`
        and scope `scope` (op_table.kernel_keys); a decode_attention or mla_decode table an
        op over a cache of its scope whatever the op's compute format (the cache decides
        which kernel runs; the op's floor takes the table's format's peak, fraction_grid);
        a prefill_attention table an op whose kernel format (op_table.kernel_keys) is its
        scope. A scope that names a kernel or backend (`scope@name`) only a table of
        exactly it: a table of a whole format times every engine's kernels, not that one."""
        if self.kind in ATTENTION_KINDS:
            return kind == self.kind and self.key_scope == scope
        return self.kind == kind and self.dtype == dtype.value and (
            (self.prices_all_of_dtype and "@" not in scope) or self.key_scope == scope)

    def describe(self) -> tuple[str, str]:
        """(figure, value) as `xpusim chip` lists it: the model and its curve, a moe window's
        on its own fixed time (own_fixed_s, the least of its shapes' where it has several),
        the one engine_grid prices by."""
        own = self.window and self.kind == "moe"
        fixed_s = self.own_fixed_s if own else self.fixed_s
        nodes, values = _fractions(self.rows_m, self.roofline_s, self.measured_s, fixed_s)
        from xpusim.report.units import si

        def size(x: float) -> str:  # a count under a million whole (1,024 tokens, not 1.02 k)
            n = 2.0**x
            return f"{n:,.0f}" if n < 1e6 else si(n)

        curve = ", ".join(f"{size(x)}: {v:.2f}" for x, v in zip(nodes, values, strict=True))
        priced = "" if self.prices_all_of_dtype else f" (prices {self.scope} only)"
        field = f"kernel_table.{self.kind}.{self.scope}"
        key = KEYED_BY[self.kind]
        if self.kind == "moe":  # a chip may have tables of one weight format under two
            priced = f" ({self.engine}; {self.dtype} experts over {self.scope} weights)"
            if self.window:
                priced = (f"{priced[:-1]}; a window: its rows' shapes at M "
                          f"{self.rows_m.min():.0f}-{self.rows_m.max():.0f} only, on its own "
                          "fixed time)")
            field = f"kernel_table.moe.{self.dtype}.{self.key_scope}"  # activation formats
        elif self.kind in _PRICED:
            priced = f" ({self.engine}; {_PRICED[self.kind].format(scope=self.scope)})"
        if self.kernel:  # an engine's own kernel: its runs' ops alone, from its smallest M
            where = (" of its rows' shapes at every M, on its own fixed time" if self.window
                     else f" at {KEYED_BY[self.kind]} >= {self.rows_m.min():.0f}, on the fixed "
                     "time of the table below it")  # a window: those shapes alone, from one token
            priced = (f" ({self.engine}'s {self.kernel}, for that engine's {self.scope} ops"
                      f"{where}: engine_grid)")
            field = f"kernel_table.{self.kind}.{self.key_scope}"
        least = " (the least of its shapes')" if own and len(set(self.row_shapes)) > 1 else ""
        stream = (f"; at least t0 + one sequence's cache at {1e-12 / self.stream_s_per_byte:.2g}"
                  " TB/s" if self.stream_s_per_byte else "")  # fmt: skip
        if self.split is not None:
            layout = self.split
            stream += (f"; at {layout.heads} heads, at least t0 + the busiest CU's items of "
                       f"{layout.splits} a sequence over {layout.cus} CUs at "
                       f"{layout.cu_bytes_per_s / 1e9:.3g} GB/s a CU")  # fmt: skip
        return (field,
                f"{self.name}{priced}: t0 {fixed_s * 1e6:.3g} us{least} + roofline"
                f" / f({key}); "
                f"f at {key} = {curve}{stream}")  # fmt: skip

    def predict_s(self, m: np.ndarray, roofline_s: np.ndarray) -> np.ndarray:
        """A kernel's time on the table's model: fixed time + roofline / fraction at M."""
        return self.fixed_s + roofline_s / self.fraction_at(m)

    def fraction_at(self, m: np.ndarray | float, fixed_s: float | None = None) -> np.ndarray:
        """The fraction of the roofline the table's kernels reach at M rows (interpolated),
        on the fixed time `fixed_s` when the caller has fitted it already (the fit is most
        of the work)."""
        fixed_s = self.fixed_s if fixed_s is None else fixed_s
        nodes, values = _fractions(self.rows_m, self.roofline_s, self.measured_s, fixed_s)
        return np.interp(np.log2(np.maximum(m, 1.0)), nodes, values)


SNAP_LOG2 = {"gemm": 0.5, "moe": 0.25}
"""How far (log2, in every dimension) a table's shape may be from an op's and still price it
alone (KernelTable.of_shape): a gemm table's rows are the zoo's (N, K) snapped to the nearest
value of aiconfigurator's measured grid (benchmarks/gemm_kernel_tables.py), half a step of a
doubling grid at most, so an op of a model not listed takes the measured kernel its own shape
snaps to (DeepSeek-R1's q_a_proj, 1536 x 7168, takes 1536 x 8192); the other gemm tables
(DeepGEMM's, AITER's) likewise their nearest measured shape within it. A moe table's rows
are the models' own layers, of few models: an op takes the nearest within a quarter of a
doubling in every dimension (a factor 1.19), the width of a neighbouring model of the same
expert layout. AITER timed GLM-5.1's fused MoE on gfx942 (hidden 6144, 256 routed experts
of inter 256 with the shared one fused, top 9 of 257) and not DeepSeek-R1's at TP 8 (hidden
7168, top 8 of 256), whose layer the pooled curve of every shape priced at 58 us for 4
tokens where GLM-5.1's smaller one measured 71-74 us (2-4 tokens): that layer takes the
fraction of its roofline and the fixed time GLM-5.1's rows measured. A decode_attention
table's rows are its models' head layouts: exact."""


def _nearest_shape(
    shape: tuple[float, ...] | None, shapes: set[tuple[float, ...]], within_log2: float
) -> tuple[float, ...] | None:  # fmt: skip
    """The one of `shapes` nearest `shape` (the largest log2 ratio of a dimension), if it
    is within `within_log2`; ties to the smaller shape."""
    if shape is None or not all(d > 0 for d in shape):
        return None
    distance = {s: max(abs(np.log2(a / b)) for a, b in zip(s, shape, strict=True))
                for s in shapes if len(s) == len(shape)}  # fmt: skip
    near = min(distance, key=lambda s: (distance[s], s), default=None)
    return near if near is not None and distance[near] <= within_log2 else None


def moe_scope(weight: str, backend: str) -> str:
    """The kernel scope of routed experts over `weight`-format weights run by MoE `backend`:
    the weight format's name for the default backend (every table filed before backends
    were named), `nvfp4@WIDEEP` for another."""
    return weight if backend == DEFAULT_MOE_BACKEND else f"{weight}@{backend}"


def engine_scope(scope: str, kernel: str) -> str:
    """The scope of an op whose engine runs its own `kernel` there: `fp8-block-scaled@
    sglang-triton-w8a8-block` (module docstring, "An engine's own kernels")."""
    return f"{scope}@{kernel}"


def _fractions(
    rows_m: np.ndarray, roofline_s: np.ndarray, measured_s: np.ndarray,
    fixed_s: float | np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """(log2 M, fraction) at each M measured: the rows' total roofline time over their total
    time past the fixed time, so that large GEMMs, which decide a step's time, weigh more
    than small ones; at most 1, since fixed_s leaves every row its roofline time. Given
    many fixed times (an array), a row of fractions for each (fit_fixed_s tries 101)."""
    log_m = np.log2(rows_m)
    nodes = np.array(sorted(set(log_m.tolist())))  # np.unique would import numpy.ma (test_startup)
    past_s = measured_s - np.asarray(fixed_s, dtype=float)[..., None]  # (fixed times, rows)
    values = [np.minimum(_in_order(roofline_s[at]) / _in_order(past_s[..., at]), 1.0)
              for at in (log_m == x for x in nodes)]  # fmt: skip
    return nodes, np.stack(values, axis=-1)


def _in_order(values: np.ndarray) -> np.ndarray:
    """The sum over the last axis, term by term in row order: numpy's pairwise sum groups
    the terms of a long row differently in one row and in many, and a fraction fitted over
    many fixed times at once must equal the fraction of each alone to the bit (rows of a
    node past 8, as a moe table's are, differed in the last bit). Equal to numpy's sum up
    to 8 terms, so the gemm tables' curves are unchanged."""
    return np.add.accumulate(values, axis=-1)[..., -1]


def fit_fixed_s(rows_m: np.ndarray, roofline_s: np.ndarray, measured_s: np.ndarray) -> float:
    """The fixed time t0 of a table's kernels (launch, prologue, the last partial wave),
    such that t = t0 + roofline / f(M) fits the rows best in relative error: a kernel of a
    small weight is slow for its latency, one of a large weight for its bandwidth, and one
    fraction per M could not say both. Searched over [0, the least time any row has past
    its roofline], which keeps every fraction at most 1."""
    best, best_err = 0.0, np.inf
    tried_s = np.linspace(0.0, float(np.min(measured_s - roofline_s)), 101)
    nodes, fractions = _fractions(rows_m, roofline_s, measured_s, tried_s)
    log_m = np.log2(rows_m)
    for t0, values in zip(tried_s, fractions, strict=True):
        predicted = t0 + roofline_s / np.interp(log_m, nodes, values)
        err = float(np.sqrt(np.mean((predicted / measured_s - 1) ** 2)))
        if err < best_err:
            best, best_err = float(t0), err
    return best


def catalog_chip(chip_id: str, where: str) -> Chip:
    """The catalog's chip `chip_id`; an unknown id a UserError that starts with `where`."""
    from xpusim.hardware.catalog import load_chip

    try:
        return load_chip(chip_id)
    except UserError as e:
        raise UserError(f"{where}: {e}") from None


def _gemm_roofline_s(
    m: np.ndarray, n: np.ndarray, k: np.ndarray, weights: np.ndarray, dtype: DType,
    weight: Format, output_itemsize: float, chip: Chip, where: str,
) -> np.ndarray:  # fmt: skip
    """A GEMM's time on `chip`'s datasheet roofline: M x K activations in `dtype` against
    `weights` K x N matrices in `weight`'s format, writing M x N outputs."""
    from xpusim.cost.calibration import dram_bytes_per_s

    moved = m * k * dtype.itemsize + weights * k * n * weight.itemsize + m * n * output_itemsize
    return np.maximum(2 * m * n * k / chip.peak(dtype, where), moved / dram_bytes_per_s(chip))


def _gemm_rows(rows: np.ndarray, dtype: DType, scope: str, chip: Chip, where: str):
    """(M, roofline seconds, microseconds) of gemm rows [M, N, K, microseconds(, groups)]."""
    m, n, k = rows[:, 0], rows[:, 1], rows[:, 2]
    groups = rows[:, 4] if rows.shape[1] > 4 else np.ones(len(rows))
    return (m, _gemm_roofline_s(m, n, k, groups, dtype, dtype, _OUTPUT_ITEMSIZE, chip, where),
            rows[:, 3])  # fmt: skip


def _moe_rows(rows: np.ndarray, dtype: DType, scope: str, chip: Chip, where: str,
              routing_alpha: float | None = None, routing: str = "balanced"):  # fmt: skip
    """(token-expert pairs on the rank, roofline seconds of its two expert GEMMs,
    microseconds) of moe rows [tokens, hidden, inter, topk, experts, tp, ep, microseconds]
    (module docstring); activations in the compute format, outputs in the format the
    engine keeps activations in (ir/dtypes.stream_format), as the layer builder stores
    them. A table timed on the busiest rank under power-law routing (`routing_alpha`)
    counts that rank's expected pairs (compiler/moe_expert.power_law_busiest), the pairs
    the same routing puts on the op it prices; else the mean, balanced routing's. The
    experts the rows touch: balanced routing's min(experts, pairs), or, where the rows were
    routed at random (`routing`), those uniform routing is expected to reach; through the
    collector's group-limited gate, the pairs and experts its measured rank ran
    (gate_load)."""
    from xpusim.compiler.moe_expert import power_law_busiest
    from xpusim.workloads.transformer_config import expected_active_experts

    tokens, hidden, inter, topk, experts, tp, ep = (rows[:, i] for i in range(7))
    pairs, width = tokens * topk / ep, inter / tp
    if routing_alpha is not None:
        pairs = np.array([power_law_busiest(int(t), int(e), int(k), int(n), routing_alpha)
                          for t, e, k, n in zip(tokens, experts, topk, ep, strict=True)],
                         dtype=float)  # fmt: skip
    if routing == "group-limited":
        pairs, touched = np.array([gate_load(int(t), int(e), int(k), int(n)) for t, e, k, n
                                   in zip(tokens, experts, topk, ep, strict=True)],
                                  dtype=float).T  # fmt: skip
    elif routing == "random":
        touched = np.ceil(np.array([expected_active_experts(int(t), int(e), int(k))
                                    for t, e, k in zip(tokens, experts, topk, strict=True)])
                          / ep)  # fmt: skip
    else:
        touched = np.ceil(np.minimum(experts, tokens * topk) / ep)
    weight, out = parse_weight_format(scope), stream_format(dtype).itemsize
    gate_up = _gemm_roofline_s(pairs, 2 * width, hidden, touched, dtype, weight, out, chip,
                               where)  # fmt: skip
    down = _gemm_roofline_s(pairs, hidden, width, touched, dtype, weight, out, chip, where)
    return pairs, gate_up + down, rows[:, 7]


def _decode_attention_rows(rows: np.ndarray, dtype: DType, scope: str, chip: Chip, where: str):
    """(bytes rounded to a power of two, roofline seconds, microseconds) of decode_attention
    rows [sequences, cached tokens, heads, kv heads, head_dim, microseconds] (module
    docstring): Q in and the output out in BF16 (_OUTPUT_ITEMSIZE), K and V of every cached
    token in the cache's format `scope`."""
    from xpusim.cost.calibration import dram_bytes_per_s

    seqs, tokens, heads, kv_heads, head_dim = (rows[:, i] for i in range(5))
    cache = DType.parse(scope, f"{where}: scope")
    moved = seqs * (2 * heads * head_dim * _OUTPUT_ITEMSIZE
                    + 2 * kv_heads * tokens * head_dim * cache.itemsize)  # fmt: skip
    flops = 4 * seqs * heads * head_dim * tokens
    roof_s = np.maximum(flops / chip.peak(dtype, where), moved / dram_bytes_per_s(chip))
    return 2.0 ** np.round(np.log2(moved)), roof_s, rows[:, 5]


def _mla_decode_rows(rows: np.ndarray, dtype: DType, scope: str, chip: Chip, where: str):
    """(bytes rounded to a power of two, roofline seconds, microseconds) of mla_decode rows
    [sequences, cached tokens, heads, kv_lora_rank, rope_dim, microseconds] (module
    docstring): Q (rank + rope per head) in and the output (rank per head) out in BF16
    (_OUTPUT_ITEMSIZE), the latents of every cached token in the cache's format `scope`."""
    from xpusim.cost.calibration import dram_bytes_per_s

    seqs, tokens, heads, rank, rope = (rows[:, i] for i in range(5))
    cache = DType.parse(scope, f"{where}: scope")
    moved = seqs * (heads * (2 * rank + rope) * _OUTPUT_ITEMSIZE
                    + tokens * (rank + rope) * cache.itemsize)  # fmt: skip
    flops = 2 * seqs * heads * (2 * rank + rope) * tokens
    roof_s = np.maximum(flops / chip.peak(dtype, where), moved / dram_bytes_per_s(chip))
    return 2.0 ** np.round(np.log2(moved)), roof_s, rows[:, 5]


def _latent_bytes_per_sequence(rows: np.ndarray, scope: str, where: str) -> np.ndarray:
    """The cached latents one sequence of each mla_decode row streams: its tokens' kv_lora_rank
    + rope_dim in the cache's format `scope`."""
    return rows[:, 1] * (rows[:, 3] + rows[:, 4]) * DType.parse(scope, f"{where}: scope").itemsize


def _curve_rows(rows_m: np.ndarray, sequences: np.ndarray) -> np.ndarray:
    """Which rows of a `sequence_stream` mla_decode table its curve is fitted to: at a
    bytes node (rows_m) where it measured several sequences, those rows only; a
    one-sequence row there timed one sequence's stream, which the floor per cached byte of
    one sequence prices (_stream_s_per_byte), not how fast many sequences stream the same
    bytes (module docstring, "One sequence's stream")."""
    several = {float(m) for m, s in zip(rows_m, sequences, strict=True) if s > 1}
    return np.array([s > 1 or float(m) not in several
                     for m, s in zip(rows_m, sequences, strict=True)])  # fmt: skip


def _stream_s_per_byte(fixed_s: float, measured_s: np.ndarray,
                       latent_bytes: np.ndarray) -> float:  # fmt: skip
    """The least time past the fixed time per cached byte of one sequence over every row:
    a floor the fixed time plus one sequence's latents at this rate, which prices no row
    above its measured time (roofline.kernel_floor_s)."""
    return float(np.min(np.maximum(measured_s - fixed_s, 0.0) / latent_bytes))


def time_isotonic(grid: np.ndarray, rows_m: np.ndarray) -> np.ndarray:
    """A bytes-keyed table's curve at GRID_LOG2 whose time past the fixed time, bytes over
    fraction, never falls from one node to the next, so that a decode step of more context
    (more bytes at the same sequences) never costs less. The curve pools rows of every
    batch by bytes, and a node of many sequences may be measured faster than the node of
    one sequence below it: TensorRT-LLM's H100 kernel for Llama-3-8B's layout takes 12.6 us
    for one sequence of 4 MB and 10.1 us for 16 sequences of 8 MB, so one sequence of 2,000
    tokens was priced under one of 1,000. The nodes where the table measured rows are made
    non-decreasing in log time by pool-adjacent-violators (weighted by their rows, the
    least-squares fit in relative error the curve itself is): a node already consistent
    keeps its time, a run of violating nodes takes their weighted geometric mean. Between
    and beyond those nodes the curve is interpolated as before, and a node whose time still
    falls under the one below it (a dip of the interpolation between rows far apart) takes
    that time: its least non-decreasing envelope. Inside an interval, interpolate_grid's
    `in_time` keeps the interpolation from dipping. A window or an engine's own kernel of a
    bytes-keyed kind (none is committed) would price its span unsmoothed (engine_grid)."""
    nodes, counts = np.unique(np.log2(rows_m), return_counts=True)
    log_time = GRID_LOG2 * np.log(2.0) - np.log(grid)
    at = np.searchsorted(GRID_LOG2, nodes)
    blocks: list[list[float]] = []  # [mean log time, weight, nodes] of each pooled run
    for value, weight in zip(log_time[at], counts.astype(float), strict=True):
        blocks.append([value, weight, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            (v2, w2, n2), (v1, w1, n1) = blocks.pop(), blocks.pop()
            blocks.append([(v1 * w1 + v2 * w2) / (w1 + w2), w1 + w2, n1 + n2])
    pooled = np.repeat([b[0] for b in blocks], [int(b[2]) for b in blocks])
    fractions = np.interp(GRID_LOG2, nodes, np.exp(nodes * np.log(2.0) - pooled))
    return 2.0**GRID_LOG2 / np.maximum.accumulate(2.0**GRID_LOG2 / fractions)


def _moe_envelope(grid: np.ndarray, fixed_s: float, roofline_s: np.ndarray,
                  rows_m: np.ndarray) -> np.ndarray:  # fmt: skip
    """A moe table's curve at GRID_LOG2 for an op of roofline `roofline_s` at each node, so
    that the op's time, fixed_s + roofline / fraction, never falls as its pairs grow. At the
    nodes of the rows' M (the two nodes either side of one between them) and outside their
    span, the time is the least at that node and every larger one (a lower envelope: fewer
    tokens can run the kernel of more, padded); at a node between two of those, between
    their times. A curve of several shapes' rows puts fractions side by side that no one
    layer has: the H100 MXFP4 table priced gpt-oss-120b's layer at 128 pairs (batch 32)
    on gpt-oss-20b's EP 8 rows, fraction 0.11, and at 256 pairs on its EP 1 rows, 0.58:
    1.76 ms then 0.93 ms. A row's time is lowered only to a larger M's, which is no faster
    than its roofline, and the roofline grows with M, so no fraction passes 1; between two
    rows' nodes the interpolated curve may dip under both (B200 FP8 rows of 1 and 16 pairs:
    27 and 35 us, 14 us at 2 pairs), and that time is raised to the smaller row's."""
    time_s = fixed_s + roofline_s / grid
    log_m = np.log2(rows_m)
    rows = {float(x) for x in np.floor(log_m)} | {float(x) for x in np.ceil(log_m)}
    anchor = np.array([x in rows or not log_m.min() <= x <= log_m.max() for x in GRID_LOG2])
    above_s = np.minimum.accumulate(np.where(anchor, time_s, np.inf)[::-1])[::-1]
    below_s = np.maximum.accumulate(np.where(anchor, above_s, -np.inf))
    return roofline_s / (np.clip(time_s, below_s, above_s) - fixed_s)


def _prefill_rows(rows: np.ndarray, dtype: DType, scope: str, chip: Chip, where: str,
                  mla: bool):  # fmt: skip
    """(FLOPs rounded to a power of two, roofline seconds, microseconds) of prefill_attention
    rows [sequences, tokens, heads, kv heads, head_dim, microseconds] or mla_prefill rows
    [sequences, tokens, heads, qk head_dim, v head_dim, microseconds] (module docstring):
    causal, no prefix; Q and the output in `dtype`, keys and values in `scope` (an MLA
    prefill's keys and values are per head, decompressed)."""
    from xpusim.cost.calibration import dram_bytes_per_s
    from xpusim.ir.op import attention_pairs

    seqs, tokens, heads = rows[:, 0], rows[:, 1], rows[:, 2]
    kv = DType.parse(scope, f"{where}: scope")
    if mla:
        qk, v = rows[:, 3], rows[:, 4]
        width = heads * (qk + v)
        moved = seqs * tokens * heads * (qk + v) * (dtype.itemsize + kv.itemsize)
    else:
        kv_heads, head_dim = rows[:, 3], rows[:, 4]
        width = 2 * heads * head_dim
        moved = seqs * tokens * head_dim * (2 * heads * dtype.itemsize
                                            + 2 * kv_heads * kv.itemsize)  # fmt: skip
    flops = 2 * seqs * width * attention_pairs(tokens, tokens, True)
    roof_s = np.maximum(flops / chip.peak(dtype, where), moved / dram_bytes_per_s(chip))
    return 2.0 ** np.round(np.log2(flops)), roof_s, rows[:, 5]


def _prefill_attention_rows(rows: np.ndarray, dtype: DType, scope: str, chip: Chip, where: str):
    return _prefill_rows(rows, dtype, scope, chip, where, mla=False)


def _mla_prefill_rows(rows: np.ndarray, dtype: DType, scope: str, chip: Chip, where: str):
    return _prefill_rows(rows, dtype, scope, chip, where, mla=True)


_ROWS = {"gemm": (_gemm_rows, (4, 5)), "moe": (_moe_rows, (8,)),
         "decode_attention": (_decode_attention_rows, (6,)),
         "mla_decode": (_mla_decode_rows, (6,)),
         "prefill_attention": (_prefill_attention_rows, (6,)),
         "mla_prefill": (_mla_prefill_rows, (6,))}  # fmt: skip
"""Per table kind: its rows' (M, roofline seconds, microseconds), and the row widths it
takes."""


def row_shapes(rows: np.ndarray, kind: str) -> tuple[tuple[float, ...], ...]:
    """Each row's shape, the kernel it timed as an op knows it (op_table.kernel_shape): a
    gemm row's (N, K) (and its groups, if grouped), a moe row's (hidden, inter / tp, topk,
    experts, ep), the expert GEMMs one rank runs and how many ranks share the experts, a
    decode_attention row's (heads, kv heads, head_dim) on one GPU, an mla_decode row's
    (heads, kv_lora_rank, rope_dim) on one GPU; none for other kinds."""
    if kind == "gemm":
        return tuple((n, k, *extra) for n, k, *extra in rows[:, [1, 2, *range(4, rows.shape[1])]]
                     .tolist())  # fmt: skip
    if kind == "moe":
        return tuple((h, i / tp, topk, experts, ep)
                     for _, h, i, topk, experts, tp, ep, _ in rows.tolist())  # fmt: skip
    if kind in ("decode_attention", "mla_decode"):
        return tuple(map(tuple, rows[:, 2:5].tolist()))
    return ()


def roofline_seconds(
    rows: np.ndarray, dtype: DType, chip: Chip, where: str, kind: str = "gemm",
    scope: str | None = None, routing_alpha: float | None = None, routing: str = "balanced",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """Each row's M, time on `chip`'s datasheet roofline and measured time (seconds); a row
    faster than the roofline is an error in the table (its units or its chip). A moe
    table's `routing_alpha` and `routing`: the power law and the routing its rows were
    timed under (_moe_rows)."""
    convert = partial(_moe_rows, routing_alpha=routing_alpha, routing=routing) \
        if kind == "moe" else _ROWS[kind][0]
    m, roof_s, micros = convert(rows, dtype, scope or dtype.value, chip, where)
    fractions = roof_s / (micros * 1e-6)
    if not np.all((fractions > 0) & (fractions <= 1)):
        bad = int(np.argmax(~((fractions > 0) & (fractions <= 1))))
        raise UserError(f"{where}: row {bad + 1} ({rows[bad].tolist()}) runs at "
                        f"{fractions[bad]:.3g} of {chip.id}'s roofline; at most 1 is possible")
    return m, roof_s, micros * 1e-6


def _table(entry: dict, path: Path) -> KernelTable:
    where = f"{path.name}: table {entry.get('name', '?')!r}"
    try:
        if entry["kind"] not in _ROWS:
            raise ValueError(f"kind must be one of {', '.join(_ROWS)}, not {entry['kind']!r}")
        rows = np.array(entry["rows"], dtype=float)
        widths = _ROWS[entry["kind"]][1]
        if rows.ndim != 2 or rows.shape[1] not in widths or len(rows) == 0:
            raise ValueError(f"{entry['kind']} rows must have {' or '.join(map(str, widths))} "
                             "values (the module docstring says which)")
        if not np.all(np.isfinite(rows) & (rows > 0)):
            raise ValueError("every value of a row must be a positive number")
        dtype = DType.parse(entry["dtype"], f"{where}: dtype")
        measured_on = catalog_chip(entry["measured_on"], f"{where}: measured_on")
        for chip_id in entry["chips"]:
            catalog_chip(chip_id, f"{where}: chips")
        for key in ("scope", "source", "url", "date", "conditions"):
            if not str(entry[key]).strip():
                raise ValueError(f"{key} is empty")
        alpha = entry.get("routing_alpha")
        if alpha is not None and (entry["kind"] != "moe" or not float(alpha) > 1):
            raise ValueError(f"routing_alpha {alpha!r}: a moe table's power law, above 1")
        routing = entry.get("routing", "balanced")
        if routing not in ROUTINGS or (routing != "balanced" and entry["kind"] != "moe"):
            raise ValueError(f"routing {routing!r}: a moe table's, one of {', '.join(ROUTINGS)}")
        rows_m, roofline_s, measured_s = roofline_seconds(
            rows, dtype, measured_on, where, entry["kind"], entry["scope"],
            None if alpha is None else float(alpha), routing)  # fmt: skip
        stream = entry.get("sequence_stream", False)
        if not isinstance(stream, bool) or (stream and entry["kind"] != "mla_decode"):
            raise ValueError(f"sequence_stream {stream!r}: an mla_decode table's, true or false")
        stream_s_per_byte = 0.0
        if stream:
            curve = _curve_rows(rows_m, rows[:, 0])
            stream_s_per_byte = _stream_s_per_byte(
                fit_fixed_s(rows_m[curve], roofline_s[curve], measured_s[curve]), measured_s,
                _latent_bytes_per_sequence(rows, entry["scope"], where))  # fmt: skip
            rows_m, roofline_s, measured_s = rows_m[curve], roofline_s[curve], measured_s[curve]
            rows = rows[curve]  # the curve's rows name its shapes (row_shapes)
        split = entry.get("split")
        if split is not None and (entry["kind"] != "mla_decode" or not isinstance(split, dict)):
            raise ValueError("split: an mla_decode table's layout (a table of fields)")
        engine = " ".join(str(entry[key]) for key in ("engine", "engine_version") if key in entry)
        backend, kernel = entry.get("backend", DEFAULT_MOE_BACKEND), str(entry.get("kernel", ""))
        window, shapes = entry.get("window", False), row_shapes(rows, entry["kind"])
        derived = entry.get("derived", False)
        for flag, value in (("window", window), ("derived", derived)):
            if not isinstance(value, bool):
                raise ValueError(f"{flag} {value!r}: true or false")
        if window and not shapes:  # a window prices only its rows' shapes: here, no op
            raise ValueError(f"window: a {entry['kind']} table's rows name no shape; only "
                             "gemm, moe, decode_attention and mla_decode tables may have one")
        if "@" in kernel:
            raise ValueError(f"kernel {kernel!r}: a name without '@'")
        if backend not in MOE_BACKENDS or (backend != DEFAULT_MOE_BACKEND
                                           and entry["kind"] != "moe"):  # fmt: skip
            raise ValueError(f"backend {backend!r}: a moe table's, one of "
                             f"{', '.join(MOE_BACKENDS)}")  # fmt: skip
        return KernelTable(
            name=entry["name"], kind=entry["kind"], dtype=dtype.value, scope=entry["scope"],
            measured_on=measured_on.id, chips=tuple(entry["chips"]), source=entry["source"],
            url=entry["url"], date=str(entry["date"]), conditions=entry["conditions"],
            rows_m=rows_m, roofline_s=roofline_s, measured_s=measured_s,
            engine=engine, backend=backend, row_shapes=shapes,
            kernel=kernel, window=window,
            sequences=rows[:, 0] if entry["kind"] == "decode_attention" else None,
            stream_s_per_byte=stream_s_per_byte,
            split=None if split is None else SplitLayout.parse(split), derived=derived,
        )  # fmt: skip
    except KeyError as e:
        raise UserError(f"{where}: missing field {e}") from None
    except (TypeError, ValueError) as e:
        raise UserError(f"{where}: {e}") from None


KIND_FILES = {"gemm": "*.toml", "moe": "moe/*.toml",
              "decode_attention": "decode_attention/*.toml",
              "mla_decode": "mla_decode/*.toml"}  # fmt: skip
"""Where each kind's tables are committed (under kernel_tables/), so that a run of a model
without routed experts never parses the moe tables (110 KB of TOML, 35 ms)."""
CHIP_FILES = {"gemm": "gemm/{chip}.toml", "prefill_attention": "prefill_attention/{chip}.toml",
              "mla_prefill": "mla_prefill/{chip}.toml"}  # fmt: skip
"""Tables of a kind filed one chip to a file (under kernel_tables/, named by catalog id), each
pricing that chip only, so that a run parses its own chip's alone: aiconfigurator's GEMM
tables are 60 KB of TOML a Blackwell chip, 300 KB in all (85 ms to parse); the prefill
attention tables 14 KB a chip. A kind filed only so has no KIND_FILES entry."""


KINDS = tuple(dict.fromkeys([*KIND_FILES, *CHIP_FILES]))
"""Every kind, those filed in shared files first."""


def _read(path: Path, kind: str) -> list[KernelTable]:
    """The tables of one committed file, read back from the disk cache where this package
    built them before (disk_cache.py: parsing and checking every file took 1.2 s of a
    serve), else built by read_tables."""
    committed = path.is_relative_to(TABLES_DIR)
    name = "kernel-tables-" + ("-".join(path.relative_to(TABLES_DIR).with_suffix("").parts)
                               if committed else f"other-{path.stem}")  # a test's own file
    return cached(name, lambda: read_tables(path, kind), path.read_bytes())


def read_tables(path: Path, kind: str) -> list[KernelTable]:
    """The tables of one file, parsed and checked (_read's reference, and its build)."""
    with path.open("rb") as f:
        tables = [_table(entry, path) for entry in tomllib.load(f)["table"]]
    wrong = next((t for t in tables if t.kind != kind), None)
    if wrong is not None:
        raise UserError(f"table {wrong.name!r}: a {wrong.kind} table among the {kind} "
                        f"tables (kernel_tables/{path.relative_to(TABLES_DIR)})")  # fmt: skip
    return tables


@cache
def tables_of_kind(kind: str) -> tuple[KernelTable, ...]:
    """Every committed table of `kind` in the shared files (KIND_FILES), in file and table
    order; not the per-chip files (chip_tables)."""
    pattern = KIND_FILES.get(kind)
    return tuple(t for path in (sorted(TABLES_DIR.glob(pattern)) if pattern else ())
                 for t in _read(path, kind))  # fmt: skip


@cache
def chip_tables(kind: str, chip_id: str) -> tuple[KernelTable, ...]:
    """The tables of `kind` in `chip_id`'s own file (CHIP_FILES), if it has one; each must
    price that chip alone."""
    pattern = CHIP_FILES.get(kind)
    path = TABLES_DIR / pattern.format(chip=chip_id) if pattern else None
    if path is None or not path.is_file():
        return ()
    tables = _read(path, kind)
    stray = next((t for t in tables if t.chips != (chip_id,)), None)
    if stray is not None:
        raise UserError(f"table {stray.name!r} in {path.name} prices {', '.join(stray.chips)}; "
                        f"a chip's own file holds tables of {chip_id} only")  # fmt: skip
    return tuple(tables)


def all_tables() -> tuple[KernelTable, ...]:
    """Every committed table, kind by kind, the shared files' and then every chip's own."""
    chips = {kind: sorted(p.stem for p in TABLES_DIR.glob(pattern.format(chip="*")))
             for kind, pattern in CHIP_FILES.items()}  # fmt: skip
    return tuple(t for kind in KINDS
                 for t in (*tables_of_kind(kind),
                           *(t for chip in chips.get(kind, ()) for t in chip_tables(kind, chip))))


def tables_for_chip(chip_id: str, kind: str | None = None) -> list[KernelTable]:
    """Every table (of `kind`, if given) that prices some op of `chip_id` (a what-if copy:
    its base chip's): the shared files' that list it, then its own file's."""
    base = chip_id.split("[", 1)[0]
    kinds = KINDS if kind is None else (kind,)
    return [t for k in kinds
            for t in (*(t for t in tables_of_kind(k) if base in t.chips), *chip_tables(k, base))]


def kernel_table(
    chip_id: str, dtype: DType, scope: str | None = None, kind: str = "gemm"
) -> KernelTable | None:  # fmt: skip
    """The `kind` table that prices `chip_id`'s ops of `dtype` and `scope` (op_table.
    kernel_keys; the format's own name when None): a table of that exact scope first, else
    one of the whole format. What-if copies share their base chip's (the floor scales with
    the copy's own peak and bandwidth)."""
    scope = dtype.value if scope is None else scope
    tables = [t for t in tables_for_chip(chip_id, kind) if t.prices(kind, dtype, scope)]
    exact = [t for t in tables if t.key_scope == scope]
    return (exact or tables or [None])[0]


def fraction_grid(
    chip_id: str, dtype: DType, keys: tuple[tuple[str, str], ...],
    shapes: tuple[tuple[str, tuple[float, ...]], ...] = (),
) -> tuple[np.ndarray, float, DType, float, float] | None:  # fmt: skip
    """The curve, sampled at GRID_LOG2 (what the cost model interpolates), the fixed time
    per op, the format whose peak the op's floor is judged at (the table's: its kernels
    ran in it, as the fractions were measured against it; an op's own but for attention
    tables, which price any compute format over their cache), the least time per
    sequence (KernelTable.sequence_floor_s; 0 but for decode attention) and the least time
    per cached byte of one sequence (KernelTable.stream_s_per_byte; 0 but for an mla_decode
    table that has one) of the first table found for the op's (kind, scope) keys in order
    (op_table.kernel_keys), or None. Where
    `shapes` gives the op's shape for that kind (op_table.kernel_shapes) and the table has
    rows of it, those rows alone (KernelTable.of_shape). An engine's own kernel's table prices
    the M it measured and defers below it to the next table found (engine_grid); a window
    table, only ops of its own shapes, at the M it measured."""
    found = _candidates(chip_id, dtype, keys, shapes)
    table, shape = next(found, (None, None))
    if table is None:
        return None
    if table.kernel or table.window:  # the next table found, looked up only for these
        under = next(((t, s) for t, s in found if not (t.kernel or t.window)
                      and t.dtype == table.dtype), (None, None))  # fmt: skip
        grid, fixed_s = engine_grid(table.of_shape(shape), *under, shape)
    else:
        grid, fixed_s = table.grid_of(shape)
        fixed_s /= table.ops_per_row
    # of_shape is a pass over the rows (0.18 ms for H100's 700 gemm rows): decode attention only
    floor_s = 0.0 if table.sequences is None else table.of_shape(shape).sequence_floor_s
    return grid, fixed_s, DType(table.dtype), floor_s, table.stream_s_per_byte


def split_figures(
    chip_id: str, dtype: DType, keys: tuple[tuple[str, str], ...],
    shapes: tuple[tuple[str, tuple[float, ...]], ...] = (),
) -> np.ndarray:  # fmt: skip
    """The op's split row (split_layout.SPLIT_FIGURES) from the table fraction_grid prices
    it by, where that table has a split layout (KernelTable.split) taken at the op's heads
    (its mla_decode shape's first figure); all 0 otherwise. Its cached token's bytes are its
    latent and rope widths in the table's cache format (its scope)."""
    shape = dict(shapes).get("mla_decode")
    table = first_table(chip_id, dtype, keys, shapes) if shape else None
    if table is None or table.split is None or shape[0] != table.split.heads:
        return np.zeros(len(SPLIT_FIGURES))
    return table.split.figures((shape[1] + shape[2]) * DType.parse(table.scope).itemsize)


def first_table(
    chip_id: str, dtype: DType, keys: tuple[tuple[str, str], ...],
    shapes: tuple[tuple[str, tuple[float, ...]], ...] = (),
) -> KernelTable | None:  # fmt: skip
    """The table fraction_grid prices an op by (its `kernel` names an engine's own), or
    None: what a serving run's note of the engine's kernels is read from."""
    return next((t for t, _ in _candidates(chip_id, dtype, keys, shapes)), None)


def _candidates(
    chip_id: str, dtype: DType, keys: tuple[tuple[str, str], ...],
    shapes: tuple[tuple[str, tuple[float, ...]], ...],
) -> Iterator[tuple[KernelTable, tuple[float, ...] | None]]:  # fmt: skip
    """(table, the op's shape for its kind) of every table found for the op's keys, in the
    order tried; a window table only where it has rows of the op's shape."""
    return ((t, shape) for kind, scope in keys for shape in [dict(shapes).get(kind)]
            for t in [kernel_table(chip_id, dtype, scope, kind)]
            if t is not None and (t.has_shape(shape) or not t.window))  # fmt: skip


def engine_grid(
    engine: KernelTable, under: KernelTable | None, under_shape: tuple[float, ...] | None,
    shape: tuple[float, ...] | None,
) -> tuple[np.ndarray, float]:  # fmt: skip
    """The curve (at GRID_LOG2) and fixed time per op of an engine's own kernel `engine`
    (its rows of the op's `shape` for its kind): from its smallest measured M up, its
    fractions taken on the fixed time of `under` (the table the op takes without the
    engine's choice, its rows of `under_shape`, the op's shape for that table's kind: a
    routed expert no moe table of the default backend prices takes a gemm table); below
    it, `under`'s curve; without `under`, the roofline (fraction 1, no fixed time) below
    it, as an op no table prices. So an engine's kernel prices only the M its rows
    measured, and above them too (its largest row the kernel's curve there). A `window`
    prices from one token up, its first row's fraction below that row, and a window of no
    engine's kernel only up to its largest M, with `under`'s curve above it (an engine's
    kernel that is a window is one for its shapes alone); a moe window on its own fixed
    time (the module docstring, "A window"), `under`'s curve converted to it, so that an op
    past the window costs what `under` prices it at. A moe table's curve takes the op's
    envelope (_moe_envelope) over both."""
    if under is None:
        below, fixed_s = np.ones(len(GRID_LOG2)), 0.0
    else:
        below, fixed_s = under.grid_of(under_shape)
        fixed_s /= under.ops_per_row
    moe = engine.kind == "moe" and shape is not None
    roofline_s = engine.node_roofline_s(shape)  # the op's, at each node (moe and gemm)
    own_s = engine.own_fixed_s / engine.ops_per_row
    if roofline_s is not None and ((engine.window and moe) or own_s < fixed_s):
        # a moe window's rows start at one token: the time every row spends past its
        # roofline is the kernel's own fixed time. And an engine's kernel whose rows spend
        # less than `under`'s fixed time past their roofline (vLLM's Triton MXFP4 MoE at
        # TP 4: 51.6 us for 4 tokens where TensorRT-LLM's rows' fixed time is 65) takes that
        # least time as its own, or its fractions would pass 1 or fall below 0 (the curve
        # between a negative node and the next gave 225 us at 22 pairs). `under`'s times
        # are kept, expressed on it.
        past_s = roofline_s / below + (fixed_s - own_s) * engine.ops_per_row
        below, fixed_s = roofline_s / np.maximum(past_s, roofline_s), own_s
    measured = engine.fraction_at(2.0**GRID_LOG2, fixed_s * engine.ops_per_row)
    inside = (np.log2(engine.rows_m.min()) <= GRID_LOG2) | engine.window  # a window's
    # rows start at one token: fewer pairs take its first row's fraction
    if engine.window and not engine.kernel:
        inside &= np.log2(engine.rows_m.max()) >= GRID_LOG2
    grid = np.where(inside, measured, below)
    if moe:  # one time per M, never falling
        grid = _moe_envelope(grid, fixed_s * engine.ops_per_row, roofline_s, engine.rows_m)
    return grid, fixed_s


def interpolate_grid(
    grid: np.ndarray, m: np.ndarray, in_time: np.ndarray | bool = False
) -> np.ndarray:  # fmt: skip
    """Linear interpolation in log2 M of per-op curves sampled at GRID_LOG2: grid (..., n, G)
    and m (..., n) broadcasting; M outside [1, 2^46] takes the end node's value. Where
    `in_time` (an op of a bytes-keyed table, whose curve is time_isotonic), at most the
    fraction that keeps the op's time past the fixed time at the node below its M: the
    fraction's linear piece between two nodes of rising time can dip under the lower
    node's time inside the interval (bytes over a fraction that doubles from one node to
    the next fall to 0.94 of it half-way). Log time is convex in log bytes along a linear
    piece, so the larger of its time and the lower node's rises through the interval and
    meets the upper node's time there."""
    position = np.clip(np.log2(np.maximum(m, 1.0)), GRID_LOG2[0], GRID_LOG2[-1])
    low = np.minimum(np.floor(position), GRID_LOG2[-1] - 1).astype(int)
    weight = position - low
    shape = np.broadcast_shapes(grid.shape[:-1], low.shape)
    grid = np.broadcast_to(grid, (*shape, grid.shape[-1]))
    low = np.broadcast_to(low, shape)[..., None]
    below = np.take_along_axis(grid, low, -1)[..., 0]
    above = np.take_along_axis(grid, low + 1, -1)[..., 0]
    fraction = below + (above - below) * weight
    return np.where(in_time, np.minimum(fraction, below * 2.0**weight), fraction)


NODE_FLOPS = 2.0**GRID_LOG2
"""The M (a prefill's FLOPs) at each node of GRID_LOG2, one array for flops_envelope_s and
its per-op copy (roofline.OneFloor)."""


def flops_envelope_s(grid: np.ndarray, flops: np.ndarray, memory_s: np.ndarray,
                     peak: np.ndarray, own_s: np.ndarray) -> np.ndarray:  # fmt: skip
    """A FLOPs-keyed (prefill attention) op's time past its table's fixed time: the least
    the curve gives any op of its bytes and at least its FLOPs, so that it never falls as
    the op's FLOPs or bytes grow (more tokens, sequences, heads or cached prefix).

    The rows' fractions are of max(FLOPs / peak, bytes / bandwidth), keyed by FLOPs; the
    time the curve gives an op, own_s = max(compute, memory) / f(FLOPs), is one of the rows'
    where the op's bytes per FLOP are theirs. A prompt shorter than the tables' shortest
    (128 tokens) has more bytes per FLOP (bytes grow as tokens, FLOPs as their square), so
    its memory roofline over a fraction measured at the FLOPs of a longer prompt falls as
    the prompt grows wherever f grows faster than the square root of FLOPs: H100 BF16 rows
    give f 0.044 at 2^24 FLOPs (8 heads of 64, 128 tokens: 17.2 us) and 0.53 at 2^25 (8 of
    128: 15.5 us), and Llama-3.1-8B's four 20-token prompts were priced 36 us, four of 24
    24 us.
    A kernel given the same data and more arithmetic (more key tiles per query tile) is no
    faster, so the op takes the least over FLOPs F' >= its own of max(F' / peak, memory_s)
    / f(F'): its greatest bound below own_s that never falls with more FLOPs, and, each
    term rising with the bytes, never with more bytes. With f linear in log2 F' between
    nodes and capped as interpolate_grid's `in_time` caps it (the time F' / f past a node
    never below the node's inside its interval), that least is at the op's own FLOPs, at
    a node above them, or at the crossover F' = memory_s x peak where the op's compute
    would meet its memory time (the memory term's fraction is largest at an end of its
    span). A row's own time moves only where a larger FLOPs node prices its bytes faster,
    and down: no price of FLOPs and bytes alone keeps every row and never falls with more
    heads (16 heads of 64 and 2 KV heads have the FLOPs and bytes of the 15.5 us row, twice
    the heads of the 17.2 us one; docs/validation.md)."""
    peak = np.where(np.isfinite(peak), peak, 1.0)  # unpriced ops (no table): discarded
    position = np.clip(np.log2(np.maximum(flops, 1.0)), GRID_LOG2[0], GRID_LOG2[-1])
    nodes_s = np.maximum(NODE_FLOPS / peak[..., None], memory_s[..., None]) / grid
    least_s = np.min(np.where(position[..., None] < GRID_LOG2, nodes_s, np.inf), axis=-1)
    crossover = memory_s * peak
    crossed = np.clip(np.log2(np.maximum(crossover, 1.0)), GRID_LOG2[0], GRID_LOG2[-1])
    at_crossover_s = memory_s / interpolate_grid(grid, crossover, True)
    return np.minimum(np.minimum(own_s, least_s),
                      np.where(crossed > position, at_crossover_s, np.inf))  # fmt: skip
