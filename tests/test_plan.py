"""xpusim plan (planning/): the pruned search's answer is the exhaustive one's, an
impossible objective is answered from the bounds alone, bad input is one line and exit 2,
and every emitted launch flag is one of planning/launch.toml's."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

import xpusim
from tests.cli_run import run_cli
from xpusim.errors import UserError
from xpusim.planning.launch import (
    carries,
    carries_plan,
    command,
    emit,
    engines_for,
    plan_gap,
    table,
)
from xpusim.planning.space import Config, Knobs, Layout, ReplicaPlan, max_batches

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
    plans = {side for o in r.chips[0].outcomes for side in o.config.layout.sides}
    assert any(p.ep == 2 for p in plans) and any(p.dp_attention for p in plans)
    assert all(not p.dp_attention or p.pp == 1 for p in plans)
    for o in r.chips[0].outcomes:  # each engine with the plans its flags carry (launch.toml)
        assert all(carries_plan(o.config.knobs.engine, p) for p in o.config.layout.sides)
    said = {d.split(":")[0]: d for d in r.decisions}
    assert set(said) == {"EP", "attention DP", "disaggregation"}
    lay = r.best.config.layout
    for name, used in (("EP", any(p.ep > 1 for p in lay.sides)),
                       ("attention DP", any(p.dp_attention for p in lay.sides)),
                       ("disaggregation", lay.decode is not None)):
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
    assert {k.engine for k in knobs if k.mtp} == {"sglang", "vllm", "trtllm"}  # each carries it
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
    """Layouts that ask for every setting: tp, pp, ep, fp8, both disaggregated roles (each
    side its own plan), attention DP and MTP where the engine's table carries them."""
    knobs = Knobs(engine, 64, 2048)
    layouts = [Layout("aggregated", ReplicaPlan(2, 2, 2), 1),
               Layout("disaggregated", ReplicaPlan(4), 2, 1, 1, ReplicaPlan(4, 1, 4, True))]
    layouts.append(Layout("aggregated", ReplicaPlan(4, 1, 4, True), 2))
    for layout in layouts:
        if all(carries_plan(engine, p) for p in layout.sides):
            for precision in ("bf16", "fp8"):
                yield Config("h100-sxm", 8, layout, precision, knobs)
    if carries(engine, "speculative_mtp"):  # and MTP drafting
        yield Config("h100-sxm", 8, layouts[2], "fp8", Knobs(engine, 64, 2048, (2, 0.8)))


@pytest.mark.parametrize("engine", list(table()))
def test_every_emitted_flag_is_in_the_engines_table(engine):
    entry = table()[engine]
    allowed = {word for flag in entry["flags"].values() for word in flag.split()
               if word.startswith("--")}  # fmt: skip
    keys = {line.split(":")[0] for line in entry.get("options", {}).values()}
    assert entry["source"].startswith("https://") and entry["version"]
    for config in _configs(engine):
        for role in (None, "prefill", "decode"):
            launch = command(config, "meta-llama/Llama-3.1-8B", role)
            words = launch.words
            assert " ".join(words).startswith(entry["command"])
            flags = {w for w in words if w.startswith("--")}
            assert flags <= allowed, flags - allowed
            assert {line.split(":")[0] for line in launch.options} <= keys
            assert "meta-llama/Llama-3.1-8B" in words
            assert not any("$" in w for w in words + launch.options)  # every value filled


