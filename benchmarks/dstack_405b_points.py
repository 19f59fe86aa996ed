"""Regenerates the `dstack405-` points of src/xpusim/validation/published.json and their
request-length files: dstack's 'Llama3.1-405B-Fp8 Inference Performance Comparison between
8xH100SXM5 and 8xMi300x' (November 2024), vLLM's own benchmark scripts against Llama 3.1
405B in FP8 on eight H100 SXM5 (vLLM 0.6.3.post2.dev308) and eight MI300X (vLLM 0.6.4.dev4 on
ROCm 6.2, AMD's Quark FP8 checkpoint), tensor-parallel over all eight GPUs.

    python benchmarks/dstack_405b_points.py /path/to/benchmarks.git

Needs git only; the directory may be a bare mirror of github.com/dstackai/benchmarks. Read at
COMMIT under comparison/h100sxm5_vs_mi300x/: README.md (the environments and the commands)
and raw_data/, the scripts' own JSON outputs. Kept: every `benchmark_throughput.py --input-len
I --output-len 2048 --num-prompts N --tensor-parallel-size 8 --max-model-len 91680` run
(offline: the engine called in-process, N prompts of I random tokens at once, every answer
forced to 2048 tokens), one point a run, the output-token throughput: requests_per_second x
2048 (the file's tokens_per_second counts the prompts too). H100: 'meta-llama/Llama-3.1-405B-
FP8', --num-scheduler-step 1; MI300X: 'amd/Llama-3.1-405B-Instruct-FP8-KV', --enforce-eager
--num-scheduler-step 1.

Not kept: the H100 `benchmark_serving.py --dataset-name sharegpt --request-rate 16|32|1000`
runs, because 379 (378) of their 1000 'completed' requests came back empty (no token, TTFT
0, generated text ''; their prompts average 384 tokens against 112 for the rest), so the
published mean TTFT (1.49 s at 16/s) averages in those zeros (2.39 s over the 621 that
streamed); the MI300X serving runs (num-scheduler-step 15, max-num-seqs 1024, three
checkpoints, TP4 x 2 instances); the H100 `latency_test` files (the same 2048/2048 batches
timed by benchmark_latency.py). The prompt lengths of the 16/s run (1000 ShareGPT prompts
sampled by vLLM's benchmark_serving under the Llama 3.1 tokenizer, seed 0: mean 215.2) are
valid whatever the server returned; they become lengths/sharegpt-llama31-prompts.csv for the
`lmsys060-` points (benchmarks/sglang_vllm060_points.py). The points replace every
`dstack405-` point in place, or go just before the `inferencex-` block (nim_dli_points.write).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from typing import Any

from nim_dli_points import PUBLISHED, write

COMMIT = "06c957ab51572ca18db9c1f4bb254a9eb86df4d7"  # 2025-09-24 (the folder: 2024-12-05)
DIR = "comparison/h100sxm5_vs_mi300x"
SOURCE = f"github.com/dstackai/benchmarks (commit {COMMIT[:12]}) {DIR}"
PREFIX = "dstack405-"
LENGTHS = PUBLISHED.parent / "lengths"
GEN = 2048  # benchmark_throughput's --output-len in every run (ignore_eos: every answer)
RUNS = {  # raw_data folder: the chip and what ran there
    "8xH100SXM5-throughput": {
        "chip": "h100-sxm", "tag": "h100",
        "version": "vLLM 0.6.3.post2.dev308+gb489fc3c (V0 engine; CUDA 12.4, torch 2.5.1)",
        "checkpoint": "meta-llama/Llama-3.1-405B-FP8",
        "model": "llama-3.1-405b-instruct-fp8",  # its zoo file names this repo an alias
        "command": "benchmark_throughput.py --backend vllm --model meta-llama/Llama-3.1-405B-FP8 "
                   "--input-len I --output-len 2048 --tensor-parallel-size 8 --max-model-len "
                   "91680 --num-prompts N --num-scheduler-step 1",
        "pattern": r"nvidia-throughput_test_ip(\d+)_op(\d+)_np(\d+)\.json",
    },
    "8Mi300x-throughput-quark": {
        "chip": "mi300x", "tag": "mi300x",
        "version": "vLLM 0.6.4.dev4+gc9fc1608 (V0 engine; ROCm 6.2, torch 2.5.0a0)",
        "checkpoint": "amd/Llama-3.1-405B-Instruct-FP8-KV",
        "model": "llama-3-405b",  # FP8 in every linear: the run's --precision fp8 says it
        "command": "benchmark_throughput.py --backend vllm --model amd/Llama-3.1-405B-Instruct-"
                   "FP8-KV --input-len I --output-len 2048 --tensor-parallel-size 8 "
                   "--max-model-len 91680 --num-prompts N --enforce-eager --num-scheduler-step 1",
        "pattern": r"Meta-Llama-3\.1-405B-Instruct-FP8-KV_throughput_req(\d+)_in(\d+)_out(\d+)_"
                   r"\.json",
    },
}  # fmt: skip
SERVING = "8xH100SXM5-serving"
CHECKPOINT_NOTE = (
    "FP8 weights and activations: Meta's checkpoint (llama-3.1-405b-instruct-fp8: FBGEMM "
    "row-wise FP8 feed-forward layers but the first and last, dynamic activation scales, "
    "every attention, layers 0 and 125, the embedding and the head BF16) on the H100s, AMD's "
    "Quark checkpoint (llama-3-405b: per-tensor FP8 in every linear, with KV-cache scales) on "
    "the MI300Xs; KV cache BF16 (no --kv-cache-dtype given)"
)
OFFLINE_SETUP = (
    "engine profile vllm-v0 ({version}); the engine called in-process (frontend 0, no API "
    "server); all {n} prompts at once (a burst of {n}), measured to the last token; "
    "max_num_seqs 256 (the default), whole prompts in a step up to max(max_model_len, 2048) = "
    "91,680 tokens (benchmark_throughput.py's --enable-chunked-prefill is off unless given); "
    "weights FP8, KV cache BF16"
)
SCRIPT_GAP = (
    "the script is vLLM's benchmark_throughput.py of November 2024 (not pinned: had it taken "
    "EngineArgs' defaults, vLLM 0.6.3 turns chunked prefill on for max_model_len > 32K with a "
    "512-token budget on CUDA, vllm/engine/arg_utils.py)"
)
GAPS = {  # chip: what the run's own records say xpusim does not reproduce
    "h100-sxm": (
        "; Meta's FP8 checkpoint quantizes only the feed-forward layers, and not those of the "
        "first and last layers ('The Llama 3 Herd of Models', section 6.2): vLLM logged "
        "56.7677 GiB of weights a GPU (raw_data/gpu-usage.md) and xpusim holds 56.72 GiB of its "
        "zoo file's split (all-FP8 before: 47.74 GiB). What remains is the KV cache: after its "
        "12.0 GB reserve for the 91,680-token profile step xpusim keeps 62,816 tokens, short "
        "of the 69,632 that 32 prompts of 128 + 2,048 tokens need, so from 32 prompts up it "
        "preempts; the measured 32-prompt step (38.3 ms, as at 16 prompts: 37.0) shows vLLM "
        "held them all, its reserve at most 11.6 GB (serve --kv-blocks 4400: 824.7 tok/s, "
        "0.99x; docs/validation.md, fifteenth session, q4 and q8)"
    ),
    "mi300x": (
        "; --enforce-eager runs every step without HIP graphs (not modelled apart): at 4 "
        "prompts of 128 tokens a step takes 33.1 ms (120.84 tok/s over 4) against xpusim's "
        "23.1 ms, 10 ms a step or 79 us for each of the 126 layers, what some fifteen "
        "Python-launched kernels a layer cost; the ratio does not fall with the batch (1.43x at "
        "4, 1.70x at 256), so vLLM 0.6.4's ROCm kernels (paged attention, FP8 GEMMs) are slower "
        "than xpusim's MI300X too, not separated here; AMD's Quark checkpoint is FP8 in every "
        "linear (49.3235 GiB = 52.96 GB a GPU logged, xpusim 51.26 GB) and the KV cache has "
        "room for every batch"
    ),
}  # fmt: skip
PROMPTS_FILE = "sharegpt-llama31-prompts.csv"
PROMPTS_RUN = "nvidia-vllm-16.0qps-Llama-3.1-405B-FP8-20241109-150547.json"


def git(mirror: str, *args: str) -> str:
    return subprocess.run(["git", "-C", mirror, *args], capture_output=True, text=True,
                          check=True).stdout  # fmt: skip


def files(mirror: str, folder: str) -> list[str]:
    """The file names in raw_data/<folder> at COMMIT."""
    listing = git(mirror, "ls-tree", "--name-only", f"{COMMIT}:{DIR}/raw_data/{folder}")
    return listing.split()


def read(mirror: str, folder: str, name: str) -> dict[str, Any]:
    return json.loads(git(mirror, "show", f"{COMMIT}:{DIR}/raw_data/{folder}/{name}"))


def offline_points(mirror: str) -> list[dict[str, Any]]:
    """One point a benchmark_throughput run: its output tokens a second."""
    out = []
    for folder, run in RUNS.items():
        for name in sorted(files(mirror, folder)):
            match = re.fullmatch(run["pattern"], name)
            if not match:
                continue
            if folder.startswith("8xH100"):
                isl, osl, n = (int(g) for g in match.groups())
            else:
                n, isl, osl = (int(g) for g in match.groups())
            assert osl == GEN, name
            data = read(mirror, folder, name)
            assert data["num_requests"] == n and data["total_num_tokens"] == n * (isl + osl)
            value = data["requests_per_second"] * GEN
            out.append({
                "id": f"{PREFIX}{run['tag']}x8-fp8-vllm-offline-in{isl}-n{n}-tok",
                "workload": "llm-serving", "chip": run["chip"], "chips": 8, "tp": 8,
                "model": run["model"], "precision": "fp8", "weight_precision": None,
                "kv_precision": "bf16", "engine": "vllm", "engine_version": run["version"],
                "engine_profile": "vllm-v0",
                "load": {"kind": "burst", "value": n, "requests": n},
                "prompt": isl, "gen": GEN, "stat": "mean", "metric": "output_tokens_per_s",
                "value": round(value, 2), "unit": "tokens/s",
                "source": f"{SOURCE}/raw_data/{folder}/{name}, field requests_per_second",
                "notes": (
                    f"dstack, 'Llama3.1-405B-Fp8 Inference Performance Comparison between "
                    f"8xH100SXM5 and 8xMi300x' ({DIR}/README.md), {run['version']}; "
                    f"'{run['command'].replace(' I ', f' {isl} ').replace(' N ', f' {n} ')}' "
                    f"({run['checkpoint']}); {n} prompts of {isl} random tokens, each answer "
                    f"forced to {GEN} tokens: total_num_tokens {data['total_num_tokens']} in "
                    f"{data['elapsed_time']:.2f} s. Value = requests_per_second "
                    f"{data['requests_per_second']:.6g} x {GEN} (derived: the file's "
                    f"tokens_per_second {data['tokens_per_second']:.2f} counts the prompts). "
                    f"{CHECKPOINT_NOTE}."
                ),
                "xpusim_setup": OFFLINE_SETUP.format(version=run["version"], n=n),
                "known_gap": SCRIPT_GAP + GAPS[run["chip"]],
                "token_budget": 91680, "max_batch": 256, "frontend_ms": 0, "api_servers": 0,
            })  # fmt: skip
    return out


def prompts_file(mirror: str) -> None:
    """Writes the ShareGPT prompt lengths of one H100 serving run (lengths/PROMPTS_FILE)."""
    data = read(mirror, SERVING, PROMPTS_RUN)
    assert len(data["input_lens"]) == 1000 and sum(data["input_lens"]) == 215196
    text = "input_tokens\n" + "".join(f"{n}\n" for n in data["input_lens"])
    (LENGTHS / PROMPTS_FILE).write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mirror", help="git directory of dstackai/benchmarks (holding COMMIT)")
    mirror = parser.parse_args().mirror
    pts = offline_points(mirror)
    write(pts, PREFIX)
    prompts_file(mirror)
    print(f"{len(pts)} points written to {PUBLISHED}")


if __name__ == "__main__":
    main()
