"""Regenerates the `nimdli-` points of src/xpusim/validation/published.json: NVIDIA's
pre-collected NIM benchmarks of Llama-3 8B and 70B Instruct on a DGX H100 (TensorRT-LLM, FP16
and FP8, TP 1-8), each a closed loop of C GenAI-Perf clients at fixed input and output lengths.

    python benchmarks/nim_dli_points.py /path/to/ai-performance-engineering.git

Needs git only; the directory may be a bare mirror of github.com/cfregly/ai-performance-engineering
or a fork holding COMMIT (github.com/wbing520/ai-performance-engineering does). The file is
the dataset of NVIDIA's Deep Learning Institute course notebooks that the repository copies
(inference_gpu_cluster_sizing/02-Throughput-vs-Latency-Tradeoff.ipynb: 'a set of pre-collected
benchmarks is provided in dataset/nim.csv'; 'each row corresponding to a benchmark run against
an older version of NVIDIA NIM'; 'We will be testing only NIM_TRT-LLM'; 'run on a DGX A100 ...
and on a DGX H100'; the synthetic inputs of GenAI-Perf at the row's mean and standard deviation
(0 here), outputs forced to the row's length, EOS ignored). Kept: the H100 rows. Each run gives
three points: the mean TTFT, GenAI-Perf's mean inter-token latency (its ITL excludes the first
token, as TPOT does) and the output-token throughput of the whole TP group. Where the file
holds two runs of one setting (every concurrency-5 setting was run twice), the points are the
mean of the two, and the notes say so. The points replace every `nimdli-` point, in place, or
go just before the `inferencex-` block (which inferencex_points.py rewrites as the array's end).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import subprocess
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from statistics import fmean
from typing import Any

PUBLISHED = Path(__file__).resolve().parent.parent / "src/xpusim/validation/published.json"
COMMIT = "0e25b2e236211ad01ed2221bd2c1cfa5b3f47b55"  # 2025-04-27, 'Initial commit'
CSV = "code/ch10_inference/inference_gpu_cluster_sizing/dataset/nim.csv"
SOURCE = f"github.com/cfregly/ai-performance-engineering (commit {COMMIT[:12]}) {CSV}"
PREFIX = "nimdli-"
MODEL = {"meta-llama3-8b-instruct": "llama-3-8b", "meta-llama3-70b-instruct": "llama-3-70b"}
PRECISION = {"fp16": "fp16", "fp8": "fp8"}
CONCURRENCY = (1, 5, 25, 100, 250)
"""The concurrencies kept of the file's ten (1, 2, 5, 10, 25, 50, 100, 150, 200, 250): one
each side of every knee the sweep shows, so the whole source scores in about a minute."""
WARMUP = 0
"""Requests GenAI-Perf leaves out of its statistics: none. The course's own export of one run
(artifacts/meta_llama3-8b-instruct-openai-chat-concurrency5/200_50.json beside the notebooks;
version field 2.48.0, --measurement-interval 10000, stability 999) holds 235 requests from
the first, sent 0.4 ms after the first window opens, to the last, done before the third
window closes; the mean TTFT of all 235 is its profile_export_genai_perf.json's 78.16 ms, that
of all but the five clients' cold first requests 78.38 ms (at 1 and 2 clients, likewise: the
mean of all is the file's). So a run's first wave, its prompts queued behind one another from a
cold start, counts as every later request does. How many requests each row held is not in the
file: serve's own number stands (SERVING_REQUESTS)."""
METRICS = (
    ("ttft_s", "time_to_first_token-avg", 1e-9, "s", "ttft"),
    ("tpot_s", "inter_token_latency-avg", 1e-9, "s", "itl"),
    ("output_tokens_per_s", "output_token_throughput-avg", 1.0, "tokens/s", "tok"),
)
NOTES = (
    "NVIDIA Deep Learning Institute course data ('Sizing LLM Inference Systems' notebooks, "
    "dataset/nim.csv, copied into the book repository ai-performance-engineering): GenAI-Perf "
    "against NIM for LLMs ('an older version of NVIDIA NIM', 2024; execution type NIM_TRT-LLM, "
    "backend tensorrtllm; the NIM and TensorRT-LLM versions are not stated) on a DGX H100 "
    "(H100_80GB_HBM3, NVLink), {model} at {prec}, tensor parallel {tp} on {tp} GPU(s), one "
    "model instance. Client: GenAI-Perf synthetic prompts of {isl} tokens (stddev 0; measured "
    "mean {isl_meas:.1f}), outputs forced to {osl} tokens (max_tokens {osl}, EOS ignored; "
    "measured mean {osl_meas:.1f}), --concurrency {conc}, streaming. Fields (ns converted to s): "
    "time_to_first_token-avg, inter_token_latency-avg (time between a request's responses over "
    "its tokens after the first), output_token_throughput-avg (output tokens over the "
    "benchmark's duration, the whole TP group).{twice}"
)
XPUSIM_SETUP = (
    "engine profile trtllm-cpp (TensorRT-LLM 0.10.1's C++ executor as NIM for LLMs 1.0 ran "
    "it: in-flight batching within max_num_tokens 8192, decode attention without "
    "multi-block mode, one thread block per sequence and KV head at 21 GB/s; 580 us of host "
    "time an iteration, the 1.0 figure, assumed); the engine build settings (max_batch_size, "
    "max_num_tokens, KV-cache fraction, multi_block_mode) the file does not state; precision "
    "{prec} for weights, activations and KV cache ({kv})"
)

