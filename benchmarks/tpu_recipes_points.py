"""Serving points from Google's TPU7x (Ironwood) vLLM recipes: each page of
AI-Hypercomputer/tpu-recipes under inference/ironwood/vLLM that publishes a measured table
becomes one output-throughput point a workload (1k/1k, 1k/8k, 8k/1k), read with the page's
own server launch and the InferenceX client each workload's manifest runs (issue #48: a third
vendor's chips, Google's, beside the v6e page entered by hand as tpurecipes-v6e8-*).

    python benchmarks/tpu_recipes_points.py /path/to/tpu-recipes.git   # a git mirror

Each page is pinned at the commit that last changed its table (PAGES). What a page gives and
how serve runs it:
- The server: the vllm-tpu container's arguments (tensor parallelism over TensorCores, two a
  TPU7x chip: one xpusim chip each two; --max-num-batched-tokens and --max-num-seqs as the
  step's token budget and batch; --gpu-memory-utilization; --block-size; --kv-cache-dtype;
  --enable-expert-parallel as experts over the same chips; --async-scheduling as host
  overlap; a qwix rule quantizing weights and activations to float8_e4m3fn as FP8 compute).
  The chips are the node's topology (1x1x1: one chip, 2x2x1: four).
- The client: SemiAnalysis InferenceX's benchmark_serving.py, random lengths uniform in
  [0.8 L, L] (inferencex_points.mean_len and SPREAD), --num-prompts, --max-concurrency,
  --ignore-eos, no warm-up requests (the manifests pass no --num-warmups).
- The result: the page's 'Output Token Throughput' row; where it prints a total beside the
  per-chip figure ("1996.00 tok/s (499 tok/s/chip)") the total, else the per-chip figure
  times the chips.
Pages with only placeholder tables ('xxx') are left out (SKIPPED says which).

A page whose server runs attention data parallelism (DP_PAGES: Qwen3.5-397B-A17B-FP8 on four
chips) is read from the client's own result blocks at the commit that printed them: TTFT and
TPOT (mean, median, P99) and output throughput a workload, its limits per DP rank as
tpu-inference applies them (dp_page_points).
"""

from __future__ import annotations

import re
from typing import Any

from inferencex_points import SPREAD, mean_len
from nim_dli_points import show, write_from_mirror

PREFIX = "tpurecipes-v7x"
PAGES = {  # page: the commit that last changed its table
    "inference/ironwood/vLLM/Qwen3-32B/README.md": "467e5563587cf860a56382125cc8ec924bd519e5",
    "inference/ironwood/vLLM/Qwen3-Coder-480B-A35B/README.md":
        "abaa76a85f661d839145b718531341df1c583033",
}  # fmt: skip
DP_PAGES = {  # page: (the commit of its result blocks, its server manifest)
    "inference/ironwood/vLLM/Qwen3.5-397B/README.md": (
        "976253b6b6116f167c571a233b6141dcd7576205",
        "inference/ironwood/vLLM/Qwen3.5-397B/qwen3_5-server.yaml"),
}  # fmt: skip
"""Pages whose server runs attention data parallelism, read from the client's own result
blocks (dp_page_points): Qwen3.5-397B at 976253b printed every workload's mean, median and
P99 TTFT and TPOT beside its throughput; the next commit, 4a26f96 of the same day, kept the
throughput table alone (the same figures)."""
SKIPPED = {  # the other ironwood vLLM pages at the mirror's c8cfe2f (2026-08)
    "inference/ironwood/vLLM/GPT-OSS/README-gcs.md": "its results block is placeholders (xxx)",
    "inference/ironwood/vLLM/GPT-OSS/README-lustre.md": "its results block is placeholders (xxx)",
    "inference/ironwood/vLLM/Gemma4/README.md": "its results block is placeholders (xxxx)",
    "inference/ironwood/vLLM/Qwen3-Embedding-8B/README.md": "an embedding model: no generation",
}  # fmt: skip
TOPOLOGY = re.compile(r"gke-tpu-topology:\s*(\d+)x(\d+)x(\d+)")
ARG = re.compile(r"^\s*- '?--([\w-]+)(?:=(.*?))?'?\s*$", flags=re.M)
CLIENT_ARG = re.compile(r"--([\w-]+)=(\S+)")
ROW = re.compile(r"^\s*(\d+)k/(\d+)k\s*\|\s*([\d.]+)(?: tok/s \(([\d.]+) tok/s/chip\))?",
                 flags=re.M)
