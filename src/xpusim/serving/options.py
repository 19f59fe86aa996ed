"""Serving's settings, each declared once: a dataclass field whose metadata the command line
reads (cli_serve.py builds `xpusim serve`'s options from Load's, Engine's and Search's
fields), so the API's keywords and the CLI's flags cannot drift apart. Light on purpose:
`xpusim --help` imports this module, and nothing here imports numpy."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xpusim.errors import UserError, check_positive, closest
from xpusim.workloads.defaults import GEN_TOKENS, PROMPT_TOKENS

PATH = "path"  # an option naming a file
FINDS = ("max-rate", "min-chips", "pd-split", "offline")
TRIALS = ("full", "verdict", "decided")  # Search.trials: serving/verdict.py, decision.py
UNTIL = ("end", "steady")  # Search.until: serving/steady.py
SCHEDULERS = ("static", "continuous", "chunked", "decode-first", "prefill-first", "inflight")
SPECULATIVE_HEADS = ("mtp", "eagle")
SGLANG_05 = ("sglang", "sglang-0.5.6")  # the profiles of SGLang 0.5's launch options
VLLM_V1 = ("vllm", "vllm-0.11")  # vLLM V1's, its compilation passes among them


MAX_SPAN_S = 1e9
"""The longest a load may last (31 years): float64 seconds resolve a 1 us engine step at 1e9
s to within 2e-7 s, and no finer (serving/load.py refuses traces longer)."""
MAX_KV_BLOCK = 2**16
"""Tokens one KV-cache block may hold, far past what engines use: vLLM's --block-size takes
8, 16 or 32 (engine arguments, v0.5-0.6), 64 and 128 since vllm-project/vllm#11259 (CUDA
kernels up to 32); TensorRT-LLM takes any power of two above 1 (its "KV Cache System"
page). A block longer than any request only wastes memory, and one of 2^40 tokens rounded a
whole H100's cache down to no block at all."""
MAX_REQUESTS = 10**6
"""The most requests one run serves: about three minutes on one core (10,000 take 1.6-2.5 s,
benchmarks/bench_serve.py, 2026-12-01, so 10^6 is derived, not run), and per-request columns
of 72 MB (9 float64s each) beside the simulator's own per-request objects. Percentiles settle
long before: a sample of a longer trace (--requests N takes its first N) serves."""


REQUESTS = 500
"""Load.requests' default for an open loop or a few clients (default_requests)."""
REQUESTS_PER_CLIENT = 8
"""Load.requests' default per client of a closed loop of more than REQUESTS / 8 clients."""


def default_requests(concurrency: object, base: int = REQUESTS) -> int:
    """Load.requests' default: `base`, or REQUESTS_PER_CLIENT per client of a closed loop
    where that is more (`plan`'s simulations use a smaller base, planning/search.py).

    A closed loop's clients all send their first request at once, so a fixed count would
    make a large concurrency's run that one burst (Llama-3-8B on 8 H100 under vLLM, 1,000 ->
    1,000 tokens, 512 clients: mean TTFT 1.8 s at 500 requests, 0.21 s at 4,096), which is
    not what a benchmark of that concurrency reports: its clients go round many times
    (InferenceX's scripts send 10 per client, `--num-prompts $((CONC * 10))`). Eight per
    client, a tenth of them the default warm-up, is what validation runs for a source that
    states no count (validation/adapters.py, at least 100), so above 62 clients `serve` and
    `validate` run the same count; below, serve's 500 are more rounds than validation's.
    Not a count yet where the concurrency is not a positive integer: Load's checks name
    that field."""
    if isinstance(concurrency, int) and not isinstance(concurrency, bool) and concurrency > 0:
        return min(max(base, REQUESTS_PER_CLIENT * concurrency), MAX_REQUESTS)
    return base


MOE_INPUTS = ("bf16", "mxfp8")
"""serve's --moe-input: the formats MXFP4 routed experts take their input in."""


def _one_of(name: str, value: str | None, choices: tuple[str, ...]) -> None:
    """Refuses a setting `name` given a value not among `choices`, naming the closest."""
    if value is not None and value not in choices:
        raise UserError(f"unknown {name} {value!r}{closest(value, choices)}")


