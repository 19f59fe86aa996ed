"""The candidate space of `xpusim plan`, as data: a configuration is a chip count, a layout
(how one model is laid over those chips), a precision and the engine's knobs. Layouts come
from plan kinds, each a function of the model and the chip count named in KINDS, so a new
kind is one more entry, with no change to the search. An MoE model's layouts spread its
experts over some of the tensor-parallel chips (ep) and may run attention data-parallel
over them (dp_attention), as SGLang and TensorRT-LLM do (compiler/partition.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # `xpusim --help` lists plan's options without pydantic
    from xpusim.hardware.spec import Chip
    from xpusim.workloads.transformer_config import TransformerConfig


@dataclass(frozen=True)
class Layout:
    """One replica's plan and how many replicas fill the chips; with disaggregation, how
    many of them only prefill and how many only decode (each with the same plan)."""

    kind: str
    tp: int
    pp: int
    ep: int
    replicas: int
    prefill_replicas: int | None = None
    decode_replicas: int | None = None
    dp_attention: bool = False  # each tp chip runs attention whole for its own sequences

    @property
    def replica_chips(self) -> int:
        return self.tp * self.pp  # ep spreads the experts over the tp chips

    @property
    def decoders(self) -> int:
        """Replicas that decode: all of them, or the decode side's."""
        return self.decode_replicas or self.replicas

    def serve_options(self) -> dict[str, Any]:
        """The layout as `xpusim.serve`'s plan options."""
        plan: dict[str, Any] = {"tp": self.tp, "pp": self.pp, "ep": self.ep,
                                "dp_attention": self.dp_attention}
        if self.prefill_replicas is None:
            return {**plan, "dp": self.replicas}
        return {**plan, "prefill_replicas": self.prefill_replicas,
                "decode_replicas": self.decode_replicas}  # fmt: skip

    def label(self) -> str:
        plan = f"tp{self.tp}" + (f" pp{self.pp}" if self.pp > 1 else "") + (
            f" ep{self.ep}" if self.ep > 1 else "") + (" dpa" if self.dp_attention else "")
        if self.prefill_replicas is not None:
            return f"{plan} {self.prefill_replicas}P{self.decode_replicas}D"
        return f"{plan} x{self.replicas}"


@dataclass(frozen=True)
class Knobs:
    """The engine and its settings: its host-time profile (serving/engines.toml), the most
    sequences an iteration runs (vLLM's max_num_seqs, SGLang's max_running_requests) and
    chunked prefill's tokens per iteration (max_num_batched_tokens, chunked_prefill_size)."""

    engine: str
    max_batch: int
    token_budget: int
    # speculative decoding with the model's own multi-token-prediction module: its draft
    # tokens per step and their acceptance (serve's --speculative mtp); None: none
    mtp: tuple[int, float] | None = None

    def decoding_options(self) -> dict[str, Any]:
        return mtp_options(self.mtp)


def mtp_options(mtp: tuple[int, float] | None) -> dict[str, Any]:
    """A Knobs.mtp setting as `run`'s and `serve`'s speculative options (none: {})."""
    if mtp is None:
        return {}
    return {"speculative": "mtp", "draft_tokens": mtp[0], "acceptance": mtp[1]}


@dataclass(frozen=True)
class Config:
    chip: str
    chips: int
    layout: Layout
    precision: str
    knobs: Knobs

    def serve_options(self) -> dict[str, Any]:
        """As `xpusim.serve`'s options. Disaggregated replicas run the continuous scheduler
        (a prefill replica prefills whole prompts; serve's chunked scheduler with
        disaggregation leaves requests unfinished on this tree, a RuntimeError)."""
        scheduler = "chunked" if self.layout.prefill_replicas is None else "continuous"
        return {"chips": self.chips, "precision": self.precision, **self.layout.serve_options(),
                "engine": self.knobs.engine, "max_batch": self.knobs.max_batch,
                "scheduler": scheduler, "token_budget": self.knobs.token_budget,
                **self.knobs.decoding_options()}  # fmt: skip

    def label(self) -> str:
        k = self.knobs
        return (f"{self.chips}x {self.chip} {self.layout.label()} {self.precision} {k.engine} "
                f"batch {k.max_batch} chunk {k.token_budget}" + (" mtp" if k.mtp else ""))


