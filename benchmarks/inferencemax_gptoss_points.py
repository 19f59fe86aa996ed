"""Writes the `inferencemax-` points of src/xpusim/validation/published.json: SemiAnalysis's
InferenceMAX (now InferenceX) single-node runs of gpt-oss-120b, December 2025 to 14 January
2026, each a closed loop of C clients on one node under vLLM or TensorRT-LLM.

    python benchmarks/inferencemax_gptoss_points.py /path/to/mantile.git

Needs git only. The rows are the benchmark workflow's own result files (agg_bmk.json, the
`results_bmk` artifact of each run of github.com/InferenceMAX/InferenceMAX/actions) as
gminneci/mantile stored them, downloaded with `gh run download` (its
reconcile/sources/inferencemax/README.md), at MANTILE_COMMIT: a third party's copy of the
artifacts, not a page SemiAnalysis published; each point names its run. A configuration run
more than once takes its newest run (run ids rise with time); the runs agree within about 2%
on output throughput.

Kept (KEPT): gpt-oss-120b on one node, no disaggregation, no attention data parallelism
(TensorRT-LLM's attention-DP balancer settings of these runs were not read), at the newest
image of each engine: vLLM v0.13.0 on B200, H100 and H200 (on Hopper the launches of that
image set VLLM_MXFP4_USE_MARLIN=1, so gpt-oss's experts ran on vLLM's Marlin MoE, not the
Triton kernel that is vLLM's default there: MARLIN), TensorRT-LLM 1.2.0rc2 on B200 and ATOM
0.1.1 on MI355X (AITER's A16W4 fused MoE, which a table prices); at CONCURRENCIES. Not kept:
the GB200 Dynamo runs (prefill and decode on separate workers).

Each launch as the recipes of those weeks state it (github.com/SemiAnalysisAI/InferenceX,
benchmarks/gptoss_fp4_b200_docker.sh, gptoss_fp4_b200_trt_slurm.sh, gptoss_fp4_h100_docker.sh,
gptoss_fp4_h200_slurm.sh, commits f6a9d0b6 of 2025-12-15 to fba01e75 of 2026-01-14, read by
a helper and quoted in LAUNCH), and the client of benchmarks/benchmark_lib.sh: the random
dataset, lengths uniform in [0.8 L, L] (--random-range-ratio 0.8), --num-prompts 10 x C,
--max-concurrency C, --ignore-eos.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

from inferencex_points import SPREAD, graph_sizes
from nim_dli_points import write_from_mirror

PREFIX = "inferencemax-"
MANTILE_COMMIT = "72ff84ebfd56ee0b15bd17d7d49a70fbb4e50256"  # 2026-01-28
RAW = "reconcile/sources/inferencemax/raw"
SOURCE = (f"github.com/gminneci/mantile (commit {MANTILE_COMMIT[:12]}) {RAW}/run_{{run}}/"
          "agg_bmk.json, a copy of the results_bmk artifact of "
          "github.com/InferenceMAX/InferenceMAX/actions/runs/{run}, record hw={hw} "
          "framework={fw} image={image} isl={isl} osl={osl} tp={tp} ep={ep} "
          "dp_attention=false conc={conc}, field {field}")
CONCURRENCIES = (4, 16, 64, 128)
"""The clients kept of each sweep (4-128 were run): every other, to hold validate's time."""
KEPT = {
    ("b200", "vllm", "vllm/vllm-openai:v0.13.0"): "b200",
    ("h100", "vllm", "vllm/vllm-openai:v0.13.0"): "h100-sxm",
    ("h200", "vllm", "vllm/vllm-openai:v0.13.0"): "h200-sxm",
    ("b200-trt", "trt", "nvcr.io#nvidia/tensorrt-llm/release:1.2.0rc2"): "b200",
    ("mi355x", "atom", "rocm/atom:rocm7.1.1-ubuntu24.04-pytorch2.9-atom0.1.1-MI350x"): "mi355x",
}
"""(hw, framework, image) of the rows kept -> xpusim's chip."""
MARLIN = ("VLLM_MXFP4_USE_MARLIN=1, the MXFP4 experts on vLLM's Marlin MoE (added with the "
          "v0.13.0 image, InferenceX PR #327 of 2026-01-02, 'Fix H100/H200 perf regression'; "
          "perf-changelog.yaml: 'Add VLLM_MXFP4_USE_MARLIN=1 to H100 and H200 benchmark "
          "scripts')")