@pytest.mark.parametrize("engine, dpa, mtp", [
    ("sglang", ["--enable-dp-attention", "--dp-size", "8"],
     ["--speculative-algorithm", "EAGLE", "--speculative-num-steps", "2",
      "--speculative-num-draft-tokens", "3"]),
    ("vllm", ["--data-parallel-size", "8", "--enable-expert-parallel"],
     ["--speculative-config", '{"method":"mtp","num_speculative_tokens":2}']),
    ("trtllm", ["enable_attention_dp: true", "--ep_size", "8"],
     ["speculative_config: {decoding_type: MTP, num_nextn_predict_layers: 2}"]),
])  # fmt: skip
def test_attention_dp_and_mtp_carry_each_engines_flags(engine, dpa, mtp):
    """A plan with attention DP over 8 chips, experts over all 8, and MTP drafting 2 tokens:
    each engine's own flags (vLLM's DP ranks replace its tensor parallelism; TensorRT-LLM
    takes both in its options YAML), or one line saying why the engine cannot."""
    plan = ReplicaPlan(8, 1, 8, True)
    config = Config("h100-sxm", 8, Layout("aggregated", plan, 1), "fp8",
                    Knobs(engine, 64, 2048, (2, 0.8)))  # fmt: skip
    launch = command(config, "deepseek-ai/DeepSeek-R1")
    said = launch.words + launch.options
    for want in (dpa, mtp):
        for word in want:
            assert word in said, (word, said)
    if engine == "vllm":
        assert launch.words[launch.words.index("--tensor-parallel-size") + 1] == "1"
        # its switch spreads the experts over every chip: ep 2 of 8 cannot be launched
        gap = plan_gap("vllm", ReplicaPlan(8, 1, 2, True))
        assert gap is not None and "ep 2 cannot be launched" in gap and "\n" not in gap
    if engine == "trtllm":
        assert launch.words[-2:] == ["--extra_llm_api_options", launch.options_path]
        assert launch.shell().startswith(f"cat > {launch.options_path} <<'EOF'")


def test_emit_writes_each_side_its_own_plan(tmp_path):
    """A disaggregated choice: the prefill and the decode replicas' commands each carry
    their side's plan, in launch.sh and in their own manifests."""
    from types import SimpleNamespace

    layout = Layout("disaggregated", ReplicaPlan(8, 1, 8), 3, 1, 2, ReplicaPlan(8, 1, 8, True))
    config = Config("h200-sxm", 24, layout, "fp8", Knobs("sglang", 256, 8192))
    result = SimpleNamespace(best=SimpleNamespace(config=config), model="deepseek-r1")
    written = emit(result, tmp_path)
    launch = (tmp_path / "launch.sh").read_text()
    prefill, decode = (tmp_path / "xpusim-plan-prefill.yaml", tmp_path / "xpusim-plan-decode.yaml")
    assert {str(prefill), str(decode)} <= set(written)
    assert "1 of them, 8 chips each: tp8 ep8)" in launch and "2 of them" in launch
    assert "--enable-dp-attention" not in prefill.read_text()
    assert "--enable-dp-attention" in decode.read_text() and "replicas: 2" in decode.read_text()
    assert "--disaggregation-mode decode" in decode.read_text()


def test_a_disaggregated_plan_searches_each_side_its_own_plan():
    """The prefill and the decode side choose their plans apart (sides.py), serve runs the
    decode replicas' own (serve's decode options), and the pruned answer is the exhaustive
    one's (on TPU v6e, which one engine runs, to keep the exhaustive search short)."""
    options = dict(slo_ttft_ms=400, slo_tpot_ms=25, num_chips=4, concurrency=8,
                   kinds=("disaggregated",), prompt=512, gen=16, requests=24)  # fmt: skip
    pruned = xpusim.plan("deepseek-v2-lite", ["tpu-v6e"], **options)
    layouts = {o.config.layout for o in pruned.chips[0].outcomes}
    assert any(lay.decode != lay.plan for lay in layouts)
    assert len({lay.plan.chips for lay in layouts}) > 1  # 1P of 2 + 2D of 1, and others
    differing = next(o for o in pruned.chips[0].outcomes
                     if o.simulated and o.config.layout.decode != o.config.layout.plan)
    assert differing.status in ("chosen", "dearer", "slo")
    every = xpusim.plan("deepseek-v2-lite", ["tpu-v6e"], exhaustive=True, **options)
    assert _answer(pruned) == _answer(every)


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
    words = command(r.best.config, "meta-llama/Llama-3.1-8B", None
                    if r.best.config.layout.decode is None else "prefill").words
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


def test_the_tables_print_numbers_in_the_one_style(capsys, monkeypatch):
    """A small model's 27,790 tokens/s per chip printed '2.779e+04' in both tables."""
    monkeypatch.setenv("COLUMNS", "200")
    code, out, err = run_cli(capsys, "plan", "llama-3.2-1b", "--chip", "h100-sxm", "--chips",
                             "1", "--concurrency", "256", "--slo-ttft-ms", "2000",
                             "--slo-tpot-ms", "50")  # fmt: skip
    assert code == 0, err
    assert not re.search(r"\de[+-]\d", out), out
    assert re.search(r"│\s+\d+(\.\d+)? k │", out) and "$0.0" in out, out
