"""The command line: exit codes, one-line errors, and JSON that carries the contract."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
from cli_run import run_cli

from xpusim.hardware.catalog import CATALOG_DIR


def run_json(capsys, *argv):
    code, out, err = run_cli(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def assert_user_error(capsys, *argv, mentions=()):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err
    for word in mentions:
        assert word in err, err
    return err


def test_run_json_contract(capsys):
    d = run_json(capsys, "run", "llama-2-7b", "--chip", "h100-sxm", "--batch", "1",
                 "--prompt", "128", "--gen", "128", "--precision", "fp16")  # fmt: skip
    floor = d["memory_bytes"]["weights"] / 3.35e12
    assert floor <= d["tpot_s"] <= 1.6 * floor
    assert d["ops"] and {"name", "time_s", "bottleneck"} <= set(d["ops"][0])


def test_mtia_65b_questions(capsys):
    big = run_json(capsys, "run", "llama-65b", "--chip", "mtia-v1-128gb", "--precision", "int8")
    assert big["fits"] and big["tpot_s"] >= 65e9 / 176e9
    small = run_json(capsys, "run", "llama-65b", "--chip", "mtia-v1", "--precision", "int8")
    assert not small["fits"] and "memory" in small["reason"] and small["min_chips"] == 2


def test_groq_70b(capsys):
    d = run_json(capsys, "run", "llama-2-70b", "--chip", "groq-lpu", "--precision", "int8")
    assert not d["fits"] and "memory" in d["reason"] and d["min_chips"] >= 300


def test_listing_commands(capsys):
    chips = run_json(capsys, "chips")["chips"]
    assert {"mtia-v1", "tpu-v4", "groq-lpu", "h100-sxm"} <= {c["id"] for c in chips}
    models = run_json(capsys, "models")["models"]
    assert "llama-2-70b" in {m["id"] for m in models}
    chip = run_json(capsys, "chip", "tpu-v4")
    assert chip["sources"] and chip["tdp_w"]["source"] in chip["sources"]
    for argv in (["chips"], ["models"], ["chip", "h100-sxm"]):
        code, out, _ = run_cli(capsys, *argv)
        assert code == 0 and out


def test_compare_and_demo(capsys):
    d = run_json(capsys, "compare", "llama-2-7b", "--chip", "h100-sxm", "--chip", "mtia-v1",
                 "--precision", "int8")  # fmt: skip
    assert [r["chip"] for r in d["results"]] == ["h100-sxm", "mtia-v1"]
    demo = run_json(capsys, "demo")
    assert {r["chip"] for r in demo["results"]} == {
        "mtia-v1", "tpu-v4", "groq-lpu", "apple-m2-ane", "h100-sxm"}  # fmt: skip
    assert demo["summary"]
    code, out, _ = run_cli(capsys, "demo")
    assert code == 0 and "groq-lpu" in out


@pytest.mark.parametrize(("argv", "mentions"), [
    (["run", "llama-2-7b", "--chip", "h100-sx"], ["h100-sxm"]),
    (["run", "llama2-7b", "--chip", "h100-sxm"], ["llama-2-7b"]),
    (["run", "llama-2-7b", "--chip", "h100-sxm", "--batch", "0"], ["--batch"]),
    (["run", "llama-2-7b", "--chip", "h100-sxm", "--prompt", "-3"], ["--prompt"]),
    (["run", "llama-2-7b", "--chip", "mtia-v1", "--precision", "fp8"], ["fp8", "int8"]),
    (["run", "llama-2-7b", "--chip", "h100-sxm", "--precision", "fp9"], ["--precision"]),
    (["run", "llama-2-70b", "--chip", "h100-sxm", "--chips", "9", "--tp", "3"], ["heads"]),
    (["run", "llama-2-70b", "--chip", "h100-sxm", "--chips", "8", "--tp", "4", "--pp", "4"],
     ["16 chips", "--chips is 8"]),
    (["run", "llama-2-70b", "--chip", "h100-sxm", "--chips", "8", "--pp", "100"], ["layers"]),
    (["run", "llama-2-70b", "--chip", "h100-sxm", "--chips", "8", "--ep", "2"], ["MoE"]),
    (["run", "llama-2-70b", "--chip", "dgx-h100", "--chips", "100000"], ["at most"]),
    (["run", "llama-2-7b", "--chip", "h100-sxm", "--mode", "training", "--precision", "int8"],
     ["training", "bf16"]),
    (["run", "llama-2-7b", "--chip", "h100-sxm", "--mode", "training", "--zero", "4"],
     ["--zero"]),
    (["run", "llama-2-7b", "--chip", "h100-sxm", "--mode", "training", "--recompute", "most"],
     ["--recompute"]),
    (["run", "llama-2-7b", "--chip", "h100-sxm", "--chips", "8", "--mode", "training",
      "--batch", "3", "--dp", "8"], ["--batch 3", "8 data-parallel"]),
    (["run", "meta-lc1", "--chip", "h100-sxm", "--mode", "training"], ["transformers"]),
    (["chip", "tpu-v9"], ["tpu-v4"]),
    (["compare", "llama-2-7b"], ["--chip"]),
    (["frobnicate"], ["frobnicate"]),
])  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(capsys, argv, mentions):
    assert_user_error(capsys, *argv, mentions=mentions)


def test_malformed_chip_toml(capsys, tmp_path):
    good = (CATALOG_DIR / "h100-sxm.toml").read_text()
    broken = tmp_path / "broken.toml"
    broken.write_text(good.replace("tdp_w = { value = 700", "tdp_w = { value = -700"))
    assert_user_error(capsys, "run", "llama-2-7b", "--chip", str(broken),
                      mentions=["broken.toml", "tdp_w"])  # fmt: skip
    broken.write_text(good + "\n[[[ nonsense")
    assert_user_error(capsys, "chip", str(broken), mentions=["malformed TOML"])


def test_config_json_missing_a_field(capsys, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llama", "hidden_size": 64,
                                "num_attention_heads": 4, "num_hidden_layers": 2,
                                "vocab_size": 100}))  # fmt: skip
    assert_user_error(capsys, "run", str(path), "--chip", "h100-sxm",
                      mentions=["intermediate_size"])  # fmt: skip
    path.write_text(json.dumps({"model_type": "llama", "hidden_size": 64,
                                "intermediate_size": 128, "num_attention_heads": 4,
                                "num_hidden_layers": 2, "vocab_size": 100}))  # fmt: skip
    d = run_json(capsys, "run", str(path), "--chip", "h100-sxm")
    assert d["fits"]


def test_help_starts_without_heavy_imports():
    code = ("import sys, xpusim.cli; heavy = {'numpy', 'pydantic', 'rich'} & set(sys.modules);"
            "print(sorted(heavy))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_attention_precision_on_the_command_line(capsys):
    """--attention-precision reaches the simulation, and a format the chip lacks is exit 2
    naming the option."""
    base = ("run", "llama-2-7b", "--chip", "h100-sxm", "--precision", "fp8", "--prompt", "2048",
            "--json")  # fmt: skip
    fp8 = json.loads(run_cli(capsys, *base)[1])
    mixed = json.loads(run_cli(capsys, *base, "--attention-precision", "fp16")[1])
    assert mixed["ttft_s"] > fp8["ttft_s"]
    code, _, err = run_cli(capsys, "run", "llama-2-7b", "--chip", "a100-sxm-80gb",
                           "--attention-precision", "fp8")  # fmt: skip
    assert code == 2 and "--attention-precision fp8" in err


@pytest.mark.parametrize("argv, says", [
    (("--batch", "1000000", "--prompt", "3000000000"), "2^40"),  # would overflow int64
    (("--gen", "99999999999999999999999"), "--gen"),  # past what any option takes
    (("--batch", str(2**40 + 1)), "2^40"),  # the guard is named where it refuses
])  # fmt: skip
def test_too_many_tokens_is_one_line(capsys, argv, says):
    assert_user_error(capsys, "run", "llama-2-7b", "--chip", "h100-sxm", *argv,
                      mentions=(says,))  # fmt: skip


@pytest.mark.parametrize("command", ["run", "serve", "sweep", "compare", "sensitivity"])
def test_help_shows_ranges_people_can_use(capsys, command):
    """Bounds in --help are advice: a lower bound, never click's `x<=None` for an unbounded
    number nor the 2^40 guard every count has."""
    code, out, _ = run_cli(capsys, command, "--help")
    assert code == 0
    assert "None]" not in out and "1099511627776" not in out


def test_run_and_inspect_report_total_and_active_parameters(capsys):
    from xpusim.workloads.zoo import zoo_entry

    entry = zoo_entry("mixtral-8x7b")
    ran = run_json(capsys, "run", "mixtral-8x7b", "--chip", "h100-sxm", "--chips", "2")
    shown = run_json(capsys, "inspect", "mixtral-8x7b")
    for d in (ran, shown):
        assert d["params"] == entry.config.param_count
        assert abs(d["params"] / entry.published_params - 1) < 0.01
        assert d["active_params"] == entry.config.active_param_count < d["params"] / 3
    code, out, _ = run_cli(capsys, "run", "mixtral-8x7b", "--chip", "h100-sxm", "--chips", "2")
    assert code == 0 and "46.7B parameters, 12.9B active" in out


def test_web_without_its_extra_says_how_to_install_it(capsys, monkeypatch):
    import importlib.util

    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "fastapi" else found(name, *a))
    assert_user_error(capsys, "web", mentions=("pip install 'xpusim[web]'",))
    assert_user_error(capsys, "web", "--port", "70000", mentions=("--port",))


def test_compare_of_several_models_ends_with_perf_per_watt_against_the_first_chip(capsys):
    """The MTIA paper's comparison shape: DLRMs of rising complexity, each chip's work per
    joule against the first chip's, and the geometric mean; on provisioned power per card."""
    args = ["compare", "meta-lc1", "meta-hc1", "--chip", "a100-sxm-80gb", "--chip", "mtia-v1",
            "--precision", "fp16", "--batch", "256", "--json"]  # fmt: skip
    code, out, err = run_cli(capsys, *args, "--provisioned-w", "mtia-v1=65",
                             "--provisioned-w", "a100-sxm-80gb=562.5")  # fmt: skip
    assert code == 0, err
    found = json.loads(out)
    assert [(r["model"], r["chip"]) for r in found["results"]] == [
        ("meta-lc1", "a100-sxm-80gb"), ("meta-lc1", "mtia-v1"),
        ("meta-hc1", "a100-sxm-80gb"), ("meta-hc1", "mtia-v1")]  # fmt: skip
    summary = found["perf_per_watt"]
    assert summary["basis"] == "provisioned power" and summary["relative_to"] == "a100-sxm-80gb"
    for r in found["results"]:
        watts = 65 if r["chip"] == "mtia-v1" else 562.5
        assert summary["per_joule"][r["model"]][r["chip"]] == pytest.approx(
            r["queries_per_s"] / (watts * r["chips"]))
    ratios = [summary["relative"][m]["mtia-v1"] for m in ("meta-lc1", "meta-hc1")]
    assert summary["relative"]["meta-lc1"]["a100-sxm-80gb"] == 1.0
    assert summary["geometric_mean"]["mtia-v1"] == pytest.approx(math.sqrt(ratios[0] * ratios[1]))
    # on the chips' simulated power, the same ratio is each one's queries per joule
    code, out, _ = run_cli(capsys, *args)
    summary = json.loads(out)["perf_per_watt"]
    lc1 = {r["chip"]: r for r in json.loads(out)["results"] if r["model"] == "meta-lc1"}
    assert summary["basis"] == "simulated power"
    assert summary["relative"]["meta-lc1"]["mtia-v1"] == pytest.approx(
        lc1["mtia-v1"]["queries_per_joule"] / lc1["a100-sxm-80gb"]["queries_per_joule"])


