"""How a request decodes, beyond one greedy sequence per prompt: beam search, parallel
sampling and speculative decoding, as serving engines run them.

Each is a change to the request's shapes, not a second cost model: the same graphs and
cost rules price every step.

- **Parallel sampling** (`n`, vLLM's `n`): the prompt is prefilled once and `n` sequences
  decode from it, so a decode step runs `batch x n` sequences, each attending its whole
  context (paged attention reads the shared prompt blocks once per sequence); the cache
  holds the prompt once (its blocks shared) and every sequence's own tokens; all `n`
  sequences are output.
- **Beam search** (`beams`, MLPerf's GPT-J runs 4): the same shapes as `n = beams`, but one
  sequence per prompt is output. A step's choice of the best `beams` continuations is a top-k
  over `beams x vocab` log-probabilities, counted as each beam's sampling softmax over its
  vocabulary (the same elements); the copy-on-write of a forked beam's last block is not
  counted.
- **Speculative decoding** (`speculative`: a draft model on the same chips): each step the
  draft proposes `draft_tokens` (K) tokens, one decode step of the draft each, and the target
  checks them in one forward pass of K + 1 tokens (logits at every one of them). With each
  draft token accepted independently with probability a, a step advances the sequence by
  (1 - a^(K+1)) / (1 - a) tokens in expectation (Leviathan, Kalman and Matias, "Fast Inference
  from Transformers via Speculative Decoding", ICML 2023, eq. 1): K = 0 or a = 0 gives one
  token per step. The draft runs with the target's tensor parallelism on one pipeline stage,
  as vLLM runs it unless told otherwise (its docs: speculative decoding "is not compatible
  with pipeline parallelism"; a draft_tensor_parallel_size of its own is an option its
  MLP-drafter example sets), its weights and cache beside the target's on every chip; its
  energy is its average power over its time. Instead of one
  rate, `acceptance_lengths` may give the share of steps accepting exactly k of the K draft
  tokens, or `accept_length` the mean tokens a step adds (1 to K + 1), as engines log them
  (SGLang's "accept len", TensorRT-LLM's and vLLM's "mean acceptance length", ATOM's
  "toks/fwd"): a measured length is the one figure that holds what one rate cannot, a
  reused draft head's acceptance falling with depth and a workload's text; the draft may be
  the model's own multi-token-prediction module (`speculative="mtp"`: DeepSeek-V3's), which
  without a rate accepts as DeepSeek-V3/R1's published figures say (MTP_ACCEPT_LENGTHS).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from xpusim.errors import UserError

MAX_WIDTH = 64
"""The most beams or samples per prompt xpusim takes: a bound against typos (MLPerf's GPT-J
runs 4 beams), not an engine's limit."""
MAX_DRAFT_TOKENS = 64
"""The most draft tokens per step xpusim takes: a bound against typos (vLLM's documented
examples draft 5), not an engine's limit."""
DEFAULT_DRAFT_TOKENS = 5
"""Draft tokens per step when not given: vLLM's documented draft-model example (OPT-6.7B with
an OPT-125M draft, num_speculative_tokens 5)."""
MTP_ACCEPT_LENGTHS = (1.875, 2.58, 2.82, 2.99, 3.01)
"""DeepSeek-V3/R1's MTP layer, reused for each draft depth (SGLang's EAGLE over it, TensorRT-
LLM's MTP Eagle and ATOM's MTP all chain the one layer, top-1): the tokens a verify step adds
at K = 1, 2, ... draft tokens, each a published measurement at that K, none read from a
scored run.
- K = 1, 1.875: the middle of "the acceptance rate of the second token prediction ranges
  between 85% and 90% across various generation topics" (DeepSeek-V3 Technical Report, arXiv
  2412.19437, sec. 5.4.3; DeepSeek's own prompts). SGLang's NextN PR (sgl-project/sglang#3582,
  2025-02-14) reads "~1.9 avg accept length" at one draft token, vLLM's (vllm-project/vllm
  #12755) "81% ~ 82.3% on R1 k=1" (1.81-1.82), TensorRT-LLM's 1.92 (below): DeepSeek's middle
  lies within theirs.
- K = 2-5, 2.58, 2.82, 2.99, 3.01: TensorRT-LLM's "Pushing Latency Boundaries: Optimizing
  DeepSeek-R1 Performance on NVIDIA B200 GPUs" (docs/source/blogs/tech_blog/blog1_*.md,
  table "Autoregressive MTP Layers": "Acceptance Rate", the tokens a step, 1.92, 2.58, 2.82,
  2.99, 3.01 at MTP 1-5; DeepSeek-R1-FP4 on 8 B200, batch 1, 1k in / 2k out, ten requests of
  a "real dataset", strict top-1 acceptance; its reproduce note builds the prompts with the
  chat template, apply_chat_template(..., add_generation_prompt=True), which its relaxed rows
  need and the strict ones are not said to lack).
Past K = 5 the last figure: TensorRT-LLM's fifth draft token adds 0.02, so deeper chains are
taken to add nothing (an assumption; no source goes further for DeepSeek-R1).
The figures are for prompts in the chat template: InferenceX PR #649 (2026-02-05, DeepSeek-
R1-0528) read an acceptance length of ~2.50 on InferenceX's random-token prompts in the
template, ~2.50 on MT-Bench and ~3.55 on the random prompts without it, so every InferenceX
MTP recipe since sends --use-chat-template. The PR does not say its draft depth, and ~3.55
needs K >= 3 where the recipe it edited drafts at most 2 (amd-master.yaml DECODE_MTP_SIZE=2:
--speculative-num-steps 1 --speculative-num-draft-tokens 2 in billishyahao/sglang_disagg's
sglang_disagg_server.sh of 2026-01-10, num-steps 2 in InferenceX's copy from 2026-02-19; a
step then adds at most 3), so it is no figure at any one K here (at K = 3 its 2.50 would be
11% under 2.82). Prompts without the template, or another model, take a measured
`--accept-length` (SGLang issue #7927: DeepSeek-V3 at K = 3, 3.19 on SGLang bench_serving's
random dataset without the template; DeepSeek-V4-Pro on SPEED-Bench coding, InferenceX
golden_al_distribution/dsv4_mtp.yaml: 1.92, 2.61, 2.97 at K = 1-3 without thinking, 1.79,
2.27, 2.49 with it)."""


