"""xpusim plan (planning/): the pruned search's answer is the exhaustive one's, an
impossible objective is answered from the bounds alone, bad input is one line and exit 2,
and every emitted launch flag is one of planning/launch.toml's."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import xpusim
from tests.cli_run import run_cli
from xpusim.errors import UserError
from xpusim.planning.launch import carries, command, emit, engines_for, table
from xpusim.planning.space import Config, Knobs, Layout, max_batches

SMALL = {"prompt": 512, "gen": 32, "requests": 60}


def _answer(result):
    """What the decision says: the best overall and per chip, with their costs."""
    def one(o):
        return None if o is None else (o.config, round(o.usd_per_million_goodput, 12))

    return one(result.best), [(p.chip, one(p.best)) for p in result.chips]


@pytest.mark.parametrize("model, chips, load", [
    ("llama-3.1-8b", ["h100-sxm", "mi300x"], {"concurrency": 16, "num_chips": 2}),
    ("llama-3.1-8b", ["h100-sxm"], {"rate": 10.0, "max_chips": 2}),  # 2 chips cost double
    # an MoE model: EP over the tp chips and attention DP searched; in an open loop at one
    # count every configuration's bound ties, and the TPOT bound orders them
    ("deepseek-v2-lite", ["h100-sxm"], {"rate": 10.0, "num_chips": 2}),
    ("deepseek-v2-lite", ["h100-sxm"], {"concurrency": 16, "num_chips": 2}),
])  # fmt: skip
def test_pruned_search_answers_as_the_exhaustive_one(model, chips, load):
    options = dict(slo_ttft_ms=400, slo_tpot_ms=25, **load, **SMALL)
    pruned = xpusim.plan(model, chips, **options)
    every = xpusim.plan(model, chips, exhaustive=True, **options)
    assert pruned.best is not None
    assert _answer(pruned) == _answer(every)
    assert pruned.simulated < every.simulated
    assert every.simulated == sum(o.simulated for p in every.chips for o in p.outcomes)


def test_an_moe_plan_searches_ep_and_attention_dp_and_says_which_won():
    r = xpusim.plan("deepseek-v2-lite", ["h100-sxm"], slo_ttft_ms=400, slo_tpot_ms=25,
                    num_chips=2, rate=10.0, **SMALL)  # fmt: skip
    layouts = {o.config.layout for o in r.chips[0].outcomes}
    assert any(lay.ep == 2 for lay in layouts) and any(lay.dp_attention for lay in layouts)
    assert all(not lay.dp_attention or lay.pp == 1 for lay in layouts)
    dpa_engines = {o.config.knobs.engine for o in r.chips[0].outcomes
                   if o.config.layout.dp_attention}  # fmt: skip
    assert dpa_engines == {"sglang"}  # the one engine whose flags carry it (launch.toml)
    said = {d.split(":")[0]: d for d in r.decisions}
    assert set(said) == {"EP", "attention DP", "disaggregation"}
    lay = r.best.config.layout
    for name, used in (("EP", lay.ep > 1), ("attention DP", lay.dp_attention),
                       ("disaggregation", lay.prefill_replicas is not None)):
        assert said[name].startswith(f"{name}: {'won' if used else 'lost'}")


def test_mtp_speculative_decoding_is_a_knob_the_pruning_keeps_exact():
    """The model's own multi-token prediction drafting, searched with and without (a small
    MoE given one MTP layer, so that the exhaustive check stays quick)."""
    from dataclasses import replace

    cfg = replace(xpusim.model("deepseek-v2-lite"), mtp_layers=1)
    options = dict(slo_ttft_ms=400, slo_tpot_ms=25, num_chips=1, concurrency=16,
                   mtp_acceptance=0.8, mtp_draft_tokens=2, **SMALL)  # fmt: skip
    pruned = xpusim.plan(cfg, ["h100-sxm"], **options)
    every = xpusim.plan(cfg, ["h100-sxm"], exhaustive=True, **options)
    assert _answer(pruned) == _answer(every)
    knobs = {o.config.knobs for o in every.chips[0].outcomes}
    assert {k.mtp for k in knobs} == {None, (2, 0.8)}
    assert all(k.engine == "sglang" for k in knobs if k.mtp)  # the engine that carries it
    assert any(d.startswith("MTP speculative decoding: ") for d in pruned.decisions)
    with pytest.raises(UserError, match="no multi-token-prediction"):
        xpusim.plan("llama-3.1-8b", ["h100-sxm"], **options)


def test_a_trace_is_a_load_the_pruning_keeps_exact(tmp_path):
    """A trace's arrivals and lengths (serve --trace): bounded by its shortest request and
    mean rate, served as recorded, and the pruned answer the exhaustive one's."""
    import random

    rng, t, lines = random.Random(3), 0.0, []
    for _ in range(60):
        t += rng.expovariate(10.0)
        lines.append(json.dumps({"arrival_s": round(t, 4), "prompt": rng.randint(256, 768),
                                 "gen": rng.randint(16, 48)}))  # fmt: skip
    trace = tmp_path / "trace.jsonl"
    trace.write_text("\n".join(lines) + "\n")
    options = dict(slo_ttft_ms=400, slo_tpot_ms=25, num_chips=1, trace=trace, requests=60)
    pruned = xpusim.plan("llama-3.1-8b", ["h100-sxm", "mi300x"], **options)
    every = xpusim.plan("llama-3.1-8b", ["h100-sxm", "mi300x"], exhaustive=True, **options)
    assert pruned.best is not None and _answer(pruned) == _answer(every)
    assert pruned.load == {"trace": str(trace), "requests": 60}
    with pytest.raises(UserError, match="exactly one of"):
        xpusim.plan("llama-3.1-8b", ["h100-sxm"], **options, rate=1.0)


