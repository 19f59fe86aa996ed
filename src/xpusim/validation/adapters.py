"""Turns a published point into a simulator call, or says why it cannot yet.

One adapter per workload kind; a point whose kind has no adapter, or whose setup the
simulator cannot express, is skipped with its reason instead of being dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from xpusim.memo import scoped
from xpusim.serving.options import REQUESTS_PER_CLIENT
from xpusim.validation.points import Point


class Unexpressible(Exception):
    """The simulator cannot express this point yet; the message says why."""


@dataclass(frozen=True)
class Prediction:
    value: float
    bottleneck: str
    detail: str  # what the simulator chose (plan, precision), for the report


def _llm_inference(point: Point) -> Prediction:
    import xpusim

    if point.get("model") is None:
        raise Unexpressible("no model in the point's setup")
    chips = int(point.get("chips", 1))
    tp = int(point.get("tp", 1))
    plan: dict[str, Any] = {}
    if chips > 1 and tp > 1:
        plan = {"tp": tp, "dp": chips // tp}
    if point.get("microbatches"):
        plan["microbatches"] = int(point.get("microbatches"))
    result = xpusim.simulate(
        point.get("model"), point.chip, chips=chips, batch=int(point.get("batch", 1)),
        prompt=int(point.get("prompt", 128)), gen=int(point.get("gen", 128)),
        precision=point.get("precision"), weight_precision=point.get("weight_precision"),
        attention_precision=point.get("attention_precision"),
        kv_precision=point.get("kv_precision"), **plan,
    )  # fmt: skip
    if not result.fits:
        raise Unexpressible(f"does not fit as specified: {result.reason}")
    metrics = {
        "tokens_per_s_per_user": result.tokens_per_s_per_user,
        "ttft_s": result.ttft_s,
        "tokens_per_s_per_chip": result.tokens_per_s / result.chips,
        # LLMPerf's per-request output throughput: the tokens over the request's whole
        # latency, its TTFT included (ray-project/llmperf, request_output_throughput)
        "request_tokens_per_s": int(point.get("gen", 128)) / result.latency_s,
        "tpot_s": result.tpot_s,
    }
    if point.metric not in metrics:
        raise Unexpressible(f"metric {point.metric!r} is not an LLM inference output")
    if result.layout:  # a torus layout: the one of the phase the metric measures
        phase = "prefill" if point.metric == "ttft_s" else "decode"
        return Prediction(metrics[point.metric], result.bottleneck,
                          result.plan_search["layouts"][phase])  # fmt: skip
    plan_text = " x ".join(f"{k}{v}" for k, v in result.plan.items() if v > 1) or "1 chip"
    searched = " (searched: plan not published)" if result.plan_search else ""
    return Prediction(metrics[point.metric], result.bottleneck, f"{plan_text}{searched}")


def _llm_training(point: Point) -> Prediction:
    """A training run: the point's plan and the settings its `xpusim_setup` explains."""
    import xpusim
    from xpusim.scenarios.training import simulate_training

    settings = ("tp", "pp", "dp", "virtual_stages", "recompute", "zero", "sequence_parallel")
    options = {k: point.get(k) for k in settings if point.get(k) is not None}
    result = simulate_training(
        xpusim.model(point.get("model")), xpusim.target(point.get("system", point.chip)),
        chips=int(point.get("chips")), batch=int(point.get("batch")),
        prompt=int(point.get("prompt")), precision=point.get("precision"), **options,
    )  # fmt: skip
    if not result.fits:
        raise Unexpressible(f"does not fit as specified: {result.reason}")
    if point.metric == "mfu":
        value = result.mfu
    elif point.metric == "tflops_per_chip":
        counted = point.get("flops_counted", "model")
        per_chip = (result.hardware_flops_per_s_per_chip if counted == "hardware"
                    else result.model_flops_per_s_per_chip)  # fmt: skip
        value = per_chip / 1e12
    else:
        raise Unexpressible(f"metric {point.metric!r} is not a training output")
    plan = " x ".join(f"{k}{v}" for k, v in result.plan.items() if v > 1)
    if result.virtual_stages > 1:
        plan += f" (interleaved, {result.virtual_stages} chunks a rank)"
    return Prediction(value, result.bottleneck, plan)


