"""One meaning for each figure: the commands agree on defaults, `xpusim chip` shows what a run
uses, a what-if chip says it is one, and serve's lines read as they mean."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import pytest
from cli_run import refused, run_cli

from xpusim.cli import run
from xpusim.scenarios.llm import inference as llm_inference
from xpusim.serving.options import Load
from xpusim.workloads.defaults import GEN_TOKENS, PROMPT_TOKENS


def test_run_serve_and_the_api_share_the_request_shape():
    defaults = {p.name: p.default for p in run.params}
    signature = inspect.signature(llm_inference.simulate).parameters
    assert defaults["prompt"] == Load.prompt == signature["prompt"].default == PROMPT_TOKENS
    assert defaults["gen"] == Load.gen == signature["gen"].default == GEN_TOKENS


def test_chip_shows_the_calibrated_figures_a_run_uses(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = run_cli(capsys, "chip", "h100-sxm")
    assert code == 0
    assert "hardware/calibration/h100-sxm.json" in out
    line = next(line for line in out.splitlines() if "efficiency.memory" in line)
    assert "0.949 * (file: 0.9)" in line


def test_a_what_if_chip_is_labelled_and_keeps_its_price(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    args = ["run", "llama-2-7b", "--chip", "h100-sxm", "--set",
            "memory.hbm3.bandwidth_bytes_per_s=4e12"]  # fmt: skip
    code, out, err = run_cli(capsys, *args)
    assert code == 0, err
    assert "on h100-sxm*:" in out and "│ h100-sxm* " in out
    assert "note: h100-sxm* is a what-if h100-sxm: memory.hbm3.bandwidth_bytes_per_s=4e+12" in out
    assert "a what-if keeps h100-sxm's price" in out
    code, out, _ = run_cli(capsys, *args, "--json")
    assert json.loads(out)["cost"]["usd_per_million"] > 0


def test_serve_rounds_the_rate_in_its_header(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    code, out, err = run_cli(capsys, "serve", "llama-2-7b", "--chip", "h100-sxm", "--rate",
                             "14.552658270572916", "--requests", "20")  # fmt: skip
    assert code == 0, err
    assert "rate 14.6 requests/s" in out.splitlines()[0]


def test_serve_says_when_every_request_outlives_the_arrival_window(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    code, out, err = run_cli(capsys, "serve", "llama-2-7b", "--chip", "h100-sxm", "--rate",
                             "100", "--requests", "20", "--gen", "1024")  # fmt: skip
    assert code == 0, err
    assert not re.search(r"(?<![\d.])0 requests/s", out)
    assert "no request finished within the" in out


def test_arrivals_within_one_step_are_a_burst():
    """At --rate 1e9 ten requests arrive within 10 ns, before any step ends: their window
    held no token, and serve printed '0 requests/s, 0 output tokens/s' for a second's work."""
    import xpusim

    r = xpusim.serve("llama-2-7b", "h100-sxm", rate=1e9, requests=10, warmup=0)
    assert r.requests_per_s == pytest.approx(10 / r.e2e_s.p99, rel=0.02)
    assert r.output_tokens_per_s == pytest.approx(r.requests_per_s * 128, rel=0.02)


def test_an_option_out_of_range_is_named_as_typed(capsys):
    assert "--rate must be a positive" in refused(capsys, "serve", "llama-2-7b", "--chip",
                                                  "h100-sxm", "--rate", "-3")  # fmt: skip


def test_the_sweep_folder_is_ignored_by_git():
    ignored = (Path(__file__).parents[1] / ".gitignore").read_text().split()
    assert "sweep/" in ignored


def test_ops_rows_add_up_to_the_whole_tpot_with_the_pipelines_waits():
    """A pipeline whose stages wait on each other (4 H100 stages, 4 microbatches): the ops
    alone leave those waits unsaid (Groq's 576 chips as 72 stages once made 848 us of a
    1.12 ms token)."""
    from rich.console import Console

    import xpusim
    from xpusim.report.tables import ops_table

    result = xpusim.simulate("llama-2-70b", "h100-sxm", chips=4, pp=4)
    console = Console(width=200, record=True)
    console.print(ops_table(result))
    rows = [line.split("│") for line in console.export_text().splitlines() if "│" in line]
    decode = [float(r[6].strip().rstrip("%")) for r in rows if r[1].strip() == "decode"]
    assert sum(decode) == pytest.approx(100, abs=1)
    assert any(r[2].strip() == "pipeline.wait" for r in rows)


def test_a_pipelines_sequences_in_flight_show_beside_the_batch(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    code, out, err = run_cli(capsys, "run", "llama-2-70b", "--chip", "groq-lpu", "--chips",
                             "576", "--precision", "int8")  # fmt: skip
    assert code == 0, err
    assert "batch 1 (16 sequences in flight)" in out.splitlines()[0]
    code, out, err = run_cli(capsys, "run", "llama-2-7b", "--chip", "h100-sxm")
    assert "in flight" not in out


def test_a_model_too_big_to_serve_says_its_weights_in_gigabytes():
    """DeepSeek-R1 on one H100: the weights read '6.7e+02 GB'."""
    import xpusim

    r = xpusim.serve("deepseek-r1", "h100-sxm", concurrency=2, requests=2)
    assert not r.fits and "the weights (673.15 GB on the fullest chip)" in r.reason, r.reason


def test_serves_batch_and_queue_say_what_each_averages_over(capsys, monkeypatch):
    """'batch 59 sequences per iteration, 9.71 waiting' of 64 clients read as 69 requests:
    the batch is a mean over iterations, the queue a mean over time."""
    monkeypatch.setenv("COLUMNS", "200")
    code, out, err = run_cli(capsys, "serve", "llama-3.2-1b", "--chip", "h100-sxm",
                             "--concurrency", "8", "--requests", "40")  # fmt: skip
    assert code == 0, err
    assert re.search(r"batch [\d.]+ sequences \(mean over iterations\), [\d.]+ requests "
                     r"waiting \(mean over time\)", out), out


def _rows(out: str) -> dict[str, list[str]]:
    """serve's latency table: label -> its mean, p50, p90 and p99 as printed."""
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in out.splitlines()
            if line.startswith("│")]  # fmt: skip
    return {r[0]: r[1:] for r in rows}


def test_the_api_servers_time_is_not_shown_as_queued(capsys, monkeypatch):
    """vLLM's 11.6 ms a request in its API server (engines.toml frontend_s) read as 15 ms
    queued beside '0 waiting': it has its own row, and queued is the engine's wait alone."""
    import xpusim

    monkeypatch.setenv("COLUMNS", "200")
    args = ["serve", "llama-3.2-1b", "--chip", "h100-sxm", "--concurrency", "2",
            "--requests", "20"]  # fmt: skip
    code, out, err = run_cli(capsys, *args)
    assert code == 0, err
    rows = _rows(out)
    assert rows["of it, API server"] == ["11.6 ms"] * 4, rows
    result = xpusim.serve("llama-3.2-1b", "h100-sxm", concurrency=2, requests=20)
    assert result.frontend_s == pytest.approx(11.6e-3, rel=5e-3)
    assert result.queue_s.p99 >= result.frontend_s  # the JSON's queue_s holds it, as TTFT does
    code, out, err = run_cli(capsys, *args, "--frontend-ms", "0")
    assert code == 0, err
    assert "of it, API server" not in _rows(out)