def test_an_open_loop_needs_a_queue_that_keeps_up_and_ties_end_the_search():
    """Past capacity an open loop misses however loose the objectives (serve --find's
    backlog rule), so that counting the offered tokens as goodput is earned; below it, one
    simulation that meets both for every request ties every other bound and ends the search
    (an MoE model's 136 configurations at one count)."""
    over = xpusim.plan("llama-3.1-8b", ["h100-sxm"], num_chips=1, rate=400.0, prompt=512,
                       gen=32, requests=200, slo_ttft_ms=1e6, slo_tpot_ms=1e4)  # fmt: skip
    assert over.best is None and over.binding.startswith("the arrival rate under load")
    assert all("does not keep up" in o.reason for o in over.chips[0].outcomes)
    r = xpusim.plan("deepseek-v2-lite", ["h100-sxm"], slo_ttft_ms=400, slo_tpot_ms=25,
                    num_chips=2, rate=10.0, **SMALL)  # fmt: skip
    assert r.best is not None and r.best.slo_met == 1.0 and r.simulated == 1
    assert r.best.usd_per_million_goodput == pytest.approx(r.best.bound_usd_per_million)


def test_every_configuration_lost_for_a_reason_and_the_best_meets_both():
    r = xpusim.plan("llama-3.1-8b", ["h100-sxm"], slo_ttft_ms=400, slo_tpot_ms=25,
                    num_chips=2, concurrency=16, **SMALL)  # fmt: skip
    assert r.best.ttft_p99_ms <= 400 and r.best.tpot_p99_ms <= 25
    assert r.best.usd_per_million_goodput >= r.best.usd_per_million  # goodput <= tokens
    for o in r.chips[0].outcomes:
        assert o.status in ("chosen", "dearer", "slo", "fit", "bound", "refused")
        assert o.status == "chosen" or o.reason
        if o.status == "bound":  # pruned only where it could not beat the best
            assert o.bound_usd_per_million >= r.best.usd_per_million_goodput
    json.dumps(r.to_dict(), allow_nan=False)


@pytest.mark.parametrize("slo, binds", [({"slo_ttft_ms": 1, "slo_tpot_ms": 50}, "TTFT"),
                                         ({"slo_ttft_ms": 1000, "slo_tpot_ms": 0.5}, "TPOT")])
def test_an_impossible_objective_is_answered_from_the_bounds(slo, binds):
    start = time.perf_counter()
    r = xpusim.plan("llama-3.1-70b", ["h100-sxm", "mi300x"], num_chips=8, concurrency=50,
                    prompt=1024, gen=256, **slo)  # fmt: skip
    assert time.perf_counter() - start < 5  # about 0.3 s alone; 2 shared cores
    assert r.best is None and r.simulated == 0
    assert r.binding.startswith(binds)


@pytest.mark.parametrize("argv, mentions", [
    (["--concurrency", "8"], ["--chips", "--max-chips"]),
    (["--chips", "2"], ["concurrency"]),
    (["--chips", "2", "--concurrency", "8", "--rate", "1"], ["--concurrency"]),
    (["--chips", "2", "--concurrency", "8", "--chip", "h100-sxn"], ["h100-sxm"]),
])  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(capsys, argv, mentions):
    code, out, err = run_cli(capsys, "plan", "llama-3.1-8b", "--chip", "h100-sxm",
                             "--slo-ttft-ms", "500", "--slo-tpot-ms", "30", *argv)  # fmt: skip
    assert code == 2 and out == "" and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    for word in mentions:
        assert word in err, err


