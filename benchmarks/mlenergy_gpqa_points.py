"""Regenerates the `mlenergy3-gpqa-` points of src/xpusim/validation/published.json and their
output-length files: the ML.ENERGY Benchmark v3.0's (December 2025) GPQA task on H100 under
vLLM 0.11.1, each run a reasoning model's 198 GPQA-Diamond questions sent at once to a server
that runs at most `max_num_seqs` of them (a batch sweep): the median of every token's gap, and
the output-token throughput of the steady state between the ramps.

    python benchmarks/mlenergy_gpqa_points.py /path/to/leaderboard.git /path/to/benchmark.git

Needs git only; the directories may be bare mirrors of github.com/ml-energy/leaderboard and
github.com/ml-energy/benchmark. The figures are the leaderboard's data file of each model
(public/data/models/<org>__<model>__gpqa.json at LB_COMMIT); the launch and client settings
are the benchmark's configs as of the run (BM_COMMIT, 2025-11-27, four days before v3.0's
release): configs/vllm/gpqa/<model>/H100/monolithic.config.yaml (async scheduling,
max-num-batched-tokens 8192, EP for the MoE models, api-server-count 3),
configs/vllm/gpqa/benchmark.yaml (198 requests, max_output_tokens 32768) and its sweeps
(num_request_repeats), and mlenergy/llm/benchmark.py (server image vllm/vllm-openai:v0.11.1;
the steady state runs from when max_num_seqs requests have their first token to when all but
max_num_seqs + 1 have finished). Why these runs: a reasoning model's answers run 7,000-9,500
tokens (1,700-2,600 for gpt-oss) against prompts of a few hundred, so what is measured is
decode at a known batch over a long, published output-length distribution, and the prompt
length (not published) moves a prediction by little (docs/validation.md, twelfth session,
j3). Kept: the H100 runs of the models the zoo holds (Nemotron's hybrid Mamba layers are not
modelled). Each model's output-length histogram (the file's, pooling all its runs' requests,
H100 and B200; each run's own has the same bins) becomes
src/xpusim/validation/lengths/mlenergy-gpqa-<model>.csv, a row a request at its bin's middle,
scaled per run to that run's mean (`scale_gen`). The points replace every `mlenergy3-gpqa-`
point in place, or go just before the `inferencex-` block (nim_dli_points.write).
"""

from __future__ import annotations

import argparse
import json
import re
from itertools import pairwise
from typing import Any

from nim_dli_points import PUBLISHED, show, write

