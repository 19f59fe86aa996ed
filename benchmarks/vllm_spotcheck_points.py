"""Regenerates the `vllmspot-` points of src/xpusim/validation/published.json: the vLLM team's
'interactive performance spot check' (github.com/simon-mo/vLLM-Benchmark, March 2025), vLLM
0.8.2 (V1 engine) against SGLang 0.4.4.post3 on one H200 (Llama 3.1 8B Instruct FP8), two
H200 and two H100 (QwQ-32B, BF16), each run a `benchmark_serving.py` result JSON.

    python benchmarks/vllm_spotcheck_points.py /path/to/vLLM-Benchmark.git

Needs git only; the directory may be a bare mirror of github.com/simon-mo/vLLM-Benchmark. The
runs are the JSONs its commits RUNS added under saved-results/v0.8.2/ (the README's tables
'As of March 30, 2025: H200 (Brewster)' and 'H100 (flow-matic)' print their output
throughput); the Justfile at those commits gives the launches and the client: `vllm serve
MODEL --tensor-parallel-size TP --trust-remote-code --load-format dummy
--no-enable-prefix-caching --disable-log-requests` (VLLM_USE_FLASHINFER_SAMPLER=1, vllm==0.8.2
with FlashInfer 0.2.3), `python -m sglang.launch_server --model MODEL --tp TP
--trust-remote-code --enable-flashinfer-mla --disable-radix-cache --load-format dummy`
(SGL_ENABLE_JIT_DEEPGEMM=1, sglang[all]==0.4.4.post3), and for both `python
benchmarks/benchmark_serving.py --dataset-name random --ignore-eos --num-prompts 50
--request-rate 10 --random-input-len I --random-output-len O` (vLLM's client, backend vllm:
/v1/completions, Poisson arrivals) at (I, O) of (1000, 2000), (5000, 1000), (10000, 500) and
(32000, 100). Each JSON holds every request's input and output length: all equal (the
client's range ratio 1, and ignore_eos), which the points take as prompt and gen. Each run
gives two points: the median TTFT and the median TPOT (the means are in its notes). Its
output throughput is not a point: benchmark_serving divides every output token by the run's
whole duration, the last requests' drain included, where serve's open-loop rate counts the
tokens finished within the arrival window (5 s here, shorter than most of these requests),
two different quantities for a 50-request run. Not
kept: Llama 3.2 3B and DeepSeek-R1 (outside the models these points are for; the R1 runs of
these commits used dummy weights, whose routing is not a trained model's), and the v0.8.1
runs of 2025-03-21 (JSONs without per-request lengths; the README: 'In vLLM, not all
requests are completed'). The points replace every `vllmspot-` point in place, or go just
before the `inferencex-` block (nim_dli_points.write).
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

from nim_dli_points import write_from_mirror

REPO = "github.com/simon-mo/vLLM-Benchmark"
RUNS = {  # commit: (its date, the directory of saved-results/ it added, the chip's id)
    "8eaead1d73765d33ca5d87d8316cfc8f074978ee": ("2025-03-30", "v0.8.2/h200-brewster",
                                                 "h200-sxm"),
    "b2f80f2c9a2d1ae110f789939b13e2a84c71104e": ("2025-03-30", "v0.8.2/h100-flow-matic",
                                                 "h100-sxm"),
}  # fmt: skip
PREFIX = "vllmspot-"
MODELS = {  # the JSON's model_id: (folder, zoo model, GPUs, precision, tag, checkpoint note)
    "neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8": (
        "llama-8b", "llama-3.1-8b", 1, "fp8", "llama31-8b-fp8",
        "Llama 3.1 8B Instruct quantized by Neural Magic: FP8 weights and activations, "
        "per-tensor scales, mapped to the zoo's llama-3.1-8b at fp8"),
    "Qwen/QwQ-32B": (
        "qwq-32b", "qwen2.5-32b", 2, "bf16", "qwq-32b",
        "QwQ-32B, Qwen2.5-32B's architecture (64 layers, hidden 5120, 40 query and 8 KV "
        "heads), mapped to the zoo's qwen2.5-32b; BF16 (no dtype or quantization flag)"),
}  # fmt: skip
ENGINES = {  # file prefix: (engine, version, xpusim profile, launch, settings it states)
    "vllm": ("vllm", "vLLM 0.8.2 (V1 engine, the default since 0.8.0)", "vllm-0.11",
             "VLLM_USE_FLASHINFER_SAMPLER=1 vllm serve {model} --tensor-parallel-size {tp} "
             "--trust-remote-code --load-format dummy --no-enable-prefix-caching "
             "--disable-log-requests", {"token_budget": 8192}),
    "sgl": ("sglang", "SGLang 0.4.4.post3", "sglang-0.4",
            "SGL_ENABLE_JIT_DEEPGEMM=1 python -m sglang.launch_server --model {model} "
            "--tp {tp} --trust-remote-code --enable-flashinfer-mla --disable-radix-cache "
            "--load-format dummy", {"radix_cache": False}),
}  # fmt: skip
VLLM_BUDGET_SOURCE = (
    "vLLM's max_num_batched_tokens where the launch sets none: 8192 for the API server on "
    "H100 and H200 from vllm-project/vllm PR #12369 ('[V1] Increase default batch size for "
    "H100/H200', merged January 2025, before 0.8.2; PR #17073 of April 2025 still shows the "
    "H100/H200 branch); max_num_seqs, 256 or more, exceeds the run's 50 requests"
)
SGLANG_MEM = {1: 0.88, 2: 0.87}
"""SGLang's mem_fraction_static where the launch sets none: 0.88 at tp 1 and 0.87 at tp 2
(server_args.py's rule by tp size, as engines.toml's sglang-0.4 profile reads it at 0.4.3;
taken as unchanged at 0.4.4.post3)."""
PAIRS = ((1000, 2000), (5000, 1000), (10000, 500), (32000, 100))
METRICS = (  # metric, the JSON's field (ms), stat, id suffix
    ("ttft_s", "median_ttft_ms", "p50", "ttft"),
    ("tpot_s", "median_tpot_ms", "p50", "tpot"),
)
NOTES = (
    "vLLM team's spot check ({repo}, README 'As of March 30, 2025', {chip_name}), run {date}: "
    "server '{serve}' ({version}); client 'python benchmarks/benchmark_serving.py --model "
    "{model} --dataset-name random --ignore-eos --num-prompts 50 --request-rate 10 "
    "--random-input-len {isl} --random-output-len {osl}' (vLLM's client, /v1/completions, "
    "Poisson arrivals, seed 0); {completed} of {prompts} requests completed, every one "
    "{isl} tokens in and {osl} out. {checkpoint}. JSON field '{field}' (ms, converted to "
    "s); the run's mean TTFT {mean_ttft:.1f} ms, mean TPOT {mean_tpot:.2f} ms, median ITL "
    "{median_itl:.2f} ms, output throughput {tok:.1f} tokens/s over the whole run. Chip "
    "'{chip_name}' (a host name) taken as SXM."
)
XPUSIM_SETUP = (
    "engine profile {profile} ({version}){extra}; Poisson arrivals at 10 requests/s, the "
    "run's 50 requests, none warm-up; every prompt {isl} and every answer {osl} tokens; "
    "weights {precision}, KV cache BF16{reading}"
)
GAP = (
    "50 Poisson arrivals: the median of so few requests moves with the arrival draw "
    "(vLLM's client seeds numpy with 0, serve its own generator); --load-format dummy (random "
    "weights; a dense model's timing does not depend on their values)"
)
LAUNCH_READING = {  # what the setup takes from each launch beyond its flags' settings
    "vllm": f"; {VLLM_BUDGET_SOURCE}",
    "sgl": "; SGLang's other limits its 0.4 defaults (engines.toml sglang-0.4); "
           "--enable-flashinfer-mla touches MLA models only and SGL_ENABLE_JIT_DEEPGEMM "
           "block-FP8 GEMMs only, neither these models'",
}  # fmt: skip


def results(mirror: str) -> dict[tuple[str, str], dict[str, Any]]:
    """(commit, path under saved-results/) -> the result JSON, for every run kept."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for commit, (_, folder, _) in RUNS.items():
        for model_folder in sorted({m[0] for m in MODELS.values()}):
            for prefix in ENGINES:
                for isl, osl in PAIRS:
                    path = f"{folder}/{model_folder}/{prefix}-{isl}-{osl}.json"
                    shown = subprocess.run(
                        ["git", "-C", mirror, "show", f"{commit}:saved-results/{path}"],
                        capture_output=True, text=True)  # fmt: skip
                    if shown.returncode == 0:  # the H100 commit holds QwQ-32B only
                        out[(commit, path)] = json.loads(shown.stdout)
    return out