TENSOR_CORES_PER_CHIP = 2  # TPU7x: two TensorCores a chip (catalog tpu-v7.toml, tpu_info),
# each a JAX device and so a vLLM tensor-parallel rank


def server(text: str) -> dict[str, str]:
    """The vllm-tpu server container's --arguments (before the first workload), and its image."""
    head = text.split("#### Workload", 1)[0]
    args = {k: v or "true" for k, v in ARG.findall(head)}
    image = re.search(r"image:\s*(vllm/vllm-tpu:\S+)", head)
    args["image"] = image.group(1) if image else ""
    (x, y, z), = TOPOLOGY.findall(head)
    args["chips"] = str(int(x) * int(y) * int(z))
    return args


def workloads(text: str) -> dict[str, dict[str, str]]:
    """Each workload's client arguments, by its name ('1k/1k')."""
    out = {}
    for block in text.split("#### Workload ")[1:]:
        name = block.split(None, 1)[0]
        out[name] = dict(CLIENT_ARG.findall(block.split("```")[1]))
    return out


def measured(text: str, chips: int) -> dict[str, float]:
    """The table's output tokens/s of all chips, by workload ('1k/1k')."""
    out = {}
    for isl, osl, first, per_chip in ROW.findall(text):
        total = float(first) if per_chip else float(first) * chips
        if per_chip:  # the total and the per-chip figure printed together agree
            assert abs(float(per_chip) * chips - total) <= 0.01 * total, (isl, osl)
        out[f"{isl}k/{osl}k"] = total
    return out


def client(path: str, name: str, args: dict[str, str]) -> tuple[dict[str, Any], str]:
    """A workload's InferenceX client (its --arguments): the point's load, mean lengths and
    spread, and the sentence its notes say of it."""
    assert args["random-range-ratio"] == "0.8" and args["dataset-name"] == "random", (path, name)
    _, prompt = mean_len(int(args["random-input-len"]))
    _, gen = mean_len(int(args["random-output-len"]))
    conc, prompts = int(args["max-concurrency"]), int(args["num-prompts"])
    said = (f"client InferenceX benchmark_serving.py, random {args['random-input-len']} in / "
            f"{args['random-output-len']} out at --random-range-ratio 0.8 (mean {prompt} / "
            f"{gen}), {prompts} prompts, {conc} clients, --ignore-eos.")
    return {"load": {"kind": "concurrency", "value": conc, "requests": prompts, "warmup": 0},
            "prompt": prompt, "gen": gen, "spread": SPREAD}, said  # fmt: skip


def page_points(path: str, text: str) -> list[dict[str, Any]]:
    """One output-throughput point a workload of the page's table."""
    s = server(text)
    chips, tp_cores = int(s["chips"]), int(s["tensor-parallel-size"])
    assert tp_cores == chips * TENSOR_CORES_PER_CHIP, (path, tp_cores, chips)
    qwix = s.get("additional_config", "")
    fp8 = '"weight_qtype": "float8_e4m3fn"' in qwix and '"act_qtype": "float8_e4m3fn"' in qwix
    from xpusim.workloads.resolve import resolve

    model = s["model"]
    resolved = resolve(model)
    checkpoint = getattr(resolved.workload, "checkpoint", None)  # a quantized repo's formats
    slug = model.split("/")[-1].lower()
    out, clients = [], workloads(text)
    for name, value in measured(text, chips).items():
        load, said = client(path, name, clients[name])
        tag = name.replace("/", "")
        point = {
            "id": f"{PREFIX}{chips}-{slug}-{tag}-c{load['load']['value']}-output",
            "workload": "llm-serving", "chip": "tpu-v7", "chips": chips, "tp": chips,
            "model": resolved.where,
            "precision": "fp8" if fp8 else (checkpoint and checkpoint.compute) or "bf16",
            "weight_precision": checkpoint and checkpoint.weights,
            "kv_precision": s["kv-cache-dtype"], "engine": "vllm", **load,
            "metric": "output_tokens_per_s", "stat": "mean", "value": round(value, 2),
            "unit": "tokens/s",
            "source": (f"github.com/AI-Hypercomputer/tpu-recipes {path} at {PAGES[path][:12]}, "
                       f"the table 'Output Token Throughput (tok/s)', row {name}"),
            "notes": (f"{s['image']} on {chips} TPU7x chip(s) (topology from the node selector): "
                      f"vllm serve {model} --tensor-parallel-size {tp_cores} (TensorCores) "
                      f"--max-num-batched-tokens {s['max-num-batched-tokens']} --max-num-seqs "
                      f"{s['max-num-seqs']} --gpu-memory-utilization "
                      f"{s['gpu-memory-utilization']} --block-size {s['block-size']} "
                      f"--kv-cache-dtype {s['kv-cache-dtype']}"
                      + (" --enable-expert-parallel" if "enable-expert-parallel" in s else "")
                      + (" --async-scheduling" if "async-scheduling" in s else "")
                      + (", qwix FP8 weights and activations (quantized at load)" if fp8 else "")
                      + f"; {said}"),
            "engine_profile": "vllm-0.11",
            "xpusim_setup": (f"vLLM V1 on TPU (tpu-inference): decode-first chunked prefill within "
                             f"the launch's token budget and batch; KV blocks of "
                             f"{s['block-size']}; the vllm-0.11 profile's host figures "
                             f"(measured on GPUs) taken for the TPU host; a TPU7x chip's two "
                             f"TensorCores, two tensor-parallel ranks to vLLM, are one xpusim "
                             f"chip (the traffic between them not modelled)"),
            "token_budget": int(s["max-num-batched-tokens"]),
            "max_batch": int(s["max-num-seqs"]),
            "kv_utilization": float(s["gpu-memory-utilization"]),
            "kv_block": int(s["block-size"]),
            "host_overlap": "async-scheduling" in s,
        }  # fmt: skip
        if "enable-expert-parallel" in s:
            point["ep"] = chips
        out.append(point)
    return out


