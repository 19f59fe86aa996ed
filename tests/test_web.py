"""`xpusim web`'s JSON API: the same answers as the command line, bad input as a 400 naming
the field, limits on one request's work, nothing read from the file system, and the schema
fuzzed (schemathesis) for a response that is not a server error or not what it documents."""

from __future__ import annotations

import json
import os
import time

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")  # fastapi's TestClient
from fastapi.testclient import TestClient

import xpusim
from xpusim import api
from xpusim.web.app import create_app
from xpusim.web.schemas import Limits, PlanOptions, RunOptions, ServeOptions, SweepAxes
from xpusim.workloads.zoo import ZOO_DIR

LLAMA = {"model": "llama-2-7b"}


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(Limits(sweep_points=100, serve_requests=400, targets=6)))


def test_run_answers_what_the_api_does(client):
    body = {**LLAMA, "target": {"chip": "h100-sxm"}, "options": {"batch": 4, "precision": "fp8"}}
    got = client.post("/api/run", json=body)
    assert got.status_code == 200
    want = api.simulate("llama-2-7b", "h100-sxm", batch=4, precision="fp8").to_dict()
    assert got.json()["result"] == json.loads(json.dumps(want))
    roofs = got.json()["roofs"]
    assert roofs["precision"] == "fp8" and roofs["peak_ops_per_s"] == pytest.approx(1979e12)
    assert got.json()["chip"]["tdp_w"]["source"].startswith("NVIDIA H100")


def test_compare_keeps_a_targets_own_error_in_its_row(client):
    # 128 Groq chips: as a pure pipeline (its deployment) FP16 Llama-2-7B's 13.5 GB and the
    # caches of its default microbatches in flight do not fit on 64 (14.8 GB of SRAM)
    body = {**LLAMA, "targets": [{"chip": "tpu-v4"}, {"chip": "groq-lpu", "chips": 128}],
            "options": {"precision": "fp16"}}  # fmt: skip
    rows = client.post("/api/compare", json=body).json()["results"]
    assert "tpu-v4 has no fp16" in rows[0]["error"]
    assert rows[1]["result"]["chips"] == 128 and rows[1]["result"]["fits"] is True


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({**LLAMA, "target": {"chip": "h100-sxm"}, "options": {"batch": 0}}, 400,
         "options.batch: Input should be greater than or equal to 1"),
        ({**LLAMA, "target": {"chip": "h100-sxn"}}, 400, "did you mean h100-sxm"),
        ({"model": "llama-2-7", "target": {"chip": "h100-sxm"}}, 400, "unknown model"),
        ({**LLAMA, "target": {"chip": "h100-sxm"}, "options": {"batchh": 2}}, 400,
         "options.batchh: Extra inputs are not permitted"),
        ({**LLAMA, "target": {"chip": "h100-sxm"}, "options": {"batch": True}}, 400,
         "options.batch: Input should be a valid integer"),
        ({**LLAMA, "target": {"chip": "h100-sxm"}, "options": {"precision": "fp7"}}, 400,
         "options.precision: Input should be"),
        ({**LLAMA, "target": {"chip": "h100-sxm"}, "options": {"sla_ms": 5}}, 400,
         "--sla-ms does not apply to this model"),
        ({"target": {"chip": "h100-sxm"}}, 400, "give either 'model'"),
        ({**LLAMA, "config": {}, "target": {"chip": "h100-sxm"}}, 400, "give either 'model'"),
        ({"config": {"model_type": "whisper"}, "target": {"chip": "h100-sxm"}}, 400,
         "model_type 'whisper' is not supported"),
        ({**LLAMA, "target": {"chip": "h100-sxm"}, "set": {"tdp_w": -1}}, 400, "tdp_w"),
    ],
)  # fmt: skip
def test_bad_input_is_a_400_with_one_line(client, body, status, message):
    got = client.post("/api/run", json=body)
    assert got.status_code == status
    assert message in got.json()["error"] and "\n" not in got.json()["error"]


