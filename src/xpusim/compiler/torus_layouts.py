"""Inference layouts over a torus slice: Pope et al.'s partitionings, costed per step.

Pope et al. ("Efficiently Scaling Transformer Inference", MLSys 2023, arXiv 2211.05102)
serve PaLM-540B on 64 TPU v4 with layouts the (tp, pp, dp, ep) plan search lacks: weights
split over two torus axis groups at once (traffic per chip falling as 1/sqrt(chips)), a
multi-query model's KV cache split by sequence instead of held whole on every chip, weights
gathered rather than activations moved for large-batch prefill, and collectives run inside
the matmuls that consume them. Which layout splits what is data (torus_layouts.toml); this
module costs one forward step of `batch` sequences of `tokens` new tokens each over
`context` cached ones, per chip: its memory, and its time as computation, memory traffic,
link traffic and hop latency, each from the chip's catalog figures. Nothing here is fitted:
a layout's time is never below FLOPs over peak nor its own bytes over bandwidth.

Link traffic per layer and chip (bytes received; T tokens, E = d_model, F = d_ff, a bytes
an activation element, n chips), Pope section 3.2:
- "1d": all-gather and reduce-scatter of [T, E] over all n: 2 T E a (n-1)/n;
- "2d": d_model over X chips, d_ff over Y*Z = n/X: 2 T a (E/X (YZ-1)/YZ + F/YZ (X-1)/X),
  which for F = 4E and the best X is Pope's 8 T E a / sqrt(n);
- "gather": the layer's weights all-gathered: W (n-1)/n; activations stay put;
- attention by batch adds two all-to-alls of the queries, T H a / n (n-1)/n each, whose
  bytes cross the rings' mean distance (d/4 an axis, `all_to_all_distance`), as
  cost/collectives.py charges an all-to-all.
A collective along a set of torus axes crosses their links and hops as cost/collectives.py
costs every torus collective (`axis_links`, `axis_hops`: the scaling book's, Austin, Pope et
al., "How to Scale Your Model"): on a wrapped axis both ring directions (2 links) and dim // 2
hops to the farthest chip, on an axis without wrap-around (a slice shorter than the torus:
TPU v5e/v6e axes under 16, TPU v4/v5p slices that are not whole 4x4x4 cubes) 1 link and
dim - 1 hops; an all-to-all is forwarded along the same rings ("only has to pass shards
part-way around the ring"), not exchanged pairwise. After a fixed cost to dispatch it
(torus_layouts.toml, [collective]): in decode, where a layer's collectives move a few kB
each, that latency, not bandwidth, is most of their time.

A parallel block (PaLM's) needs one d_ff/heads all-reduce a layer, a serial block two (Pope
section 3.4); query heads are padded to a multiple of the chips they split over, as Pope pad
PaLM-540B's 48 to 64 on 64+ chips (section 4), and the padding is held, read and multiplied.

The matmuls run at the chip's matrix unit as cost/systolic.py maps a GEMM onto it: on a
weight-stationary array (TPU MXUs) a fold of weights serves the tokens streamed through it,
so a decode step's few tokens a chip leave it waiting on weight loads, not arithmetic.
"""

from __future__ import annotations

import itertools
import math
import tomllib
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path

from xpusim.cost import systolic
from xpusim.cost.collectives import all_to_all_distance, axis_hops, axis_links
from xpusim.errors import UserError, closest
from xpusim.hardware.spec import Chip
from xpusim.hardware.system import Axis, TopologyLevel
from xpusim.ir.dtypes import DType
from xpusim.memo import scoped
from xpusim.workloads.transformer_config import TransformerConfig


@dataclass(frozen=True)
class Layout:
    name: str
    weights: str  # "1d", "2d" or "gather"
    kv: str  # "heads" or "batch"
    overlap: bool  # collectives hidden behind the matmuls that consume them
    description: str


@cache
def _data() -> dict:
    return tomllib.loads(Path(__file__).with_name("torus_layouts.toml").read_text())


@cache
def layouts() -> dict[str, Layout]:
    """The layouts of torus_layouts.toml, by name."""
    return {name: Layout(name, **fields) for name, fields in _data()["layouts"].items()}


def dispatch_s() -> float:
    """The fixed cost of one collective before its first hop (torus_layouts.toml)."""
    return float(_data()["collective"]["dispatch_s"])


def layout(name: str) -> Layout:
    """The layout of this name, or a UserError naming the closest ones."""
    if name not in layouts():
        raise UserError(f"--layout {name}: no such layout{closest(name, layouts())}")
    return layouts()[name]


