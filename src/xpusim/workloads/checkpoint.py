"""A quantized checkpoint's format, read from what its repository declares.

A Hugging Face repo states how its weights are stored in `config.json`'s
`quantization_config` (compressed-tensors, AWQ, GPTQ, FP8 block, MXFP4, AMD Quark) or, for
NVIDIA's Model Optimizer, in `hf_quant_config.json` beside it. Each reader here maps that
onto the formats xpusim costs (ir/dtypes.py, ir/weight_layouts.toml): the weights' storage
format, the matrix unit's input format when activations are quantized too (W8A8, W4A4), the
KV cache's, and the modules the checkpoint leaves unquantized.

The format only sets defaults at the options boundary (`checkpoint_options`, called by
api.py): `--precision`, `--weight-precision` and `--kv-precision` given by the user win.
xpusim stores a model's linear layers in one weight format but for the attention
projections and dense MLPs the checkpoint's exclusions name, layer by layer
(`unquantized_module`: Meta's Llama-3.1-405B FP8 keeps every attention and the first and
last layers BF16): those stay 16-bit in a quantized run, in the graph's bytes and GEMMs and
in the weights' memory, as the checkpoint holds them and engines load them (the layer
builder reads them off TransformerConfig.unquantized). Exclusions of routed or shared
experts are costed in the run's format.
"""

from __future__ import annotations

import re
from dataclasses import MISSING, dataclass, fields, replace
from fnmatch import translate
from functools import lru_cache
from typing import Any

from xpusim.errors import UserError, closest
from xpusim.ir.dtypes import DType, weight_layouts
from xpusim.memo import scoped


@dataclass(frozen=True)
class Checkpoint:
    """How a checkpoint stores a model, in xpusim's format names."""

    method: str  # the producer's name for it: modelopt, compressed-tensors, awq, gptq, ...
    weights: str | None  # storage format of the quantized linear layers: nvfp4, int4, ...
    compute: str | None  # the matmuls' input format when activations are quantized, else None
    kv: str | None  # the KV cache format it declares, if any
    excluded: tuple[str, ...] = ()  # module names or patterns left unquantized
    # why a declared format could not be read (weights is None then): the model still
    # resolves, and a run must name its formats itself
    unread: str = ""
    kept_as: str = "unquantized"  # what the excluded modules are stored as

    @property
    def keeps_attention(self) -> bool:
        """Whether attention's projections are left unquantized (experts-only checkpoints)."""
        return any(_attention(m) for m in self.excluded)

    @property
    def keeps_head(self) -> bool:
        return any(m.split(".")[-1].strip("*") == "lm_head" for m in self.excluded)

    @property
    def kept_layers(self) -> list[int]:
        """The layers excluded whole (`model.layers.0`, `model.layers.61*`): Meta's 405B FP8
        keeps its first and last so."""
        whole = (re.search(r"layers\.(\d+)$", m.rstrip("*").rstrip(".")) for m in self.excluded)
        return sorted({int(w.group(1)) for w in whole if w})

    def describe(self) -> str:
        """One phrase: 'modelopt nvfp4 weights and activations, fp8 KV cache, attention and
        LM head unquantized'; 'fbgemm_fp8 fp8 weights, fp8 activations, attention, layers 0
        and 125 and LM head unquantized'."""
        if self.weights is None:
            return f"{self.method} (not read: {self.unread})"
        what = f"{self.method} {self.weights} weights" + (
            f", {self.compute} activations" if self.compute else " (weight-only)")
        layers = self.kept_layers
        named = f"layer{'s' * (len(layers) > 1)} {_and([str(n) for n in layers])}"
        kept = [n for n, k in (("attention", self.keeps_attention), (named, bool(layers)),
                               ("LM head", self.keeps_head)) if k]  # fmt: skip
        kv = f", {self.kv} KV cache" if self.kv else ""
        return what + kv + (f", {_and(kept)} {self.kept_as}" if kept else "")

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "weights": self.weights, "compute": self.compute,
                "kv": self.kv, "excluded": len(self.excluded),
                "describe": self.describe()}  # fmt: skip


