"""Regenerates the `lmsys060-` points of src/xpusim/validation/published.json: the SGLang team's
'How to reproduce the benchmark results for SGLang v0.3.0 compared to vLLM v0.6.0' (September
2024; sgl-project/sglang benchmark/benchmark_vllm_060/README.md), Llama 3.1 8B Instruct on one
A100 80G and Llama 3.1 70B Instruct on four H100 80G (TP4), both engines in BF16, driven by
`python3 -m sglang.bench_serving --dataset-name sharegpt`.

    python benchmarks/sglang_vllm060_points.py /path/to/benchmark_vllm_060/README.md

The README (at COMMIT, raw.githubusercontent.com/sgl-project/sglang/<COMMIT>/benchmark/
benchmark_vllm_060/README.md) holds two kinds of table: online (RPS 4 with 1200 prompts, RPS 8
with 2400, Poisson arrivals: the median TTFT, TPOT and ITL; the median end-to-end latency is
not kept) and offline (5000 prompts at once: the output-token throughput). Its commands: SGLang
`--disable-radix-cache` (8B: `--enable-torch-compile`; 70B offline: `--mem-frac 0.88`), vLLM
`--disable-log-requests --num-scheduler-steps 10 --max_model_len 4096` ('gpu_memory_utilization
of vLLM is by default 0.9'). bench_serving sends ShareGPT prompts with ignore_eos, so each
answer runs to the dataset's reference length: 194.35 tokens a request on both models (the
offline rows' output over request throughput, 4281.51/22.03 and 3856.01/19.84). The prompts'
lengths are not printed: the points take the ShareGPT prompts of dstack's Llama 3.1 run
(lengths/sharegpt-llama31-prompts.csv, 1000 prompts sampled by vLLM's benchmark_serving
under the Llama 3.1 tokenizer with the same filters as bench_serving's: mean 215.2), every
answer 194 tokens (the reference answers' spread is not published here). The points replace
every `lmsys060-` point in place, or go just before the `inferencex-` block
(nim_dli_points.write).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from nim_dli_points import PUBLISHED, write

COMMIT = "120affb9613cc3f5bcd055ec09c7621d3ced0ebc"
SOURCE = (
    f"github.com/sgl-project/sglang (commit {COMMIT[:12]}) benchmark/benchmark_vllm_060/README.md"
)
PREFIX = "lmsys060-"
LENGTHS = "lengths/sharegpt-llama31-prompts.csv"
PROMPT, GEN = 215, 194  # the lengths file's mean prompt; the reference answers' mean (docstring)
SETUPS = {  # README heading: (zoo model, chip, GPUs, tag)
    "Llama 3.1 8B Instruct 1 x A100 80G": ("llama-3-8b", "a100-sxm-80gb", 1, "l31-8b-a100"),
    "Llama 3.1 70B Instruct 4 x H100 80G": ("llama-3-70b", "h100-sxm", 4, "l31-70b-h100x4"),
}
ENGINES = {  # table's engine: (engine, version, xpusim profile, settings the launch states)
    "SGLang": ("sglang", "SGLang v0.3.0 (pip sglang[all]==0.3.0, FlashInfer for torch 2.4)",
               "sglang-0.4", {"host_overlap": False, "radix_cache": False}),
    "vLLM": ("vllm", "vLLM v0.6.0 (V0 engine, multi-step scheduling)", "vllm-v0",
             {"decode_steps": 10}),
}  # fmt: skip
SGLANG_MEM = {(1, "online"): 0.88, (4, "online"): 0.85, (1, "offline"): 0.88, (4, "offline"): 0.88}
"""SGLang's mem_fraction_static: its default 0.88 at TP1 and 0.85 at TP4 ('SGLang's mem_frac is
0.88 at TP 1 and 0.85 at TP 4'), 0.88 where the 70B offline launch sets --mem-frac 0.88."""
ONLINE = (("ttft_s", "Median TTFT", "ttft"), ("tpot_s", "Median TPOT", "tpot"),
          ("itl_s", "Median ITL", "itl"))  # fmt: skip