LOCKSTEP_GAP = (
    "under load the TTFT is set by how the clients' prompts bunch, which neither side states: "
    "GenAI-Perf's clients start together at fixed lengths. With 2000-7000-token prompts the "
    "measured TTFT is that of prompts waiting for one another, wave after wave, which xpusim's "
    "trtllm-cpp profile does not keep: it admits whole contexts within max_num_tokens 8192, so "
    "after the first wave the clients drift apart and a prompt waits for at most one "
    "iteration. What-if (serve --token-budget 65536; not set here: NIM's 2024 engine builds "
    "and their max_num_tokens are not published), Llama-3-8B FP16 TP1: 7000/1000 at 5 clients "
    "0.871 s (measured 0.823, xpusim 0.201), 2000/2000 at 25 1.06 s (measured 0.892, xpusim "
    "0.229), at 100 1.58 s (measured 1.904, xpusim 0.453). Every request from the first counts, "
    "as GenAI-Perf counts them (WARMUP), but how many each measurement held is not stated: "
    "GenAI-Perf's windows are of time (three of 12 s in the course's own export), so a run of "
    "30-second requests holds little beyond its cold first wave, which alone gives 0.53 s and "
    "0.63 s for the first two, where xpusim's 8 requests a client dilute it. With 200-token "
    "prompts at 25-100 clients it goes the other way (1.3-1.85x): a wave's prompts fit one "
    "8192-token step, so xpusim's deterministic clients stay in step for good and each waits "
    "for the whole wave's prefill (25 x 200 tokens of Llama-3-8B FP16: 109 ms), where the "
    "measured 61.5 ms is below the 81 ms such a step needs at the H100's dense peak. Timing "
    "jitter is not the reason at 5 clients: the course's export (NIM 1.0.3, its GPU not stated) "
    "keeps each of its 47 waves' five requests within 0.6 ms of one another"
)
DECODE_GAP = (
    "decode, with the decode attention of xpusim's trtllm-cpp profile (no multi-block mode: "
    "one thread block per sequence and KV head at 21 GB/s, a single-SM read microbenchmark, "
    "not fitted): at one client TPOT is 0.67-0.92x with 200-token prompts, a gap that grows "
    "with TP and layers (12-50 us a layer: the 2024 build's all-reduce plugin and kernel "
    "launches without CUDA graphs, neither measured for it), and with 7000-token prompts "
    "0.84-0.99x in FP8 but 1.27-1.40x in FP16: the measured growth per token of context is "
    "about the same in FP16 and FP8 (Llama-3-8B TP1: 0.25 and 0.33 us a token), where a block "
    "bound by its bytes streams an FP8 cache in half the time; the FP8 runs kept an FP8 cache "
    "(at 250 clients of 2000/2000 Llama-3-8B FP8 TP1 decodes 217 sequences at once, measured "
    "throughput x TPOT, whose mean 3,000 tokens would hold 85 GB in FP16, past the H100's 80; "
    "FP16 decodes 101), so a block is bound by its work a token, which no published timing of "
    "that kernel states; at 100-250 clients FP8 Llama-3-8B decodes at 0.39-0.70x (TPOT): "
    "neither an FP16 KV cache nor an FP8 one reproduces its 63 ms at 250 clients of 2000/2000 "
    "(xpusim 26 ms); with 200-token prompts at 250 clients Llama-3-8B's TPOT is 84-109 us "
    "times the sequences decoding whether TP1 or TP2, FP16 or FP8: a stage outside the GPU "
    "(NIM 1.0 streams each token through vLLM 0.4.1's OpenAI server in Python) whose cost is "
    "not published (serve --frontend-token-us is its what-if)"
)
QUEUE_GAP = (
    "at 100-250 clients of 2000-7000-token contexts most of the TTFT is the wait for a free "
    "sequence slot, about (clients "
    "- sequences running) / requests per second: the sequences running that the measured "
    "throughput x TPOT implies agree with xpusim's within about 10% in most runs at 250 "
    "(Llama-3-8B FP8 TP1 2000/2000: 217 against 242), yet that small difference, and xpusim's "
    "faster decode draining the queue, puts the measured 10.9 s against 0.726 s; Llama-3-70B "
    "FP16 TP4 with 2000-7000-token contexts runs 0.6-0.7 of xpusim's sequences (88 against "
    "131 at 2000/2000), a smaller KV cache than xpusim's (the build's KV fraction and "
    "max_batch_size are not stated); with 200-token prompts nothing binds (247 of 250 "
    "clients decoding at 200/2000, Llama-3-8B FP8 TP1), yet the TTFT at 250 clients is "
    "0.4-2.7 s, about the same at 200 and 2000 output tokens (8B FP8 TP1 0.50 and 0.39 s, "
    "70B FP8 TP8 1.27 and 1.19 s) where the request rate differs tenfold: a wait that grows "
    "with the open streams, which no engine or front-end figure found explains"
)
IDLE_GAP = (
    "at one client the measured TTFT exceeds xpusim's by 2-23 ms (median 7 ms): time per "
    "request outside the engine's step (NIM's API server, tokenization, the first streamed "
    "response), not measured for this NIM"
)


