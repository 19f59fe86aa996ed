"""Google's TPU7x vLLM recipe points (benchmarks/tpu_recipes_points.py; docs/validation.md,
twenty-sixth session): a page's server arguments, each workload's InferenceX client and its
table's output tokens/s become one point a workload; the committed set is whole."""

from __future__ import annotations

import sys
from pathlib import Path

from xpusim.validation.points import load_points

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))
try:
    import tpu_recipes_points as tpu
finally:
    sys.path.remove(str(BENCH))

_SERVER = """    ```
          nodeSelector:
            cloud.google.com/gke-tpu-accelerator: tpu7x
            cloud.google.com/gke-tpu-topology: {topology}
          containers:
          - name: vllm-tpu
            image: vllm/vllm-tpu:nightly-20260330-2f76400-8c0b626
            args:
            - --model={model}
            - --tensor-parallel-size={tp}
            - --max-num-batched-tokens=4096
            - --max-num-seqs=135
            - --gpu-memory-utilization=0.98
            - --block-size=256
            - --kv-cache-dtype=fp8
            - --async-scheduling{extra}
    ```
"""
_QWIX = ("\n            - '--additional_config={\"quantization\": {\"qwix\": {\"rules\": "
         "[{\"module_path\": \".*\", \"weight_qtype\": \"float8_e4m3fn\", \"act_qtype\": "
         "\"float8_e4m3fn\"}]}}}'")  # fmt: skip
_WORKLOAD = """    #### Workload {name}

    ```
          python3 /ubench/inferencex/utils/bench_serving/benchmark_serving.py \\
            --dataset-name=random \\
            --random-input-len={il} \\
            --random-output-len={ol} \\
            --random-range-ratio=0.8 \\
            --num-prompts=320 \\
            --max-concurrency={c} \\
            --ignore-eos
    ```
"""


def _page(topology: str, tp: int, model: str, extra: str, table: str) -> str:
    runs = (("1k/1k", 1024, 1024), ("8k/1k", 8192, 1024))
    workloads = "".join(_WORKLOAD.format(name=n, il=il, ol=ol, c=64) for n, il, ol in runs)
    return (_SERVER.format(topology=topology, tp=tp, model=model, extra=extra) + workloads
            + "    Workload | Output Token Throughput (tok/s) Per Chip\n    :--- | :---\n"
            + table)  # fmt: skip


def test_a_page_gives_a_point_a_workload_at_the_clients_mean_lengths():
    """One chip's two TensorCores are vLLM's TP 2 and one xpusim chip; a qwix FP8 rule on
    every module is FP8 compute over the BF16 checkpoint; lengths uniform in [0.8 L, L] have
    mean 922 for 1k and 7,373 for 8k; a one-chip table's per-chip figure is the total."""
    text = _page("1x1x1", 2, "Qwen/Qwen3-32B", _QWIX,
                 "    1k/1k    | 6556.72\n    8k/1k    | 1382.18\n")  # fmt: skip
    one, eight = tpu.page_points("inference/ironwood/vLLM/Qwen3-32B/README.md", text)
    assert (one["chips"], one["tp"], one["model"], one["precision"]) == (1, 1, "qwen3-32b", "fp8")
    assert (one["prompt"], one["gen"], eight["prompt"], eight["gen"]) == (922, 922, 7373, 922)
    assert (one["value"], eight["value"]) == (6556.72, 1382.18)
    assert (one["token_budget"], one["max_batch"], one["kv_block"]) == (4096, 135, 256)
    assert one["host_overlap"] is True and one["kv_precision"] == "fp8" and "ep" not in one
    assert one["load"] == {"kind": "concurrency", "value": 64, "requests": 320, "warmup": 0}
    assert one["id"] == "tpurecipes-v7x1-qwen3-32b-1k1k-c64-output"


def test_a_four_chip_page_reads_its_total_and_runs_the_experts_over_its_chips():
    """2x2x1 is four chips (TP 8 over their TensorCores); --enable-expert-parallel puts the
    experts over the same four; a row printing a total beside its per-chip figure is read
    as the total, and a quantized checkpoint keeps its own formats."""
    text = _page("2x2x1", 8, "Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8",
                 "\n            - --enable-expert-parallel",
                 "    1k/1k    | 1996.00 tok/s (499 tok/s/chip)\n")  # fmt: skip
    (p,) = tpu.page_points("inference/ironwood/vLLM/Qwen3-Coder-480B-A35B/README.md", text)
    assert (p["chips"], p["tp"], p["ep"], p["value"]) == (4, 4, 4, 1996.0)
    assert (p["precision"], p["weight_precision"]) == ("fp8", "fp8-block")


