"""Lowers a decoder-only transformer forward pass to IR ops.

One call builds one step: prefill (q_len == kv_len == prompt) or one decode step (q_len == 1
against a cache of kv_len tokens, the new one included). The op sequence per layer follows
the kernels a serving engine launches (vLLM's Llama path): fused residual-add + norm, one
fused QKV projection, rotary embedding, attention that also writes the new K/V into the
cache, output projection, fused add + norm, fused gate/up projection, activation-and-
multiply, down projection. Logits are computed for the last position only, as servers do.

A training forward pass (`training=True`, q_len == kv_len == the sequence) differs where a
training framework's does (Megatron-LM's GPT path): there is no KV cache, the rotary op
splits the fused projection into head-major q, k and v (so attention reads tensors that ops
wrote, which backpropagation follows), attention also writes the softmax statistics its
backward needs, and every position's logits feed a cross-entropy loss, split over the
vocabulary under tensor parallelism. Vector ops carry `fn`, the function they compute, so
compiler/autodiff.py knows their derivatives.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from xpusim.errors import UserError
from xpusim.ir.dtypes import DType, Format, kept_wide, stream_format, weight_parts
from xpusim.ir.graph import Graph
from xpusim.ir.op import (
    AUX_STREAM,
    MAIN_STREAM,
    SOFTMAX_FLOPS_PER_ELEMENT,
    Op,
    OpKind,
    chunk_keys,
    windowed,
)
from xpusim.ir.tensor import Dim, Role, Tensor
from xpusim.workloads.checkpoint import unquantized_module, unquantized_ops
from xpusim.workloads.transformer_config import TransformerConfig, routed_load

# Vector FLOPs per element, counted from each formula (see the op docstrings).
RMSNORM_FLOPS = 4  # square, accumulate, scale by rsqrt, scale by weight
LAYERNORM_FLOPS = 7  # mean, subtract, square, accumulate, rsqrt scale, weight, bias
RESIDUAL_ADD_FLOPS = 1
ROTARY_FLOPS = 3  # x*cos + rotate(x)*sin
SILU_FLOPS = 4  # x / (1 + exp(-x))
SILU_MUL_FLOPS = SILU_FLOPS + 1  # times the up projection
GELU_FLOPS = 8  # tanh approximation: cube, 2 mul-adds, tanh, add, 2 mul
TANH_FLOPS = 1  # counted as one operation, as GELU_FLOPS counts its tanh
SIGMOID_MUL_FLOPS = SILU_FLOPS  # x / (1 + exp(-g)): SiLU's four operations, on a gate
# fla's chunk size for the gated delta rule (chunk_gated_delta_rule: BT = 64), which vLLM
# and SGLang call for Qwen3-Next's prefill
LINEAR_ATTENTION_CHUNK = 64
# lightning attention's block (MiniMax-Text-01's modeling code and vLLM's lightning_attention
# kernel: BLOCK = 256 tokens)
LIGHTNING_CHUNK = 256
FUSED_QKV_A = "fused-qkv-a"
"""The engine kernel (serving/engines.toml `kernels`) that runs latent attention's q_a_proj
and kv_a_proj_with_mqa as one GEMM of their concatenated weights (SGLang's
fused_qkv_a_proj_with_mqa, TensorRT-LLM's kv_a_proj_with_mqa of q_lora_rank + kv_lora_rank
+ rope outputs): one kernel's fixed time where two were paid, the same FLOPs and bytes."""
SHARED_EXPERTS_STREAM = "shared-experts-stream"
"""The engine kernel that runs an MoE layer's shared experts on a second stream beside the
router and routed experts (cost/aux_stream.py): their ops marked `stream` aux and main."""
SAMPLER_PENALTIES = "sampler-penalties"
"""Requests with a repetition, frequency or presence penalty, as vLLM V1's sampler applies
them (_Builder.penalties): its penalty ops after the logits, over every vocabulary entry of
every sampled row."""
ALLREDUCE_NORM = "allreduce-norm"
"""The engine kernel that runs a residual add and RMSNorm inside the all-reduce before it
(TensorRT-LLM's AllReduce with fusion_op RESIDUAL_RMS_NORM): a norm that follows a tensor-
parallel all-reduce is marked `fused` "all_reduce" and the partition drops it where
attention is split over tp chips (compiler/partition.py), the all-reduce's time standing for
both. TensorRT-LLM's DeepseekV3DecoderLayer (modeling_deepseekv3.py, 1.x: code index copy
227015512) fuses the post-attention norm before an MoE layer (PRE_MOE_FUSION = enable_fusion
and has_tp) and the next layer's input norm after every layer (POST_MOE_FUSION,
POST_MLP_FUSION), the post-attention norm of a dense layer only with NVFP4 weights
(PRE_MLP_FUSION ... and self.is_nvfp4); enable_fusion is on unless
TRTLLM_DEEPSEEK_EAGER_FUSION_DISABLED, and off under attention data parallelism. Its Llama
decoder layers fuse both norms in any format ("MLP layer supports pre and post AR + Res +
RMSNorm", Llama4DecoderLayer, copy 426411151; TRTLLM_LLAMA_EAGER_FUSION_DISABLED, on by
default, which the release notes since 1.0 name for Llama 3.x and 4). Other models' decoder
layers were not read: fused as DeepSeek's, an assumption. SGLang runs the same fusion under
--enable-flashinfer-allreduce-fusion, at steps of up to 2,048 tokens: ALLREDUCE_NORM_DECODE."""
ALLREDUCE_NORM_DECODE = "allreduce-norm-decode"
"""ALLREDUCE_NORM in the decode graph alone: SGLang's FlashInfer all-reduce fusion
(cost/collectives.py FLASHINFER_ALLREDUCE), which it runs at steps of 1-2,048 tokens
(communicator.py FUSE_ALLREDUCE_MAX_BATCH_SIZE). The rule is by the graph, not the token
count, because one graph is tabulated over many step sizes (StepShape): decode-only steps
(a token a sequence, at most SGLang's 2,048 running requests; a larger --max-batch still
fuses) take the decode graph and fuse; every step costed from the prefill graph keeps its
norms: prompt chunks up to 16,384 tokens (those under 2,048 pay two norms a layer they do
not run, under 1% of a 922-token prompt's TTFT on 8 B200s) and a speculative verify's
chunks of K + 1 (serving/speculative.py: their token ops are the prefill graph's), which
SGLang fuses, so MTP decode steps are priced without the fusion (DeepSeek-R1 FP4 on 8
B200s, 4 clients: the fusion takes 2.0% off a plain step, 0.04% off an MTP one). A dense
layer of an MoE model keeps ALLREDUCE_NORM's rule (NVFP4 alone): whether SGLang fuses that
norm in FP8 runs was not read (three norms a step)."""
FUSED_MOE = "fused-moe-routing"
"""The engine kernel that chooses the experts and applies the gated activation inside its
fused MoE (TensorRT-LLM's create_moe modules: the routing method inside the module's
forward, the SwiGLU inside its grouped GEMMs, the finalize, the top-k weighted sum back to
each token's row, after them): no router_topk or experts.silu_mul op is built, nor the
combine of a layer without shared experts outside the kernel (with them, combine adds their
output, a kernel of its own), as the moe tables that price the experts
(cost/kernel_tables.py) timed that forward whole, moe.forward(hidden_states, router_logits)
(aiconfigurator collector/trtllm/collect_moe.py), and pricing those ops again counted them
twice."""
FUSED_MOE_ACTIVATION = "fused-moe-activation"
"""The engine kernel that applies the gated activation and the top-k weighted sum inside its
fused experts, the routing before them outside (vLLM's FusedMoE: select_experts, then
fused_experts, whose Triton path runs silu_and_mul between its two grouped GEMMs and
moe_sum after them, vllm/model_executor/layers/fused_moe/fused_moe.py fused_experts_impl):
no experts.silu_mul op is built, nor the combine of a layer without shared experts outside
the kernel, as FUSED_MOE; router_topk stays. The moe tables that price vLLM's experts timed
fused_experts with both inside (aiconfigurator collector/vllm/collect_moe.py; 0.24's MXFP4
rows time the whole FusedMoE forward, routing too, which stays counted: 2 us a layer)."""
FUSED_SHARED_EXPERT = "fused-shared-expert"
"""The engine kernel that runs an MoE layer's shared experts as more experts of its routed
kernel (SGLang's num_fused_shared_experts: DeepSeek-V3/R1's shared expert loaded as expert
256, every token's top 8 + 1 of 257; serving/engines.toml fused_shared_expert_*): no
shared-expert linears are built; the routed experts' ops take n_shared more experts a token,
always touched, so the same moe kernel table prices top-k + n_shared pairs a token. Only
where the shared experts are as wide as a routed one each and ungated; the engine's other
conditions are the profile's (EngineProfile.fuses_shared_expert)."""
WIDE_MLA_ABSORB = "wide-mla-absorb"
"""The engine kernel that runs MLA's absorbed products (q_absorb, v_absorb) in 16 bits over
a 128 x 128 block-FP8 checkpoint's kv_b_proj: SGLang on CUDA dequantizes that weight to BF16
at load and multiplies with torch.bmm (python/sglang/srt/models/deepseek_v2.py
post_load_weights: 'w = block_quant_dequant(weight, weight_scale, weight_block_size,
torch.bfloat16)' where _is_cuda and the block is 128 x 128, unless SGL_USE_DEEPGEMM_BMM, off
by default and never on Blackwell; forward_absorb takes torch.bmm for a BF16 w_kc; code index
copy 161366826, 2025-2026). Elsewhere (ROCm, other blocks) it requantizes per tensor and
multiplies in FP8 (block_quant_to_tensor_quant, then bmm_fp8), as a run's FP8 format does."""
FP8_MLA_ABSORB = "fp8-mla-absorb"
"""The engine kernel that runs MLA's absorbed products (q_absorb, v_absorb) in FP8 whatever
kv_b_proj is stored as: ATOM reads kv_b_proj's weight back in BF16 at load (a BF16 one as
it is), requantizes its two slices per tensor to FP8 and multiplies with AITER's Triton FP8
batched GEMM, the query quantized per 1 x 128 group (ROCm/ATOM
atom/model_ops/attention_mla.py at 679422de1, 2026-05-10, the scored image's week:
process_weights_after_loading 'dynamic_per_batched_tensor_quant(W_K, dtype=dtypes.fp8)'
unless ATOM_USE_TRITON_MXFP4_BMM, off by default and unset by InferenceX's
dsr1_fp4_mi355x_atom.sh; _v_up_proj and the decode path call
batched_gemm_a8w8_a_per_token_group_prequant_w_per_batched_tensor_quant). Over an FP8 or
block-FP8 kv_b_proj the products keep the run's format (per-tensor against 128 x 128 block
scales: 1/16,384 of the weight's bytes apart)."""
MXFP4_MLA_ABSORB = "mxfp4-mla-absorb"
"""The engine kernel that quantizes an AMD Quark MXFP4 checkpoint's kv_b_proj to MXFP4 for
MLA's absorbed products, a BF16 one (a checkpoint that excludes attention) too: SGLang with
AITER on gfx950 (python/sglang/srt/models/deepseek_common/deepseek_weight_loader.py
post_load_weights, 'if _use_aiter_gfx95 and self.quant_config.get_name() == "quark"' ->
quark_post_load_weights(self_attn, w, "mxfp4"), whose 'if w.dtype == torch.bfloat16' branch
runs b_dynamic_mxfp4_quant on w_kc and w_vc; code index copies 2026, ids 56230166353 and
15227115174; the v0.5.12 tag not read). So where the run's weights are MXFP4 the absorbed
products keep the run's format over an excluded kv_b_proj."""
MXFP8_MOE_INPUT = "mxfp8-moe-input"
"""The engine kernel that quantizes a 16-bit model's activations to MXFP8 at the input of its
MXFP4 routed experts, so their grouped GEMMs run MXFP4 x MXFP8 on FP8 tensor cores: the
routed experts' ops compute in FP8 (their input stays the model's 16 bits, read by the MoE
kernel that quantizes it, as the tables of that kernel timed it: aiconfigurator's
moe.forward from BF16 hidden states). TensorRT-LLM's and SGLang's defaults for gpt-oss on
Blackwell (serving/engines.toml chips_only says on which chips)."""


