"""Serving engines as named profiles (engines.toml, each figure with its source): the host
time of a step, the scheduling policy, the limits an engine starts with on a chip, the
CUDA-graph sizes that pad a step, the KV block, how the KV cache's memory is read and the
kernels of its own that measured tables price (cost/kernel_tables.py). What
`serve --engine NAME` runs unless an option says otherwise."""

from __future__ import annotations

import math
import re
import tomllib
from bisect import bisect_left
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xpusim.errors import UserError, closest
from xpusim.hardware.spec import base_id
from xpusim.ir.dtypes import DType
from xpusim.run_options import MOE_BACKENDS
from xpusim.workloads.checkpoint import AUTO_KV_FORMAT
from xpusim.workloads.transformer import FUSED_SHARED_EXPERT

if TYPE_CHECKING:
    from collections.abc import Callable

    from xpusim.workloads.transformer_config import TransformerConfig

DATA = Path(__file__).with_name("engines.toml")
GIB = 2**30
MIB = 2**20
POLICIES = ("decode-first", "prefill-first", "inflight", "continuous")
GRAPH_PADS = ("tokens", "decode", "none")  # engines.toml's graph_pad, and serve's --graph-pad
MEMORY_RULES = ("total", "free", "static")
DP_CHUNK_RULES = ("", "per-rank", "half", "each")
EAGER_ALWAYS, EAGER_DP = "all", "dp-attention"  # engines.toml eager_prefill's rules, beside vendors
KV_AUTO_RULES = ("compute", "model", "modelopt")  # engines.toml kv_auto
MEMORY_TOTALS = ("runtime", "driver")  # engines.toml memory_total


@dataclass(frozen=True)
class Limits:
    """An engine's defaults on one chip."""

    token_budget: int
    max_batch: int
    graph_max: int  # the largest captured size (0: no graphs)


@dataclass(frozen=True)
class MoeDefault:
    """engines.toml moe_backend_default: a MoE backend the engine picks by itself (its
    `--moe-runner-backend auto`) for a model's routed experts on some chips, which a run
    that names no --moe-backend takes, as the engine would."""

    backend: str  # run_options.MOE_BACKENDS: whose measured tables price the experts
    chips: tuple[str, ...]  # catalog ids (a what-if copy: its base chip's)
    model_types: tuple[str, ...]  # the config's model_type (the engine checks its architecture)
    weights: tuple[str, ...]  # the routed experts' stored formats (run's weight format)

    @classmethod
    def of(cls, fields: dict[str, Any]) -> MoeDefault:
        keys = {"backend", "chips", "model_types", "weights"}
        if set(fields) != keys:
            raise ValueError(f"moe_backend_default keys {sorted(fields)}: want {sorted(keys)}")
        return cls(str(fields["backend"]), tuple(fields["chips"]),
                   tuple(fields["model_types"]), tuple(fields["weights"]))  # fmt: skip

    def applies(self, chip_id: str, model_type: str, weight: str) -> bool:
        return (base_id(chip_id) in self.chips and model_type in self.model_types
                and weight in self.weights)  # fmt: skip


@dataclass(frozen=True)
class ReserveRule:
    """engines.toml admit_reserve: the figures of SGLang's admission rule, from its code
    (data here, as every profile field; serving/admission.py applies it)."""

    clip_tokens: int  # SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION
    ratio_init: float  # SGLANG_INIT_NEW_TOKEN_RATIO x schedule_conservativeness
    ratio_min_factor: float  # SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR, of ratio_init
    decay_steps: int  # SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS
    retract_decode_steps: int  # SGLANG_RETRACT_DECODE_STEPS
    dp_attention_factor: float  # what --enable-dp-attention multiplies conservativeness by

    @classmethod
    def of(cls, fields: dict[str, Any]) -> ReserveRule:
        return cls(int(fields["clip_tokens"]), float(fields["ratio_init"]),
                   float(fields["ratio_min_factor"]), int(fields["decay_steps"]),
                   int(fields["retract_decode_steps"]),
                   float(fields["dp_attention_factor"]))  # fmt: skip

    def under_dp_attention(self) -> ReserveRule:
        """server_args.py _handle_data_parallelism: schedule_conservativeness x 0.3, so the
        ratio starts (and ends) 0.3 times as high."""
        return replace(self, ratio_init=min(self.ratio_init * self.dp_attention_factor, 1.0))

    @property
    def ratio_min(self) -> float:
        return min(self.ratio_init * self.ratio_min_factor, 1.0)

    @property
    def decay(self) -> float:
        """What new_token_ratio loses a decode step."""
        return (self.ratio_init - self.ratio_min) / self.decay_steps


