"""Published measurements to score predictions against: what was measured, on what, by whom.

The data file is `published.json` beside this module (copied from the project's shared
ground truth, each point with its source). It is read here and by the scoring code only:
calibration must never look at it (a test enforces that), so that efficiencies come from
microbenchmarks and the error we report is an honest one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "published.json"


@dataclass(frozen=True)
class Point:
    id: str
    workload: str
    chip: str
    metric: str
    value: Any  # a number, or [low, high] for a published range
    source: str
    notes: str = ""
    known_gap: str = ""  # why xpusim is expected to miss it: what the measurement includes
    setup: dict[str, Any] = field(default_factory=dict)  # model, chips, tp, batch, ...

    def get(self, key: str, default: Any = None) -> Any:
        value = self.setup.get(key)
        return default if value is None else value


_CORE = {"id", "workload", "chip", "metric", "value", "source", "notes", "known_gap"}

SERVING_KEYS = _CORE | {
    "unit", "stat", "model", "chips", "tp", "precision", "weight_precision",
    "attention_precision", "kv_precision", "prompt", "gen", "spread", "lengths", "load",
    "engine", "engine_version", "engine_profile", "scheduler", "max_batch", "token_budget",
    "kv_utilization",
    "power_limit_w", "host_idle_w", "xpusim_setup",
    "ep", "dp_attention", "speculative", "moe_backend", "graph_sizes", "graph_pad",
    "decode_steps", "adp_balance", "gemm_allreduce", "recv_interval", "scale_gen",
    "allreduce_fusion", "batch_wait", "host_overlap", "moe_input", "frontend_ms", "api_servers",
    "penalties", "cold_start", "radix_cache", "kv_block", "dp_prefill_batch",
}  # fmt: skip
"""Every key a serving point may carry. `engine` and `engine_version` name what the source
ran; `engine_profile` and `scheduler` are how xpusim runs it. `ep` (experts sharded over the
same GPUs as attention's TP, as the engines' --ep flag means), `dp_attention` (attention
data-parallel over those GPUs) and `speculative` (SPECULATIVE_KEYS: serve's --speculative,
--draft-tokens, --acceptance or --accept-length (`accept_length`: the tokens a step adds as
an engine's log states them, never read from the metric scored; none: mtp takes DeepSeek's
published curve), and `precision`, --draft-precision: the
draft's format where its checkpoint keeps it apart) are settings a source states that the
adapter passes to serve with the engines' meanings, never drops; so are `moe_backend`
(TensorRT-LLM's moe_backend: which measured MoE kernels price the experts), `graph_sizes`
(the CUDA-graph batch sizes the config captured, a list), `graph_pad` (serve's --graph-pad:
whether a step pads to them), `decode_steps` (vLLM V0's num_scheduler_steps),
`recv_interval` (SGLang's --scheduler-recv-interval), `adp_balance` ([batching_wait_iters,
timeout_iters] of TensorRT-LLM's attention-DP balancer), `batch_wait`
([batch_wait_timeout_iters, batch_wait_max_tokens_ratio] of TensorRT-LLM's batch waiting:
serve's --batch-wait) and `gemm_allreduce` (true where the
config builds TensorRT-LLM's gemm_allreduce_plugin: cost/gemm_allreduce.py),
`host_overlap` (serve's --host-overlap: false where the engine runs its host work in line,
SGLang's EAGLE/MTP without SGLANG_ENABLE_SPEC_V2 in its environment; true where a launch
sets vLLM's --async-scheduling), `kv_block` (serve's --kv-block: the launch's --block-size,
256 in Google's TPU recipes), `dp_prefill_batch` (serve's --dp-prefill-batch: the
attention-DP ranks tpu-inference's DP scheduler gathers new requests for) and
`allreduce_fusion` (true where an SGLang launch sets --enable-flashinfer-allreduce-fusion:
cost/collectives.py FLASHINFER_ALLREDUCE); `frontend_ms` (serve's --frontend-ms: 0 where
the client calls the engine in-process with token ids, as MLPerf's harnesses do with their
pre-tokenized datasets, so no API server, chat template or tokenization stands between a
request and the engine), `api_servers` (serve's --api-servers: the API server
processes streaming the tokens, as a launch's --api-server-count sets them; 0 there too, no
token streamed through one), and `penalties` (serve's --penalties: true where the client's
requests carry a repetition, frequency or presence penalty). `spread` is
serve's --spread: lengths uniform in [m(1-s), m(1+s)] about the point's `prompt` and `gen`
means, as a benchmark's random range ratio draws them; `kv_utilization` is the memory
fraction a launch sets (serve's --kv-utilization, read as the engine reads it: SGLang's
mem_fraction_static, TensorRT-LLM's free_gpu_memory_fraction); `scale_gen` (serve's
--scale-gen) scales the `lengths` file's output tokens to the point's `gen`, the run's own
tokens per request over the dataset's reference shape. `cold_start` (serve's --cold-start):
the run's engine started with empty kernel caches, where a runner script shows it; with it
the load's `client_warmup` counts as compiled. `radix_cache` (serve's --radix-cache): false
where an SGLang launch sets --disable-radix-cache, whose requests that ignore EOS are then
admitted by SGLang's exact no-retraction check (serving/admission.py)."""
LOAD_KEYS = {"kind", "value", "slo_ttft_ms", "slo_tpot_ms", "requests", "warmup", "hold_s",
             "hold_batch", "client_warmup"}  # fmt: skip
"""A load's keys: `requests` (the benchmark's prompts, its --num-prompts) and `warmup` (of
those, the first ones its statistics leave out) where the source states them; `hold_s` and
`hold_batch`, a harness that batches arrivals before the engine sees them (serve's);
`client_warmup`, copies of the first prompt the client sent and waited for before its
prompts (benchmark_serving's --num-warmups; serve's --client-warmup, used with the point's
`cold_start`)."""
SPECULATIVE_KEYS = {"kind", "draft_tokens", "acceptance", "accept_length", "precision"}


def check_keys(point: dict[str, Any]) -> None:
    """A serving point's key set is closed: a misspelt or new setting is an error here, not
    a setting the simulation silently runs without."""
    if point.get("workload") != "llm-serving":
        return
    parts = (("", point, SERVING_KEYS), (".load", point.get("load") or {}, LOAD_KEYS),
             (".speculative", point.get("speculative") or {}, SPECULATIVE_KEYS))
    for where, given, allowed in parts:
        unknown = sorted(set(given) - allowed)
        if unknown:
            raise ValueError(f"published point {point.get('id')!r}{where}: unknown key(s) "
                             f"{', '.join(unknown)} (allowed: {', '.join(sorted(allowed))})")


@cache
def load_points(path: Path = DATA) -> tuple[Point, ...]:
    data = json.loads(path.read_text())
    for p in data["points"]:
        check_keys(p)
    return tuple(
        Point(
            id=p["id"],
            workload=p["workload"],
            chip=p["chip"],
            metric=p["metric"],
            value=p["value"],
            source=p["source"],
            notes=p.get("notes", ""),
            known_gap=p.get("known_gap", ""),
            setup={k: v for k, v in p.items() if k not in _CORE and k != "unit"},
        )
        for p in data["points"]
    )