SERVING_REQUESTS = {"concurrency": REQUESTS_PER_CLIENT, "rate": 2000, "max-rate": 1500}
"""Requests simulated per point where its source states none (a load's `requests` and
`warmup` are the benchmark's own: its --num-prompts, every one measured, as vLLM's
benchmark_serving and SGLang's bench_serving count them, their single test prompt run
before and apart): 8 per client of a closed loop (a tenth are warm-up; serve's own
default, serving/options.default_requests), 2,000 Poisson arrivals, 1,500 per trial of a
max-rate search (at least four per slot), and for
offline what serve's --find offline draws (serving/capacity.offline_requests: MLPerf's
Offline and trtllm-bench issue every request at once; serve sizes the burst by the sequences
the KV cache holds, OFFLINE_ROUNDS of them, and takes its steady-state rate)."""


@scoped(maxsize=64)
def _served(model: str, chip: str, power_limit_w: float | None, options: tuple) -> Any:
    """One serving run per setup: a source's mean and p99, TTFT and TPOT of one run are
    four points of one simulation. A GPU capped below its TDP (`nvidia-smi -pl`, as MLPerf's
    MaxQ submissions run) is simulated with the cap as its TDP: the energy model spreads a
    thermal budget over the chip's units (hardware/spec.py), so the cap scales every op's
    energy down; its clock, and so its speed, is not modelled as falling."""
    import xpusim
    from xpusim.hardware.whatif import apply

    target = xpusim.target(chip)
    if power_limit_w is not None:
        target = apply(target, [("tdp_w", power_limit_w)])
    return xpusim.serve(model, target, **dict(options))


def _power(point: Point, result: Any) -> dict[str, float]:
    """Power the sources measure: one chip's (GPU counters: Zeus, nvidia-smi), and a node's
    at the wall (MLPerf's analyzer): its measured idle floor, which already holds every chip
    idle, plus each chip's simulated draw above its static power."""
    values = {"avg_power_w": result.avg_power_w}
    idle = point.get("host_idle_w")
    if idle is not None:
        import xpusim

        static = xpusim.target(point.chip)
        static_w = getattr(static, "chip", static).energy.static_power_w.value
        values["system_power_w"] = float(idle) + result.chips * (result.avg_power_w - static_w)
    return values