def test_api_refuses_a_missing_objective():
    with pytest.raises(UserError, match="slo_tpot_ms"):
        xpusim.plan("llama-3.1-8b", ["h100-sxm"], slo_ttft_ms=100, slo_tpot_ms=-1,
                    num_chips=1, concurrency=1)  # fmt: skip


def _configs(engine):
    """Layouts that ask for every setting: tp, pp, ep, fp8, both disaggregated roles."""
    knobs = Knobs(engine, 64, 2048)
    layouts = [Layout("aggregated", 2, 2, 2, 1), Layout("disaggregated", 4, 1, 1, 2, 1, 1)]
    if carries(engine, "dp_attention"):  # the search pairs attention DP with these only
        layouts.append(Layout("aggregated", 4, 1, 4, 2, dp_attention=True))
    for layout in layouts:
        for precision in ("bf16", "fp8"):
            yield Config("h100-sxm", 8, layout, precision, knobs)
    if carries(engine, "speculative_mtp"):  # and MTP drafting
        yield Config("h100-sxm", 8, layouts[0], "fp8", Knobs(engine, 64, 2048, (2, 0.8)))


@pytest.mark.parametrize("engine", list(table()))
def test_every_emitted_flag_is_in_the_engines_table(engine):
    entry = table()[engine]
    allowed = {word for flag in entry["flags"].values() for word in flag.split()
               if word.startswith("--")}  # fmt: skip
    assert entry["source"].startswith("https://") and entry["version"]
    for config in _configs(engine):
        for role in (None, "prefill", "decode"):
            words, _ = command(config, "meta-llama/Llama-3.1-8B", role)
            assert " ".join(words).startswith(entry["command"])
            flags = {w for w in words if w.startswith("--")}
            assert flags <= allowed, flags - allowed
            assert "meta-llama/Llama-3.1-8B" in words
            if config.layout.dp_attention:
                assert "--enable-dp-attention" in words and words[-1] != "--dp-size"


def test_a_chip_no_engine_runs_gets_no_command(tmp_path):
    assert engines_for(xpusim.chip("groq-lpu"))[0] == []
    assert engines_for(xpusim.chip("tpu-v6e"))[0] == ["vllm"]
    assert "trtllm" not in engines_for(xpusim.chip("mi300x"))[0]
    r = xpusim.plan("llama-3.1-8b", ["groq-lpu"], slo_ttft_ms=1000, slo_tpot_ms=100,
                    num_chips=1, concurrency=1, **SMALL)  # fmt: skip
    assert any("no engine" in n for n in r.chips[0].notes)


def test_emit_writes_the_choice_launch_command_and_manifest(tmp_path):
    r = xpusim.plan("llama-3.1-8b", ["h100-sxm"], slo_ttft_ms=400, slo_tpot_ms=25,
                    num_chips=2, concurrency=16, **SMALL)  # fmt: skip
    written = emit(r, tmp_path)
    launch = (tmp_path / "launch.sh").read_text()
    words, _ = command(r.best.config, "meta-llama/Llama-3.1-8B", None
                       if r.best.config.layout.prefill_replicas is None else "prefill")
    assert " ".join(words[:3]) in launch.replace("'", "")
    manifests = [p for p in written if p.endswith(".yaml")]
    assert manifests and "kind: Deployment" in Path(manifests[0]).read_text()


def test_max_batches_drops_only_limits_that_cannot_differ():
    assert max_batches(None) == [64, 256]
    assert max_batches(50) == [64]
    assert max_batches(100) == [64, 256]


def test_cli_json_and_front(tmp_path):
    from click.testing import CliRunner

    from xpusim.cli import cli

    done = CliRunner().invoke(cli, ["plan", "llama-3.1-8b", "--chip", "h100-sxm", "--chips",
                                    "1", "--concurrency", "8", "--prompt", "512", "--gen", "32",
                                    "--requests", "60", "--slo-ttft-ms", "400", "--slo-tpot-ms",
                                    "25", "--json", "--out", str(tmp_path)],
                              standalone_mode=False)  # fmt: skip
    assert done.exit_code == 0, done.output
    data = json.loads(done.output)
    assert data["best"]["config"]["chip"] == "h100-sxm"
    assert data["front"] and (tmp_path / "front.csv").exists()