def option(default: Any, help: str, type: Any) -> Any:
    return field(default=default, metadata={"help": help, "type": type})


@dataclass(frozen=True)
class Load:
    concurrency: int | None = option(None, "Closed loop: clients, each sending its next "
                                      "request when its last finishes.", type=int)
    rate: float | None = option(None, "Open loop: requests/s arriving (Poisson, or gamma "
                                 "with --burstiness).", type=float)
    burstiness: float = option(1.0, "Gamma shape of the arrival gaps: 1 is Poisson, below 1 "
                                "burstier.", type=float)
    requests: int | None = option(None, "Requests to serve (default: 500, or 8 per client "
                                  "of --concurrency where that is more).", type=int)
    prompt: int = option(PROMPT_TOKENS, "Input tokens per request (the mean with --spread).",
                         type=int)  # fmt: skip
    gen: int = option(GEN_TOKENS, "Output tokens per request (the mean with --spread).",
                      type=int)  # fmt: skip
    spread: float = option(0.0, "Lengths uniform in [L(1-s), L(1+s)] (vLLM's random "
                            "range ratio).", type=float)
    seed: int = option(0, "Seed of arrivals and lengths.", type=int)
    trace: Path | None = option(None, "Replay a JSONL or CSV trace: arrival time, input "  # noqa: RUF009
                                 "tokens, output tokens (Azure's columns accepted).",
                                 type=PATH)

    lengths: Path | None = option(None, "Draw each request's lengths from a CSV or JSONL of "  # noqa: RUF009
                                  "input tokens (and output tokens; else --gen) per row.",
                                  type=PATH)
    scale_gen: bool = option(False, "With --lengths of output tokens: scale them to a mean "
                             "of --gen, the file's shape at a run's own tokens per request "
                             "(a dataset's reference outputs, a run's generated mean).",
                             type=bool)  # fmt: skip

    hold_s: float | None = option(None, "A harness batching arrivals: each request waits "
                                  "until --hold-batch are queued or this long has passed since "
                                  "the last dispatch, and each batch goes whole to one replica "
                                  "in turn (AMD's MLPerf harness, --enable-batcher).",
                                  type=float)  # fmt: skip
    hold_batch: int = option(96, "With --hold-s: the most requests one dispatch sends.",
                             type=int)  # fmt: skip

    def __post_init__(self) -> None:
        if self.hold_s is not None:
            if not (_number(self.hold_s) and self.hold_s > 0):
                raise UserError(f"hold-s must be a positive number of seconds, got {self.hold_s!r}")
            if self.concurrency is not None:
                raise UserError("--hold-s batches arrivals: give --rate or --trace, not "
                                "--concurrency")  # fmt: skip
            check_positive(hold_batch=self.hold_batch)
        if self.lengths is not None and self.trace is not None:
            raise UserError("a trace has its own lengths: give --trace or --lengths, not both")
        if self.scale_gen and self.lengths is None:
            raise UserError("--scale-gen scales a --lengths file's output tokens: give --lengths")
        given = [x is not None for x in (self.concurrency, self.rate, self.trace)]
        if sum(given) != 1:
            raise UserError("give exactly one of --concurrency, --rate and --trace")
        if self.rate is not None and not (_number(self.rate) and self.rate > 0):
            raise UserError(f"rate must be a positive number of requests/s, got {self.rate!r}")
        if not (_number(self.burstiness) and self.burstiness > 0):
            raise UserError(f"burstiness must be a positive number, got {self.burstiness!r}")
        if not (_number(self.spread) and 0 <= self.spread < 1):
            raise UserError(f"spread must be in [0, 1), got {self.spread!r}")
        if self.requests is None:  # frozen: the default is resolved once, here
            object.__setattr__(self, "requests", default_requests(self.concurrency))
        for name in ("prompt", "gen"):  # required: None is not "not given"
            if getattr(self, name) is None:
                raise UserError(f"{name} must be a positive integer, got None")
        check_positive(requests=self.requests, concurrency=self.concurrency, prompt=self.prompt,
                       gen=self.gen)  # fmt: skip
        if self.requests > MAX_REQUESTS:
            raise UserError(f"requests: {self.requests}; at most {MAX_REQUESTS:,} can be "
                            "served in one run")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise UserError(f"seed must be a non-negative integer, got {self.seed!r}")
        if self.rate is not None and self.requests / self.rate > MAX_SPAN_S:
            raise UserError(f"rate {self.rate:g}/s: {self.requests} requests would span "
                            f"{self.requests / self.rate:.3g} s; at most {MAX_SPAN_S:.0e} s "
                            "can be simulated")  # fmt: skip

    @property
    def closed(self) -> bool:
        return self.concurrency is not None