@dataclass(frozen=True)
class EngineProfile:
    name: str
    version: str
    about: str
    per_iteration_s: float
    per_sequence_s: float
    overlapped: bool  # host work for the next iteration runs while the device runs this one
    source: str
    policy: str
    limits: tuple[dict[str, Any], ...]
    limits_source: str
    graph_pad: str
    graph_sizes: tuple[tuple[int, int, int], ...]
    graph_source: str
    kv_block: int
    kv_block_source: str
    memory: str
    memory_fraction: float
    memory_source: str
    small_chips: tuple[str, ...] = ()
    graph_max: int = 0
    graph_max_per_batch: int = 0
    reserved_base_mib: float = 0.0
    reserved_per_chunk_token_mib: float = 0.0
    reserved_per_graph_batch_mib: float = 0.0
    reserved_per_eighth_rank_mib: float = 0.0  # x tp x pp / 8
    # under attention DP: per captured batch and attention-DP rank, and that much more per
    # batch and rank where the largest captured batch is over reserved_dp_large_graph_above
    reserved_per_dp_graph_batch_mib: float = 0.0
    reserved_per_dp_large_graph_batch_mib: float = 0.0
    reserved_dp_large_graph_above: int = 0
    reserved_floor_mib: float = 0.0
    # more reserved under speculative decoding (the draft's weights and graphs), same rule
    reserved_speculative_mib: float = 0.0
    kv_short: str = ""  # what the engine does where its KV pool cannot hold a request
    kv_short_source: str = ""
    # what it does where nothing is left for a pool at all, if not kv_short (its start fails)
    kv_none: str = ""
    kv_none_source: str = ""
    sampler_bytes_per_logit: float = 0.0  # its profiling run's dummy sampler, at its peak
    sampler_source: str = ""
    dp_attention_chunk: str = ""  # DP_CHUNK_RULES: how attention DP splits a step's prefill
    dp_attention_source: str = ""
    base: str = ""  # the profile whose fields it writes over (engines.toml `base`; lineage)
    kernels: tuple[str, ...] = ()  # its own kernels, by their tables' `kernel` names
    kernels_source: str = ""
    # host time per sequence of an attention-DP rank, under attention DP only (engines.toml)
    dp_attention_per_rank_sequence_s: float = 0.0
    dp_attention_host_source: str = ""

    nvidia_only: tuple[str, ...] = ()  # of `kernels`, those it runs on NVIDIA GPUs alone
    nvidia_only_source: str = ""
    amd_only: tuple[str, ...] = ()  # of `kernels`, those it runs on AMD GPUs alone
    amd_only_source: str = ""
    # of `kernels`, those it runs on the chips listed (by id) alone: (kernel, chips)
    chips_only: tuple[tuple[str, tuple[str, ...]], ...] = ()
    chips_only_source: str = ""
    # where it lists fused-shared-expert: the models (by model_type and routed experts, with
    # one shared expert as wide as one of them), the chips' vendors, and not under expert
    # parallelism nor the MoE backends listed, whose shared expert its routed kernel runs
    fused_shared_expert_models: tuple[str, ...] = ()
    fused_shared_expert_routed: tuple[int, ...] = ()
    fused_shared_expert_vendors: tuple[str, ...] = ()
    fused_shared_expert_off_moe: tuple[str, ...] = ()
    fused_shared_expert_source: str = ""
    # the MoE backend the engine picks by itself where a run names none (MoeDefault)
    moe_backend_default: tuple[MoeDefault, ...] = ()
    moe_backend_default_source: str = ""
    # the steps whose shared experts run on the second stream (kernel shared-experts-stream):
    # at most this many tokens (0: any), decode steps alone if decode_only, and graphed
    # decode steps of any size if graphed_any (the token limit then for the others)
    aux_stream_max_tokens: int = 0
    aux_stream_decode_only: bool = False
    aux_stream_graphed_any: bool = False
    aux_stream_source: str = ""

    eager_prefill: tuple[str, ...] = ()  # where a step with prompt tokens runs without graphs
    eager_launch_s: float = 0.0  # host time per op launched one by one (0: not measured)
    mla_graph_max_tokens: int = 0  # where prefill is graphed: the most tokens a step of an
    # MLA model may have to run in the graphs, larger ones eager (0: no bound modelled)
    eager_source: str = ""
    # model_types (workloads/transformer_config) whose prompt steps the engine never graphs,
    # whatever the chip: its own list of architectures its graphs do not support
    eager_models: tuple[str, ...] = ()
    eager_models_source: str = ""

    # chips (by id) on which the engine's dense block-FP8 GEMMs are a Triton kernel
    # specialized on the step's token count: each step with prompt tokens whose count
    # falls in a bucket of jit_bucket_tokens not met before compiles every distinct GEMM
    # shape once, jit_compile_s each, on the host before the step runs (engines.toml)
    jit_gemm: tuple[str, ...] = ()
    jit_bucket_tokens: int = 0
    jit_compile_s: float = 0.0
    jit_source: str = ""

    # chips (by id) on which the decode attention kernel runs without split-KV (TensorRT-LLM's
    # multi_block_mode off): one thread block per sequence and KV head, each streaming its
    # head's cache at most this many bytes a second (engines.toml unsplit_decode)
    unsplit_decode: tuple[tuple[str, float], ...] = ()
    unsplit_decode_source: str = ""

    # time each request spends outside the engine's steps (HTTP, chat template,
    # tokenization, the hops to the scheduler, detokenizing and streaming the first token),
    # a delay every request pays before its prompt can be scheduled (engines.toml frontend_s)
    frontend_s: float = 0.0
    frontend_source: str = ""
    # time one API server process spends on each output token it streams (detokenizing,
    # building and writing the chunk), beside the engine (engines.toml frontend_token_s)
    frontend_token_s: float = 0.0
    frontend_token_source: str = ""
    # where set, requests' sampler penalties run as this engine's code runs them
    # (workloads/transformer.py SAMPLER_PENALTIES; serve's --penalties); "": not modelled
    penalties_source: str = ""
    # the KV cache's format where a run names its matmuls' (--precision) and not the cache's,
    # and no checkpoint declares one (engines.toml kv_auto): KV_AUTO_RULES
    kv_auto: str = "compute"
    kv_auto_source: str = ""
    # (ranks, GiB): what the engine's process holds beside its weights, activations and KV
    # cache when it sizes the pool, measured at that many ranks (engines.toml runtime_gib)
    runtime_gib: tuple[tuple[int, float], ...] = ()
    runtime_source: str = ""
    # the total its fraction multiplies: "runtime" (CUDA's: Chip.runtime_capacity_bytes) or
    # "driver" (the catalog's whole capacity, as xpusim run fits a chip)
    memory_total: str = "runtime"
    # where set, a new prompt is admitted only within what the running requests' remaining
    # outputs leave of the KV cache (SGLang's PrefillAdder: serving/admission.py)
    admit_reserve: ReserveRule | None = None
    admit_reserve_source: str = ""
    # the engine's releases it stands for, first and last inclusive ("" last: every later
    # one); () where not stated (engines.toml releases; release_profile reads them)
    releases: tuple[str, ...] = ()
    # on Google's TPUs every step's tokens pad to powers of two from this size up to the
    # token budget, its XLA programs' sizes (engines.toml tpu_token_min); 0: not stated
    tpu_token_min: int = 0
    tpu_token_source: str = ""
    # on Google's TPUs under attention DP, new requests are held until as many as the
    # engine's DP ranks pend, this long has passed since the last release, or as many ranks
    # are idle as requests pend (engines.toml tpu_dp_prefill_timeout_s; serve's
    # --dp-prefill-batch gives the ranks); 0: no such gate
    tpu_dp_prefill_timeout_s: float = 0.0
    tpu_dp_prefill_source: str = ""

    def decode_block_bytes_per_s(self, chip_id: str) -> float:
        """The bytes a second one thread block of the engine's decode attention streams of
        its sequence's cache on chip `chip_id`, where the kernel gives each (sequence, KV
        head) one block; 0: the kernel splits a sequence's keys over blocks (split-KV,
        flash-decoding), or the chip's figure is not measured. A what-if copy keeps its
        base chip's kernel and SMs, so changing a figure never drops the floor."""
        return dict(self.unsplit_decode).get(base_id(chip_id), 0.0)

    def jit_on(self, chip_id: str) -> bool:
        """Whether the engine's dense block-FP8 GEMMs compile per token bucket on chip
        `chip_id` (engines.toml jit_gemm); a what-if copy keeps its base chip's kernels."""
        return base_id(chip_id) in self.jit_gemm

    def kernels_on(self, vendor: str, cfg: TransformerConfig | None = None, ep: int = 1,
                   moe_backend: str = "", chip_id: str = "") -> tuple[str, ...]:  # fmt: skip
        """Its kernels on chip `chip_id` of `vendor` (the catalog's): those it runs on NVIDIA
        or AMD GPUs alone left out on others, those it runs on some chips alone (chips_only;
        a what-if copy: its base chip's) left out elsewhere, and its fused shared expert where
        it does not fuse model `cfg`'s at expert parallelism `ep` under `moe_backend`."""
        fused = cfg is not None and self.fuses_shared_expert(cfg, vendor, ep, moe_backend)
        chips, base = dict(self.chips_only), base_id(chip_id)
        return tuple(k for k in self.kernels
                     if (vendor == "NVIDIA" or k not in self.nvidia_only)
                     and (vendor == "AMD" or k not in self.amd_only)
                     and base in chips.get(k, (base,))
                     and (k != FUSED_SHARED_EXPERT or fused))  # fmt: skip

    def default_moe_backend(self, chip_id: str, model_type: str, weight: str) -> str:
        """The MoE backend it picks by itself for a model of `model_type` whose routed
        experts are stored as `weight` on chip `chip_id` (moe_backend_default), or "" (the
        default's tables: TensorRT-LLM's CUTLASS)."""
        return next((r.backend for r in self.moe_backend_default
                     if r.applies(chip_id, model_type, weight)), "")  # fmt: skip

    def fuses_shared_expert(self, cfg: TransformerConfig, vendor: str, ep: int,
                            moe_backend: str) -> bool:  # fmt: skip
        """Whether its routed MoE kernel runs model `cfg`'s shared expert as one more expert
        (SGLang's determine_num_fused_shared_experts; engines.toml fused_shared_expert_*):
        one ungated shared expert as wide as a routed one, a listed architecture (model_type:
        SGLang checks architectures[0]) and count of routed experts, a listed vendor, no
        expert parallelism, a MoE backend not listed."""
        return (FUSED_SHARED_EXPERT in self.kernels and cfg.is_moe
                and cfg.model_type in self.fused_shared_expert_models
                and cfg.num_experts in self.fused_shared_expert_routed
                and cfg.shared_expert_width == cfg.expert_width and not cfg.shared_expert_gate
                and vendor in self.fused_shared_expert_vendors and ep == 1
                and moe_backend not in self.fused_shared_expert_off_moe)  # fmt: skip

    def aux_stream_tokens(self) -> tuple[int | None, int | None]:
        """The most tokens a step may have for its shared experts to overlap the routed
        ones (cost/aux_stream.py), for steps costed from the prefill graph (prompt chunks,
        alone or beside decodes) and for decode-only steps; None: any."""
        most = self.aux_stream_max_tokens or None
        return (0 if self.aux_stream_decode_only else most), \
            (None if self.aux_stream_graphed_any else most)

    def host_s(self, sequences: int, dp_ranks: int = 1) -> float:
        """Host time of an iteration over `sequences` (the replica's, all its ranks'):
        under attention data parallelism over `dp_ranks` ranks an engine may loop over each
        rank's requests on that rank's host process every iteration (TensorRT-LLM's
        per-request sampler update), all ranks at once, so the iteration waits for the
        busiest rank's: dp_attention_per_rank_sequence_s a sequence of it."""
        host = self.per_iteration_s + self.per_sequence_s * sequences
        if dp_ranks > 1:
            host += self.dp_attention_per_rank_sequence_s * math.ceil(sequences / dp_ranks)
        return host

    def exposed_s(self, sequences: int, device_s: Any, dp_ranks: int = 1,
                  streamed: float = 0.0, api_servers: float = 1.0,
                  maximum: Callable[[Any, Any], Any] = max) -> Any:  # fmt: skip
        """Host time the device waits for in an iteration that keeps it busy device_s and
        streams `streamed` chunks (one a sequence making tokens). The API server streams
        them in its own process(es) while the engine runs on, so it is a stage beside the
        iteration, not in line with it: the iteration takes at least that stage's time,
        `api_servers` processes each streaming its share (a fraction of one where a
        replica's pp lanes share them; 0: the client calls the engine in-process, nothing
        streamed), as a client sees the engine when its front end is the slower (the engine
        core runs ahead only as far as its output queue lets it). Never negative. For many
        iterations of one size at once (Replica._skip), device_s an array and `maximum`
        np.maximum: the same IEEE operations on each."""
        host = self.host_s(sequences, dp_ranks)
        exposed = maximum(host - device_s, 0.0) if self.overlapped else host
        if not (api_servers and streamed and self.frontend_token_s):
            return exposed
        return maximum(exposed, self.frontend_token_s * streamed / api_servers - device_s)

    def kv_format(self, precision: str | None) -> str | None:
        """The format the engine stores the KV cache in for a run whose matmuls compute in
        `precision` and whose cache format nobody named (the user, or a checkpoint:
        workloads/checkpoint.py fills that in first); None: the matmuls' own.

        "model": the model's 16-bit dtype (AUTO_KV_FORMAT) beside any narrower precision
        (vLLM's, SGLang's and ATOM's default KV dtype beside their --quantization fp8);
        "modelopt": FP8 beside 4-bit matmuls, as NVIDIA's quantizer writes the checkpoints
        TensorRT-LLM serves by default; "compute": the matmuls' format, as `xpusim run`
        reads --precision."""
        if precision is None or self.kv_auto == "compute":
            return None
        bits = DType.parse(str(precision)).bits
        if self.kv_auto == "model":
            return AUTO_KV_FORMAT if bits < 16 else None
        return "fp8" if bits < 8 else None

    def eager_rule(self, vendor: str, dp_attention: bool, model_type: str = "") -> str:
        """Which engines.toml rule has the engine run a step with prompt tokens without a
        CUDA graph on a chip of `vendor` (under attention data parallelism where
        `dp_attention`) for a model of `model_type`: "eager_prefill" (always, on that
        vendor's chips, or under attention DP), "eager_models" (an architecture its graphs
        leave out), or "" where none does."""
        rules = self.eager_prefill
        if EAGER_ALWAYS in rules or vendor in rules or (dp_attention and EAGER_DP in rules):
            return "eager_prefill"
        return "eager_models" if rules and model_type in self.eager_models else ""

    def eager_on(self, vendor: str, dp_attention: bool, model_type: str = "") -> bool:
        """Whether any rule has such a step run without a CUDA graph (eager_rule)."""
        return bool(self.eager_rule(vendor, dp_attention, model_type))

    def graphed_up_to(self, mla: bool) -> int:
        """Where the engine graphs steps with prompt tokens: the most tokens such a step may
        have to run in its graphs, a larger one running eagerly; 0: any step. SGLang bounds
        its piecewise graphs at 2,048 tokens under an MLA attention backend and at its chunk
        size (no step is larger) otherwise (engines.toml mla_graph_max_tokens)."""
        return self.mla_graph_max_tokens if mla else 0

    def limits_on(self, chip_id: str, memory_bytes: float, tp: int = 1) -> Limits:
        """The defaults the engine picks on a chip of `memory_bytes` (its tier) at `tp`."""
        gib = memory_bytes / GIB
        small = any(chip_id.startswith(prefix) for prefix in self.small_chips)
        row = next(r for r in self.limits
                   if "below_gib" not in r or gib < r["below_gib"]
                   or (small and r is not self.limits[-1]))  # fmt: skip
        graph = row.get("graph_max_tp4", row.get("graph_max", self.graph_max)) if tp >= 4 \
            else row.get("graph_max", self.graph_max)
        if self.graph_max_per_batch:
            graph = min(graph, self.graph_max_per_batch * row["max_batch"])
        return Limits(row["token_budget"], row["max_batch"], graph if self.graph_sizes else 0)

    def captured(self, graph_max: int) -> list[int]:
        """The captured sizes up to graph_max, ascending."""
        sizes = {n for first, last, step in self.graph_sizes
                 for n in range(first, last + 1, step) if n <= graph_max}  # fmt: skip
        return sorted(sizes)

    def tpu_buckets(self, vendor: str, token_budget: int) -> list[int]:
        """The token counts a step pads to on this vendor's chips where the engine compiles
        one program per size (Google's TPUs: tpu_token_min doubling until one covers the
        token budget, every step padded); [] elsewhere, where its CUDA-graph sizes apply."""
        if vendor != "Google" or not self.tpu_token_min:
            return []
        sizes = [self.tpu_token_min]
        while sizes[-1] < token_budget:
            sizes.append(2 * sizes[-1])
        return sizes

    def padded(self, n: int, sizes: list[int]) -> int:
        """The captured size a step of n runs at: the next one up, or n past the largest."""
        i = bisect_left(sizes, n)
        return sizes[i] if i < len(sizes) else n

    def prefill_split(self, token_budget: int, ranks: int) -> tuple[int, int]:
        """(a step's prefill tokens, one prompt chunk's most) under attention data
        parallelism over `ranks`, for the token budget the engine is given: each rank's
        scheduler prefills its own requests within its share of it. "per-rank": the budget
        is the whole step's, each rank a 1/ranks share (SGLang 0.4.4+); "half": each rank
        half of it, the step ranks times that (SGLang 0.4.0-0.4.3); "each": the budget is
        each rank's own, the step ranks times it (TensorRT-LLM, whose every rank runs its
        own scheduler); none: one chunk may take the whole budget (a rank's prompt runs on
        one chip either way, step_cost.py)."""
        if ranks <= 1 or not self.dp_attention_chunk:
            return token_budget, token_budget
        share = {"per-rank": token_budget // ranks, "half": token_budget // 2,
                 "each": token_budget}  # fmt: skip
        per_rank = max(share[self.dp_attention_chunk], 1)
        return per_rank * ranks, per_rank

    def sampler_peak_bytes(self, sequences: int, vocab: int) -> float:
        """Memory the engine's profiling run holds when it samples one token for each of
        `sequences` dummy requests over the whole vocabulary (every tensor-parallel rank
        gathers all of it). vLLM V1 measures its activations' peak over this run and the
        forward before it, and leaves the KV cache what is left; the forward's peak is the
        step's (shape_graphs), this the sampler's, and the larger of the two counts."""
        return self.sampler_bytes_per_logit * sequences * vocab

    def kv_bytes(self, fraction: float | None, capacity: float, weights: float,
                 activations: float, token_budget: int, graph_max: int, ranks: int,
                 dp_ranks: int = 1, speculative: bool = False, *,
                 runtime_total: float) -> float:  # fmt: skip
        """Bytes of one chip's memory the KV cache gets, as the engine reads its fraction;
        `fraction` 0 asks SGLang's rule for it (see engines.toml), whose reserve grows with
        the `ranks` (tp x pp), the attention-DP ranks and speculative decoding.

        `capacity` is the driver's total (what SGLang's rule reads from nvidia-smi),
        `runtime_total` the total the fractions multiply (CUDA's, or the driver's where the
        profile's memory_total says so); runtime_bytes(ranks) is what the engine's process
        holds beside its weights and activations when it sizes the pool (engines.toml
        runtime_gib)."""
        held = self.runtime_bytes(ranks)
        if self.memory == "free":
            return fraction * (runtime_total - held - weights - activations)
        if self.memory == "static":
            if not fraction:
                fraction = self.static_fraction(capacity, token_budget, graph_max, ranks,
                                                dp_ranks, speculative)  # fmt: skip
            return fraction * (runtime_total - held) - weights
        return fraction * runtime_total - weights - activations - held

    def runtime_bytes(self, ranks: int) -> float:
        """Bytes a chip's process holds outside its weights, activations and KV cache when
        the engine sizes its pool, at `ranks` (tp x pp) ranks: the engine's figure for the
        most ranks it was measured at, up to `ranks` (engines.toml runtime_gib)."""
        measured = [gib for at, gib in self.runtime_gib if at <= ranks]
        return measured[-1] * GIB if measured else 0.0

    @property
    def draft_in_budget(self) -> bool:
        """Whether a speculative draft's weights and KV come out of the target's KV budget:
        vLLM, ATOM and TensorRT-LLM load it before they size the cache, and size the cache
        with its layers (engines.toml's memory comment); SGLang's target sizes its pool from
        its fraction and its own layers before its draft worker loads (the static rule)."""
        return self.memory != "static"

    def static_fraction(self, capacity: float, token_budget: int, graph_max: int,
                        ranks: int, dp_ranks: int = 1,
                        speculative: bool = False) -> float:  # fmt: skip
        """SGLang's default mem_fraction_static: what its reserve for activations and graph
        buffers (more under attention DP over `dp_ranks`, and under speculative decoding
        the draft's) leaves of the memory. `ranks`: tp x pp, as SGLang counts them (its
        expert parallelism runs within tp)."""
        reserved = (self.reserved_base_mib
                    + self.reserved_per_chunk_token_mib * max(token_budget, 2048)
                    + self.reserved_per_graph_batch_mib * graph_max
                    + self.reserved_per_eighth_rank_mib * ranks / 8)  # fmt: skip
        if dp_ranks > 1:  # --enable-dp-attention: its dp_size, the attention-DP ranks
            reserved += self.reserved_per_dp_graph_batch_mib * graph_max * dp_ranks
            if graph_max > self.reserved_dp_large_graph_above:
                reserved += self.reserved_per_dp_large_graph_batch_mib * graph_max * dp_ranks
        mib = capacity / MIB
        if mib > 60 * 1024:
            reserved = max(reserved, self.reserved_floor_mib)
        if speculative:  # added after the floor, as SGLang adds it
            reserved += self.reserved_speculative_mib
        return max(mib - reserved, 0.0) / mib


