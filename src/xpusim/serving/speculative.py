"""Speculative decoding under load: each decode step drafts K tokens per sequence and the
target verifies them in one pass, keeping the accepted ones and one of its own.

A step of n decoding sequences costs
- the draft's work: K decode steps of the draft model for the n sequences (a separate
  draft model, on the replica's own chips and plan), or for MTP and EAGLE heads K passes of
  one extra layer, costed as one layer's share of the target's decode step plus an LM head
  and sampler per draft token (DeepSeek-V3's MTP module is one transformer block with the
  shared output head; EAGLE's draft is one decoder layer);
- the verify: every sequence a chunk of q = K + 1 tokens attending its context, costed in
  the step cost's prefill-chunk form (the token ops at n q tokens, attention by its
  polynomial in q and c);
and yields on average 1 + a1 + a1 a2 + ... tokens per sequence (Engine.tokens_per_step),
so a sequence needs ceil(remaining / that) steps. Prompts are prefilled by the draft too.
Not costed: the verify's LM head over the K draft positions beyond one per sequence (at
decode batches it is weight-bound, its weights read once), and the draft model's own
weights and KV cache in memory.
"""

from __future__ import annotations

from dataclasses import dataclass

from xpusim.serving.step_cost import StepCost, StepTime, Work


@dataclass
class Speculator:
    drafts: int  # K: tokens drafted per sequence per step
    tokens_per_step: float  # expected tokens a sequence gains per step
    target: StepCost
    draft: StepCost | None  # a separate draft model's, else draft heads
    layers: int  # the target's layers: a head's pass is one layer's share of a step

    def __post_init__(self) -> None:
        self._sample_rows = [[*s, e] for s, e in zip(self.target.sample_stage_s.tolist(),
                                                    self.target.sample_energy_j.tolist(),
                                                    strict=True)]  # fmt: skip

    def verify(self, decodes: int, decode_context: int, chunks: Work | None) -> Work:
        """The step's work: each decoding sequence a chunk of K + 1 tokens attending its
        context and them, beside the prompt chunks' work (`chunks`, or None)."""
        q = self.drafts + 1
        c = decode_context + decodes * self.drafts  # each chunk's keys: its context and drafts
        own = Work(0, 0, decodes, decodes * q, c, q * c, decodes * q * q, decodes)
        if chunks is None:
            return own
        return Work(0, 0, *(a + b for a, b in zip(own[2:], chunks[2:], strict=True)))

    def draft_s(self, decodes: int, decode_context: int, prefill: Work | None) -> StepTime:
        """The draft's work in a step: K draft tokens for each decoding sequence, and the
        prompt chunks the step prefills."""
        stages = [0.0] * self.target.stages
        energy = 0.0

        def add(t: StepTime, scale: float = 1.0) -> None:
            nonlocal energy
            for i, s in enumerate(t.stage_s):
                stages[i] += s * scale
            energy += t.energy_j * scale

        if self.draft is not None:  # K decode steps of the draft model
            for k in range(self.drafts if decodes else 0):
                add(self.draft(Work(decodes, decode_context + k * decodes, 0, 0, 0, 0, 0,
                                    decodes)))  # fmt: skip
            if prefill is not None:
                add(self.draft(prefill))
        else:  # K passes of one layer, each with an LM head and sampler
            if decodes:
                add(self.target(Work(decodes, decode_context, 0, 0, 0, 0, 0, decodes)),
                    self.drafts / self.layers)  # fmt: skip
                row = self._sample_rows[decodes - 1]
                for i in range(len(stages)):
                    stages[i] += self.drafts * row[i]
                energy += self.drafts * row[-1] * self.target.ranks
            if prefill is not None:
                add(self.target(prefill), 1 / self.layers)
        return StepTime(stages, 0.0, energy)
