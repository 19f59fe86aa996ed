"""The published serving points of issue #48: each loads with a closed key set, names its source
and engine version, and a setting serve cannot run yet is refused by name, never dropped."""

from __future__ import annotations

import contextlib
import json
import math
import re

import pytest

import xpusim
from xpusim.validation import adapters
from xpusim.validation.points import DATA, SERVING_KEYS, Point, check_keys, load_points

SERVING = [p for p in load_points() if p.workload == "llm-serving"]
ISSUE_48 = [p for p in SERVING if p.get("engine_version")]  # the points #48 added carry it


def _site(source: str) -> str:
    """A source is its site and owner: github.com/mlcommons, github.com/dstackai, ..."""
    return "/".join(source.split(" ")[0].removeprefix("https://").split("/")[:2])


def test_issue_48_adds_150_points_from_five_sources_three_vendors_moe_and_mla():
    assert len(ISSUE_48) >= 150
    # MLPerf's are several submitters' runs (NVIDIA, Dell, GigaComputing, Google, Nebius,
    # AMD, ASUSTeK), published through one site: counted apart as the submitters they are
    sites = {_site(p.source) for p in ISSUE_48 if "mlcommons" not in p.source}
    submitters = {p.source.split("closed/")[1].split("/")[0] for p in ISSUE_48
                  if "mlcommons" in p.source}  # fmt: skip
    assert len(sites) + len(submitters) >= 5 and len(sites) >= 3
    vendors = {xpusim.chip(p.chip).vendor.split()[0] for p in ISSUE_48}
    assert {"NVIDIA", "AMD", "Google"} <= vendors
    models = {p.get("model") for p in ISSUE_48}
    assert {"deepseek-r1", "mixtral-8x7b", "gpt-oss-120b", "qwen3-235b-a22b"} <= models
    for metric in ("ttft_s", "tpot_s", "output_tokens_per_s"):
        assert any(p.metric == metric for p in ISSUE_48)


@pytest.mark.parametrize("point", ISSUE_48, ids=lambda p: p.id)
def test_each_new_point_names_its_source_engine_and_settings(point: Point):
    if point.source.startswith("https://"):  # a web page: the date of the copy read
        assert re.search(r"updated \d{1,2} \w+ \d{4}", point.source), \
            "a web page source names the date of the copy read"
    else:
        assert "commit" in point.source, "a repository source names its commit"
    assert point.get("engine") and point.get("engine_version") and point.get("engine_profile")
    assert point.get("prompt") and point.get("gen") and point.get("precision")
    assert point.get("load")["kind"] in ("concurrency", "rate", "max-rate", "offline", "burst")
    assert point.notes and point.get("xpusim_setup")
    if point.get("lengths"):
        assert (DATA.parent / point.get("lengths")).is_file()


TRTLLM_BENCH = [p for p in SERVING if "perf-overview" in p.source]
"""TensorRT-LLM's perf-overview tables: `trtllm-bench throughput` at maximum load."""


def test_trtllm_bench_points_never_preempt():
    """trtllm-bench throughput runs TensorRT-LLM's GUARANTEED_NO_EVICT capacity scheduler
    (tensorrt_llm/bench/benchmark/throughput.py: hard-coded, later the default of its
    --scheduler_policy), context chunking off: a request starts only with the KV blocks of
    its whole length, so none is ever evicted and recomputed. The inflight policy is that;
    a decode-first run preempted 1.7 sequences a request at Llama-3-405B's 500/2,000 on
    8 H100s and spent its step time recomputing them."""
    assert len(TRTLLM_BENCH) >= 100
    assert {p.get("scheduler") for p in TRTLLM_BENCH} == {"inflight"}
    assert all(p.get("load")["kind"] == "offline" for p in TRTLLM_BENCH)