RESULT = re.compile(r"^#### Workload [A-Z] \((\d+k/\d+k)\):\s*```(.*?)```", flags=re.M | re.S)
CLIENT = re.compile(r"^### Workload [A-Z]:[^\n]*\((\d+k/\d+k)\)(.*?)(?=^### |\Z)",
                    flags=re.M | re.S)
STATS = {"Mean": ("mean", ""), "Median": ("p50", "-p50"), "P99": ("p99", "-p99")}
"""The client's statistics -> a point's stat and id suffix."""
FIELD = re.compile(r"^(Mean|Median|P99) (TTFT|TPOT) \(ms\): ([\d.]+)", flags=re.M)
THROUGHPUT = re.compile(r"^Output token throughput \(tok/s\): ([\d.]+)", flags=re.M)


def attention_dp_ranks(tp_cores: int, kv_heads: int, head_dim: int, kv_itemsize: int) -> int:
    """tpu-inference's attention-DP size (tpu_inference/layers/common/sharding.py
    ShardingConfigManager.from_vllm_config under enable_dp_attention, at c539adc and HEAD):
    the tensor-parallel devices over the KV heads one device's cache packs, packing
    4 // itemsize (twice that at head_dim 64) and max(1, kv_heads x 2 / packing) of them a
    device."""
    packing = 4 // kv_itemsize * (2 if head_dim == 64 else 1)
    return max(int(tp_cores // max(1.0, kv_heads * 2 / packing)), 1)


def dp_page_points(path: str, text: str, manifest: str) -> list[dict[str, Any]]:
    """A page whose server runs attention data-parallel over its TensorCores: TTFT and TPOT
    (mean, median, P99) and output throughput of each workload's result block. The engine
    schedules each DP rank apart with the launch's --max-num-seqs and
    --max-num-batched-tokens as that rank's (engines.toml vllm-0.11 dp_attention_source),
    and holds new requests until as many pend as it has ranks (DP_SCHED_BATCH_PREFILL,
    dp_prefill_batch); serve's attention-DP ranks are its chips, two TensorCores each, so a
    chip's rank takes its two cores' token budget and the batch limit is all ranks'."""
    s = server(manifest)
    chips, tp_cores = int(s["chips"]), int(s["tensor-parallel-size"])
    assert tp_cores == chips * TENSOR_CORES_PER_CHIP, (path, tp_cores, chips)
    assert '"enable_dp_attention": true' in s["additional-config"], path
    from xpusim.workloads.resolve import resolve

    model = s["model"]
    resolved = resolve(model)
    cfg, checkpoint = resolved.workload, resolved.workload.checkpoint
    assert s["kv-cache-dtype"] == "fp8", path  # one byte an element (attention_dp_ranks)
    ranks = attention_dp_ranks(tp_cores, cfg.num_kv_heads, cfg.head_dim, 1)
    per_rank_tokens, per_rank_seqs = int(s["max-num-batched-tokens"]), int(s["max-num-seqs"])
    slug = model.split("/")[-1].lower()
    clients = {name: dict(CLIENT_ARG.findall(block.split("```")[1]))
               for name, block in CLIENT.findall(text)}  # fmt: skip
    out = []
    for name, block in RESULT.findall(text):
        load, said = client(path, name, clients[name])
        values = [("output", "output_tokens_per_s", "mean", float(THROUGHPUT.search(block)[1]),
                   "tokens/s", "'Output token throughput (tok/s)'")]
        for stat, metric, ms in FIELD.findall(block):
            tag, suffix = STATS[stat]
            values.append((f"{metric.lower()}{suffix}", f"{metric.lower()}_s", tag,
                           float(ms) / 1e3, "s", f"'{stat} {metric} (ms)', converted to s"))
        base = f"{PREFIX}{chips}-{slug}-{name.replace('/', '')}-c{load['load']['value']}-"
        for short, metric, stat, value, unit, field in values:
            out.append({
                "id": base + short, "workload": "llm-serving", "chip": "tpu-v7", "chips": chips,
                "tp": chips, "ep": chips, "dp_attention": True, "model": resolved.where,
                "precision": checkpoint.compute, "weight_precision": checkpoint.weights,
                "kv_precision": s["kv-cache-dtype"], "engine": "vllm", **load, "metric": metric,
                "stat": stat, "value": round(value, 6 if unit == "s" else 2), "unit": unit,
                "source": (f"github.com/AI-Hypercomputer/tpu-recipes {path} at "
                           f"{DP_PAGES[path][0][:12]}, 'Example Benchmark Output', Workload "
                           f"{name}, field {field}"),
                "notes": (f"{s['image']} on {chips} TPU7x chips (topology from the node "
                          f"selector, {DP_PAGES[path][1]}): vllm serve {model} "
                          f"--tensor-parallel-size {tp_cores} (TensorCores) "
                          f"--max-num-batched-tokens {per_rank_tokens} --max-num-seqs "
                          f"{per_rank_seqs} --gpu-memory-utilization "
                          f"{s['gpu-memory-utilization']} --block-size {s['block-size']} "
                          f"--kv-cache-dtype {s['kv-cache-dtype']} --enable-expert-parallel "
                          f"--no-enable-prefix-caching, additional config sharding "
                          f"enable_dp_attention (tpu-inference: {ranks} attention-DP ranks, "
                          f"one a TensorCore, for {cfg.num_kv_heads} KV heads of "
                          f"{cfg.head_dim} in FP8); {said} The result block's {field}."),
                "engine_profile": "vllm-0.11",
                "xpusim_setup": (f"vLLM V1 on TPU (tpu-inference): decode-first chunked "
                                 f"prefill, each attention-DP rank its own scheduler; a TPU7x "
                                 f"chip's two TensorCores, two DP ranks to the engine, are one "
                                 f"xpusim chip and one rank, with both cores' token budget "
                                 f"({TENSOR_CORES_PER_CHIP} x {per_rank_tokens}); "
                                 f"{ranks} x {per_rank_seqs} sequences in all; new requests "
                                 f"held until {ranks} pend (DP_SCHED_BATCH_PREFILL); KV blocks "
                                 f"of {s['block-size']}; async scheduling on (vLLM's default "
                                 f"since 0.14); the vllm-0.11 profile's host figures (measured "
                                 f"on GPUs) taken for the TPU host"),
                "token_budget": per_rank_tokens * TENSOR_CORES_PER_CHIP,
                "max_batch": per_rank_seqs * ranks,
                "kv_utilization": float(s["gpu-memory-utilization"]),
                "kv_block": int(s["block-size"]), "host_overlap": True,
                "dp_prefill_batch": ranks,
            })  # fmt: skip
    return out


def points(mirror: str) -> list[dict[str, Any]]:
    """Every page's points, in PAGES' order, then DP_PAGES'."""
    return [p for path in PAGES for p in page_points(path, show(mirror, PAGES[path], path))] \
        + [p for path, (commit, manifest) in DP_PAGES.items()
           for p in dp_page_points(path, show(mirror, commit, path),
                                   show(mirror, commit, manifest))]  # fmt: skip


def main() -> None:
    write_from_mirror(__doc__, "git directory of AI-Hypercomputer/tpu-recipes", points, PREFIX, 1)


if __name__ == "__main__":
    main()
