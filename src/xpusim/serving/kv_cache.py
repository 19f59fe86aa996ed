"""A paged KV cache: the engine's memory for sequences in flight, in fixed-size blocks.

As in vLLM's PagedAttention, a sequence holds ceil(tokens / block) blocks and takes one more
each time its tokens cross a block boundary; a request is admitted only when the blocks of
its whole prompt are free, and a sequence that cannot grow is preempted by the engine (its
blocks freed, its tokens recomputed later). With prefix caching, the full blocks of a
prefix every request shares are computed once, held for good, and not counted again.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class KVCache:
    blocks: int  # the replica's capacity
    block_tokens: int
    shared_prefix: int = 0  # tokens every request begins with (prefix caching), 0 for none
    used: int = 0
    peak: int = 0
    prefix_cached: bool = False

    @property
    def free(self) -> int:
        return self.blocks - self.used

    @property
    def prefix_blocks(self) -> int:
        """Blocks of the shared prefix that a cache hit skips: full blocks only."""
        return self.shared_prefix // self.block_tokens

    def cached_tokens(self, prompt: int) -> int:
        """Tokens of a prompt found in the cache, which its prefill skips (never the whole
        prompt: the last token is always computed, to sample from)."""
        if not self.prefix_cached:
            return 0
        return min(self.prefix_blocks * self.block_tokens, prompt - 1)

    def blocks_for(self, tokens: int, shared_tokens: int = 0) -> int:
        """A sequence's own blocks at `tokens` tokens, those of a shared prefix not counted."""
        return -(-(tokens - shared_tokens) // self.block_tokens)

    def take(self, blocks: int) -> bool:
        """Whether `blocks` more were free, then taken (free and max inlined: a serving run
        asks at every step)."""
        used = self.used + blocks
        if used > self.blocks:
            return False
        self.used = used
        if used > self.peak:
            self.peak = used
        return True

    def give(self, blocks: int) -> None:
        self.used -= blocks

    def hold_prefix(self) -> None:
        """The first prefill of the shared prefix is kept for every later request."""
        if self.prefix_blocks and not self.prefix_cached and self.take(self.prefix_blocks):
            self.prefix_cached = True