"""What the Hopper launches of the v0.13.0 image set besides vLLM's flags (commit 4e52ed4c of
github.com/SemiAnalysisAI/InferenceX, benchmarks/gptoss_fp4_h100_docker.sh and
gptoss_fp4_h200_slurm.sh; still there at fba01e75): the points take moe_backend MARLIN."""
ENGINE = {"vllm": "vllm", "trt": "trtllm", "atom": "atom"}
"""The record's framework -> xpusim's engine."""
PROFILE = {"vllm": "vllm-0.11", "trt": "trtllm", "atom": "atom"}
"""-> xpusim's engine profile: vLLM 0.13 as vllm-0.11 (the release profiled nearest below,
whose kernels the scored vLLM V1 points take) with async scheduling on, as the launch set it
(host_overlap)."""
ATOM_GRAPHS = [1, 2, 4, 8, 16, 32, 48, 64, 128, 256]
"""ATOM 0.1.1's default cudagraph_capture_sizes (LAUNCH["atom"])."""
LAUNCH = {
    "vllm-b200": (
        "vllm serve openai/gpt-oss-120b --tensor-parallel-size TP --gpu-memory-utilization 0.9 "
        "--max-num-seqs 512 with kv-cache-dtype fp8, async-scheduling true, "
        "no-enable-prefix-caching, max-cudagraph-capture-size 2048, max-num-batched-tokens "
        "8192, compilation pass_config fuse_allreduce_rms, and "
        "VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1 (benchmarks/gptoss_fp4_b200_docker.sh)"),
    "vllm-hopper": (
        "vllm serve openai/gpt-oss-120b --tensor-parallel-size TP --max-num-seqs C with "
        "async-scheduling, no-enable-prefix-caching, max-cudagraph-capture-size 2048, "
        f"max-num-batched-tokens 8192, the KV cache in the model's dtype, and {MARLIN} "
        "(benchmarks/gptoss_fp4_h100_docker.sh, gptoss_fp4_h200_slurm.sh)"),
    "atom": (
        "python3 -m atom.entrypoints.openai_server --model openai/gpt-oss-120b -tp TP "
        "--kv_cache_dtype fp8 --block-size 16 (benchmarks/gptoss_fp4_mi355x_atom_slurm.sh at "
        "2be3de60f, 2026-01-14, the day InferenceX added ATOM), ATOM 0.1.1's defaults "
        "otherwise: max_num_batched_tokens 16384, max_num_seqs 512, gpu_memory_utilization "
        "0.9, cudagraph_capture_sizes [1,2,4,8,16,32,48,64,128,256] (ROCm/ATOM "
        "atom/model_engine/arg_utils.py at 8ccc65c0f, 2026-01-14); on gfx950 its MXFP4 MoE is "
        "AITER's fused_moe over weights shuffled for the A16W4 kernel, BF16 activations "
        "(atom/model_ops/moe.py Mxfp4MoEMethod: use_triton only on gfx94x)"),
    "trt": (
        "trtllm-serve openai/gpt-oss-120b --backend pytorch --tp_size TP --ep_size EP "
        "--max_batch_size 512 --max_num_tokens 20000 with moe_config backend TRTLLM, "
        "kv_cache_config dtype fp8 free_gpu_memory_fraction 0.85 enable_block_reuse false, "
        "cuda_graph_config enable_padding true max_batch_size C, stream_interval 20, "
        "num_postprocess_workers 4, TRTLLM_ENABLE_PDL=1 "
        "(benchmarks/gptoss_fp4_b200_trt_slurm.sh)"),
}
GAP = ("Not modelled: vLLM's CUDA graphs past the profile's 512 tokens (the launch captured "
       "steps of up to 2,048: [1, 2, 4] + range(8, 256, 8) + range(256, 2049, 16), "
       "config/compilation.py; a step of 513-2,048 tokens runs unpadded here), {fusion}"
       "TensorRT-LLM's stream_interval 20 (each of its chunks holds 20 tokens; TPOT, "
       "the point's metric, is the mean per token either way); the random lengths drawn "
       "(xpusim draws its own from the same range). vLLM 0.13 runs as xpusim's vllm-0.11 "
       "profile with async scheduling on as the launch set it; ATOM 0.1.1 as the atom "
       "profile (0.1.6's host time and scheduling, prefill-first). A third party's copy of "
       "the run's result file, not a SemiAnalysis page.")
