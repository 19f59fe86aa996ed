"""Regenerates the InferenceX points of src/xpusim/validation/published.json: SemiAnalysis's
InferenceX (formerly InferenceMAX) single-node DeepSeek-R1-0528 runs, each a closed loop of C
clients on one node under SGLang, TensorRT-LLM or ATOM, with the launch flags of its recipe.

    python benchmarks/inferencex_points.py /path/to/InferenceX-app.git /path/to/InferenceX.git

Needs git only; both may be bare mirrors (a fork's is enough if it holds the pinned commits).
The rows are the dashboard API's (inferencex.semianalysis.com /api/v1/benchmarks) as the app's
capture script saved them (packages/app/scripts/capture-cypress-fixtures.ts: the latest run of
each configuration, up to 5 concurrencies sampled along each sweep) in
packages/app/cypress/fixtures/api/benchmarks.json at APP_COMMIT. Kept: DeepSeek-R1-0528, one
node, no disaggregation, no speculative decoding (the rows state MTP but not its acceptance),
dated from SINCE on: from 2026-02-19 each recipe's launch line for these configurations reads
as below (checked version by version; earlier ones change flags this script does not track).
Each launch's flags come from the recipe as of the run's date (benchmarks/single_node/, from
2026-06-02 benchmarks/single_node/fixed_seq_len/), and the client from benchmark_lib.sh and
utils/bench_serving/benchmark_serving.py: random lengths uniform in [int(0.8 L), L]
(--random-range-ratio 0.8), --ignore-eos, --num-prompts 10 x C after 2 x C warm-up requests.
The points replace every `inferencex-` point of published.json, in the file's layout.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path
from typing import Any

PUBLISHED = Path(__file__).resolve().parent.parent / "src/xpusim/validation/published.json"
APP_COMMIT = "528c4146b8f502fcbce8df7870a935a970cbae25"  # 2026-06-14, app PR #458
FIXTURE = "packages/app/cypress/fixtures/api/benchmarks.json"
APP = f"github.com/SemiAnalysisAI/InferenceX-app (commit {APP_COMMIT[:12]}) {FIXTURE}"
RECIPES = "github.com/SemiAnalysisAI/InferenceX"
SINCE = "2026-02-19"
RUN = ("hardware", "framework", "precision", "decode_tp", "decode_ep", "decode_dp_attention",
       "isl", "osl", "conc")  # fmt: skip
"""What tells a row's run apart: the configuration and the client's lengths and concurrency."""
CHIP = {
    "h200": "h200-sxm",
    "b200": "b200",
    "b300": "b300",
    "mi300x": "mi300x",
    "mi325x": "mi325x",
    "mi355x": "mi355x",
}
ENGINE = {"sglang": "sglang", "trt": "trtllm", "atom": "atom"}
TTFT_GAP = (
    "at 1-4 clients, where no prompt waits for another, the measured TTFT exceeds xpusim's by "
    "0.06-0.13 s on B200, B300 and H200 with 1k prompts (-0.03-0.10 s with 8k) and by "
    "0.11-1.05 s on MI300X, MI325X and MI355X (median by chip and prompt length, "
    "docs/validation.md): time per request outside the engine's step (API server, "
    "tokenization) and prefill kernels at these shapes, neither measured for these versions "
    "(SGLang streams the first token at once: not --stream-interval; SGLang's eager prefill on "
    "ROCm is modelled, engines.toml eager_prefill, and leaves 0.09-0.5 s); under load TTFT also "
    "holds the wait behind "
    "other prompts, set by how the engine interleaves prefills with decodes, and on the B200 "
    "and B300 SGLang runs the wait for the scheduler's next receive (--scheduler-recv-interval: "
    "modelled, recv_interval) (issue #48)"
)
SGLANG_MOE = (
    "--moe-runner-backend flashinfer_trtllm: FlashInfer's trtllm_fp4_block_scale_moe and "
    "trtllm_fp8_block_scale_moe (FlashInfer API docs, TensorRT-LLM Fused MoE), the trtllm-gen "
    "kernels of TensorRT-LLM's moe_backend TRTLLM; aiconfigurator's rows of both on B200 "
    "(SGLang 0.5.14 sglang_flashinfer_trtllm_moe, TensorRT-LLM 1.3.0rc10 min-latency, NVFP4, "
    "DeepSeek-R1's shape, 1-16 tokens, EP 4 and 8) agree within 16%"
)
NVFP4_GAP = (
    "xpusim prices NVFP4's routed experts at EP 4 and 8 and up to 256 tokens from the "
    "TRTLLM-backend (trtllm-gen) rows, TensorRT-LLM's on B200 (37 us a layer at one token with "
    "EP 8, where the CUTLASS rows take 60) and SGLang 0.5.14's of the same kernels on B300, "
    "past 16 tokens upper bounds (the collector's group-limited gate doubles the measured "
    "rank's pairs), and prefill steps and TP-split experts from the CUTLASS backend's rows; "
    "the attention projections the FP4-V2 checkpoint keeps BF16 (all but o_proj) are priced "
    "as BF16 GEMMs (zoo deepseek-r1-0528-fp4-v2)"
)
LONG_DECODE_GAP = (
    "decode over long contexts on MI300X and MI325X: the measured TPOT at 4 clients grows from "
    "14.9 ms (1k out) to 25.1 ms (8k out) on MI300X where xpusim's stays near 11.5 ms, and "
    "throughput follows it; the AITER MLA decode over 1-9k tokens of context in these ROCm "
    "SGLang builds is slower than xpusim prices it (no kernel table at these context lengths)"
)
CAPACITY_GAP = (
    "4 B200 hold DeepSeek-R1's FP8 weights with little to spare: xpusim finds room for 55,900 "
    "KV tokens at --mem-fraction-static 0.95 with its 180e9-byte B200, where 32 clients of "
    "8k prompts need about 265,000; the GPU reports 183,359 MiB (192.3e9 bytes: nvidia-smi), "
    "12.3 GB more than the datasheet figure the catalog holds, so the engine ran all 32 at once "
    "where xpusim preempts and queues"
)
SUFFIX = {"ttft_s": "ttft", "tpot_s": "tpot", "output_tokens_per_s": "otps"}
TOKEN_CAP = 131072  # serve's most new tokens one iteration can simulate
RANGE_RATIO = 0.8  # benchmark_serving's --random-range-ratio in every InferenceX recipe
SPREAD = round((1 - RANGE_RATIO) / (1 + RANGE_RATIO), 3)
"""serve's --spread for lengths uniform in [R L, L]: [m(1-s), m(1+s)] about their mean m."""