def mtp_accept_length(draft_tokens: int) -> float:
    """Tokens a verify step adds, expected, at K draft tokens of DeepSeek's MTP layer: the
    published figure at K (MTP_ACCEPT_LENGTHS), the last one past it; no draft, one token."""
    return (1.0, *MTP_ACCEPT_LENGTHS)[min(draft_tokens, len(MTP_ACCEPT_LENGTHS))]


@dataclass(frozen=True)
class Decoding:
    """A request's decoding, resolved: what scenarios/llm/request.Request takes."""

    width: int = 1  # sequences decoded per prompt
    returned: int = 1  # sequences output per prompt
    step_tokens: int = 1  # tokens a decode step feeds per sequence
    advance: float = 1.0  # tokens a decode step adds to each sequence, expected
    draft: Any = None  # the draft model (a TransformerConfig or its name), or None
    acceptance: float | None = None
    published: bool = False  # the advance is DeepSeek's published curve (MTP_ACCEPT_LENGTHS)

    def describe(self, target: Any) -> str:
        """One line for a result's notes."""
        if self.draft is None:
            kind = "beam search" if self.returned == 1 else "parallel sampling"
            return (f"{kind}, {self.width} sequences per prompt decoded together, "
                    f"{self.returned} output")
        accepted = (f"each accepted with probability {self.acceptance:g}"
                    if self.acceptance is not None else "at the acceptance given")
        if self.published:
            accepted = ("as DeepSeek-R1's published MTP acceptance with prompts in the chat "
                        "template says (MTP_ACCEPT_LENGTHS)")
        drafted = self.step_tokens - 1
        line = (f"speculative, {self.draft.name} drafting {drafted} "
                f"token{'s' * (drafted > 1)} per step, {accepted}: {self.advance:.3g} tokens "
                "per step expected")
        if self.draft.vocab_size != target.vocab_size:
            line += (f" (the draft's vocabulary, {self.draft.vocab_size}, is not the target's "
                     f"{target.vocab_size}: engines need one tokenizer)")
        return line

    def summary(self) -> dict[str, Any]:
        """What a result says of it (flat, so that a sweep's row has every figure)."""
        if self.draft is not None:
            name = self.draft if isinstance(self.draft, str) else self.draft.name
            return {"kind": "speculative", "draft": name, "draft_tokens": self.step_tokens - 1,
                    "acceptance": self.acceptance, "tokens_per_step": self.advance}
        if self.width > 1:
            kind = "beam" if self.returned == 1 else "parallel-sampling"
            return {"kind": kind, "sequences_per_prompt": self.width}
        return {"kind": "one sequence"}