def takes_mxfp8_moe_input(cfg: TransformerConfig, act: DType, weight: Format) -> bool:
    """Whether MXFP8_MOE_INPUT changes a run of `cfg`: routed experts stored in MXFP4 under
    a 16-bit compute format (the only runs whose expert input an engine quantizes so)."""
    return cfg.is_moe and weight is DType.MXFP4 and act.bits == 16


GRAPH_KERNELS = frozenset({FUSED_QKV_A, SHARED_EXPERTS_STREAM, SAMPLER_PENALTIES,
                           ALLREDUCE_NORM, ALLREDUCE_NORM_DECODE, FUSED_MOE,
                           FUSED_MOE_ACTIVATION, FUSED_SHARED_EXPERT, WIDE_MLA_ABSORB,
                           FP8_MLA_ABSORB, MXFP4_MLA_ABSORB, MXFP8_MOE_INPUT})
"""Engine kernels that change the ops the builder emits, not the table that prices them."""
# softmax (5) and the target's log-probability, counted once per logit (1)
CROSS_ENTROPY_FLOPS = SOFTMAX_FLOPS_PER_ELEMENT + 1


@dataclass(frozen=True)
class StepShape:
    """One step's shape, or many: each length may be an int array over a shape axis, and
    the graph built from it then counts every op's FLOPs and bytes for all of its shapes."""

    batch: Dim
    q_len: Dim
    kv_len: Dim
    # positions whose logits an inference step computes: the last (servers sample from it),
    # or every fed one where a speculative verify checks each draft token
    logits: Dim = 1
    # an encoder-decoder's decode step: the encoder's length, which cross-attention reads
    # (kv_len counts it too); 0 in a prefill, which runs the encoder
    cross: Dim = 0
    # a decode step of a few tokens against the cache (a speculative verify's K + 1): run
    # with the decode kernels (latent attention's absorbed form), as one token is
    decode: bool = False

    @property
    def tokens(self) -> Dim:
        return self.batch * self.q_len

    @property
    def label(self) -> str:
        if any(isinstance(d, np.ndarray) for d in (self.batch, self.q_len, self.kv_len)):
            return f"{np.broadcast(self.batch, self.q_len, self.kv_len).size} shapes"
        return f"b={self.batch},q={self.q_len},kv={self.kv_len}"