LB_COMMIT = "0cd52dab897c5d91a45f4d413038f3b8b4251b0f"  # 2026-02-27, leaderboard data v3.0
BM_COMMIT = "bc2cb39d7510cbd0fbd16ed93d4e9edc7e1b0361"  # 2025-11-27, benchmark configs
LB = f"github.com/ml-energy/leaderboard (commit {LB_COMMIT[:12]})"
BM = f"github.com/ml-energy/benchmark (commit {BM_COMMIT[:12]})"
PREFIX = "mlenergy3-gpqa-"
LENGTHS = PUBLISHED.parent / "lengths"
PROMPT_TOKENS = 256
"""Tokens a GPQA prompt is taken to hold: the benchmark sends 'What is the correct answer to
the following question: {question}' and four lettered choices (mlenergy/llm/datasets.py
GPQADataset) through the chat template; their token counts are not published and the dataset
is not read here. An assumption: at 128 or 512 tokens the Qwen3 predictions move by a median
0.5% and 0.9% (at most 3.4% and 5.7%), gpt-oss's, whose answers are 4x shorter, by 0.9% and
1.9% (at most 15% and 22%, throughput at 512-2048 sequences) (docs/validation.md)."""
MODELS = {  # hub id: (zoo model, precision, weight precision: None = the checkpoint's)
    "Qwen/Qwen3-8B": ("qwen3-8b", "bf16", None),
    "Qwen/Qwen3-14B": ("qwen3-14b", "bf16", None),
    "Qwen/Qwen3-32B": ("qwen3-32b", "bf16", None),
    "Qwen/Qwen3-30B-A3B-Thinking-2507": ("qwen3-30b-a3b", "bf16", None),
    "Qwen/Qwen3-235B-A22B-Thinking-2507": ("qwen3-235b-a22b", "bf16", None),
    "Qwen/Qwen3-235B-A22B-Thinking-2507-FP8": ("qwen3-235b-a22b-fp8", "fp8", None),
    "openai/gpt-oss-20b": ("gpt-oss-20b", "bf16", "mxfp4"),
    "openai/gpt-oss-120b": ("gpt-oss-120b", "bf16", "mxfp4"),
}
"""The Thinking-2507 checkpoints have their base models' architecture (config.json); FP8 is
the hub's block-scaled checkpoint, gpt-oss its MXFP4 experts beside BF16 attention."""
METRICS = (
    ("itl_s", "median_itl_ms", 1e-3, "s", "p50", "itl"),
    ("output_tokens_per_s", "output_throughput_tokens_per_sec", 1.0, "tokens/s", "mean", "tok"),
)
NOTES = (
    "ML.ENERGY Benchmark v3.0 (leaderboard 'Problem Solving' task, GPQA): {hub} on {n} x "
    "NVIDIA H100 80GB HBM3 (SXM), vLLM 0.11.1 (the benchmark's default image "
    "vllm/vllm-openai:v0.11.1), launch flags of configs/vllm/gpqa/{hub}/H100/"
    "monolithic.config.yaml: {flags}; max_num_seqs {seqs}, tensor parallel {tp}{ep}. Client: "
    "the 198 GPQA-Diamond questions{repeats} sent at once (max_output_tokens 32768, reasoning "
    "on, outputs to EOS, repetition_penalty 1.1, streamed with continuous usage stats), at "
    "most max_num_seqs running. The leaderboard's fields, as its "
    "toolkit computes them (github.com/ml-energy/data mlenergy_data/records/runs.py): "
    "median_itl_ms the median of every client-side gap of every successful request (the "
    "whole run; a chunk's tokens share its gap), output_throughput_tokens_per_sec the steady "
    "state's tokens over its duration (from max_num_seqs first tokens to num_requests - "
    "max_num_seqs - 1 finished), avg_batch_size the steady state's mean running requests: "
    "{batch:.1f} of {seqs}; mean output {gen:.0f} tokens. Field {field}{unit_note}."
)
XPUSIM_SETUP = (
    "engine profile vllm-0.11 (vLLM 0.11, V1 engine); a closed loop of max_num_seqs clients over "
    "the run's requests with none left out, so the window runs from the start to the last "
    "admission as the source's steady state ends; max_batch = max_num_seqs, token budget "
    "8192 as the launch sets; output lengths drawn from the model's published histogram "
    "(lengths/{lengths}) scaled to this run's mean; prompts {prompt} tokens (assumed: not "
    "published); KV cache BF16 (vLLM's kv-cache-dtype auto); the launch's async scheduling "
    "(host work one step ahead: host_overlap) and its {servers} API server processes "
    "(api_servers); the client's repetition penalty (penalties: vLLM's sampler penalty ops "
    "on the device; their host side, the padded output-token tensor rebuilt each step, is "
    "not modelled)"
)
GAP = (
    "the source's steady state begins when max_num_seqs requests have their first token "
    "(the first prompts' prefill left out), xpusim's window at the first arrival; where "
    "198 requests are under two waves of max_num_seqs (64 and up) most tokens are those of "
    "one wave that started together, in both; prompt lengths are assumed ({prompt} tokens)"
)


def runs(leaderboard: str, hub: str) -> dict[str, Any]:
    """The leaderboard's data file of one model's GPQA runs."""
    return json.loads(show(leaderboard, LB_COMMIT, data_file(hub)))


def data_file(hub: str) -> str:
    """The leaderboard's path of a model's GPQA data."""
    return f"public/data/models/{hub.replace('/', '__')}__gpqa.json"


def launch(benchmark: str, hub: str) -> tuple[str, dict[int, int]]:
    """The launch flags (as `key: value; ...`) and the requests' repeats by max_num_seqs, as
    the H100 config of the model states them (its sweeps; a run they do not list repeats
    once, the task's default). The driver launches every GPU as one tensor-parallel group
    (mlenergy/llm/benchmark.py: --tensor-parallel-size num_gpus unless the config sets a
    data-parallel size), experts over the same GPUs where the config enables expert
    parallelism (the leaderboard's `parallelization` lists those runs as TP 1, EP n)."""
    base = f"configs/vllm/gpqa/{hub}/H100"
    config = show(benchmark, BM_COMMIT, f"{base}/monolithic.config.yaml")
    flags = [line.split("#")[0].strip() for line in config.splitlines()]
    assert "data-parallel-size" not in config, f"{hub}: launched with --tensor-parallel-size"
    sweeps = show(benchmark, BM_COMMIT, f"{base}/sweeps.yaml")
    repeats: dict[int, int] = {}
    sweep = r"num_request_repeats: \[(\d+)\]\s+max_num_seqs: \[([\d, ]+)\]"
    for times, seqs in re.findall(sweep, sweeps):
        repeats |= {int(s): int(times) for s in seqs.split(",")}
    return "; ".join(f for f in flags if f), repeats


def histogram_rows(dist: dict[str, list[float]]) -> list[int]:
    """One output length a request: each bin's middle, as many times as its count."""
    bins, counts = dist["bins"], dist["counts"]
    middles = [round((lo + hi) / 2) for lo, hi in pairwise(bins)]
    return [m for m, n in zip(middles, counts, strict=True) for _ in range(n)]