@dataclass(frozen=True)
class Engine:
    """How the engine runs: the scheduler and its limits, and the engine's host profile."""

    scheduler: str | None = option(None, "Scheduling policy (default: the engine's): "
                                    "decode-first (vLLM V1; alias chunked), prefill-first "
                                    "(SGLang, ATOM), inflight (TensorRT-LLM), continuous "
                                    "(vLLM V0), static.", type=str)
    engine: str = option("vllm", "Engine profile: vllm (V1 0.19, priced with that "
                          "release's kernels), vllm-0.11, sglang, sglang-0.5.6 (prefill "
                          "without graphs), sglang-0.4, trtllm, "
                          "trtllm-cpp, atom, vllm-v0, or ideal (no host time or padding: the "
                          "bound); serving/engines.toml.", type=str)  # fmt: skip
    max_batch: int | None = option(None, "Sequences per iteration (max_num_seqs; default: "
                                   "the engine's on this chip).", type=int)
    token_budget: int | None = option(None, "New tokens per iteration "
                                       "(max_num_batched_tokens; default: the engine's on "
                                       "this chip, whatever its KV cache leaves).", type=int)
    chunk: int | None = option(None, "Chunked prefill's largest chunk (default: the token "
                                "budget).", type=int)
    kv_block: int | None = option(None, "Tokens per KV-cache block (default: the "
                                  "engine's).", type=int)
    graph_sizes: str | None = option(None, "CUDA-graph batch sizes the engine captured, "
                                     "comma-separated (TensorRT-LLM's cuda_graph_config "
                                     "batch_sizes; default: the engine's).", type=str)
    graph_pad: str | None = option(None, "How a step pads up to a captured size: decode "
                                   "(decode-only steps' batch, each attention-DP rank's "
                                   "its own), tokens (every step's tokens) or none "
                                   "(TensorRT-LLM's enable_padding off; default: the "
                                   "engine's).", type=str)
    kv_blocks: int | None = option(None, "KV blocks per replica, instead of what memory "
                                   "leaves (vLLM's num_gpu_blocks_override).", type=int)
    kv_utilization: float | None = option(None, "The engine's memory fraction, read as "
                                           "it reads it: vLLM's gpu_memory_utilization, "
                                           "SGLang's mem_fraction_static, TensorRT-LLM's "
                                           "free_gpu_memory_fraction (default: the "
                                           "engine's).", type=float)
    decode_steps: int = option(1, "Decode iterations per schedule (vLLM V0's "
                               "--num-scheduler-steps): new prompts start only between runs "
                               "of this many; with --scheduler continuous.", type=int)
    recv_interval: int = option(1, "SGLang's --scheduler-recv-interval (with --engine "
                                "sglang): new requests reach "
                                "the scheduler after a prefill and then once every this "
                                "many decode iterations (1: every iteration).", type=int)
    cold_start: bool = option(False, "The engine's kernel caches start empty (a fresh "
                              "TRITON_CACHE_DIR): where it compiles its GEMMs for each "
                              "prompt step's token bucket (engines.toml jit_gemm), a step in "
                              "a bucket not met before waits for the compile (default: every "
                              "bucket compiled, a server warmed up).", type=bool)
    client_warmup: int = option(0, "With --cold-start: copies of its first prompt the client "
                                "sent before the run, --concurrency at a time, each wave "
                                "waited for (InferenceX's benchmark_serving --num-warmups, "
                                "no single test prompt), whose prompt steps compiled their "
                                "buckets: each wave's tokens, chunked by the token budget.",
                                type=int)
    eager_prefill: bool | None = option(None, "Whether steps with prompt tokens run without "
                                        "CUDA graphs, each taking at least the host's time "
                                        "to launch its ops one by one (SGLang's "
                                        "--disable-piecewise-cuda-graph; default: the "
                                        "engine's rule for the chip, engines.toml "
                                        "eager_prefill, and for an MLA model's steps past "
                                        "the graphs' token bound, mla_graph_max_tokens).",
                                        type=bool)
    moe_input: str | None = option(None, "The format MXFP4 routed experts take their input "
                                   "in: mxfp8 (quantized in the MoE kernel, FP8 tensor "
                                   "cores: vLLM's VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1) or "
                                   "bf16 (SGLang's --flashinfer-mxfp4-moe-precision bf16, "
                                   "TensorRT-LLM's OVERRIDE_QUANT_ALGO=W4A16_MXFP4); default: "
                                   "the engine's rule for the chip (engines.toml chips_only, "
                                   "mxfp8-moe-input).", type=str)
    host_overlap: bool | None = option(None, "Whether the engine prepares the next iteration "
                                       "on the host while the device runs this one (default: "
                                       "the engine's, engines.toml overlapped); SGLang turns "
                                       "its overlap scheduler off under EAGLE/MTP unless "
                                       "SGLANG_ENABLE_SPEC_V2 is in its environment.",
                                       type=bool)
    frontend_ms: float | None = option(None, "Time each request spends outside the "
                                       "engine's steps, ms: the API server's HTTP, chat "
                                       "template and tokenization, the hops to the "
                                       "scheduler, streaming the first token; every TTFT "
                                       "and end-to-end latency holds it (default: the "
                                       "engine's, engines.toml frontend_s; 0 where none is "
                                       "measured).", type=float)
    penalties: bool = option(False, "Requests carry a repetition, frequency or presence "
                             "penalty: the engine's sampler applies them over the "
                             "vocabulary of every row each step (vLLM V1's ops; "
                             "engines.toml penalties_source).", type=bool)
    frontend_token_us: float | None = option(None, "Time one API server process spends on "
                                             "each chunk it streams (a sequence's tokens of "
                                             "a step), us: a what-if where the engine's is "
                                             "not measured, as for NIM 1.0's (default: the "
                                             "engine's, engines.toml frontend_token_s; 0 "
                                             "where none is measured).", type=float)
    api_servers: int = option(1, "API server processes streaming each replica's output "
                              "tokens, its pipeline lanes sharing them (vLLM's "
                              "--api-server-count), each chunk (a sequence's tokens of a "
                              "step) taking one the engine's measured time (engines.toml "
                              "frontend_token_s); "
                              "0: the client calls the engine in-process, nothing "
                              "streamed.", type=int)
    adp_balance: str | None = option(None, "TensorRT-LLM's attention-DP balancer "
                                     "(attention_dp_config enable_balance): WAIT,TIMEOUT "
                                     "iterations (its batching_wait_iters, timeout_iters) "
                                     "new prompts are held for; with --dp-attention.",
                                     type=str)  # fmt: skip
    dp_prefill_batch: int | None = option(None, "vLLM on TPU under --dp-attention "
                                          "(tpu-inference's DP scheduler with "
                                          "DP_SCHED_BATCH_PREFILL): new requests are held "
                                          "until this many pend (its attention-DP ranks: two "
                                          "a TPU7x chip), the profile's timeout passes since "
                                          "the last release, or as many ranks are idle as "
                                          "requests pend.", type=int)  # fmt: skip
    batch_wait: str | None = option(None, "TensorRT-LLM's batch waiting "
                                    "(batch_wait_timeout_iters, batch_wait_max_tokens_ratio): "
                                    "ITERS,RATIO; a step's new prompts are held while fewer "
                                    "than ITERS steps have held them and the step's tokens "
                                    "are under RATIO x the token budget; without "
                                    "--dp-attention.", type=str)  # fmt: skip
    gemm_allreduce: bool = option(False, "TensorRT-LLM's gemm_allreduce_plugin: each "
                                  "row-parallel GEMM (o_proj, down) runs fused with its "
                                  "all-reduce, the pair costing the longer of the two (an "
                                  "ideal-overlap bound; cost/gemm_allreduce.py).", type=bool)
    allreduce_fusion: bool = option(False, "SGLang's --enable-flashinfer-allreduce-fusion, "
                                    "vLLM's compilation pass fuse_allreduce_rms: the "
                                    "all-reduces run FlashInfer's port of TensorRT-LLM's "
                                    "all-reduce kernels with the residual add and RMSNorm "
                                    "inside, priced by TensorRT-LLM's measured all-reduce "
                                    "(cost/collectives.py FLASHINFER_ALLREDUCE).",
                                    type=bool)  # fmt: skip
    prefix: int = option(0, "Tokens every prompt shares, cached after the first "
                          "(prefix caching; 0: none).", type=int)
    radix_cache: bool = option(True, "SGLang's radix cache; off as --disable-radix-cache "
                               "launches it: then requests that run to their length (as an "
                               "--ignore-eos client's, as serve's all do) start only where "
                               "all could finish with no retraction "
                               "(add_one_req_ignore_eos; serving/admission.py).", type=bool)
    prefill_replicas: int | None = option(None, "Disaggregation: replicas that only "
                                           "prefill (with --decode-replicas).", type=int)
    decode_replicas: int | None = option(None, "Disaggregation: replicas that only decode.",
                                          type=int)
    decode_tp: int | None = option(None, "Disaggregation: the decode replicas' tensor "
                                   "parallelism (default: the prefill replicas' plan).",
                                   type=int)
    decode_ep: int | None = option(None, "Disaggregation: the decode replicas' expert "
                                   "parallelism over their tp chips (default: as the "
                                   "prefill replicas' plan, or chosen with --decode-tp).",
                                   type=int)
    decode_dp_attention: bool | None = option(None, "Disaggregation: whether the decode "
                                              "replicas run attention data-parallel "
                                              "(default: as the prefill replicas).",
                                              type=bool)
    speculative: str | None = option(None, "Speculative decoding (same flags as run): a "
                                     "draft model (zoo id or hub name), mtp (the model's own "
                                     "multi-token prediction) or eagle (one draft layer of "
                                     "the model's kind); needs --acceptance (mtp: DeepSeek-V3/R1's "
                                     "published acceptance by default).", type=str)
    draft_tokens: int | None = option(None, "Speculative: draft tokens per step (default 5, "
                                      "as run).", type=int)
    acceptance: float | None = option(None, "Speculative: the probability the target "
                                      "accepts a draft token (0 <= a < 1).", type=float)
    acceptance_lengths: str | None = option(None, "Speculative, in place of --acceptance: "
                                            "the share of steps accepting exactly 0, 1, ..., "
                                            "K draft tokens (P0,P1,...,PK).", type=str)
    accept_length: float | None = option(None, "Speculative, in place of --acceptance: the "
                                         "mean tokens a step adds (1 to K + 1), as engines "
                                         "log it.", type=float)
    draft_precision: str | None = option(None, "Speculative: the draft's weight and compute "
                                         "format where its checkpoint keeps it apart from "
                                         "the model's (bf16: nvidia's NVFP4 DeepSeek-R1 "
                                         "leaves its MTP layer unquantized); default the "
                                         "model's.", type=str)

    def __post_init__(self) -> None:
        check_positive(max_batch=self.max_batch, token_budget=self.token_budget,
                       chunk=self.chunk, kv_block=self.kv_block, kv_blocks=self.kv_blocks,
                       prefill_replicas=self.prefill_replicas,
                       decode_replicas=self.decode_replicas, decode_tp=self.decode_tp,
                       decode_ep=self.decode_ep, decode_steps=self.decode_steps,
                       recv_interval=self.recv_interval,
                       dp_prefill_batch=self.dp_prefill_batch)  # fmt: skip
        self.adp_iterations  # noqa: B018  (refuses a malformed --adp-balance)
        self.batch_wait_gate  # noqa: B018  (refuses a malformed --batch-wait)
        if self.kv_block is not None and self.kv_block > MAX_KV_BLOCK:
            raise UserError(f"kv_block must be 1-{MAX_KV_BLOCK:,} tokens (engines use 8-128), "
                            f"got {self.kv_block!r}")  # fmt: skip
        self.captured  # noqa: B018  (refuses sizes that are not positive integers)
        from xpusim.serving.engines import GRAPH_PADS

        _one_of("moe_input", self.moe_input, MOE_INPUTS)
        _one_of("graph_pad", self.graph_pad, GRAPH_PADS)
        if self.draft_precision is not None:
            if self.speculative is None:
                raise UserError("--draft-precision needs --speculative DRAFT_MODEL")
            from xpusim.ir.dtypes import parse_weight_format

            parse_weight_format(self.draft_precision)  # refuses an unknown one, naming the closest
        if self.kv_utilization is not None and not 0 < self.kv_utilization <= 1:
            raise UserError(f"kv_utilization must be in (0, 1], got {self.kv_utilization!r}")
        if self.frontend_ms is not None and not 0 <= self.frontend_ms < math.inf:
            raise UserError(f"frontend_ms must be a non-negative time, got {self.frontend_ms!r}")
        if self.prefix < 0:
            raise UserError(f"prefix must be a non-negative token count, got {self.prefix!r}")
        if self.client_warmup < 0:
            raise UserError(f"client_warmup must be a non-negative count of prompts, got "
                            f"{self.client_warmup!r}")
        if self.client_warmup and not self.cold_start:
            raise UserError("client_warmup needs cold_start: a warm server has every bucket "
                            "compiled already")
        if isinstance(self.api_servers, bool) or not isinstance(self.api_servers, int) \
                or self.api_servers < 0:
            raise UserError(f"api_servers must be a non-negative count of processes, got "
                            f"{self.api_servers!r}")
        if self.frontend_token_us is not None \
                and not 0 <= self.frontend_token_us < math.inf:
            raise UserError(f"frontend_token_us must be a non-negative time, got "
                            f"{self.frontend_token_us!r}")
        for given, name in ((self.frontend_ms, "frontend_ms"),
                            (self.frontend_token_us, "frontend_token_us")):
            if not self.api_servers and given:
                raise UserError("api_servers 0 calls the engine in-process, with no front "
                                f"end: drop {name} or give it 0")
        for setting, given, needs, flag in (  # each an engine's own launch option
                ("gemm_allreduce", self.gemm_allreduce, ("trtllm",),
                 "TensorRT-LLM's gemm_allreduce_plugin"),
                ("allreduce_fusion", self.allreduce_fusion, (*SGLANG_05, *VLLM_V1),
                 "SGLang's --enable-flashinfer-allreduce-fusion, vLLM's fuse_allreduce_rms"),
                ("recv_interval", self.recv_interval > 1, SGLANG_05,  # SGLang 0.5's gate alone
                 "its --scheduler-recv-interval"),
                ("batch_wait", self.batch_wait is not None, ("trtllm",),
                 "its batch_wait_timeout_iters and batch_wait_max_tokens_ratio"),
                ("dp_prefill_batch", self.dp_prefill_batch is not None, VLLM_V1,
                 "tpu-inference's DP_SCHED_BATCH_PREFILL")):  # fmt: skip
            if given and self.engine not in needs:
                raise UserError(f"{setting} must be used with engine {' or '.join(needs)} "
                                f"({flag}), got engine {self.engine!r}")
        if (self.prefill_replicas is None) != (self.decode_replicas is None):
            raise UserError("disaggregation needs both prefill_replicas and decode_replicas")
        for name in ("decode_tp", "decode_ep", "decode_dp_attention"):
            if getattr(self, name) is not None and self.prefill_replicas is None:
                raise UserError(f"{name} applies to disaggregation: give --prefill-replicas "
                                "and --decode-replicas")  # fmt: skip
        _one_of("scheduler", self.scheduler, SCHEDULERS)
        from xpusim.serving.engines import engine, engines

        if not self.radix_cache and engine(self.engine).admit_reserve is None:
            radix = " or ".join(n for n, p in engines().items() if p.admit_reserve is not None)
            raise UserError(f"radix_cache must be used with engine {radix} (their "
                            f"--disable-radix-cache), got engine {self.engine!r}")
        if not engine(self.engine).eager_launch_s and self.eager_prefill:
            eager = " or ".join(n for n, p in engines().items() if p.eager_launch_s)
            raise UserError(f"eager_prefill must be used with engine {eager} (engine "
                            f"{self.engine!r} has no measured host time per eager launch: "
                            "engines.toml eager_source)")  # fmt: skip
        self.decoding  # noqa: B018  (refuses a speculative setting engines do not run)

    @property
    def captured(self) -> list[int] | None:
        """graph_sizes as ascending integers, or None where the engine's own are kept."""
        if self.graph_sizes is None:
            return None
        try:
            sizes = sorted({int(s) for s in str(self.graph_sizes).split(",")})
        except ValueError:
            sizes = []
        if not sizes or sizes[0] < 1:
            raise UserError(f"graph_sizes must be positive integers separated by commas, got "
                            f"{self.graph_sizes!r}")  # fmt: skip
        return sizes

    @property
    def decoding(self) -> Any:
        """The speculative settings resolved as `run` resolves them (scenarios/decoding.py:
        the draft tokens, the tokens a step adds on average), or None without them."""
        from xpusim.scenarios.decoding import resolve_decoding

        how = resolve_decoding(None, None, self.speculative, self.draft_tokens,
                               self.acceptance, self.acceptance_lengths,
                               self.accept_length)  # fmt: skip
        return how if how.draft is not None else None

    @property
    def adp_iterations(self) -> tuple[int, int] | None:
        """--adp-balance as (batching_wait_iters, timeout_iters), or None: balancer off."""
        if self.adp_balance is None:
            return None
        parts = str(self.adp_balance).split(",")
        if len(parts) != 2 or not all(p.strip().isdigit() for p in parts) \
                or int(parts[1]) < 1:  # fmt: skip
            raise UserError(f"adp-balance must be WAIT,TIMEOUT iterations (as 3,9; TIMEOUT "
                            f"at least 1), got {self.adp_balance!r}")  # fmt: skip
        wait, timeout = (int(p) for p in parts)
        return wait, timeout

    @property
    def batch_wait_gate(self) -> tuple[int, float] | None:
        """--batch-wait as (batch_wait_timeout_iters, batch_wait_max_tokens_ratio), or None:
        off, as TensorRT-LLM leaves it unless either is above 0 (py_executor.py
        enable_batch_waiting)."""
        if self.batch_wait is None:
            return None
        parts = str(self.batch_wait).split(",")
        try:
            iters, ratio = int(parts[0]), float(parts[1])
        except (ValueError, IndexError):
            iters, ratio = -1, -1.0
        if len(parts) != 2 or iters < 0 or not 0 <= ratio <= 1:
            raise UserError(f"batch-wait must be ITERS,RATIO (iterations at least 0, a ratio "
                            f"in [0, 1], as 40,0.8), got {self.batch_wait!r}")  # fmt: skip
        return (iters, ratio) if iters > 0 or ratio > 0 else None

    @property
    def drafts(self) -> int:
        """Draft tokens per step (vLLM's num_speculative_tokens), 0 without speculation."""
        how = self.decoding
        return 0 if how is None else how.step_tokens - 1

    def on(self, chip_id: str, memory_bytes: float) -> Engine:
        """These settings with the engine's own defaults filled in for a chip of
        `memory_bytes` (what is given stays): the policy, limits, block and fraction."""
        from dataclasses import replace

        from xpusim.serving.engines import engine

        profile = engine(self.engine)
        limits = profile.limits_on(chip_id, memory_bytes)
        return replace(
            self,
            scheduler=self.scheduler or profile.policy,
            max_batch=self.max_batch or limits.max_batch,
            kv_block=self.kv_block or profile.kv_block,
            kv_utilization=self.kv_utilization or profile.memory_fraction or None,
        )

    @property
    def frontend_s(self) -> float:
        """The time each request spends outside the engine's steps: --frontend-ms, else the
        engine profile's measured figure (engines.toml frontend_s); none without an API
        server (--api-servers 0)."""
        from xpusim.serving.engines import engine

        if not self.api_servers:
            return 0.0
        return engine(self.engine).frontend_s if self.frontend_ms is None \
            else self.frontend_ms / 1e3

    @property
    def frontend_token_s(self) -> float:
        """The time one API server process spends on each chunk it streams:
        --frontend-token-us, else the engine profile's measured figure (engines.toml
        frontend_token_s); none without an API server (--api-servers 0)."""
        from xpusim.serving.engines import engine

        if not self.api_servers:
            return 0.0
        return engine(self.engine).frontend_token_s if self.frontend_token_us is None \
            else self.frontend_token_us / 1e6

    @property
    def disaggregated(self) -> bool:
        return self.prefill_replicas is not None


