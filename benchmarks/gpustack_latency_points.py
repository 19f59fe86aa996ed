"""Regenerates the `gpustack-lat-` points of src/xpusim/validation/published.json: GPUStack's
performance-lab page 'Optimizing Qwen3-8B Latency on NVIDIA H100 GPUs', each benchmark block
a closed loop of 1-8 `vllm bench serve` clients over 100 ShareGPT prompts against vLLM
v0.11.0, SGLang v0.5.3.post3 or TensorRT-LLM v1.2.0rc1 on one H100 SXM.

    python benchmarks/gpustack_latency_points.py /path/to/gpustack.git

Needs git only; the directory may be a bare mirror of github.com/gpustack/gpustack. The page
(PAGE at COMMIT) shows each serving command in a '??? info "...serving script"' block and
the benchmark's printed result in the next '??? info "...benchmark result(s)"' block (some
hold several, each after a '# label' line naming the one flag that differs, as
'# flashinfer' for --attention-backend); its benchmark command is `vllm bench serve --backend
openai-chat --dataset-name sharegpt --num-prompts 100 --max-concurrency C`. Kept: every result
of a serving command without speculative decoding (the EAGLE3 runs' acceptance is not
published). Each gives three points: the mean TTFT, the mean TPOT and the output-token
throughput. The prompts are ShareGPT's, whose lengths xpusim takes at the run's means (the
printed total input and generated tokens over the successful requests: 232.6 and 220.6 in
every run). The points replace every `gpustack-lat-` point in place, or go just before the
`inferencex-` block (nim_dli_points.write).
"""

from __future__ import annotations

import re
import subprocess
from typing import Any

from nim_dli_points import write_from_mirror

COMMIT = "6ceec5b8486b263beb6be4533050054e047d3254"  # 2026-03-20, the page's latest change
PAGE = "docs/performance-lab/qwen3-8b/h100-latency.md"
SOURCE = f"github.com/gpustack/gpustack (commit {COMMIT[:12]}) {PAGE}"
PREFIX = "gpustack-lat-"
ENGINES = {  # serving command's program: (engine, version, xpusim profile)
    "vllm serve": ("vllm", "vLLM v0.11.0 (V1 engine)", "vllm-0.11"),
    "sglang.launch_server": ("sglang", "SGLang v0.5.3.post3", "sglang-0.5.6"),
    "trtllm-serve": ("trtllm", "TensorRT-LLM v1.2.0rc1 (trtllm-serve, PyTorch backend)",
                     "trtllm"),
}  # fmt: skip
CHECKPOINTS = {"Qwen/Qwen3-8B": ("bf16", None), "Qwen/Qwen3-8B-FP8": ("fp8", "fp8-block")}
"""The hub's Qwen3-8B-FP8 is block-scaled FP8 (128 x 128 weight blocks), as xpusim's
fp8-block format; its KV cache stays BF16 (no engine's kv-cache dtype is set)."""
METRICS = (
    ("ttft_s", "Mean TTFT (ms)", 1e-3, "s", "ttft"),
    ("tpot_s", "Mean TPOT (ms)", 1e-3, "s", "tpot"),
    ("output_tokens_per_s", "Output token throughput (tok/s)", 1.0, "tokens/s", "tok"),
)
NOTES = (
    "GPUStack performance lab, 'Optimizing Qwen3-8B Latency on NVIDIA H100 GPUs' ('A single "
    "NVIDIA H100 SXM GPU.'), section '{section}': serving command '{serve}'{label} ({version}). "
    "Client: 'vllm bench serve --backend openai-chat --endpoint /v1/chat/completions "
    "--dataset-name sharegpt --num-prompts 100 --max-concurrency {conc}' (ShareGPT V3 "
    "prompts); {ok} successful requests, {isl} input and {osl} generated tokens in all (means "
    "{isl_mean:.1f} and {osl_mean:.1f}; the same totals in every run of the page). Field "
    "'{field}'{unit}."
)
XPUSIM_SETUP = (
    "engine profile {profile} ({version}); a closed loop of {conc} clients over the run's 100 "
    "requests; every prompt and answer at the run's mean lengths ({isl_mean} and {osl_mean} "
    "tokens: ShareGPT's spread is not modelled); weights {weights}, KV cache BF16{extra}"
)
GAP = (
    "ShareGPT's prompts and answers vary: at the mean lengths a closed loop's clients run in "
    "lock-step, each round's prompts in one step (at 4 clients 22 ms of engine time before "
    "the first token, ~10 ms where the lengths spread, serve --spread 0.9), and the mean TTFT "
    "of prompts of mixed length is not the TTFT of the mean prompt; the request's path "
    "outside the engine's steps is engines.toml frontend_s (vLLM 11.6 ms, SGLang 6.6, "
    "TensorRT-LLM none measured), each measured on another host and build: docs/validation.md "
    "(sixteenth session, s5) gives this page's TTFT part by part"
)
FIRST_WAVE = "; this run's median TTFT is {median:g} ms and its p99 {p99:g} ms"
HELD_UP = (
    ": the mean exceeds the median by {excess:.1f} ms, {total:.2f} s over its {ok} requests, "
    "what requests held up by work done once (as kernels compiled on first use) add to a "
    "mean and not to a median"
)
"""The TTFT point's own spread (the page prints median and p99 beside the mean): where a few
requests wait seconds the mean is theirs, which a steady-state simulation does not give."""


UNMODELLED = {
    "--cuda-graph-max-bs": "SGLang's CUDA graphs up to 8 sequences (every step here has 8 or "
                           "fewer: no change)",
    "--attention-backend": "the attention backend ({value}) is not modelled apart",
}  # fmt: skip