def points(runs: dict[tuple[str, str], dict[str, Any]]) -> list[dict[str, Any]]:
    """Two points a run: its median TTFT and its median TPOT."""
    out: list[dict[str, Any]] = []
    for (commit, path), d in sorted(runs.items()):
        date, folder, chip = RUNS[commit]
        prefix = path.rsplit("/", 1)[1].split("-")[0]
        engine, version, profile, launch, stated = ENGINES[prefix]
        _, model, tp, precision, tag, checkpoint = MODELS[d["model_id"]]
        (isl,), (osl,) = set(d["input_lens"]), set(d["output_lens"])  # every request alike
        assert d["completed"] == d["num_prompts"] == 50 and d["request_rate"] == 10.0, path
        assert d["max_concurrency"] is None and d["burstiness"] == 1.0, path
        settings = dict(stated) | ({"kv_utilization": SGLANG_MEM[tp]} if engine == "sglang"
                                   else {})  # fmt: skip
        serve = launch.format(model=d["model_id"], tp=tp)
        chip_name = folder.split("/")[1]
        extra = "".join(f", {k} {v}" for k, v in settings.items())
        for metric, field, stat, suffix in METRICS:
            out.append({
                "id": f"{PREFIX}{tag}-{chip.split('-')[0]}x{tp}-{engine}-{isl}-{osl}-{suffix}",
                "workload": "llm-serving", "chip": chip, "chips": tp, "tp": tp,
                "model": model, "precision": precision, "weight_precision": None,
                "kv_precision": "bf16", "engine": engine, "engine_version": version,
                "engine_profile": profile, **settings,
                "load": {"kind": "rate", "value": 10.0, "requests": 50, "warmup": 0},
                "prompt": isl, "gen": osl, "stat": stat, "metric": metric,
                "value": round(float(d[field]) * 1e-3, 6), "unit": "s",
                "source": f"{REPO} (commit {commit[:12]}) saved-results/{path}, field "
                          f"'{field}'",
                "notes": NOTES.format(
                    repo=REPO, chip_name=chip_name, date=date, serve=serve, version=version,
                    model=d["model_id"], isl=isl, osl=osl, completed=d["completed"],
                    prompts=d["num_prompts"], checkpoint=checkpoint, field=field,
                    mean_ttft=d["mean_ttft_ms"], mean_tpot=d["mean_tpot_ms"],
                    median_itl=d["median_itl_ms"], tok=d["output_throughput"]),
                "xpusim_setup": XPUSIM_SETUP.format(
                    profile=profile, version=version, extra=extra, isl=isl, osl=osl,
                    precision=precision.upper(), reading=LAUNCH_READING[prefix]),
                "known_gap": GAP,
            })  # fmt: skip
    return out


def main() -> None:
    write_from_mirror(__doc__, "git directory of simon-mo/vLLM-Benchmark",
                      lambda mirror: points(results(mirror)), PREFIX, len(METRICS))


if __name__ == "__main__":
    main()