def test_a_model_or_chip_is_never_a_path(client, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "llama", "hidden_size": 64}))
    chip = tmp_path / "chip.toml"
    chip.write_text("id = 'x'")
    for body in ({"model": str(config), "target": {"chip": "h100-sxm"}},
                 {**LLAMA, "target": {"chip": str(chip)}}):  # fmt: skip
        got = client.post("/api/run", json=body)
        assert got.status_code == 400 and "unknown" in got.json()["error"]
    assert "trace" not in ServeOptions.model_fields and "lengths" not in ServeOptions.model_fields


def test_a_pasted_config_is_data(client):
    hf = json.loads((ZOO_DIR / "llama-2-7b.json").read_text())
    hf.pop("_xpusim")
    got = client.post("/api/run", json={"config": hf, "target": {"chip": "h100-sxm"}})
    assert got.status_code == 200
    assert got.json()["result"]["params"] == api.model("llama-2-7b").param_count
    assert got.json()["result"]["model"] == "pasted-config"


def test_limits_refuse_too_much_work_with_413(client):
    too_many = {**LLAMA, "targets": [{"chip": "h100-sxm"}], "axes": {"batch": list(range(1, 51)),
                                                                     "gen": [64, 128, 256]}}
    got = client.post("/api/sweep", json=too_many)
    assert got.status_code == 413
    assert "sweep points: 150 asked for; at most 100" in got.json()["error"]
    serve = {**LLAMA, "target": {"chip": "h100-sxm"}, "options": {"concurrency": 4,
                                                                  "requests": 401}}
    assert client.post("/api/serve", json=serve).status_code == 413
    big = {**LLAMA, "target": {"chip": "h100-sxm"}, "set": {}, "pad": "x" * 300_000}
    got = client.post("/api/run", json=big)
    assert got.status_code == 413 and "request body over" in got.json()["error"]
    streamed = client.post("/api/run", content=iter([b"{" + b" " * 200_000, b" " * 100_000]),
                           headers={"content-type": "application/json"})  # fmt: skip
    assert streamed.status_code == 413


def test_sweep_has_a_front_per_target(client):
    body = {**LLAMA, "targets": [{"chip": "h100-sxm"}, {"chip": "mi300x", "chips": 2}],
            "axes": {"batch": [1, 8, 64], "precision": ["fp8"]}}  # fmt: skip
    got = client.post("/api/sweep", json=body).json()
    assert [o["column"] for o in got["objectives"]] == ["tokens_per_s_per_user",
                                                        "tokens_per_s_per_chip"]
    assert set(got["fronts"]) == {"h100-sxm", "mi300x x2"} and len(got["points"]) == 6
    want = api.simulate("llama-2-7b", "mi300x", batch=8, precision="fp8", chips=2)
    point = next(p for p in got["points"] if p["target"] == "mi300x" and p["options"]["batch"] == 8)
    assert point["tokens_per_s_per_user"] == pytest.approx(want.tokens_per_s_per_user, rel=1e-9)


def test_serve_answers_what_the_api_does(client):
    options = {"concurrency": 4, "requests": 60, "prompt": 256, "gen": 32}
    got = client.post("/api/serve", json={**LLAMA, "target": {"chip": "h100-sxm"},
                                          "options": options})  # fmt: skip
    assert got.status_code == 200
    want = api.serve("llama-2-7b", "h100-sxm", **options)
    assert got.json()["result"]["ttft_s"]["p99"] == pytest.approx(want.ttft_s.p99, rel=1e-12)
    no_load = client.post("/api/serve", json={**LLAMA, "target": {"chip": "h100-sxm"},
                                              "options": {"requests": 60}})  # fmt: skip
    assert no_load.status_code == 400 and "exactly one of" in no_load.json()["error"]


