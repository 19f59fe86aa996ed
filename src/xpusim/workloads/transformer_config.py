"""A transformer's architecture (or a state-space model's), read from a Hugging Face style
config.

Config dialects (DIALECTS): the llama family's keys (llama, mistral, mixtral, qwen2, phi3,
qwen3, gemma; qwen2_moe and qwen3_moe with their experts' own width, qwen2_moe's shared
expert), DeepSeek's (latent attention, dense first layers, shared experts), Falcon's,
GPT-J's and GPT-2's (n_embd, n_layer, ...), the encoders' (bert, roberta), T5's
(an encoder-decoder) and Mamba's (state-space layers); any other model_type is refused by
name.
Everything the cost of a forward pass depends on is here; nothing about training or
checkpoints.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from xpusim.errors import UserError
from xpusim.files import read_json
from xpusim.ir.tensor import Dim

ROUTING_ALPHA = 1.2
"""An MoE's routed experts' popularity power law, the busiest expert-parallel chip's load
(compiler/moe_expert.py), as aiconfigurator models every MoE but DeepSeek's
(ai-dynamo/aiconfigurator sdk/models/moe.py, commit 095f58a): a stated assumption, no
per-batch routing counts being published."""
DEEPSEEK_ROUTING_ALPHA = 1.01
"""DeepSeek's routed experts' popularity power law as aiconfigurator models it
(ai-dynamo/aiconfigurator sdk/models/deepseek.py `_power_law_alpha`, commit 095f58a): flatter
than other MoE models' ROUTING_ALPHA, its router trained with a balancing bias."""


