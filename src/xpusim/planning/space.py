"""The candidate space of `xpusim plan`, as data: a configuration is a chip count, a layout
(how one model is laid over those chips), a precision and the engine's knobs. A layout is
copies of one replica plan serving both phases (aggregated), or prefill replicas of one
plan and decode replicas of another (disaggregated: engines run, say, DeepSeek's prefill at
tp8 ep8 and its decode with attention DP and wider EP). An MoE model's plans spread its
experts over some of the tensor-parallel chips (ep) and may run attention data-parallel
over them (dp_attention), as SGLang, vLLM and TensorRT-LLM do (compiler/partition.py)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # `xpusim --help` lists plan's options without pydantic
    from xpusim.hardware.spec import Chip
    from xpusim.workloads.transformer_config import TransformerConfig


@dataclass(frozen=True)
class ReplicaPlan:
    """How one replica lays the model over its chips: tp chips per pipeline stage, ep of
    them holding a share of the experts, pp stages, and whether each tp chip runs attention
    whole for its own sequences (dp_attention)."""

    tp: int
    pp: int = 1
    ep: int = 1
    dp_attention: bool = False

    @property
    def chips(self) -> int:
        return self.tp * self.pp  # ep spreads the experts over the tp chips

    def serve_options(self) -> dict[str, Any]:
        return {"tp": self.tp, "pp": self.pp, "ep": self.ep, "dp_attention": self.dp_attention}

    def label(self) -> str:
        return f"tp{self.tp}" + (f" pp{self.pp}" if self.pp > 1 else "") + (
            f" ep{self.ep}" if self.ep > 1 else "") + (" dpa" if self.dp_attention else "")


@dataclass(frozen=True)
class Layout:
    """The replicas that fill the chips: `replicas` copies of `plan` each serving prefill
    and decode, or (disaggregated) prefill_replicas of `plan` that only prefill and
    decode_replicas of `decode` that only decode, each side with its own plan."""

    kind: str
    plan: ReplicaPlan
    replicas: int
    prefill_replicas: int | None = None
    decode_replicas: int | None = None
    decode: ReplicaPlan | None = None  # disaggregation: the decode replicas' plan

    @property
    def decoders(self) -> int:
        """Replicas that decode: all of them, or the decode side's."""
        return self.decode_replicas or self.replicas

    @property
    def decode_plan(self) -> ReplicaPlan:
        """The plan that decodes: the decode side's, or every replica's."""
        return self.decode or self.plan

    @property
    def sides(self) -> tuple[ReplicaPlan, ...]:
        return (self.plan,) if self.decode is None else (self.plan, self.decode)

    def serve_options(self) -> dict[str, Any]:
        """The layout as `xpusim.serve`'s plan options (the decode side's only where it
        differs: serve then prepares its own plan, serving/run.py)."""
        if self.decode is None:
            return {**self.plan.serve_options(), "dp": self.replicas}
        options = {**self.plan.serve_options(), "prefill_replicas": self.prefill_replicas,
                   "decode_replicas": self.decode_replicas}  # fmt: skip
        if self.decode != self.plan:
            options |= {"decode_tp": self.decode.tp, "decode_ep": self.decode.ep,
                        "decode_dp_attention": self.decode.dp_attention}  # fmt: skip
        return options

    def label(self) -> str:
        if self.decode is None:
            return f"{self.plan.label()} x{self.replicas}"
        return (f"{self.prefill_replicas}P {self.plan.label()} + "
                f"{self.decode_replicas}D {self.decode.label()}")  # fmt: skip


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


def replica_plans(cfg: TransformerConfig, chips: int) -> Iterator[ReplicaPlan]:
    """Every plan of one replica over `chips`: tp x pp of them (tp divides the attention
    heads, as engines require; pp at most the layers), with ep (MoE: the tp chips the
    experts spread over, a divisor of tp and of the experts) and, for an MoE model over more
    than one tp chip without pipeline stages (as partition.check_plan allows), with and
    without attention data parallelism."""
    for tp in _factors(chips):
        if cfg.num_heads % tp:
            continue
        pp = chips // tp
        if pp > cfg.num_layers:
            continue
        eps = [e for e in _factors(tp) if cfg.num_experts % e == 0] if cfg.is_moe else [1]
        for ep in eps:
            for dpa in (False, True) if cfg.is_moe and tp > 1 and pp == 1 else (False,):
                yield ReplicaPlan(tp, pp, ep, dpa)


def aggregated(cfg: TransformerConfig, chips: int) -> Iterator[Layout]:
    """Every replica plan whose copies fill the chips; each replica serves prefill and
    decode."""
    for per_replica in _factors(chips):
        for plan in replica_plans(cfg, per_replica):
            yield Layout("aggregated", plan, chips // per_replica)


def side_counts(chips: int) -> list[int]:
    """The chips one replica of a disaggregated layout may have: the divisors of the total
    below it (each side's replicas then fill whole shares of the system)."""
    return [c for c in _factors(chips) if c < chips]


def disaggregated(
    prefill: dict[int, list[ReplicaPlan]], decode: dict[int, list[ReplicaPlan]], chips: int
) -> Iterator[Layout]:
    """Every xPyD split of the chips (serve's --prefill-replicas and --decode-replicas):
    P prefill replicas of one plan and D decode replicas of another, P x its chips + D x
    the other's = `chips`, each side's plan from the candidates given per chip count
    (sides.py: the prefill plans no other beats on unloaded TTFT and prompt throughput per
    chip, the decode plans none beats on TPOT and tokens per chip)."""
    for p_chips, prefills in sorted(prefill.items()):
        for d_chips, decodes in sorted(decode.items()):
            for p in range(1, chips // p_chips + 1):
                rest = chips - p * p_chips
                if rest <= 0 or rest % d_chips:
                    continue
                for pre in prefills:
                    for dec in decodes:
                        yield Layout("disaggregated", pre, p + rest // d_chips, p,
                                     rest // d_chips, dec)  # fmt: skip


KINDS = ("aggregated", "disaggregated")
"""Plan kinds: every replica serving both phases, or each phase on its own replicas."""


def precisions(chip: Chip) -> list[str]:
    """The formats tried on this chip: its 16-bit one (bf16, else fp16) and fp8 if it has
    an FP8 peak."""
    have = {d.value for d in chip.peak_ops_per_s}
    wide = next((p for p in ("bf16", "fp16") if p in have), None)
    return [p for p in (wide, "fp8") if p is not None and p in have]


def chip_counts(chips: int | None, max_chips: int | None) -> list[int]:
    """--chips N: N alone; --max-chips N: the powers of two up to N, and N."""
    if chips is not None:
        return [chips]
    assert max_chips is not None
    counts = {1 << i for i in range(max_chips.bit_length()) if 1 << i <= max_chips}
    return sorted(counts | {max_chips})