_DP_MANIFEST = """
      nodeSelector:
        cloud.google.com/gke-tpu-accelerator: tpu7x
        cloud.google.com/gke-tpu-topology: 2x2x1
      containers:
      - name: vllm-tpu
        image: vllm/vllm-tpu:nightly-20260626-c539adc-cc79815
        args:
        - --model=Qwen/Qwen3.5-397B-A17B-FP8
        - --tensor-parallel-size=8
        - --kv-cache-dtype=fp8
        - --gpu-memory-utilization=0.9
        - --max-num-seqs=64
        - --max-num-batched-tokens=1024
        - --enable-expert-parallel
        - --block-size=256
        - '--additional-config={"sharding": {"sharding_strategy": {"enable_dp_attention": true}}}'
"""
_DP_README = """### Workload A: 1K Input / 8K Output (1k/8k)

```yaml
        --dataset-name=random \\
        --random-input-len=1024 \\
        --random-output-len=8192 \\
        --random-range-ratio=0.8 \\
        --num-prompts=640 \\
        --max-concurrency=128 \\
```

### Example Benchmark Output

#### Workload A (1k/8k):

```
Output token throughput (tok/s): 5171.98
Mean TTFT (ms): 3346.51
Median TTFT (ms): 2158.17
P99 TTFT (ms): 28310.86
Mean TPOT (ms): 21.97
Median TPOT (ms): 21.83
P99 TPOT (ms): 24.05
```
"""


def test_a_dp_attention_page_gives_seven_points_a_workload_with_its_ranks_limits():
    """The Qwen3.5-397B page's server runs attention DP over its 8 TensorCores: each rank's
    --max-num-batched-tokens 1024 and --max-num-seqs 64 become a chip's 2 x 1024 tokens and
    8 x 64 sequences in all, and new requests wait for 8 (its ranks) to pend."""
    pts = tpu.dp_page_points("inference/ironwood/vLLM/Qwen3.5-397B/README.md", _DP_README,
                             _DP_MANIFEST)  # fmt: skip
    assert [p["id"].rsplit("c128-", 1)[1] for p in pts] == [
        "output", "ttft", "ttft-p50", "ttft-p99", "tpot", "tpot-p50", "tpot-p99"]
    ttft = pts[1]
    assert (ttft["value"], ttft["stat"], ttft["metric"]) == (3.34651, "mean", "ttft_s")
    assert (pts[3]["value"], pts[3]["stat"]) == (28.31086, "p99")
    assert (ttft["token_budget"], ttft["max_batch"], ttft["dp_prefill_batch"]) == (2048, 512, 8)
    assert (ttft["chips"], ttft["ep"], ttft["dp_attention"]) == (4, 4, True)
    assert (ttft["prompt"], ttft["gen"]) == (922, 7373)


def test_attention_dp_ranks_are_tpu_inferences():
    """sharding.py: the TP devices over the KV heads one device's cache packs. Qwen3.5's
    2 KV heads of 256 in FP8 pack on one device (8 ranks of 8 cores); Llama-3-70B's 8 of
    128 in BF16 fill all 8 (one rank); head_dim 64 packs twice as many."""
    assert tpu.attention_dp_ranks(8, 2, 256, 1) == 8
    assert tpu.attention_dp_ranks(8, 8, 128, 2) == 1
    assert tpu.attention_dp_ranks(8, 8, 64, 2) == 2


def test_tpu_recipes_points_are_committed_whole():
    """Every page of PAGES is in published.json: three workloads each, the tables' figures;
    DP_PAGES' Qwen3.5-397B its two workloads' seven figures each."""
    pts = {p.id: p for p in load_points() if p.id.startswith(tpu.PREFIX)}
    assert len(pts) == 3 * len(tpu.PAGES) + 14 == 20
    dp = pts["tpurecipes-v7x4-qwen3.5-397b-a17b-fp8-8k1k-c128-ttft-p99"]
    assert (dp.value, dp.get("dp_prefill_batch"), dp.get("token_budget")) == (33.61333, 8, 2048)
    assert pts["tpurecipes-v7x1-qwen3-32b-1k8k-c320-output"].value == 3959.56
    coder = pts["tpurecipes-v7x4-qwen3-coder-480b-a35b-instruct-fp8-8k1k-c64-output"]
    assert (coder.value, coder.chip, coder.get("ep")) == (1053.10, "tpu-v7", 4)
    assert not set(tpu.SKIPPED) & set(tpu.PAGES)
