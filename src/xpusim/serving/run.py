"""One serving run: a replica set prepared for a load (the plan, its KV cache, its step
costs) and the event loop over the requests (serving/simulator.py). serve.py runs one;
capacity.py runs many in its searches."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from xpusim.compiler.memory_plan import Placement
from xpusim.compiler.partition import Plan
from xpusim.cost.collectives import FLASHINFER_ALLREDUCE, Collective, collective_line
from xpusim.cost.gemm_allreduce import KERNEL as GEMM_ALLREDUCE
from xpusim.errors import UserError
from xpusim.hardware.spec import Chip
from xpusim.hardware.system import System, system_for
from xpusim.memo import remembered
from xpusim.scenarios.llm.graphs import shape_graphs
from xpusim.scenarios.llm.inference import chosen_plan, job_setup
from xpusim.scenarios.llm.request import Request
from xpusim.serving.admission import Reserve
from xpusim.serving.decision import Decision
from xpusim.serving.engines import EngineProfile
from xpusim.serving.engines import engine as engine_profile
from xpusim.serving.kv_cache import KVCache
from xpusim.serving.load import Requests
from xpusim.serving.metrics import Frames, KVUse, ServingResult, summarize
from xpusim.serving.options import SPECULATIVE_HEADS, Engine, Load
from xpusim.serving.replica import Padding, Replica
from xpusim.serving.schedulers import Sequence
from xpusim.serving.schedulers import scheduler as scheduler_named
from xpusim.serving.simulator import simulate
from xpusim.serving.speculative import Speculator, draft_formats, draft_memory
from xpusim.serving.steady import Steady
from xpusim.serving.step_cost import StepCost, step_cost
from xpusim.serving.verdict import Verdict
from xpusim.validation.error_bands import measured_error
from xpusim.validation.error_bands import note as error_note
from xpusim.workloads.transformer import (
    ALLREDUCE_NORM,
    ALLREDUCE_NORM_DECODE,
    FUSED_SHARED_EXPERT,
    MXFP8_MOE_INPUT,
    SAMPLER_PENALTIES,
    takes_mxfp8_moe_input,
)
from xpusim.workloads.transformer_config import TransformerConfig

MAX_TABLE_TOKENS = 1 << 17
"""Most new tokens one iteration may hold (the step cost tabulates every count up to it):
a static batch of 64 prompts of 2,048 tokens."""


@dataclass
class Prepared:
    """What every simulation of one model, system, plan and engine shares."""

    cfg: TransformerConfig
    system: System
    plan: Plan  # one replica's
    replicas: int
    formats: Request
    cost: StepCost
    kv: KVUse
    engine: Engine
    fits: bool
    reason: str
    notes: list[str]
    decode: Prepared | None = None  # disaggregation: the decode replicas', when their plan differs
    graphs: list[int] = field(default_factory=list)  # the engine's captured CUDA-graph sizes
    graph_pad: str = "none"  # how a step pads to them (engines.toml graph_pad)
    draft: StepCost | None = None  # speculative decoding's draft model, on the same plan
    eager_s: tuple[float, ...] = ()  # each stage's host time of a step run without graphs
    eager_above_tokens: int = 0  # steps with prompt tokens run without graphs only above
    # this many tokens (0: every one; engines.toml mla_graph_max_tokens)
    jit_s: float = 0.0  # host time to compile its GEMMs for a token bucket not met before

    @property
    def chips(self) -> int:
        """Chips of all replicas: prefill and decode ones each with their own plan."""
        e = self.engine
        if self.decode is None or not e.disaggregated:
            return self.replicas * self.plan.chips
        return (e.prefill_replicas * self.plan.chips  # type: ignore[operator]
                + e.decode_replicas * self.decode.plan.chips)  # type: ignore[operator]


def prepare(
    cfg: TransformerConfig, target: Chip | System, load: Load, requests: Requests,
    engine: Engine, plan_options: dict[str, Any],
) -> Prepared:  # fmt: skip
    """Chooses the plan, sizes the KV cache and tabulates the step cost."""
    profile = engine_profile(engine.engine)
    kv_auto = None if plan_options.get("kv_precision") is not None else \
        profile.kv_format(plan_options.get("precision"))
    if kv_auto:  # the engine's own KV dtype beside the precision asked (engines.toml kv_auto)
        plan_options = {**plan_options, "kv_precision": kv_auto}
    expected = min(load.concurrency or engine.max_batch, engine.max_batch)
    prompt, gen = round(float(requests.prompt.mean())), round(float(requests.gen.mean()))
    options = {**plan_options, "batch": expected, "prompt": prompt, "gen": gen}
    split = 1
    if engine.disaggregated and not any(plan_options.get(k) for k in ("tp", "pp", "dp", "ep")):
        # each of the P + D replicas gets an equal share of the chips to plan over
        split = engine.prefill_replicas + engine.decode_replicas  # type: ignore[operator]
        total = system_for(target, plan_options.get("chips")).chips
        options["chips"] = max(total // split, 1)
    picked = ""
    if plan_options.get("moe_backend") is None and cfg.is_moe:  # the engine's own choice
        # (engines.toml), the plan chosen on it as on a --moe-backend given
        resolved = job_setup(cfg, target, options)
        picked = profile.default_moe_backend(resolved.system.chip.id, cfg.model_type,
                                             resolved.req.weight.value)  # fmt: skip
        if picked:
            options["moe_backend"] = picked
    setup, cand = chosen_plan(cfg, target, options)
    system, plan, req = setup.system, cand.plan, setup.req
    if split > 1:
        system = system_for(target, plan_options.get("chips"))
    notes = list(setup.notes) + unmodelled_attention(cfg)
    if picked:
        notes.append(f"MoE backend {picked}: engine {engine.engine} picks it by itself for "
                     f"{cfg.model_type}'s {req.weight.value} routed experts on {system.chip.id} "
                     "(engines.toml moe_backend_default); --moe-backend names another")
    if kv_auto:
        why = {"model": "the model's 16-bit dtype, its KV default beside the matmuls' "
                        "--quantization",
               "modelopt": "FP8, as NVIDIA's quantizer writes the checkpoints it serves"}
        notes.append(f"KV cache {kv_auto}: engine {engine.engine} keeps it in "
                     f"{why[profile.kv_auto]} (engines.toml kv_auto; --kv-precision sets it)")
    replicas = plan.dp
    one = replace(plan, dp=1)
    decode = None
    if engine.disaggregated:
        replicas = engine.prefill_replicas + engine.decode_replicas  # type: ignore[operator]
        decode_chips = one.chips
        if _decode_differs(engine, one):
            alone = replace(engine, prefill_replicas=None, decode_replicas=None, decode_tp=None,
                            decode_ep=None, decode_dp_attention=None)  # fmt: skip
            tp = engine.decode_tp or one.tp
            dp_attention = plan_options.get("dp_attention") \
                if engine.decode_dp_attention is None else engine.decode_dp_attention
            try:
                decode = prepare(cfg, target, load, requests, alone,
                                 {**plan_options, "tp": tp, "pp": None, "dp": None,
                                  "ep": engine.decode_ep, "dp_attention": dp_attention,
                                  "chips": tp})  # fmt: skip
            except UserError as e:  # name the options the plan came from, not --tp
                given = [f"--{k.replace('_', '-')} {v}" for k, v in
                         (("decode_tp", engine.decode_tp), ("decode_ep", engine.decode_ep),
                          ("decode_dp_attention", engine.decode_dp_attention))
                         if v is not None]  # fmt: skip
                raise UserError(f"{' '.join(given)}: {e}") from None
            decode_chips = decode.plan.chips
        need = (engine.prefill_replicas * one.chips  # type: ignore[operator]
                + engine.decode_replicas * decode_chips)  # type: ignore[operator]
        if need > system.chips:
            raise UserError(f"{engine.prefill_replicas} prefill replicas of {one.chips} chips "
                            f"and {engine.decode_replicas} decode replicas of {decode_chips} "
                            f"need {need} chips; the system has {system.chips}")  # fmt: skip
    if (engine.decode_steps or 1) > 1 and engine.scheduler != "continuous":
        raise UserError(f"--decode-steps is vLLM V0's multi-step scheduling, with --scheduler "
                        f"continuous; the scheduler is {engine.scheduler}")  # fmt: skip
    if engine.adp_balance is not None and one.attention_dp <= 1:
        raise UserError("--adp-balance is TensorRT-LLM's attention-DP balancer: give "
                        "--dp-attention over tp 2 or more")  # fmt: skip
    if engine.batch_wait is not None and one.attention_dp > 1:
        raise UserError("--batch-wait is TensorRT-LLM's batch waiting, which it runs only "
                        "without attention DP: drop --dp-attention or --batch-wait")  # fmt: skip
    if load.scale_gen:  # --gen is the mean asked of the file's outputs, default or not
        name = Path(load.lengths).name  # type: ignore[arg-type]
        notes.append(f"--scale-gen: {name}'s output tokens scaled to a mean of --gen "
                     f"{load.gen} (drawn: {requests.gen.mean():,.0f})")
    lengths = requests.prompt + requests.gen
    longest = int(lengths.max())
    longest_prompt = int(requests.prompt.max())
    own = profile.kernels_on(system.chip.vendor, cfg, one.ep, req.moe_backend, system.chip.id)
    if engine.moe_input is not None:  # the launch's own format for MXFP4 experts' input
        own = (*(k for k in own if k != MXFP8_MOE_INPUT),
               *((MXFP8_MOE_INPUT,) if engine.moe_input == "mxfp8" else ()))
        if not takes_mxfp8_moe_input(cfg, req.act, req.weight):
            notes.append(f"--moe-input {engine.moe_input}: changes nothing here (it sets the "
                         "input of MXFP4 routed experts in a 16-bit run; this run's experts "
                         f"are {'absent' if not cfg.is_moe else req.weight.value} under "
                         f"{req.act.value})")
    kernels_note = len(notes)  # where the note of the kernels that priced ops goes, once known
    if own:  # the plan was chosen on every engine's kernels; the steps run its own
        req = replace(req, kernels=own)
    if FUSED_SHARED_EXPERT in own:
        notes.append(f"{engine.engine} runs the shared expert as one more expert of the routed "
                     f"MoE kernel: top {cfg.experts_per_token} + 1 of {cfg.num_experts + 1} "
                     "(engines.toml fused_shared_expert_source)")
    if engine.gemm_allreduce:  # its row-parallel GEMMs fused with their all-reduces, the
        # norms after them not (ALLREDUCE_NORM: NVIDIA's MLPerf v5.1 Llama-3.1-405B configs set
        # TRTLLM_GEMM_ALLREDUCE_FUSION_ENABLED=1 with TRTLLM_LLAMA_EAGER_FUSION_DISABLED=1)
        kept = tuple(k for k in req.kernels if k != ALLREDUCE_NORM)
        req = replace(req, kernels=(*kept, GEMM_ALLREDUCE))
        notes.append("gemm_allreduce_plugin: each row-parallel GEMM and its all-reduce as one "
                     "kernel, costing the longer of the two (an ideal-overlap bound)")
    if engine.penalties:  # the client's: the engine's sampler ops over the vocabulary
        if profile.penalties_source:
            req = replace(req, kernels=(*req.kernels, SAMPLER_PENALTIES))
            notes.append(f"--penalties: every step runs {engine.engine}'s sampler penalties "
                         "over each sampled row's vocabulary (85 bytes a logit)")
        else:
            notes.append(f"--penalties: engine {engine.engine}'s sampler penalties are not "
                         "modelled (engines.toml penalties_source)")
    if engine.host_overlap is not None and engine.host_overlap != profile.overlapped:
        notes.append("--host-overlap: the engine's host work a step " + (
            "runs one step ahead, exposed only past the device's time" if engine.host_overlap
            else f"({profile.host_s(1) * 1e3:.3g} ms) runs in line, every step waiting for it"))
    if engine.allreduce_fusion:  # FlashInfer's all-reduce ahead of the engine's own, the
        # residual add and RMSNorm after it inside its kernel at decode steps
        req = replace(req, kernels=(FLASHINFER_ALLREDUCE, *req.kernels, ALLREDUCE_NORM_DECODE))
        notes.append("--allreduce-fusion: all-reduces at TensorRT-LLM's measured "
                     "all-reduce, whose kernels FlashInfer's fusion runs, the residual add "
                     "and RMSNorm after each inside it at decode steps (not at a prompt "
                     "chunk or a speculative verify, which the engines also fuse up to a "
                     "size: costed unfused)")
    limits = profile.limits_on(system.chip.id, system.chip.capacity_bytes, one.tp)
    # the engine's budget, whatever its KV pool: no engine lowers it to make room
    budget = engine.token_budget or limits.token_budget
    picked = ("the engine's default on this chip" if budget == limits.token_budget
              else f"--token-budget; the engine's default here {limits.token_budget}")
    if engine.scheduler == "continuous" and budget < longest_prompt:
        # whole prompts only: the budget holds the longest, as vLLM's V0 requires
        budget = longest_prompt
        notes.append(f"token budget {budget}: the longest prompt: continuous batching "
                     "prefills whole prompts")
    # at most this many sequences run at once: the batch limit, the clients, the requests
    in_flight = min(engine.max_batch, load.concurrency or len(requests), len(requests))
    draft_req = held = None  # the draft's formats, and its bytes on a chip (speculative.py)
    if engine.speculative is not None:
        draft_req = draft_formats(req, engine.draft_precision)
        held = draft_memory(engine.speculative, cfg, one, draft_req)
    trial = replace(engine, token_budget=budget)
    if engine.chunk is None and one.dp_attention:  # each attention-DP rank its share
        step, per_rank = profile.prefill_split(budget, one.attention_dp)
        if (step, per_rank) != (budget, budget):
            trial = replace(trial, token_budget=step, chunk=per_rank)
            picked = f"a budget of {budget}: {picked}"
            notes.append(f"attention data parallelism: each of the {one.attention_dp} ranks "
                         f"prefills at most {per_rank} tokens of its own prompts a step "
                         f"({profile.dp_attention_source.split(': ', 1)[0]})")  # fmt: skip
    max_tokens = _table_tokens(trial, requests, in_flight)
    if profile.dp_attention_chunk and one.dp_attention:  # ranks' decodes beside prompts
        max_tokens = min(max_tokens + in_flight * (trial.drafts + 1), MAX_TABLE_TOKENS)
    activations, blocks, per_token = _kv_room(
        cfg, system, cand.memory, req, one, trial, max_tokens, lengths, limits.graph_max, held)
    engine = trial
    if engine.kv_blocks is not None:
        if engine.kv_blocks > blocks:
            notes.append(f"--kv-blocks {engine.kv_blocks} is more than the {blocks} blocks "
                         f"memory leaves; simulated as given")  # fmt: skip
        blocks = engine.kv_blocks
    kv = KVUse(blocks, engine.kv_block, blocks * engine.kv_block, per_token, 0.0, 0.0)
    fits, reason = True, ""
    if blocks < -(-longest // engine.kv_block):
        fits, gb = False, 1e9
        beside = f"activations ({activations / gb:,.2f} GB)"
        if profile.memory == "static":  # SGLang: its fraction's reserve, not the activations
            fraction = engine.kv_utilization or profile.static_fraction(
                system.chip.capacity_bytes, engine.token_budget, limits.graph_max,
                one.tp * one.pp, one.attention_dp, held is not None)
            beside = f"{1 - fraction:.1%} of the memory outside its fraction"
        # the engine's own words: no pool at all fails its start, a short one cuts or refuses
        what = profile.kv_none if blocks <= 0 and profile.kv_none else profile.kv_short
        reason = (f"memory: the weights ({max(cand.memory.weights) / gb:,.2f} GB on the fullest "
                  f"chip) and {beside} leave room for "
                  f"{kv.capacity_tokens} tokens of KV cache per replica; the longest request "
                  f"needs {longest}: {what}")  # fmt: skip
        if engine.kv_blocks is not None:
            reason = (f"a KV cache of --kv-blocks {blocks} holds {kv.capacity_tokens} tokens per "
                      f"replica; the longest request needs {longest}")  # fmt: skip
    sampled = in_flight if fits else 1
    cost = _step_table(cfg, system, one, req, cand.placement, max_tokens, sampled, longest,
                       engine.drafts + 1 if engine.speculative is not None else 0,
                       profile.aux_stream_tokens(),
                       profile.decode_block_bytes_per_s(system.chip.id))  # fmt: skip
    draft = None
    if engine.speculative is not None and fits:
        if one.pp > 1:
            raise UserError("--speculative runs on one pipeline stage, as engines run it; "
                            f"the plan has {one.pp}")  # fmt: skip
        draft = _draft_cost(engine.speculative, cfg, system, one, draft_req, cand.placement,
                            max_tokens, sampled, longest, engine.drafts + 1)  # fmt: skip
    if decode is not None and not decode.fits:
        fits, reason = False, f"the decode replicas: {decode.reason}"
    # the decode replicas' own plan (disaggregation) prices its ops too: its notes go nowhere
    costs = (cost, draft, *((decode.cost, decode.draft) if decode is not None else ()))
    priced = frozenset().union(*(c.own_kernels for c in costs if c is not None))
    if used := [k for k in own if k in priced]:
        notes.insert(kernels_note, f"engine kernels: {', '.join(used)} (their measurements on "
                     "this chip price ops of this run; engines.toml kernels_source)")  # fmt: skip
    pads = {"tokens": "every step's tokens", "decode": "decode steps' batch", "none": ""}
    buckets = [] if engine.captured else profile.tpu_buckets(system.chip.vendor,
                                                              engine.token_budget)
    captured = engine.captured or buckets or profile.captured(limits.graph_max)
    graph_pad = engine.graph_pad or ("tokens" if buckets else profile.graph_pad)
    per_rank = " of each attention-DP rank" if one.dp_attention else ""
    compiled = "XLA programs for powers of two of tokens" if buckets else "CUDA graphs"
    graphs = (f", {compiled} up to {captured[-1]} padding {pads[graph_pad]}{per_rank}"
              if graph_pad != "none" and captured else "")  # fmt: skip
    notes += _dp_prefill_notes(engine, profile, system.chip.vendor, one.dp_attention)
    notes.append(error_note(engine.engine, system.chip.id))
    notes.append(f"engine {engine.engine} {profile.version}: {engine.scheduler} scheduling, "
                 f"{engine.token_budget} tokens ({picked}) and {engine.max_batch} sequences "
                 f"per step, KV blocks of {engine.kv_block}{graphs}")  # fmt: skip
    notes += _whole_prompt_notes(engine, longest_prompt, load.concurrency)
    if engine.frontend_s:
        source = "engines.toml frontend_s" if engine.frontend_ms is None else "--frontend-ms"
        notes.append(f"each TTFT and end-to-end latency holds {engine.frontend_s * 1e3:.3g} ms "
                     f"a request outside the engine's steps (API server, tokenization, "
                     f"streaming: {source})")
    if engine.frontend_token_s:
        servers = "one API server process" if engine.api_servers == 1 \
            else f"{engine.api_servers} API server processes"
        source = "engines.toml frontend_token_s" if engine.frontend_token_us is None \
            else "--frontend-token-us"
        notes.append(f"output tokens streamed by {servers} at "
                     f"{engine.frontend_token_s * 1e6:.3g} us a chunk, a sequence's tokens "
                     f"of a step ({source}): a step lasts at least its chunks' streaming")
    elif engine.api_servers > 1:  # a count that has nothing to divide
        notes.append(f"--api-servers {engine.api_servers}: engine {engine.engine}'s streaming "
                     "of a token is not measured (engines.toml frontend_token_s), so the "
                     "count changes nothing")
    if engine.eager_prefill is None:  # the profile's rules, or the run's --eager-prefill
        rule = profile.eager_rule(system.chip.vendor, one.dp_attention, cfg.model_type)
    else:
        rule = "eager_prefill" if engine.eager_prefill else ""
    eager = bool(rule)
    above = 0 if eager or engine.eager_prefill is not None \
        else profile.graphed_up_to(bool(cfg.kv_lora_rank))
    eager_s = tuple(n * profile.eager_launch_s for n in cost.launches) if eager or above else ()
    if eager_s:  # the per-op figure is DeepSeek-V3's, whose ops launch more kernels each
        caveat = "" if cfg.kv_lora_rank else (": measured per op of DeepSeek-V3, whose ops "
                                              "launch more kernels; up to ~2x high here")
        if above:
            which, key = (f" and over {above:,} tokens (the engine's piecewise graphs for MLA "
                          f"stop there)", "mla_graph_max_tokens")  # fmt: skip
        elif rule == "eager_models":
            which, key = f" (the engine's graphs leave out {cfg.model_type})", rule
        else:
            which, key = "", "eager_prefill"
        notes.append(f"steps with prompt tokens{which} run without CUDA graphs: each at least "
                     f"the host's {cost.launches[0]:,} launches x "
                     f"{profile.eager_launch_s * 1e6:.3g} us = {eager_s[0] * 1e3:.3g} ms "
                     f"(engines.toml {key}{caveat})")
    jit_s = 0.0
    compiles = profile.jit_on(system.chip.id) and cost.block_fp8_shapes > 0
    if compiles and engine.cold_start:
        jit_s = cost.block_fp8_shapes * profile.jit_compile_s
        notes.append(f"cold start: dense block-FP8 GEMMs run a Triton kernel specialized on "
                     f"the step's tokens, so a step with prompt tokens in a bucket of "
                     f"{profile.jit_bucket_tokens} not met before first compiles its "
                     f"{cost.block_fp8_shapes} shapes x {profile.jit_compile_s:.3g} s = "
                     f"{jit_s:.3g} s on the host (engines.toml jit_gemm)")  # fmt: skip
    elif compiles:
        notes.append(f"dense block-FP8 GEMMs run a Triton kernel compiled for each bucket of "
                     f"{profile.jit_bucket_tokens} tokens a prompt step meets: every bucket "
                     f"taken as compiled before the run (--cold-start: from an empty cache)")
    elif engine.cold_start:
        notes.append(f"--cold-start: engine {engine.engine} compiles no kernel per token "
                     f"bucket here (engines.toml jit_gemm), so it changes nothing")
    if (block := profile.decode_block_bytes_per_s(system.chip.id)) and cfg.kv_lora_rank:
        notes.append(f"decode attention without split-KV ({engine.engine}): not modelled for "
                     f"MLA's latent cache (one latent a token, no KV heads); priced as "
                     f"split-KV (step_cost.unsplit_floor)")  # fmt: skip
    elif block:
        notes.append(f"decode attention without split-KV ({engine.engine}): each sequence's KV "
                     f"head one thread block at {block / 1e9:.3g} GB/s, so a step's attention "
                     f"takes at least one head's cache at that rate (engines.toml "
                     f"unsplit_decode)")  # fmt: skip
    if draft is not None and held is not None:
        how, (weights, per_token) = engine.decoding, held
        where = ("in the KV budget" if profile.draft_in_budget else
                 f"outside --kv-utilization, as {engine.engine} holds it")  # fmt: skip
        notes.append(f"speculative decoding: {engine.speculative} drafts {engine.drafts} "
                     f"tokens per step (one pass over the K + 1 verified tokens, K - 1 of "
                     f"one), {how.advance:.3g} tokens per step expected; its weights "
                     f"{weights / 1e9:.3g} GB and KV {per_token:.4g} B per token a chip, "
                     f"{where}")  # fmt: skip
    return Prepared(cfg, system, one, replicas, req, cost, kv, engine, fits, reason, notes,
                    decode, captured, graph_pad, draft, eager_s, above, jit_s)


def _step_table(
    cfg: TransformerConfig, system: System, plan: Plan, req: Request, placement: Placement,
    max_tokens: int, sampled: int, longest: int, verify_tokens: int = 0,
    aux_tokens: tuple[int | None, int | None] = (None, None), block_bytes_per_s: float = 0.0,
) -> StepCost:  # fmt: skip
    """step_cost (with a speculative verify's kernel of `verify_tokens` a sequence where
    not 0), tabulated once per
    replica within a call's memo scope: a plan search
    serves one replica plan with several engines and token budgets, which differ in the
    tokens an iteration may hold and in nothing else the table depends on. The memo keeps
    the table at the most tokens asked for so far, and each asker gets its rows
    (StepCost.within, equal to a table tabulated at that size)."""
    where = (placement.onchip_level, placement.onchip_bytes, tuple(placement.home.items()))
    # at most 64 replicas' tables (tens of MB each at 8,192 tokens) are kept
    kept: list[StepCost] = remembered("step tables", (cfg, system),
                                      (plan, req.formats, sampled, longest, where,
                                       verify_tokens, aux_tokens, block_bytes_per_s),
                                      list, 64)  # fmt: skip
    if not kept or kept[0].max_tokens < max_tokens:
        kept[:] = [step_cost(cfg, system, plan, req, placement, max_tokens, sampled, longest,
                             verify_tokens, aux_tokens, block_bytes_per_s)]  # fmt: skip
    return kept[0] if kept[0].max_tokens == max_tokens else kept[0].within(max_tokens)


def _draft_cost(
    name: str, cfg: TransformerConfig, system: System, plan: Plan, req: Request, placement: Any,
    max_tokens: int, sampled: int, longest: int, verify_tokens: int,
) -> StepCost:  # fmt: skip
    """The draft's step cost on the target's chips, at the target's tensor parallelism (as
    vLLM runs a draft); the model's own heads (mtp, eagle) with its expert parallelism too;
    with the verify's attention form at `verify_tokens` (K + 1) a sequence, which its pass
    over the verified tokens takes (SGLang's DRAFT_EXTEND runs the MLA backends'
    target-verify path)."""
    from xpusim.serving.speculative import draft_model

    draft = draft_model(name, cfg)
    if draft.vocab_size != cfg.vocab_size:
        raise UserError(f"--speculative {name}: its vocabulary ({draft.vocab_size}) is not "
                        f"{cfg.name}'s ({cfg.vocab_size}); a draft shares the target's")
    own = Plan(tp=plan.tp, ep=plan.ep if name in SPECULATIVE_HEADS else 1)
    try:
        return step_cost(draft, system, own, req, placement, max_tokens, sampled, longest,
                         verify_tokens)  # fmt: skip
    except (UserError, ValueError) as e:
        raise UserError(f"--speculative {name} at tp {plan.tp}: {e}") from None


def _decode_differs(engine: Engine, one: Plan) -> bool:
    """Whether the decode replicas' options give them a plan of their own (one stage of
    decode_tp chips, with decode_ep and decode_dp_attention where given) rather than the
    prefill replicas' `one`."""
    return ((engine.decode_tp is not None and engine.decode_tp != one.tp)
            or (engine.decode_ep is not None and engine.decode_ep != one.ep)
            or (engine.decode_dp_attention is not None
                and engine.decode_dp_attention != one.dp_attention))  # fmt: skip


