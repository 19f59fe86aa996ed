"""`run`'s options, each declared once: a dataclass field whose metadata says its help, its
kind (a count, a choice, a bounded number, a flag, a file) and its default. The command line
builds `run`'s, `compare`'s and `sensitivity`'s options from them (cli_output.run_options),
`sweep` takes each as a comma list, the web page's schema is made from those options
(web/schemas.py), LLM inference's keywords are made from them (`takes`), and
tests/test_options.py holds every field to a keyword of the scenario functions that take
it, so the CLI, the web API and the Python API cannot drift apart.
Light on purpose, as serving/options.py: `xpusim --help` imports this module."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from xpusim.workloads.defaults import GEN_TOKENS, PROMPT_TOKENS

PRECISIONS = ("nvfp4", "mxfp4", "int8", "fp8", "bf16", "fp16", "fp32")
MOE_BACKENDS = ("CUTLASS", "TRTLLM", "WIDEEP", "DEEPGEMM", "MARLIN")
"""TensorRT-LLM's MoE backends (tensorrt_llm/llmapi/llm_args.py MoeConfig.backend, 1.0-1.3):
CUTLASS the default fused MoE, TRTLLM its trtllm-gen min-latency kernels, WIDEEP the wide
expert-parallel module (its own all-to-all, optional EPLB), DEEPGEMM DeepGEMM's grouped GEMMs;
and MARLIN, vLLM's Marlin MoE kernels (VLLM_MXFP4_USE_MARLIN=1 on Hopper, where vLLM's MXFP4
default is Triton). Each prices the routed experts with its own table where the chip has one
(cost/kernel_tables.py)."""


def option(default: Any, help: str = "", kind: str = "count", **more: Any) -> Any:
    """kind: count (an integer >= 1), choice (`choices`), number (`min`, `max`, `min_open`,
    `max_open`), flag, path, text, price, weight-precision (PRECISIONS and the grouped
    layouts of ir/weight_layouts.toml), zero-stage (0..3)."""
    return field(default=default, metadata={"help": help, "kind": kind, **more})


@dataclass(frozen=True)
class RunOptions:
    batch: int = option(1, "Sequences decoded together (recommendation models: samples scored "
                        "together; training: sequences per optimizer step, default 8).",
                        show_default=True)
    sla_ms: float | None = option(None, "Recommendation models: find the largest batch whose "
                                  "latency is within this bound (instead of --batch).",
                                  "number", min=0, min_open=True)
    sharding: str = option("auto", "Recommendation models on several chips: how tables are "
                           "sharded.", "choice", choices=("auto", "table", "row"),
                           show_default=True)
    prompt: int = option(PROMPT_TOKENS, "Input tokens per sequence (training: the sequence length, "
                         "default 2048).", show_default=True)
    gen: int = option(GEN_TOKENS, "Output tokens per sequence.", show_default=True)
    precision: str | None = option(None, "Weights, activations and KV cache. Default: the "
                                   "chip's bf16, else fp16, else int8 (reported in the "
                                   "output).", "choice", choices=PRECISIONS)
    weight_precision: str | None = option(None, "Weight-only quantization: weights stored "
                                          "narrower than --precision.", "weight-precision")
    attention_precision: str | None = option(
        None, "LLM inference: attention's compute format when the engine runs it wider than "
        "--precision (TensorRT-LLM's FP8 engines: fp16).", "choice", choices=PRECISIONS)
    kv_precision: str | None = option(None, "LLM inference: the KV cache's storage format "
                                      "when not --precision (an FP8 cache beside nvfp4 "
                                      "GEMMs).", "choice", choices=PRECISIONS)
    moe_backend: str | None = option(None, "LLM inference: the engine's MoE backend "
                                     "(TensorRT-LLM's moe_backend; MARLIN: vLLM's "
                                     "VLLM_MXFP4_USE_MARLIN=1), whose kernels price the routed "
                                     "experts where the chip has a table of it (default: "
                                     "CUTLASS's).", "choice", choices=MOE_BACKENDS,
                                     case_sensitive=False)  # the engines' names, any case
    mode: str = option("inference", "", "choice", choices=("inference", "training"),
                       show_default=True)
    chips: int | None = option(None, "Chips in the system; on a chip id, builds its default "
                               "system (default: --tp x --pp x --dp where given, else 1). "
                               "Without --tp/--pp/--dp/--ep the best plan is searched for.")
    tp: int | None = option(None, "Tensor parallel: chips per pipeline stage, attention split "
                            "by heads over them.")
    pp: int | None = option(None, "Pipeline stages.")
    dp: int | None = option(None, "Data-parallel replicas (default: the chips the others "
                            "leave).")
    ep: int | None = option(None, "MoE: experts spread over this many of the --tp chips "
                            "(engines' --ep; divides --tp), each split over the rest.")
    dp_attention: bool = option(False, "LLM inference: attention data parallelism (SGLang's "
                                "--enable-dp-attention): each --tp chip runs attention whole "
                                "for its own share of the sequences and KV cache; experts "
                                "still spread by --ep.", "flag")
    microbatches: int | None = option(None, "Microbatches of --batch sequences in flight "
                                      "(default: --pp); training: per replica and step "
                                      "(default 1, or one sequence each with --pp).")
    virtual_stages: int = option(1, "Training with --pp: model chunks per pipeline rank, run "
                                 "as the interleaved 1F1B schedule (Narayanan et al. 2021): "
                                 "the bubble divided by it, the sends between ranks "
                                 "multiplied by it.", show_default=True)
    objective: str = option("latency", "What the plan search optimizes.", "choice",
                            choices=("latency", "throughput"), show_default=True)
    overlap: bool = option(False, "Overlap collectives with compute (ideal; default: they "
                           "serialize).", "flag")
    beams: int | None = option(None, "LLM inference: beam search of this width (one sequence "
                               "output per prompt; MLPerf's GPT-J runs 4).")
    n: int | None = option(None, "LLM inference: parallel samples per prompt, all output "
                           "(vLLM's n).")
    # a path (it may be a config.json): the web API, which reads no files, leaves it out
    speculative: str | None = option(None, "LLM inference: speculative decoding with this "
                                     "draft model (a zoo id, hub name or config.json, or mtp: "
                                     "the model's own multi-token prediction module) on the "
                                     "same chips; needs --acceptance (mtp: DeepSeek-V3/R1's "
                                     "published acceptance by default).", "path",
                                     metavar="DRAFT_MODEL")
    draft_tokens: int | None = option(None, "Speculative decoding: draft tokens proposed per "
                                      "step (default 5).")
    acceptance: float | None = option(None, "Speculative decoding: the probability that the "
                                      "target accepts a draft token, as measured for the "
                                      "model pair.", "number", min=0, max=1, max_open=True)
    acceptance_lengths: str | None = option(None, "Speculative decoding, in place of "
                                            "--acceptance: the share of steps whose target "
                                            "accepts exactly 0, 1, ..., K of K draft tokens.",
                                            "text", metavar="P0,P1,...,PK")
    accept_length: float | None = option(None, "Speculative decoding, in place of "
                                         "--acceptance: the mean tokens a step adds (1 to "
                                         "K + 1), as engines log it (SGLang's accept len).",
                                         "number", min=1)
    recompute: str = option("none", "Training: activation recomputation, trading FLOPs for "
                            "memory.", "choice", choices=("none", "selective", "full"),
                            show_default=True)
    optimizer: str = option("adam", "Training: the optimizer (fp32 state).", "choice",
                            choices=("adam", "adamw", "sgd"), show_default=True)
    sequence_parallel: bool = option(False, "Training: norms and residual adds split the "
                                     "sequence over --tp ranks instead of repeating it (less "
                                     "activation memory).", "flag")
    zero: int = option(0, "Training: ZeRO stage sharding optimizer state (1), gradients (2) "
                       "and weights (3) over data-parallel chips.", "zero-stage",
                       show_default=True)
    price: str | None = option(None, "Dollars per chip-hour for the result's cost ($ per "
                               "million tokens), or the catalog price to use: on-demand or "
                               "tco (purchase over years of service plus power). Default: the "
                               "catalog's on-demand price, else its TCO.", "price")


RUN_FIELDS = fields(RunOptions)


F = TypeVar("F", bound=Callable[..., Any])


def takes(names: Sequence[str]) -> Callable[[F], F]:
    """A scenario function that takes its options as **options, given the signature that
    names them: RunOptions' fields `names` as keyword-only parameters with their defaults
    and types, what help(), the API's option check and `keyword_defaults` read."""
    by_name = {f.name: f for f in RUN_FIELDS}
    taken = [by_name[name] for name in names]
    options = [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default,
                                 annotation=f.type) for f in taken]  # fmt: skip

    def signed(function: F) -> F:
        own = inspect.signature(function)
        given = [p for p in own.parameters.values() if p.kind is not p.VAR_KEYWORD]
        function.__signature__ = own.replace(parameters=[*given, *options])  # type: ignore[attr-defined]
        return function

    return signed


def keyword_defaults(function: Any) -> dict[str, Any]:
    """A scenario function's keyword-only options and their defaults: what a job that
    leaves an option out gets (simulate_many's jobs are option dicts)."""
    return {name: p.default for name, p in inspect.signature(function).parameters.items()
            if p.kind is inspect.Parameter.KEYWORD_ONLY}  # fmt: skip