METRICS = (("ttft_s", "mean_ttft", "ttft", "s"), ("tpot_s", "mean_tpot", "tpot", "s"),
           ("output_tokens_per_s", "output_tput_per_gpu", "otps", "tokens/s"))
"""(xpusim metric, the record's field, id suffix, unit); throughput is the record's per GPU
times the GPUs (tp)."""
FUSION = {
    "b200": "vLLM's fuse_allreduce_rms pass at prompt chunks (it fuses up to "
            "FI_ALLREDUCE_FUSION_MAX_SIZE_MB, 64 / 32 / 1 MB at TP 2 / 4 / 8 on SM100: "
            "serve's --allreduce-fusion fuses decode steps alone) and ",
    "hopper": "whether vLLM 0.13 ran its fuse_allreduce_rms pass on Hopper (the recipe does "
              "not set it; its default in that release was not read) and ",
}
"""The all-reduce fusion the known gap names, by the launch (LAUNCH)."""


def rows(mirror: str) -> list[dict[str, Any]]:
    """Every kept record, the newest run's of each configuration, with its run id."""
    names = subprocess.run(["git", "-C", mirror, "ls-tree", "-r", "--name-only",
                            MANTILE_COMMIT, RAW], capture_output=True, text=True,
                           check=True).stdout.split()  # fmt: skip
    newest: dict[tuple, dict[str, Any]] = {}
    for name in sorted(n for n in names if n.endswith("/agg_bmk.json") and "/run_" in n):
        run = int(name.split("/run_")[1].split("/")[0])
        text = subprocess.run(["git", "-C", mirror, "show", f"{MANTILE_COMMIT}:{name}"],
                              capture_output=True, text=True, check=True).stdout  # fmt: skip
        for r in json.loads(text):
            if ("gpt-oss-120b" not in str(r.get("model", "")).lower() or r.get("disagg")
                    or str(r.get("dp_attention")).lower() == "true"  # a string in the file
                    or r["conc"] not in CONCURRENCIES
                    or (r["hw"], r["framework"], r["image"]) not in KEPT):  # fmt: skip
                continue
            key = (r["hw"], r["framework"], r["isl"], r["osl"], r["tp"], r["ep"], r["conc"])
            if key not in newest or newest[key]["run"] < run:
                newest[key] = {**r, "run": run}
    assert newest, f"no kept record at {MANTILE_COMMIT[:12]}"
    return [newest[k] for k in sorted(newest)]