def lengths_file(model: str, outputs: list[int]) -> str:
    """Writes a model's request lengths (the assumed prompt, its published output shape)."""
    name = f"mlenergy-gpqa-{model}.csv"
    rows = "".join(f"{PROMPT_TOKENS},{n}\n" for n in outputs)
    (LENGTHS / name).write_text(f"input_tokens,output_tokens\n{rows}")
    return name


def penalised(benchmark: str) -> bool:
    """Whether the client's chat requests carry a repetition penalty (its payload's
    "repetition_penalty": 1.1 in mlenergy/llm/benchmark.py as of the run)."""
    client = show(benchmark, BM_COMMIT, "mlenergy/llm/benchmark.py")
    return '"repetition_penalty": 1.1' in client


def points(leaderboard: str, benchmark: str, write_lengths: bool = True) -> list[dict[str, Any]]:
    """Two points an H100 run of every model MODELS maps."""
    out: list[dict[str, Any]] = []
    penalties = penalised(benchmark)
    for hub, (model, precision, weight_precision) in MODELS.items():
        data = runs(leaderboard, hub)
        flags, repeats = launch(benchmark, hub)
        h100 = [r for r in data["configurations"] if r["gpu_model"] == "H100"]
        name = f"mlenergy-gpqa-{model}.csv"
        if write_lengths:
            lengths_file(model, histogram_rows(data["output_length_distribution"]))
        seen: dict[tuple[int, int], int] = {}
        for r in sorted(h100, key=lambda r: (r["num_gpus"], r["max_num_seqs"])):
            n, seqs = r["num_gpus"], r["max_num_seqs"]
            seen[n, seqs] = seen.get((n, seqs), 0) + 1  # gpt-oss-20b ran max_num_seqs 96 twice
            tp, ep = n, (n if "enable-expert-parallel: true" in flags else 1)
            servers = re.search(r"api-server-count: (\d+)", flags)
            times = repeats.get(seqs, 1)
            gen = round(r["avg_output_len"])
            again = "" if seen[n, seqs] == 1 else f"-run{seen[n, seqs]}"
            base = f"{PREFIX}{model}-{n}xh100-s{seqs}{again}"
            setup = {
                "workload": "llm-serving", "chip": "h100-sxm", "chips": n, "tp": tp,
                **({"ep": ep} if ep > 1 else {}),
                "model": model, "precision": precision, "weight_precision": weight_precision,
                "kv_precision": "bf16", "engine": "vllm",
                "engine_version": "vLLM 0.11.1 (vllm/vllm-openai:v0.11.1)",
                "engine_profile": "vllm-0.11", "max_batch": seqs, "token_budget": 8192,
                "load": {"kind": "concurrency", "value": seqs, "requests": 198 * times,
                         "warmup": 0},
                "prompt": PROMPT_TOKENS, "gen": gen, "lengths": f"lengths/{name}",
                "scale_gen": True,
                **({"host_overlap": True} if "async-scheduling: true" in flags else {}),
                "api_servers": int(servers.group(1)) if servers else 1,  # vLLM's default 1
                **({"penalties": True} if penalties else {}),
            }  # fmt: skip
            facts = dict(
                hub=hub, n=n, flags=flags, seqs=seqs, tp=tp, batch=r["avg_batch_size"], gen=gen,
                ep=f", expert parallel {ep} (--enable-expert-parallel)" if ep > 1 else "",
                repeats=f" repeated {times} times ({198 * times} requests)" if times > 1 else "",
            )  # fmt: skip
            for metric, field, scale, unit, stat, suffix in METRICS:
                out.append({
                    "id": f"{base}-{suffix}", **setup, "metric": metric, "stat": stat,
                    "value": round(r[field] * scale, 6 if unit == "s" else 2), "unit": unit,
                    "source": f"{LB} {data_file(hub)}, "
                              f"configuration H100 num_gpus {n} max_num_seqs {seqs}, field "
                              f"{field}; launch and client: {BM} configs/vllm/gpqa",
                    "notes": NOTES.format(**facts, field=field, unit_note=(
                        " (ms, converted to s)" if unit == "s" else " (the whole server)")),
                    "xpusim_setup": XPUSIM_SETUP.format(lengths=name, prompt=PROMPT_TOKENS,
                                                        servers=setup["api_servers"]),
                    "known_gap": GAP.format(prompt=PROMPT_TOKENS),
                })  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("leaderboard", help="git directory of ml-energy/leaderboard")
    parser.add_argument("benchmark", help="git directory of ml-energy/benchmark")
    args = parser.parse_args()
    pts = points(args.leaderboard, args.benchmark)
    write(pts, PREFIX)
    print(f"{len(pts) // len(METRICS)} runs, {len(pts)} points written to {PUBLISHED}")


if __name__ == "__main__":
    main()
