"""The fifteenth session's q4 serving points (docs/validation.md, 'Two more public sources'):
dstack's Llama 3.1 405B FP8 benchmark_throughput runs on 8 H100 and 8 MI300X
(benchmarks/dstack_405b_points.py) and the SGLang team's SGLang 0.3.0 / vLLM 0.6.0 tables
(benchmarks/sglang_vllm060_points.py). The generators read what their sources print, and the
committed points carry the settings the sources state to serve."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest

from xpusim.validation import adapters
from xpusim.validation.points import DATA, load_points

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))
try:
    import sglang_vllm060_points as lmsys
finally:
    sys.path.remove(str(BENCH))

README = """## Online benchmark results

### Llama 3.1 70B Instruct 4 x H100 80G

| RPS  | Num Prompts | Engine | Median E2E Latency | Median TTFT | Median TPOT | Median ITL |
|------|-------------|--------|--------------------|-------------|-------------|------------|
| 4    | 1200        | SGLang | 3005.24            | **53.94**   | 25.03       | **21.67**  |
| 4    | 1200        | vLLM   | 2915.60            | **179.15**  | 23.58       | **231.23** |

## Offline benchmark results

### Llama 3.1 8B Instruct 1 x A100 80G

| RPS  | Num Prompts | Engine | Request throughput | Output token throughput |
|------|-------------|--------|--------------------|-------------------------|
| inf  | 5000        | SGLang | 22.03              | **4281.51**             |
"""


def test_the_sglang_tables_give_median_latencies_and_offline_throughput():
    pts = {p["id"]: p for p in lmsys.points(README)}
    assert len(pts) == 7  # three medians a row online, one throughput offline
    ttft = pts["lmsys060-l31-70b-h100x4-sglang-rps4-ttft"]
    assert (ttft["value"], ttft["stat"], ttft["unit"]) == (0.05394, "p50", "s")
    assert ttft["load"] == {"kind": "rate", "value": 4.0, "requests": 1200}
    assert (ttft["chip"], ttft["chips"], ttft["tp"]) == ("h100-sxm", 4, 4)
    assert ttft["kv_utilization"] == 0.85 and ttft["host_overlap"] is False
    vllm = pts["lmsys060-l31-70b-h100x4-vllm-rps4-itl"]
    assert vllm["decode_steps"] == 10 and vllm["engine_profile"] == "vllm-v0"
    assert "ten tokens a chunk" in vllm["known_gap"]
    tok = pts["lmsys060-l31-8b-a100-sglang-offline-tok"]  # a throughput, not milliseconds
    assert (tok["value"], tok["unit"], tok["stat"]) == (4281.51, "tokens/s", "mean")
    assert tok["load"]["kind"] == "offline" and tok["kv_utilization"] == 0.88
    assert "--enable-torch-compile" in tok["notes"]


def test_the_reference_answers_are_194_tokens_by_both_offline_rows():
    assert round(4281.51 / 22.03) == round(3856.01 / 19.84) == lmsys.GEN


def test_the_sharegpt_prompts_file_holds_the_runs_1000_prompts():
    path = DATA.parent / lmsys.LENGTHS
    with path.open() as f:
        prompts = [int(row["input_tokens"]) for row in csv.DictReader(f)]
    assert len(prompts) == 1000 and sum(prompts) == 215196  # the run's total_input_tokens
    assert min(prompts) >= 4 and max(prompts) <= 1024  # benchmark_serving's ShareGPT filters
    assert round(sum(prompts) / len(prompts)) == lmsys.PROMPT


def _committed(prefix: str):
    return [p for p in load_points() if p.id.startswith(prefix)]


def test_the_committed_points_are_36_dstack_runs_and_28_sglang_figures():
    dstack, sglang = _committed("dstack405-"), _committed("lmsys060-")
    assert len(dstack) == 36 and len(sglang) == 28
    assert {p.chip for p in dstack} == {"h100-sxm", "mi300x"}
    assert {p.chip for p in sglang} == {"a100-sxm-80gb", "h100-sxm"}


@pytest.mark.parametrize("point", _committed("dstack405-"), ids=lambda p: p.id)
def test_a_dstack_run_is_a_burst_of_its_prompts_called_in_process(point):
    load = point.get("load")
    assert load["kind"] == "burst" and load["value"] == load["requests"]
    assert point.get("gen") == 2048 and point.metric == "output_tokens_per_s"
    assert point.get("frontend_ms") == 0 and point.get("api_servers") == 0
    assert point.get("token_budget") == 91680 and point.get("max_batch") == 256
    assert f"--num-prompts {load['value']} " in point.notes


def test_the_multi_step_setting_of_a_vllm_060_point_reaches_serve(monkeypatch):
    seen = {}

    def served(model, chip, limit, options):
        seen.update(dict(options))
        raise adapters.Unexpressible("stop here")

    monkeypatch.setattr(adapters, "_served", served)
    point = next(p for p in _committed("lmsys060-") if p.id.endswith("vllm-rps8-tpot"))
    with pytest.raises(adapters.Unexpressible):
        adapters._llm_serving(point)
    assert seen["decode_steps"] == 10 and seen["engine"] == "vllm-v0"
    assert seen["rate"] == 8.0 and seen["requests"] == 2400
    assert seen["lengths"].endswith("sharegpt-llama31-prompts.csv")