@dataclass(frozen=True)
class TransformerConfig:
    name: str
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    tie_word_embeddings: bool = False
    gated_mlp: bool = True  # SwiGLU (llama) has gate and up projections; GPT-J's MLP has one
    norm: str = "rmsnorm"  # or "layernorm" (has a bias: 2 parameters per channel)
    parallel_block: bool = False  # GPT-J: attention and MLP read the same normed input
    parallel_norms: int = 1  # in a parallel block: Falcon-40B/180B norm the two inputs apart
    attention_bias: bool = False  # on the q, k and v projections
    attention_out_bias: bool = False  # on the output projection (Llama's flag sets both)
    mlp_bias: bool = False
    lm_head_bias: bool = False
    rotary_fraction: float = 1.0  # share of head_dim that rotary embedding touches
    num_experts: int = 1  # MoE: experts per layer (1 = dense)
    experts_per_token: int = 1
    expert_intermediate_size: int = 0  # an expert's MLP width when not intermediate_size's
    shared_expert_width: int = 0  # MoE: an MLP every token runs beside its experts
    shared_expert_gate: bool = True  # Qwen2-MoE scales it by a sigmoid gate; DeepSeek does not
    dense_layers: int = 0  # MoE: the first layers have dense MLPs (first_k_dense_replace)
    qk_norm: bool = False  # Qwen3: an RMSNorm over each head of q and of k
    qk_norm_whole: bool = False  # MiniMax-M2: those norms over all heads of q (of k) at once
    sandwich_norms: bool = False  # Gemma-2/3: the attention's and MLP's outputs normed too
    attention_sinks: bool = False  # gpt-oss: a learned logit per head in every softmax
    router_bias: bool = False  # gpt-oss: the router's linear layer has a bias
    # MoE: the groups DeepSeek's group-limited router picks experts within (n_group; 1
    # where its file has none: one group, still that router); 0: a plain top-k over all
    # experts (Mixtral's, Qwen's)
    expert_groups: int = 0
    # MoE: the power law of expert popularity the busiest expert-parallel chip is costed
    # at (ROUTING_ALPHA, DEEPSEEK_ROUTING_ALPHA); None: chance only
    routing_alpha: float | None = ROUTING_ALPHA
    # Sliding-window attention: the layers (by index) whose queries see only the last
    # sliding_window keys (Gemma-2 every other layer, Gemma-3 five of six, Mistral-7B v0.1 all)
    sliding_window: int = 0
    sliding_layers: tuple[int, ...] = ()
    # Chunked local attention (Llama-4's attention_chunk_size): in the layers chunked_layers
    # names, a query sees the keys of its own chunk of attention_chunk_size tokens only
    # (the rest, NoPE layers, see every key)
    attention_chunk_size: int = 0
    chunked_layers: tuple[int, ...] = ()
    # Llama-4 Maverick: every moe_layer_step-th layer has experts, the rest a dense MLP
    moe_layer_step: int = 1
    # Multi-head latent attention (DeepSeek-V2/V3): K and V are up-projected from a latent of
    # kv_lora_rank per token, which is what the cache holds (with the rotary part of the key,
    # qk_rope_head_dim, shared by the heads); q from one of q_lora_rank (0: a plain q_proj).
    # head_dim is the query-key width per head (nope + rope), v_head_dim the value width.
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    # DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5): a lightning indexer of index_heads
    # heads index_head_dim wide scores every cached key in FP8 and each query attends the
    # index_topk best (0: dense attention); its one key per token is cached beside MLA's
    index_heads: int = 0
    index_head_dim: int = 0
    index_topk: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    max_position_embeddings: int = 0
    # An encoder (BERT, RoBERTa): every token attends every other (no causal mask), one
    # forward pass and no decode (scenarios/encoder_inference.py), a pooler (a dense layer
    # and tanh on the first token) instead of an LM head, and a token-type table
    # (type_vocab_size rows) beside the word embeddings.
    encoder: bool = False
    type_vocab_size: int = 0
    # A state-space model (Mamba, Mamba-2): every layer is a norm and a mixer (no attention,
    # no MLP) whose scan carries a constant-size state per sequence instead of a KV cache
    # (scenarios' memory: ssm_state_elements_per_layer). ssm is "mamba" (Gu and Dao 2023:
    # selective scan over intermediate_size channels, each with ssm_state_size states, dt
    # through a rank-ssm_dt_rank projection) or "mamba2" (Dao and Gu 2024: SSD over
    # ssm_heads heads of head_dim, B and C shared by ssm_groups groups, chunks of
    # ssm_chunk tokens); intermediate_size is the mixer's inner width (expand x hidden).
    # An encoder-decoder (T5): `encoder_layers` bidirectional layers run once over the
    # prompt, then num_layers decoder layers, each with self-attention over the tokens
    # generated so far and cross-attention over the encoder's output (whose K and V every
    # decoder layer caches once); a learned relative-position bias (relative_buckets x heads)
    # in each stack's first layer.
    encoder_layers: int = 0
    relative_buckets: int = 0
    # Multi-token prediction modules (DeepSeek-V3's num_nextn_predict_layers): layers beside
    # the model, not part of what transformers builds or counts, that engines run as its
    # speculative draft (scenarios/decoding.py)
    mtp_layers: int = 0
    # Linear attention with a constant-size state, in the layers `linear_layers` names (the
    # rest full attention): "gated_deltanet" (Yang, Kautz and Hatamizadeh 2024, arXiv
    # 2412.06464; Qwen3-Next and Qwen3.5's Qwen3NextGatedDeltaNet): q and k of
    # linear_key_heads heads linear_key_dim wide, v of linear_value_heads heads
    # linear_value_dim wide, one linear_key_dim x linear_value_dim state per value head, a
    # causal depthwise convolution (linear_conv_kernel) over q, k and v. A sequence caches
    # the states and the convolution's last kernel - 1 inputs, whatever its length.
    # "lightning" (MiniMax-01 and M1: Qin et al. 2024, arXiv 2401.04658): linear attention
    # with a fixed decay and no delta rule over the attention's own heads (num_heads of
    # head_dim, key and value alike), no convolution, an RMSNorm over every head's output
    # and a sigmoid output gate projected from the layer's input; the state alone is cached.
    linear_attention: str = ""
    linear_layers: tuple[int, ...] = ()
    linear_key_heads: int = 0
    linear_value_heads: int = 0
    linear_key_dim: int = 0
    linear_value_dim: int = 0
    linear_conv_kernel: int = 4
    # Qwen3-Next / Qwen3.5: q_proj also writes a gate per query channel, and attention's
    # output is multiplied by its sigmoid before o_proj (attn_output_gate)
    attention_output_gate: bool = False
    # DeepSeek-V4 (its public inference code, model.py; transformers' DeepseekV4): every
    # layer attends a sliding window (sliding_layers: all) of one shared KV head head_dim
    # wide (K = V), and by compress_ratios[layer] compressed entries too: 4, a compressor
    # pools overlapping windows of 4 tokens into one entry and an indexer (index_heads x
    # index_head_dim over its own compressed keys) picks index_topk of them; 128, every 128
    # tokens pooled and all attended; 0, the window only. Queries from a q_lora_rank latent,
    # a learned sink per head, the output projected per o_groups group of heads to
    # o_lora_rank (wo_a), then to the hidden size (wo_b). hc_mult residual streams mixed
    # around every sublayer by small maps (hyper-connections); the first hash_layers pick
    # their experts by token id (the same expert work, tid2eid a buffer).
    compress_ratios: tuple[int, ...] = ()
    o_groups: int = 0
    o_lora_rank: int = 0
    hc_mult: int = 1
    hash_layers: int = 0
    ssm: str = ""
    ssm_state_size: int = 0
    ssm_conv_kernel: int = 4
    ssm_dt_rank: int = 0
    ssm_heads: int = 0
    ssm_groups: int = 1
    ssm_chunk: int = 256
    ssm_bias: bool = False
    ssm_conv_bias: bool = True
    # How a quantized repo stores it (workloads/checkpoint.py), read beside its config:
    # the run's default formats, not part of the architecture (not compared or hashed, so
    # a repo and its quantized copy share their costed graphs)
    checkpoint: Any = field(default=None, compare=False, repr=False)
    # the Hugging Face model_type it was read as (config_from_hf; "" where built in code):
    # which engine code path serves it, where an engine picks a kernel by architecture
    # (serving/engines.py fuses_shared_expert); not compared, as checkpoint
    model_type: str = field(default="", compare=False, repr=False)
    # the modules that checkpoint leaves unquantized (its exclusions, checkpoint.py
    # with_checkpoint): compared, as the layer builder keeps the attention and MLP matmuls they
    # name 16-bit in a quantized run (checkpoint.unquantized_module)
    unquantized: tuple[str, ...] = ()

    @property
    def scenario_kind(self) -> str:
        """What simulates it (scenarios/registry.py): an encoder (BERT) has its own."""
        return "encoder" if self.encoder else "llm"

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 1

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def expert_layers(self) -> int:
        """Layers whose MLP is an MoE layer (none in a dense model)."""
        if not self.is_moe:
            return 0
        if self.moe_layer_step == 1:
            return self.num_layers - self.dense_layers
        return sum(map(self.is_expert_layer, range(self.num_layers)))

    @property
    def dense_layer_count(self) -> int:
        """An MoE model's layers with a dense MLP (its first ones, or those between its
        interleaved expert layers)."""
        return self.num_layers - self.expert_layers if self.is_moe else self.dense_layers

    def is_expert_layer(self, layer: int) -> bool:
        return (self.is_moe and layer >= self.dense_layers
                and (layer + 1) % self.moe_layer_step == 0)  # fmt: skip

    def chunk(self, layer: int) -> int | None:
        """The layer's attention chunk (None: not chunked)."""
        return self.attention_chunk_size if layer in self.chunked_layers else None

    @property
    def bounded_layers(self) -> tuple[int, ...]:
        """Layers whose cache holds at most cache_window tokens of a sequence: a sliding
        window's, or a chunked attention's (its current chunk)."""
        return self.sliding_layers + self.chunked_layers

    @property
    def cache_window(self) -> int:
        """The most tokens a bounded layer keeps."""
        return self.sliding_window or self.attention_chunk_size

    def key_breaks(self, first: int, last: int) -> list[int]:
        """Cached-token counts c in (first, last] at which some layer's attended keys stop
        being affine in c (a decode step's query sees c cached tokens before it): a window
        of w keys (sliding windows, DSA's index_topk, DeepSeek-V4's ratio-4 window of
        index_topk x 4) reads min(c, w - 1) cached keys, a new piece from c = w - 1; a
        chunked attention (Llama-4) drops to its chunk's start at each c = n x chunk. The
        engine costs decode steps at both sides of each break (graphs.py), since it
        interpolates between costed steps. DeepSeek-V4's compressed entries, c // ratio,
        are left as a line: a staircase of `ratio` tokens, its error under ratio / c."""
        windows = {self.sliding_window} if self.sliding_layers or self.compress_ratios else set()
        if self.index_topk and not self.compress_ratios:  # DSA's top-k of the cache
            windows.add(self.index_topk)
        if self.index_topk and 4 in self.compress_ratios:  # V4's top-k of its ratio-4 entries
            windows.add(4 * self.index_topk)
        found = {w - 1 for w in windows if w and first < w - 1 <= last}
        if self.chunked_layers and self.attention_chunk_size:
            chunk = self.attention_chunk_size
            found |= set(range((first // chunk + 1) * chunk, last + 1, chunk))
        return sorted(found)

    def window(self, layer: int) -> int | None:
        """The layer's attention window (None: it sees every key)."""
        return self.sliding_window if layer in self.sliding_layers else None

    def is_linear_layer(self, layer: int) -> bool:
        """Whether the layer mixes tokens by linear attention (a constant state), not
        softmax attention over a KV cache."""
        return layer in self.linear_layers

    def compress_ratio(self, layer: int) -> int:
        """DeepSeek-V4: tokens pooled into one compressed cache entry (0: none)."""
        return self.compress_ratios[layer] if self.compress_ratios else 0

    @property
    def full_cache_layers(self) -> float:
        """Layers whose cache grows with every token: softmax attention without a window
        (none in a state-space model). DeepSeek-V4's grow by a fraction of a layer each:
        1/ratio of an entry per token, and on ratio-4 layers the indexer's compressed key
        (index_head_dim wide) every 4 tokens."""
        if self.ssm:
            return 0
        if self.compress_ratios:
            index = self.index_head_dim / self.head_dim
            return sum((1 + index * (r == 4)) / r for r in self.compress_ratios if r)
        return self.num_layers - len(self.linear_layers) - len(self.bounded_layers)

    @property
    def is_lightning(self) -> bool:
        return self.linear_attention == "lightning"

    @property
    def linear_qkv_channels(self) -> int:
        """q, k and v of a linear-attention layer, side by side."""
        return (2 * self.linear_key_heads * self.linear_key_dim
                + self.linear_value_heads * self.linear_value_dim)  # fmt: skip

    @property
    def linear_conv_channels(self) -> int:
        """Channels linear attention's convolution runs over: q, k and v (lightning
        attention has none)."""
        return 0 if self.is_lightning else self.linear_qkv_channels

    @property
    def linear_norm_params(self) -> int:
        """The output norm's weight, whole on every tensor-parallel rank: Gated DeltaNet's
        one head wide (shared by the heads), lightning attention's over every head."""
        width = self.linear_value_dim
        return width * self.linear_value_heads if self.is_lightning else width

    @property
    def linear_attention_params(self) -> int:
        """A Gated DeltaNet mixer (transformers' Qwen3NextGatedDeltaNet): in_proj_qkvz
        (q, k, v and the output gate z), in_proj_ba (beta and the decay's input a, one per
        value head), the convolution (no bias), dt_bias and A_log per value head, the gated
        RMSNorm over one head's width (shared by the heads), out_proj. A lightning mixer
        (transformers' MiniMaxLightningAttention): qkv_proj, output_gate, the RMSNorm over
        every head's output, out_proj."""
        h, hv, dv = self.hidden_size, self.linear_value_heads, self.linear_value_dim
        if self.is_lightning:
            return h * self.linear_qkv_channels + 2 * h * hv * dv + self.linear_norm_params
        in_proj = h * (self.linear_conv_channels + hv * dv + 2 * hv)
        conv = self.linear_conv_channels * self.linear_conv_kernel
        return in_proj + conv + 2 * hv + dv + hv * dv * h

    def linear_state_elements_per_layer(self, tp: int = 1) -> int:
        """What a sequence carries in one linear-attention layer on one of `tp` ranks: the
        value heads' states and the convolution's last kernel - 1 inputs."""
        if not self.linear_layers:
            return 0
        heads = -(-self.linear_value_heads // tp)
        conv = -(-self.linear_conv_channels // tp)
        return (heads * self.linear_key_dim * self.linear_value_dim
                + conv * max(self.linear_conv_kernel - 1, 0))  # fmt: skip

    # --- parameter counts (exact for the architectures above) ----------------------------
    @property
    def attention_params(self) -> int:
        if self.compress_ratios:
            return self.sink_params + self.compressed_attention_params
        if self.is_mla:
            return self.mla_replicated_params + self.mla_head_params
        return self.sink_params + self.attention_projection_params

    @property
    def sink_params(self) -> int:
        """gpt-oss's learned sink logit, one per head."""
        return self.num_heads if self.attention_sinks else 0

    @property
    def compressed_attention_params(self) -> int:
        """DeepSeek-V4's attention without its sinks and compressors: wq_a and its norm, wkv
        (one head) and its norm, whole on every tensor-parallel rank, and the parts split
        by heads (compressed_head_params)."""
        h, r, d = self.hidden_size, self.q_lora_rank, self.head_dim
        return h * r + r + h * d + d + self.compressed_head_params

    @property
    def compressed_head_params(self) -> int:
        """DeepSeek-V4's per-head projections, which tensor parallelism splits by heads (and
        so by groups of heads): wq_b, wo_a (each of o_groups groups of heads to
        o_lora_rank) and wo_b."""
        h, heads, d, rank = self.hidden_size, self.num_heads, self.head_dim, self.o_lora_rank
        return self.q_lora_rank * heads * d + heads * d * rank + self.o_groups * rank * h

    def compressor_params(self, ratio: int, width: int) -> int:
        """One DeepSeek-V4 Compressor pooling `ratio` tokens into entries `width` wide: wkv
        and wgate from the hidden state, a learned bias per slot (ape) and the entry's
        RMSNorm; ratio 4 pools overlapping windows, so its slots are twice as wide."""
        if not ratio:
            return 0
        slot = width * (2 if ratio == 4 else 1)
        return 2 * self.hidden_size * slot + ratio * slot + width

    def layer_compression_params(self, layer: int) -> int:
        """A DeepSeek-V4 layer's compressor and, on ratio-4 layers, its indexer: wq_b from
        the query latent, weights_proj (a weight per index head) and its own compressor of
        index_head_dim-wide keys; whole on every tensor-parallel rank."""
        ratio, heads, width = self.compress_ratio(layer), self.index_heads, self.index_head_dim
        own = self.compressor_params(ratio, self.head_dim)
        if ratio != 4:
            return own
        return (own + self.q_lora_rank * heads * width + self.hidden_size * heads
                + self.compressor_params(4, width))  # fmt: skip

    @property
    def compression_params(self) -> int:
        """Every layer's compressors and indexers (0 but in DeepSeek-V4)."""
        return sum(map(self.layer_compression_params, range(len(self.compress_ratios))))

    @property
    def hyper_connection_params(self) -> int:
        """A layer's two hyper-connections (attention's, the MLP's; 0 without them): each
        maps the hc_mult streams (hc_mult x hidden) to (2 + hc_mult) x hc_mult mixing
        logits (fn), with their bias (base) and three scales."""
        if self.hc_mult == 1:
            return 0
        mix = (2 + self.hc_mult) * self.hc_mult
        return 2 * (mix * self.hc_mult * self.hidden_size + mix + 3)

    @property
    def hc_head_params(self) -> int:
        """The streams' final reduction to one before the last norm (hc_head: fn, base,
        scale)."""
        if self.hc_mult == 1:
            return 0
        return self.hc_mult * self.hc_mult * self.hidden_size + self.hc_mult + 1

    @property
    def attention_projection_params(self) -> int:
        gates = 2 if self.attention_output_gate else 1  # q_proj writes the gate too
        q = self.hidden_size * self.num_heads * self.head_dim * gates
        kv = 2 * self.hidden_size * self.num_kv_heads * self.head_dim
        o = self.num_heads * self.head_dim * self.hidden_size
        bias = (
            (self.num_heads + 2 * self.num_kv_heads) * self.head_dim if self.attention_bias else 0
        )
        return q + kv + o + bias + (self.hidden_size if self.attention_out_bias else 0)

    @property
    def mla_replicated_params(self) -> int:
        """MLA's projections to the latents and their norms: every tensor-parallel rank
        holds them whole (DeepseekV2Attention's q_a_proj, q_a_layernorm, kv_a_proj_with_mqa,
        kv_a_layernorm)."""
        h, r, kv = self.hidden_size, self.q_lora_rank, self.kv_lora_rank
        q_down = h * r + r if r else 0
        return q_down + h * (kv + self.qk_rope_head_dim) + kv + self.indexer_params

    @property
    def indexer_params(self) -> int:
        """DSA's indexer (transformers' DeepseekV32Indexer): wq_b from the query latent, wk
        and its LayerNorm (weight and bias), weights_proj (a weight per index head)."""
        if not self.index_topk:
            return 0
        heads, width, h = self.index_heads, self.index_head_dim, self.hidden_size
        return self.q_lora_rank * heads * width + h * width + 2 * width + h * heads

    @property
    def mla_head_params(self) -> int:
        """MLA's per-head projections, which tensor parallelism splits by heads: q's up
        projection (q_b_proj, or q_proj from the hidden state), kv_b_proj, o_proj."""
        heads, d, v = self.num_heads, self.head_dim, self.v_head_dim
        q_in = self.q_lora_rank or self.hidden_size
        kv_up = self.kv_lora_rank * heads * (d - self.qk_rope_head_dim + v)
        return q_in * heads * d + kv_up + heads * v * self.hidden_size

    @property
    def expert_width(self) -> int:
        """An expert's MLP width: Qwen3-MoE's moe_intermediate_size, else the MLP's."""
        return self.expert_intermediate_size or self.intermediate_size

    @property
    def expert_params(self) -> int:
        """One MLP (one expert of an MoE layer)."""
        return self.mlp_params(self.expert_width)

    @property
    def dense_mlp_params(self) -> int:
        """The MLP of a dense layer (of an MoE model's dense layers too)."""
        return self.mlp_params(self.intermediate_size)

    def mlp_params(self, width: int) -> int:
        h, i = self.hidden_size, width
        mats = (3 if self.gated_mlp else 2) * h * i
        bias = (i * (2 if self.gated_mlp else 1) + h) if self.mlp_bias else 0
        return mats + bias

    @property
    def router_params(self) -> int:
        if not self.is_moe:
            return 0
        return (self.hidden_size + self.router_bias) * self.num_experts

    @property
    def shared_expert_params(self) -> int:
        """The shared experts (one SwiGLU MLP as wide as all of them) and Qwen2-MoE's sigmoid
        gate (hidden -> 1)."""
        if not self.shared_expert_width:
            return 0
        gate = self.hidden_size if self.shared_expert_gate else 0
        return 3 * self.hidden_size * self.shared_expert_width + gate

    @property
    def norm_params_per_layer(self) -> int:
        per_norm = self.hidden_size * (2 if self.norm == "layernorm" else 1)
        qk = 2 * self.head_dim if self.qk_norm else 0  # one weight per head channel, shared
        if self.qk_norm and self.qk_norm_whole:  # one weight per channel of every head
            qk = (self.num_heads + self.num_kv_heads) * self.head_dim
        norms = self.parallel_norms if self.parallel_block else 4 if self.sandwich_norms else 2
        return per_norm * norms + qk

    @property
    def ssm_conv_channels(self) -> int:
        """Channels the mixer's causal convolution runs over: Mamba's x; Mamba-2's x, B, C."""
        if self.ssm == "mamba2":
            return self.intermediate_size + 2 * self.ssm_groups * self.ssm_state_size
        return self.intermediate_size

    @property
    def ssm_in_width(self) -> int:
        """in_proj's output: x and z (Mamba); z, x, B, C and dt per head (Mamba-2)."""
        if self.ssm == "mamba2":
            return self.intermediate_size + self.ssm_conv_channels + self.ssm_heads
        return 2 * self.intermediate_size

    @property
    def ssm_layer_params(self) -> int:
        """A Mamba block (transformers' MambaMixer, Mamba2Mixer) and its norm."""
        h, i, n = self.hidden_size, self.intermediate_size, self.ssm_state_size
        conv = self.ssm_conv_channels
        params = (h * self.ssm_in_width + (self.ssm_in_width if self.ssm_bias else 0)
                  + conv * self.ssm_conv_kernel + (conv if self.ssm_conv_bias else 0)
                  + i * h + (h if self.ssm_bias else 0) + h)  # in, conv, out, the norm
        if self.ssm == "mamba2":  # dt bias, A and D per head; the gated norm over i
            return params + 3 * self.ssm_heads + i
        r = self.ssm_dt_rank
        return params + i * (r + 2 * n) + r * i + i + i * n + i  # x_proj, dt_proj, A, D

    @property
    def ssm_state_elements_per_layer(self) -> int:
        """What a sequence carries from token to token in one layer: the scan's state and
        the convolution's last kernel - 1 inputs."""
        if not self.ssm:
            return 0
        return (self.intermediate_size * self.ssm_state_size
                + self.ssm_conv_channels * (self.ssm_conv_kernel - 1))

    @property
    def is_encoder_decoder(self) -> bool:
        return self.encoder_layers > 0

    @property
    def encoder_layer_params(self) -> int:
        """One of an encoder-decoder's encoder layers: attention, MLP and two norms."""
        return self.attention_params + self.dense_mlp_params + self.norm_params_per_layer

    @property
    def layer_params(self) -> int:
        """An expert layer's (every layer's, in a dense model; a decoder layer of an
        encoder-decoder, with its cross-attention and that attention's norm)."""
        if self.ssm:
            return self.ssm_layer_params
        if self.is_encoder_decoder:
            return (self.encoder_layer_params + self.attention_projection_params
                    + self.final_norm_params)  # fmt: skip
        return (
            self.attention_params
            + self.num_experts * self.expert_params
            + self.router_params
            + self.shared_expert_params
            + self.norm_params_per_layer
            + self.hyper_connection_params
        )

    @property
    def dense_layer_params(self) -> int:
        """One of an MoE model's dense layers."""
        return self.attention_params + self.dense_mlp_params + self.norm_params_per_layer

    @property
    def embedding_params(self) -> int:
        return (self.vocab_size + self.type_vocab_size) * self.hidden_size

    @property
    def lm_head_params(self) -> int:
        """Parameters of the output projection that are not shared with the embedding (an
        encoder's pooler: hidden x hidden and its bias)."""
        if self.encoder:
            return self.hidden_size * (self.hidden_size + 1)
        bias = self.vocab_size if self.lm_head_bias else 0
        return bias + (0 if self.tie_word_embeddings else self.vocab_size * self.hidden_size)

    @property
    def final_norm_params(self) -> int:
        return self.hidden_size * (2 if self.norm == "layernorm" else 1)

    @property
    def encoder_params(self) -> int:
        """An encoder-decoder's encoder: its layers, final norm and position bias, and the
        decoder's position bias (0 for every other model)."""
        if not self.is_encoder_decoder:
            return 0
        return (self.encoder_layers * self.encoder_layer_params + self.final_norm_params
                + 2 * self.relative_buckets * self.num_heads)  # fmt: skip

    @property
    def linear_mixer_difference(self) -> int:
        """What a linear-attention layer holds beyond an attention layer (negative: less)."""
        if not self.linear_layers:
            return 0
        attention = self.attention_params + (2 * self.head_dim if self.qk_norm else 0)
        return self.linear_attention_params - attention

    @cached_property  # a sweep asks for it for every point
    def param_count(self) -> int:
        return (
            len(self.linear_layers) * self.linear_mixer_difference
            + (self.num_layers - self.dense_layer_count) * self.layer_params
            + self.dense_layer_count * self.dense_layer_params
            + self.embedding_params
            + self.lm_head_params
            + self.final_norm_params
            + self.encoder_params
            + self.compression_params
            + self.hc_head_params
        )

    @property
    def mtp_params(self) -> int:
        """The multi-token-prediction modules as a checkpoint stores them (DeepSeek-V3's
        layer 61, README_WEIGHTS.md): per module an expert layer, eh_proj (2 hidden x
        hidden), its norms of the embedding and the hidden state and the shared head's
        norm, and a copy of the embedding table and the output head, which engines share
        with the model. Published totals count them (DeepSeek-V3: 671B + 14B = 685B);
        param_count, what transformers builds, does not."""
        if not self.mtp_layers:
            return 0
        h = self.hidden_size
        own = self.layer_params + 2 * h * h + 3 * h
        return self.mtp_layers * (own + self.embedding_params
                                  + self.vocab_size * self.hidden_size)  # fmt: skip

    @cached_property  # a sweep asks for it for every point
    def active_param_count(self) -> int:
        """Parameters one token touches (MoE: only its routed experts)."""
        idle_experts = self.num_experts - self.experts_per_token if self.is_moe else 0
        return self.param_count - self.expert_layers * idle_experts * self.expert_params

    def kv_elements_per_layer(self, tp: int = 1) -> int:
        """Cached elements per token and layer on one of `tp` ranks: K and V of the rank's
        KV heads, or MLA's latent and rotary key, which every rank holds whole; none in a
        state-space model (its state is per sequence)."""
        if self.ssm:
            return 0
        if self.compress_ratios:  # one head whose key is its value, whole on every rank
            return self.head_dim
        if self.is_mla:
            return self.kv_lora_rank + self.qk_rope_head_dim + self.index_head_dim
        return 2 * max(1, -(-self.num_kv_heads // tp)) * self.head_dim

    def kv_cache_bytes_per_token(self, itemsize: float) -> float:
        """The cache every token adds for good: its layers without a window or a state."""
        return self.full_cache_layers * self.kv_elements_per_layer() * itemsize

    def window_cache_bytes_per_token(self, itemsize: float) -> float:
        """The cache a token adds in the windowed layers, which keep only the last
        `sliding_window` tokens of a sequence (what they read: attention_pairs)."""
        return len(self.bounded_layers) * self.kv_elements_per_layer() * itemsize

    def state_bytes_per_sequence(self, itemsize: float) -> float:
        """A state-space model's or linear attention's cache: constant per sequence,
        whatever its length."""
        return self.num_layers * self.state_elements_per_layer() * itemsize

    def state_elements_per_layer(self, tp: int = 1) -> float:
        """The constant cache per sequence of one of `tp` ranks, averaged over the layers
        (a state-space model's every layer; a hybrid's linear-attention layers)."""
        linear = self.linear_state_elements_per_layer(tp) * len(self.linear_layers)
        return self.ssm_state_elements_per_layer + linear / self.num_layers

    def cache_bytes(self, tokens: Dim, itemsize: float) -> Dim:
        """One sequence's whole cache at `tokens` tokens: what grows with it, what a window
        bounds, and what is constant."""
        return (tokens * self.kv_cache_bytes_per_token(itemsize)
                + np.minimum(tokens, self.cache_window)
                * self.window_cache_bytes_per_token(itemsize)
                + self.state_bytes_per_sequence(itemsize))  # fmt: skip


# HF keys per dialect: our field -> (their key, default or _REQUIRED).
_REQUIRED = object()
# The keys most dialects share, by transformers' usual names; each dialect adds or renames.
_HF_KEYS = {
    "hidden_size": ("hidden_size", _REQUIRED),
    "intermediate_size": ("intermediate_size", _REQUIRED),
    "num_layers": ("num_hidden_layers", _REQUIRED),
    "num_heads": ("num_attention_heads", _REQUIRED),
    "vocab_size": ("vocab_size", _REQUIRED),
    "max_position_embeddings": ("max_position_embeddings", 0),
}
_LLAMA_KEYS = _HF_KEYS | {
    "num_kv_heads": ("num_key_value_heads", None),
    "head_dim": ("head_dim", None),
    "tie_word_embeddings": ("tie_word_embeddings", False),
    "attention_bias": ("attention_bias", False),
    "attention_out_bias": ("attention_bias", False),  # LlamaAttention's o_proj takes it too
    "mlp_bias": ("mlp_bias", False),
    "num_experts": ("num_local_experts", 1),
    "experts_per_token": ("num_experts_per_tok", 1),
}
# Qwen3-MoE: a Llama's keys with its experts' own width; transformers 4.x names the expert
# count num_experts and 5.x num_local_experts (either is read). Dense layers among the
# experts (decoder_sparse_step > 1, mlp_only_layers) are refused: every layer is costed alike.
_MOE_KEYS = _LLAMA_KEYS | {
    "num_experts": (("num_local_experts", "num_experts"), _REQUIRED),
    "expert_intermediate_size": ("moe_intermediate_size", _REQUIRED),
    "decoder_sparse_step": ("decoder_sparse_step", 1),
    "mlp_only_layers": ("mlp_only_layers", None),
}
_QWEN3_MOE_KEYS = _MOE_KEYS
# Qwen2-MoE: the same, with q, k and v biases (qkv_bias, on by default) and a shared expert.
_QWEN2_MOE_KEYS = _MOE_KEYS | {
    "attention_bias": ("qkv_bias", True),
    "shared_expert_width": ("shared_expert_intermediate_size", _REQUIRED),
}
# Mistral: a Llama's keys, with a sliding window on every layer when the file gives one
# (Mistral-7B v0.1's 4,096; null from v0.2 on).
_MISTRAL_KEYS = _LLAMA_KEYS | {"sliding_window": ("sliding_window", None)}
# Gemma: a Llama's keys and shapes (head_dim given: 256 on Gemma-7B), its embeddings tied
# unless the file says otherwise (GemmaConfig's default; the hub's files omit the key).
# Its GeGLU costs as SwiGLU does; the sqrt(hidden) scaling of the embedding output, one
# multiply per element of one layer's input, is not an op here. Gemma-2 adds the sandwich
# norms (post-attention and post-feedforward) and a sliding window on the layers its
# layer_types name (every other one, from the first, in files that predate the key);
# Gemma-3 adds q/k norms and takes sliding_window_pattern (5 local layers, then 1 global)
# where layer_types is absent. Softcapping of logits (tanh per score) is not costed.
_GEMMA_KEYS = _LLAMA_KEYS | {"tie_word_embeddings": ("tie_word_embeddings", True)}
_GEMMA2_KEYS = _GEMMA_KEYS | {"sliding_window": ("sliding_window", None),
                              "layer_types": ("layer_types", None)}
# Gemma-3's hub files name few keys of their text_config (gemma-3-4b-pt: hidden, MLP width,
# layers and window) and leave the rest to Gemma3TextConfig's defaults, as transformers
# reads them: those defaults (transformers 5.24) are this dialect's.
_GEMMA3_KEYS = _GEMMA2_KEYS | {
    "sliding_window_pattern": ("sliding_window_pattern", 6),
    "hidden_size": ("hidden_size", 2304),
    "intermediate_size": ("intermediate_size", 9216),
    "num_layers": ("num_hidden_layers", 26),
    "num_heads": ("num_attention_heads", 8),
    "num_kv_heads": ("num_key_value_heads", 4),
    "head_dim": ("head_dim", 256),
    "vocab_size": ("vocab_size", 262_208),
    "max_position_embeddings": ("max_position_embeddings", 131_072),
    "sliding_window": ("sliding_window", 4096),
}
# Qwen3-Next (Qwen3NextConfig) and Qwen3.5's text model (Qwen3_5MoeTextConfig, the same
# architecture; q, k, v and z projected apart, the same parameters): Qwen3-MoE's keys and
# experts with a gated shared expert, full attention with its output gated by a sigmoid
# (q_proj twice as wide; attn_output_gate, on unless the file says otherwise) and partial
# rotary embedding (partial_rotary_factor, 0.25), and Gated DeltaNet layers: those
# layer_types calls linear_attention, else all but every full_attention_interval-th.
# The dense Qwen3.5 (Qwen3_5TextConfig, the text_config of model_type qwen3_5: Qwen3.5-27B)
# has the same attention and Gated DeltaNet layers and a Llama's SwiGLU MLP
# intermediate_size wide in every layer.
_LINEAR_KEYS = {
    "linear_key_heads": ("linear_num_key_heads", _REQUIRED),
    "linear_value_heads": ("linear_num_value_heads", _REQUIRED),
    "linear_key_dim": ("linear_key_head_dim", _REQUIRED),
    "linear_value_dim": ("linear_value_head_dim", _REQUIRED),
    "linear_conv_kernel": ("linear_conv_kernel_dim", 4),
    "attention_output_gate": ("attn_output_gate", True),
    "layer_types": ("layer_types", None),
    "full_attention_interval": ("full_attention_interval", 4),
    "mtp_layers": ("mtp_num_hidden_layers", 0),
}
_QWEN3_NEXT_KEYS = _MOE_KEYS | _LINEAR_KEYS | {
    "intermediate_size": ("intermediate_size", None),  # Qwen3.5's: every layer has experts
    "shared_expert_width": ("shared_expert_intermediate_size", _REQUIRED),
}
_QWEN3_5_KEYS = _LLAMA_KEYS | _LINEAR_KEYS
# Llama-4 (Llama4TextConfig, the text_config of model_type llama4): a Llama's keys with
# experts intermediate_size wide beside a shared expert as wide (no gate), dense layers
# intermediate_size_mlp wide between the expert layers (interleave_moe_layer_step), and
# chunked local attention (attention_chunk_size) in the layers layer_types calls
# chunked_attention, else in all but every no_rope_layer_interval-th (the NoPE layers,
# which see every key). Its q and k norms have no weights; they and the NoPE layers'
# skipped rotation are not costed apart.
_LLAMA4_KEYS = _LLAMA_KEYS | {
    "intermediate_size": ("intermediate_size_mlp", 16384),
    "expert_intermediate_size": ("intermediate_size", 8192),
    "num_experts": ("num_local_experts", 16),
    "moe_layer_step": ("interleave_moe_layer_step", 1),
    "moe_layers": ("moe_layers", None),
    "attention_chunk_size": ("attention_chunk_size", 8192),
    "layer_types": ("layer_types", None),
    "no_rope_layer_interval": ("no_rope_layer_interval", 4),
    "no_rope_layers": ("no_rope_layers", None),
    "head_dim": ("head_dim", 128),
}
NESTED = {"gemma3": "gemma3_text", "kimi_k25": "kimi_k2", "qwen3_5_moe": "qwen3_5_moe_text",
          "qwen3_5": "qwen3_5_text", "llama4": "llama4_text", "qwen3_vl": "qwen3_vl_text",
          "qwen3_vl_moe": "qwen3_vl_moe_text"}
"""Multimodal model_types whose language model is their `text_config` (of this model_type):
the language model is read, its vision tower is not costed."""
READ_AS = {"qwen3_vl_text": "qwen3", "qwen3_vl_moe_text": "qwen3_moe",
           "deepseek_ref": "deepseek_v4", "mimo": "qwen2"}
"""model_types whose layers and keys are another's, read as that one: Qwen3-VL's language
model is Qwen3's (transformers' Qwen3VLTextAttention keeps Qwen3's q/k norms; its
interleaved multimodal rotary only moves positions) and Qwen3-MoE's; sgl-project's FP8
re-exports of DeepSeek-V4 name their config after DeepSeek's reference code (architectures
DeepseekV4ForCausalLM): V4's keys, those left out at V4's values; Xiaomi's MiMo is Qwen2's
model plus multi-token-prediction layers (its modeling_mimo.py: MiMoModel(Qwen2Model) with
`mtp_layers`), which engines skip when they serve it without speculation (vLLM's MiMo
registration drops the mtp_layers weights) and xpusim does not build."""
_LIST_FIELDS = {"layer_types", "moe_layers", "no_rope_layers", "attn_type_list",
                "compress_ratios"}
_LINEAR_KINDS = ("linear_attention", "full_attention")
# gpt-oss: a Mixtral's keys (experts as wide as intermediate_size), biases on the attention's
# projections, the router and the experts, a learned sink logit per head, and a 128-token
# window on every other layer (layer_types). Its MXFP4 experts are its checkpoint format, read
# from quantization_config beside these keys (workloads/checkpoint.py).
_GPT_OSS_KEYS = _LLAMA_KEYS | {"attention_bias": ("attention_bias", True),
                               "sliding_window": ("sliding_window", None),
                               "layer_types": ("layer_types", None)}
_GPT_OSS_FIXED = dict(mlp_bias=True, router_bias=True, attention_sinks=True)
# GPT-NeoX (Pythia): LayerNorm, biases on the fused QKV, the output and the GeLU MLP, two
# norms read by attention and the MLP in parallel (use_parallel_residual; serially without),
# rotary embedding on rotary_pct of each head (4.x; rope_parameters' partial_rotary_factor in
# 5.x), untied embed_out.
_GPT_NEOX_KEYS = _HF_KEYS | {
    "tie_word_embeddings": ("tie_word_embeddings", False),
    "attention_bias": ("attention_bias", True),
    "parallel_block": ("use_parallel_residual", True),
}
# OPT: LayerNorm (biased), biases everywhere (enable_bias), a ReLU MLP ffn_dim wide (costed
# as the GeLU one: a few vector FLOPs per element apart), tied embeddings, learned absolute
# positions (their table is not counted, as GPT-2's). The projections of a word embedding
# narrower than the model (OPT-350M's word_embed_proj_dim) are refused, not costed.
_OPT_KEYS = _HF_KEYS | {
    "intermediate_size": ("ffn_dim", _REQUIRED),
    "tie_word_embeddings": ("tie_word_embeddings", True),
    "mlp_bias": ("enable_bias", True),
    "word_embed_proj_dim": ("word_embed_proj_dim", None),
}
# DeepSeek-V2/V3 (and R1, V3's architecture): multi-head latent attention, routed experts of
# their own width beside n_shared_experts always run (one MLP as wide as all of them, no
# gate), and the first first_k_dense_replace layers dense. num_key_value_heads is read by
# nothing: MLA's K and V come from one latent. Layers that alternate (moe_layer_freq > 1)
# are refused; the published models have none. The MTP module of V3 (num_nextn_predict_layers)
# is not part of the model transformers builds, nor here.
# DeepSeek's routed experts as DeepSeek-V3's config names them; GLM-4.5 and DeepSeek-V4
# reuse the names.
_ROUTED_EXPERT_KEYS = {
    "num_experts": ("n_routed_experts", _REQUIRED),
    "experts_per_token": ("num_experts_per_tok", _REQUIRED),
    "expert_intermediate_size": ("moe_intermediate_size", _REQUIRED),
}
_DEEPSEEK_KEYS = _HF_KEYS | _ROUTED_EXPERT_KEYS | {
    "tie_word_embeddings": ("tie_word_embeddings", False),
    "attention_bias": ("attention_bias", False),
    "shared_experts": ("n_shared_experts", None),
    "dense_layers": ("first_k_dense_replace", 0),
    "moe_layer_freq": ("moe_layer_freq", 1),
    "kv_lora_rank": ("kv_lora_rank", _REQUIRED),
    "q_lora_rank": ("q_lora_rank", None),  # null: q projected from the hidden state (V2-Lite)
    "qk_nope_head_dim": ("qk_nope_head_dim", _REQUIRED),
    "qk_rope_head_dim": ("qk_rope_head_dim", _REQUIRED),
    "v_head_dim": ("v_head_dim", _REQUIRED),
    "mtp_layers": ("num_nextn_predict_layers", 0),
    "expert_groups": ("n_group", None),  # null or absent: one group (V2's greedy top-k)
}
# GLM-4.5 to GLM-4.7 (Glm4MoeConfig): DeepSeek-V3's experts (n_routed_experts of
# moe_intermediate_size, n_shared_experts always run, the first first_k_dense_replace
# layers dense) under grouped-query attention with biases on q, k and v (not o_proj), an
# optional RMSNorm on each head of q and k (use_qk_norm), rotary embedding on
# partial_rotary_factor (0.5) of each head, and an MTP module (num_nextn_predict_layers).
_GLM4_MOE_KEYS = _LLAMA_KEYS | _ROUTED_EXPERT_KEYS | {
    "shared_experts": ("n_shared_experts", 1),
    "dense_layers": ("first_k_dense_replace", 1),
    "qk_norm": ("use_qk_norm", False),
    "mtp_layers": ("num_nextn_predict_layers", 1),
}
# DeepSeek-V3.2 (DeepseekV32Config): V3's keys and DSA's indexer (index_n_heads heads of
# index_head_dim, index_topk keys per query), on every layer.
_DEEPSEEK_V32_KEYS = _DEEPSEEK_KEYS | {
    "index_heads": ("index_n_heads", 64),
    "index_head_dim": ("index_head_dim", 128),
    "index_topk": ("index_topk", 2048),
}
# DeepSeek-V4 (DeepseekV4ForCausalLM; its inference/model.py, and transformers' DeepseekV4
# built from the same file count alike): see TransformerConfig.compress_ratios. No dense
# MLP: intermediate_size is read as the experts' width.
_DEEPSEEK_V4_KEYS = _HF_KEYS | _ROUTED_EXPERT_KEYS | {
    "intermediate_size": ("moe_intermediate_size", _REQUIRED),
    "num_kv_heads": ("num_key_value_heads", 1),
    "head_dim": ("head_dim", _REQUIRED),
    "attention_bias": ("attention_bias", False),
    "tie_word_embeddings": ("tie_word_embeddings", False),
    "shared_experts": ("n_shared_experts", 0),
    "q_lora_rank": ("q_lora_rank", _REQUIRED),
    "qk_rope_head_dim": ("qk_rope_head_dim", _REQUIRED),
    "index_heads": ("index_n_heads", _REQUIRED),
    "index_head_dim": ("index_head_dim", _REQUIRED),
    "index_topk": ("index_topk", _REQUIRED),
    "o_groups": ("o_groups", _REQUIRED),
    "o_lora_rank": ("o_lora_rank", _REQUIRED),
    "hc_mult": ("hc_mult", 1),
    "hash_layers": ("num_hash_layers", 0),
    "sliding_window": ("sliding_window", _REQUIRED),
    "compress_ratios": ("compress_ratios", _REQUIRED),
    "mtp_layers": ("num_nextn_predict_layers", 0),
}
_V4_RATIOS = (0, 4, 128)
"""The compress ratios DeepSeek-V4's code builds (the overlapping compressor and the
indexer on 4; 128's pool attended whole); another is refused, not guessed at."""
# GLM-5 (GlmMoeDsaConfig, GlmMoeDsaForCausalLM): DeepSeek-V3.2's MLA, DSA indexer
# (GlmMoeDsaIndexer subclasses DeepseekV32Indexer unchanged) and experts under V3.2's keys,
# index_n_heads 32 in its file. transformers' later GLM-5.x configs let a layer reuse the
# previous layer's top-k (indexer_types "shared", from index_topk_pattern or index_topk_freq);
# absent, as in GLM-5's file, every layer runs its own indexer ("full"). Shared layers are
# refused, not costed as full ones (_every_layer_indexed).
_SHARED_INDEXER_KEYS = ("indexer_types", "index_topk_pattern", "index_topk_freq")
# MiniMax-M2 (and M2.1 to M2.7): full grouped-query attention (not MiniMax-01's lightning
# attention), rotary embedding on rotary_dim of each head, q and k normed over all their
# heads at once (qk_norm_type per_layer), Mixtral's experts (intermediate_size wide) under a
# sigmoid router whose correction bias is a buffer. Its MTP modules are not built.
_MINIMAX_M2_KEYS = _LLAMA_KEYS | {"qk_norm": ("use_qk_norm", True)}
# MiniMax-M1 (and MiniMax-Text-01, the same architecture; model_type minimax_m1, its own
# remote code): a Mixtral's keys and experts (num_local_experts, each intermediate_size
# wide, top num_experts_per_tok, no shared expert), grouped-query softmax attention with
# rotary embedding on rotary_dim of each head in the layers attn_type_list marks 1, and
# lightning attention (TransformerConfig.linear_attention) in those it marks 0. Its
# post-norm residuals scaled by layernorm_*_alpha (DeepNorm) are the same norms and adds
# in another order, costed as the builder's pre-norm ones.
_MINIMAX_M1_KEYS = _LLAMA_KEYS | {"attn_type_list": ("attn_type_list", _REQUIRED)}
# BERT and RoBERTa (XLM-RoBERTa too): encoders. Post-LayerNorm blocks (each sublayer's
# output added to its input, then normed), biases on every linear layer, a GeLU MLP, learned
# absolute positions (their table is not counted, as GPT-2's is not) and token types, and a
# pooler; the embeddings' LayerNorm takes the place of a decoder's final norm.
_BERT_KEYS = _HF_KEYS | {"type_vocab_size": ("type_vocab_size", 2)}
_BERT_FIXED = dict(encoder=True, gated_mlp=False, norm="layernorm", attention_bias=True,
                   attention_out_bias=True, mlp_bias=True, rotary_fraction=0.0,
                   tie_word_embeddings=True)  # fmt: skip
# Mamba (Gu and Dao 2023) and Mamba-2 (Dao and Gu 2024), as transformers' MambaConfig and
# Mamba2Config name them: RMSNorms, tied embeddings (Mamba) or not (Mamba-2, as its config
# defaults), the mixer's width expand x hidden_size; Mamba's time_step_rank "auto" is
# ceil(hidden_size / 16), as MambaConfig computes it.
_SSM_KEYS = {
    "hidden_size": ("hidden_size", _REQUIRED),
    "num_layers": ("num_hidden_layers", _REQUIRED),
    "vocab_size": ("vocab_size", _REQUIRED),
    "ssm_state_size": ("state_size", 16),
    "ssm_conv_kernel": ("conv_kernel", 4),
    "expand": ("expand", 2),
    "ssm_bias": ("use_bias", False),
    "ssm_conv_bias": ("use_conv_bias", True),
}
_MAMBA_KEYS = _SSM_KEYS | {"tie_word_embeddings": ("tie_word_embeddings", True),
                           "ssm_dt_rank": ("time_step_rank", "auto")}  # fmt: skip
_MAMBA2_KEYS = _SSM_KEYS | {
    "ssm_state_size": ("state_size", 128),
    "tie_word_embeddings": ("tie_word_embeddings", False),
    "ssm_heads": ("num_heads", 128),
    "head_dim": ("head_dim", 64),
    "ssm_groups": ("n_groups", 8),
    "ssm_chunk": ("chunk_size", 256),
}
# T5 (and Flan-T5, T5 v1.1, mT5's shapes): its own keys; RMS norms without bias, no biases,
# no rotary embedding; feed_forward_proj "relu" (two matmuls) or "gated-gelu" (three; the
# gated GeLU is costed as the SwiGLU builder's, a few vector FLOPs per element apart);
# num_decoder_layers null means num_layers.
_T5_KEYS = {
    "hidden_size": ("d_model", _REQUIRED),
    "intermediate_size": ("d_ff", _REQUIRED),
    "encoder_layers": ("num_layers", _REQUIRED),
    "num_layers": ("num_decoder_layers", None),
    "num_heads": ("num_heads", _REQUIRED),
    "head_dim": ("d_kv", _REQUIRED),
    "vocab_size": ("vocab_size", _REQUIRED),
    "tie_word_embeddings": ("tie_word_embeddings", True),
    "relative_buckets": ("relative_attention_num_buckets", 32),
    "feed_forward_proj": ("feed_forward_proj", "relu"),
}
_GPTJ_KEYS = {
    "hidden_size": ("n_embd", _REQUIRED),
    "intermediate_size": ("n_inner", None),
    "num_layers": ("n_layer", _REQUIRED),
    "num_heads": ("n_head", _REQUIRED),
    "vocab_size": ("vocab_size", _REQUIRED),
    "tie_word_embeddings": ("tie_word_embeddings", False),
    "rotary_dim": ("rotary_dim", None),
    "max_position_embeddings": ("n_positions", 0),
}
# Falcon: its own keys. Attention is multi-query (one KV head) unless the new decoder
# architecture of Falcon-40B/180B gives num_kv_heads; the block is parallel (one LayerNorm,
# two with the new architecture); the MLP is GeLU, ffn_hidden_size wide (4x hidden when
# null); `bias` puts biases on every linear layer but the tied LM head; ALiBi replaces the
# rotary embedding (its bias add is not costed).
_FALCON_KEYS = _HF_KEYS | {
    "intermediate_size": ("ffn_hidden_size", None),
    "num_kv_heads": ("num_kv_heads", None),
    "tie_word_embeddings": ("tie_word_embeddings", True),
    "attention_bias": ("bias", False),
    "parallel_block": ("parallel_attn", True),
    "multi_query": ("multi_query", True),
    "new_decoder_architecture": ("new_decoder_architecture", False),
    "alibi": ("alibi", False),
    "parallel_norms": ("num_ln_in_parallel_attn", None),
}
# GPT-2's keys (model_type "gpt2"), which Megatron-LM's GPT models share: GPT-J's without
# rotary embedding, and tied embeddings by default (as in Hugging Face's GPT2Config).
_GPT2_KEYS = {k: v for k, v in _GPTJ_KEYS.items() if k != "rotary_dim"} | {
    "tie_word_embeddings": ("tie_word_embeddings", True)
}
DIALECTS = {
    # model_type -> its keys. Each reads its configs' parameter counts exactly (checked
    # against transformers' own models on the meta device, tests/test_transformer.py); a
    # model_type not here is refused rather than read as a Llama, which misread Qwen3-MoE
    # (233.5B for 30.5B), Gemma-2 (untied embeddings), Falcon (its single KV head) and BERT
    # (a decoder) without a word.
    "llama": _LLAMA_KEYS, "mistral": _MISTRAL_KEYS, "mixtral": _LLAMA_KEYS,
    "qwen2": _LLAMA_KEYS, "phi3": _LLAMA_KEYS,
    # Qwen3: a Llama with an RMSNorm on each head of q and k before the rotary embedding
    # (Qwen3Attention's q_norm and k_norm) and head_dim given (128).
    "qwen3": _LLAMA_KEYS, "qwen3_moe": _QWEN3_MOE_KEYS, "qwen2_moe": _QWEN2_MOE_KEYS,
    # Gemma, Gemma-2, Gemma-3 (the text model; gemma3's text_config): see _GEMMA_KEYS.
    "gemma": _GEMMA_KEYS, "gemma2": _GEMMA2_KEYS, "gemma3_text": _GEMMA3_KEYS,
    "palm": _LLAMA_KEYS,  # xpusim's own (zoo/palm-540b.json)
    "gptj": _GPTJ_KEYS, "gpt2": _GPT2_KEYS, "falcon": _FALCON_KEYS,
    "deepseek_v2": _DEEPSEEK_KEYS, "deepseek_v3": _DEEPSEEK_KEYS, "gpt_oss": _GPT_OSS_KEYS,
    # Kimi K2 (and K2.5's language model): DeepSeek-V3's architecture and keys
    "kimi_k2": _DEEPSEEK_KEYS, "glm4_moe": _GLM4_MOE_KEYS, "minimax_m2": _MINIMAX_M2_KEYS,
    "gpt_neox": _GPT_NEOX_KEYS, "opt": _OPT_KEYS,
    "bert": _BERT_KEYS, "roberta": _BERT_KEYS, "xlm-roberta": _BERT_KEYS,
    "mamba": _MAMBA_KEYS, "mamba2": _MAMBA2_KEYS, "t5": _T5_KEYS,
    "deepseek_v32": _DEEPSEEK_V32_KEYS, "llama4_text": _LLAMA4_KEYS,
    "glm_moe_dsa": _DEEPSEEK_V32_KEYS,
    "qwen3_next": _QWEN3_NEXT_KEYS, "qwen3_5_moe_text": _QWEN3_NEXT_KEYS,
    "qwen3_5_text": _QWEN3_5_KEYS, "minimax_m1": _MINIMAX_M1_KEYS,
    "deepseek_v4": _DEEPSEEK_V4_KEYS,
}  # fmt: skip
# Architectures read from public code but not built yet, each with what is missing (a one-line
# refusal, rather than a list of every supported model_type). See docs/models.md.
NOT_BUILT: dict[str, str] = {}
_ZERO_ALLOWED = {"max_position_embeddings", "dense_layers", "shared_experts", "hash_layers",
                 "type_vocab_size", "relative_buckets", "mtp_layers"}
_BOOL_FIELDS = {"tie_word_embeddings", "attention_bias", "attention_out_bias", "mlp_bias",
                "parallel_block", "multi_query", "new_decoder_architecture", "alibi",
                "ssm_bias", "ssm_conv_bias", "attention_output_gate", "qk_norm"}
_GPTJ_FIXED = dict(
    gated_mlp=False, norm="layernorm", parallel_block=True, mlp_bias=True, lm_head_bias=True
)
_QWEN2_FIXED = dict(attention_bias=True, attention_out_bias=False)  # q, k, v only
_QWEN3_FIXED = dict(qk_norm=True)
# GPT-2 / Megatron GPT: serial blocks, LayerNorm, GeLU MLP, biases everywhere but the tied LM
# head, learned absolute positions (no rotary embedding; the position table is not counted).
_GPT2_FIXED = dict(
    gated_mlp=False, norm="layernorm", attention_bias=True, attention_out_bias=True,
    mlp_bias=True, rotary_fraction=0.0
)
# PaLM (xpusim's own model_type; llama keys): attention and MLP in parallel on one normed
# input (Chowdhery et al. 2022, section 2). Its LayerNorm has no bias, so it counts the
# parameters of an RMSNorm (its mean subtraction, 2 vector FLOPs per element, is not counted).
_PALM_FIXED = dict(parallel_block=True)


MAX_DIM = 2**24
"""The widest dimension xpusim builds (hidden, MLP, vocabulary, heads): 16M, 64x Gemma's
256,000-token vocabulary and 400x the zoo's widest hidden size (Megatron-530B's 20,480).
Wider is a typo; the bound also keeps a weight matrix's element count (2^48) far inside the
64-bit integers shapes are held in."""
MAX_PARAMS = 1e15
"""~1,900x the zoo's largest model (Megatron-530B): a config past it is a typo (every width
at its limit gives 10^20), refused rather than simulated."""
_LIMITS = {
    # The deepest model xpusim builds: ~850x the deepest published LLM (PaLM's 118 layers).
    # Layers are costed once per distinct shape and pipeline stages are counts, so a deeper
    # model would simulate, but a config that deep is a typo.
    "num_layers": 100_000,
    "num_experts": 2**16,
    "max_position_embeddings": 2**40,
}


def config_from_hf(data: dict, name: str, origin: str) -> TransformerConfig:
    """Reads a Hugging Face config dict; a missing or bad field is a UserError naming it."""
    if not isinstance(data, dict):
        raise UserError(f"{origin}: expected a JSON object")
    model_type = data.get("model_type", "llama")
    if isinstance(model_type, str) and model_type in NESTED:
        text = data.get("text_config")
        if not isinstance(text, dict):
            raise UserError(f"{origin}: model_type {model_type!r} reads its language model "
                            "from 'text_config', which is missing or not an object")  # fmt: skip
        data, model_type = {**text, "model_type": NESTED[model_type]}, NESTED[model_type]
    if isinstance(model_type, str):
        model_type = READ_AS.get(model_type, model_type)
    if isinstance(model_type, str) and model_type in NOT_BUILT:
        raise UserError(f"{origin}: model_type {model_type!r} is not supported: "
                        f"{NOT_BUILT[model_type]}")  # fmt: skip
    if not isinstance(model_type, str) or model_type not in DIALECTS:
        raise UserError(f"{origin}: model_type {model_type!r} is not supported (supported: "
                        f"{', '.join(sorted(DIALECTS))}); read as a Llama its keys would "
                        "give a wrong model")  # fmt: skip
    keys = {ours: (_present(theirs, data), default)
            for ours, (theirs, default) in DIALECTS[model_type].items()}  # fmt: skip
    fields: dict[str, object] = {}
    for ours, (theirs, default) in keys.items():
        value = data.get(theirs, default)
        if value is _REQUIRED:
            named = DIALECTS[model_type][ours][0]
            either = " or ".join(map(repr, named)) if isinstance(named, tuple) else repr(named)
            raise UserError(f"{origin}: missing field {either} (model_type {model_type!r})")
        if value is None and default is _REQUIRED:
            raise UserError(f"{origin}: field {theirs!r} must be a positive integer, got null")
        if value is None and default is not None and ours not in _NULL_MEANS_NONE:
            raise UserError(f"{origin}: field {theirs!r} is null; give a value, or leave it "
                            f"out for the default {default!r}")  # fmt: skip
        fields[ours] = value
    if model_type in ("qwen3_moe", "qwen2_moe", "qwen3_next", "qwen3_5_moe_text"):
        _one_kind_of_layer(fields, origin)
        keys = {ours: key for ours, key in keys.items() if ours in fields}
    if model_type in ("mamba", "mamba2"):
        _ssm(fields, model_type, origin)
        keys = {ours: key for ours, key in keys.items() if ours in fields}
    if model_type == "t5":
        _t5(fields, origin)
        keys = {ours: key for ours, key in keys.items() if ours in fields}
    for ours, (theirs, _) in keys.items():
        value = fields[ours]
        if ours in _LIST_FIELDS:
            continue  # read where it is used (_sliding)
        if ours in _BOOL_FIELDS:
            if not isinstance(value, bool):
                raise UserError(f"{origin}: field {theirs!r} must be true or false, got {value!r}")
        elif value is not None and (
            isinstance(value, bool)
            or not isinstance(value, int)
            or value < 0
            or (value == 0 and ours not in _ZERO_ALLOWED)
        ):
            raise UserError(f"{origin}: field {theirs!r} must be a positive integer, got {value!r}")

    for ours, (theirs, _) in keys.items():
        limit = _LIMITS.get(ours, MAX_DIM)
        if isinstance(fields[ours], int) and fields[ours] > limit:
            raise UserError(f"{origin}: field {theirs!r} is {fields[ours]}; at most "
                            f"{limit:,} can be simulated")  # fmt: skip
    hidden, heads = int(fields["hidden_size"]), int(fields["num_heads"])
    if not fields.get("head_dim") and hidden % heads:
        names = "'n_embd' and 'n_head'" if model_type in ("gptj", "gpt2") else (
            "'hidden_size' and 'num_attention_heads'")
        raise UserError(f"{origin}: fields {names}: {heads} heads do not divide {hidden} "
                        f"hidden units (give 'head_dim' if they are not meant to)")
    if model_type in ("gptj", "gpt2"):
        rotary_dim = fields.pop("rotary_dim", None)
        head_dim = hidden // heads
        fields.update(_GPTJ_FIXED if model_type == "gptj" else _GPT2_FIXED)
        fields["intermediate_size"] = fields["intermediate_size"] or 4 * hidden
        if model_type == "gptj":
            if (rotary_dim or 0) > head_dim:
                raise UserError(f"{origin}: field 'rotary_dim' ({rotary_dim}) exceeds the "
                                f"head size ({head_dim})")
            fields["rotary_fraction"] = (rotary_dim or head_dim) / head_dim
        fields["num_kv_heads"] = heads
    elif model_type == "qwen2":
        fields.update(_QWEN2_FIXED)
    elif model_type in ("qwen3", "qwen3_moe"):
        fields.update(_QWEN3_FIXED)
    elif model_type == "llama4_text":
        _llama4(fields, origin)
    elif model_type == "glm4_moe":
        shared = int(fields.pop("shared_experts") or 0)
        fields.update(attention_out_bias=False, shared_expert_gate=False,
                      shared_expert_width=shared * int(fields["expert_intermediate_size"]),
                      rotary_fraction=_rotary_fraction(data, "partial_rotary_factor", 0.5,
                                                       origin))  # fmt: skip
    elif model_type in ("qwen3_next", "qwen3_5_moe_text", "qwen3_5_text"):
        _linear_schedule(fields, origin)
        fields["intermediate_size"] = (fields["intermediate_size"]
                                       or fields.get("expert_intermediate_size"))  # fmt: skip
        fields.update(_QWEN3_FIXED, linear_attention="gated_deltanet",
                      rotary_fraction=_rotary_fraction(data, "partial_rotary_factor", 0.25,
                                                       origin))  # fmt: skip
    elif model_type == "qwen2_moe":
        fields["attention_out_bias"] = False  # q, k and v have biases, o_proj none
    elif model_type == "falcon":
        _falcon(fields, heads, hidden)
    elif model_type == "palm":
        fields.update(_PALM_FIXED)
    elif model_type in ("deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2"):
        _deepseek(fields, origin)
    elif model_type == "glm_moe_dsa":
        _every_layer_indexed(data, origin)
        _deepseek(fields, origin)
    elif model_type == "minimax_m2":
        head_dim = int(fields.get("head_dim") or hidden // heads)  # type: ignore[call-overload]
        rotary = data.get("rotary_dim", head_dim)
        if isinstance(rotary, bool) or not isinstance(rotary, int) or not 0 < rotary <= head_dim:
            raise UserError(f"{origin}: field 'rotary_dim' must be an integer from 1 to "
                            f"head_dim ({head_dim}), got {rotary!r}")  # fmt: skip
        fields.update(qk_norm_whole=data.get("qk_norm_type", "per_layer") == "per_layer",
                      rotary_fraction=rotary / head_dim)  # fmt: skip
    elif model_type == "minimax_m1":
        _minimax_m1(fields, data, origin)
    elif model_type == "deepseek_v4":
        _deepseek_v4(fields, origin)
    elif model_type == "gemma3_text":
        fields.update(_QWEN3_FIXED)  # q and k norms
    elif model_type == "gpt_oss":
        fields.update(_GPT_OSS_FIXED)
    elif model_type == "gpt_neox":
        fields.update(gated_mlp=False, norm="layernorm", mlp_bias=True, parallel_norms=2,
                      attention_out_bias=fields["attention_bias"],
                      rotary_fraction=_rotary_fraction(data, "rotary_pct", 0.25, origin))
    elif model_type == "opt":
        _opt(fields, hidden, origin)
    elif model_type in ("bert", "roberta", "xlm-roberta"):
        fields.update(_BERT_FIXED)
    if model_type in ("gemma2", "gemma3_text"):
        fields["sandwich_norms"] = True
    if "sliding_window" in fields:
        _sliding(fields, model_type, origin)
    fields["num_kv_heads"] = fields.get("num_kv_heads") or heads
    fields["head_dim"] = fields.get("head_dim") or hidden // heads
    if heads % int(fields["num_kv_heads"]):
        raise UserError(
            f"{origin}: field 'num_key_value_heads' ({fields['num_kv_heads']}) "
            f"must divide num_attention_heads ({heads})"
        )
    if int(fields.get("experts_per_token", 1)) > int(fields.get("num_experts", 1)):
        raise UserError(f"{origin}: field 'num_experts_per_tok' exceeds "
                        f"{keys['num_experts'][0]!r}")  # fmt: skip
    config = TransformerConfig(name=name, model_type=model_type, **fields)  # type: ignore[arg-type]
    if config.param_count > MAX_PARAMS:
        raise UserError(f"{origin}: {config.param_count:.3g} parameters; at most "
                        f"{MAX_PARAMS:.0e} can be simulated")
    return config


def _t5(fields: dict[str, object], origin: str) -> None:
    """T5's MLP kind, and its decoder as deep as its encoder unless the file says."""
    projection = fields.pop("feed_forward_proj")
    if projection not in ("relu", "gated-gelu", "gated-relu", "gelu"):
        raise UserError(f"{origin}: field 'feed_forward_proj' must be relu, gelu, gated-gelu or "
                        f"gated-relu, got {projection!r}")  # fmt: skip
    fields["num_layers"] = fields["num_layers"] or fields["encoder_layers"]
    fields.update(gated_mlp=str(projection).startswith("gated"), rotary_fraction=0.0)


def _ssm(fields: dict[str, object], model_type: str, origin: str) -> None:
    """A Mamba's fields as the transformer config's: the mixer's width, dt's rank, and the
    heads Mamba-2's scan splits the width into (one for Mamba's channels)."""
    hidden, expand = fields["hidden_size"], fields.pop("expand")
    if isinstance(hidden, bool) or not isinstance(hidden, int) or hidden <= 0:
        raise UserError(f"{origin}: field 'hidden_size' must be a positive integer, got "
                        f"{hidden!r}")  # fmt: skip
    if isinstance(expand, bool) or not isinstance(expand, int | float) or not 0 < expand <= 64:
        raise UserError(f"{origin}: field 'expand' must be a number in (0, 64], got {expand!r}")
    inner = int(expand * hidden)
    fields.update(ssm=model_type, intermediate_size=inner, gated_mlp=False)
    if model_type == "mamba":
        if fields["ssm_dt_rank"] == "auto":  # as MambaConfig computes it
            fields["ssm_dt_rank"] = math.ceil(hidden / 16)
        fields.update(num_heads=1, num_kv_heads=1, head_dim=inner)
        return
    heads, head_dim = fields["ssm_heads"], fields["head_dim"]
    if isinstance(heads, int) and isinstance(head_dim, int) and heads * head_dim != inner:
        raise UserError(f"{origin}: fields 'num_heads' x 'head_dim' ({heads} x {head_dim}) must "
                        f"equal expand x hidden_size ({inner}), the width the scan splits")
    fields.update(num_heads=heads, num_kv_heads=heads)


def _present(theirs: str | tuple[str, ...], data: dict) -> str:
    """The config's key for a field that dialects name differently (the first present)."""
    if isinstance(theirs, str):
        return theirs
    return next((key for key in theirs if key in data), theirs[0])


def _falcon(fields: dict[str, object], heads: int, hidden: int) -> None:
    """Falcon's flags as the transformer config's fields (FalconAttention, FalconDecoderLayer)."""
    new, multi_query = fields.pop("new_decoder_architecture"), fields.pop("multi_query")
    alibi, norms = fields.pop("alibi"), fields.pop("parallel_norms")
    if new:
        fields["num_kv_heads"] = fields.get("num_kv_heads") or heads
    else:
        fields["num_kv_heads"] = 1 if multi_query else heads
    bias = fields["attention_bias"]
    fields.update(gated_mlp=False, norm="layernorm", attention_out_bias=bias, mlp_bias=bias,
                  rotary_fraction=0.0 if alibi else 1.0,
                  parallel_norms=(norms or 2) if new else 1)  # fmt: skip
    fields["intermediate_size"] = fields["intermediate_size"] or 4 * hidden


def _rotary_fraction(data: dict, key: str, default: float, origin: str) -> float:
    """The share of each head the rotary embedding turns: `key` (transformers 4.x) or
    rope_parameters' partial_rotary_factor (5.x)."""
    rope = data.get("rope_parameters")
    value = data.get(key, rope.get("partial_rotary_factor") if isinstance(rope, dict) else None)
    value = default if value is None else value
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise UserError(f"{origin}: field {key!r} must be a fraction in [0, 1], got {value!r}")
    return float(value)


_NULL_MEANS_NONE = frozenset({"sliding_window", "attention_chunk_size"})
"""Fields whose null says "none" (no window), as Hugging Face's configs write it. Any other
field with a default must hold a value when present: a null there would reach arithmetic."""


def _opt(fields: dict[str, object], hidden: int, origin: str) -> None:
    projected = fields.pop("word_embed_proj_dim")
    if projected not in (None, hidden):
        raise UserError(f"{origin}: field 'word_embed_proj_dim' ({projected}) differs from "
                        f"'hidden_size' ({hidden}): the embedding's projections are not "
                        "modelled")  # fmt: skip
    bias = fields["mlp_bias"]
    fields.update(gated_mlp=False, norm="layernorm", attention_bias=bias,
                  attention_out_bias=bias, rotary_fraction=0.0)  # fmt: skip


def _sliding(fields: dict[str, object], model_type: str, origin: str) -> None:
    """Which layers have the sliding window: those `layer_types` calls sliding_attention,
    else as transformers derives them (Gemma-2: every other layer from the first; Gemma-3:
    all but every `sliding_window_pattern`-th; Mistral: every layer)."""
    layers, window = int(fields["num_layers"]), fields.pop("sliding_window")
    types, pattern = fields.pop("layer_types", None), fields.pop("sliding_window_pattern", None)
    if window is None:
        return
    if types is not None:
        kinds = ("sliding_attention", "full_attention")
        if (not isinstance(types, list) or len(types) != layers
                or any(t not in kinds for t in types)):  # fmt: skip
            raise UserError(f"{origin}: field 'layer_types' must list {layers} layers, each "
                            f"{' or '.join(map(repr, kinds))}")  # fmt: skip
        sliding = [i for i, t in enumerate(types) if t == "sliding_attention"]
    elif model_type == "gemma2":
        sliding = list(range(0, layers, 2))
    elif model_type == "gemma3_text":
        sliding = [i for i in range(layers) if (i + 1) % int(pattern or 6)]
    elif model_type == "gpt_oss":
        sliding = list(range(0, layers, 2))
    else:
        sliding = list(range(layers))
    fields.update(sliding_window=window, sliding_layers=tuple(sliding))


def _llama4(fields: dict[str, object], origin: str) -> None:
    """Llama-4's experts, shared expert, interleaved dense layers and chunked layers."""
    layers, step = int(fields["num_layers"]), int(fields["moe_layer_step"])
    moe_layers = fields.pop("moe_layers")
    if moe_layers is not None and list(moe_layers) != list(range(step - 1, layers, step)):
        raise UserError(f"{origin}: field 'moe_layers' other than every "
                        f"interleave_moe_layer_step-th layer is not modelled")  # fmt: skip
    types, interval = fields.pop("layer_types"), int(fields.pop("no_rope_layer_interval"))
    chunk = fields["attention_chunk_size"]
    roped = fields.pop("no_rope_layers")  # 1: the layer rotates (and is chunked), 0: NoPE
    if types is None and roped:
        if not isinstance(roped, list) or len(roped) != layers or set(roped) - {0, 1}:
            raise UserError(f"{origin}: field 'no_rope_layers' must list {layers} layers, "
                            "each 0 or 1")  # fmt: skip
        types = ["chunked_attention" if r and chunk else "full_attention" for r in roped]
    kinds = ("chunked_attention", "full_attention")
    if types is not None:
        if (not isinstance(types, list) or len(types) != layers
                or any(t not in kinds for t in types)):  # fmt: skip
            raise UserError(f"{origin}: field 'layer_types' must list {layers} layers, each "
                            f"{' or '.join(map(repr, kinds))}")  # fmt: skip
        chunked = [i for i, t in enumerate(types) if t == "chunked_attention"]
    else:
        chunked = [i for i in range(layers) if (i + 1) % interval] if chunk else []
    fields.update(chunked_layers=tuple(chunked), attention_chunk_size=chunk or 0,
                  shared_expert_width=fields["expert_intermediate_size"],
                  shared_expert_gate=False)  # fmt: skip


def _minimax_m1(fields: dict[str, object], data: dict, origin: str) -> None:
    """MiniMax-M1's layer schedule (attn_type_list: 0 lightning, 1 softmax), its lightning
    layers' heads (the attention's own) and its partial rotary embedding."""
    layers, heads = int(fields["num_layers"]), int(fields["num_heads"])
    head_dim = int(fields.get("head_dim") or int(fields["hidden_size"]) // heads)
    types = fields.pop("attn_type_list")
    if not isinstance(types, list) or len(types) != layers or any(
            t not in (0, 1) or isinstance(t, bool) for t in types):  # fmt: skip
        raise UserError(f"{origin}: field 'attn_type_list' must list {layers} layers, each 0 "
                        "(lightning attention) or 1 (softmax attention)")  # fmt: skip
    if data.get("shared_intermediate_size", 0):
        raise UserError(f"{origin}: field 'shared_intermediate_size' other than 0 (a shared "
                        "expert) is not modelled for MiniMax-M1; its published models have none")
    rotary = data.get("rotary_dim", head_dim)
    if isinstance(rotary, bool) or not isinstance(rotary, int) or not 0 < rotary <= head_dim:
        raise UserError(f"{origin}: field 'rotary_dim' must be an integer from 1 to "
                        f"head_dim ({head_dim}), got {rotary!r}")  # fmt: skip
    fields.update(linear_attention="lightning",
                  linear_layers=tuple(i for i, t in enumerate(types) if t == 0),
                  linear_key_heads=heads, linear_value_heads=heads, linear_key_dim=head_dim,
                  linear_value_dim=head_dim, linear_conv_kernel=0,
                  rotary_fraction=rotary / head_dim)  # fmt: skip


def _deepseek_v4(fields: dict[str, object], origin: str) -> None:
    """DeepSeek-V4's per-layer compression (a layer past the list's end has none, as its
    code reads it; V4-Flash lists a 44th ratio, its MTP layer's), every layer's window,
    its sinks and its shared expert."""
    layers = int(fields["num_layers"])
    ratios = fields.pop("compress_ratios")
    if not isinstance(ratios, list) or any(
            r not in _V4_RATIOS or isinstance(r, bool) for r in ratios):  # fmt: skip
        raise UserError(f"{origin}: field 'compress_ratios' must list each layer's ratio, "
                        f"one of {', '.join(map(str, _V4_RATIOS))}")  # fmt: skip
    if fields["attention_bias"]:
        raise UserError(f"{origin}: field 'attention_bias' true is not modelled for "
                        "DeepSeek-V4 (its published models have none)")  # fmt: skip
    if int(fields["num_kv_heads"]) != 1:
        raise UserError(f"{origin}: field 'num_key_value_heads' must be 1: DeepSeek-V4's "
                        "attention has one shared KV head")  # fmt: skip
    heads, groups = int(fields["num_heads"]), int(fields["o_groups"])
    if heads % groups:
        raise UserError(f"{origin}: field 'o_groups' ({groups}) must divide "
                        f"num_attention_heads ({heads})")  # fmt: skip
    if int(fields["head_dim"]) % max(_V4_RATIOS) or int(fields["index_head_dim"]) % 4:
        raise UserError(f"{origin}: fields 'head_dim' and 'index_head_dim' must be multiples "
                        f"of {max(_V4_RATIOS)} and 4: a compressed entry is costed as "
                        "that many tokens' share of its width")  # fmt: skip
    if int(fields["hash_layers"]) > layers:
        raise UserError(f"{origin}: field 'num_hash_layers' exceeds 'num_hidden_layers'")
    ratios = [*ratios[:layers], *[0] * (layers - len(ratios))]
    shared = int(fields.pop("shared_experts") or 0)
    fields.update(compress_ratios=tuple(ratios), attention_sinks=True,
                  sliding_layers=tuple(range(layers)),
                  rotary_fraction=int(fields["qk_rope_head_dim"]) / int(fields["head_dim"]),
                  shared_expert_width=shared * int(fields["expert_intermediate_size"]),
                  shared_expert_gate=False, routing_alpha=DEEPSEEK_ROUTING_ALPHA)  # fmt: skip
    window = fields.pop("sliding_window")
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise UserError(f"{origin}: field 'sliding_window' must be a positive integer, "
                        f"got {window!r}")  # fmt: skip
    fields["sliding_window"] = window


def _linear_schedule(fields: dict[str, object], origin: str) -> None:
    """Which layers are linear attention: those `layer_types` calls linear_attention, else
    all but every full_attention_interval-th (Qwen3NextConfig's derivation)."""
    layers = int(fields["num_layers"])
    types, interval = fields.pop("layer_types"), fields.pop("full_attention_interval")
    if types is not None:
        if (not isinstance(types, list) or len(types) != layers
                or any(t not in _LINEAR_KINDS for t in types)):  # fmt: skip
            raise UserError(f"{origin}: field 'layer_types' must list {layers} layers, each "
                            f"{' or '.join(map(repr, _LINEAR_KINDS))}")  # fmt: skip
        linear = [i for i, t in enumerate(types) if t == "linear_attention"]
    elif isinstance(interval, bool) or not isinstance(interval, int) or interval <= 0:
        raise UserError(f"{origin}: field 'full_attention_interval' must be a positive "
                        f"integer, got {interval!r}")  # fmt: skip
    else:
        linear = [i for i in range(layers) if (i + 1) % interval]
    fields["linear_layers"] = tuple(linear)


def _deepseek(fields: dict[str, object], origin: str) -> None:
    """DeepSeek's keys as the transformer config's fields (DeepseekV2Attention, DeepseekV2MoE)."""
    if fields.pop("moe_layer_freq") != 1:
        raise UserError(f"{origin}: field 'moe_layer_freq' other than 1 (expert layers "
                        "alternating with dense ones) is not modelled")  # fmt: skip
    if fields["attention_bias"]:
        raise UserError(f"{origin}: field 'attention_bias' true is not modelled for latent "
                        "attention (no published DeepSeek model has it)")  # fmt: skip
    if int(fields["dense_layers"]) > int(fields["num_layers"]):
        raise UserError(f"{origin}: field 'first_k_dense_replace' "
                        f"({fields['dense_layers']}) exceeds 'num_hidden_layers'")  # fmt: skip
    if fields.get("index_topk") and not fields["q_lora_rank"]:
        raise UserError(f"{origin}: field 'index_topk' needs 'q_lora_rank': DSA's indexer "
                        "projects its queries from the query latent")  # fmt: skip
    nope, rope = int(fields.pop("qk_nope_head_dim")), int(fields["qk_rope_head_dim"])
    shared = int(fields.pop("shared_experts") or 0)
    fields.update(head_dim=nope + rope, num_kv_heads=fields["num_heads"],
                  rotary_fraction=rope / (nope + rope), q_lora_rank=fields["q_lora_rank"] or 0,
                  shared_expert_width=shared * int(fields["expert_intermediate_size"]),
                  shared_expert_gate=False, routing_alpha=DEEPSEEK_ROUTING_ALPHA,
                  expert_groups=int(fields["expert_groups"] or 1))  # fmt: skip


def _every_layer_indexed(data: dict, origin: str) -> None:
    """GLM-5.x's indexer sharing (a layer reusing the previous layer's top-k) refused: every
    layer is costed with its own indexer, as GLM-5 runs (no sharing key in its file)."""
    for key in _SHARED_INDEXER_KEYS:
        value = data.get(key)
        if value is None or (key == "index_topk_freq" and value == 1):
            continue
        if key == "indexer_types" and isinstance(value, list) and set(value) <= {"full"}:
            continue
        if key == "index_topk_pattern" and isinstance(value, str) and set(value) <= {"F"}:
            continue
        raise UserError(f"{origin}: field {key!r} ({value!r}): layers that reuse another "
                        "layer's top-k (indexer_types 'shared') are not modelled")  # fmt: skip


def _one_kind_of_layer(fields: dict[str, object], origin: str) -> None:
    """Qwen MoE's dense layers among its expert layers: refused, since every layer is costed
    as the same kind; the published models have none (decoder_sparse_step 1, no
    mlp_only_layers)."""
    step, dense = fields.pop("decoder_sparse_step"), fields.pop("mlp_only_layers")
    if step != 1 or dense:
        raise UserError(f"{origin}: dense layers among the experts (decoder_sparse_step "
                        f"{step!r}, mlp_only_layers {dense!r}) are not modelled: every layer "
                        "is costed as an expert layer")  # fmt: skip


def read_config_json(path: Path) -> dict:
    """A config file's JSON; unreadable or malformed files are a UserError naming the file."""
    data = read_json(path, "config")
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a JSON object")
    return data


def expected_active_experts(tokens: Dim, experts: int, per_token: int) -> Dim:
    """Distinct experts a batch of tokens touches, if routing is uniform and independent.

    Each expert is missed by one token with probability 1 - k/E, so by all tokens with
    (1 - k/E)^T; the expected count is E (1 - that), rounded up (an expert is used or not).
    `tokens` may be an array over a graph's shape axis (ir/tensor.py), and so is the count.
    """
    if experts <= 1:
        return np.ones_like(tokens) if isinstance(tokens, np.ndarray) else 1
    missed = np.power(1 - per_token / experts, np.asarray(tokens, dtype=float))
    used = np.clip(np.ceil(experts * (1 - missed) - 1e-9), per_token, experts)
    return used.astype(int) if isinstance(tokens, np.ndarray) else int(used)


def routed_load(tokens: Dim, experts: int, per_token: int, shared: int = 0) -> tuple[Dim, Dim]:
    """(distinct experts touched, token-expert pairs) of one chip's routed MoE over `tokens`:
    expected_active_experts of the routed ones, and `shared` experts the kernel runs as more
    experts of its own (every token's, so always touched: workloads/transformer.py
    FUSED_SHARED_EXPERT)."""
    return (expected_active_experts(tokens, experts, per_token) + shared,
            tokens * (per_token + shared))