def setup(r: dict[str, Any]) -> dict[str, Any]:
    """The point's run as xpusim takes it, but for its metric."""
    chip, tp, ep, conc = KEPT[r["hw"], r["framework"], r["image"]], r["tp"], r["ep"], r["conc"]
    prompt, gen = round(0.9 * r["isl"]), round(0.9 * r["osl"])
    trt, b200, atom = r["framework"] == "trt", chip == "b200", r["framework"] == "atom"
    out: dict[str, Any] = {
        "workload": "llm-serving", "chip": chip, "chips": tp, "tp": tp,
        "model": "gpt-oss-120b", "precision": "bf16", "weight_precision": "mxfp4",
        "kv_precision": "fp8" if b200 or atom else "bf16",
        "engine": ENGINE[r["framework"]], "engine_version": r["image"],
        "engine_profile": PROFILE[r["framework"]],
        "load": {"kind": "concurrency", "value": conc, "requests": 10 * conc, "warmup": 0},
        "prompt": prompt, "gen": gen, "spread": SPREAD, "stat": "mean",
    }  # fmt: skip
    if ep > 1:
        out["ep"] = ep
    if atom:
        out |= {"token_budget": 16384, "max_batch": 512, "kv_utilization": 0.9,
                "graph_sizes": ATOM_GRAPHS, "graph_pad": "decode"}  # fmt: skip
    elif trt:
        out |= {"token_budget": 20000, "max_batch": 512, "kv_utilization": 0.85,
                "graph_sizes": graph_sizes("trt", conc), "graph_pad": "decode",
                "moe_backend": "TRTLLM"}  # fmt: skip
    else:
        out |= {"max_batch": 512 if b200 else conc, "kv_utilization": 0.9,
                "host_overlap": True}  # fmt: skip
        if not b200:
            out["moe_backend"] = "MARLIN"  # the launch's VLLM_MXFP4_USE_MARLIN=1 (MARLIN)
        if b200:
            out["moe_input"] = "mxfp8"
            if tp > 1:  # the launch's fuse_allreduce_rms (LAUNCH["vllm-b200"])
                out["allreduce_fusion"] = True
    return out


def points(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for r in found:
        base = setup(r)
        chip, tp, fw = base["chip"], r["tp"], r["framework"]
        launch = LAUNCH[fw if fw in ("trt", "atom") else "vllm-b200" if chip == "b200"
                        else "vllm-hopper"]  # fmt: skip
        ep = f"-ep{r['ep']}" if r["ep"] > 1 else ""
        name = (f"{PREFIX}gptoss120b-{chip}-{fw}-tp{tp}{ep}-"
                f"{r['isl'] // 1024}k{r['osl'] // 1024}k-c{r['conc']}")  # fmt: skip
        for metric, field, short, unit in METRICS:
            value = r[field] * (tp if metric == "output_tokens_per_s" else 1)
            p = {"id": f"{name}-{short}", **base, "metric": metric,
                 "value": round(value, 6 if unit == "s" else 1), "unit": unit}  # fmt: skip
            if metric == "output_tokens_per_s":
                del p["stat"]
            p |= {
                "source": SOURCE.format(run=r["run"], hw=r["hw"], fw=fw, image=r["image"],
                                        isl=r["isl"], osl=r["osl"], tp=tp, ep=r["ep"],
                                        conc=r["conc"], field=field),
                "notes": (f"InferenceMAX's run {r['run']} of gpt-oss-120b (OpenAI's MXFP4 "
                          f"experts, BF16 attention) on {tp} {chip}: {launch}; client "
                          f"benchmark_serving.py, random {r['isl']} in / {r['osl']} out at "
                          f"--random-range-ratio 0.8 (mean {base['prompt']} / {base['gen']}), "
                          f"{10 * r['conc']} prompts, {r['conc']} clients, --ignore-eos. The "
                          f"record's {field}" + (" per GPU, times the node's "
                                                 f"{tp}" if unit == "tokens/s" else "")
                          + "."),
                "known_gap": GAP.format(fusion="" if fw != "vllm" else FUSION[
                    "b200" if chip == "b200" else "hopper"]),
                "xpusim_setup": (f"engine profile {base['engine_profile']}; "
                                 f"{10 * r['conc']} requests, every one measured; lengths "
                                 f"mean {base['prompt']} / {base['gen']}, spread {SPREAD}; "
                                 + ", ".join(f"{k} {base[k]}" for k in (
                                     "kv_precision", "token_budget", "max_batch",
                                     "kv_utilization", "moe_backend", "moe_input",
                                     "host_overlap", "allreduce_fusion")
                                     if k in base)
                                 + ("; CUDA graphs up to the launch's batch with padding"
                                    if fw == "trt" else "; ATOM's default HIP graphs"
                                    if fw == "atom" else "")),
            }  # fmt: skip
            out.append(p)
    return out


def main() -> None:
    write_from_mirror(__doc__, "git directory of gminneci/mantile (or a fork)",
                      lambda mirror: points(rows(mirror)), PREFIX, len(METRICS))


if __name__ == "__main__":
    main()