def gap(metric: str, conc: int) -> str:
    """Why a point's prediction misses, by what sets it: decode for TPOT and throughput, the
    time outside the engine at one client, how prompts bunch under load, and at 100 clients
    and more also the wait for a free sequence slot."""
    if metric != "ttft_s":
        return DECODE_GAP
    if conc == 1:
        return IDLE_GAP
    return LOCKSTEP_GAP if conc < 100 else f"{LOCKSTEP_GAP}; {QUEUE_GAP}"


def rows(mirror: str) -> list[dict[str, str]]:
    """The file's H100 rows at COMMIT."""
    text = subprocess.run(
        ["git", "-C", mirror, "show", f"{COMMIT}:{CSV}"], capture_output=True, text=True,
        check=True,
    ).stdout  # fmt: skip
    return [r for r in csv.DictReader(io.StringIO(text)) if r["task_inputs-GPU"].startswith("H100")]


def points(all_rows: list[dict[str, str]]) -> list[dict[str, Any]]:
    """Three points a run setting, the mean over the file's runs of it."""
    runs: dict[tuple[str, str, int, int, int, int], list[dict[str, str]]] = defaultdict(list)
    for r in all_rows:
        key = (
            r["task_inputs-model"], r["task_inputs-precision"], int(r["task_inputs-n_gpus"]),
            int(r["input_config-synthetic_input_tokens_mean"]),
            int(r["input_config-output_tokens_mean"]), int(r["input_config-concurrency"]),
        )  # fmt: skip
        runs[key].append(r)
    out: list[dict[str, Any]] = []
    for (name, prec, tp, isl, osl, conc), group in sorted(runs.items()):
        if conc not in CONCURRENCY:
            continue
        model = MODEL[name]
        base = f"{PREFIX}{model}-{tp}xh100-{prec}-{isl}-{osl}-c{conc}"
        facts = dict(
            model=name, prec=prec, tp=tp, isl=isl, osl=osl, conc=conc,
            isl_meas=fmean(float(r["num_input_token-avg"]) for r in group),
            osl_meas=fmean(float(r["num_output_token-avg"]) for r in group),
        )  # fmt: skip
        setup = {
            "workload": "llm-serving", "chip": "h100-sxm", "chips": tp, "tp": tp,
            "model": model, "precision": PRECISION[prec], "weight_precision": None,
            "engine": "trtllm",
            "engine_version": "NVIDIA NIM for LLMs, 2024 ('an older version'; not stated)",
            "engine_profile": "trtllm-cpp",
            "load": {"kind": "concurrency", "value": conc, "warmup": WARMUP},
            "prompt": isl, "gen": osl, "stat": "mean",
        }  # fmt: skip
        kv = (
            "FP8 KV cache assumed: the file names one precision a run"
            if prec == "fp8"
            else "FP16 as the file names it"
        )
        for metric, field, scale, unit, suffix in METRICS:
            values = [float(r[field]) * scale for r in group]
            twice = (
                f" The file holds {len(values)} runs of this setting; the value is their mean "
                f"({', '.join(f'{v:.6g}' for v in values)} {unit})." if len(values) > 1 else ""
            )  # fmt: skip
            out.append({
                "id": f"{base}-{suffix}",
                **setup,
                "metric": metric,
                "value": round(fmean(values), 6 if unit == "s" else 2),
                "unit": unit,
                "source": f"{SOURCE}, row {name} H100_80GB_HBM3 n_gpus={tp} {prec} input {isl} "
                          f"output {osl} concurrency {conc}, field {field}",
                "notes": NOTES.format(**facts, twice=twice),
                "xpusim_setup": XPUSIM_SETUP.format(prec=prec, kv=kv),
                "known_gap": gap(metric, conc),
            })  # fmt: skip
    return out