@scoped()
def slice_dims(chips: int) -> tuple[int, ...]:
    """The most cubic 3D torus shape of `chips` chips (4 x 4 x 4 for 64): TPU v4 slices are
    cuboids of the pod's 3D torus (Jouppi et al., ISCA 2023); Pope et al. use 4 x 4 x 4."""
    best = (chips, 1, 1)
    for x in range(1, round(chips ** (1 / 3)) + 2):
        for y in range(x, chips + 1):
            if chips % (x * y) == 0 and y <= chips // (x * y):
                shape = (x, y, chips // (x * y))
                if max(shape) < max(best):
                    best = shape
    return tuple(sorted((d for d in best if d > 1), reverse=True)) or (1,)


@dataclass(frozen=True)
class Collective:
    """One collective per layer: bytes each chip receives over the axes it spans."""

    bytes_per_chip: float
    axes: tuple[Axis, ...]  # the torus dimensions it runs along
    all_to_all: bool = False  # its bytes cross the rings' mean distance, not one link

    def time_s(self, link_bytes_per_s: float) -> float:
        links = axis_links(self.axes)
        if not links:
            return 0.0
        distance = all_to_all_distance([a.dim for a in self.axes]) if self.all_to_all else 1.0
        return self.bytes_per_chip * distance / (links * link_bytes_per_s)

    @cached_property
    def hops(self) -> int:
        """The farthest chip of each axis it spans, in turn (module docstring)."""
        return axis_hops(self.axes)

    def latency_s(self, hop_s: float) -> float:
        """Its time however few bytes it moves: dispatch, then its hops."""
        return dispatch_s() + self.hops * hop_s if self.hops else 0.0


@dataclass(frozen=True)
class LayoutCost:
    """One step of a layout on one chip (every chip of the slice does the same)."""

    layout: str
    chips: int
    x_chips: int  # the d_model group of a 2D layout (1 otherwise)
    weight_bytes: float
    kv_bytes: float
    activation_bytes: float
    compute_s: float
    memory_s: float
    link_s: float
    hop_s: float
    step_s: float
    flops: float  # one chip's, the step's
    hbm_bytes: float  # one chip's weight and cache reads, the step's

    @property
    def total_bytes(self) -> float:
        return self.weight_bytes + self.kv_bytes + self.activation_bytes

    def step_with(self, overlap: bool) -> float:
        """The step with its collectives hidden behind the matmuls or not, whatever the
        layout's own choice (run's plans, costed as a layout, follow --overlap)."""
        return step_time_s(self.compute_s, self.memory_s, self.link_s, self.hop_s, overlap)


def step_time_s(compute_s: float, memory_s: float, link_s: float, hop_s: float,
                overlap: bool) -> float:  # fmt: skip
    """A step: its work (the longer of computing and reading memory) and its collectives'
    link time, summed, or the longer of the two when overlapped (Pope section 3.5); the
    hops' latency is never hidden."""
    work = max(compute_s, memory_s)
    return (max(work, link_s) if overlap else work + link_s) + hop_s


def _hbm(chip: Chip):
    return next(m for m in reversed(chip.memory) if m.kind.holds_tensors)


def _collectives(lay: Layout, cfg: TransformerConfig, dims: tuple[Axis, ...], tokens: float,
                 act_bytes: float, layer_weight_bytes: float) -> tuple[int, list[Collective]]:
    """(X, the layer's collectives) for this layout; X is the 2D layout's d_model group,
    chosen among products of whole torus axes to move the fewest bytes. A parallel block
    (PaLM's: attention and MLP from one normed input, summed) needs one all-reduce a layer
    over the d_ff/heads axis; a serial block needs two, one after attention and one after
    the MLP (Pope section 3.4: the parallel form "eliminates one of the two all-reduce
    operations in each Transformer layer needed for d_ff/n_heads parallelism"; section 4.3
    measures the serial form 14% slower a decode step at batch 512 "because of the increased
    communication time for activations")."""
    blocks = 1 if cfg.parallel_block else 2
    n = math.prod(a.dim for a in dims)
    e, f = cfg.hidden_size, cfg.intermediate_size
    if lay.weights == "gather":
        return 1, [Collective(layer_weight_bytes * (n - 1) / n, dims)]
    if lay.weights == "1d":
        one = Collective(tokens * e * act_bytes * (n - 1) / n, dims)
        return 1, [one, one] * blocks
    x_dims, yz_dims = _split_2d(dims, e, f)
    x, yz = math.prod(a.dim for a in x_dims), math.prod(a.dim for a in yz_dims)
    over_yz = Collective(tokens * e / x * act_bytes * (yz - 1) / yz, yz_dims)
    over_x = Collective(tokens * f / yz * act_bytes * (x - 1) / x, x_dims)
    return x, [over_yz, over_x, over_x, over_yz] + [over_yz, over_yz] * (blocks - 1)


@scoped()
def _split_2d(dims: tuple[Axis, ...], e: int,
              f: int) -> tuple[tuple[Axis, ...], tuple[Axis, ...]]:  # fmt: skip
    """(the X axes, the YZ axes) of a 2D layout: the split of the torus axes whose
    collectives move the fewest bytes, 2 T (E/X (YZ-1)/YZ + F/YZ (X-1)/X) a layer, the
    same split whatever T (kept for the call: a sweep asks for it once a job)."""
    n = math.prod(a.dim for a in dims)
    best: tuple[float, tuple[Axis, ...], tuple[Axis, ...]] | None = None
    for k in range(len(dims) + 1):
        for x_axes in itertools.combinations(range(len(dims)), k):
            x_dims = tuple(dims[i] for i in x_axes)
            yz_dims = tuple(dims[i] for i in range(len(dims)) if i not in x_axes)
            x = math.prod(a.dim for a in x_dims)
            yz = n // x
            moved = e / x * (yz - 1) / yz + f / yz * (x - 1) / x
            if best is None or moved < best[0]:
                best = (moved, x_dims, yz_dims)
    assert best is not None
    return best[1], best[2]


def layout_cost(cfg: TransformerConfig, chip: Chip, chips: int, name: str, batch: int,
                tokens: int, context: int, weight_bytes_per_param: float,
                act: DType = DType.BF16, kv_bytes_per_element: float = 2.0,
                torus: TopologyLevel | None = None) -> LayoutCost:
    """One forward step of `batch` sequences, `tokens` new tokens each (the prompt in
    prefill, 1 in decode) after `context` cached ones, under layout `name` on a torus slice
    of `chips` chips of `chip`. Weights are `weight_bytes_per_param` wide in memory and
    computed at `act`'s peak (int8 weights are widened to bf16 for the matmul, as Pope's).
    `torus`: the system's torus level, sliced to the chips (its shape, link bandwidth and
    hop latency); None: the most cubic slice and the chip's own link figures."""
    lay = layout(name)
    if cfg.num_experts > 1 or cfg.is_mla or cfg.ssm:
        raise UserError(f"--layout {name}: torus layouts cost dense multi-head/query attention "
                        f"models; {cfg.name} is not one")  # fmt: skip
    # the slice's axes with their wrap-arounds; without a system, the most cubic slice,
    # wrapped as a TPU v4 slice of whole cubes is
    dims = tuple(sorted((a for a in torus.axes if a.dim > 1), reverse=True)) or (Axis(1, True),) \
        if torus is not None and torus.dims else tuple(Axis(d, True) for d in slice_dims(chips))
    a, t = act.itemsize, float(batch) * tokens
    layers = cfg.num_layers
    heads = padded_heads(cfg.num_heads, chips)
    # the padded heads' query and output projections: weights held, read and multiplied
    pad_layer = 2 * (heads - cfg.num_heads) * cfg.head_dim * cfg.hidden_size
    layer_w = (cfg.layer_params + pad_layer) * weight_bytes_per_param
    all_w = (cfg.param_count + layers * pad_layer) * weight_bytes_per_param
    matmul_params = cfg.active_param_count + layers * pad_layer
    # the batch dimension splits at most `batch` ways (a gathered layout's tokens, a KV cache)
    batch_ways = min(chips, batch)
    kv_total = batch * (context + tokens) * cfg.kv_cache_bytes_per_token(kv_bytes_per_element)
    kv_ways = min(chips, cfg.num_kv_heads) if lay.kv == "heads" else \
        min(chips, batch * cfg.num_kv_heads)
    kv = kv_total / kv_ways
    e, f, h = cfg.hidden_size, cfg.intermediate_size, heads * cfg.head_dim
    x, comms = _collectives(lay, cfg, dims, t, a, layer_w)
    if lay.weights == "gather":
        # its shard, plus the layer being gathered: whole, or, overlapped, the two shards in
        # flight of the looped collective einsum that multiplies each as it arrives (Pope
        # section 3.5: "some of the weight-gathered layouts would exhaust memory without
        # these optimizations")
        weights = all_w / chips + (2 * layer_w / chips if lay.overlap else layer_w)
        activations = t / batch_ways * (e + f + h) * a
        weight_reads, matmul_ways = all_w, batch_ways
    else:
        weights = all_w / chips
        share = (e / chips + f / chips + h / chips) if lay.weights == "2d" \
            else (e + f / chips + h / chips)
        activations = t * share * a
        weight_reads, matmul_ways = all_w / chips, chips
    if lay.kv == "batch" and chips > 1:  # queries to their sequence's chip and back
        moved = t * h * a / chips * (chips - 1) / chips
        comms += [Collective(moved, dims, all_to_all=True)] * 2
    # attention splits by query head under "heads" (its KV read whole where heads share it),
    # by sequence under "batch"
    attention_ways = min(chips, heads) if lay.kv == "heads" else batch_ways
    attention_flops = 4.0 * batch * tokens * (context + tokens / 2) * h * layers
    flops = 2.0 * t * matmul_params / matmul_ways + attention_flops / attention_ways
    eff = chip.efficiency
    # a chip's weight matmuls: its shard against every token (weight-stationary), or every
    # layer's weights, gathered, against its sequences' tokens (weight-gathered)
    gathered = lay.weights == "gather"
    m, kn = (t / batch_ways, matmul_params) if gathered else (t, matmul_params / chips)
    compute_s = (_weight_matmul_s(chip, act, m, e / x, kn * x / e)
                 + attention_flops / attention_ways / (chip.peak(act) * eff.matmul.value))
    hbm = _hbm(chip).bandwidth_bytes_per_s.value * eff.memory.value
    memory_s = (weight_reads + kv) / hbm
    links = torus or chip.chip_to_chip
    link = links.bandwidth_bytes_per_s.value if links else math.inf
    hop = links.latency_s.value if links else 0.0
    link_s = layers * sum(c.time_s(link) for c in comms) if chips > 1 else 0.0
    hop_s = layers * sum(c.latency_s(hop) for c in comms) if chips > 1 else 0.0
    step = step_time_s(compute_s, memory_s, link_s, hop_s, lay.overlap)
    return LayoutCost(name, chips, x, weights, kv, activations, compute_s, memory_s, link_s,
                      hop_s, step, flops, weight_reads + kv)


def padded_heads(heads: int, chips: int) -> int:
    """The query heads a slice of `chips` chips runs: `heads` padded up to a multiple of the
    chips they split over, min(chips, heads rounded up to a power of two). Pope et al.
    (section 4) pad PaLM-540B's 48 heads to 64 "to partition more efficiently on 64+ chips",
    18B more parameters (their MFU counts the 540B); the same padding serves their 256-chip
    runs (64 heads). Generalized here: a slice pads only where its chips do not divide the
    heads; a 64-head model on 16 or 64 chips, or 48 heads on 8, is unchanged."""
    ways = min(chips, 1 << max(heads - 1, 0).bit_length())
    return -(-heads // ways) * ways


def _weight_matmul_s(chip: Chip, act: DType, m: float, k: float, n: float) -> float:
    """A chip's weight matmuls as one M x K by K x N GEMM (its share of the weights, K x N,
    against the M tokens streamed through them): its FLOPs at the chip's matmul efficiency,
    and on a systolic matrix unit at least its cycles there (cost/systolic.py: a weight-
    stationary fold takes as long to load as `rows` tokens take to stream, so fewer tokens
    than rows leave the cells waiting; Pope's 76% MFU on large prefills, Table 2, is below
    what the cycles alone would give, so the efficiency stays the bound there)."""
    at_efficiency_s = 2.0 * m * k * n / (chip.peak(act) * chip.efficiency.matmul.value)
    unit = chip.matrix_unit
    if unit.dataflow is None:
        return at_efficiency_s
    mode = systolic.MODES[unit.dataflow.value]
    if mode == 1 and unit.double_buffered and unit.double_buffered.value:
        mode = 2
    cycles = _cycles(max(m, 1.0), k, n, unit.rows.value, unit.cols.value, unit.count.value,
                     mode)  # fmt: skip
    # the unit's clock, as its peak states it (a TPU v4's 8 MXUs of 128 x 128 at 275 T/s)
    clock_hz = chip.peak(act) / (2 * unit.rows.value * unit.cols.value * unit.count.value)
    return max(at_efficiency_s, float(cycles) / clock_hz)


@scoped()  # a sweep's what-if copies of a chip (another HBM bandwidth) ask for the same
def _cycles(m: float, k: float, n: float, rows: int, cols: int, units: int, mode: int) -> float:
    """systolic.cycles of one product, kept for the call: numpy on scalars costs tens of
    microseconds, and the layouts of a sweep's points ask for thousands."""
    return float(systolic.cycles(m, k, n, rows, cols, units, mode))


def best_layout(cfg: TransformerConfig, chip: Chip, chips: int, batch: int, tokens: int,
                context: int, weight_bytes_per_param: float, act: DType = DType.BF16,
                kv_bytes_per_element: float = 2.0,
                overlap: bool = True) -> tuple[LayoutCost, list[LayoutCost]]:
    """(the fastest layout whose fullest chip fits, or the one of least memory if none
    does; every layout's cost, in the file's order). `overlap` False: the layouts that
    serialize their collectives only."""
    costs = [layout_cost(cfg, chip, chips, name, batch, tokens, context,
                         weight_bytes_per_param, act, kv_bytes_per_element)
             for name, lay in layouts().items() if overlap or not lay.overlap]  # fmt: skip
    fitting = [c for c in costs if c.total_bytes <= chip.capacity_bytes]
    if fitting:
        return min(fitting, key=lambda c: c.step_s), costs
    return min(costs, key=lambda c: c.total_bytes), costs
