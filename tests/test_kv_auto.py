"""The KV cache's format where a serving run names its matmuls' precision and not the cache's
(engines.toml kv_auto): vLLM, SGLang and ATOM keep the model's 16-bit dtype beside
--quantization fp8 (their KV dtype "auto"); TensorRT-LLM serves checkpoints NVIDIA's
quantizer wrote, with an FP8 cache by default, so FP8 beside 4-bit matmuls; the ideal
engine, like `xpusim run`, stores the cache in --precision. What the user or a checkpoint
names always wins."""

from __future__ import annotations

import pytest

import xpusim
from xpusim.serving.engines import engine, engines

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def _serve(**options):
    return xpusim.serve(MODEL, "h100-sxm", concurrency=4, prompt=1000, gen=100, requests=8,
                        warmup=0, **options)  # fmt: skip


@pytest.mark.parametrize(("name", "precision", "kv"), [
    ("vllm", "fp8", "bf16"), ("vllm", "nvfp4", "bf16"), ("vllm", "bf16", None),
    ("vllm-v0", "int8", "bf16"), ("sglang", "fp8", "bf16"), ("sglang-0.4", "fp8", "bf16"),
    ("atom", "mxfp4", "bf16"), ("trtllm", "fp8", None), ("trtllm", "nvfp4", "fp8"),
    ("trtllm-cpp", "fp8", None), ("ideal", "fp8", None), ("ideal", "nvfp4", None),
    ("vllm", None, None),
])  # fmt: skip
def test_each_engine_keeps_its_own_default(name: str, precision: str | None,
                                           kv: str | None) -> None:  # fmt: skip
    assert engine(name).kv_format(precision) == kv


def test_every_profile_states_its_rule_and_source() -> None:
    for name, profile in engines().items():
        assert profile.kv_auto in ("compute", "model", "modelopt"), name
        assert profile.kv_auto_source, name


def test_vllm_fp8_holds_the_pool_of_a_bf16_cache_and_says_so() -> None:
    """--precision fp8 under vLLM: the pool of a BF16 cache (half the tokens of an FP8 one,
    the weights FP8 either way) and a note naming the rule; --kv-precision fp8 asks for
    vLLM's --kv-cache-dtype fp8."""
    auto = _serve(engine="vllm", precision="fp8")
    bf16 = _serve(engine="vllm", precision="fp8", kv_precision="bf16")
    fp8 = _serve(engine="vllm", precision="fp8", kv_precision="fp8")
    assert auto.kv_cache.capacity_tokens == bf16.kv_cache.capacity_tokens
    assert auto.kv_cache.bytes_per_token == bf16.kv_cache.bytes_per_token \
        == 2 * fp8.kv_cache.bytes_per_token  # fmt: skip
    assert fp8.kv_cache.capacity_tokens > 1.9 * auto.kv_cache.capacity_tokens
    assert any(n.startswith("KV cache bf16: engine vllm") for n in auto.notes)
    assert not any(n.startswith("KV cache") for n in fp8.notes)


def test_trtllm_fp8_keeps_an_fp8_cache_and_nvfp4_gets_one() -> None:
    fp8 = _serve(engine="trtllm", precision="fp8")
    assert fp8.kv_cache.bytes_per_token == \
        _serve(engine="trtllm", precision="fp8", kv_precision="fp8").kv_cache.bytes_per_token
    assert not any(n.startswith("KV cache") for n in fp8.notes)
    fp4 = xpusim.serve(MODEL, "b200", engine="trtllm", precision="nvfp4", concurrency=4,
                       prompt=1000, gen=100, requests=8, warmup=0)  # fmt: skip
    assert fp4.kv_cache.bytes_per_token == xpusim.serve(
        MODEL, "b200", engine="trtllm", precision="nvfp4", kv_precision="fp8", concurrency=4,
        prompt=1000, gen=100, requests=8, warmup=0).kv_cache.bytes_per_token  # fmt: skip
    assert any(n.startswith("KV cache fp8: engine trtllm") for n in fp4.notes)