class _Builder:
    """Keeps the naming and dtypes consistent while one step is emitted."""

    def __init__(
        self, cfg: TransformerConfig, step: StepShape, act: DType, weight: Format, training: bool,
        compact: bool, attention: DType | None = None, kv: DType | None = None,
        moe_backend: str = "", kernels: tuple[str, ...] = (),
    ):  # fmt: skip
        self.cfg, self.step, self.act, self.weight = cfg, step, act, weight
        self.moe_backend = moe_backend or None  # stamped on the routed experts' ops if given
        self.kernels = kernels or None  # stamped on matmuls, attention, embedding, routing
        self.parts = weight_parts(weight, act)
        # where the checkpoint leaves projections unquantized (cfg.unquantized),
        # a quantized run keeps them as stored: 16-bit weights and GEMMs (unquantized_matmul)
        self.wide = kept_wide(act)
        self.attention = attention or act  # the format attention's matrix work runs in
        self.kv = kv or act  # the format the KV cache is stored in
        self.training, self.compact = training, compact
        self.causal = not cfg.encoder  # self-attention's mask; an encoder stack's is off
        self.graph = Graph(f"{cfg.name}[{step.label}]")
        self.layer = -1
        self.heads = dict(heads=cfg.num_heads, kv_heads=cfg.num_kv_heads, head_dim=cfg.head_dim)
        # made once: every layer's tensors share these dimensions (the same arrays, when
        # they are arrays over shapes, so that identical layers' ops are one op signature)
        self.tokens = step.tokens
        if cfg.is_moe:
            self.fused_shared = self.fused_shared_experts()
            self.routed = routed_load(self.tokens, cfg.num_experts, cfg.experts_per_token,
                                      self.fused_shared)  # fmt: skip

    def runs(self, kernel: str) -> bool:
        """Whether the engine lists `kernel` (GRAPH_KERNELS change the ops built)."""
        return kernel in (self.kernels or ())

    def fused_shared_experts(self) -> int:
        """How many shared experts the routed kernel runs as experts of its own
        (FUSED_SHARED_EXPERT): as many as a routed expert's width fits in theirs, where the
        engine fuses them and they are ungated; else 0."""
        cfg = self.cfg
        if not self.runs(FUSED_SHARED_EXPERT) or cfg.shared_expert_gate:
            return 0
        n, rest = divmod(cfg.shared_expert_width, cfg.expert_width)
        return 0 if rest else n

    def t(self, name: str, *shape: Dim, role: Role = Role.ACTIVATION) -> Tensor:
        dtype = {Role.WEIGHT: self.weight, Role.KV_CACHE: self.kv}.get(role, self.act)
        return Tensor(name, tuple(shape), dtype, role)

    def op(self, kind: OpKind, name: str, ins: list[Tensor], outs: list[Tensor], **attrs) -> Tensor:
        """Appends an op; `tp` in attrs says how tensor parallelism splits it (partition.py)."""
        if kind in (OpKind.MATMUL, OpKind.ATTENTION, OpKind.EMBEDDING):  # the embedding's:
            attrs["kernels"] = self.kernels  # for its all-reduce (compiler/partition.py)
        attrs = {k: v for k, v in attrs.items() if v is not None}
        op = Op(kind, name, tuple(ins), tuple(outs), tuple(sorted(attrs.items())), self.layer)
        return self.graph.add(op)

    def unquantized_matmul(self, name: str) -> bool:
        """Whether this matmul's weights stay 16-bit in a run whose weights are quantized:
        an MoE router's, which the engines never quantize (SGLang's DeepSeek MoEGate a
        plain BF16 parameter; vLLM's routers ReplicatedLinear(..., quant_config=None); the
        checkpoints store it BF16: DeepSeek-R1's FP8 repo gives it no scale, Model
        Optimizer's DeepSeek recipe quantizes Linear modules and the gate is none), and an
        attention or dense MLP matmul the model's checkpoint leaves unquantized (NVIDIA's
        DeepSeek-R1 NVFP4 checkpoints keep MLA's projections BF16, Meta's 405B FP8 every
        attention and layers 0 and 125: checkpoint.unquantized_module)."""
        if self.weight == self.wide or not self.parts.keeps_wide:
            return False
        op = name.split(".", 2)[-1] if name.startswith("layers.") else name
        return op == "router" or (bool(self.cfg.unquantized) and unquantized_module(
            self.cfg.unquantized, self.layer, op))  # fmt: skip

    def matmul(
        self, name: str, x: Tensor, n: int, bias: bool = False, tp: str | None = None, **attrs
    ) -> Tensor:
        k = x.shape[-1]
        wide = self.unquantized_matmul(name)
        w = self.t(f"{name}.w", k, n, role=Role.WEIGHT)
        ins = [x, Tensor(w.name, w.shape, self.wide, Role.WEIGHT) if wide else w]
        if bias:
            ins.append(self.t(f"{name}.b", n, role=Role.WEIGHT))
        out = self.t(f"{name}.out", *x.shape[:-1], n)
        compute = self.wide if wide else self.act
        return self.op(OpKind.MATMUL, name, ins, [out], compute=compute.value, tp=tp, **attrs)

    def vector(
        self, kind: OpKind, name: str, ins: list[Tensor], width: int, flops: float,
        tp: str | None = None, **attrs,
    ) -> Tensor:  # fmt: skip
        out = self.t(f"{name}.out", *ins[0].shape[:-1], width)
        return self.op(kind, name, ins, [out], flops_per_element=flops, tp=tp, **attrs)

    def norm(self, name: str, x: Tensor, residual: Tensor | None,
             fusable: bool = True) -> tuple[Tensor, Tensor]:  # fmt: skip
        """Norm of x, or of x + residual fused (which also writes the new residual stream);
        where the engine lists ALLREDUCE_NORM (in a decode step, ALLREDUCE_NORM_DECODE) and
        the norm adds a residual, marked as the all-reduce before it may run it (`fusable`:
        whether the engine fuses this one).

        Returns (normed, residual stream after this op).
        """
        cfg = self.cfg
        ins = [x] if residual is None else [x, residual]
        ins.append(self.t(f"{name}.w", cfg.hidden_size, role=Role.WEIGHT))
        if cfg.norm == "layernorm":
            ins.append(self.t(f"{name}.b", cfg.hidden_size, role=Role.WEIGHT))
        flops = LAYERNORM_FLOPS if cfg.norm == "layernorm" else RMSNORM_FLOPS
        outs = [self.t(f"{name}.out", *x.shape)]
        if residual is not None:
            flops += RESIDUAL_ADD_FLOPS
            outs.append(self.t(f"{name}.residual", *x.shape))
        fused = "all_reduce" if (residual is not None and fusable and (
            self.runs(ALLREDUCE_NORM) or (self.step.decode and self.runs(ALLREDUCE_NORM_DECODE))
        )) else None
        normed = self.op(OpKind.NORM, name, ins, outs, flops_per_element=flops, fn=cfg.norm,
                         fused=fused)  # fmt: skip
        return normed, outs[-1] if residual is not None else x

    def attention_block(self, p: str, x: Tensor) -> Tensor:
        cfg, s = self.cfg, self.step
        if cfg.is_mla:
            return self.latent_attention(p, x)
        if cfg.compress_ratios:
            return self.compressed_attention(p, x)
        q_width = cfg.num_heads * cfg.head_dim
        kv_width = cfg.num_kv_heads * cfg.head_dim
        gate_width = q_width if cfg.attention_output_gate else 0
        qkv = self.matmul(
            f"{p}.qkv", x, q_width + gate_width + 2 * kv_width, bias=cfg.attention_bias,
            tp="heads", gated=cfg.attention_output_gate or None, **self.heads,
        )  # fmt: skip
        if self.training:
            attn = self.training_attention(p, qkv)
            return self.matmul(
                f"{p}.o_proj", attn, cfg.hidden_size, bias=cfg.attention_out_bias, tp="row"
            )
        if cfg.qk_norm:  # Qwen3: RMSNorm over each head of q and k, before the rotation
            # MiniMax-M2: over all of q (of k) at once, a weight per channel of every head;
            # split by heads, that needs the sums of squares of the other ranks' heads
            whole = cfg.qk_norm_whole
            norm_w = self.t(f"{p}.qk_norm.w", q_width + kv_width if whole else 2 * cfg.head_dim,
                            role=Role.WEIGHT)  # fmt: skip
            qkv = self.vector(
                OpKind.NORM, f"{p}.qk_norm", [qkv, norm_w], q_width + kv_width,
                RMSNORM_FLOPS, tp="whole_heads" if whole else "heads", fn="rmsnorm",
                **self.heads,
            )  # fmt: skip
        roped = self.vector(
            OpKind.ELEMENTWISE, f"{p}.rope", [qkv], q_width + kv_width,
            ROTARY_FLOPS * cfg.rotary_fraction, tp="heads", fn="rope", **self.heads,
        )  # fmt: skip
        q = Tensor(f"{p}.q", (s.batch, s.q_len, cfg.num_heads, cfg.head_dim), self.act)
        window = cfg.window(self.layer)  # a sliding window's keys are all the cache is read for
        keys = s.kv_len if window is None else windowed(s.kv_len, s.q_len, window)
        chunk = cfg.chunk(self.layer)  # so are a chunked attention's
        keys = keys if chunk is None else chunk_keys(s.kv_len, s.q_len, chunk)
        cache = (s.batch, keys, cfg.num_kv_heads, cfg.head_dim)
        new = (s.batch, s.q_len, cfg.num_kv_heads, cfg.head_dim)
        kv = Role.KV_CACHE if self.causal else Role.ACTIVATION  # an encoder caches nothing
        sinks = [self.t(f"{p}.sinks", cfg.num_heads, role=Role.WEIGHT)] * cfg.attention_sinks
        attn = self.op(
            OpKind.ATTENTION, f"{p}.attention",
            [q, self.t(f"{p}.k_cache", *cache, role=kv), self.t(f"{p}.v_cache", *cache, role=kv),
             roped, *sinks],
            [self.t(f"{p}.attn.out", s.batch, s.q_len, q_width),
             self.t(f"{p}.k_new", *new, role=kv), self.t(f"{p}.v_new", *new, role=kv)],
            causal=self.causal, compute=self.attention.value, tp="heads", window=window,
            chunk=chunk, decode=s.decode or None, **self.heads,
        )  # fmt: skip
        if gate_width:  # attn x sigmoid(gate), the gate a view of q_proj's output
            gate = Tensor(f"{qkv.name}[gate]", (s.batch, s.q_len, q_width), self.act)
            attn = self.vector(OpKind.ELEMENTWISE, f"{p}.output_gate", [attn, gate], q_width,
                               SIGMOID_MUL_FLOPS, tp="heads", fn="sigmoid_mul", **self.heads)
        return self.matmul(f"{p}.o_proj", attn, cfg.hidden_size, bias=cfg.attention_out_bias,
                           tp="row")

    def linear_attention_block(self, p: str, x: Tensor) -> Tensor:
        """A Gated DeltaNet mixer as vLLM and SGLang run Qwen3-Next's (fla's kernels):
        in_proj_qkvz and in_proj_ba; the causal depthwise convolution (kernel K, then SiLU)
        over q, k and v, which carries the last K - 1 of them per sequence; the gated delta
        rule (OpKind.LINEAR_ATTENTION: a chunked scan in a prefill, one recurrent step in a
        decode), which carries one d_k x d_v state per value head; an RMSNorm of each head
        gated by SiLU(z); out_proj. Tensor parallelism splits the heads. The two carried
        tensors are the layer's cache (role KV_CACHE), the same size at any context."""
        if self.cfg.is_lightning:
            return self.lightning_attention_block(p, x)
        cfg, s = self.cfg, self.step
        hk, hv = cfg.linear_key_heads, cfg.linear_value_heads
        dk, dv, k = cfg.linear_key_dim, cfg.linear_value_dim, cfg.linear_conv_kernel
        channels, rows = cfg.linear_conv_channels, (s.batch, s.q_len)
        heads = dict(heads=hv, tp="linear_heads")
        qkvz = self.matmul(f"{p}.in_proj_qkvz", x, channels + hv * dv, tp="column")
        ba = self.matmul(f"{p}.in_proj_ba", x, 2 * hv, tp="column")
        conv_in = Tensor(f"{qkvz.name}[qkv]", (*rows, channels), self.act)
        carried = [self.t(f"{p}.conv_state{new}", s.batch, k - 1, channels, role=Role.KV_CACHE)
                   for new in ("", ".new")]  # fmt: skip
        conv = self.op(
            OpKind.ELEMENTWISE, f"{p}.conv",
            [conv_in, self.t(f"{p}.conv.w", channels, k, role=Role.WEIGHT), carried[0]],
            [self.t(f"{p}.conv.out", *rows, channels), carried[1]],
            flops_per_element=2 * k + SILU_FLOPS, fn="conv1d_silu", **heads,
        )  # fmt: skip
        state = [self.t(f"{p}.state{new}", s.batch, hv, dk, dv, role=Role.KV_CACHE)
                 for new in ("", ".new")]  # fmt: skip
        y = self.op(
            OpKind.LINEAR_ATTENTION, f"{p}.gated_delta",
            [Tensor(f"{conv.name}[q]", (*rows, hk, dk), self.act),
             Tensor(f"{conv.name}[k]", (*rows, hk, dk), self.act),
             Tensor(f"{conv.name}[v]", (*rows, hv, dv), self.act), ba,
             *(self.t(f"{p}.{name}", hv, role=Role.WEIGHT) for name in ("A_log", "dt_bias")),
             state[0]],
            [self.t(f"{p}.gated_delta.out", *rows, hv * dv), state[1]],
            chunk=LINEAR_ATTENTION_CHUNK, delta=True, **heads,
        )  # fmt: skip
        z = Tensor(f"{qkvz.name}[z]", (*rows, hv * dv), self.act)
        gated = self.vector(OpKind.NORM, f"{p}.gated_norm",
                            [y, z, self.t(f"{p}.gated_norm.w", dv, role=Role.WEIGHT)], hv * dv,
                            RMSNORM_FLOPS + SILU_MUL_FLOPS, fn="rmsnorm", **heads)  # fmt: skip
        return self.matmul(f"{p}.out_proj", gated, cfg.hidden_size, tp="row")

    def lightning_attention_block(self, p: str, x: Tensor) -> Tensor:
        """Lightning attention as MiniMax-M1's code and vLLM run it: qkv_proj and SiLU; the
        linear attention with a fixed per-head decay and no delta rule (OpKind.
        LINEAR_ATTENTION, delta off: blocks of LIGHTNING_CHUNK in a prefill, one recurrent
        step in a decode), which carries one head_dim x head_dim state per head, the
        layer's whole cache; an RMSNorm over every head's output; times the sigmoid of
        output_gate(x); out_proj. Tensor parallelism splits the heads."""
        cfg, s = self.cfg, self.step
        h, d = cfg.linear_value_heads, cfg.linear_value_dim
        rows, heads = (self.step.batch, self.step.q_len), dict(heads=h, tp="linear_heads")
        qkv = self.matmul(f"{p}.qkv_proj", x, 3 * h * d, tp="column")
        qkv = self.vector(OpKind.ELEMENTWISE, f"{p}.qkv_silu", [qkv], 3 * h * d, SILU_FLOPS,
                          tp="split", fn="silu")  # fmt: skip
        state = [self.t(f"{p}.state{new}", s.batch, h, d, d, role=Role.KV_CACHE)
                 for new in ("", ".new")]  # fmt: skip
        y = self.op(
            OpKind.LINEAR_ATTENTION, f"{p}.lightning",
            [*(Tensor(f"{qkv.name}[{part}]", (*rows, h, d), self.act) for part in "qkv"),
             state[0]],
            [self.t(f"{p}.lightning.out", *rows, h * d), state[1]],
            chunk=LIGHTNING_CHUNK, delta=False, **heads,
        )  # fmt: skip
        normed = self.vector(OpKind.NORM, f"{p}.norm",
                             [y, self.t(f"{p}.norm.w", h * d, role=Role.WEIGHT)], h * d,
                             RMSNORM_FLOPS, fn="rmsnorm", **heads)  # fmt: skip
        gate = self.matmul(f"{p}.output_gate", x, h * d, tp="column")
        gated = self.vector(OpKind.ELEMENTWISE, f"{p}.gate", [normed, gate], h * d,
                            SIGMOID_MUL_FLOPS, tp="split", fn="sigmoid_mul")  # fmt: skip
        return self.matmul(f"{p}.out_proj", gated, cfg.hidden_size, tp="row")

    def ssm_block(self, p: str, x: Tensor) -> Tensor:
        """A Mamba or Mamba-2 mixer as its fused kernels run it (transformers' MambaMixer and
        Mamba2Mixer with the mamba_ssm kernels): in_proj; a causal depthwise convolution
        (kernel K, then SiLU) over the scan's inputs, which carries the last K - 1 of them
        per sequence; Mamba's x_proj and dt_proj; the scan, which carries its state; the
        output gated by SiLU(z) (Mamba-2: a gated RMSNorm); out_proj. The two carried
        tensors are what a state-space model caches: role KV_CACHE, one per sequence
        whatever its length, read and written by every step."""
        cfg, s = self.cfg, self.step
        inner, states, k = cfg.intermediate_size, cfg.ssm_state_size, cfg.ssm_conv_kernel
        conv_width = cfg.ssm_conv_channels
        proj = self.matmul(f"{p}.in_proj", x, cfg.ssm_in_width, bias=cfg.ssm_bias)
        rows = (s.batch, s.q_len)
        z = Tensor(f"{proj.name}[z]", (*rows, inner), self.act)  # views of in_proj's output
        conv_in = Tensor(f"{proj.name}[xbc]", (*rows, conv_width), self.act)
        conv = [conv_in, self.t(f"{p}.conv.w", conv_width, k, role=Role.WEIGHT)]
        conv += [self.t(f"{p}.conv.b", conv_width, role=Role.WEIGHT)] * cfg.ssm_conv_bias
        carried = self.t(f"{p}.conv_state", s.batch, k - 1, conv_width, role=Role.KV_CACHE)
        conv_out = self.op(
            OpKind.ELEMENTWISE, f"{p}.conv", [*conv, carried],
            [self.t(f"{p}.conv.out", *rows, conv_width),
             self.t(f"{p}.conv_state.new", s.batch, k - 1, conv_width, role=Role.KV_CACHE)],
            flops_per_element=2 * k + SILU_FLOPS, fn="conv1d_silu",
        )  # fmt: skip
        x_in = Tensor(f"{conv_out.name}[x]", (*rows, inner), self.act)
        if cfg.ssm == "mamba":
            dbc = self.matmul(f"{p}.x_proj", x_in, cfg.ssm_dt_rank + 2 * states)
            low = Tensor(f"{dbc.name}[dt]", (*rows, cfg.ssm_dt_rank), self.act)
            dt = self.matmul(f"{p}.dt_proj", low, inner, bias=True)
            bc = Tensor(f"{dbc.name}[bc]", (*rows, 2 * states), self.act)
            state = (s.batch, inner, states)
            params = [self.t(f"{p}.A", inner, states, role=Role.WEIGHT),
                      self.t(f"{p}.D", inner, role=Role.WEIGHT)]  # fmt: skip
            heads, chunk = inner, 0
        else:
            heads, chunk = cfg.ssm_heads, cfg.ssm_chunk
            dt = Tensor(f"{proj.name}[dt]", (*rows, heads), self.act)
            bc = Tensor(f"{conv_out.name}[bc]", (*rows, 2 * cfg.ssm_groups * states), self.act)
            state = (s.batch, heads, inner // heads, states)
            params = [self.t(f"{p}.{name}", heads, role=Role.WEIGHT)
                      for name in ("A", "D", "dt_bias")]  # fmt: skip
        y = self.op(
            OpKind.SCAN, f"{p}.scan",
            [x_in, dt, bc, *params, self.t(f"{p}.ssm_state", *state, role=Role.KV_CACHE)],
            [self.t(f"{p}.scan.out", *rows, inner),
             self.t(f"{p}.ssm_state.new", *state, role=Role.KV_CACHE)],
            heads=heads, chunk=chunk,
        )  # fmt: skip
        if cfg.ssm == "mamba":
            gated = self.vector(OpKind.ELEMENTWISE, f"{p}.gate", [y, z], inner, SILU_MUL_FLOPS,
                                fn="silu_mul")  # fmt: skip
        else:
            norm_w = self.t(f"{p}.gated_norm.w", inner, role=Role.WEIGHT)
            gated = self.vector(OpKind.NORM, f"{p}.gated_norm", [y, z, norm_w], inner,
                                RMSNORM_FLOPS + SILU_MUL_FLOPS, fn="rmsnorm")  # fmt: skip
        return self.matmul(f"{p}.out_proj", gated, cfg.hidden_size, bias=cfg.ssm_bias)

    def latent_attention(self, p: str, x: Tensor) -> Tensor:
        """Multi-head latent attention (DeepSeek-V2, section 2.1) as serving engines run it.

        Queries come from a low-rank latent (q_a_proj, its norm, q_b_proj) or straight from
        the hidden state; keys and values from one latent per token (kv_a_proj_with_mqa:
        kv_lora_rank wide, plus the rotary key shared by every head), and that latent is
        what the cache holds. An engine that lists FUSED_QKV_A runs q_a_proj and
        kv_a_proj as one matmul (qkv_a_proj), its output read by the two norms in parts. A
        decode step (one query per sequence) runs the absorbed form
        (vLLM's and SGLang's MLA decode kernels): each head's query is multiplied into the
        latent space by its slice of kv_b_proj (q_absorb; a speculative verify's few tokens
        too, as FlashMLA runs them), attention runs over the cached
        latents as one KV head kv_lora_rank + rope wide, and the values come back out of
        the latent space by the other slice (v_absorb). A prefill decompresses instead:
        kv_b_proj turns every token's latent (a chunk's cached prefix too, read as its
        input) into per-head keys and values, and attention runs as multi-head attention.
        Tensor parallelism splits the heads; the latent projections and the cache are whole
        on every rank (why engines run MLA's attention data-parallel)."""
        cfg, s = self.cfg, self.step
        heads, d, rope = cfg.num_heads, cfg.head_dim, cfg.qk_rope_head_dim
        nope, rank, v = d - rope, cfg.kv_lora_rank, cfg.v_head_dim
        latent = rank + rope
        top_k = None
        kv = None
        if cfg.q_lora_rank and self.runs(FUSED_QKV_A):
            both = self.matmul(f"{p}.qkv_a_proj", x, cfg.q_lora_rank + latent)
            q = Tensor(f"{both.name}[q]", (*both.shape[:-1], cfg.q_lora_rank), self.act)
            kv = Tensor(f"{both.name}[kv]", (*both.shape[:-1], latent), self.act)
        elif cfg.q_lora_rank:
            q = self.matmul(f"{p}.q_a_proj", x, cfg.q_lora_rank)
        if cfg.q_lora_rank:
            norm_w = self.t(f"{p}.q_a_norm.w", cfg.q_lora_rank, role=Role.WEIGHT)
            q = self.vector(OpKind.NORM, f"{p}.q_a_norm", [q, norm_w], cfg.q_lora_rank,
                            RMSNORM_FLOPS, fn="rmsnorm")  # fmt: skip
            top_k = self.sparse_index(p, x, q) if cfg.index_topk else None
            q = self.matmul(f"{p}.q_b_proj", q, heads * d, tp="column")
        else:
            q = self.matmul(f"{p}.q_proj", x, heads * d, tp="column")
        q = self.vector(OpKind.ELEMENTWISE, f"{p}.q_rope", [q], heads * d,
                        ROTARY_FLOPS * rope / d, tp="split", fn="rope")  # fmt: skip
        if kv is None:
            kv = self.matmul(f"{p}.kv_a_proj", x, latent)
        norm_w = self.t(f"{p}.kv_a_norm.w", rank, role=Role.WEIGHT)
        kv = self.vector(OpKind.NORM, f"{p}.kv_a_norm", [kv, norm_w], latent,
                         (RMSNORM_FLOPS * rank + ROTARY_FLOPS * rope) / latent,
                         fn="rmsnorm")  # the latent's norm, the rotary key's rotation
        new = self.t(f"{p}.latent_new", s.batch, s.q_len, 1, latent, role=Role.KV_CACHE)
        mla = dict(heads=heads, head_dim=d, compute=self.attention.value, causal=True,
                   top_k=top_k)
        tokens = self.tokens
        # the absorbed form in decode steps only: a one-token prompt is a prefill, built
        # the same whether its q_len is an int or one entry of a shape array
        if s.decode:
            q_nope = self.t(f"{p}.q_nope", heads, tokens, nope)  # q's non-rotary part, per head
            absorb = self.absorb_format(p)
            w_uk = self.t(f"{p}.kv_b_proj.w_uk", heads, nope, rank, role=Role.WEIGHT)
            w_uk = Tensor(w_uk.name, w_uk.shape, absorb or w_uk.dtype, Role.WEIGHT)
            compute = (absorb or self.act).value
            self.op(OpKind.MATMUL, f"{p}.q_absorb", [q_nope, w_uk],
                    [self.t(f"{p}.q_latent", heads, tokens, rank)], compute=compute,
                    tp="head_batch")  # fmt: skip
            q_lat = self.t(f"{p}.q_latent_rope", s.batch, s.q_len, heads, latent)
            read = s.kv_len if not cfg.index_topk else windowed(s.kv_len, s.q_len, cfg.index_topk)
            cache = self.t(f"{p}.latent_cache", s.batch, read, 1, latent, role=Role.KV_CACHE)
            attn = self.op(OpKind.ATTENTION, f"{p}.attention", [q_lat, cache, kv],
                           [self.t(f"{p}.attn.latent", s.batch, s.q_len, heads * rank), new],
                           tp="heads", kv_heads=1, v_dim=rank, **{**mla, "head_dim": latent})
            w_uv = self.t(f"{p}.kv_b_proj.w_uv", heads, rank, v, role=Role.WEIGHT)
            w_uv = Tensor(w_uv.name, w_uv.shape, absorb or w_uv.dtype, Role.WEIGHT)
            values = self.op(OpKind.MATMUL, f"{p}.v_absorb",
                             [self.t(attn.name, heads, tokens, rank), w_uv],
                             [self.t(f"{p}.attn.out", heads, tokens, v)],
                             compute=compute, tp="head_batch")  # fmt: skip
            out = self.t(values.name, s.batch, s.q_len, heads * v)
        else:  # prefill: keys and values decompressed, multi-head attention over them
            latents = self.t(f"{p}.latents", s.batch, s.kv_len, rank)
            kv_up = self.matmul(f"{p}.kv_b_proj", latents, heads * (nope + v), tp="column")
            k = self.t(f"{kv_up.name}.k", s.batch, s.kv_len, heads, d)
            values = self.t(f"{kv_up.name}.v", s.batch, s.kv_len, heads, v)
            q4 = self.t(f"{q.name}.heads", s.batch, s.q_len, heads, d)
            out = self.op(OpKind.ATTENTION, f"{p}.attention", [q4, k, values, kv],
                          [self.t(f"{p}.attn.out", s.batch, s.q_len, heads * v), new],
                          tp="heads", kv_heads=heads, v_dim=v, **mla)  # fmt: skip
        return self.matmul(f"{p}.o_proj", out, cfg.hidden_size, tp="row")

    def absorb_format(self, p: str) -> DType | None:
        """The format MLA's absorbed products (q_absorb, v_absorb over kv_b_proj's slices)
        store their weights and multiply in where it is not the run's own (None): FP8 where
        the engine requantizes kv_b_proj so (FP8_MLA_ABSORB) and it is not stored FP8
        already; 16-bit where the checkpoint keeps kv_b_proj so (unquantized_matmul), unless
        the engine quantizes it back to the run's MXFP4 (MXFP4_MLA_ABSORB), or where the
        engine widens a block-FP8 one (WIDE_MLA_ABSORB)."""
        kept = self.unquantized_matmul(f"{p}.q_absorb")
        fp8 = not kept and self.weight.value in ("fp8", "fp8-block")
        if self.runs(FP8_MLA_ABSORB) and not fp8:
            return DType.FP8
        if kept:
            requantized = self.runs(MXFP4_MLA_ABSORB) and self.weight is DType.MXFP4
            return None if requantized else self.wide
        widened = self.runs(WIDE_MLA_ABSORB) and self.weight.value == "fp8-block"
        return self.wide if widened else None

    def sparse_index(self, p: str, x: Tensor, q_latent: Tensor, ratio: int = 0) -> int:
        """DeepSeek Sparse Attention's lightning indexer (DeepseekV32Indexer): index
        queries from the query latent (wq_b), one index key and the index heads' weights
        from the hidden state (wk and weights_proj, one matmul), the scores of every cached
        index key at the attention's format (FP8 in DeepSeek's kernels, with --precision
        fp8 here) and the top-k selection, which writes the new key to the cache. Returns
        the keys each query then attends (the attention's `top_k`). Whole on every
        tensor-parallel rank, as MLA's latents are. DeepSeek-V4's (`ratio` 4) scores
        compressed keys, one per `ratio` tokens, that its own compressor writes: its
        matmul from the hidden state is weights_proj alone."""
        cfg, s = self.cfg, self.step
        heads, width = cfg.index_heads, cfg.index_head_dim
        q = self.matmul(f"{p}.indexer.wq_b", q_latent, heads * width)
        rows = (s.batch, s.q_len)
        if ratio:
            kw = self.matmul(f"{p}.indexer.weights_proj", x, heads)
            self.compressor(f"{p}.indexer.compressor", x, ratio, width)
            keys, new = (s.kv_len, 1, width // ratio), []  # see compressor
        else:
            kw = self.matmul(f"{p}.indexer.wk_weights", x, width + heads)
            keys = (s.kv_len, 1, width)
            new = [self.t(f"{p}.index_key_new", *rows, 1, width, role=Role.KV_CACHE)]
        self.op(
            OpKind.SPARSE_INDEX, f"{p}.indexer",
            [Tensor(q.name, (*rows, heads, width), self.act),
             self.t(f"{p}.index_cache", s.batch, *keys, role=Role.KV_CACHE),
             Tensor(f"{kw.name}[weights]", (*rows, heads), self.act)],
            [Tensor(f"{p}.topk_ids", (*rows, cfg.index_topk), DType.INT32), *new],
            compute=self.attention.value, compress=ratio or None,
        )  # fmt: skip
        return cfg.index_topk

    def compressor(self, p: str, x: Tensor, ratio: int, width: int) -> None:
        """DeepSeek-V4's Compressor: wkv and wgate from the hidden state (one matmul), then
        each `ratio` tokens' slots pooled by a softmax of their gates (plus a learned bias
        per slot; ratio 4 pools overlapping windows, its slots twice as wide), normed and
        rotated into one cache entry `width` wide. Compressed keys are held as tensors as
        long as the tokens they stand for and `width / ratio` wide (the same bytes, and
        counts that stay polynomial in the lengths, as serve's fits need): a prompt writes
        one entry per `ratio` of its tokens, a decode step one every `ratio` steps on
        average."""
        s = self.step
        slot = width * (2 if ratio == 4 else 1)
        kv_gate = self.matmul(f"{p}.wkv_wgate", x, 2 * slot)
        entries = self.t(f"{p}.entries", s.batch, s.q_len, 1, width // ratio, role=Role.KV_CACHE)
        pooled = Tensor(f"{p}.pooled", (s.batch, s.q_len, slot), self.act)
        # per slot element: the gate's bias add and exp, the sum, the weighted accumulate;
        # the entry's RMSNorm and rotation per output element are a rounding error beside it
        self.op(OpKind.ELEMENTWISE, f"{p}.pool", [kv_gate, self.t(f"{p}.ape", ratio, slot,
                role=Role.WEIGHT)], [pooled, entries],
                flops_per_element=SOFTMAX_FLOPS_PER_ELEMENT + 2, fn="softmax_pool")  # fmt: skip

    def compressed_attention(self, p: str, x: Tensor) -> Tensor:
        """DeepSeek-V4's attention (its inference/model.py Attention; transformers'
        DeepseekV4Attention): queries from a latent (wq_a, its norm, wq_b, then an RMSNorm
        per head and the rotation of the last qk_rope_head_dim channels); one KV head whose
        key is its value (wkv, its norm, rotated); every query attends its layer's sliding
        window and, by compress_ratio, compressed entries (ratio 4: the index_topk its
        indexer picks; 128: all), with a learned sink per head in the softmax. The output's
        rotation is undone, then projected per group of heads to o_lora_rank (wo_a, a batched
        matmul over the o_groups groups) and to the hidden size (wo_b). The window and the
        compressed entries are costed as two attentions over one query (their softmax is
        one in the kernel). Tensor parallelism splits the heads, the groups with them; the
        KV head, its cache and the compressors are whole on every rank, as MLA's latents."""
        cfg, s = self.cfg, self.step
        heads, d, rope = cfg.num_heads, cfg.head_dim, cfg.qk_rope_head_dim
        ratio = cfg.compress_ratio(self.layer)
        q = self.matmul(f"{p}.wq_a", x, cfg.q_lora_rank)
        norm_w = self.t(f"{p}.q_norm.w", cfg.q_lora_rank, role=Role.WEIGHT)
        q = self.vector(OpKind.NORM, f"{p}.q_norm", [q, norm_w], cfg.q_lora_rank,
                        RMSNORM_FLOPS, fn="rmsnorm")  # fmt: skip
        top_k = self.sparse_index(p, x, q, ratio) if ratio == 4 else None
        q = self.matmul(f"{p}.wq_b", q, heads * d, tp="column")
        q = self.vector(OpKind.NORM, f"{p}.q_head_norm_rope", [q], heads * d,
                        RMSNORM_FLOPS - 1 + ROTARY_FLOPS * rope / d, tp="split",
                        fn="rmsnorm")  # no weight: 3 FLOPs a channel, and the rotation
        kv = self.matmul(f"{p}.wkv", x, d)
        norm_w = self.t(f"{p}.kv_norm.w", d, role=Role.WEIGHT)
        kv = self.vector(OpKind.NORM, f"{p}.kv_norm", [kv, norm_w], d,
                         RMSNORM_FLOPS + ROTARY_FLOPS * rope / d, fn="rmsnorm")  # fmt: skip
        if ratio:
            self.compressor(f"{p}.compressor", x, ratio, d)
        q4 = Tensor(f"{q.name}.heads", (s.batch, s.q_len, heads, d), self.act)
        one = dict(heads=heads, kv_heads=1, head_dim=d, compute=self.attention.value,
                   causal=True, tp="heads")
        window = windowed(s.kv_len, s.q_len, cfg.sliding_window)
        new = self.t(f"{p}.kv_new", s.batch, s.q_len, 1, d, role=Role.KV_CACHE)
        out = self.op(
            OpKind.ATTENTION, f"{p}.attention",
            [q4, self.t(f"{p}.window_cache", s.batch, window, 1, d, role=Role.KV_CACHE), kv,
             self.t(f"{p}.sinks", heads, role=Role.WEIGHT)],
            [self.t(f"{p}.attn.out", s.batch, s.q_len, heads * d), new],
            window=cfg.sliding_window, **one,
        )  # fmt: skip
        if ratio:
            # the entries read (as tokens; see compressor): all, or where the indexer picks
            # top_k per query, those of a window of top_k x ratio tokens
            read = s.kv_len if top_k is None else windowed(s.kv_len, s.q_len, top_k * ratio)
            cache = self.t(f"{p}.compressed_cache", s.batch, read, 1, d // ratio,
                           role=Role.KV_CACHE)  # fmt: skip
            part = self.op(OpKind.ATTENTION, f"{p}.compressed_attention", [q4, cache],
                           [self.t(f"{p}.attn.compressed", s.batch, s.q_len, heads * d)],
                           compress=ratio, top_k=top_k, **one)  # fmt: skip
            out = self.op(OpKind.ELEMENTWISE, f"{p}.attn.merge", [out, part],
                          [self.t(f"{p}.attn.merged", s.batch, s.q_len, heads * d)],
                          flops_per_element=3, tp="split", fn="lse_merge")  # fmt: skip
        out = self.vector(OpKind.ELEMENTWISE, f"{p}.o_rope", [out], heads * d,
                          ROTARY_FLOPS * rope / d, tp="split", fn="rope")  # fmt: skip
        groups, rank = cfg.o_groups, cfg.o_lora_rank
        grouped = self.t(f"{out.name}.groups", groups, self.tokens, heads * d // groups)
        w_a = self.t(f"{p}.wo_a.w", groups, heads * d // groups, rank, role=Role.WEIGHT)
        low = self.op(OpKind.MATMUL, f"{p}.wo_a", [grouped, w_a],
                      [self.t(f"{p}.wo_a.out", groups, self.tokens, rank)],
                      compute=self.act.value, tp="head_batch")  # fmt: skip
        low = self.t(low.name, s.batch, s.q_len, groups * rank)
        return self.matmul(f"{p}.wo_b", low, cfg.hidden_size, tp="row")

    def hyper_pre(self, p: str, streams: Tensor) -> Tensor:
        """A hyper-connection's input side (DeepSeek-V4's hc_pre, Zhu et al. 2024's
        hyper-connections, manifold-constrained): the hc_mult streams (flattened, RMS-normed)
        mapped to (2 + hc_mult) x hc_mult mixing logits (fn, in fp32), split into the input
        weights, the output weights and the hc_mult x hc_mult stream mix that
        hc_sinkhorn_iters Sinkhorn steps make doubly stochastic, then the sublayer's input,
        the streams' weighted sum."""
        cfg, hc = self.cfg, self.cfg.hc_mult
        mix = (2 + hc) * hc
        logits = self.matmul(f"{p}.fn", streams, mix)
        # ~4 FLOPs an element of each of 20 iterations over hc x hc: tiny beside the rest
        self.vector(OpKind.ELEMENTWISE, f"{p}.sinkhorn", [logits], mix, SOFTMAX_FLOPS_PER_ELEMENT,
                    fn="sinkhorn")  # fmt: skip
        return self.vector(OpKind.ELEMENTWISE, f"{p}.pre", [streams, logits],
                           cfg.hidden_size, 2 * hc, fn="weighted_sum")  # fmt: skip

    def hyper_post(self, p: str, y: Tensor, streams: Tensor) -> Tensor:
        """A hyper-connection's output side (hc_post): each new stream is the sublayer's
        output times its output weight plus the old streams mixed by the Sinkhorn map."""
        hc = self.cfg.hc_mult
        return self.op(OpKind.ELEMENTWISE, f"{p}.post", [y, streams],
                       [self.t(f"{p}.streams", *streams.shape)],
                       flops_per_element=2 + 2 * hc, fn="hc_post")  # fmt: skip

    def hyper_stack(self, x: Tensor) -> Tensor:
        """DeepSeek-V4's layers over hc_mult residual streams (each starting as the
        embedding), then hc_head: the streams' weights from their own map (fn) and their
        weighted sum, which the final norm takes."""
        cfg, s = self.cfg, self.step
        width = cfg.hc_mult * cfg.hidden_size
        streams = Tensor(f"{x.name}[streams]", (s.batch, s.q_len, width), self.act)
        for p in self.layers():
            streams = self.hyper_layer(p, streams)
        self.layer = cfg.num_layers
        weights = self.matmul("hc_head.fn", streams, cfg.hc_mult)
        return self.vector(OpKind.ELEMENTWISE, "hc_head", [streams, weights], cfg.hidden_size,
                           2 * cfg.hc_mult, fn="weighted_sum")  # fmt: skip

    def hyper_layer(self, p: str, streams: Tensor) -> Tensor:
        """A DeepSeek-V4 block: attention, then the experts, each between a
        hyper-connection's two sides, each sublayer's input normed on its own (no residual
        add fused: the streams carry the residual)."""
        h, _ = self.norm(f"{p}.norm_attn", self.hyper_pre(f"{p}.hc_attn", streams), None)
        streams = self.hyper_post(f"{p}.hc_attn", self.attention_block(p, h), streams)
        h, _ = self.norm(f"{p}.norm_mlp", self.hyper_pre(f"{p}.hc_ffn", streams), None)
        return self.hyper_post(f"{p}.hc_ffn", self.mlp(p, h), streams)

    def training_attention(self, p: str, qkv: Tensor) -> Tensor:
        """Rotary op writing head-major q, k, v, then attention writing its output and the
        per-query log-sum-exp of the scores (fp32) that FlashAttention's backward reads."""
        cfg, s = self.cfg, self.step
        heads, kv_heads, d = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        q = self.t(f"{p}.q", s.batch, s.q_len, heads, d)
        k = self.t(f"{p}.k", s.batch, s.q_len, kv_heads, d)
        v = self.t(f"{p}.v", s.batch, s.q_len, kv_heads, d)
        rotated_per_q = ROTARY_FLOPS * cfg.rotary_fraction * (heads + kv_heads) / heads
        self.op(OpKind.ELEMENTWISE, f"{p}.rope", [qkv], [q, k, v], tp="heads", fn="rope",
                flops_per_element=rotated_per_q, **self.heads)  # fmt: skip
        outs = [self.t(f"{p}.attn.out", s.batch, s.q_len, heads * d),
                Tensor(f"{p}.attn.lse", (s.batch, s.q_len, heads, 1), DType.FP32)]  # fmt: skip
        return self.op(OpKind.ATTENTION, f"{p}.attention", [q, k, v], outs, causal=True,
                       compute=self.act.value, tp="heads", window=cfg.window(self.layer),
                       chunk=cfg.chunk(self.layer),
                       **self.heads)  # fmt: skip

    def mlp(self, p: str, x: Tensor) -> Tensor:
        cfg = self.cfg
        if not cfg.gated_mlp:
            h = self.matmul(f"{p}.fc_in", x, cfg.intermediate_size, cfg.mlp_bias, tp="column")
            h = self.vector(
                OpKind.ELEMENTWISE, f"{p}.gelu", [h], cfg.intermediate_size, GELU_FLOPS,
                tp="split", fn="gelu",
            )  # fmt: skip
            return self.matmul(f"{p}.fc_out", h, cfg.hidden_size, cfg.mlp_bias, tp="row")
        if cfg.is_expert_layer(self.layer):
            return self.moe(p, x)
        h = self.matmul(f"{p}.gate_up", x, 2 * cfg.intermediate_size, cfg.mlp_bias, tp="column")
        h = self.vector(
            OpKind.ELEMENTWISE, f"{p}.silu_mul", [h], cfg.intermediate_size, SILU_MUL_FLOPS,
            tp="split", fn="silu_mul",
        )  # fmt: skip
        return self.matmul(f"{p}.down", h, cfg.hidden_size, cfg.mlp_bias, tp="row")

    def moe(self, p: str, x: Tensor) -> Tensor:
        """Routed experts as grouped matmuls: the T k token-expert pairs, one row each
        ([1, T k, hidden], compiler/moe_expert.py), against the weights of the experts a
        batch is expected to touch ([E_used, hidden, width]): decode at batch 1 reads k
        experts' weights, a long prefill reads all of them. The pairs are the GEMM's rows,
        its M, as the moe kernel tables key their rows (cost/kernel_tables.py); spreading
        them evenly as ceil(T k / E_used) rows of each used expert counted 116 rows for 8
        tokens' 64 pairs over 58 experts, and priced them at the tables' 116-pair time.
        """
        cfg, tokens = self.cfg, self.tokens
        e, k, h, i = cfg.num_experts, cfg.experts_per_token, cfg.hidden_size, cfg.expert_width
        shared = self.fused_shared  # inside the routed kernel: no shared linears
        two = cfg.shared_expert_width and not shared and self.runs(SHARED_EXPERTS_STREAM)
        main = {"stream": MAIN_STREAM} if two else {}
        logits = self.matmul(f"{p}.router", x, e, bias=cfg.router_bias, **main)
        fused = self.runs(FUSED_MOE)  # routing and activation in the experts'
        inside = fused or self.runs(FUSED_MOE_ACTIVATION)  # activation and the top-k sum
        if not fused:
            self.vector(OpKind.SOFTMAX, f"{p}.router_topk", [logits], e,
                        SOFTMAX_FLOPS_PER_ELEMENT, kernels=self.kernels,
                        expert_groups=cfg.expert_groups or None,
                        **main)  # the engine's routing, by its kind (cost/op_times.py)
        used, pairs = self.routed
        routing = dict(tokens=tokens, experts=e, experts_per_token=k, compute=self.act.value,
                       moe_backend=self.moe_backend, routing_alpha=cfg.routing_alpha,
                       shared_experts=shared or None, **main)  # fmt: skip
        experts = {**routing, "compute": self.expert_format().value}  # their GEMMs'
        routed = self.t(f"{p}.routed", 1, pairs, h)
        w1 = self.t(f"{p}.experts.gate_up.w", used, h, 2 * i, role=Role.WEIGHT)
        gu = self.op(
            OpKind.MATMUL,
            f"{p}.experts.gate_up",
            [routed, w1],
            [self.t(f"{p}.experts.gate_up.out", 1, pairs, 2 * i)],
            tp="expert_column",
            **experts,
        )
        if inside:  # the activation in the gate_up kernel: down reads its i-wide output
            act = Tensor(f"{gu.name}[act]", (*gu.shape[:-1], i), gu.dtype)
        else:
            act = self.vector(
                OpKind.ELEMENTWISE, f"{p}.experts.silu_mul", [gu], i, SILU_MUL_FLOPS,
                tp="expert_split", **routing,
            )  # fmt: skip
        w2 = self.t(f"{p}.experts.down.w", used, i, h, role=Role.WEIGHT)
        down = self.op(
            OpKind.MATMUL,
            f"{p}.experts.down",
            [act, w2],
            [self.t(f"{p}.experts.down.out", 1, pairs, h)],
            tp="expert_row",
            **experts,
        )
        parts = [down] if shared else \
            [down, *self.shared_expert(p, x, {"stream": AUX_STREAM} if two else {})]
        if inside and len(parts) == 1:  # the finalize in the experts' kernel writes the output
            return Tensor(f"{down.name}[finalized]", x.shape, down.dtype)
        combined = self.t(f"{p}.moe.out", *x.shape)
        return self.op(OpKind.ELEMENTWISE, f"{p}.combine", parts, [combined],
                       flops_per_element=2 * (k + shared) + 2 * (len(parts) > 1))  # fmt: skip

    def expert_format(self) -> DType:
        """The format the routed experts' GEMMs compute in: FP8 where the engine quantizes a
        16-bit run's input to MXFP4 experts to MXFP8 (MXFP8_MOE_INPUT), else the run's."""
        mxfp8 = self.runs(MXFP8_MOE_INPUT) and takes_mxfp8_moe_input(self.cfg, self.act,
                                                                     self.weight)  # fmt: skip
        return DType.FP8 if mxfp8 else self.act

    def shared_expert(self, p: str, x: Tensor, stream: dict[str, str]) -> list[Tensor]:
        """The shared experts: a SwiGLU MLP (as wide as all of them) every token runs,
        scaled by a sigmoid gate (one output per token) in Qwen2-MoE, not in DeepSeek; none
        for a model without them.

        Its row-split down projection's partial sums join the routed experts' (`reduced_with`
        "experts", compiler/partition.py): engines add the shared output to the routed one
        and all-reduce the MoE layer's output once (vLLM's DeepseekV2MoE.forward, SGLang's
        DeepseekV2MoE.forward_normal: `final_hidden_states + shared_output`, then one
        tensor_model_parallel_all_reduce; TensorRT-LLM's DeepseekV3DecoderLayer.forward_MoE:
        one all-reduce of the MoE output, the shared output passed into it). `stream` marks
        its ops where the engine runs them on a second stream (SHARED_EXPERTS_STREAM)."""
        width = self.cfg.shared_expert_width
        if not width:
            return []
        h = self.matmul(f"{p}.shared.gate_up", x, 2 * width, tp="column", **stream)
        h = self.vector(OpKind.ELEMENTWISE, f"{p}.shared.silu_mul", [h], width, SILU_MUL_FLOPS,
                        tp="split", fn="silu_mul", **stream)  # fmt: skip
        out = self.matmul(f"{p}.shared.down", h, self.cfg.hidden_size, tp="row",
                          reduced_with="experts", **stream)  # fmt: skip
        gate = [self.matmul(f"{p}.shared.gate", x, 1, **stream)] \
            if self.cfg.shared_expert_gate else []  # fmt: skip
        return [out, *gate]

    def build(self) -> Graph:
        cfg = self.cfg
        if cfg.is_encoder_decoder:
            return self.encoder_decoder()
        table = self.table()
        x = self.embed("embed", table, "ids")
        residual: Tensor | None = None
        if cfg.hc_mult > 1:
            x = self.hyper_stack(x)
        for p in self.layers() if cfg.hc_mult == 1 else ():  # DeepSeek-V4's ran above
            h, residual = self.norm(f"{p}.norm_attn", x, residual)
            if cfg.ssm:  # a Mamba block: its mixer alone
                x = self.ssm_block(p, h)
                continue
            if cfg.parallel_block:  # GPT-J: x + attn(ln(x)) + mlp(ln(x)) in one add
                # Falcon-40B/180B norm the MLP's input apart (ln_mlp beside ln_attn)
                h_mlp = self.norm(f"{p}.norm_mlp", x, None)[0] if cfg.parallel_norms == 2 else h
                a, m = self.attention_block(p, h), self.mlp(p, h_mlp)
                x = self.op(OpKind.ELEMENTWISE, f"{p}.add3", [a, m, residual],
                            [self.t(f"{p}.out", *a.shape)], flops_per_element=2,
                            fn="add")  # fmt: skip
                residual = None
                continue
            if cfg.is_linear_layer(self.layer):
                x = self.linear_attention_block(p, h)
            else:
                x = self.attention_block(p, h)
            if cfg.sandwich_norms:  # Gemma-2/3: the attention's output normed before the add
                x = self.norm(f"{p}.norm_post_attn", x, None)[0]
            # TensorRT-LLM fuses the dense layers of an MoE model (DeepSeek's first layers)
            # with NVFP4 weights alone; a dense model's (Llama's) in any format
            fusable = (cfg.is_expert_layer(self.layer) or not cfg.is_moe
                       or self.weight == DType.NVFP4)  # fmt: skip
            h, residual = self.norm(f"{p}.norm_mlp", x, residual, fusable)
            x = self.mlp(p, h)
            if cfg.sandwich_norms:
                x = self.norm(f"{p}.norm_post_mlp", x, None)[0]
        self.layer = cfg.num_layers
        h, _ = self.norm("final_norm", x, residual)
        if self.training:
            return self.loss(h, self.lm_head(h, table, "column"))
        if cfg.encoder:
            return self.pooler(h)
        return self.sample(h, table)

    def encoder_decoder(self) -> Graph:
        """T5: a prefill runs the encoder over the prompt (every token seeing every other),
        then the decoder's first step, whose cross-attention projects the encoder's output
        to the K and V every decoder layer caches; a decode step runs the decoder alone,
        its self-attention over the tokens generated so far (kv_len - cross) and its
        cross-attention over the cached encoder K and V. Encoder ops are layer -1 (before
        the decoder's layers; never compacted), the decoder's layers compact as usual."""
        cfg, s = self.cfg, self.step
        table = self.table()
        encoded: Tensor | None = None
        if isinstance(s.cross, int) and s.cross == 0:  # a prefill: the encoder, then one token
            self.causal = False
            x, residual = self.embed("encoder.embed", table, "encoder.ids"), None
            for j in range(cfg.encoder_layers):
                p = f"encoder.{j}"
                h, residual = self.norm(f"{p}.norm_attn", x, residual)
                h, residual = self.norm(f"{p}.norm_mlp", self.attention_block(p, h), residual)
                x = self.mlp(p, h)
            encoded = self.norm("encoder.final_norm", x, residual)[0]
            self.causal, cross = True, s.q_len
            self.step = StepShape(s.batch, 1, 1)
        else:
            cross = s.cross
            self.step = StepShape(s.batch, s.q_len, s.kv_len - s.cross, s.logits)
        x, residual = self.embed("embed", table, "ids"), None
        for p in self.layers():
            h, residual = self.norm(f"{p}.norm_attn", x, residual)
            h, residual = self.norm(f"{p}.norm_cross", self.attention_block(p, h), residual)
            h, residual = self.norm(f"{p}.norm_mlp", self.cross_attention(p, h, encoded, cross),
                                    residual)  # fmt: skip
            x = self.mlp(p, h)
        self.layer = cfg.num_layers
        return self.sample(self.norm("final_norm", x, residual)[0], table)

    def layers(self) -> Iterator[str]:
        """The name of each layer the graph emits, as it is being emitted (a compact
        graph's stand-in layers recorded with how many they stand for)."""
        for layer, copies in emitted_layers(self.cfg, self.compact):
            if copies > 1:
                self.graph.layer_copies[layer] = copies
            self.layer = layer
            yield f"layers.{layer}"

    def table(self) -> Tensor:
        """The embedding table, in the format its layout keeps it in (16-bit under a
        grouped int4 layout, which quantizes linear layers only)."""
        cfg = self.cfg
        return Tensor("embed.w", (cfg.vocab_size, cfg.hidden_size), self.parts.table, Role.WEIGHT)

    def embed(self, name: str, table: Tensor, ids_name: str) -> Tensor:
        s = self.step
        ids = Tensor(ids_name, (s.batch, s.q_len), DType.INT32)
        out = self.t(f"{name}.out", s.batch, s.q_len, self.cfg.hidden_size)
        return self.op(OpKind.EMBEDDING, name, [table, ids], [out], tp="vocab")

    def cross_attention(self, p: str, x: Tensor, encoded: Tensor | None, cross: Dim) -> Tensor:
        """Attention of the decoder's tokens over the encoder's output (no mask): its K and
        V are projected once, in the prefill, and cached; a decode step reads them."""
        cfg, s = self.cfg, self.step
        width = cfg.num_heads * cfg.head_dim
        q = self.matmul(f"{p}.cross_q", x, width, tp="heads", **self.heads)
        cache = (s.batch, cross, cfg.num_kv_heads, cfg.head_dim)
        keys = [self.t(f"{p}.cross_{kv}", *cache, role=Role.KV_CACHE) for kv in "kv"]
        if encoded is not None:
            w = self.t(f"{p}.cross_kv.w", cfg.hidden_size, 2 * width, role=Role.WEIGHT)
            self.op(OpKind.MATMUL, f"{p}.cross_kv", [encoded, w], keys,
                    compute=self.act.value, tp="heads", **self.heads)  # fmt: skip
        queries = Tensor(f"{q.name}[heads]", (s.batch, s.q_len, cfg.num_heads, cfg.head_dim),
                         self.act)  # fmt: skip
        attn = self.op(OpKind.ATTENTION, f"{p}.cross_attention", [queries, *keys],
                       [self.t(f"{p}.cross.out", s.batch, s.q_len, width)], causal=False,
                       compute=self.attention.value, tp="heads", **self.heads)  # fmt: skip
        return self.matmul(f"{p}.cross_o", attn, cfg.hidden_size, tp="row")

    def sample(self, h: Tensor, table: Tensor) -> Graph:
        """Logits of the positions an inference step samples from, and the sampling."""
        cfg, s = self.cfg, self.step
        view = "[:, -1]" if isinstance(s.logits, int) and s.logits == 1 else "[:, -k:]"
        last = Tensor(f"{h.name}{view}", (s.batch, s.logits, cfg.hidden_size), self.act)
        logits = self.lm_head(last, table, "vocab")
        if self.runs(SAMPLER_PENALTIES):
            self.penalties(logits)
        self.vector(OpKind.SOFTMAX, "sample", [logits], cfg.vocab_size, SOFTMAX_FLOPS_PER_ELEMENT)
        return self.graph

    def penalties(self, logits: Tensor) -> None:
        """vLLM V1's penalties (vllm/model_executor/layers/utils.py apply_penalties, 0.11),
        run whenever any request of the batch has one, over the float32 logits the sampler
        holds (v1/sample/sampler.py): for the prompt's tokens and the output's, a
        (rows, vocab + 1) int64 count zeroed and scattered into, then its mask `> 0`
        (get_token_bin_counts_and_mask); the repetition penalty's kernel over the logits and
        both masks; then the frequency and presence penalties as torch ops, each a float32
        temporary then `logits -=`, whatever their values (0 included). 85 bytes a logit;
        the token ids scattered in are a row's tokens, not the vocabulary's, and are left
        out (their tensor stands for them at one id a row)."""
        shape = logits.shape

        def made(name: str, ins: list[Tensor], dtype: DType, fn: str) -> Tensor:
            return self.op(OpKind.ELEMENTWISE, f"penalty.{name}", ins,
                           [Tensor(f"penalty.{name}.out", shape, dtype)], fn=fn)  # fmt: skip

        counts, masks = {}, {}
        for which in ("prompt", "output"):
            ids = Tensor(f"penalty.{which}_ids", (*shape[:-1], 1), DType.INT64)
            counts[which] = made(f"{which}_bins", [ids], DType.INT64, "bincount")
            masks[which] = made(f"{which}_mask", [counts[which]], DType.BOOL, "greater")
        held = Tensor("logits.fp32", shape, DType.FP32)
        out = made("repetition", [held, masks["prompt"], masks["output"]], DType.FP32,
                   "repetition_penalty")  # fmt: skip
        for name, scaled in (("frequency", counts["output"]), ("presence", masks["output"])):
            term = made(f"{name}_term", [scaled], DType.FP32, "multiply")
            out = made(name, [out, term], DType.FP32, "subtract")

    def pooler(self, h: Tensor) -> Graph:
        """An encoder's pooler: a dense layer and tanh on each sequence's first token."""
        first = Tensor(f"{h.name}[:, 0]", (self.step.batch, 1, self.cfg.hidden_size), self.act)
        pooled = self.matmul("pooler", first, self.cfg.hidden_size, bias=True, tp="column")
        self.vector(OpKind.ELEMENTWISE, "pooler.tanh", [pooled], self.cfg.hidden_size,
                    TANH_FLOPS, tp="split", fn="tanh")  # fmt: skip
        return self.graph

    def lm_head(self, x: Tensor, table: Tensor, tp: str) -> Tensor:
        """Logits of the positions in x; a tied head reads the embedding table as K x N."""
        cfg = self.cfg
        if cfg.tie_word_embeddings:  # the embedding table read as K x N: same bytes
            head = Tensor(table.name, (cfg.hidden_size, cfg.vocab_size), table.dtype, Role.WEIGHT)
        else:
            head = Tensor("lm_head.w", (cfg.hidden_size, cfg.vocab_size), self.parts.head,
                          Role.WEIGHT)
        ins = [x, head]
        if cfg.lm_head_bias:
            ins.append(self.t("lm_head.b", cfg.vocab_size, role=Role.WEIGHT))
        # a head kept wider than the activations (ir/dtypes.KEPT_WIDE) runs and writes its
        # logits in its own format, as the engines' unquantized LM head does
        wide = head.dtype if isinstance(head.dtype, DType) and head.dtype.bits > self.act.bits \
            else self.act  # fmt: skip
        out = Tensor("logits", (*x.shape[:-1], cfg.vocab_size), wide)
        return self.op(OpKind.MATMUL, "lm_head", ins, [out], compute=wide.value, tp=tp)

    def loss(self, h: Tensor, logits: Tensor) -> Graph:
        """Cross-entropy of every position: the softmax (written over the logits, as
        Megatron's fused kernel does, for the backward to read) and one fp32 loss per token."""
        s = self.step
        labels = Tensor("labels", (s.batch, s.q_len), DType.INT32)
        outs = [self.t("probs", *logits.shape),
                Tensor("loss", (s.batch, s.q_len), DType.FP32)]  # fmt: skip
        self.op(OpKind.SOFTMAX, "loss", [logits, labels], outs, fn="cross_entropy",
                flops_per_element=CROSS_ENTROPY_FLOPS, tp="vocab")  # fmt: skip
        return self.graph


def refuse_untrainable(cfg: TransformerConfig) -> None:
    """Training's graphs (autodiff of the forward pass) are built for multi-head attention
    only: a model with latent attention or state-space layers is refused, not costed as
    something else."""
    if cfg.is_mla or cfg.compress_ratios:
        kind = "multi-head latent attention" if cfg.is_mla else "DeepSeek-V4's attention"
        raise UserError(f"{cfg.name}: training a model with {kind} is not modelled yet "
                        "(its inference and serving are)")
    if cfg.ssm or cfg.is_encoder_decoder or cfg.linear_layers:
        kind = ("a state-space model" if cfg.ssm else "linear attention" if cfg.linear_layers
                 else "an encoder-decoder")  # fmt: skip
        raise UserError(f"{cfg.name}: training {kind} is not modelled yet (its inference is)")


def emitted_layers(cfg: TransformerConfig, compact: bool) -> list[tuple[int, int]]:
    """(layer, how many layers it stands for) of the layers a graph emits: every layer, or
    in a compact graph the first of each run of identical ones. Layer 0 differs from the
    rest (its norm has no residual to add), an MoE model's dense layers from its expert
    layers, windowed layers from global ones, and layers whose checkpoint keeps other
    matmuls unquantized (checkpoint.unquantized_ops): DeepSeek-V3 (3 dense of 61) is emitted
    as layers 0, 1 (for 1-2) and 3 (for 3-60); Gemma-2, alternating, as every layer; Meta's
    Llama-3.1-405B FP8 (layers 0 and 125 all BF16) as 0, 1 (for 1-124) and 125."""
    n = cfg.num_layers
    if not compact:
        return [(layer, 1) for layer in range(n)]

    def kind(layer: int) -> tuple:
        return (cfg.is_expert_layer(layer), cfg.window(layer), cfg.chunk(layer),
                cfg.is_linear_layer(layer), cfg.compress_ratio(layer),
                cfg.unquantized and unquantized_ops(cfg.unquantized, layer))  # fmt: skip

    kinds = [kind(layer) for layer in range(n)]  # each once: unquantized_ops matches the
    # checkpoint's exclusions layer by layer
    starts = [0, *(layer for layer in range(1, n)
                   if layer == 1 or kinds[layer] != kinds[layer - 1])]  # fmt: skip
    return [(a, b - a) for a, b in zip(starts, [*starts[1:], n], strict=True)]


def build_step(
    cfg: TransformerConfig,
    step: StepShape,
    act: DType,
    weight: Format | None = None,
    *,
    training: bool = False,
    compact: bool = False,
    attention: DType | None = None,
    kv: DType | None = None,
    moe_backend: str = "",
    kernels: tuple[str, ...] = (),
) -> Graph:
    """One step's ops; `training` builds the forward pass of a training step (see above).

    `compact` emits the first layer of each run of identical layers, standing for the run
    (Graph.layer_copies, emitted_layers): layer 0, whose norm has no residual to add, then
    the rest (an MoE model's dense layers and its expert layers apart), so the compact
    graph has the full graph's op counts, FLOPs, bytes, peak activations and pipeline
    stages (tested) at a fortieth of the build time of an 80-layer model.

    `attention` is the format attention computes in when it differs from `act`: serving
    engines of 2024 ran attention in 16-bit even in FP8 engines (TensorRT-LLM's GPT attention
    plugin takes FP16/BF16 inputs, the FP8 KV cache being dequantized on the fly). `kv` is
    the format the KV cache is stored in when it differs from `act`: engines with FP4 GEMMs
    keep an FP8 cache (TensorRT-LLM's NVFP4 engines: kv_cache_dtype fp8), and vLLM's
    --kv-cache-dtype fp8 stores one beside 16-bit weights. `moe_backend` names the engine's
    MoE backend (cost/kernel_tables.py MOE_BACKENDS), stamped on the routed experts' ops so
    that a measured table of that backend prices them; "" leaves the default's. `kernels`
    names the engine's own kernels (serving/engines.toml), stamped on every matmul,
    attention and embedding op (and the collectives after them, compiler/partition.py) so
    that a table of one of them prices it (cost/kernel_tables.py, cost/collectives.py);
    GRAPH_KERNELS change the ops built.

    An inference step whose GEMMs compute in FP8 or FP4 keeps its other activations in
    16 bits, as the engines do (quantized_at_matmuls).
    """
    if training and step.q_len != step.kv_len:
        raise ValueError("a training step runs whole sequences: q_len must equal kv_len")
    if training:
        refuse_untrainable(cfg)
    graph = _Builder(cfg, step, act, weight or act, training, compact, attention, kv,
                     moe_backend, kernels).build()
    stream = stream_format(act)
    if training or cfg.encoder or stream == act:
        return graph
    return quantized_at_matmuls(graph, act, stream)


def hidden_state_bytes(cfg: TransformerConfig, act: DType) -> int:
    """Bytes of one token's hidden state between layers and pipeline stages, in the format
    the engine keeps activations in (ir/dtypes.stream_format), as build_step's graph holds
    it: what a stage sends on per token."""
    return cfg.hidden_size * stream_format(act).itemsize


_QUANTIZED_INPUTS = (OpKind.MATMUL, OpKind.ATTENTION)


def quantized_at_matmuls(graph: Graph, act: DType, stream: DType) -> Graph:
    """The graph with the activations that no op computing in `act` reads kept in `stream`,
    as serving engines keep them when their GEMMs compute in `act`, 8 bits or fewer: only
    the inputs of a matmul (or of attention run in `act`) are quantized, by the kernel
    that writes them (TensorRT-LLM's RMSNorm and SwiGLU plugins write FP8, its rotary
    kernel FP8 Q for its FP8 attention, whose output is FP8); every GEMM writes 16 bits,
    so the residual stream, its norms and adds, the activation function's input, the
    all-reduces after o_proj and down and the logits are 16-bit. Without this an FP8
    model's all-reduce moved half its bytes.

    Engines that run the quantize as its own kernel (vLLM's scaled_fp8_quant without its
    fusion passes) read the 16-bit tensor once more and write the quantized one; that
    kernel is not modelled (docs/cost.md, "Activation formats of quantized engines").

    Attention computing narrower than `stream` in a format of its own (FP8 beside FP4 GEMMs:
    scenarios/formats.resolve_attention_format) reads its inputs in that format, as it does
    in an FP8 run: its format is its op's, not the checkpoint's (an NVFP4 DeepSeek-R1's
    trtllm-gen MLA over an FP8 cache takes an FP8 query as the FP8 checkpoint's does: SGLang's
    trtllm_mla backend quantizes it, mla_quantize_and_rope_for_fp8, code index copy
    54572168968; its query was 16-bit, 1.8% of the verify's attention op; issue #48). A
    tensor a GEMM in `act` reads too keeps `act`."""
    quantized: dict[str, DType] = {}
    for op in graph.ops:
        compute = op.attr("compute")
        if op.kind not in _QUANTIZED_INPUTS or compute is None:
            continue
        fmt = DType(compute)
        if fmt == act or (op.kind is OpKind.ATTENTION and fmt.bits < stream.bits):
            for t in op.inputs:
                if quantized.get(t.name) != act:
                    quantized[t.name] = fmt

    def kept(t: Tensor) -> Tensor:
        if t.role is not Role.ACTIVATION or t.dtype != act:
            return t
        fmt = quantized.get(t.name, stream)
        return t if fmt == act else Tensor(t.name, t.shape, fmt, t.role)

    graph.ops = [Op(op.kind, op.name, tuple(map(kept, op.inputs)), tuple(map(kept, op.outputs)),
                    op.attrs, op.layer) for op in graph.ops]  # fmt: skip
    return graph