def mean_len(n: int) -> tuple[int, int]:
    """The least and the mean of benchmark_serving's lengths for --random-*-len n."""
    lo = int(n * RANGE_RATIO)
    return lo, int((lo + n) / 2 + 0.5)


def graph_sizes(fw: str, top: int) -> list[int]:
    """The batch sizes the engine captures up to its graph bound (padding on in every launch):
    SGLang 0.5 server_args._generate_cuda_graph_batch_sizes, [1, 2, 4, 8, 12] + range(16, 257, 8)
    + range(272, 512, 16) + range(512, max + 1, 32); TensorRT-LLM CudaGraphConfig
    _generate_cuda_graph_batch_sizes with enable_padding, [1, 2, 4] + multiples of 8 to 128,
    then max_batch_size itself."""
    if fw == "sglang":
        sizes = [1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 512, 16), *range(512, top + 1, 32)]
        return [n for n in sizes if n <= top]
    sizes = [n for n in [1, 2, 4] + [8 * i for i in range(1, 17)] if n <= top]
    return sizes if top in sizes else [*sizes, top]


def recv_interval(r: dict[str, Any]) -> int | None:
    """The B200 and B300 SGLang recipes' --scheduler-recv-interval (every version from SINCE:
    dsr1_fp8_b200.sh, dsr1_fp4_b200.sh, dsr1_fp8_b300.sh, dsr1_fp4_b300.sh): 10 below 16
    clients and 30 from 16 on, 10 at any concurrency for FP8 at TP 4; no other recipe sets
    it (SGLang's default, 1)."""
    if r["framework"] != "sglang" or r["hardware"] not in ("b200", "b300"):
        return None
    if r["precision"] == "fp8" and r["decode_tp"] == 4:
        return 10
    return 30 if r["conc"] >= 16 else 10