def test_serve_takes_an_engine_and_speculative_decoding(client):
    """The page's serve form sends these: the engine and the speculative options."""
    options = {"concurrency": 4, "requests": 20, "prompt": 256, "gen": 32, "engine": "sglang",
               "speculative": "eagle", "draft_tokens": 3, "acceptance": 0.6}  # fmt: skip
    got = client.post("/api/serve", json={**LLAMA, "target": {"chip": "h100-sxm"},
                                          "options": options})  # fmt: skip
    assert got.status_code == 200, got.json()
    want = api.serve("llama-2-7b", "h100-sxm", **options)
    assert got.json()["result"]["tpot_s"]["mean"] == pytest.approx(want.tpot_s.mean, rel=1e-12)


PLAN = {"model": "llama-3.1-8b", "chips": ["h100-sxm", "mi300x"],
        "options": {"slo_ttft_ms": 400, "slo_tpot_ms": 25, "num_chips": 2, "concurrency": 16,
                    "prompt": 512, "gen": 32, "requests": 60}}  # fmt: skip


def test_plan_answers_what_the_api_does_with_its_front(client):
    got = client.post("/api/plan", json=PLAN)
    assert got.status_code == 200, got.json()
    body = got.json()
    want = xpusim.plan("llama-3.1-8b", ["h100-sxm", "mi300x"], **PLAN["options"])
    assert body["best"]["usd_per_million_goodput"] == pytest.approx(
        want.best.usd_per_million_goodput, rel=1e-12)
    assert body["best"]["usd_per_million"] <= body["best"]["usd_per_million_goodput"]
    assert body["front"] and {r["chip"] for r in body["front"]} == {"h100-sxm", "mi300x"}
    assert body["decisions"] == want.decisions


@pytest.mark.parametrize("change, status, message", [
    ({"chips": ["h100-sxmm"]}, 400, "chip: unknown chip or system 'h100-sxmm'; did you mean"),
    ({"options": {"num_chips": 2, "concurrency": 4}}, 400, "plan needs both objectives"),
    ({"options": {**PLAN["options"], "num_chips": None, "max_chips": 64}}, 413,
     "max_chips: 64 asked for; at most 16"),
    ({"options": {**PLAN["options"], "exhaustive": True}}, 400, "options.exhaustive"),
])  # fmt: skip
def test_plan_refuses_bad_input_and_too_much_work(client, change, status, message):
    got = client.post("/api/plan", json={**PLAN, **change})
    assert got.status_code == status and message in got.json()["error"], got.json()


def test_validation_runs_as_a_job_and_keeps_its_answer(client):
    first = client.get("/api/validate", params={"chip": "tpu-v4"})
    assert first.status_code in (200, 202)
    for _ in range(300):
        done = client.get("/api/validate", params={"chip": "tpu-v4"})
        if done.status_code != 202:
            break
        time.sleep(0.1)
    assert done.status_code == 200 and done.json()["n_points"] >= 1
    assert all(p["chip"] == "tpu-v4" for p in done.json()["points"])
    unknown = client.get("/api/validate", params={"chip": "nope"})
    assert unknown.status_code == 400 and "h100-sxm" in unknown.json()["error"]


def test_catalog_and_models(client):
    chips = client.get("/api/chips").json()
    assert {c["id"] for c in chips["chips"]} >= {"mtia-v1", "tpu-v4", "groq-lpu", "h100-sxm"}
    h100 = next(c for c in chips["chips"] if c["id"] == "h100-sxm")
    assert h100["peak_ops_per_s"]["bf16"]["confidence"] in ("published", "derived", "assumed")
    assert {"id": "groq-system", "chip": "groq-lpu"}.items() <= next(
        s for s in chips["systems"] if s["id"] == "groq-system").items()
    assert "llama-2-7b" in {m["id"] for m in client.get("/api/models").json()["models"]}


def test_the_page_and_its_files_come_from_the_package(client):
    page = client.get("/")
    assert page.status_code == 200 and "/static/app.js" in page.text
    for name in ("app.js", "style.css"):
        assert client.get(f"/static/{name}").status_code == 200
    assert "http" not in page.text.replace("http://www.w3.org", "")  # no CDN: works offline
    assert client.get("/static/..%2Fapp.py").status_code == 404
    assert client.get("/static/secret.txt").status_code == 404