def _own_fields(data: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
    """A profile's fields as engines.toml gives them, over those of the profile it names as
    its `base` (a later release of the same engine: only what changed is written, each
    with its source)."""
    fields = dict(data[name])
    base = fields.pop("base", None)
    return {**_own_fields(data, base), **fields} if base else fields


def lineage(name: str) -> tuple[str, ...]:
    """A profile and the releases it is written over (engines.toml `base`), newest first:
    what a measurement of an older release says of a newer one goes through this."""
    base = engine(name).base
    return (name, *lineage(base)) if base else (name,)


@cache
def engines() -> dict[str, EngineProfile]:
    data = tomllib.loads(DATA.read_text())
    found = {}
    for name in data:
        fields = _own_fields(data, name)
        fields = {**fields, "base": data[name].get("base", ""), "limits": tuple(fields["limits"]),
                  "graph_sizes": tuple(tuple(r) for r in fields["graph_sizes"]),
                  "small_chips": tuple(fields.get("small_chips", ())),
                  "kernels": tuple(fields.get("kernels", ())),
                  "eager_prefill": tuple(fields.get("eager_prefill", ())),
                  "eager_models": tuple(fields.get("eager_models", ())),
                  "releases": tuple(fields.get("releases", ())),
                  "jit_gemm": tuple(fields.get("jit_gemm", ())),
                  "nvidia_only": tuple(fields.get("nvidia_only", ())),
                  "amd_only": tuple(fields.get("amd_only", ())),
                  "chips_only": tuple((k, tuple(v)) for k, v in
                                      sorted(fields.get("chips_only", {}).items())),
                  **{k: tuple(fields.get(k, ())) for k in (
                      "fused_shared_expert_models", "fused_shared_expert_routed",
                      "fused_shared_expert_vendors",
                      "fused_shared_expert_off_moe")},
                  "unsplit_decode": tuple(sorted(fields.get("unsplit_decode", {}).items())),
                  "runtime_gib": tuple(sorted((int(k), float(v)) for k, v in
                                              fields.get("runtime_gib", {}).items())),
                  "moe_backend_default": tuple(MoeDefault.of(r) for r in
                                               fields.get("moe_backend_default", ())),
                  "admit_reserve": (ReserveRule.of(fields["admit_reserve"])
                                    if "admit_reserve" in fields else None),
                  }  # fmt: skip
        profile = EngineProfile(name, **fields)
        assert profile.policy in POLICIES and profile.graph_pad in GRAPH_PADS \
            and profile.memory in MEMORY_RULES \
            and profile.dp_attention_chunk in DP_CHUNK_RULES \
            and (profile.eager_launch_s > 0) == bool(profile.eager_prefill) \
            and bool(profile.eager_models_source) == bool(profile.eager_models) \
            and (bool(profile.eager_prefill) or not profile.eager_models) \
            and (profile.eager_launch_s > 0 or not profile.mla_graph_max_tokens) \
            and (profile.jit_compile_s > 0) == bool(profile.jit_gemm) \
            == (profile.jit_bucket_tokens > 0) == bool(profile.jit_source) \
            and all(rate > 0 for _, rate in profile.unsplit_decode) \
            and bool(profile.unsplit_decode_source) == bool(profile.unsplit_decode) \
            and profile.frontend_s >= 0 and bool(profile.frontend_source) \
            and profile.frontend_token_s >= 0 \
            and bool(profile.frontend_token_source) == (profile.frontend_token_s > 0) \
            and bool(profile.admit_reserve_source) == (profile.admit_reserve is not None) \
            and len(profile.releases) in (0, 2) \
            and (profile.tpu_token_min > 0) == bool(profile.tpu_token_source) \
            and (profile.tpu_dp_prefill_timeout_s > 0) == bool(profile.tpu_dp_prefill_source) \
            and bool(profile.kv_short) and bool(profile.kv_short_source) \
            and bool(profile.kv_none) == bool(profile.kv_none_source) \
            and profile.kv_auto in KV_AUTO_RULES and bool(profile.kv_auto_source) \
            and all(gib >= 0 for _, gib in profile.runtime_gib) \
            and profile.memory_total in MEMORY_TOTALS \
            and bool(profile.runtime_source) \
            and all(k in profile.kernels for k, _ in profile.chips_only) \
            and bool(profile.chips_only_source) == bool(profile.chips_only) \
            and bool(profile.moe_backend_default_source) == bool(profile.moe_backend_default) \
            and all(r.backend in MOE_BACKENDS for r in profile.moe_backend_default) \
            and (FUSED_SHARED_EXPERT in profile.kernels) \
            == bool(profile.fused_shared_expert_models) \
            == bool(profile.fused_shared_expert_routed) \
            == bool(profile.fused_shared_expert_vendors) \
            == bool(profile.fused_shared_expert_source), name
        found[name] = profile
    return found


def _release(text: str) -> tuple[int, ...]:
    """A release's first three numbers: "0.5.6.post2" -> (0, 5, 6), "v0.5.12-cu130" ->
    (0, 5, 12), "0.5.8+" -> (0, 5, 8)."""
    return tuple(int(n) for n in re.findall(r"\d+", text)[:3])


def release_profile(family: str, release: str) -> str:
    """The profile of engine `family` (it and the profiles written over it, engines.toml
    `base`) whose `releases` hold `release` ("0.5.7", "v0.5.6.post2"): where a source
    names the release it ran, the one place that says which profile stands for it."""
    wanted = _release(release)
    for name, profile in engines().items():
        if family not in lineage(name) or not profile.releases:
            continue
        first, last = profile.releases
        if _release(first) <= wanted and (not last or wanted <= _release(last)):
            return name
    stated = ", ".join(f"{n} {'-'.join(p.releases)}" for n, p in engines().items()
                       if family in lineage(n) and p.releases)  # fmt: skip
    raise UserError(f"no {family} profile stands for release {release!r} "
                    f"(profiles by release: {stated or 'none stated'})")  # fmt: skip


def engine(name: str) -> EngineProfile:
    found = engines().get(name)
    if found is None:
        raise UserError(f"unknown engine {name!r}{closest(name, engines())}")
    return found