MAX_BATCHES = (64, 256)
"""Sequences per iteration tried: 256 is vLLM's max_num_seqs default (engine arguments);
64 bounds TPOT under load at the cost of queueing."""
TOKEN_BUDGETS = (2048, 8192)
"""Chunked prefill's tokens per iteration tried: vLLM V1's online-serving default of 2,048
and its 8,192 for offline use; SGLang's chunked_prefill_size defaults to 8,192 on large GPUs
and 2,048 on smaller ones (its server arguments page)."""
PRECISIONS = ("bf16", "fp16", "fp8")
"""Formats a plan tries where the chip has a peak for them: the chip's 16-bit format, and
FP8 (weights and activations, as vLLM's --quantization fp8)."""


def max_batches(concurrency: int | None) -> list[int]:
    """MAX_BATCHES less those that cannot differ: with C clients no replica ever holds more
    than C sequences, so every limit of C or more serves alike; the smallest stands for them."""
    if concurrency is None:
        return list(MAX_BATCHES)
    below = [b for b in MAX_BATCHES if b < concurrency]
    return below + [b for b in MAX_BATCHES if b >= concurrency][:1]


def _factors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def aggregated(cfg: TransformerConfig, chips: int) -> Iterator[Layout]:
    """Every tp x pp x replicas that fills the chips, with ep (MoE: the tp chips the
    experts spread over, a divisor of tp and of the experts) and, for an MoE model over
    more than one tp chip without pipeline stages (as partition.check_plan allows), with
    and without attention data parallelism; each replica serves prefill and decode. TP
    divides the attention heads, as engines require."""
    for tp in _factors(chips):
        if cfg.num_heads % tp:
            continue
        eps = [e for e in _factors(tp) if cfg.num_experts % e == 0] if cfg.is_moe else [1]
        for ep in eps:
            for pp in _factors(chips // tp):
                if pp > cfg.num_layers:
                    continue
                for dpa in (False, True) if cfg.is_moe and tp > 1 and pp == 1 else (False,):
                    yield Layout("aggregated", tp, pp, ep, chips // (tp * pp),
                                 dp_attention=dpa)  # fmt: skip


def disaggregated(cfg: TransformerConfig, chips: int) -> Iterator[Layout]:
    """Every aggregated layout of two or more replicas, split into prefill-only and
    decode-only replicas (xPyD, serve's --prefill-replicas and --decode-replicas)."""
    for layout in aggregated(cfg, chips):
        for p in range(1, layout.replicas):
            yield Layout("disaggregated", layout.tp, layout.pp, layout.ep, layout.replicas,
                         p, layout.replicas - p, layout.dp_attention)  # fmt: skip


KINDS: dict[str, Callable[[TransformerConfig, int], Iterator[Layout]]] = {
    "aggregated": aggregated,
    "disaggregated": disaggregated,
}
"""Plan kinds by name: each lists its layouts of a model over a chip count."""


def precisions(chip: Chip) -> list[str]:
    """The formats tried on this chip: its 16-bit one (bf16, else fp16) and fp8 if it has
    an FP8 peak."""
    have = {d.value for d in chip.peak_ops_per_s}
    wide = next((p for p in ("bf16", "fp16") if p in have), None)
    return [p for p in (wide, "fp8") if p is not None and p in have]


def chip_counts(chips: int | None, max_chips: int | None, replica_min: int = 1) -> list[int]:
    """--chips N: N alone; --max-chips N: the powers of two up to N, and N."""
    if chips is not None:
        return [chips]
    assert max_chips is not None
    counts = {1 << i for i in range(max_chips.bit_length()) if 1 << i <= max_chips}
    return sorted(c for c in counts | {max_chips} if c >= replica_min)