@dataclass(frozen=True)
class Search:
    """What is asked of the runs: the objectives, and a capacity question to answer."""

    slo_ttft_ms: float | None = option(None, "Objective on each request's TTFT (ms): goodput "
                                       "counts requests within it.", type=float)
    slo_tpot_ms: float | None = option(None, "Objective on each request's TPOT (ms).",
                                       type=float)
    find: str | None = option(None, "max-rate: the highest --rate whose p99 TTFT and TPOT "
                              "meet the SLOs; min-chips: the fewest chips that serve --rate "
                              "within them; pd-split: the best prefill/decode split of the "
                              "replicas; offline: the throughput of a burst of every "
                              "request at once, 16 per sequence the KV cache holds (at most "
                              "--requests).", type=str)
    warmup: int | None = option(None, "First requests left out of the statistics (default: "
                                "a tenth).", type=int)
    trials: str = option("full", "max-rate's trials: full runs each to its end (its p99s "
                         "logged and plotted); verdict stops a failing one once its p99 must "
                         "miss an SLO (the same answer, sooner); decided also stops one once "
                         "its p99s, projected to its last arrival, are clear of the SLOs at "
                         "95% either way (batch means; within the seed-to-seed spread, "
                         "serving/decision.py; what validate runs).", type=str)
    until: str = option("end", "An open loop at a --rate runs to its last request (end), or "
                        "until its mean and p99 TTFT and TPOT have settled (steady: each "
                        "within 3% at 95% by batch means, no drift; serving/steady.py).",
                        type=str)

    def __post_init__(self) -> None:
        check_slo(self.slo_ttft_ms, "slo_ttft_ms")
        check_slo(self.slo_tpot_ms, "slo_tpot_ms")
        if self.find not in (None, *FINDS):
            raise UserError(f"unknown --find {self.find!r}; choose {', '.join(FINDS)}")
        if self.trials not in TRIALS:
            raise UserError(f"unknown --trials {self.trials!r}; choose {', '.join(TRIALS)}")
        if self.trials != "full" and self.find != "max-rate":
            raise UserError(f"--trials {self.trials} decides max-rate's trials: it needs "
                            "--find max-rate")
        if self.until not in UNTIL:
            raise UserError(f"unknown --until {self.until!r}; choose {', '.join(UNTIL)}")
        if self.warmup is not None and self.warmup < 0:
            raise UserError(f"warmup must be a non-negative count, got {self.warmup!r}")

    @property
    def slo(self) -> tuple[float | None, float | None]:
        return self.slo_ttft_ms, self.slo_tpot_ms
def check_slo(value: float | None, name: str) -> None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise UserError(f"{name} must be a positive number of milliseconds, got {value!r}")


def default_warmup(requests: int) -> int:
    """Search.warmup's default: a tenth of the requests, as the load ramps up (none for
    fewer than 20)."""
    return requests // 10 if requests >= 20 else 0


def _number(value: object) -> bool:
    """A finite real number (not a bool or a string): what math.isfinite would refuse with
    a TypeError."""
    return (isinstance(value, numbers.Real) and not isinstance(value, bool)
            and math.isfinite(value))  # fmt: skip
