"""Speculative decoding under load: each decode step drafts K tokens per sequence and the
target verifies them in one pass, keeping the accepted ones and one of its own (the same
settings and meanings as `run`'s, scenarios/decoding.py).

A step of n decoding sequences costs
- the draft's work: K decode steps of the draft for the n sequences, on the replica's own
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
read once), and the draft's weights and KV cache in memory.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

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
        """The draft's work in a step: K draft tokens for each decoding sequence (one decode
        step of the draft each), and the prompt chunks the step prefills."""
        steps: list[Any] = [Work(decodes, decode_context + k * decodes, 0, 0, 0, 0, 0, decodes)
                            for k in range(self.drafts if decodes else 0)]  # fmt: skip
        if prefill is not None:
            steps.append(prefill)
        stages = [0.0] * self.draft.stages
        energy = 0.0
        for work in steps:
            t = self.draft(work)
            stages = [a + b for a, b in zip(stages, t.stage_s, strict=True)]
            energy += t.energy_j
        return StepTime(stages, 0.0, energy)