def show(mirror: str, commit: str, path: str) -> str:
    """A file of a git mirror at a commit (the point writers of this folder read their pages
    with it)."""
    return subprocess.run(["git", "-C", mirror, "show", f"{commit}:{path}"],
                          capture_output=True, text=True, check=True).stdout  # fmt: skip


def write(pts: list[dict[str, Any]], prefix: str = PREFIX) -> None:
    """Replace published.json's points of `prefix` by pts (or put them just before the
    inferencex- block), in the file's layout, leaving every other line as it was (also
    mlenergy_gpqa_points.py's writer and the other point writers'). Refuses a set with an id
    twice."""
    assert len({p["id"] for p in pts}) == len(pts), "duplicate ids"
    text = PUBLISHED.read_text()
    data = json.loads(text)
    kept = [p for p in data["points"] if not p["id"].startswith(prefix)]
    block = ",\n".join(
        "\n".join("  " + line for line in json.dumps(p, indent=1, ensure_ascii=False).splitlines())
        for p in pts
    )
    ids = [p["id"] for p in data["points"]]
    old = [i for i, pid in enumerate(ids) if pid.startswith(prefix)]
    entries = text.split("\n  {\n")  # [head, point 0, point 1, ...]; one entry a point
    assert len(entries) - 1 >= len(ids)
    nextx = [i for i, pid in enumerate(ids) if pid.startswith("inferencex-")]
    assert nextx, "the inferencex- block ends the points array; these go just before it"
    before, after = (old[0], old[-1] + 1) if old else (nextx[0], nextx[0])
    head = "\n  {\n".join(entries[: before + 1]).rstrip().removesuffix(",")
    tail = "\n  {\n".join(["", *entries[after + 1 :]])
    PUBLISHED.write_text(f"{head},\n{block},{tail}")
    kept_before = [p for p in kept if ids.index(p["id"]) < before]
    want = [p["id"] for p in kept_before + pts + kept[len(kept_before) :]]
    assert [p["id"] for p in json.loads(PUBLISHED.read_text())["points"]] == want


def write_from_mirror(doc: str, mirror_help: str, build: Callable[[str], list[dict[str, Any]]],
                      prefix: str, per_run: int) -> None:
    """A point writer's command: the git mirror named on the command line (`mirror_help`
    says of what), its points as `build` reads them, written in place of `prefix`'s, with
    a line saying how many (`per_run` points a run). The writers of this folder share it."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("mirror", help=mirror_help)
    pts = build(parser.parse_args().mirror)
    write(pts, prefix)
    print(f"{len(pts) // per_run} runs, {len(pts)} points written to {PUBLISHED}")


def main() -> None:
    write_from_mirror(__doc__, "git directory of ai-performance-engineering (or a fork)",
                      lambda mirror: points(rows(mirror)), PREFIX, len(METRICS))


if __name__ == "__main__":
    main()
