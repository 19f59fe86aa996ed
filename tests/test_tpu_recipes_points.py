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


def test_tpu_recipes_points_are_committed_whole():
    """Every page of PAGES is in published.json: three workloads each, the tables' figures."""
    pts = {p.id: p for p in load_points() if p.id.startswith(tpu.PREFIX)}
    assert len(pts) == 3 * len(tpu.PAGES) == 6
    assert pts["tpurecipes-v7x1-qwen3-32b-1k8k-c320-output"].value == 3959.56
    coder = pts["tpurecipes-v7x4-qwen3-coder-480b-a35b-instruct-fp8-8k1k-c64-output"]
    assert (coder.value, coder.chip, coder.get("ep")) == (1053.10, "tpu-v7", 4)
    assert not set(tpu.SKIPPED) & set(tpu.PAGES)
