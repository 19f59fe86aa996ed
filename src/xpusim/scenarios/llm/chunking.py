"""A batch's prefill in chunks, as serving engines run it: the memory both `run` and `serve` use.

Engines never hold a whole batch's prompts' activations at once: vLLM V1 (and SGLang,
TensorRT-LLM with context chunking) prefill at most a token budget per step
(max_num_batched_tokens), so the largest activations are those of one budget of tokens.
`run` sizes its prefill's activations the same way, by the default engine's budget on the
chip (serving/engines.toml: vLLM V1's defaults by the chip's memory), so a batch that `serve`
admits also fits in `run`. Chunking changes memory, not FLOPs: the prefill's time is costed
on the whole batch as before (each chunk's attention reads the keys before it, which the
whole prompt's causal attention already counts; weights re-read per chunk are not modelled).
"""

from __future__ import annotations

from dataclasses import dataclass

from xpusim.hardware.spec import Chip

DEFAULT_ENGINE = "vllm"
"""`serve`'s default engine profile (serving/options.py `Engine.engine`)."""


@dataclass(frozen=True)
class PrefillChunks:
    """How a prefill of `tokens` (a microbatch's sequences x prompt) runs under `budget`."""

    tokens: int
    budget: int

    @property
    def chunks(self) -> int:
        return -(-self.tokens // self.budget)

    @property
    def scale(self) -> float:
        """The share of the whole prefill's activations one chunk holds at its peak."""
        return min(1.0, self.budget / self.tokens)

    def peak_bytes(self, prefill_bytes: float, decode_bytes: float) -> float:
        """The largest activations of a request: its prefill's, chunked, or its decode step's."""
        return max(prefill_bytes * self.scale, decode_bytes)

    def note(self) -> str:
        """What `run` says where the prefill is chunked ('' where it is not)."""
        if self.chunks == 1:
            return ""
        return (f"prefill chunked as engines do: {self.tokens:,} prompt tokens in {self.chunks:,} "
                f"chunks of at most {self.budget:,} (the {DEFAULT_ENGINE} engine's token budget on "
                "this chip, serving/engines.toml); activations sized by one chunk, time by the "
                "whole prefill")  # fmt: skip


def default_token_budget(chip: Chip) -> int:
    """The default engine's token budget on `chip` (a job's Setup resolves it once)."""
    from xpusim.serving.engines import engine

    return engine(DEFAULT_ENGINE).limits_on(chip.id, chip.capacity_bytes).token_budget


def prefill_chunks(chip: Chip, batch: int, prompt: int) -> PrefillChunks:
    """The default engine's chunking of a prefill of `batch` sequences of `prompt` tokens."""
    return PrefillChunks(batch * prompt, default_token_budget(chip))
