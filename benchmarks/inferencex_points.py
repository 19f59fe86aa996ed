"""Regenerates the InferenceX points of src/xpusim/validation/published.json: SemiAnalysis's
InferenceX (formerly InferenceMAX) single-node DeepSeek-R1-0528 runs, each a closed loop of C
clients on one node under SGLang, TensorRT-LLM or ATOM, with the launch flags of its recipe.

    python benchmarks/inferencex_points.py /path/to/InferenceX-app.git /path/to/InferenceX.git

Needs git only; both may be bare mirrors (a fork's is enough if it holds the pinned commits).
The rows are the dashboard API's (inferencex.semianalysis.com /api/v1/benchmarks) as the app's
capture script saved them (packages/app/scripts/capture-cypress-fixtures.ts: the latest run of
each configuration, up to 5 concurrencies sampled along each sweep) in
packages/app/cypress/fixtures/api/benchmarks.json at APP_COMMIT (beside it, HISTORY: every run
of each configuration at a few concurrencies, which older_run_gap reads). Kept: DeepSeek-R1-0528,
one node, no disaggregation, dated from SINCE on, with or without speculative decoding (MTP:
the model's own multi-token-prediction layer drafting, each recipe's *_mtp.sh; the rows do
not state its acceptance, so every MTP point takes DeepSeek's published one: MTP_GAP): from
2026-02-19 each recipe's launch line for these configurations reads as below (checked
version by version; earlier ones change flags this script does not track; the MTP recipes'
versions the rows ran: mtp_settings). Each launch's flags come from the recipe as of the
run's date (benchmarks/single_node/, from 2026-06-02 benchmarks/single_node/fixed_seq_len/),
and the client from benchmark_lib.sh and utils/bench_serving/benchmark_serving.py: random
lengths uniform in [int(0.8 L), L] (--random-range-ratio 0.8), --ignore-eos, --num-prompts
10 x C after 2 x C warm-up requests, and in the MTP recipes --use-chat-template. MTP runs
come after the others. The points replace every `inferencex-` point of published.json, in
the file's layout.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from pathlib import Path
from typing import Any

from xpusim.scenarios.decoding import mtp_accept_length

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
    "at 1-4 clients the measured mean TTFT exceeds xpusim's by "
    "0.06-0.13 s on B200, B300 and H200 with 1k prompts (-0.03-0.10 s with 8k) and by "
    "0.11-1.05 s on MI300X, MI325X and MI355X (median by chip and prompt length, "
    "docs/validation.md): on H200 and the AMD chips mostly in the first wave, the first C "
    "prompts, which the client sends together (the point's first-wave note: at up to 16 "
    "clients xpusim's TTFT of the other requests is 0.91x the runs' median on H200 SGLang "
    "and 0.56-0.83x on MI300X, MI325X and MI355X SGLang, its first wave 0.22-0.50 s where "
    "the runs' average 1.2-4.6 s by the medians of their points; docs/validation.md, "
    "fifteenth session, q5); "
    "otherwise time per request outside the engine's step (API server, "
    "tokenization) and prefill kernels at these shapes, neither measured for these versions "
    "(SGLang streams the first token at once: not --stream-interval; SGLang's eager prefill on "
    "ROCm is modelled, engines.toml eager_prefill; its FP8 (128 x 128 block-scaled) path on "
    "ROCm leaves 0.20-0.25 s a prefill plus 70-115 us a prompt token that its MXFP4 path and "
    "ATOM's FP8 on the same MI355X do not: neither AITER's tuned kernels at these shapes, "
    "which xpusim's prices match (on MI300X and MI325X v0.5.12 runs every block-FP8 linear "
    "on AITER's Triton GEMM instead, SGLang PR #26234, untimed at prefill sizes), nor launch "
    "time, nor SGLANG_AITER_MLA_PERSIST (in v0.5.9 "
    "and v0.5.12 AITER's persistent MLA kernel for decode, verify and draft steps, a prompt "
    "running as MHA; on by default, so in every SGLang run here, FP8 and MXFP4 alike), nor "
    "the prefill attention (one kernel for both checkpoints), and not measured); under load "
    "TTFT also holds the wait behind other prompts, set by how the engine interleaves "
    "prefills with decodes, and on the B200 and B300 SGLang runs the wait for the "
    "scheduler's next receive (--scheduler-recv-interval: modelled, recv_interval); on B200 "
    "the 1k prefill step itself takes about 150 ms more, a floor that an 8k prefill hides and "
    "that stalls the other clients' decodes, absent on B300 and H200 with the same image and "
    "recipe, its cause not found (docs/validation.md, fourteenth session, p1) (issue #48)"
)
TRT_TTFT_GAP = (
    "TensorRT-LLM's stream_interval 10 does not delay the first token (tensorrt_llm/_torch/"
    "pyexecutor/py_executor.py _handle_responses emits at py_decoding_iter == 1 whatever the "
    "interval), and its batch waiting (DELAY_BATCHING: modelled, batch_wait) reaches no run "
    "here; on the B200 FP8 TP8 runs at 4 clients the measured TTFT grows by 133 ms from 1k "
    "to 8k prompts where xpusim's grows by 127 ms, so the prefill's cost a token agrees and "
    "what is missing is a fixed 146-151 ms a request; NVIDIA/TensorRT-LLM issue #5929 "
    "(v0.21.0rc2 trtllm-serve, LLMPerf, one client, DeepSeek-R1 FP8 on 8 H200, EP 8) "
    "measures 124 ms at 1,600 prompt tokens and 353 ms at 8,192 where xpusim says 75 and "
    "296 (ITL 11.0 ms, xpusim 11.1): a fixed ~50 ms there. No run here but B200 FP8 at 64 "
    "clients and B200 FP4 TP8 EP8 1k/1k sets a piecewise CUDA graph, so their steps with a "
    "prompt run eagerly, at a host time no one has published for this backend (engines.toml "
    "trtllm eager_source)"
)
WAVES = 10
"""--num-prompts over --max-concurrency in every recipe (`--num-prompts $(( $CONC * 10 ))`):
under --request-rate inf the first C prompts go out together, one request in WAVES."""
WARMUP_WAVES = 2
"""--num-warmups over --max-concurrency (benchmarks/benchmark_lib.sh run_benchmark_serving:
`--num-warmups "$((2 * max_concurrency))"`): copies of the first prompt, C at a time, before
the measured prompts; the load's `client_warmup`, which serve counts as compiled only where
the point states a cold start (none does: the runs' kernel caches were not empty, q6)."""


def first_wave(mean: float, rest: float) -> float:
    """The first wave's mean TTFT from the run's mean and the other requests' (rest), every
    request measured: mean = (first + (WAVES - 1) x rest) / WAVES."""
    return WAVES * mean - (WAVES - 1) * rest


def first_wave_gap(m: dict[str, Any], conc: int) -> str | None:
    """What a row's own TTFT statistics say of its first wave, where its mean exceeds its
    median (at one client the first wave is one prompt alone, so nothing is said): the
    median stands for the other requests, as benchmark_serving reports no split."""
    median, mean = m.get("median_ttft"), m["mean_ttft"]
    if conc == 1 or median is None or mean <= median:
        return None
    tail = "".join(f", {k.removesuffix('_ttft')} {m[k]:.3f} s" for k in ("p90_ttft", "p99_ttft")
                   if m.get(k))  # fmt: skip
    return (
        f"the mean holds a first wave: the client sends the first {conc} of its {WAVES * conc} "
        f"prompts together (--request-rate inf under --max-concurrency {conc}) and each later "
        "one as a client's previous request ends; this run's median TTFT is "
        f"{median:.3f} s, its mean {mean:.3f} s{tail}, so with the others at the median the "
        f"first {conc} average {first_wave(mean, median):.2f} s ({WAVES} x mean - {WAVES - 1} "
        "x median; docs/validation.md, fifteenth session, q5, sets xpusim's first wave and the "
        "rest beside these: benchmarks/inferencex_first_wave.py)"
    )


SGLANG_MOE = (
    "--moe-runner-backend flashinfer_trtllm: FlashInfer's trtllm_fp4_block_scale_moe and "
    "trtllm_fp8_block_scale_moe (FlashInfer API docs, TensorRT-LLM Fused MoE), the trtllm-gen "
    "kernels of TensorRT-LLM's moe_backend TRTLLM; aiconfigurator's rows of both on B200 "
    "(SGLang 0.5.14 sglang_flashinfer_trtllm_moe, TensorRT-LLM 1.3.0rc10 min-latency, NVFP4, "
    "DeepSeek-R1's shape, 1-16 tokens, EP 4 and 8) agree within 16%"
)
NVFP4_GAP = (
    "xpusim prices NVFP4's routed experts at EP 4 and 8 and TP-split (TP 4, EP 1) from the "
    "TRTLLM-backend (trtllm-gen) rows, TensorRT-LLM's on B200 (37 us a layer at one token with "
    "EP 8, where the CUTLASS rows take 60) and SGLang 0.5.14's of the same kernels on B300, "
    "each row counted at the pairs and experts the collector's group-limited gate gave its "
    "rank (cost/kernel_tables.py gate_load: at EP 8 5 pairs a token, over 5 experts at one "
    "token), on the kernel's own fixed time (the least time a row spends past its roofline), "
    "up to the rows' largest M, and larger steps from the CUTLASS backend's rows; "
    "SGLang's own TP-split ranks (TP 4 and 8, EP 1) from SGLang 0.5.14's flashinfer_trtllm "
    "rows at every step size, counted likewise (engines.toml sglang-flashinfer-trtllm-moe); "
    "the attention projections the FP4-V2 checkpoint keeps BF16 (all but o_proj) are priced "
    "as BF16 GEMMs (zoo deepseek-r1-0528-fp4-v2)"
)
HISTORY = "packages/app/cypress/fixtures/api/benchmarks-history.json"
"""The app's capture of every run of each configuration at 4, 16 and 64 clients (and 32 where
swept), median latencies only, beside FIXTURE at APP_COMMIT: where a configuration's lengths
last ran on different dates, the run behind one length's points also ran the others."""
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
NVFP4_CKPT = "nvidia/DeepSeek-R1-0528-FP4-V2"
NVFP4_MTP = (
    "its hf_quant_config.json (modelopt 0.34.1.dev3) lists model.layers.61*, the MTP layer, "
    "in exclude_modules beside lm_head and the MLA projections, as a public trace analysis "
    "of that checkpoint quotes it (code index id 53358693022); TensorRT-LLM's own weight "
    "table for deepseek-r1-0528-nvfp4 reads 'The checkpoint ships a bf16 multi-token-"
    "prediction module at layer index num_hidden_layers' (code index id 70689925609); the "
    "hub file itself not read"
)
"""Why the NVFP4 checkpoint's MTP runs price its draft in bf16 (serve's --draft-precision);
amd/DeepSeek-R1-0528-MXFP4-Preview's MTP layer format is not read, so its draft takes the
model's."""
STREAMED = re.compile(r"stream[-_]interval[ =]*(\d+)")


def streamed_tokens(r: dict[str, Any], launch: str) -> float:
    """The tokens a decode step streamed in the run, as its own timing reads (never an input:
    only UNSPECULATED_GAP's test, and docs/validation.md's comparison with the published
    acceptance): the client's mean gap between streamed chunks (mean_itl) over its mean time
    per output token (mean_tpot) is the tokens a chunk carried, and a chunk holds a sequence's
    tokens of N decode steps, N the launch's stream interval (TensorRT-LLM's stream_interval,
    SGLang's --stream-interval; none: 1). The no-MTP rows hold it: 9.9-10.0 at interval 10,
    29.4-30.0 at 30, 1.00-1.02 without one."""
    m = r["metrics"]
    steps = int(found.group(1)) if (found := STREAMED.search(launch)) else 1
    return round(m["mean_itl"] / m["mean_tpot"] / steps, 2)


MTP_GAP = (
    "the acceptance of the MTP drafts is not measured for these runs: xpusim takes DeepSeek's "
    "published curve (scenarios/decoding.py MTP_ACCEPT_LENGTHS: 1.875 tokens a step at 1 "
    "draft token from DeepSeek-V3's 85-90%, 2.58 at 2 and 2.82 at 3 from TensorRT-LLM's "
    "DeepSeek-R1 B200 blog on its own prompts); these runs' random-token prompts in the chat "
    "template with --ignore-eos may accept otherwise (InferenceX PR #649 read ~2.50 on them "
    "and on MT-Bench at a draft depth it does not state), and the engines' logged acceptance "
    "is kept in no row"
)


UNSPECULATED_GAP = (
    "the run's streamed chunks carry one token each (mean_itl / mean_tpot 1.00 at every "
    "concurrency, as SGLang's MI355X MTP runs of the same version carry 2.4-2.8) and its TPOT "
    "is a plain decode's: xpusim without speculation gives 0.83x, 0.87x and 0.66x on the "
    "1k/1k c16, 1k/1k c64 and 8k/1k c64 runs, as on this chip's runs without MTP "
    "(0.83-0.85x, 0.67-0.69x); the engine seems not to have speculated, where xpusim prices "
    "the launch's drafts and 4-token verify at the published acceptance; not modelled"
)


def mean_len(n: int) -> tuple[int, int]:
    """The least and the mean of benchmark_serving's lengths for --random-*-len n."""
    lo = int(n * RANGE_RATIO)
    return lo, int((lo + n) / 2 + 0.5)


def graph_sizes(fw: str, top: int, spec: bool = False) -> list[int]:
    """The batch sizes the engine captures up to its graph bound (padding on in every launch):
    SGLang 0.5 server_args._generate_cuda_graph_batch_sizes, [1, 2, 4, 8, 12] + range(16, 257, 8)
    + range(272, 512, 16) + range(512, max + 1, 32), and with a speculative algorithm
    range(1, 9) + range(10, 33, 2) + range(40, 65, 4) + range(72, 257, 8) + range(272, max + 1,
    16) (each a batch of sequences, a verify graph runs it times the draft tokens);
    TensorRT-LLM CudaGraphConfig _generate_cuda_graph_batch_sizes with enable_padding, [1, 2,
    4] + multiples of 8 to 128, then max_batch_size itself."""
    if fw == "sglang" and spec:
        sizes = [*range(1, 9), *range(10, 33, 2), *range(40, 65, 4), *range(72, 257, 8),
                 *range(272, top + 1, 16)]  # fmt: skip
        return [n for n in sizes if n <= top]
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


def batch_wait(r: dict[str, Any]) -> list | None:
    """The B200 FP8 TensorRT-LLM recipe's DELAY_BATCHING (dsr1_fp8_b200_trt.sh, every version
    from SINCE): batch_wait_timeout_iters 40 and batch_wait_max_tokens_ratio 0.8 with 1k/1k at
    64 clients or more; TensorRT-LLM runs it only without attention DP (py_executor.py
    _schedule), so a DEP launch states none. No other recipe sets it (off: 0 and 0)."""
    if (r["hardware"], r["framework"], r["precision"], r["isl"], r["osl"]) != \
            ("b200", "trt", "fp8", 1024, 1024) or r["conc"] < 64:  # fmt: skip
        return None
    return None if r["decode_dp_attention"] else [40, 0.8]


def script(repo: str, r: dict[str, Any]) -> str:
    """The recipe as of the run's date: the last commit that touched it by then, at the path it
    had (benchmarks/single_node/ until 2026-06-02, fixed_seq_len/ after)."""
    hw, fw, prec = r["hardware"], r["framework"], r["precision"]
    name = (f"dsr1_{prec}_{hw}" + {"sglang": "", "trt": "_trt", "atom": "_atom"}[fw]
            + ("_mtp" if r["spec_method"] == "mtp" else "") + ".sh")  # fmt: skip
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
        ckpt = "amd/DeepSeek-R1-0528-MXFP4-Preview" if hw == "mi355x" else NVFP4_CKPT
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
            + (
                ", batch_wait_timeout_iters 40, batch_wait_max_tokens_ratio 0.8"
                if prec == "fp8" and hw == "b200" and (isl, osl) == (1024, 1024) and conc >= 64
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


def drafts(r: dict[str, Any]) -> tuple[int, str]:
    """The draft tokens an MTP recipe runs a step (serve's --draft-tokens K: the target verifies
    K + 1 tokens a sequence) and the launch's words for them, in each version the rows ran:
    SGLang --speculative-algorithm EAGLE --speculative-eagle-topk 1 with the model's NextN
    layer, K = --speculative-num-steps (its --speculative-num-draft-tokens is K + 1); ATOM
    --method mtp --num-speculative-tokens (default 1 in atom/model_engine/arg_utils.py
    EngineArgs, where the FP4 recipe sets none); TensorRT-LLM speculative_config
    decoding_type MTP, K = num_nextn_predict_layers (its one MTP layer run K times, "MTP
    Eagle": TensorRT-LLM's MTP blog), 1 with attention DP and 3 without in every recipe,
    none setting use_relaxed_acceptance_for_thinking (strict acceptance)."""
    hw, fw, prec = r["hardware"], r["framework"], r["precision"]
    if fw == "trt":
        k = 1 if r["decode_dp_attention"] else 3
        return k, f"speculative_config decoding_type MTP num_nextn_predict_layers {k}"
    if fw == "atom":
        k = 3 if prec == "fp8" else 1
        return k, "--method mtp" + (" --num-speculative-tokens 3" if k == 3 else "")
    k = 2 if hw in ("b200", "b300", "h200") else 3
    return k, (f"--speculative-algorithm EAGLE --speculative-num-steps {k} "
               f"--speculative-num-draft-tokens {k + 1} --speculative-eagle-topk 1")  # fmt: skip


def overlapped(r: dict[str, Any]) -> bool:
    """Whether an SGLang MTP run's scheduler prepared the next batch while the device ran this
    one (serve's --host-overlap): SGLang 0.5's server_args turns the overlap scheduler off for
    EAGLE (its MTP) unless SGLANG_ENABLE_SPEC_V2 is set ("if not envs.SGLANG_ENABLE_SPEC_V2
    .get(): self.disable_overlap_schedule = True", code index id 8356329; the 0.5.9-0.5.12
    tags not read). dsr1_fp8_b200_mtp.sh (64c20b6b5ba0, ed5867f9e998) and dsr1_fp8_b300_mtp.sh
    (ed5867f9e998) set SGLANG_ENABLE_SPEC_V2=1 as a shell variable, not exported, so the
    server never sees it; the FP4 B200, H200, MI325X and MI355X recipes export it."""
    return not (r["framework"] == "sglang" and r["precision"] == "fp8"
                and r["hardware"] in ("b200", "b300"))


def attention_format(r: dict[str, Any]) -> str | None:
    """The format SGLang's AITER backend computes attention in where it is not the
    checkpoint's (serve's --attention-precision), else None. gfx942 (MI300X, MI325X): BF16.
    AITER's FP8 prefill attention runs on gfx950 alone (python/sglang/srt/layers/attention/
    aiter_backend.py: `_use_fp8_prefill_attn = get_bool_env_var("SGLANG_AITER_FP8_PREFILL_ATTN",
    "True") and is_gfx95_supported()`, code-index copies 70137472815 and 60433915051; the
    0.5.9/0.5.12 tags not read; the batch-prefill FP8 FMHA is gfx950's: ROCm/rocm-libraries
    PR #5458), so a prompt's MHA on gfx942 is BF16, and its MLA decode kernel takes BF16
    queries over the FP8 cache (`mla_a16w8_qh16` in InferenceX's MI325X SGLang FP8 profile,
    SemiAnalysisAI/InferenceX issue #863). gfx950 (MI355X) with the MXFP4 checkpoint: FP8,
    that same FP8 prefill kernel (on by default), not MXFP4 math."""
    if r["framework"] != "sglang":
        return None
    if r["hardware"] in ("mi300x", "mi325x"):
        return "bf16"
    if r["hardware"] == "mi355x" and r["precision"] == "fp4":
        return "fp8"
    return None


def mtp_settings(r: dict[str, Any]) -> tuple:
    """What a run's MTP recipe (*_mtp.sh) launched, as settings() returns it. Read at each
    version the rows ran (script()): dsr1_fp4_b200_mtp.sh 292726bb8b01, dsr1_fp8_b200_mtp.sh
    64c20b6b5ba0 and ed5867f9e998 (the same launch), dsr1_fp8_b300_mtp.sh ed5867f9e998,
    dsr1_fp8_h200_mtp.sh cd5f6dd26425, dsr1_fp8_mi325x_mtp.sh 8283444dd0e1,
    dsr1_fp8_mi355x_mtp.sh c178e2822aa7, dsr1_fp4_mi355x_mtp.sh 8a16828e6f70,
    dsr1_fp4_mi355x_atom_mtp.sh 8d81e0bf40ac and 626932a110a2 (the same launch), fixed_seq_len/
    dsr1_fp8_mi355x_atom_mtp.sh 96f1598815fb, dsr1_fp4_b200_trt_mtp.sh, dsr1_fp8_b200_trt_mtp.sh
    and dsr1_fp8_h200_trt_mtp.sh ed5867f9e998. Every SGLang MTP recipe asserts TP 8."""
    hw, fw, prec, tp, isl, osl, conc = (r[k] for k in RUN[:4] + RUN[6:])
    ep, dpa = r["decode_ep"], r["decode_dp_attention"]
    ckpt = "deepseek-ai/DeepSeek-R1-0528"
    if prec == "fp4":
        ckpt = "amd/DeepSeek-R1-0528-MXFP4-Preview" if hw == "mi355x" else NVFP4_CKPT
    k, spec = drafts(r)
    mb = moe = frac = graph = None
    if fw == "trt":
        if hw == "h200":
            moe, graph, frac = "CUTLASS", 128, 0.75
            mb = max(conc // tp, 1) if dpa else conc
        elif prec == "fp4":
            moe, frac = ("CUTLASS" if dpa else "TRTLLM"), 0.8
            mb = graph = (conc if conc < 4 else conc // 4) if dpa else conc
        else:
            moe, frac = ("DEEPGEMM", 0.7) if dpa else ("TRTLLM", 0.8)
            mb = graph = (conc if conc < 8 else conc // 8) if dpa else conc
        budget = ((k + 1) * mb + isl + 64 + 63) // 64 * 64
        piecewise = hw == "b200" and prec == "fp8" and not dpa and conc > (4 if isl == 1024 else 16)
        launch = (
            f"trtllm-serve --backend pytorch --max_batch_size={mb} --tp_size={tp} "
            f"--ep_size={ep} --max_num_tokens={budget} (((K + 1) x max_batch_size + ISL + 64 + "
            "63) // 64 x 64); extra options: cuda_graph_config enable_padding true "
            f"max_batch_size {graph}, enable_attention_dp {str(dpa).lower()}, kv_cache_config "
            f"dtype fp8 free_gpu_memory_fraction {frac} enable_block_reuse false, "
            f"stream_interval 10, moe_config backend {moe}, {spec}"
            + (", attention_dp_config batching_wait_iters 0 enable_balance true timeout_iters 60"
               if dpa else "")
            + (", torch_compile_config enable_piecewise_cuda_graph true" if piecewise else "")
        )  # fmt: skip
        return "fp8", budget, None, moe, [0, 60] if dpa else None, frac, graph, launch, ckpt
    if fw == "atom":
        launch = (f"atom.entrypoints.openai_server -tp {tp} --kv_cache_dtype fp8"
                  + (" --max-model-len 10240" if prec == "fp4" and (isl, osl) != (1024, 1024)
                     else "")
                  + (" --enable-expert-parallel" if ep > 1 else "")
                  + (" --no-enable_prefix_caching" if prec == "fp8" else "")
                  + f" {spec}")  # fmt: skip
        return "fp8", None, None, None, None, None, None, launch, ckpt
    if hw in ("b200", "b300"):
        moe = "TRTLLM"  # --moe-runner-backend flashinfer_trtllm (SGLANG_MOE)
        mb, budget, kv, frac, graph = 512, 16384, "fp8", 0.82, 512
        launch = (
            f"sglang.launch_server --tensor-parallel-size={tp} --data-parallel-size=1 "
            "--cuda-graph-max-bs 512 --max-running-requests 512 --mem-fraction-static 0.82 "
            "--kv-cache-dtype fp8_e4m3 --chunked-prefill-size 16384 --max-prefill-tokens 16384 "
            f"--ep-size {ep} "
            + ("--quantization modelopt_fp4 --enable-symm-mem " if prec == "fp4" else
               "--quantization fp8 --fp8-gemm-backend=flashinfer_trtllm ")
            + "--enable-flashinfer-allreduce-fusion "
            f"--scheduler-recv-interval {recv_interval(r)} --disable-radix-cache "
            "--attention-backend trtllm_mla --moe-runner-backend flashinfer_trtllm "
            f"--stream-interval 30 {spec}"
        )  # fmt: skip
    elif hw == "h200":
        mb = graph = 512 if (isl, osl) == (1024, 1024) else 256
        budget, kv, frac = 32768, "bf16", 0.82
        launch = (
            f"sglang.launch_server --tensor-parallel-size={tp} --data-parallel-size=1 "
            f"--ep-size {ep} --disable-radix-cache --max-running-requests {mb} "
            f"--cuda-graph-max-bs {mb} --chunked-prefill-size 32768 --max-prefill-tokens 32768 "
            "--mem-fraction-static 0.82 --attention-backend flashinfer --stream-interval 10 "
            f"{spec} (no --kv-cache-dtype: auto, bf16 for the FP8 checkpoint)"
        )
    elif hw == "mi325x":
        budget, kv, frac, graph = 131072, "fp8", 0.8, 128
        launch = (
            f"sglang.launch_server --tensor-parallel-size={tp} --ep-size {ep} "
            "--mem-fraction-static=0.8 --cuda-graph-max-bs=128 --chunked-prefill-size=131072 "
            "--num-continuous-decode-steps=4 --max-prefill-tokens=131072 --kv-cache-dtype "
            f"fp8_e4m3 --attention-backend aiter {spec} --disable-radix-cache"
        )
    elif prec == "fp8":  # mi355x
        budget, kv, frac, graph, mb = 196608, "fp8", 0.8, conc, conc
        launch = (
            f"sglang.launch_server --attention-backend aiter --tensor-parallel-size {tp} "
            f"--ep-size {ep} --chunked-prefill-size 196608 --mem-fraction-static 0.8 "
            "--disable-radix-cache --num-continuous-decode-steps 8 --max-prefill-tokens 196608 "
            f"--kv-cache-dtype fp8_e4m3 --cuda-graph-max-bs {conc} --max-running-requests "
            f"{conc} {spec}"
        )
    else:  # mi355x fp4
        budget = 32768 if (isl, osl) == (8192, 1024) and conc > 32 else 196608
        kv, frac, graph = "fp8", 0.8, 128
        launch = (
            f"sglang.launch_server --tensor-parallel-size={tp} --ep-size {ep} "
            f"--chunked-prefill-size={budget} --mem-fraction-static=0.8 --disable-radix-cache "
            f"--num-continuous-decode-steps=4 --max-prefill-tokens={budget} "
            f"--cuda-graph-max-bs=128 --attention-backend aiter --kv-cache-dtype fp8_e4m3 {spec}"
        )
    return kv, budget, mb, moe, None, frac, graph, launch, ckpt


MEDIAN = {"ttft_s": "median_ttft", "tpot_s": "median_tpot", "output_tokens_per_s": "median_tpot"}
"""The HISTORY field older_run_gap compares for each metric's point."""


def medians(rows: list[dict[str, Any]], field: str) -> str:
    """History rows' median TPOT (ms) or TTFT (s) by concurrency, as '24.4/30.5 ms at 4/16
    clients'."""
    rows = sorted(rows, key=lambda h: h["conc"])
    if field == "median_ttft":
        values, unit = "/".join(f"{h['metrics'][field]:.3f}" for h in rows), "s"
    else:
        values, unit = "/".join(f"{h['metrics'][field] * 1e3:.1f}" for h in rows), "ms"
    return f"{values} {unit} at {'/'.join(str(h['conc']) for h in rows)} clients"


def older_run_gap(r: dict[str, Any], history: list[dict[str, Any]],
                  field: str = "median_tpot") -> str | None:  # fmt: skip
    """Where the run behind a row is older than the runs behind the same configuration's other
    lengths, what that run measured at those lengths beside what the newer runs did (`field`,
    median TPOT or TTFT, of HISTORY): the sweep dropped 1k/8k on 2026-03-27 (InferenceX #911),
    so its points stay on the image of their last run while the others moved on, and
    comparing lengths across the points compares images (H200 SGLang FP8 at 4 clients: mean
    TTFT 0.260 s at 1k/1k and 0.259 at 1k/8k in the run of 2026-03-25, the app's fixture at
    cac6246, 0.158 at 1k/1k on 2026-05-17; docs/validation.md, fifteenth session, q5). None
    where the row's run is the newest at every length."""
    config = [k for k in RUN if k not in ("isl", "osl", "conc")] + ["spec_method"]
    mine = [h for h in history if all(h[k] == r[k] for k in config)]
    same_run = [h for h in mine if h["run_url"] == r["run_url"]]
    parts = []
    for isl, osl in sorted({(h["isl"], h["osl"]) for h in same_run} - {(r["isl"], r["osl"])}):
        length = [h for h in mine if (h["isl"], h["osl"]) == (isl, osl)]
        newest = max(h["date"] for h in length)
        if newest <= r["date"]:
            continue
        then = medians([h for h in length if h in same_run], field)
        now = medians([h for h in length if h["date"] == newest], field)
        parts.append(f"{isl // 1024}k/{osl // 1024}k {then} in this run, {now} on {newest}")
    if not parts:
        return None
    return (
        f"this run ({r['date']}, {r['image']}) is older than the runs behind its configuration's "
        f"other lengths, which ran newer images: median {field.removeprefix('median_').upper()} "
        f"{'; '.join(parts)} "
        f"({APP.removesuffix(FIXTURE)}{HISTORY}); a gap between this point and those lengths' "
        "points is the software's as much as the lengths'"
    )


def points(
    rows: list[dict[str, Any]], repo: str, history: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Three points a run (mean TTFT, mean TPOT, output tokens/s of the group), each with its
    source row, its launch and client as notes, and the settings serve runs it with."""
    out = []
    for r in rows:
        hw, fw, prec, tp, ep, dpa, isl, osl, conc = (r[k] for k in RUN)
        m = r["metrics"]
        spec = r["spec_method"] == "mtp"
        kv, budget, mb, moe, adp, frac, graph, launch, ckpt = (mtp_settings if spec
                                                               else settings)(r)  # fmt: skip
        (ilo, prompt), (olo, gen) = mean_len(isl), mean_len(osl)
        plan = f"tp{tp}" + (f"-ep{ep}" if ep > 1 else "") + ("-dpa" if dpa else "")
        scen = f"{isl // 1024}k{osl // 1024}k"
        base_id = f"inferencex-dsr1-{hw}-{fw}-{prec}{'-mtp' * spec}-{plan}-{scen}-c{conc}"
        precision = "fp8" if prec == "fp8" else ("mxfp4" if hw == "mi355x" else "nvfp4")
        version = r["image"]
        setup = {
            "workload": "llm-serving",
            "chip": CHIP[hw],
            "chips": tp,
            "tp": tp,
            # the FP4 checkpoints' own entries: FP4-V2 keeps MLA's projections but o_proj
            # BF16, the MXFP4-Preview all of them (its Quark exclude_layers "*self_attn*")
            "model": {"nvfp4": "deepseek-r1-0528-fp4-v2",
                      "mxfp4": "deepseek-r1-0528-mxfp4"}.get(precision, "deepseek-r1-0528"),
            "precision": precision,
            "weight_precision": None,
            "kv_precision": kv,
            "engine": ENGINE[fw],
            "engine_version": version,
            "engine_profile": ENGINE[fw],
            "load": {"kind": "concurrency", "value": conc, "requests": WAVES * conc, "warmup": 0,
                     "client_warmup": WARMUP_WAVES * conc},
            "prompt": prompt,
            "gen": gen,
            "spread": SPREAD,
            "stat": "mean",
        }
        if attention := attention_format(r):
            setup["attention_precision"] = attention
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
            setup["graph_sizes"] = graph_sizes(fw, graph, spec)
            setup["graph_pad"] = "decode"
        if moe:
            setup["moe_backend"] = moe
        if adp:
            setup["adp_balance"] = adp
        if recv := recv_interval(r):
            setup["recv_interval"] = recv
        if wait := batch_wait(r):
            setup["batch_wait"] = wait
        if spec:
            k = drafts(r)[0]
            setup["speculative"] = {"kind": "mtp", "draft_tokens": k}  # MTP_GAP
            if ckpt == NVFP4_CKPT:
                setup["speculative"]["precision"] = "bf16"  # NVFP4_MTP
            if not overlapped(r):
                setup["host_overlap"] = False

        if "--enable-flashinfer-allreduce-fusion" in launch:
            setup["allreduce_fusion"] = True
        if "--disable-radix-cache" in launch:  # with the client's --ignore-eos: admission.py
            setup["radix_cache"] = False
        src_row = (
            f"{APP}, row hardware={hw} framework={fw} precision={prec} "
            f"spec_method={r['spec_method']} "
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
            f"--max-concurrency {conc}, --num-prompts {WAVES * conc} (every one measured), "
            + ("--use-chat-template (the prompt in DeepSeek-R1's chat template), " * spec)
            + "after "
            f"--num-warmups {WARMUP_WAVES * conc} sent and finished apart. Fields: mean_ttft, "
            "mean_tpot (s); "
            "output_tput_per_gpu (utils/process_result.py: output_throughput / tp) times "
            f"{tp} GPUs for the group."
        )
        tput = m.get("output_tput_per_gpu")
        if tput is not None and not consistent(m, conc, gen, tp):
            notes += (
                f" Its output_tput_per_gpu ({tput:.1f}) is left out: its own latencies give "
                f"{conc * gen / m['mean_e2el'] / tp:.0f} a GPU ({conc} clients, a request of "
                f"{gen} tokens every mean_e2el {m['mean_e2el']:.1f} s)."
            )
        parts = [
            f"engine profile {ENGINE[fw]} ({version}) with its own scheduling policy",
            f"closed loop of {conc} clients, {WAVES * conc} requests all measured (the warm-up ran "
            "apart)",
            f"lengths mean {prompt} in / {gen} out, spread {SPREAD} (uniform "
            f"[{RANGE_RATIO} L, L] as [m(1-s), m(1+s)])",
            f"KV cache {kv}" + (" (no --kv-cache-dtype: auto)" if kv == "bf16" else ""),
        ]
        if attention:
            why = "gfx950's alone" if attention == "bf16" else "not MXFP4 math"
            parts.append(f"attention computed in {attention} (AITER's FP8 prefill attention: "
                         f"{why})")
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
        if wait:
            parts.append(f"batch_wait {wait[0]},{wait[1]} (batch_wait_timeout_iters, "
                         "batch_wait_max_tokens_ratio)")
        if moe:
            parts.append(f"moe_backend {moe}" + (f" ({SGLANG_MOE})" if fw == "sglang" else ""))
        if "--enable-flashinfer-allreduce-fusion" in launch:
            parts.append("allreduce_fusion (--enable-flashinfer-allreduce-fusion)")
        if "--disable-radix-cache" in launch:
            parts.append("radix_cache false (--disable-radix-cache; the client sends "
                         "--ignore-eos, so SGLang admits by its exact no-retraction check)")
        if spec:
            parts.append(
                f"speculative mtp, {drafts(r)[0]} draft tokens a step ({drafts(r)[1]}), "
                f"{mtp_accept_length(drafts(r)[0]):.3g} tokens a step by DeepSeek's published "
                "MTP acceptance (scenarios/decoding.py MTP_ACCEPT_LENGTHS)"
            )
        if spec and not overlapped(r):
            parts.append("host_overlap false (SGLANG_ENABLE_SPEC_V2=1 set in the recipe but not "
                         "exported: SGLang's EAGLE without it runs its overlap scheduler off)")
        if prec == "fp4":
            parts.append(
                f"{precision} weights ({ckpt}); attention at the precision's xpusim default"
            )
        if spec and ckpt == NVFP4_CKPT:
            parts.append(f"the MTP layer's weights and matmuls bf16 ({NVFP4_MTP})")
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
        if spec:
            gaps.append(MTP_GAP)
            if streamed_tokens(r, launch) <= 1.02:  # the no-MTP rows' reading of one
                gaps.append(UNSPECULATED_GAP)
        older = {field: older_run_gap(r, history, field) for field in set(MEDIAN.values())}
        later = []
        if "enable_piecewise_cuda_graph" in launch:
            later.append(
                "the launch's piecewise CUDA graphs (TensorRT-LLM torch_compile_config, for "
                "steps with prompt tokens) are not modelled: xpusim runs those steps as the "
                "trtllm profile does"
            )
        metrics = [
            ("ttft_s", m.get("mean_ttft"), "s", "mean_ttft"),
            ("tpot_s", m.get("mean_tpot"), "s", "mean_tpot"),
        ]
        if tput is not None and consistent(m, conc, gen, tp):
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
            own = [*gaps, *filter(None, [older[MEDIAN[metric]]]), *later]
            if metric == "ttft_s":
                if wave := first_wave_gap(m, conc):
                    own.append(wave)
                own.append(TTFT_GAP)
                if fw == "trt":
                    own.append(TRT_TTFT_GAP)
            elif prec == "fp4" and hw != "mi355x":
                own.append(NVFP4_GAP)
            if own:
                p["known_gap"] = "; ".join(own)
            out.append(p)
    return out


def consistent(m: dict[str, Any], conc: int, gen: int, tp: int) -> bool:
    """Whether a row's throughput agrees within 2x with its own latencies (C clients, each a
    request of `gen` tokens every mean_e2el seconds): one MTP row (MI355X ATOM FP8, 1k/1k,
    512 clients) states 25.3 tokens/s a GPU where its latencies give about 1,060, a run whose
    duration held something its requests did not; no other row is off by 10%."""
    if m.get("mean_e2el") is None:
        return True
    return 0.5 < m["output_tput_per_gpu"] * tp / (conc * gen / m["mean_e2el"]) < 2.0


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
    rows, history = (
        json.loads(
            subprocess.run(
                ["git", "-C", args.app, "show", f"{APP_COMMIT}:{path}"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        for path in (FIXTURE, HISTORY)
    )
    rows = [
        r
        for r in rows
        if r["model"] == "dsr1"
        and not r["disagg"]
        and not r["is_multinode"]
        and r["spec_method"] in ("none", "mtp")
        and r["date"] >= SINCE
    ]
    rows.sort(key=lambda r: (r["spec_method"] != "none", *(r[k] for k in RUN)))  # MTP's last
    pts = points(rows, args.recipes, history)
    assert len({p["id"] for p in pts}) == len(pts), "duplicate ids"
    write(pts)
    print(f"{len(rows)} runs, {len(pts)} points written to {PUBLISHED}")


if __name__ == "__main__":
    main()
