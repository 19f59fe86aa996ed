"""InferenceMAX's gpt-oss-120b serving points (benchmarks/inferencemax_gptoss_points.py;
docs/validation.md, twenty-second session): each kept record becomes three points (TTFT,
TPOT, the node's output throughput) at the client's mean lengths and spread, launched as its
recipe states, and the committed set is the script's."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from xpusim.validation.points import load_points

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))
try:
    import inferencemax_gptoss_points as im
    from nim_dli_points import PUBLISHED
finally:
    sys.path.remove(str(BENCH))


def _record(hw: str = "b200", framework: str = "vllm", tp: int = 2, conc: int = 16,
            **more) -> dict:  # fmt: skip
    image = next(i for h, f, i in im.KEPT if (h, f) == (hw, framework))
    return {"hw": hw, "framework": framework, "image": image, "isl": 1024, "osl": 8192,
            "tp": tp, "ep": 1, "conc": conc, "run": 20667906037, "mean_ttft": 0.05,
            "mean_tpot": 0.004, "output_tput_per_gpu": 1000.0, **more}  # fmt: skip


def test_a_record_is_three_points_at_the_clients_lengths():
    pts = im.points([_record()])
    assert [p["metric"] for p in pts] == ["ttft_s", "tpot_s", "output_tokens_per_s"]
    ttft, tpot, tok = pts
    assert (ttft["value"], tpot["value"], tok["value"]) == (0.05, 0.004, 2000.0)  # x tp
    assert ttft["id"] == "inferencemax-gptoss120b-b200-vllm-tp2-1k8k-c16-ttft"
    assert (ttft["prompt"], ttft["gen"]) == (922, 7373)  # 0.9 L: uniform in [0.8 L, L]
    assert ttft["load"] == {"kind": "concurrency", "value": 16, "requests": 160, "warmup": 0}
    assert "stat" not in tok and ttft["stat"] == "mean"
    assert "run_20667906037/agg_bmk.json" in ttft["source"] and "field mean_ttft" in ttft["source"]


@pytest.mark.parametrize(("hw", "framework", "expected"), [
    ("b200", "vllm", {"engine_profile": "vllm-0.11", "kv_precision": "fp8", "max_batch": 512,
                      "moe_input": "mxfp8", "kv_utilization": 0.9, "host_overlap": True}),
    ("h200", "vllm", {"engine_profile": "vllm-0.11", "kv_precision": "bf16", "max_batch": 16,
                      "host_overlap": True, "moe_backend": "MARLIN"}),
    ("b200-trt", "trt", {"engine_profile": "trtllm", "kv_precision": "fp8", "max_batch": 512,
                         "token_budget": 20000, "kv_utilization": 0.85,
                         "moe_backend": "TRTLLM", "graph_pad": "decode",
                         "graph_sizes": [1, 2, 4, 8, 16]}),
])  # fmt: skip
def test_each_launch_as_its_recipe_states(hw, framework, expected):
    setup = im.setup(_record(hw, framework))
    assert {k: setup[k] for k in expected} == expected
    assert (setup["precision"], setup["weight_precision"]) == ("bf16", "mxfp4")
    assert ("moe_input" in setup) == (hw == "b200")  # VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8
    assert (setup.get("moe_backend") == "MARLIN") == (hw in ("h100", "h200"))  # the launches'
    # VLLM_MXFP4_USE_MARLIN=1


def test_the_hopper_launches_say_they_ran_marlin():
    """The v0.13.0 Hopper launches set VLLM_MXFP4_USE_MARLIN=1 (InferenceX PR #327): a
    point's notes say so beside its moe_backend."""
    ttft = im.points([_record("h100", "vllm")])[0]
    assert "VLLM_MXFP4_USE_MARLIN=1" in ttft["notes"] and "moe_backend MARLIN" in ttft[
        "xpusim_setup"]


def test_the_committed_points_are_the_scripts():
    """Each committed run's three points are what points() writes for the record their
    source names, with their values, so an edit of one by hand is caught."""
    data = json.loads(PUBLISHED.read_text())["points"]
    committed = [p for p in data if p["id"].startswith(im.PREFIX)]
    assert len(committed) >= 300 and len(committed) % 3 == 0
    assert {p.id for p in load_points()} >= {p["id"] for p in committed}  # all load
    for i in range(0, len(committed), 3):
        ttft, tpot, tok = committed[i:i + 3]
        found = re.search(r"run_(\d+)/.* hw=(\S+) framework=(\S+) image=(\S+) isl=(\d+) "
                          r"osl=(\d+) tp=(\d+) ep=(\d+) dp_attention=false conc=(\d+)",
                          ttft["source"])  # fmt: skip
        run, hw, fw, image, isl, osl, tp, ep, conc = found.groups()
        record = {"hw": hw, "framework": fw, "image": image, "isl": int(isl),
                  "osl": int(osl), "tp": int(tp), "ep": int(ep), "conc": int(conc),
                  "run": int(run), "mean_ttft": ttft["value"], "mean_tpot": tpot["value"],
                  "output_tput_per_gpu": tok["value"] / int(tp)}  # fmt: skip
        assert im.points([record]) == [ttft, tpot, tok], ttft["id"]