def script(repo: str, r: dict[str, Any]) -> str:
    """The recipe as of the run's date: the last commit that touched it by then, at the path it
    had (benchmarks/single_node/ until 2026-06-02, fixed_seq_len/ after)."""
    hw, fw, prec = r["hardware"], r["framework"], r["precision"]
    name = f"dsr1_{prec}_{hw}" + {"sglang": "", "trt": "_trt", "atom": "_atom"}[fw] + ".sh"
    best = None
    for path in (f"benchmarks/single_node/fixed_seq_len/{name}", f"benchmarks/single_node/{name}"):
        out = subprocess.run(
            [
                "git",
                "-C",
                repo,
                "log",
                "-1",
                "--format=%H %cI",
                f"--before={r['date']} 23:59:59",
                "--",
                path,
            ],
            capture_output=True,
            text=True,
        ).stdout.split()
        if out and (best is None or out[1] > best[1]):
            best = (out[0], out[1], path)
    return f"(commit {best[0][:12]}, {best[1][:10]}) {best[2]}"


def settings(r: dict[str, Any]) -> tuple:
    """What the run's recipe launched: (kv_precision, token_budget, max_batch, moe_backend,
    adp_balance, memory fraction, CUDA-graph bound, the launch line, the checkpoint)."""
    hw, fw, prec, tp, isl, osl, conc = (
        r["hardware"],
        r["framework"],
        r["precision"],
        r["decode_tp"],
        r["isl"],
        r["osl"],
        r["conc"],
    )
    ep, dpa = r["decode_ep"], r["decode_dp_attention"]
    ckpt = {("fp8",): "deepseek-ai/DeepSeek-R1-0528"}.get((prec,))
    if prec == "fp4":
        ckpt = (
            "amd/DeepSeek-R1-0528-MXFP4-Preview"
            if hw == "mi355x"
            else "nvidia/DeepSeek-R1-0528-FP4-V2"
        )
    mb = moe = adp = frac = graph = None
    if fw == "sglang":
        if hw == "h200":
            mb = 512 if (isl, osl) == (1024, 1024) else 256
            budget, kv, frac, graph = 32768, "bf16", 0.82, mb
            launch = (
                f"sglang.launch_server --tensor-parallel-size={tp} --disable-radix-cache "
                f"--max-running-requests {mb} --cuda-graph-max-bs {mb} --chunked-prefill-size "
                "32768 "
                "--max-prefill-tokens 32768 --mem-fraction-static 0.82 --attention-backend "
                "flashinfer "
                "--stream-interval 10 (no --kv-cache-dtype: auto, bf16 for the FP8 checkpoint)"
            )
        elif hw in ("b200", "b300") and prec == "fp8":
            moe = "TRTLLM"  # --moe-runner-backend flashinfer_trtllm (SGLANG_MOE)
            mb, budget = (128, 32768) if tp == 8 else (32, 8192)
            kv, frac, graph = "fp8", (0.82 if tp == 8 else 0.95), mb
            launch = (
                f"sglang.launch_server --tensor-parallel-size={tp} --ep-size {ep} "
                f"--cuda-graph-max-bs {mb} --max-running-requests {mb} --mem-fraction-static "
                f"{0.82 if tp == 8 else 0.95} --kv-cache-dtype fp8_e4m3 --chunked-prefill-size "
                f"{budget} "
                f"--max-prefill-tokens {budget} --enable-flashinfer-allreduce-fusion "
                f"--scheduler-recv-interval {recv_interval(r)} --disable-radix-cache "
                "--attention-backend trtllm_mla --stream-interval 30 --moe-runner-backend "
                "flashinfer_trtllm "
                "--quantization fp8"
            )
        elif hw in ("b200", "b300"):
            moe = "TRTLLM"  # --moe-runner-backend flashinfer_trtllm (SGLANG_MOE)
            mb, budget, kv, frac, graph = 256, 16384, "fp8", 0.85, 256
            launch = (
                f"sglang.launch_server --tensor-parallel-size={tp} --ep-size {ep} "
                "--cuda-graph-max-bs 256 "
                "--max-running-requests 256 --mem-fraction-static 0.85 --kv-cache-dtype fp8_e4m3 "
                "--chunked-prefill-size 16384 --quantization modelopt_fp4 "
                "--enable-flashinfer-allreduce-fusion "
                f"--scheduler-recv-interval {recv_interval(r)} "
                "--enable-symm-mem --disable-radix-cache --attention-backend trtllm_mla "
                "--moe-runner-backend flashinfer_trtllm --stream-interval 10"
            )
        elif hw in ("mi300x", "mi325x"):
            budget, kv, frac, graph = 131072, "fp8", 0.8, 128
            launch = (
                f"sglang.launch_server --tensor-parallel-size={tp} --mem-fraction-static=0.8 "
                "--cuda-graph-max-bs=128 --chunked-prefill-size=131072 "
                "--num-continuous-decode-steps=4 "
                "--max-prefill-tokens=131072 --kv-cache-dtype fp8_e4m3 --attention-backend aiter "
                "--disable-radix-cache (SGLANG_USE_AITER=1, SGLANG_AITER_MLA_PERSIST=1)"
            )
        elif prec == "fp8":  # mi355x; decode steps 4 until a2180b61c (2026-05-03), then 8
            budget, kv, frac, graph = 196608, "fp8", 0.8, conc
            steps = 8 if r["date"] >= "2026-05-03" else 4
            launch = (
                f"sglang.launch_server --attention-backend aiter --tensor-parallel-size {tp} "
                "--chunked-prefill-size 196608 --mem-fraction-static 0.8 --disable-radix-cache "
                f"--num-continuous-decode-steps {steps} --max-prefill-tokens 196608 "
                "--kv-cache-dtype fp8_e4m3 "
                f"--cuda-graph-max-bs {conc} (SGLANG_USE_AITER=1)"
            )
        else:  # mi355x fp4
            budget = 32768 if (isl, osl) == (8192, 1024) and conc > 32 else 196608
            kv, frac, graph = "fp8", 0.8, 128
            launch = (
                f"sglang.launch_server --tensor-parallel-size={tp} --chunked-prefill-size={budget} "
                "--mem-fraction-static=0.8 --disable-radix-cache --num-continuous-decode-steps=4 "
                f"--max-prefill-tokens={budget} --cuda-graph-max-bs=128 --attention-backend aiter "
                "--kv-cache-dtype fp8_e4m3 (SGLANG_USE_AITER=1)"
            )
    elif fw == "trt":
        budget = max(8192, (conc + isl + 64 + 63) // 64 * 64)
        kv = "fp8"
        if hw == "h200":
            moe, graph, frac = "CUTLASS", 128, 0.75
        else:
            moe = "CUTLASS" if dpa else "TRTLLM"
            graph = (conc if conc < 4 else conc // 4) if dpa and prec == "fp4" else conc
            frac = 0.75 if (isl, osl) == (8192, 1024) and tp == 4 and prec == "fp8" else 0.8
        if dpa:
            adp = [0, 60]
        launch = (
            f"trtllm-serve --backend pytorch --tp_size={tp} --ep_size={ep} "
            f"--max_num_tokens={budget} "
            "--max_seq_len=max(MAX_MODEL_LEN, 8192); extra options: cuda_graph_config "
            "enable_padding true "
            f"max_batch_size {graph}, enable_attention_dp {str(dpa).lower()}, kv_cache_config "
            "dtype fp8 "
            f"free_gpu_memory_fraction {frac} enable_block_reuse false, stream_interval 10, "
            "moe_config backend "
            f"{moe}"
            + (
                ", attention_dp_config batching_wait_iters 0 enable_balance true timeout_iters 60"
                if dpa
                else ""
            )
        )
    else:  # atom
        budget, kv = None, "fp8"
        launch = (
            f"atom.entrypoints.openai_server -tp {tp} --kv_cache_dtype fp8"
            + ("" if (isl, osl) == (1024, 1024) else " --max-model-len 10240")
            + (" --enable-expert-parallel" if ep > 1 else "")
            + " --block-size 16"
        )
    return kv, budget, mb, moe, adp, frac, graph, launch, ckpt


def points(rows: list[dict[str, Any]], repo: str) -> list[dict[str, Any]]:
    """Three points a run (mean TTFT, mean TPOT, output tokens/s of the group), each with its
    source row, its launch and client as notes, and the settings serve runs it with."""
    out = []
    for r in rows:
        hw, fw, prec, tp, ep, dpa, isl, osl, conc = (r[k] for k in RUN)
        m = r["metrics"]
        kv, budget, mb, moe, adp, frac, graph, launch, ckpt = settings(r)
        (ilo, prompt), (olo, gen) = mean_len(isl), mean_len(osl)
        plan = f"tp{tp}" + (f"-ep{ep}" if ep > 1 else "") + ("-dpa" if dpa else "")
        scen = f"{isl // 1024}k{osl // 1024}k"
        base_id = f"inferencex-dsr1-{hw}-{fw}-{prec}-{plan}-{scen}-c{conc}"
        precision = "fp8" if prec == "fp8" else ("mxfp4" if hw == "mi355x" else "nvfp4")
        version = r["image"]
        setup = {
            "workload": "llm-serving",
            "chip": CHIP[hw],
            "chips": tp,
            "tp": tp,
            # the FP4-V2 checkpoint's own entry: it keeps MLA's projections BF16
            "model": "deepseek-r1-0528-fp4-v2" if precision == "nvfp4" else "deepseek-r1-0528",
            "precision": precision,
            "weight_precision": None,
            "kv_precision": kv,
            "engine": ENGINE[fw],
            "engine_version": version,
            "engine_profile": ENGINE[fw],
            "load": {"kind": "concurrency", "value": conc, "requests": 10 * conc, "warmup": 0},
            "prompt": prompt,
            "gen": gen,
            "spread": SPREAD,
            "stat": "mean",
        }
        if ep > 1:
            setup["ep"] = ep
        if dpa:
            setup["dp_attention"] = True
        if budget is not None:
            setup["token_budget"] = min(budget, TOKEN_CAP)
        if mb is not None:
            setup["max_batch"] = mb
        if frac is not None:
            setup["kv_utilization"] = frac
        if graph is not None:
            setup["graph_sizes"] = graph_sizes(fw, graph)
            setup["graph_pad"] = "decode"
        if moe:
            setup["moe_backend"] = moe
        if adp:
            setup["adp_balance"] = adp
        if recv := recv_interval(r):
            setup["recv_interval"] = recv

        if "--enable-flashinfer-allreduce-fusion" in launch:
            setup["allreduce_fusion"] = True
        src_row = (
            f"{APP}, row hardware={hw} framework={fw} precision={prec} spec_method=none "
            f"decode_tp={tp} decode_ep={ep} dp_attention={str(dpa).lower()} isl={isl} osl={osl} "
            f"conc={conc} date={r['date']}"
        )
        notes = (
            f"InferenceX (SemiAnalysis, formerly InferenceMAX) single-node run of {ckpt} on {tp} "
            f"{hw.upper()} ({fw}, image {version}), {r['date']}, GitHub Actions run "
            f"{r['run_url']}; "
            "the row is the dashboard API's (inferencex.semianalysis.com /api/v1/benchmarks) as "
            "the "
            "app's capture script saved it (packages/app/scripts/capture-cypress-fixtures.ts). "
            f"Launch ({RECIPES} {script(repo, r)}, the recipe as of the run's date): {launch}. "
            "Client (benchmarks/benchmark_lib.sh run_benchmark_serving, utils/bench_serving/"
            f"benchmark_serving.py): random dataset, --random-input-len {isl} --random-output-len "
            f"{osl} "
            "--random-range-ratio 0.8 (each length uniform in [int(0.8 L), L]: inputs "
            f"{ilo}-{isl}, "
            f"mean {prompt}; outputs {olo}-{osl}, mean {gen}), --ignore-eos, --request-rate inf, "
            f"--max-concurrency {conc}, --num-prompts {10 * conc} (every one measured), after "
            f"--num-warmups {2 * conc} sent and finished apart. Fields: mean_ttft, mean_tpot (s); "
            "output_tput_per_gpu (utils/process_result.py: output_throughput / tp) times "
            f"{tp} GPUs for the group."
        )
        parts = [
            f"engine profile {ENGINE[fw]} ({version}) with its own scheduling policy",
            f"closed loop of {conc} clients, {10 * conc} requests all measured (the warm-up ran "
            "apart)",
            f"lengths mean {prompt} in / {gen} out, spread {SPREAD} (uniform "
            f"[{RANGE_RATIO} L, L] as [m(1-s), m(1+s)])",
            f"KV cache {kv}" + (" (no --kv-cache-dtype: auto)" if kv == "bf16" else ""),
        ]
        if budget is not None:
            parts.append(
                f"token_budget {min(budget, TOKEN_CAP)}"
                + (
                    f" (the launch's {budget}; serve simulates at most {TOKEN_CAP} new tokens a "
                    "step)"
                    if budget > TOKEN_CAP
                    else ""
                )
            )
        else:
            parts.append("token budget and batch limit: the atom profile's (the launch sets none)")
        if mb is not None:
            parts.append(f"max_batch {mb} (--max-running-requests)")
        if ep > 1 or dpa:
            parts.append(
                f"experts EP{ep} over the same {tp} GPUs"
                + (", attention data-parallel" if dpa else "")
            )
        if frac is not None:
            parts.append(
                f"kv_utilization {frac} ("
                + ("--mem-fraction-static" if fw == "sglang" else "free_gpu_memory_fraction")
                + ")"
            )
        else:
            parts.append("memory fraction: the atom profile's (the launch sets none)")
        if graph is not None:
            parts.append(
                f"CUDA graphs up to {graph} sequences with padding (graph_sizes, graph_pad decode)"
            )
        if recv:
            parts.append(f"recv_interval {recv} (--scheduler-recv-interval)")
        if moe:
            parts.append(f"moe_backend {moe}" + (f" ({SGLANG_MOE})" if fw == "sglang" else ""))
        if "--enable-flashinfer-allreduce-fusion" in launch:
            parts.append("allreduce_fusion (--enable-flashinfer-allreduce-fusion)")
        if prec == "fp4":
            parts.append(
                f"{precision} weights ({ckpt}); attention at the precision's xpusim default"
            )
        gaps = []
        if fw == "sglang" and hw.startswith("mi"):
            gaps.append(
                "--num-continuous-decode-steps is not modelled: SGLang 0.3's scheduler ran that "
                "many decode iterations before admitting new prompts, but that loop is gone "
                "from the 0.4-0.5 overlap scheduler, whose worker reads the flag only to size "
                "the batch references it keeps (tp_worker_overlap_thread.py "
                "keep_batch_reference_num); no admission gate is left to model"
            )
        if budget is not None and budget > TOKEN_CAP:
            gaps.append(
                f"the launch's {budget}-token chunk is simulated as {TOKEN_CAP} (serve's most a "
                "step); "
                f"it binds only when more than {TOKEN_CAP} prompt tokens wait at once"
            )
        if (hw, fw, prec, tp, isl) == ("b200", "sglang", "fp8", 4, 8192):
            gaps.append(CAPACITY_GAP)
        metrics = [
            ("ttft_s", m.get("mean_ttft"), "s", "mean_ttft"),
            ("tpot_s", m.get("mean_tpot"), "s", "mean_tpot"),
        ]
        if m.get("output_tput_per_gpu") is not None:
            metrics.append(
                (
                    "output_tokens_per_s",
                    m["output_tput_per_gpu"] * tp,
                    "tokens/s",
                    "output_tput_per_gpu",
                )
            )
        for metric, value, unit, field in metrics:
            p = {
                "id": f"{base_id}-{SUFFIX[metric]}",
                **setup,
                "metric": metric,
                "value": round(value, 6 if unit == "s" else 2),
                "unit": unit,
                "source": f"{src_row}, field {field}",
                "notes": notes,
                "xpusim_setup": "; ".join(parts),
            }
            own = list(gaps)
            if metric == "ttft_s":
                own.append(TTFT_GAP)
            elif prec == "fp4" and hw != "mi355x":
                own.append(NVFP4_GAP)
            elif hw in ("mi300x", "mi325x") and osl == 8192:
                own.append(LONG_DECODE_GAP)
            if own:
                p["known_gap"] = "; ".join(own)
            out.append(p)
    return out


def write(pts: list[dict[str, Any]]) -> None:
    """Replace published.json's inferencex- points by pts, before its calibration block, in its
    layout (points at two spaces, one more a level), leaving every other line as it was."""
    text = PUBLISHED.read_text()
    data = json.loads(text)
    kept = [p for p in data["points"] if not p["id"].startswith("inferencex-")]
    assert len(kept) + sum(p["id"].startswith("inferencex-") for p in data["points"]) == len(
        data["points"]
    )
    block = ",\n".join(
        "\n".join("  " + line for line in json.dumps(p, indent=1, ensure_ascii=False).splitlines())
        for p in pts
    )
    head, tail = text.split('\n ],\n "calibration": {', 1)
    if len(kept) < len(data["points"]):  # drop the old block: it is the points array's end
        first = head.index('  {\n   "id": "inferencex-')
        head = head[:first].rstrip().removesuffix(",")
    PUBLISHED.write_text(f'{head},\n{block}\n ],\n "calibration": {{{tail}')
    assert [p["id"] for p in json.loads(PUBLISHED.read_text())["points"]] == [
        p["id"] for p in kept + pts
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("app", help="git directory of SemiAnalysisAI/InferenceX-app (or a fork)")
    parser.add_argument("recipes", help="git directory of SemiAnalysisAI/InferenceX")
    args = parser.parse_args()
    rows = json.loads(
        subprocess.run(
            ["git", "-C", args.app, "show", f"{APP_COMMIT}:{FIXTURE}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    rows = [
        r
        for r in rows
        if r["model"] == "dsr1"
        and not r["disagg"]
        and not r["is_multinode"]
        and r["spec_method"] == "none"
        and r["date"] >= SINCE
    ]
    rows.sort(key=lambda r: tuple(r[k] for k in RUN))
    pts = points(rows, args.recipes)
    assert len({p["id"] for p in pts}) == len(pts), "duplicate ids"
    write(pts)
    print(f"{len(rows)} runs, {len(pts)} points written to {PUBLISHED}")


if __name__ == "__main__":
    main()