def test_trtllm_bench_steps_hold_a_whole_prompt_beside_the_batch():
    """With context chunking off trtllm-bench raises max_num_tokens to the longest prompt
    plus max_batch_size (tensorrt_llm/bench/benchmark/utils/general.py get_settings): a
    20,000-token prompt never waits for a step without decodes. Under the profile's 8,192
    the 405B 20k/2k rows ran one sequence at a time (0.09x the measured tok/s)."""
    for p in TRTLLM_BENCH:
        budget = p.get("token_budget") or 8192
        assert budget >= p.get("prompt") + 2048 or p.get("prompt") + 2048 <= 8192, p.id


def test_serving_key_sets_are_closed():
    """Every serving point's keys are known; an unknown one, at the top or in a nested
    load or speculative setting, is an error naming it (it was silently ignored before)."""
    raw = json.loads(DATA.read_text())["points"]
    for p in raw:
        check_keys(p)  # the committed file passes
        if p["workload"] == "llm-serving":
            assert set(p) <= SERVING_KEYS
    base = next(p for p in raw if p["workload"] == "llm-serving")
    with pytest.raises(ValueError, match=r"unknown key.*expert_parallel"):
        check_keys(base | {"expert_parallel": 8})
    with pytest.raises(ValueError, match=r"\.load: unknown key.*burst"):
        check_keys(base | {"load": {"kind": "rate", "value": 1, "burst": 2}})
    with pytest.raises(ValueError, match=r"\.speculative: unknown key.*tokens"):
        check_keys(base | {"speculative": {"kind": "mtp", "tokens": 3}})


def _options_served(monkeypatch) -> list[dict]:
    """The serve options each adapter call asks for, recorded in place of a simulation."""
    seen: list[dict] = []

    class Served:
        fits, replicas, output_tokens_per_s, requests_per_s, avg_power_w = True, 1, 1.0, 1.0, 1.0
        ttft_s = tpot_s = itl_s = None
        scheduler = "chunked"

    monkeypatch.setattr(adapters, "_served", lambda *a: seen.append(dict(a[3])) or Served())
    return seen


def test_a_points_speculative_setting_reaches_serve_with_its_meanings(monkeypatch):
    """A point with drafts is simulated with them (serve's --speculative, --draft-tokens,
    --acceptance), never as a plain run."""
    seen = _options_served(monkeypatch)
    setup = {"model": "deepseek-r1", "chips": 8, "tp": 8, "prompt": 1024, "gen": 1024,
             "precision": "fp8", "load": {"kind": "concurrency", "value": 64},
             "speculative": {"kind": "mtp", "draft_tokens": 3, "acceptance": 0.7}}  # fmt: skip
    point = Point("p", "llm-serving", "h200-sxm", "output_tokens_per_s", 1.0, "t", setup=setup)
    adapters._llm_serving(point)
    assert (seen[0]["speculative"], seen[0]["draft_tokens"], seen[0]["acceptance"]) \
        == ("mtp", 3, 0.7)
    measured = {**setup, "speculative": {"kind": "mtp", "draft_tokens": 3, "accept_length": 2.4},
                "host_overlap": False}  # fmt: skip
    adapters._llm_serving(Point("q", "llm-serving", "h200-sxm", "output_tokens_per_s", 1.0, "t",
                                setup=measured))
    assert (seen[1]["accept_length"], seen[1]["acceptance"], seen[1]["host_overlap"]) \
        == (2.4, None, False)
    check_keys({"workload": "llm-serving", "id": "q", **measured})


@pytest.mark.parametrize(("ep", "dp_attention"), [(1, False), (8, True), (8, False)])
def test_ep_and_dp_attention_reach_serve_as_the_engines_flags(monkeypatch, ep, dp_attention):
    """Experts over TP's GPUs and attention data-parallelism are passed to serve with the
    engines' meanings (chips stay tp, not tp x ep)."""
    seen = _options_served(monkeypatch)
    setup = {"model": "deepseek-r1", "chips": 8, "tp": 8, "prompt": 1024, "gen": 1024, "ep": ep,
             "dp_attention": dp_attention, "load": {"kind": "offline"}}  # fmt: skip
    point = Point("p", "llm-serving", "h200-sxm", "output_tokens_per_s", 1.0, "t", setup=setup)
    adapters._llm_serving(point)
    assert seen[0]["ep"] == ep and seen[0]["dp_attention"] is dp_attention
    assert seen[0]["chips"] == 8 and seen[0]["tp"] == 8