def page(mirror: str) -> str:
    """The page at COMMIT."""
    return subprocess.run(["git", "-C", mirror, "show", f"{COMMIT}:{PAGE}"],
                          capture_output=True, text=True, check=True).stdout  # fmt: skip


def blocks(text: str) -> list[tuple[str, str, str]]:
    """(kind, section, body) of every '??? info' code block: kind 'serve' or 'result'."""
    out: list[tuple[str, str, str]] = []
    section = ""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            section = line.lstrip("# ").strip()
        elif line.startswith("??? info"):
            kind = "serve" if "serving script" in line.lower() else "result"
            j = i + 2  # past the fence
            body: list[str] = []
            while not lines[j].strip().startswith("```"):
                body.append(lines[j].strip())
                j += 1
            out.append((kind, section, "\n".join(body)))
            i = j
        i += 1
    return out


def results(body: str) -> list[tuple[str, dict[str, float]]]:
    """(label, fields) of each printed result: the label is a '# x' line before it, or ''."""
    out: list[tuple[str, dict[str, float]]] = []
    label = ""
    fields: dict[str, float] | None = None
    for line in body.splitlines():
        if line.startswith("# "):
            label = line[2:].strip()
        elif "Serving Benchmark Result" in line:
            fields = {}
            out.append((label, fields))
        elif fields is not None and ":" in line:
            key, _, value = line.rpartition(":")
            if re.fullmatch(r"-?[\d.]+", value.strip()):
                fields[key.strip()] = float(value)
    return out


def served(command: str, label: str) -> tuple[tuple[str, str, str], str, str, list[str]]:
    """The engine, the checkpoint and the settings xpusim does not model, of a command (with
    a result's label as the value of the flag it names)."""
    program = next(p for p in ENGINES if p in command)
    model = re.search(r"(Qwen/[\w.-]+)", command)
    assert model, command
    notes = []
    for flag, note in UNMODELLED.items():
        if flag in command:
            value = label or command.split(flag)[1].split()[0]
            notes.append(note.format(value=value))
    return ENGINES[program], model.group(1), " ".join(command.split()), notes


def spread(f: dict[str, float], ok: int) -> str:
    """What a TTFT point's run printed beside its mean: the median and p99, and where the mean
    is the higher, the excess over the run's requests."""
    mean, median = f["Mean TTFT (ms)"], f["Median TTFT (ms)"]
    held = HELD_UP.format(excess=mean - median, total=(mean - median) * ok / 1e3, ok=ok) \
        if mean > median else ""
    return FIRST_WAVE.format(median=median, p99=f["P99 TTFT (ms)"]) + held


def points(text: str) -> list[dict[str, Any]]:
    """Three points a result of every serving command without speculative decoding."""
    out: list[dict[str, Any]] = []
    command = ""
    seen: set[tuple[str, str]] = set()
    for kind, section, body in blocks(text):
        if kind == "serve":
            command = body.replace("\\\n", " ")
            continue
        if "--speculative" in command:
            continue
        for label, f in results(body):
            if (command, repr(sorted(f.items()))) in seen:  # a run the page prints twice
                continue  # (vLLM at 4 clients: section 1 and the batch sweep)
            seen.add((command, repr(sorted(f.items()))))
            (engine, version, profile), hub, serve, unmodelled = served(command, label)
            precision, weights = CHECKPOINTS[hub]
            conc, ok = int(f["Maximum request concurrency"]), int(f["Successful requests"])
            isl, osl = int(f["Total input tokens"]), int(f["Total generated tokens"])
            step = f"s{section.split('.')[0]}" if section[:1].isdigit() else "sweep"
            which = "" if label.startswith("BS=") else label  # the sweep labels its clients
            tag = re.sub(r"[^a-z0-9]+", "-", f"{step} {which}".lower()).strip("-")
            base = f"{PREFIX}qwen3-8b-h100-{engine}-{'fp8' if weights else 'bf16'}-c{conc}-{tag}"
            setup = {
                "workload": "llm-serving", "chip": "h100-sxm", "chips": 1, "tp": 1,
                "model": "qwen3-8b", "precision": precision, "weight_precision": weights,
                "kv_precision": "bf16", "engine": engine, "engine_version": version,
                "engine_profile": profile,
                "load": {"kind": "concurrency", "value": conc, "requests": ok},
                "prompt": round(isl / ok), "gen": round(osl / ok), "stat": "mean",
            }  # fmt: skip
            facts = dict(section=section, serve=serve, conc=conc, ok=ok, isl=isl, osl=osl,
                         isl_mean=isl / ok, osl_mean=osl / ok, version=version,
                         label=f", result '# {label}'" if label else "")  # fmt: skip
            extra = "".join(f"; {n}" for n in unmodelled)
            for metric, field, scale, unit, suffix in METRICS:
                out.append({
                    "id": f"{base}-{suffix}", **setup, "metric": metric,
                    "value": round(f[field] * scale, 6 if unit == "s" else 2), "unit": unit,
                    "source": f"{SOURCE}, section '{section}', result at max concurrency "
                              f"{conc}{facts['label']}, field '{field}'",
                    "notes": NOTES.format(**facts, field=field,
                                          unit=" (ms, converted to s)" if unit == "s" else ""),
                    "xpusim_setup": XPUSIM_SETUP.format(
                        profile=profile, version=version, conc=conc, extra=extra,
                        isl_mean=setup["prompt"], osl_mean=setup["gen"],
                        weights=weights or "BF16"),
                    "known_gap": GAP + (spread(f, ok) if metric == "ttft_s" else ""),
                })  # fmt: skip
    return out


def main() -> None:
    write_from_mirror(__doc__, "git directory of gpustack (or a fork holding COMMIT)",
                      lambda mirror: points(page(mirror)), PREFIX, len(METRICS))


if __name__ == "__main__":
    main()
