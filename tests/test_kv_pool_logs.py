"""The KV pool serve sizes against the engines' own startup logs (docs/serving.md, 'The KV
cache each engine gets'): published log lines that state the pool for a stated launch, and
what xpusim's memory rule gives for the same launch.

Each case's `tokens` is the log's pool (vLLM 'GPU KV cache size: N tokens', SGLang 'KV
Cache is allocated. #tokens: N'), `gib` its bytes where the log states them. Held cases stay
within HELD of the log: the memory the runtime reports (CUDA's total, the catalog's
runtime_reserved_bytes) and what each engine's process holds beside its weights and
activations when it sizes the pool (engines.toml runtime_gib) are modelled, so what is left
is each case's named remainder. A case not held has a gap no term here explains, kept so
that it shows."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

import xpusim

GIB = 2**30
PLANNER = ("llm-d-incubation/llm-d-planner commit d3121e0, accuracy/results/v0.19.0/logs/")
HELD = (0.97, 1.05)  # xpusim's pool / the log's, for the held cases


@dataclass(frozen=True)
class LogCase:
    id: str
    model: str
    chip: str
    tp: int
    engine: str
    options: dict
    tokens: int  # the log's pool, tokens per replica
    gib: float  # the log's pool bytes, GiB per GPU (2 x K size for SGLang)
    held: bool
    source: str
    gap: str  # what explains xpusim's excess (measured at this commit: xpusim / log)


CASES = (
    LogCase("vllm-0.9.1-llama-3.1-8b-eagle-h100", "llama-3.1-8b", "h100-sxm", 1, "vllm",
            {"speculative": "eagle", "acceptance": 0.7}, 410_128, 51.63, True,
            "vllm-project/vllm#19996 (vLLM 0.9.1.dev705, H100 80GB, Llama 3.1 8B with the "
            "yuhuili EAGLE head, defaults: gpu_memory_utilization 0.9, max_model_len 131072):"
            " 'Available KV cache memory: 51.63 GiB', 'GPU KV cache size: 410,128 tokens'",
            "1.026 (1.039 before CUDA's total and vLLM's non-torch memory were modelled): "
            "132 KiB a token as logged (32 target layers and the draft's one); 1.3 GiB more "
            "pool, the draft's weights and forward as xpusim sizes them against 0.9.1's"),
    LogCase("sglang-qwen3-235b-a22b-fp8-tp4-h100", "qwen3-235b-a22b-fp8", "h100-sxm", 4,
            "sglang", {"kv_utilization": 0.93}, 367_404, 2 * 8.23, True,
            "vllm-project/vllm#21348 (July 2025, 4 x H100, --tp 4 --mem-fraction-static "
            "0.93): 'KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB'"
            " (SGLang's GB is 2^30 bytes; 8.23 GiB / 367,404 / 94 layers = 256 bytes, one "
            "BF16 KV head of 128 per GPU)",
            "0.983 (1.151 when the fraction multiplied the driver's total): SGLang sizes the "
            "pool as mem_fraction_static x the memory free when its model runner starts "
            "(after the CUDA context and communicators: 2.52 GiB, an 8-GPU node's figure, "
            "engines.toml runtime_gib) less the weights loaded; 0.3 GiB less pool here"),
    LogCase("vllm-0.28-qwen3-14b-l40s", "qwen3-14b", "l40s", 1, "vllm", {}, 75_824, 11.57,
            True,
            "blog post 'LLM 최적화 실전 프로젝트' (jinwoong, 2026-09-06; code index copy id "
            "60168338778): vLLM 0.28.0, L40S 46 GB (nvidia-smi 46,068 MiB), "
            "vllm serve Qwen/Qwen3-14B with defaults: 'Model loading took 27.52 GiB', "
            "'Available KV cache memory: 11.57 GiB', 'GPU KV cache size: 75,824 tokens'",
            "1.010 (1.078 before CUDA's 44.39 GiB and the profiled 0.25 GiB of non-torch "
            "memory): weights 27.51 GiB in xpusim against 27.52 logged"),
    LogCase("vllm-0.19-llama-3.1-8b-h100", "meta-llama/Llama-3.1-8B-Instruct", "h100-sxm", 1,
            "vllm", {"precision": "bf16", "kv_utilization": 0.95}, 476_000, 58.11, True,
            PLANNER + "meta-llama-llama---h100-80gb--tp1pp1dp1--8192-dtbf16.log (vLLM "
            "0.19.0, --dtype bfloat16 --max-model-len 8192 --gpu-memory-utilization 0.95): "
            "'Available KV cache memory: 58.11 GiB', 'GPU KV cache size: 476,000 tokens'",
            "1.004: weights 14.99 GiB logged, torch peak 1.89 GiB (the sampler's 1.71 GiB "
            "and the forward), non-torch 0.25 GiB, all out of 0.95 x 79.19 GiB"),
    LogCase("vllm-0.19-llama-3.1-8b-h100-kv-fp8", "meta-llama/Llama-3.1-8B-Instruct",
            "h100-sxm", 1, "vllm", {"precision": "bf16", "kv_precision": "fp8",
                                    "kv_utilization": 0.95}, 952_032, 58.11, True,
            PLANNER + "meta-llama---h100-80gb--tp1pp1dp1--8192-dtbf16-kvfp8.log (the same "
            "launch with --kv-cache-dtype fp8): 'Available KV cache memory: 58.11 GiB', 'GPU "
            "KV cache size: 952,032 tokens'",
            "1.003: the same bytes, half a token's"),
    LogCase("vllm-0.19-llama-3.3-70b-fp8-tp2-h100", "RedHatAI/Llama-3.3-70B-Instruct-fp8-dynamic",
            "h100-sxm", 2, "vllm", {"kv_utilization": 0.95}, 244_304,
            37.28, True,
            PLANNER + "fp8dyn-llama-3-3-70b--h100-80gb--tp2pp1dp1--8192.log "
            "(RedHatAI/Llama-3.3-70B-Instruct-fp8-dynamic, kv_cache_dtype auto, TP 2): "
            "'Available KV cache memory: 37.28 GiB', 'GPU KV cache size: 244,304 tokens'",
            "1.008: non-torch 2.1 GiB logged (NCCL), weights 33.88 GiB"),
    LogCase("vllm-0.19-llama-3.3-70b-fp8-tp4-h100", "RedHatAI/Llama-3.3-70B-Instruct-fp8-dynamic",
            "h100-sxm", 4, "vllm", {"kv_utilization": 0.95}, 708_992,
            54.09, True,
            PLANNER + "fp8dyn-llama-3-3-70b--h100-80gb--tp4pp1dp1--8192.log (the same at TP 4): "
            "'Available KV cache memory: 54.09 GiB', 'GPU KV cache size: 708,992 tokens'",
            "1.005: non-torch 2.21 GiB logged, weights 16.96 GiB"),
    LogCase("vllm-qwen3-235b-a22b-fp8-tp4-h100-lmcache", "qwen3-235b-a22b-fp8", "h100-sxm", 4,
            "vllm", {}, 178_880, 8.11, False,
            "vllm-project/vllm#21348 (July 2025, 4 x H100, vllm serve --tensor-parallel-size "
            "4 with an LMCacheConnectorV1 kv-transfer-config, defaults otherwise): "
            "'Available KV cache memory: 8.11 GiB', 'GPU KV cache size: 178,880 tokens'",
            "1.81: 14.5 GiB of pool in xpusim against 8.11 logged, 6.4 GiB a GPU that no "
            "term here explains (the weights, 55.1 GiB, match the repo's size; xpusim's "
            "profiled forward is 2.0 GiB); the LMCache connector's buffers are one candidate,"
            " not verified: no log of the same launch without it was found"),
)


def _kv(case: LogCase):
    return xpusim.serve(case.model, case.chip, chips=case.tp, tp=case.tp, engine=case.engine,
                        concurrency=1, requests=1, prompt=128, gen=4, warmup=0,
                        **case.options).kv_cache  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bytes_per_token_are_the_logs(case: LogCase):
    """A token's KV bytes on a GPU as the log's pool bytes over its tokens: the format
    (BF16 for an FP8 checkpoint that declares no KV format) and the layers each engine
    keeps. Within 2%: vLLM's logged tokens are whole blocks of a pool it states in GiB to
    two decimals."""
    kv = _kv(case)
    assert kv.bytes_per_token == pytest.approx(case.gib * GIB / case.tokens, rel=0.02)


@pytest.mark.parametrize("case", [c for c in CASES if c.held], ids=[c.id for c in CASES
                                                                   if c.held])  # fmt: skip
def test_pool_is_within_the_held_band_of_the_log(case: LogCase):
    """xpusim's pool is within 3% under and 5% over the log's, the remainder each case
    names."""
    low, high = HELD
    assert low <= _kv(case).capacity_tokens / case.tokens <= high


def test_fp8_checkpoint_keeps_a_bf16_cache_unless_told():
    """Qwen3-235B-A22B-FP8 declares FP8 weights and activations but no KV format: its cache
    is BF16 (the engines' 'auto'), and --kv-precision fp8 still halves it."""
    auto = xpusim.serve("qwen3-235b-a22b-fp8", "h100-sxm", chips=4, tp=4, engine="vllm",
                        concurrency=1, requests=1, prompt=128, gen=4, warmup=0)  # fmt: skip
    fp8 = xpusim.serve("qwen3-235b-a22b-fp8", "h100-sxm", chips=4, tp=4, engine="vllm",
                       concurrency=1, requests=1, prompt=128, gen=4, warmup=0,
                       kv_precision="fp8")  # fmt: skip
    # 94 layers x 4 KV heads / 4 GPUs x 128 x (K and V) x 2 bytes
    assert auto.kv_cache.bytes_per_token == 94 * 1 * 128 * 2 * 2
    assert fp8.kv_cache.bytes_per_token == auto.kv_cache.bytes_per_token / 2
    assert any("--kv-precision bf16" in note for note in auto.notes)