def test_the_engine_gates_a_point_states_reach_serve(monkeypatch):
    """vLLM V0's num_scheduler_steps (decode_steps) and TensorRT-LLM's attention-DP balancer
    ([batching_wait_iters, timeout_iters]) as serve's --decode-steps and --adp-balance; every
    point of AMD's V0 MLPerf v5.1 runs and the B200 DeepSeek-R1 Server runs carries its own."""
    seen = _options_served(monkeypatch)
    setup = {"model": "deepseek-r1", "chips": 8, "tp": 8, "ep": 8, "dp_attention": True,
             "prompt": 1024, "gen": 1024, "decode_steps": 8, "adp_balance": [3, 9],
             "load": {"kind": "rate", "value": 5}}  # fmt: skip
    point = Point("p", "llm-serving", "b200", "output_tokens_per_s", 1.0, "t", setup=setup)
    adapters._llm_serving(point)
    assert (seen[0]["decode_steps"], seen[0]["adp_balance"]) == (8, "3,9")
    check_keys({"workload": "llm-serving", "id": "p", **setup})
    amd = ("mlperf51-amd-mi300x8", "mlperf51-amd-mi325x8-mix")
    runs = [p for p in SERVING if p.id.startswith(amd) and p.get("scheduler") == "continuous"]
    assert len(runs) == 20 and all(p.get("decode_steps") in (8, 9, 10) for p in runs)
    balanced = [p for p in SERVING if "deepseek-r1-server" in p.id and p.chip == "b200"]
    assert len(balanced) == 25 and all(p.get("adp_balance") for p in balanced)


def test_the_configs_fused_gemm_all_reduce_reaches_serve_on_the_405b_points(monkeypatch):
    """The MLPerf v5.1 Llama-3.1-405B configs build gemm_allreduce_plugin (NVIDIA B200 and
    Nebius H200, Server and Interactive: line 34); those 20 points carry it, no other does,
    and it reaches serve as --gemm-allreduce."""
    fused = [p for p in SERVING if p.get("gemm_allreduce")]
    assert len(fused) == 20 and all("llama-3-405b" in p.id and p.id.startswith(
        ("mlperf51-nvidia-b200x8", "mlperf51-nebius-h200x8")) for p in fused)  # fmt: skip
    seen = _options_served(monkeypatch)
    adapters._llm_serving(fused[0])
    adapters._llm_serving(next(p for p in SERVING if p.id.startswith("mlperf51-nvidia-b200x8-d")))
    assert seen[0]["gemm_allreduce"] is True and "gemm_allreduce" not in seen[1]