def _kv_room(
    cfg: TransformerConfig, system: System, memory: Any, req: Request, plan: Plan,
    engine: Engine, max_tokens: int, lengths: np.ndarray, graph_max: int,
    draft: tuple[float, float] | None = None,
) -> tuple[float, int, float]:  # fmt: skip
    """A replica's largest iteration's activations (or, where larger, the peak of the
    engine's dummy sampler run that sizes its memory), the KV blocks its fullest chip has
    room for beside them and the weights, and that chip's KV bytes per token.

    A block holds its tokens' cache in the layers whose cache grows with every token, and
    a share of what a sequence holds whatever its length (a linear-attention layer's
    state) or up to a bound (a windowed layer's last `window` tokens and a block beyond,
    as paged engines free whole blocks): that share is the requests' mean of it over their
    mean length (`lengths`: each request's prompt + gen), so the blocks a load's sequences
    take hold what they keep on average. A model whose every attention layer is windowed
    keeps those layers in the blocks whole (Mistral-7B v0.1), as before.

    A speculative `draft` (its weights and KV per token on a chip, speculative.draft_memory)
    takes its share where the engine holds it (EngineProfile.draft_in_budget): beside the
    weights and in every token's cache, or outside SGLang's fraction, grown for it."""
    activations = float(shape_graphs(cfg, [Request(1, max_tokens, 1, *req.formats[:4],
                                                moe_backend=req.moe_backend)], plan.tp,
                                     plan.ep, plan.dp_attention).activation_bytes[0])  # fmt: skip
    profile, capacity = engine_profile(engine.engine), system.chip.capacity_bytes
    total = system.chip.runtime_capacity_bytes if profile.memory_total == "runtime" else capacity
    activations = max(activations, profile.sampler_peak_bytes(
        min(engine.max_batch, max_tokens), cfg.vocab_size))
    per_layer, windowed = memory.kv_bytes_per_token_layer, memory.window_bytes_per_token_layer
    if not per_layer:  # every layer windowed
        per_layer, windowed = windowed, 0.0
    if windowed or memory.state_bytes_per_sequence_layer:
        kept = np.minimum(lengths, memory.window + engine.kv_block).mean()
        per_layer += (memory.state_bytes_per_sequence_layer + windowed * kept) / lengths.mean()
    draft_weights, draft_per_token = draft if draft and profile.draft_in_budget else (0.0, 0.0)
    per_token = [per_layer * n + draft_per_token for n in memory.layers]

    def room(weights: float) -> float:  # the KV bytes of a chip, as the engine reads it
        return profile.kv_bytes(engine.kv_utilization, capacity, weights + draft_weights,  # type: ignore[arg-type]
                                activations, engine.token_budget, graph_max,
                                plan.tp * plan.pp, plan.attention_dp,
                                draft is not None, runtime_total=total)  # fmt: skip

    tokens = min(max(int(room(w) // need), 0) if need else 0
                 for w, need in zip(memory.weights, per_token, strict=True))  # fmt: skip
    return activations, max(tokens // engine.kv_block, 0), max(per_token)


def _whole_prompt_notes(engine: Engine, longest_prompt: int, clients: int | None) -> list[str]:
    """Where a scheduler runs each prompt whole beside the decodes (inflight: TensorRT-LLM's
    micro-batch scheduler without context chunking) and the longest prompt does not fit in
    the token budget beside the other clients' decodes: such a prompt waits for a step with
    room for all of it, so a closed loop's clients take turns. What a user sees then
    (seconds of TTFT, a batch of one) needs its reason beside it."""
    if engine.scheduler != "inflight" or clients is None or clients < 2:
        return []
    per_decode = engine.drafts + 1  # a decoding sequence's tokens a step (its verify's)
    others = min(clients, engine.max_batch) - 1
    beside = max(engine.token_budget - longest_prompt, 0) // per_decode
    if beside >= others:
        return []
    return [f"prompts of up to {longest_prompt:,} tokens leave room in the {engine.token_budget:,}-"
            f"token budget beside {beside} decoding sequences of the {others} other clients: "
            "the scheduler runs each prompt whole (TensorRT-LLM without context chunking), so "
            f"a prompt waits until at most {beside} others decode; launches raise "
            "max_num_tokens (--token-budget) or enable chunked prefill (--scheduler chunked)"]


def _table_tokens(engine: Engine, requests: Requests, in_flight: int) -> int:
    """Most new tokens one iteration can hold under the scheduler: a static batch's prompts,
    a continuous batch's whole prompts or the recompute of a preempted sequence (its prompt
    and output so far), or chunked prefill's budget; with speculative decoding at least
    every sequence's verify chunk (K + 1 tokens), which prefill-first engines run beside no
    prompt, whatever the budget."""
    longest_prompt = int(requests.prompt.max())
    if engine.scheduler == "static":
        tokens = min(engine.max_batch, len(requests)) * longest_prompt
    elif engine.scheduler == "continuous":
        tokens = max(engine.token_budget, int((requests.prompt + requests.gen).max()))
    else:
        tokens = engine.token_budget
    tokens = max(tokens, in_flight * (engine.drafts + 1))
    if tokens > MAX_TABLE_TOKENS:
        raise UserError(f"an iteration could hold {tokens} new tokens; at most "
                        f"{MAX_TABLE_TOKENS} can be simulated (shorter prompts, a lower "
                        f"--max-batch or --token-budget, or --scheduler chunked)")  # fmt: skip
    return tokens


def run(
    prepared: Prepared, load: Load, requests: Requests, warmup: int,
    slo: tuple[float | None, float | None], replicas: int | None = None,
    progress: Callable[[int], None] | None = None, steady: int = 0,
    verdict: Callable[[list[Sequence]], Verdict] | None = None, until_steady: bool = False,
    decision: Callable[[list[Sequence]], Decision] | None = None,
) -> tuple[ServingResult, Frames | None]:  # fmt: skip
    """One simulation (with `replicas` instead of the prepared count, for --find min-chips;
    `steady`: the sequences held at once, to take a burst's rates over its steady state,
    metrics.summarize). `verdict` may stop an open loop that must miss its SLOs
    (serving/verdict.py): the result then holds no figures and no frames; the Verdict says
    why. `until_steady`: an open loop stops once its statistics have settled
    (serving/steady.py), its figures those of the requests served by then; `decision` stops
    one once a max-rate trial's outcome is settled (serving/decision.py), its figures
    likewise."""
    p, e = prepared, prepared.engine
    count = replicas or p.replicas
    chips = count * p.plan.chips if replicas else p.chips
    result = ServingResult(
        model=p.cfg.name, chip=p.system.chip.id, chips=chips, system=p.system.id,
        plan=p.plan.to_dict(), replicas=count,
        prefill_replicas=e.prefill_replicas or 0, decode_replicas=e.decode_replicas or 0,
        scheduler=e.scheduler, engine=e.engine, load=_load_dict(load), requests=len(requests),
        warmup=warmup, prompt_mean=float(requests.prompt.mean()),
        gen_mean=float(requests.gen.mean()), precision=p.formats.act.value,
        weight_precision=p.formats.weight.value, fits=p.fits, reason=p.reason,
        slo_ttft_ms=slo[0], slo_tpot_ms=slo[1], tdp_w=p.system.chip.tdp_w.value,
        frontend_s=e.frontend_s, kv_cache=replace(p.kv), notes=list(p.notes),
        measured_error=measured_error(e.engine, p.system.chip.id),
        decode_plan=p.decode.plan.to_dict() if p.decode is not None else None,
    )  # fmt: skip
    if not p.fits:
        return result, None
    roles = ["both"] * count
    if e.disaggregated:
        roles = ["prefill"] * e.prefill_replicas + ["decode"] * e.decode_replicas  # type: ignore[operator]
    profile, policy = engine_profile(e.engine), scheduler_named(e.scheduler)
    if e.host_overlap is not None:  # the launch's own: host work in line or one step ahead
        profile = replace(profile, overlapped=e.host_overlap)
    if e.frontend_token_us is not None:  # a what-if for a front end nobody measured
        profile = replace(profile, frontend_token_s=e.frontend_token_s)
    reps = []
    for i, role in enumerate(roles):  # pp lanes per replica, sharing its stages and cache
        own = p.decode if role == "decode" and p.decode is not None else p
        kv, stages = KVCache(own.kv.blocks, e.kv_block, e.prefix), [0.0] * own.plan.pp
        spec = None
        if own.draft is not None:
            spec = Speculator(e.drafts, e.decoding.advance, own.draft)
        padding = Padding.of(own.graph_pad, own.graphs, own.cost, e.drafts + 1,
                             profile.padded, own.plan.attention_dp)  # fmt: skip
        ranks = own.plan.attention_dp if profile.dp_attention_chunk else 1
        reps += [Replica(len(reps), i, role, own.cost, kv, policy, profile, e.max_batch,
                         e.token_budget, e.chunk or e.token_budget, stages, warmup, padding,
                         spec, rank_schedulers=ranks, decode_steps=e.decode_steps or 1,
                         adp_balance=e.adp_iterations, adp_ranks=own.plan.attention_dp,
                         recv_interval=e.recv_interval, batch_wait=e.batch_wait_gate,
                         dp_batch=None if e.dp_prefill_batch is None else (
                             e.dp_prefill_batch, profile.tpu_dp_prefill_timeout_s),
                         eager_s=own.eager_s, eager_above_tokens=own.eager_above_tokens,
                         jit_s=own.jit_s, jit_bucket_tokens=profile.jit_bucket_tokens,
                         static_w=p.system.chip.energy.static_power_w.value,
                         api_servers=e.api_servers / own.plan.pp,  # the lanes share them
                         reserve=_reserve(profile, own.plan.attention_dp, e.radix_cache))
                 for _ in range(own.plan.pp)]  # fmt: skip
    concurrency = load.concurrency if load.closed else None
    warmed = warmed_steps(e.client_warmup, int(requests.prompt[0]), concurrency, e.token_budget)
    for rep in reps:
        rep.warm(warmed)
    settle = decision or ((lambda seqs: Steady(seqs, warmup)) if until_steady else None)
    run_ = simulate(requests, concurrency, reps, _transfer(p), progress, verdict, settle,
                    frontend_s=e.frontend_s)
    if run_.stopped:
        return result, None
    static_w = p.system.chip.energy.static_power_w.value
    frames = summarize(run_, result, chips, static_w, steady)
    if (note := _batch_bound(frames.timeline, e.max_batch, result.kv_cache)) is not None:
        result.notes.append(note)
    return result, frames


def _reserve(profile: EngineProfile, attention_dp: int, radix_cache: bool) -> Reserve | None:
    """A lane's admission control, where its engine has one (engines.toml admit_reserve):
    exact where requests run to their length without the radix cache."""
    rule = profile.admit_reserve
    if rule is None:
        return None
    if attention_dp > 1 and profile.dp_attention_chunk:
        rule = rule.under_dp_attention()
    return Reserve(rule, exact=not radix_cache)


BATCH_BOUND_SHARE = 0.25
"""Share of a run's time at the largest batch with requests waiting past which a result
says the batch limit, not the accelerator, held the load back."""
KV_FULL = 0.95
"""KV-cache use from which memory, not the batch limit, is what a full batch waits on."""


def _dp_prefill_notes(engine: Engine, profile: EngineProfile, vendor: str,
                      dp_attention: bool) -> list[str]:  # fmt: skip
    """What the run says of tpu-inference's DP prefill batching (Replica._release): the gate
    as --dp-prefill-batch sets it, refused where the engine has no such gate, or, on a TPU
    under attention DP without it, how to ask for it."""
    where = vendor == "Google" and dp_attention and profile.tpu_dp_prefill_timeout_s > 0
    timeout = f"{profile.tpu_dp_prefill_timeout_s:g} s"
    if engine.dp_prefill_batch is not None:
        if not where:
            raise UserError("dp_prefill_batch is tpu-inference's DP scheduler: give it with "
                            "--dp-attention on a Google TPU (engine vllm)")  # fmt: skip
        return [f"new requests held until {engine.dp_prefill_batch} pend, {timeout} pass "
                f"since the last release, or as many of the {engine.dp_prefill_batch} "
                "attention-DP ranks are idle as requests pend (tpu-inference's "
                "DP_SCHED_BATCH_PREFILL; engines.toml tpu_dp_prefill_source)"]  # fmt: skip
    if where:
        return ["not modelled: tpu-inference's DP scheduler holding new requests until as "
                f"many pend as it has attention-DP ranks (or {timeout} pass; "
                "DP_SCHED_BATCH_PREFILL, on by default); --dp-prefill-batch N (N: its "
                "ranks, a TensorCore each, two a TPU7x chip) models it"]
    return []


def _batch_bound(timeline: dict[str, np.ndarray], max_batch: int, kv: KVUse | None) -> str | None:
    """Says when --max-batch, a setting, held requests back while memory had room: the
    engine's limit is easy to leave at a default (serve's and vLLM's 256) where the engines
    being compared ran 806-1,024 (MLPerf v4.1's TensorRT-LLM configs, docs/validation.md),
    and the queue it builds reads like a slow chip."""
    span = timeline["end_s"] - timeline["start_s"]
    full = (timeline["decodes"] + timeline["prefills"] >= max_batch) & (timeline["waiting"] > 0)
    share = float(span[full].sum() / span.sum()) if span.sum() > 0 else 0.0
    if share < BATCH_BOUND_SHARE or kv is None or kv.peak_used >= KV_FULL:
        return None
    return (f"--max-batch {max_batch} bound {share:.0%} of the time: iterations ran "
            f"{max_batch} sequences with requests waiting while the KV cache peaked at "
            f"{kv.peak_used:.0%} used; a larger --max-batch would admit them")


def warmed_steps(copies: int, prompt: int, concurrency: int | None,
                 token_budget: int) -> tuple[int, ...]:
    """Token counts of the prompt steps a client's warm-up of `copies` copies of its first
    prompt ran, as InferenceX's benchmark_serving sends them: `concurrency` at a time (all
    at once without a bound), each wave arriving together and waited for, with no single
    test prompt before them (its 'initial single prompt test run' line prints but sends
    nothing; fifteenth session, q5). Every copy prefills in full: InferenceX's launches run
    --disable-radix-cache, so no wave is a prefix-cache hit. A wave over the token budget
    runs in chunks of it, as the engine splits it (every replica seeing every wave: the
    router's spread of the copies is not followed)."""
    if not copies:
        return ()
    together = min(copies, concurrency or copies)
    waves = [together] * (copies // together) + [copies % together] * bool(copies % together)
    steps: list[int] = []
    for wave in waves:
        tokens = wave * prompt
        steps += [token_budget] * (tokens // token_budget)
        if tokens % token_budget:
            steps.append(tokens % token_budget)
    return tuple(steps)


def _transfer(p: Prepared) -> Callable[[int], float]:
    """Moving a sequence's KV cache from a prefill replica to a decode replica: each of the
    tp ranks sends its shard at once, over the link that spans both replicas."""
    chips = p.plan.chips
    line = collective_line(p.system, Collective.SEND_RECV, 2, min(2 * chips, p.system.chips))
    itemsize, ranks = p.formats.kv_format.itemsize, p.plan.tp

    def transfer_s(tokens: int) -> float:
        return line.fixed_s + line.s_per_byte * p.cfg.cache_bytes(tokens, itemsize) / ranks

    return transfer_s


def _load_dict(load: Load) -> dict[str, Any]:
    if load.concurrency is not None:
        return {"kind": "concurrency", "value": load.concurrency}
    if load.rate is not None:
        return {"kind": "rate", "value": load.rate, "burstiness": load.burstiness}
    return {"kind": "trace", "value": str(load.trace)}


def unmodelled_attention(cfg: TransformerConfig) -> list[str]:
    """What serving's cost table (step_cost.py) does not model of this model's attention,
    said in the result rather than left silent. Decodes and whole prompts are costed on
    run's own graphs; a prefill chunk with cached keys before it (chunked prefill, a cached
    prefix) by the attention polynomial read at small probe shapes, which a sliding window
    wider than every probe is not in."""
    if not cfg.sliding_layers:
        return []
    return [f"the {cfg.sliding_window}-token sliding window of {len(cfg.sliding_layers)} of "
            f"{cfg.num_layers} layers is applied to decodes and whole prompts but not to a "
            "prefill chunk after a prompt's first (chunked prefill, a cached prefix): such a "
            "chunk's attention past the window is overcounted"]
