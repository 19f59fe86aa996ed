"""Writes the `vultr-` points of src/xpusim/validation/published.json: Vultr's measured vLLM
runs of MiniMax-M2.5 on 4 B200 (its 'NVIDIA HGX B200 vLLM Optimization Cookbook', updated 11
March 2026), the rows of its table as the page prints them, transcribed by hand: a web page,
not a repository, so ROWS holds them and this script writes the points from ROWS.

    python benchmarks/vultr_points.py

Kept: the MiniMax M2.5 table's rows at 1, 8 and 16 clients (output tokens/s, TTFT, TPOT) and
at 32 (output tokens/s and TTFT; its TPOT was cut off in the copy read). Its rows at 64-1024
clients, and the cookbook's DeepSeek and GLM-5 tables, were not in the copy read; its
Nemotron tables are of models the zoo does not hold.
"""

from __future__ import annotations

from typing import Any

from nim_dli_points import write

PREFIX = "vultr-"
URL = "https://docs.vultr.com/inference-cookbook/cuda/optimization/concurrency-tuning"
SOURCE = (f"{URL} (Vultr, 'NVIDIA HGX B200 vLLM Optimization Cookbook', updated 11 March 2026), "
          "section 'Throughput Results (NVIDIA HGX B200 Verified)', "
          "table 'MiniMax M2.5 (FP8, TP=4, 4 GPUs)', row Concurrent {c}, column '{col}'")
NOTES = ("Vultr's cookbook run of MiniMaxAI/MiniMax-M2.5 (the repo's FP8 checkpoint, 128 x 128 "
         "block-scaled weights) on 4 of a node's 8 B200 at tensor parallel 4 under vLLM 0.12.0 "
         "(the methodology page, docs.vultr.com/inference-cookbook/cuda/benchmarks/methodology: "
         "'MiniMax M2.5 was benchmarked on vLLM 0.12.0 because vLLM 0.16.0 crashes with MiniMax's "
         "MoE routing'), launched as the model guide (.../model-guides/minimax-m25) shows it: "
         "vllm serve MiniMaxAI/MiniMax-M2.5 --tensor-parallel-size 4 --max-model-len 32768 "
         "--gpu-memory-utilization 0.90 --trust-remote-code (no --kv-cache-dtype, "
         "--max-num-seqs or --max-num-batched-tokens: vLLM's defaults). Client: vllm bench serve, "
         "random dataset, --random-input-len 2048 --random-output-len 512 at the row's "
         "concurrency, {n} prompts ('50 (c=1), 400 (c>1)'; the 50/400 split 'was used for "
         "Nemotron Nano and MiniMax M2.5'). Stack on the executive-summary page: CUDA 13.0, "
         "driver 580.105.08, PyTorch 2.9.1. The table's {what}.")
GAP = ("Not stated and assumed: the statistic of the TTFT and TPOT columns (taken as the mean, "
       "vllm bench serve's first line of each; the methodology page defines TPOT as 'average "
       "time between consecutive output tokens'); whether the client ignored EOS (taken as every "
       "answer 512 tokens long: the rest of the command is cut off in the copy read); the "
       "random range ratio (taken as 0, vLLM's default: every prompt 2048 tokens). The TTFT "
       "column is not monotonic (84, 217, 77 and 91 ms at 1, 8, 16 and 32 clients), so a "
       "burst's first wave or run-to-run noise is in it. xpusim's vllm-0.11 profile (the "
       "nearest release profiled) stands for 0.12.0; no block-FP8 MoE table was measured on "
       "a B200 (the per-tensor FP8 one prices the experts: docs/cost.md, 'Routed experts "
       "without a table of their layout'). Seen while checking that change, so not a blind "
       "test of it")
XPUSIM_SETUP = ("engine profile vllm-0.11 (vLLM 0.12.0 ran), its defaults: decode-first chunked "
                "prefill within 8192 tokens, 1024 sequences, CUDA graphs; weights block-FP8 with "
                "FP8 activations as the checkpoint stores them, KV cache BF16 (vLLM's "
                "--kv-cache-dtype auto: the model's dtype); memory fraction 0.90; {n} requests a "
                "run, every one measured")
ROWS = {1: (87, 84, 11.40), 8: (581, 217, 13.37), 16: (1057, 77, 15.01), 32: (1636, 91, None)}
"""Clients: (Output tok/s, TTFT (ms), TPOT (ms)) as the table prints them; None: not read."""


def points() -> list[dict[str, Any]]:
    out = []
    for c, (tok, ttft, tpot) in ROWS.items():
        n = 50 if c == 1 else 400
        for metric, value, unit, col, short, what in (
                ("ttft_s", ttft / 1e3, "s", "TTFT (ms)", "ttft", "TTFT in ms, converted to s"),
                ("tpot_s", tpot and tpot / 1e3, "s", "TPOT (ms)", "tpot",
                 "TPOT in ms, converted to s"),
                ("output_tokens_per_s", tok, "tokens/s", "Output tok/s", "tok",
                 "output tokens/s of the whole run, all 4 GPUs")):  # fmt: skip
            if value is None:
                continue
            p: dict[str, Any] = {
                "id": f"vultr-minimax-m25-b200x4-vllm-2048-512-c{c}-{short}",
                "workload": "llm-serving", "chip": "b200", "chips": 4, "tp": 4,
                "model": "minimax-m2.5", "precision": "fp8", "weight_precision": "fp8-block",
                "kv_precision": "bf16", "engine": "vllm", "engine_version": "vLLM 0.12.0",
                "engine_profile": "vllm-0.11", "kv_utilization": 0.9,
                "load": {"kind": "concurrency", "value": c, "requests": n, "warmup": 0},
                "prompt": 2048, "gen": 512, "metric": metric,
            }  # fmt: skip
            if metric != "output_tokens_per_s":
                p["stat"] = "mean"
            p |= {"value": value, "unit": unit, "source": SOURCE.format(c=c, col=col),
                  "notes": NOTES.format(n=n, what=what), "known_gap": GAP,
                  "xpusim_setup": XPUSIM_SETUP.format(n=n)}  # fmt: skip
            out.append(p)
    return out


if __name__ == "__main__":
    found = points()
    write(found, PREFIX)
    print(f"wrote {len(found)} points")