def serving_result(point: Point) -> Any:
    """The serving run a serving point is scored on (a ServingResult): the engine's profile
    and scheduler as the point names them (data in published.json, with why), requests as
    SERVING_REQUESTS. Public so that a study can read the run's parts (its front end, queue
    and prompt steps: benchmarks/low_load_ttft.py) of the same simulation the score used."""

    if point.get("prompt") is None or point.get("gen") is None:
        raise Unexpressible("the source states no mean input or output length")
    load = point.get("load")
    options: dict[str, Any] = {
        "prompt": int(point.get("prompt")), "gen": int(point.get("gen")),
        "precision": point.get("precision"), "weight_precision": point.get("weight_precision"),
        "attention_precision": point.get("attention_precision"),
        "kv_precision": point.get("kv_precision"), "moe_backend": point.get("moe_backend"),
        "chips": int(point.get("chips", 1)), "tp": int(point.get("tp", 1)),
        "ep": int(point.get("ep") or 1), "dp_attention": bool(point.get("dp_attention")),
        "engine": point.get("engine_profile", "ideal"),
        "scheduler": point.get("scheduler"),  # none stated: the engine's own policy
    }  # fmt: skip
    if spec := point.get("speculative"):  # SPECULATIVE_KEYS, with serve's meanings
        options |= {"speculative": spec["kind"], "draft_tokens": spec.get("draft_tokens"),
                    "acceptance": spec.get("acceptance"),
                    "accept_length": spec.get("accept_length"),
                    "draft_precision": spec.get("precision")}  # fmt: skip
    for setting in ("spread", "kv_utilization"):  # the client's length spread, the launch's
        if point.get(setting) is not None:  # memory fraction
            options[setting] = float(point.get(setting))
    for setting in ("token_budget", "max_batch", "decode_steps", "recv_interval", "kv_block",
                    "dp_prefill_batch"):
        if point.get(setting) is not None:
            options[setting] = int(point.get(setting))
    if point.get("graph_sizes") is not None:  # the CUDA graphs the source's config captured
        options["graph_sizes"] = ",".join(str(int(n)) for n in point.get("graph_sizes"))
    if point.get("graph_pad") is not None:
        options["graph_pad"] = point.get("graph_pad")
    if point.get("adp_balance") is not None:  # [batching_wait_iters, timeout_iters]
        options["adp_balance"] = ",".join(str(int(n)) for n in point.get("adp_balance"))
    if point.get("batch_wait") is not None:  # [batch_wait_timeout_iters, max_tokens_ratio]
        iters, ratio = point.get("batch_wait")
        options["batch_wait"] = f"{int(iters)},{float(ratio)}"
    if point.get("gemm_allreduce"):  # the config's fused row-parallel GEMM + all-reduce
        options["gemm_allreduce"] = True
    if point.get("allreduce_fusion"):  # SGLang's --enable-flashinfer-allreduce-fusion
        options["allreduce_fusion"] = True
    if point.get("radix_cache") is False:  # SGLang's --disable-radix-cache
        options["radix_cache"] = False
    if point.get("moe_input") is not None:  # the launch's MXFP4 experts' input format
        options["moe_input"] = point.get("moe_input")
    if point.get("host_overlap") is not None:  # SGLang's overlap scheduler, on or off
        options["host_overlap"] = bool(point.get("host_overlap"))
    if point.get("frontend_ms") is not None:  # 0: a harness calling the engine in-process
        options["frontend_ms"] = float(point.get("frontend_ms"))
    if point.get("api_servers") is not None:  # the launch's --api-server-count; 0: in-process
        options["api_servers"] = int(point.get("api_servers"))
    if point.get("penalties"):  # the client's repetition/frequency/presence penalty
        options["penalties"] = True
    if point.get("lengths"):  # a dataset's per-request lengths, beside published.json
        from xpusim.validation.points import DATA

        options["lengths"] = str(DATA.parent / point.get("lengths"))
        if point.get("scale_gen"):  # the file's output shape at the run's own mean (gen)
            options["scale_gen"] = True
    kind = load["kind"]
    if kind == "concurrency":
        c = int(load["value"])
        options |= {"concurrency": c, "requests": max(SERVING_REQUESTS[kind] * c, 100)}
    elif kind == "burst":  # every request at once, the run ends when they finish
        c = int(load["value"])
        options |= {"concurrency": c, "requests": c, "warmup": 0}
    elif kind == "rate":
        options |= {"rate": float(load["value"]), "requests": SERVING_REQUESTS[kind]}
    elif kind == "max-rate":
        options |= {"find": "max-rate", "requests": SERVING_REQUESTS[kind],
                    "slo_ttft_ms": load.get("slo_ttft_ms"), "slo_tpot_ms": load.get("slo_tpot_ms"),
                    "trials": "decided"}  # trials end once decided (serving/decision.py)
    elif kind == "offline":  # the whole set at once, measured to its last token
        import xpusim
        from xpusim.serving.capacity import offline_requests
        from xpusim.serving.engines import engine

        chip = xpusim.target(point.chip)
        chip = getattr(chip, "chip", chip)
        batch = options.get("max_batch") or engine(options["engine"]).limits_on(
            chip.id, chip.capacity_bytes).max_batch  # the source's, or the engine's default
        n = offline_requests(batch, options["chips"] // options["tp"])  # serve trims it
        options |= {"find": "offline", "concurrency": n, "requests": n, "warmup": 0}
    else:
        raise Unexpressible(f"load kind {kind!r}")
    if kind in ("concurrency", "rate"):  # the client's prompts and warm-up as the source ran them
        options |= {k: int(load[k]) for k in ("requests", "warmup") if load.get(k) is not None}
    if point.get("cold_start"):  # empty kernel caches at launch; the client's warm-up compiled
        options |= {"cold_start": True, "client_warmup": int(load.get("client_warmup") or 0)}
    if load.get("hold_s") is not None:  # the harness's batcher, between loadgen and the engine
        options |= {"hold_s": float(load["hold_s"]), "hold_batch": int(load["hold_batch"])}
    limit = point.get("power_limit_w")
    result = _served(point.get("model"), point.chip, limit and float(limit),
                     tuple(sorted(options.items())))  # fmt: skip
    if not result.fits:
        raise Unexpressible(f"does not fit as specified: {result.reason}")
    return result


def _llm_serving(point: Point) -> Prediction:
    """A serving measurement at a stated load: the point's statistic of its run's metric."""
    result = serving_result(point)
    stat = point.get("stat", "mean")  # tpot_s: a request's mean gap (benchmark_serving's
    # TPOT); itl_s: every token's gap pooled (ML.ENERGY's median ITL)
    values = {"ttft_s": result.ttft_s and getattr(result.ttft_s, stat),
              "tpot_s": result.tpot_s and getattr(result.tpot_s, stat),
              "itl_s": result.itl_s and getattr(result.itl_s, stat),
              "output_tokens_per_s": result.output_tokens_per_s,
              "requests_per_s": result.requests_per_s, **_power(point, result)}  # fmt: skip
    if point.metric not in values or values[point.metric] is None:
        raise Unexpressible(f"metric {point.metric!r} is not a serving output")
    detail = (f"{result.replicas} x tp{int(point.get('tp', 1))}, {result.scheduler}, "
              f"{point.get('engine_profile', 'ideal')}")
    return Prediction(float(values[point.metric]), "serving", detail)


def _gemm(point: Point) -> Prediction:
    """A lone GEMM with its operands where the benchmark kept them (scenarios/gemm.py)."""
    import xpusim
    from xpusim.scenarios.gemm import gemm

    if point.metric != "ops_per_s":
        raise Unexpressible("a ratio of two chips' perf/W on the paper's power basis: "
                            "docs/chips/mtia-v1.md compares them")  # fmt: skip
    m, k, n = (int(point.get(d)) for d in "mkn")
    operands = point.get("operands", "on-chip")
    quantization = point.get("quantization", "static")
    got = gemm(xpusim.chip(point.chip), m, k, n, point.get("precision"), operands, quantization)
    dynamic = " dynamic" if quantization == "dynamic" else ""
    return Prediction(got.ops_per_s, got.bottleneck, f"{m}x{k}x{n} {point.get('precision')}"
                                                     f"{dynamic}, operands {operands}")  # fmt: skip


def _cnn(point: Point) -> Prediction:
    """Images per second of a zoo CNN at the point's batch: MLPerf Offline's throughput at a
    large batch (its batch is not published with the result; xpusim's throughput is within
    8% of its limit from 256 images up), or a stated batch (Groq's batch 1)."""
    import xpusim

    batch = int(point.get("batch", 256))
    r = xpusim.simulate(point.get("model"), point.chip, batch=batch,
                        precision=point.get("precision"))
    return Prediction(r.throughput, r.bottleneck, f"batch {batch}")


def _encoder(point: Point) -> Prediction:
    """Sequences per second of a zoo encoder (BERT) at the point's sequence length: MLPerf
    Offline's throughput, at a large batch as for CNNs (the batch is not published)."""
    import xpusim

    batch, seq = int(point.get("batch", 256)), int(point.get("seq", 128))
    r = xpusim.simulate(point.get("model"), point.chip, batch=batch, prompt=seq,
                        precision=point.get("precision"))  # fmt: skip
    return Prediction(r.throughput, r.bottleneck, f"batch {batch}, {seq} tokens each")


ADAPTERS: dict[str, Callable[[Point], Prediction]] = {
    "cnn-inference": _cnn,
    "encoder-inference": _encoder,
    "llm-serving": _llm_serving,
    "llm-inference": _llm_inference,
    "llm-training": _llm_training,
    "gemm": _gemm,
}
"""Workload kind -> adapter. Other scenarios register theirs here as they land."""


def predict(point: Point) -> Prediction:
    if point.workload == "recsys-inference" and point.known_gap:
        raise Unexpressible(point.known_gap)
    if reason := point.get("not_expressible"):  # a published figure kept with its source:
        raise Unexpressible(reason)  # the point says what setup its source leaves out
    if not isinstance(point.value, int | float):
        raise Unexpressible("a published range or qualitative claim, discussed in the docs")
    if point.get("calibration_of"):  # the chip file's figure is this point: never scored
        raise Unexpressible(f"the chip file's {point.get('calibration_of')} is this figure: "
                            "scoring it would score the figure against itself")  # fmt: skip
    adapter = ADAPTERS.get(point.workload)
    if adapter is None:
        raise Unexpressible(f"no {point.workload} scenario in the simulator yet")
    return adapter(point)
