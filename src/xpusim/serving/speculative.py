"""Speculative decoding under load: each decode step drafts K tokens per sequence and the
target verifies them in one pass, keeping the accepted ones and one of its own (the same
settings and meanings as `run`'s, scenarios/decoding.py).

A step of n decoding sequences costs
- the draft's work, as the engines loop (Speculator.draft_s): one pass of the draft over
  each sequence's K + 1 verified tokens, then K - 1 one-token passes, on the replica's own
  chips at its tensor parallelism: a separate draft model, the model's own multi-token
  prediction module (`mtp`, scenarios/decoding.mtp_draft: DeepSeek-V3's one MTP layer with
  the shared output head) or `eagle`, one draft layer of the model's own kind with its
  output head (EAGLE's draft is one decoder layer);
- the verify: every sequence a chunk of q = K + 1 tokens attending its context: the token
  ops at n q tokens, and attention with the decode kernels, as the engines verify (SGLang's
  target_verify runs MLA absorbed; TensorRT-LLM's MTP its generation-phase kernel), by the
  step cost's verify polynomial in q and c (StepCost.verify; Work.verify_basis marks the
  chunks), not a prefill chunk's, which would decompress every cached latent;
and adds on average `tokens_per_step` tokens to each sequence (Leviathan et al. 2023, eq. 1,
or the acceptance lengths given), so a sequence needs ceil(remaining / that) steps. Every
prompt chunk is prefilled by the draft too. Not costed: the verify's LM head over the K
draft positions beyond one per sequence (at decode batches it is weight-bound, its weights
read once).

The draft's weights and KV cache (`draft_memory`: DeepSeek-R1's MTP layer is 1/61 more KV
per token and about 1.4 GB a chip in FP8 over 8) take memory where the engine holds them
(EngineProfile.draft_in_budget): out of the KV budget, or outside SGLang's static fraction.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from xpusim.compiler.partition import Plan
from xpusim.serving.options import SPECULATIVE_HEADS
from xpusim.serving.step_cost import StepCost, StepTime, Work
from xpusim.workloads.transformer_config import TransformerConfig


def draft_model(name: str, target: TransformerConfig) -> TransformerConfig:
    """The draft `--speculative` names: mtp, eagle or a model, resolved."""
    from xpusim.errors import UserError
    from xpusim.scenarios.decoding import mtp_draft

    if name == "mtp":
        return mtp_draft(target)
    if name == "eagle":  # one layer of the model's kind, full attention, its own head
        return replace(target, name=f"{target.name}-eagle", num_layers=1, dense_layers=0,
                       mtp_layers=0, linear_layers=(), sliding_layers=(),
                       chunked_layers=())  # fmt: skip
    from xpusim.workloads.resolve import resolve

    try:
        draft = resolve(name).workload
    except UserError as e:
        raise UserError(f"--speculative: {e}") from None
    if not isinstance(draft, TransformerConfig) or draft.encoder or draft.ssm \
            or draft.linear_layers or draft.is_encoder_decoder:
        raise UserError(f"--speculative {name}: a draft model must be a decoder LLM")
    return draft


def draft_formats(formats: Any, precision: str | None) -> Any:
    """The draft's formats: the target's (a Request's), or, where its checkpoint stores it
    apart (`precision`: serve's --draft-precision), its weights in that format and, for a
    plain format (bf16: an unquantized layer), its matmuls too (a layout, fp8-block or
    int4-g128, keeps the target's compute format); its KV cache in the target's format, the
    one pool format the engines give both (SGLang's kv_cache_dtype)."""
    if precision is None:
        return formats
    from xpusim.ir.dtypes import Grouped, parse_weight_format

    weight = parse_weight_format(precision)
    act = formats.act if isinstance(weight, Grouped) else weight
    return replace(formats, act=act, weight=weight, attention=None,
                   kv=formats.kv or formats.act)


def draft_memory(name: str, target: TransformerConfig, plan: Plan,
                 formats: Any) -> tuple[float, float]:  # fmt: skip
    """One chip's draft weights and its draft KV per token in flight, in bytes, with the
    target's formats (a Request's) on the target's tensor parallelism (the replica's `plan`):
    a head (mtp, eagle) without the target's embedding table, which it reads (DeepSeek-V3's
    README_WEIGHTS.md: the MTP module "shares parameters" of the embedding and the output
    head, one table in mtp_draft; EAGLE's draft layer embeds with the target's table and is
    costed with its own head, as EAGLE-3's)."""
    from xpusim.ir.dtypes import weight_parts
    from xpusim.scenarios.llm.plans import stage_memory

    act, weight, _, kv = formats.formats[:4]
    draft = draft_model(name, target)
    own = Plan(tp=plan.tp, ep=plan.ep if name in SPECULATIVE_HEADS else 1,
               dp_attention=plan.dp_attention)
    memory = stage_memory(draft, own, weight, act, kv or act)  # no KV format: the activations'
    weights = memory.weights[0]
    if name in SPECULATIVE_HEADS:
        parts = weight_parts(weight, act)
        weights -= draft.embedding_params * parts.table.itemsize / own.attention_tp
    return weights, memory.kv_bytes_per_token_layer * memory.layers[0]


@dataclass
class Speculator:
    drafts: int  # K: tokens drafted per sequence per step
    tokens_per_step: float  # tokens a sequence gains per step, expected
    draft: StepCost  # the draft's, on the replica's chips

    def verify(self, decodes: int, decode_context: int, chunks: Work | None) -> Work:
        """The step's work: each decoding sequence a chunk of K + 1 tokens attending its
        context and them, beside the prompt chunks' work (`chunks`, or None)."""
        q = self.drafts + 1
        c = decode_context + decodes * self.drafts  # each chunk's keys: its context and drafts
        basis = (decodes, decodes * q, c, q * c, decodes * q * q)
        own = Work(0, 0, *basis, decodes, (q,) * decodes, basis)
        if chunks is None:
            return own
        return Work(0, 0, *(a + b for a, b in zip(own[2:], chunks[2:], strict=True)))

    def draft_s(self, decodes: int, decode_context: int, prefill: Work | None) -> StepTime:
        """The draft's work in a step, as SGLang's EAGLE/MTP worker, TensorRT-LLM's MTP
        worker and ATOM's EAGLE proposer run it: one pass over each decoding sequence's K + 1
        verified tokens (the verify's chunk, in its decode form: SGLang's draft extend after
        decode, num_tokens_per_req = speculative_num_steps + 1; TensorRT-LLM's and ATOM's
        first MTP pass over the target's tokens), whose last position gives the first draft
        token, then K - 1 passes of one token each; and the prompt chunks the step prefills."""
        steps: list[Any] = []
        if decodes:
            steps.append(self.verify(decodes, decode_context, None))
            steps += [Work(decodes, decode_context + k * decodes, 0, 0, 0, 0, 0, decodes)
                      for k in range(1, self.drafts)]  # fmt: skip
        if prefill is not None:
            steps.append(prefill)
        stages = [0.0] * self.draft.stages
        energy = 0.0
        for work in steps:
            t = self.draft(work)
            stages = [a + b for a, b in zip(stages, t.stage_s, strict=True)]
            energy += t.energy_j
        return StepTime(stages, 0.0, energy)