def test_option_fields_follow_the_command_line():
    """A new option of `xpusim run` or `xpusim serve` is an API field without a line of web
    code (the fields are generated from the click options)."""
    from xpusim.cli import run
    from xpusim.cli_serve import serve

    # less the options that name files (--speculative may be a config.json), as serve's
    # and --offline: the server's process is offline or not (HF_HUB_OFFLINE)
    run_names = {p.name for p in run.params} - {"model", "chip_id", "as_json", "show_ops",
                                                "input_shapes", "sets", "chips",
                                                "speculative", "offline", "wide"}  # fmt: skip
    assert set(RunOptions.model_fields) == run_names
    assert set(SweepAxes.model_fields) == run_names - {"mode"}
    assert set(ServeOptions.model_fields) == {p.name for p in serve.params} - {
        "model", "chip_id", "as_json", "out", "chips", "trace", "lengths", "offline", "wide"}
    from xpusim.cli_plan import plan

    assert set(PlanOptions.model_fields) == {p.name for p in plan.params} - {
        "model", "chip_ids", "as_json", "out", "emit", "exhaustive", "trace"}


def test_the_command_serves_on_a_free_port_and_says_where():
    import re
    import subprocess
    import sys

    import httpx

    server = subprocess.Popen([sys.executable, "-c", "from xpusim.cli import main; main()",
                               "web", "--port", "0"], stderr=subprocess.PIPE, text=True)
    try:
        line = server.stderr.readline()
        url = re.fullmatch(r"xpusim web: (http://127\.0\.0\.1:\d+)/ \(Ctrl-C stops\)\n", line)
        assert url, line
        assert httpx.get(f"{url.group(1)}/", timeout=30).status_code == 200
        taken = int(url.group(1).rsplit(":", 1)[1])
        again = subprocess.run([sys.executable, "-c", "from xpusim.cli import main; main()",
                                "web", "--port", str(taken)], capture_output=True, text=True,
                               timeout=60)  # fmt: skip
        assert again.returncode == 2 and again.stderr.startswith("error: ")
        assert len(again.stderr.strip().splitlines()) == 1
    finally:
        server.terminate()
        server.wait(10)


schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis.checks import (  # noqa: E402
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

FUZZ_EXAMPLES = int(os.environ.get("XPUSIM_FUZZ_EXAMPLES", "30"))  # per operation; 300 ran clean
FUZZED = schemathesis.openapi.from_asgi(
    "/api/openapi.json",
    create_app(Limits(sweep_points=16, serve_requests=64, targets=3, plan_chips=2)),
).exclude(path="/api/validate")  # minutes of work per chip: tested above, not fuzzed


@FUZZED.parametrize()
@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_fuzzed_requests_get_an_answer_the_schema_documents(case):
    """Random requests, valid and not: never a 500, and every status, content type and body
    as the OpenAPI schema says."""
    case.call_and_validate(checks=[not_a_server_error, status_code_conformance,
                                   content_type_conformance, response_schema_conformance])


@pytest.mark.parametrize(("path", "body"), [
    ("/api/serve", {**LLAMA, "target": {"chip": "h100-sxm"}, "options": {"concurrency": 64}}),
    ("/api/plan", {**PLAN, "options": {**PLAN["options"], "concurrency": 64,
                                       "requests": None}}),
])  # fmt: skip
def test_a_default_request_count_over_the_limit_is_named_as_the_default(client, path, body):
    """64 clients default to 512 requests (8 each, serving/options.default_requests), over
    this client's 400: refused as the default, which nobody asked for; plan's default was
    not held to the limit at all."""
    got = client.post(path, json=body)
    assert got.status_code == 413, got.json()
    assert "512 by default" in got.json()["error"] and "give fewer" in got.json()["error"]


def test_a_target_takes_the_chip_shorthand_the_command_line_takes(client):
    """`h100` is h100-sxm over the web as with --chip (it was refused there alone)."""
    got = client.post("/api/run", json={**LLAMA, "target": {"chip": "H100"}})
    assert got.status_code == 200, got.json()
    assert got.json()["result"]["chip"] == "h100-sxm"