def resolve_decoding(
    beams: int | None, n: int | None, speculative: Any, draft_tokens: int | None,
    acceptance: float | None, acceptance_lengths: str | None = None,
    accept_length: float | None = None,
) -> Decoding:  # fmt: skip
    """The options as a Decoding; a combination engines do not run is a UserError.
    `acceptance_lengths` ("p0,p1,...,pK") gives, in place of one rate, the share of steps
    whose target accepts exactly k of the K draft tokens; `accept_length` their mean, the
    tokens a step adds (the verify's own one included)."""
    for name, value, top in (("beams", beams, MAX_WIDTH), ("n", n, MAX_WIDTH),
                             ("draft_tokens", draft_tokens, MAX_DRAFT_TOKENS)):  # fmt: skip
        if value is not None and not 1 <= value <= top:
            raise UserError(f"--{name.replace('_', '-')} must be 1-{top}, not {value}")
    if beams and beams > 1 and n and n > 1:
        raise UserError("--beams and --n are two ways of decoding; give one")
    if speculative is None:
        given = {"--draft-tokens": draft_tokens, "--acceptance": acceptance,
                 "--acceptance-lengths": acceptance_lengths,
                 "--accept-length": accept_length}  # fmt: skip
        for flag, value in given.items():
            if value is not None:
                raise UserError(f"{flag} needs --speculative DRAFT_MODEL")
        if beams and beams > 1:
            return Decoding(width=beams, returned=1)
        return Decoding(width=n or 1, returned=n or 1)
    if (beams or 1) > 1 or (n or 1) > 1:
        raise UserError("--speculative with --beams or --n is not modelled; give one")
    rates = [flag for flag, value in (("--acceptance", acceptance), ("--acceptance-lengths",
             acceptance_lengths), ("--accept-length", accept_length)) if value is not None]
    if len(rates) > 1:
        raise UserError(f"{' and '.join(rates)} say the same; give one")
    k = DEFAULT_DRAFT_TOKENS if draft_tokens is None else draft_tokens  # or the shares' (below)
    if accept_length is not None:
        if not (math.isfinite(accept_length) and 1.0 <= accept_length <= k + 1):
            raise UserError(f"--accept-length must be in [1, {k + 1}] (a step adds its own "
                            f"token and at most the {k} drafted), not {accept_length}")
        return Decoding(step_tokens=k + 1, advance=float(accept_length), draft=speculative)
    if acceptance_lengths is not None:
        shares = _shares(acceptance_lengths)
        k = len(shares) - 1
        if draft_tokens is not None and draft_tokens != k:
            raise UserError(f"--acceptance-lengths gives {k + 1} shares, for 0-{k} accepted "
                            f"draft tokens, but --draft-tokens is {draft_tokens}")  # fmt: skip
        advance = sum(share * (accepted + 1) for accepted, share in enumerate(shares))
        return Decoding(step_tokens=k + 1, advance=advance, draft=speculative)
    if acceptance is None and speculative == "mtp":  # the published curve (MTP_ACCEPT_LENGTHS)
        return Decoding(step_tokens=k + 1, advance=mtp_accept_length(k), draft=speculative,
                        published=True)  # fmt: skip
    if acceptance is None:
        raise UserError("--speculative needs --acceptance: the probability that the target "
                        "accepts a draft token (0 <= a < 1), measured for the model pair "
                        "(or --acceptance-lengths, --accept-length)")  # fmt: skip
    if not 0.0 <= acceptance < 1.0:
        raise UserError(f"--acceptance must be in [0, 1), not {acceptance}")
    return Decoding(step_tokens=k + 1, advance=expected_advance(acceptance, k),
                    draft=speculative, acceptance=acceptance)  # fmt: skip