def test_the_mlperf_405b_runs_route_and_batch_as_their_harness_configs():
    """NVIDIA's MLPerf v5.1 harness sends a Server query to the instance with the fewest
    pending (serve's routing) and an Interactive one to the next instance in turn
    (closed/NVIDIA/code/llmlib/config.py traffic_distribution_policy: a batcher of one);
    Nebius's H200 configs cap the executor at their runtime max_batch_size 64, not the
    build's gpu_batch_size 512 (trtllm_runtime_flags)."""
    b200 = [p for p in SERVING if p.id.startswith("mlperf51-nvidia-b200x8-llama-3-405b")]
    assert len(b200) == 10 and all(p.get("chips") // p.get("tp") == 2 for p in b200)
    for p in b200:
        load = p.get("load")
        if "-interactive-" in p.id:
            assert load["hold_batch"] == 1 and "round_robin" in p.get("xpusim_setup")
        else:
            assert "hold_s" not in load and "load_balancing" in p.get("xpusim_setup")
    nebius = [p for p in SERVING if p.id.startswith("mlperf51-nebius-h200x8-llama-3-405b")]
    assert len(nebius) == 10
    assert all(p.get("max_batch") == 64 and "lines 42 and 47" in p.get("xpusim_setup")
               for p in nebius)  # fmt: skip


def test_a_closed_loop_runs_the_prompts_and_warmup_its_source_states(monkeypatch):
    """bench_serving/benchmark_serving at --max-concurrency C with --num-prompts N measure
    every one of the N, the first C sent at once (their test prompt runs before and apart):
    the adapter runs N with no warm-up where the point says so, else its own default."""
    seen = _options_served(monkeypatch)
    setup = {"model": "deepseek-r1", "chips": 8, "tp": 8, "prompt": 3200, "gen": 800,
             "load": {"kind": "concurrency", "value": 64, "requests": 500, "warmup": 0}}
    point = Point("p", "llm-serving", "h200-sxm", "output_tokens_per_s", 1.0, "t", setup=setup)
    adapters._llm_serving(point)
    assert (seen[0]["concurrency"], seen[0]["requests"], seen[0]["warmup"]) == (64, 500, 0)
    unstated = Point("q", "llm-serving", "h200-sxm", "output_tokens_per_s", 1.0, "t",
                     setup=setup | {"load": {"kind": "concurrency", "value": 64}})
    adapters._llm_serving(unstated)
    assert seen[1]["requests"] == adapters.SERVING_REQUESTS["concurrency"] * 64
    assert "warmup" not in seen[1]
    check_keys({"workload": "llm-serving", "id": "p", **setup})


MLPERF_AT_A_RATE = [p for p in SERVING
                    if p.id.startswith("mlperf") and p.get("load")["kind"] == "rate"]  # fmt: skip


@pytest.mark.parametrize("point", MLPERF_AT_A_RATE, ids=lambda p: p.id)
def test_an_mlperf_server_run_is_simulated_past_the_engines_fill(point: Point, monkeypatch):
    """MLPerf's Server statistics are over at least 600 s of arrivals (loadgen's min_duration),
    in which an engine filling from empty is a few percent; 2,000 requests at 100 per second
    over 8 replicas are 20 s, most of it the fill (TPOT 0.27x of NVIDIA's H200 run, 0.34x
    past the fill). So a run of MLPerf's at a rate is min(rate x 600 s, 16,000) requests, its
    first quarter warm-up; DeepSeek-R1's (3,700-token requests, its MoE step 4x cheap: not a
    run-length gap) and those whose 2,000 requests already span 600 s keep the default."""
    load = point.get("load")
    wanted = min(math.ceil(float(load["value"]) * 600), 16000)
    if "deepseek" in point.id or wanted <= adapters.SERVING_REQUESTS["rate"]:
        assert "requests" not in load
        return
    assert (load["requests"], load["warmup"]) == (wanted, wanted // 4)
    assert "600 s" in point.get("xpusim_setup")
    seen = _options_served(monkeypatch)
    monkeypatch.setattr(adapters, "_power", lambda *a: {})
    with contextlib.suppress(adapters.Unexpressible):  # the stub has no TTFT or TPOT
        adapters._llm_serving(point)
    assert (seen[0]["rate"], seen[0]["requests"], seen[0]["warmup"]) == \
        (float(load["value"]), wanted, wanted // 4)  # fmt: skip


def test_a_burst_point_sends_every_request_at_once(monkeypatch):
    """GPUStack's runs set no request rate or client limit: vllm bench sends every prompt at
    t=0 and counts them all, so a burst point is that many clients with one request each."""
    seen = _options_served(monkeypatch)
    bursts = [p for p in ISSUE_48 if p.get("load")["kind"] == "burst"]
    assert len(bursts) >= 60
    bursts = [p for p in bursts if p.metric == "output_tokens_per_s"]  # what the stand-in has
    for point in bursts:
        adapters._llm_serving(point)
        n = point.get("load")["value"]
        assert (seen[-1]["concurrency"], seen[-1]["requests"], seen[-1]["warmup"]) == (n, n, 0)


INFERENCEX = [p for p in SERVING if p.id.startswith("inferencex-")]
"""InferenceX's (formerly InferenceMAX) single-node DeepSeek-R1-0528 runs: the dashboard's rows
with each recipe's launch flags (docs/validation.md)."""


def test_inferencex_runs_each_give_ttft_tpot_and_throughput_on_six_chips_three_engines():
    runs: dict[str, set[str]] = {}
    for p in INFERENCEX:
        runs.setdefault(p.id.rsplit("-", 1)[0], set()).add(p.metric)
    assert len(runs) >= 60
    notes = {p.id.rsplit("-", 1)[0]: p.notes for p in INFERENCEX}
    for run, metrics in runs.items():  # throughput where the row's agrees with its latencies
        dropped = "output_tput_per_gpu" in notes[run] and "is left out" in notes[run]
        assert metrics == {"ttft_s", "tpot_s"} | (set() if dropped else {"output_tokens_per_s"})
    assert sum("is left out" in n for n in notes.values()) == 1
    chips = {"h200-sxm", "b200", "b300", "mi300x", "mi325x", "mi355x"}
    assert {p.chip for p in INFERENCEX} == chips
    assert {p.get("engine") for p in INFERENCEX} == {"sglang", "trtllm", "atom"}


@pytest.mark.parametrize("point", INFERENCEX[::3], ids=lambda p: p.id)
def test_an_inferencex_run_is_its_clients_prompts_and_range_ratio(point: Point):
    """benchmark_serving.py draws each length uniform in [int(0.8 L), L] (--random-range-ratio
    0.8): the mean and spread serve draws about it span the same range; --num-prompts is 10 x
    --max-concurrency, every one measured (the 2 x C warm-up requests run apart, stated as
    `client_warmup`)."""
    load = point.get("load")
    assert load == {"kind": "concurrency", "value": load["value"], "requests": 10 * load["value"],
                    "warmup": 0, "client_warmup": 2 * load["value"]}  # fmt: skip
    for mean in (point.get("prompt"), point.get("gen")):
        top = next(n for n in (1024, 8192) if abs(mean - 0.9 * n) < 2)
        assert mean * (1 - point.get("spread")) == pytest.approx(0.8 * top, abs=2)
        assert mean * (1 + point.get("spread")) == pytest.approx(top, abs=2)
    assert point.get("chips") == point.get("tp")  # a run's GPUs are its tensor-parallel group


MTP = [p for p in INFERENCEX if "spec_method=mtp" in p.source]
"""InferenceX's MTP runs: each recipe's *_mtp.sh, speculative decoding with DeepSeek's MTP layer."""


def test_inferencex_mtp_runs_state_their_recipes_draft_tokens_and_no_acceptance_of_their_own():
    """Every MTP run drafts what its launch line says (SGLang --speculative-num-steps K with
    --speculative-num-draft-tokens K + 1, TensorRT-LLM num_nextn_predict_layers K, ATOM
    --num-speculative-tokens or its default 1) and states no acceptance: each takes DeepSeek's
    published curve (scenarios/decoding.py MTP_ACCEPT_LENGTHS), never one read from the run it is
    scored against; every other run states no speculation; SGLang's MTP runs capture its
    speculative batch sizes (1-8 one apart, then 2, 4 and 8 apart to 256)."""
    from xpusim.scenarios.decoding import mtp_accept_length

    assert len(MTP) >= 150 and {p.get("engine") for p in MTP} == {"sglang", "trtllm", "atom"}
    for p in INFERENCEX:
        spec = p.get("speculative")
        if p not in MTP:
            assert spec is None and "-mtp-" not in p.id, p.id
            continue
        assert "-mtp-" in p.id and set(spec) <= {"kind", "draft_tokens", "precision"}, p.id
        assert spec["kind"] == "mtp", p.id
        k = spec["draft_tokens"]
        assert f"{mtp_accept_length(k):.3g} tokens a step by DeepSeek's published" in p.get(
            "xpusim_setup"), p.id
        said = {"sglang": f"--speculative-num-steps {k} --speculative-num-draft-tokens {k + 1} ",
                "trtllm": f"num_nextn_predict_layers {k}",
                "atom": "--method mtp" + (f" --num-speculative-tokens {k}" if k > 1 else "")}
        assert said[p.get("engine")] in p.notes, p.id
        assert "--use-chat-template" in p.notes, p.id
        if p.get("engine") == "sglang":  # SGLang 0.5 _generate_cuda_graph_batch_sizes, spec
            sizes = p.get("graph_sizes")
            spec_sizes = [*range(1, 9), *range(10, 33, 2), *range(40, 65, 4),
                          *range(72, 257, 8), *range(272, 513, 16)]  # fmt: skip
            assert sizes == [n for n in spec_sizes if n <= sizes[-1]], p.id
            assert f"--cuda-graph-max-bs{'=' if '-bs=' in p.notes else ' '}{sizes[-1]}" in p.notes


def test_only_the_sglang_mtp_recipes_that_do_not_export_spec_v2_run_host_work_in_line():
    """SGLang's EAGLE/MTP turns its overlap scheduler off without SGLANG_ENABLE_SPEC_V2 in its
    environment: the B200 and B300 FP8 recipes set it without `export`
    (inferencex_points.overlapped), every other run keeps its engine's overlap."""
    off = [p for p in INFERENCEX if p.get("host_overlap") is not None]
    assert off and all(p.get("host_overlap") is False and p in MTP for p in off)
    assert {(p.chip, p.get("engine"), p.get("precision")) for p in off} \
        == {("b200", "sglang", "fp8"), ("b300", "sglang", "fp8")}
    assert all("host_overlap false" in p.get("xpusim_setup") for p in off)


def test_a_runs_streamed_tokens_are_its_chunks_tokens_over_its_stream_interval(monkeypatch):
    """The client's mean gap between streamed chunks over its mean time per token is the
    tokens a chunk carried; a chunk is the stream interval's steps (none: one). Only a known
    gap reads it (the MI325X SGLang MTP runs' one token a step), never a point's setting."""
    monkeypatch.syspath_prepend(str(DATA.parents[3] / "benchmarks"))
    from inferencex_points import streamed_tokens

    def row(itl: float, tpot: float) -> dict:
        return {"metrics": {"mean_itl": itl, "mean_tpot": tpot}}

    assert streamed_tokens(row(0.6, 0.01), "--stream-interval 30 --x") == 2.0
    assert streamed_tokens(row(0.2, 0.01), "stream_interval 10, moe_config") == 2.0
    assert streamed_tokens(row(0.025, 0.01), "sglang.launch_server --tp 8") == 2.5
    unspeculated = [p for p in MTP if "seems not to have speculated" in p.known_gap]
    assert unspeculated and {(p.chip, p.get("engine")) for p in unspeculated} \
        == {("mi325x", "sglang")}
    assert all(p.get("speculative") for p in unspeculated)  # scored as launched


def test_a_points_spread_and_memory_fraction_reach_serve(monkeypatch):
    """The client's length spread and the launch's memory fraction (SGLang's 0.8 on an MI300X
    is 154 GB for weights and KV; SGLang's own rule for an unset one, with a 131,072-token
    chunk, reserves more than the GPU holds) are serve's --spread and --kv-utilization."""
    seen = _options_served(monkeypatch)
    setup = {"model": "deepseek-r1", "chips": 8, "tp": 8, "prompt": 922, "gen": 922,
             "spread": 0.111, "kv_utilization": 0.8,
             "load": {"kind": "concurrency", "value": 4}}  # fmt: skip
    point = Point("p", "llm-serving", "h200-sxm", "output_tokens_per_s", 1.0, "t", setup=setup)
    adapters._llm_serving(point)
    assert (seen[0]["spread"], seen[0]["kv_utilization"]) == (0.111, 0.8)
    bare = {k: v for k, v in setup.items() if k not in ("spread", "kv_utilization")}
    adapters._llm_serving(Point("q", "llm-serving", "h200-sxm", "output_tokens_per_s", 1.0, "t",
                                setup=bare))
    assert "spread" not in seen[1] and "kv_utilization" not in seen[1]
    check_keys({"workload": "llm-serving", "id": "p", **setup})


def test_inferencex_sglang_runs_state_the_moe_backend_their_launch_runs():
    """`--moe-runner-backend flashinfer_trtllm` runs FlashInfer's trtllm-gen MoE kernels, the
    ones TensorRT-LLM's moe_backend TRTLLM runs: every SGLang run whose launch names it
    states TRTLLM (its NVFP4 experts at 1-16 tokens a rank take that backend's measured rows
    on B200), and no other SGLang run states a backend."""
    sglang = [p for p in INFERENCEX if p.get("engine") == "sglang"]
    named = [p for p in sglang if "--moe-runner-backend flashinfer_trtllm" in p.notes]
    assert {p.chip for p in named} == {"b200", "b300"}
    for p in sglang:
        assert p.get("moe_backend") == ("TRTLLM" if p in named else None), p.id


def test_inferencex_sglang_runs_state_the_receive_interval_their_launch_sets():
    """The B200 and B300 SGLang recipes set --scheduler-recv-interval (10 below 16 clients, 30
    from 16, 10 for FP8 at TP 4): each of those points states it as recv_interval, as its
    launch line reads, and it reaches serve; no other run states one."""
    for p in INFERENCEX:
        n = p.get("recv_interval")
        if p.get("engine") == "sglang" and p.chip in ("b200", "b300"):
            assert f"--scheduler-recv-interval {n} " in p.notes, p.id
            want = 10 if (p.get("precision") == "fp8" and p.get("tp") == 4) else \
                (30 if p.get("load")["value"] >= 16 else 10)
            assert n == want, p.id
        else:
            assert n is None, p.id


def test_a_points_receive_interval_reaches_serve(monkeypatch):
    seen = _options_served(monkeypatch)
    setup = {"model": "deepseek-r1", "chips": 8, "tp": 8, "prompt": 922, "gen": 922,
             "recv_interval": 30, "load": {"kind": "concurrency", "value": 64}}  # fmt: skip
    point = Point("p", "llm-serving", "b200", "output_tokens_per_s", 1.0, "t", setup=setup)
    adapters._llm_serving(point)
    assert seen[0]["recv_interval"] == 30
    check_keys({"workload": "llm-serving", "id": "p", **setup})


def test_a_points_batch_wait_reaches_serve(monkeypatch):
    """TensorRT-LLM's batch_wait_timeout_iters and batch_wait_max_tokens_ratio, as the B200
    FP8 recipe's DELAY_BATCHING sets them (benchmarks/inferencex_points.py batch_wait)."""
    seen = _options_served(monkeypatch)
    setup = {"model": "deepseek-r1", "chips": 8, "tp": 8, "prompt": 922, "gen": 922,
             "engine_profile": "trtllm", "batch_wait": [40, 0.8],
             "load": {"kind": "concurrency", "value": 64}}  # fmt: skip
    point = Point("p", "llm-serving", "b200", "output_tokens_per_s", 1.0, "t", setup=setup)
    adapters._llm_serving(point)
    assert seen[0]["batch_wait"] == "40,0.8"
    check_keys({"workload": "llm-serving", "id": "p", **setup})
