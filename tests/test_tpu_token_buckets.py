"""vLLM on Google's TPUs (tpu-inference) compiles one XLA program per padded token count:
every step, prompt chunks included, runs at the next power of two from 16 up to one that
covers the token budget (engines.toml tpu_token_min), where on GPUs its CUDA graphs pad
only steps up to their largest capture size."""

from __future__ import annotations

import xpusim
from xpusim.serving.engines import engine

RUN = {"precision": "fp8", "kv_precision": "fp8", "concurrency": 8, "requests": 16,
       "warmup": 0, "prompt": 1000, "gen": 40, "engine": "vllm-0.11",
       "token_budget": 4096}  # fmt: skip
POWERS = [16, 32, 64, 128, 256, 512, 1024, 2048, 4096]


def test_the_buckets_double_from_16_until_one_covers_the_budget_on_tpus_alone():
    profile = engine("vllm-0.11")
    assert profile.tpu_buckets("Google", 4096) == POWERS
    assert profile.tpu_buckets("Google", 5000)[-2:] == [4096, 8192]
    assert profile.tpu_buckets("NVIDIA", 4096) == profile.tpu_buckets("AMD", 4096) == []
    assert engine("vllm").tpu_buckets("Google", 512)[-1] == 512  # written over vllm-0.11
    assert engine("sglang").tpu_buckets("Google", 4096) == []  # not stated for it


def test_a_tpu_run_pads_as_those_sizes_stated_by_hand_and_says_so():
    """The rule is the same run as --graph-sizes 16,...,4096 --graph-pad tokens, to the last
    float; without padding a step of 1,000 prompt tokens costs less than at 1,024."""
    ruled = xpusim.serve("qwen3-32b", "tpu-v7", **RUN)
    stated = xpusim.serve("qwen3-32b", "tpu-v7", **RUN, graph_pad="tokens",
                          graph_sizes=",".join(map(str, POWERS)))  # fmt: skip
    bare = xpusim.serve("qwen3-32b", "tpu-v7", **RUN, graph_pad="none")
    assert (ruled.ttft_s.mean, ruled.tpot_s.mean) == (stated.ttft_s.mean, stated.tpot_s.mean)
    assert bare.ttft_s.mean < ruled.ttft_s.mean
    (note,) = [n for n in ruled.notes if n.startswith("engine vllm-0.11")]
    assert "XLA programs for powers of two of tokens up to 4096 padding every step's" in note
    gpu = xpusim.serve("qwen3-32b", "h200-sxm", **RUN)
    assert "CUDA graphs up to" in next(n for n in gpu.notes if n.startswith("engine vllm-0.11"))