def _shares(text: str) -> list[float]:
    """--acceptance-lengths: shares of steps accepting 0, 1, ..., K draft tokens."""
    try:
        shares = [float(part) for part in str(text).split(",")]
    except ValueError:
        raise UserError(f"--acceptance-lengths must be numbers separated by commas (the share "
                        f"of steps accepting 0, 1, ... draft tokens), not {text!r}") from None
    if not 2 <= len(shares) <= MAX_DRAFT_TOKENS + 1:
        raise UserError(f"--acceptance-lengths needs 2-{MAX_DRAFT_TOKENS + 1} shares (0 to K "
                        f"accepted draft tokens), not {len(shares)}")  # fmt: skip
    if not all(math.isfinite(x) and 0.0 <= x <= 1.0 for x in shares):
        raise UserError(f"--acceptance-lengths: each share must be in [0, 1], not {text!r}")
    if abs(sum(shares) - 1.0) > 1e-6:
        raise UserError(f"--acceptance-lengths: the shares add up to {sum(shares):g}, not 1")
    return shares


def expected_advance(acceptance: float, draft_tokens: int) -> float:
    """Tokens a verify step adds, expected: Leviathan et al. 2023, eq. 1."""
    a, k = acceptance, draft_tokens
    return float(k + 1) if a == 1.0 else (1.0 - a ** (k + 1)) / (1.0 - a)


def mtp_draft(target: Any) -> Any:
    """A model's own multi-token-prediction module as its draft (DeepSeek-V3's MTP: one
    layer of the model's own kind, which reads the embedding and output head the model
    has, each draft token a pass through it): the model cut to its MTP layers, its head
    tied to the embedding table. The table is the model's own (draft_cost leaves it out of
    the draft's memory: DeepSeek-V3's README_WEIGHTS.md, "Shares parameters" for both); its
    small projection of embedding and hidden state (2 x hidden x hidden) is not costed."""
    from dataclasses import replace

    if not target.mtp_layers:
        raise UserError(f"--speculative mtp: {target.name} has no multi-token-prediction "
                        "module (its config's num_nextn_predict_layers)")  # fmt: skip
    return replace(target, name=f"{target.name}-mtp", num_layers=target.mtp_layers,
                   dense_layers=0, tie_word_embeddings=True, mtp_layers=0,
                   # full attention (Qwen3-Next's and Qwen3.5's MTP layer too)
                   linear_layers=(), sliding_layers=(), chunked_layers=())


@dataclass(frozen=True)
class DraftCost:
    """What a draft model adds to one microbatch of a target on one tensor-parallel group."""

    prefill_s: float  # its prefill, after the target's
    step_s: float  # its draft_tokens decode steps, in each verify step
    prefill_j: float  # energy of its chips over those times
    step_j: float
    weight_bytes: float  # on each chip
    kv_bytes: float  # on each chip