def test_compare_of_one_model_prints_what_it_always_did(capsys):
    code, out, _ = run_cli(capsys, "compare", "meta-lc1", "--chip", "mtia-v1", "--json")
    assert code == 0 and "perf_per_watt" not in json.loads(out)


@pytest.mark.parametrize("setting, says", [
    ("h100-sxm=700", "not one of the --chip given"),
    ("mtia-v1", "CHIP=WATTS"),
    ("mtia-v1=-5", "CHIP=WATTS"),
    ("mtia-v1=nan", "CHIP=WATTS"),
    ("mtia-v1=1e-300", "0.001 to 1e6"),  # a ratio against it overflowed to inf
    ("mtia-v1=1e308", "0.001 to 1e6"),
])  # fmt: skip
def test_a_bad_provisioned_power_is_one_line(capsys, setting, says):
    code, out, err = run_cli(capsys, "compare", "meta-lc1", "--chip", "mtia-v1",
                             "--provisioned-w", setting)  # fmt: skip
    assert code == 2 and says in err and not out


@pytest.mark.parametrize(("value", "shown"), [
    (9.37e-10, "937 ps"), (3.15e-6, "3.15 µs"), (999.9995e-6, "1 ms"), (5.41, "5.41 s"),
    (0.0, "0 s"),
])  # fmt: skip
def test_times_print_with_a_prefix_down_to_picoseconds(value, shown):
    from xpusim.report.units import seconds

    assert seconds(value) == shown


def test_a_model_that_does_not_fit_says_why_in_its_row(capsys):
    """Too few chips for one copy: how many are needed at least; enough chips but a plan
    whose fullest chip is over (Groq's 230 MB chips with a 4,096-token prompt's
    activations): that chip's bytes against its capacity, not a count below the one given."""
    code, out, _ = run_cli(capsys, "run", "llama-2-70b", "--chip", "h100-sxm")
    assert code == 0 and "no: needs 2+ chips" in out
    code, out, _ = run_cli(capsys, "run", "llama-2-70b", "--chip", "groq-lpu", "--chips", "576",
                           "--precision", "int8", "--prompt", "4096", "--gen", "16")  # fmt: skip
    assert code == 0 and "no: fullest chip" in out and "of 231 MB" in out and "+ chips" not in out