def _and(words: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return " and ".join([", ".join(words[:-1]), words[-1]] if len(words) > 1 else words)


def _attention(module: str) -> bool:
    """Whether a module name or pattern is attention's (`model.layers.3.self_attn*`,
    `...self_attn.o_proj`), not a norm named after it (`post_attention_layernorm`)."""
    return ("attn" in module or "attention" in module) and "norm" not in module.split(".")[-1]


MODULES = {
    "qkv": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
    "q_proj": ("self_attn.q_proj",), "q_a_proj": ("self_attn.q_a_proj",),
    "q_b_proj": ("self_attn.q_b_proj",), "kv_a_proj": ("self_attn.kv_a_proj_with_mqa",),
    "qkv_a_proj": ("self_attn.q_a_proj", "self_attn.kv_a_proj_with_mqa"),
    "kv_b_proj": ("self_attn.kv_b_proj",), "q_absorb": ("self_attn.kv_b_proj",),
    "v_absorb": ("self_attn.kv_b_proj",), "o_proj": ("self_attn.o_proj",),
    "gate_up": ("mlp.gate_proj", "mlp.up_proj"), "down": ("mlp.down_proj",),
    "in_proj_qkvz": ("linear_attn.in_proj_qkv", "linear_attn.in_proj_z"),
    "in_proj_ba": ("linear_attn.in_proj_a", "linear_attn.in_proj_b"),
    "out_proj": ("linear_attn.out_proj",),
    "shared.gate_up": ("mlp.shared_experts.gate_proj", "mlp.shared_experts.up_proj"),
    "shared.down": ("mlp.shared_experts.down_proj",), "shared.gate": ("mlp.shared_expert_gate",),
}  # fmt: skip
"""The layer builder's matmuls a checkpoint may leave unquantized (workloads/transformer.py,
named after `layers.N.`) -> the Hugging Face modules under `model.layers.N.` whose weights
they multiply by: a fused qkv (GQA), qkv_a_proj (MLA) or gate_up (a dense SwiGLU MLP) all
of its parts, MLA's absorbed products kv_b_proj's slices, a Gated DeltaNet layer's fused
in_proj_qkvz and in_proj_ba the four modules Qwen3.5 splits them into (Qwen3-Next's own
fused names, in a list that names modules one by one, are not matched: no repo here has
one; an exclusion of the whole `linear_attn` module covers both), and the shared experts'
MLP (DeepSeek's `shared_experts`; Qwen's MoE names its one `shared_expert`, read alike:
unquantized_module). The routed experts are not here: an exclusion of theirs is costed in
the run's format."""


_SPELLINGS = {op: {modules, tuple(m.replace("shared_experts", "shared_expert") for m in modules)}
              for op, modules in MODULES.items()}  # fmt: skip
"""Each op's modules as DeepSeek names them and as Qwen's MoE does (its one shared expert
`shared_expert`): the same modules for every other op."""


@lru_cache(maxsize=64)
def _matcher(excluded: tuple[str, ...]) -> re.Pattern[str]:
    """One regex for a checkpoint's exclusions, each a module name or a modelopt glob
    (`model.layers.*.self_attn.q_a_proj`, `model.layers.3.self_attn*`) that also covers the
    modules under it (transformers' modules_to_not_convert names a module for all of its
    own), or a compressed-tensors regular expression (`re:.*self_attn.*`), matched from the
    name's start as its library does (compressed_tensors.utils.match.match_name:
    `re.match(target.removeprefix("re:"), name)`): Meta's 405B FP8 repo lists ~500 full
    paths, and every layer asks of each."""
    names = (_language_model(e) for e in excluded if not e.startswith("re:"))
    globs = (p for e in names for p in (e, f"{e}.*"))
    regexes = (f"(?:{e.removeprefix('re:')})" for e in excluded if e.startswith("re:"))
    return re.compile("|".join([*(translate(p) for p in globs), *regexes]))


def _language_model(name: str) -> str:
    """A multimodal repo's language-model module under the text model's own name: Qwen3.5's
    `model.language_model.layers.N...` and Kimi-K2.5's `language_model.model.layers.N...`
    as `model.layers.N...`, the names the layer builder asks about (SGLang's Quark loader
    maps them alike: `prefix.replace("model.language_model.", "model.")`)."""
    for prefix in ("model.language_model.", "language_model.model."):
        if name.startswith(prefix):
            return "model." + name.removeprefix(prefix)
    return name


def unquantized_module(excluded: tuple[str, ...], layer: int, op: str) -> bool:
    """Whether a checkpoint that excludes `excluded` keeps the weights of the builder's
    matmul `op` (its name after `layers.N.`: qkv, o_proj, gate_up, down, ...) of `layer`
    unquantized: every module it reads is excluded, by name, by a glob or under an
    excluded module (`model.layers.0` keeps all of layer 0), under either spelling of a
    shared expert."""
    if not excluded or op not in _SPELLINGS:
        return False
    match = _matcher(excluded).match
    return any(all(match(f"model.layers.{layer}.{m}") for m in spelled)
               for spelled in _SPELLINGS[op])  # fmt: skip


@scoped()
def unquantized_ops(excluded: tuple[str, ...], layer: int) -> frozenset[str]:
    """The builder's matmuls of `layer` the checkpoint keeps unquantized: layers that differ
    in them are emitted apart in a compact graph (transformer.emitted_layers), as Meta's
    405B FP8 keeps layers 0 and 125 whole in BF16. Kept in the open scope: a serve builds
    its graphs about twenty times, each asking of every layer."""
    return frozenset(op for op in MODULES if unquantized_module(excluded, layer, op))


_MLP_ELSEWHERE = frozenset({"gate", "router", "experts", "shared_experts", "shared_expert",
                            "shared_expert_gate"})
"""Modules under `mlp.` that are not a dense MLP's projection: the router (always 16-bit,
transformer.unquantized_matmul) and the experts (costed in the run's format)."""


def stated_checkpoint(stated: Any, origin: str) -> Checkpoint:
    """A checkpoint a zoo file states by hand (`_xpusim.checkpoint`, from a model card where
    the repo's own file was not found): its fields Checkpoint's, `excluded` a list of module
    names, and an excluded attention or MLP projection one the layer builder reads
    (MODULES), since a misspelt one would leave that projection quantized without a
    word; else a UserError naming the field or the module."""
    known = {f.name for f in fields(Checkpoint)}
    needed = [f.name for f in fields(Checkpoint) if f.default is MISSING]
    if not isinstance(stated, dict) or not all(k in stated for k in needed):
        raise UserError(f"{origin}: _xpusim.checkpoint must be an object with the fields "
                        f"{', '.join(needed)}")  # fmt: skip
    for key in stated:
        if key not in known:
            raise UserError(f"{origin}: _xpusim.checkpoint has no field {key!r}"
                            f"{closest(key, known)}")  # fmt: skip
    excluded = stated.get("excluded", [])
    if not isinstance(excluded, list) or not all(isinstance(m, str) for m in excluded):
        raise UserError(f"{origin}: _xpusim.checkpoint.excluded must be a list of module "
                        f"names")  # fmt: skip
    modules = {m for parts in MODULES.values() for m in parts}
    for module in excluded:
        kind = next((k for k in ("self_attn.", "mlp.") if f".{k}" in module), "")
        name = kind + module.partition(f".{kind}")[2].rstrip("*")
        projection = kind == "self_attn." or (
            kind == "mlp." and "." not in name[4:] and name[4:] not in _MLP_ELSEWHERE)
        if projection and name not in modules:
            raise UserError(f"{origin}: _xpusim.checkpoint.excluded names {module!r}, no "
                            f"projection xpusim builds{closest(name, modules)}")  # fmt: skip
    return Checkpoint(**{**stated, "excluded": tuple(excluded)})


def with_checkpoint(config: Any, checkpoint: Checkpoint) -> Any:
    """A model config with the checkpoint that stores it and the modules it leaves
    unquantized (which change the graph, unlike the rest of the checkpoint's record)."""
    return replace(config, checkpoint=checkpoint, unquantized=tuple(checkpoint.excluded))


def read_checkpoint(config: dict, hf_quant: dict | None, origin: str) -> Checkpoint | None:
    """The checkpoint format a repo declares: its hf_quant_config.json (modelopt) if given,
    else config.json's `quantization_config`; None for an unquantized repo. A method or
    format xpusim has no layout for resolves with `unread` saying why, so that a run of it
    names its own formats (checkpoint_options)."""
    try:
        return _read(config, hf_quant, origin)
    except UserError as error:
        q = config.get("quantization_config")
        method = q.get("quant_method", "?") if isinstance(q, dict) else "modelopt"
        return Checkpoint(str(method), None, None, None, unread=str(error))


def _read(config: dict, hf_quant: dict | None, origin: str) -> Checkpoint | None:
    if hf_quant is not None:
        return _modelopt(_field(hf_quant, "quantization", dict, origin), origin)
    q = config.get("quantization_config")
    if q is None:
        text = config.get("text_config")  # a multimodal repo may nest it
        q = text.get("quantization_config") if isinstance(text, dict) else None
    if q is None:
        return None
    if not isinstance(q, dict):
        raise UserError(f"{origin}: field 'quantization_config' must be an object")
    producer = q.get("producer")  # a modelopt export names itself there, not in quant_method
    named = producer.get("name") if isinstance(producer, dict) else ""
    method = str(q.get("quant_method", named)).lower()
    reader = _READERS.get(method)
    if reader is None:
        raise UserError(f"{origin}: quantization_config quant_method {method!r} is not read "
                        f"(read: {', '.join(sorted(_READERS))})")  # fmt: skip
    checkpoint = reader(q, origin)
    if config.get("expert_dtype") == "fp4" and checkpoint.weights == "fp8-block":
        return _fp4_experts(checkpoint)
    return checkpoint


def _fp4_experts(fp8: Checkpoint) -> Checkpoint:
    """DeepSeek-V4's repos: quantization_config's FP8 blocks for every linear layer but the
    routed experts, which `expert_dtype` fp4 stores as MXFP4 (e2m1 values with a power-of-two
    scale per 32, as its inference code's FP4 dequantization reads them) and which hold
    97% of its weights; read as an experts-only checkpoint (its attention named kept), so
    the run stores the experts' format and says how many parameters that undercounts."""
    return Checkpoint("fp8 with fp4 experts", "mxfp4", fp8.compute, fp8.kv,
                      (*fp8.excluded, "self_attn"), kept_as=f"in {fp8.weights}")  # fmt: skip


def _field(data: dict, key: str, kind: type, origin: str) -> Any:
    value = data.get(key)
    if not isinstance(value, kind):
        raise UserError(f"{origin}: field {key!r} missing or not a {kind.__name__}")
    return value


def _names(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


_MODELOPT = {"FP8": ("fp8", "fp8"), "NVFP4": ("nvfp4", "nvfp4"), "FP8_PB": ("fp8-block", "fp8"),
             "W4A8_AWQ": ("int4", "fp8"), "W4A16_AWQ": ("int4", None),
             "MXFP4": ("mxfp4", "mxfp4")}  # fmt: skip
"""modelopt quant_algo -> (weights, compute): the unified HF checkpoint's names
(TensorRT-Model-Optimizer docs/source/deployment/3_unified_hf.rst: FP8, FP8_PB, NVFP4, ...)."""
_KV = {"FP8": "fp8", "NVFP4": "nvfp4", "INT8": "int8"}


def _modelopt(q: dict, origin: str) -> Checkpoint:
    """hf_quant_config.json's `quantization` block, or the `quantization_config` newer
    modelopt exports write into config.json (quant_method modelopt, its KV format as
    `kv_cache_scheme`, its exclusions as `ignore`)."""
    algo = str(q.get("quant_algo"))
    if algo not in _MODELOPT:
        raise UserError(f"{origin}: modelopt quant_algo {algo!r} is not read (read: "
                        f"{', '.join(_MODELOPT)})")  # fmt: skip
    weights, compute = _MODELOPT[algo]
    kv_spec = q.get("kv_cache_quant_algo", q.get("kv_cache_scheme"))
    kv = (_tensor_format(kv_spec, origin) if isinstance(kv_spec, dict)
          else _KV.get(str(kv_spec).upper()))  # fmt: skip
    excluded = _names(q.get("exclude_modules")) + _names(q.get("ignore"))
    return Checkpoint("modelopt", weights, compute, kv, excluded)


def _fp8(q: dict, origin: str) -> Checkpoint:
    """DeepSeek's and Qwen's FP8 repos: `fmt` e4m3, a `weight_block_size` of 128 x 128
    (fp8-block) or none (per-tensor scales, plain fp8); activations quantized per token
    group at run time (activation_scheme dynamic), so the matmuls run in FP8."""
    block = q.get("weight_block_size")
    weights = "fp8-block" if block == [128, 128] else "fp8"
    if block is not None and block != [128, 128]:
        raise UserError(f"{origin}: quantization_config weight_block_size {block!r}: only "
                        "[128, 128] blocks have a layout (fp8-block)")  # fmt: skip
    return Checkpoint("fp8", weights, "fp8", None, _names(q.get("modules_to_not_convert"))
                      + _names(q.get("ignored_layers")))  # fmt: skip


def _fbgemm_fp8(q: dict, origin: str) -> Checkpoint:
    """Meta's FP8 releases (Llama-3.1-405B-FP8): FBGEMM's row-wise FP8 weights (one scale
    an output channel, a negligible 4 bytes a row) and activations quantized per token at
    run time under `activation_scale_ub` (vLLM's FBGEMMFp8LinearMethod: apply_fp8_linear
    with use_per_token_if_dynamic), so the matmuls run in FP8; modules_to_not_convert lists
    the linears by full path, which vLLM matches exactly."""
    return Checkpoint("fbgemm_fp8", "fp8", "fp8", None, _names(q.get("modules_to_not_convert")))


def _mxfp4(q: dict, origin: str) -> Checkpoint:
    """gpt-oss: the experts' weights in MXFP4, activations in 16 bits (the
    modules_to_not_convert list names attention, the router, the embedding and the head)."""
    return Checkpoint("mxfp4", "mxfp4", None, None, _names(q.get("modules_to_not_convert")))


def _int_group(bits: int, group: int, origin: str, method: str) -> str:
    """AWQ and GPTQ integers as a layout name: int4 at its group (int4-g32, int4, ...), int8."""
    if bits == 8:
        return "int8"
    name = "int4" if group == weight_layouts()["int4"].group else f"int4-g{group}"
    if bits != 4 or name not in weight_layouts():
        raise UserError(f"{origin}: {method} with {bits} bits in groups of {group} has no "
                        "layout here (int4 in groups of 32, 64 or 128; int8)")  # fmt: skip
    return name


def _awq(q: dict, origin: str) -> Checkpoint:
    weights = _int_group(q.get("bits", 4), q.get("group_size", 128), origin, "awq")
    return Checkpoint("awq", weights, None, None, _names(q.get("modules_to_not_convert")))


def _gptq(q: dict, origin: str) -> Checkpoint:
    weights = _int_group(q.get("bits", 4), q.get("group_size", 128), origin, "gptq")
    return Checkpoint("gptq", weights, None, None, _names(q.get("modules_to_not_convert")))


def _tensor_format(spec: Any, origin: str) -> str | None:
    """A compressed-tensors (or Quark) tensor spec as a format name: floats of 8 bits are
    fp8, of 4 bits in groups of 16 nvfp4 and of 32 mxfp4; integers of 8 bits int8, of 4
    bits an int4 layout at their group."""
    if not isinstance(spec, dict):
        return None
    bits, kind = spec.get("num_bits"), str(spec.get("type", "int"))
    group = spec.get("group_size") or 0
    if kind == "float" and bits == 8:
        return "fp8"
    if kind == "float" and bits == 4 and group in (16, 32):
        return "nvfp4" if group == 16 else "mxfp4"
    if kind == "int" and bits in (4, 8):
        return _int_group(bits, group or 128, origin, "compressed-tensors")
    raise UserError(f"{origin}: compressed-tensors {kind} of {bits} bits in groups of "
                    f"{group} has no format here")  # fmt: skip


def _compressed_tensors(q: dict, origin: str) -> Checkpoint:
    """llm-compressor's repos: the first config group's weights and input activations
    (a repo with several groups quantizes its layers alike in every published case)."""
    groups = q.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        raise UserError(f"{origin}: compressed-tensors without 'config_groups'")
    group = next(iter(groups.values()))
    weights = _tensor_format(group.get("weights"), origin)
    if weights is None:
        raise UserError(f"{origin}: compressed-tensors config group without 'weights'")
    compute = _tensor_format(group.get("input_activations"), origin)
    kv = _tensor_format(q.get("kv_cache_scheme"), origin)
    return Checkpoint("compressed-tensors", weights, compute, kv, _names(q.get("ignore")))


_QUARK = {"fp4": "mxfp4", "fp4_e2m1": "mxfp4", "fp8_e4m3": "fp8", "int8": "int8"}
"""AMD Quark's dtype -> format: fp4 in groups of 32 with E8M0 scales is MXFP4 (the OCP
microscaling format Quark exports for MI355X); fp8_e4m3 per tensor or channel is fp8."""


def _quark(q: dict, origin: str) -> Checkpoint:
    """AMD Quark: `global_quant_config`'s weight (a list when quantized in stages: the
    last is what is stored) and input tensors; `exclude` lists the modules left alone."""
    glob = q.get("global_quant_config")
    if not isinstance(glob, dict):
        raise UserError(f"{origin}: quark quantization_config without 'global_quant_config'")

    def fmt(spec: Any) -> str | None:
        spec = spec[-1] if isinstance(spec, list) and spec else spec
        if not isinstance(spec, dict) or "dtype" not in spec:
            return None
        dtype, group = str(spec["dtype"]), spec.get("group_size")
        if dtype == "int4":
            return _int_group(4, group or 128, origin, "quark")
        if dtype not in _QUARK or (_QUARK[dtype] == "mxfp4" and group not in (None, 32)):
            raise UserError(f"{origin}: quark dtype {dtype!r} in groups of {group} has no "
                            "format here")  # fmt: skip
        return _QUARK[dtype]

    weights = fmt(glob.get("weight"))
    if weights is None:
        raise UserError(f"{origin}: quark global_quant_config without a weight dtype")
    return Checkpoint("quark", weights, fmt(glob.get("input_tensors")), None,
                      _names(q.get("exclude")))  # fmt: skip


_READERS = {"fp8": _fp8, "fbgemm_fp8": _fbgemm_fp8, "mxfp4": _mxfp4, "awq": _awq, "gptq": _gptq,
            "compressed-tensors": _compressed_tensors, "quark": _quark,
            "modelopt": _modelopt}  # fmt: skip


AUTO_KV_FORMAT = "bf16"
"""The KV cache's format where a checkpoint quantizes activations but declares no KV format:
the engines' default KV dtype "auto" is the model's own dtype, not the matmuls' FP8. vLLM:
vllm/config/cache.py CacheConfig cache_dtype "auto" ('If "auto", will use model data
type'; vllm/utils/torch_utils.py resolve_kv_cache_dtype_string takes a ModelOpt
checkpoint's kv_cache_quant_algo first, the declared `cp.kv` here); SGLang: server_args
--kv-cache-dtype "auto" ('"auto" will use model data type'); TensorRT-LLM: KvCacheConfig
dtype "auto", the KV cache quantized only where the checkpoint's hf_quant_config.json names
a kv_cache_quant_algo (llmapi ModelLoader). The model's dtype is
bfloat16 in the config.json torch_dtype of every activation-quantized repo read here
(Qwen/Qwen3-235B-A22B-FP8, deepseek-ai/DeepSeek-R1, meta-llama/Llama-3.1-405B-Instruct-FP8).
Startup logs agree: Qwen3-235B-A22B-FP8 at TP 4 on H100 holds 8.11 GiB for 178,880 tokens
in vLLM and 8.23 GB of K for 367,404 tokens in SGLang, 2 bytes an element in both
(vllm-project/vllm#21348; docs/serving.md 'The KV cache each engine gets')."""


def checkpoint_options(
    workload: Any, chip: Any, taken: list[str], options: dict[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """The options a run of `workload` takes, its checkpoint's formats filled in where the
    user gave none (`taken`: the option names the run's scenario takes), and the notes that
    say so. Weights and compute are left alone if the user named either, except that a
    `--precision` naming the element format of the checkpoint's weight layout (fp8 of an
    fp8-block repo) takes that layout for the weights (_layout_of); a compute format
    the chip lacks (NVFP4 on an H100) leaves the chip's default compute format, the
    weights still stored as the checkpoint stores them (weight-only, as engines load such
    repos on older chips)."""
    cp = getattr(workload, "checkpoint", None)
    if cp is None:
        return options, []
    given = {k for k, v in options.items() if v is not None}
    if cp.weights is None:
        if "weight_precision" in taken and not {"precision", "weight_precision"} & given:
            raise UserError(f"checkpoint format not read ({cp.unread}); give --precision or "
                            "--weight-precision")  # fmt: skip
        return options, []
    chosen: dict[str, Any] = {}
    notes: list[str] = []
    if "weight_precision" in taken and not {"precision", "weight_precision"} & given:
        chosen["weight_precision"] = cp.weights
        if cp.compute and "precision" in taken:
            if DType(cp.compute) in chip.peak_ops_per_s:
                chosen["precision"] = cp.compute
            else:
                notes.append(f"{chip.id} has no {cp.compute} matrix format: the checkpoint's "
                             f"{cp.weights} weights are widened to its default format")
    elif ("weight_precision" in taken and "weight_precision" not in given
          and _layout_of(cp.weights, options.get("precision"))):  # fmt: skip
        chosen["weight_precision"] = cp.weights
    if "kv_precision" in taken and "kv_precision" not in given and (cp.kv or cp.compute):
        chosen["kv_precision"] = cp.kv or AUTO_KV_FORMAT
    used = ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in chosen.items())
    said = [f"used {used}"] if chosen else []
    flag = next((k for k in ("weight_precision", "precision") if options.get(k)), None)
    if flag and "weight_precision" not in chosen and _name(options[flag]) != cp.weights:
        said.append(f"costed with --{flag.replace('_', '-')} {_name(options[flag])} as given, "
                    "not as this repo stores its weights (a repo quantized to that format "
                    "holds them so)")  # fmt: skip
    if said:  # one note, the format described once
        notes.insert(0, f"checkpoint format: {cp.describe()}; {'; '.join(said)}")
    if not chosen:
        return options, notes
    kept = _kept_params(workload, cp)
    if kept:
        notes.append(f"the checkpoint keeps {kept / 1e9:.3g}B parameters (attention, shared "
                     f"and dense layers) {cp.kept_as}; xpusim stores them as {cp.weights}")
    return options | chosen, notes


def _name(dtype: Any) -> str:
    """A format option's name, given as a DType or as typed."""
    return str(getattr(dtype, "value", dtype)).lower()


def _layout_of(weights: str, precision: Any) -> bool:
    """Whether the checkpoint's weights are a grouped layout of the format the user asked
    for: `--precision fp8` of DeepSeek-R1's FP8 repo runs its 128 x 128 block-scaled weights
    (fp8-block), as every engine loads that repo, not per-tensor FP8 weights it does not
    have; the layout then decides the kernels (block-scaled GEMM tables) and the scales'
    bytes. A plain format (nvfp4, mxfp4) is what --precision already sets."""
    layout = weight_layouts().get(weights)
    return layout is not None and precision is not None and (
        layout.element.value == _name(precision))


def _kept_params(cfg: Any, cp: Checkpoint) -> int:
    """Parameters of an experts-only checkpoint's linear layers outside the experts (its
    attention, shared experts and dense layers) where it keeps them in another quantized
    format (DeepSeek-V4's FP8 blocks beside MXFP4 experts), which xpusim counts in the
    experts'; 0 where it keeps them unquantized (the builder keeps the attention
    projections so, and no checkpoint read excludes shared experts or dense layers), every
    linear layer is quantized, or the model has no experts."""
    if not cp.keeps_attention or cp.kept_as == "unquantized" \
            or not getattr(cfg, "is_moe", False):  # fmt: skip
        return 0
    experts = cfg.expert_layers * cfg.num_experts * cfg.expert_params
    return int(cfg.param_count - cfg.embedding_params - cfg.lm_head_params - experts)