SERVE = {
    ("SGLang", 1): "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct "
                   "--enable-torch-compile --disable-radix-cache",
    ("SGLang", 4): "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-70B-Instruct "
                   "--disable-radix-cache --tp 4",
    ("vLLM", 1): "python -m vllm.entrypoints.openai.api_server --model meta-llama/Llama-3.1-8B-"
                 "Instruct --disable-log-requests --num-scheduler-steps 10 --max_model_len 4096",
    ("vLLM", 4): "python -m vllm.entrypoints.openai.api_server --model meta-llama/Llama-3.1-70B-"
                 "Instruct --disable-log-requests --num-scheduler-steps 10 --tensor 4 "
                 "--max_model_len 4096",
}  # fmt: skip
NOTES = (
    "SGLang team, 'How to reproduce the benchmark results for SGLang v0.3.0 compared to vLLM "
    "v0.6.0', section '{section}', table '{heading}', row {rps} RPS / {prompts} prompts / "
    "{engine}; server '{serve}'{mem} ({version}); client 'python3 -m sglang.bench_serving "
    "--backend {backend} --dataset-name sharegpt --num-prompts {prompts}{rate}' (ShareGPT, "
    "ignore_eos: answers at the dataset's reference lengths, 194.35 tokens a request by the "
    "offline rows). Llama 3.1 mapped to the zoo's llama-3 of the same size. Column '{field}'"
    "{unit}.{sxm} BF16 (no dtype or quantization flag)."
)
XPUSIM_SETUP = (
    "engine profile {profile} ({version}){extra}; {load}; prompts drawn from {lengths} (ShareGPT "
    "under the Llama 3.1 tokenizer, mean 215.2: assumed, bench_serving prints no prompt lengths "
    "here), every answer {gen} tokens; BF16 weights and KV cache"
)
GAP = (
    "the prompts are another ShareGPT sample's (the same filters, prompt <= 1024 and prompt + "
    "answer <= 2048 tokens, another seed); every answer at the reference mean (ShareGPT's "
    "reference answers vary){extra}"
)
UNMODELLED = {
    "--enable-torch-compile": "; --enable-torch-compile (torch.compile of the decode graphs, "
                              "small batches) is not modelled",
    "--num-scheduler-steps 10": "; vLLM's multi-step scheduling streams ten tokens a chunk, so "
                                "its median ITL is the gap between chunks, not between tokens",
}  # fmt: skip


def tables(text: str) -> list[tuple[str, str, list[dict[str, str]]]]:
    """(section, heading, rows) of every Markdown table under a '### ' heading."""
    out: list[tuple[str, str, list[dict[str, str]]]] = []
    section = heading = ""
    header: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
        elif line.startswith("### "):
            heading, header = line[4:].strip(), None
            out.append((section, heading, []))
        elif line.startswith("|") and out:
            cells = [c.strip().strip("*") for c in line.strip().strip("|").split("|")]
            if header is None:
                header = cells
            elif not set(line) <= set("|- "):
                out[-1][2].append(dict(zip(header, cells, strict=True)))
    return [t for t in out if t[2]]


def points(text: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for section, heading, rows in tables(text):
        model, chip, gpus, tag = SETUPS[heading]
        online = section.startswith("Online")
        for row in rows:
            name = row["Engine"]
            engine, version, profile, settings = ENGINES[name]
            prompts = int(row.get("Num prompts") or row["Num Prompts"])
            rps = row["RPS"]
            serve = SERVE[(name, gpus)] + (
                " --mem-frac 0.88" if (name, gpus, online) == ("SGLang", 4, False) else ""
            )
            mem = SGLANG_MEM[(gpus, "online" if online else "offline")]
            stated = dict(settings) | ({"kv_utilization": mem} if engine == "sglang" else {})
            load = ({"kind": "rate", "value": float(rps), "requests": prompts} if online
                    else {"kind": "offline", "requests": prompts})  # fmt: skip
            load_text = (f"Poisson arrivals at {rps} requests/s over the run's {prompts} requests"
                         if online else f"all {prompts} requests at once (rate inf), measured "
                         "to the last token")  # fmt: skip
            extra = "".join(note for flag, note in UNMODELLED.items() if flag in serve)
            metrics = ONLINE if online else (("output_tokens_per_s", "Output token throughput",
                                              "tok"),)  # fmt: skip
            for metric, field, suffix in metrics:
                seconds = metric != "output_tokens_per_s"
                value = float(row[field]) * (1e-3 if seconds else 1.0)
                kind = f"rps{rps}" if online else "offline"
                out.append({
                    "id": f"{PREFIX}{tag}-{engine}-{kind}-{suffix}",
                    "workload": "llm-serving", "chip": chip, "chips": gpus, "tp": gpus,
                    "model": model, "precision": "bf16", "weight_precision": None,
                    "kv_precision": "bf16", "engine": engine, "engine_version": version,
                    "engine_profile": profile, **stated, "load": load,
                    "prompt": PROMPT, "gen": GEN, "lengths": LENGTHS,
                    "stat": "p50" if seconds else "mean", "metric": metric,
                    "value": round(value, 6 if seconds else 2),
                    "unit": "s" if seconds else "tokens/s",
                    "source": f"{SOURCE}, section '{section}', table '{heading}', row {rps} "
                              f"RPS {name}, column '{field}'",
                    "notes": NOTES.format(
                        section=section, heading=heading, rps=rps, prompts=prompts, engine=name,
                        serve=serve, version=version, field=field,
                        mem=f" (mem_fraction_static {mem})" if engine == "sglang" else "",
                        backend="sglang" if engine == "sglang" else "vllm",
                        rate=f" --request-rate {rps}" if online else "",
                        unit=" (ms, converted to s)" if seconds else "",
                        sxm=" 'A100 80G' taken as SXM;" if chip.startswith("a100") else ""),
                    "xpusim_setup": XPUSIM_SETUP.format(
                        profile=profile, version=version, load=load_text, lengths=LENGTHS,
                        gen=GEN, extra="".join(f", {k} {v}" for k, v in stated.items())),
                    "known_gap": GAP.format(extra=extra),
                })  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("readme", type=Path, help="benchmark_vllm_060/README.md at COMMIT")
    pts = points(parser.parse_args().readme.read_text())
    write(pts, PREFIX)
    print(f"{len(pts)} points written to {PUBLISHED}")


if __name__ == "__main__":
    main()
