"""run's plan search with the torus layouts (scenarios/llm/torus.py)."""

import json

import pytest
from cli_run import run_cli

import xpusim

DONE_WHEN = ["run", "palm-540b", "--chip", "tpu-v4", "--chips", "64", "--batch", "64",
             "--prompt", "2048", "--gen", "64", "--precision", "bf16",
             "--weight-precision", "int8"]  # fmt: skip


def test_palm_540b_batch_64_int8_fits_on_64_tpu_v4_and_names_its_layouts():
    """The issue's case: every (tp, pp, dp) plan holds PaLM's one KV head whole on each chip
    (16.6 GB at batch 64); Pope's decode layout splits the cache by sequence, fits and is
    faster. (With run's prefill chunked as engines do, tp16 pp2 dp2 fits too, at 0.10 s a
    token against the layouts' 0.018 s.)"""
    r = xpusim.simulate("palm-540b", "tpu-v4", chips=64, batch=64, prompt=2048, gen=64,
                        precision="bf16", weight_precision="int8")  # fmt: skip
    assert r.fits and "decode ws-2d-batch-kv" in r.layout
    assert r.per_chip_memory_bytes.total <= r.per_chip_memory_bytes.capacity
    assert r.plan_search["runner_up"]["tpot_s"] > 2 * r.tpot_s  # the searched plan's answer
    assert r.ops == [] and any("torus layouts" in n for n in r.notes)
    assert r.tpot_s > 0 and r.ttft_s > r.tpot_s and r.joules_per_token > 0


def test_the_cli_names_the_layout(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")
    code, out, err = run_cli(capsys, *DONE_WHEN)
    assert code == 0, err
    assert "ws-2d-batch-kv" in out and "yes" in out
    code, out, err = run_cli(capsys, *DONE_WHEN, "--json")
    assert code == 0, err
    assert json.loads(out)["layout"].startswith("prefill ")


@pytest.mark.parametrize(("chip", "chips", "batch"), [
    ("tpu-v5p", 64, 256), ("tpu-v6e", 64, 64), ("tpu-v7", 64, 512), ("trainium2", 16, 64)])
def test_the_layouts_are_offered_on_every_torus_system(chip, chips, batch):
    """PaLM-540B's single KV head, held whole on every chip by the (tp, pp, dp) plans,
    split by sequence over the slice: the layouts win on each torus system. (Where a plan
    with dp replicas fits, as tp16 dp4 does on v5p at 256 with the prefill chunked, it is
    judged at the batch each replica runs, not a dp-th of it.)"""
    r = xpusim.simulate("palm-540b", chip, chips=chips, batch=batch, prompt=2048, gen=64,
                        precision="bf16", weight_precision="int8")  # fmt: skip
    assert r.fits and "batch-kv" in r.layout, (r.plan, r.reason)


def test_a_switch_system_keeps_its_searched_plan():
    r = xpusim.simulate("palm-540b", "h100-sxm", chips=64, batch=64, prompt=2048, gen=64,
                        precision="bf16", weight_precision="int8")  # fmt: skip
    assert r.layout == ""


def test_a_fitting_plan_stands_when_the_layouts_do_not_beat_it():
    """Llama-2-7B on 4 TPU v4: tp4 fits, and the layouts' best decode is the same Megatron
    split, so the op-level costing of the searched plan stands."""
    r = xpusim.simulate("llama-2-7b", "tpu-v4", chips=4, batch=1, prompt=128, gen=128,
                        precision="int8")  # fmt: skip
    assert r.layout == "" and r.plan["tp"] == 4 and r.ops


def test_a_sweep_and_a_single_run_agree_on_a_layout_answer():
    from xpusim.api import simulate_many

    options = dict(chips=64, batch=64, prompt=2048, gen=64, precision="bf16",
                   weight_precision="int8")  # fmt: skip
    model = xpusim.model("palm-540b")
    (many,) = simulate_many(model, [(xpusim.target("tpu-v4"), options)])
    alone = xpusim.simulate(model, "tpu-v4", **options)
    assert many.layout == alone.layout and many.tpot_s == alone.tpot_s


def test_overlapped_layouts_come_with_overlap_as_run_s_own_plans_do():
    """By default run serializes its plans' collectives, and the layouts theirs; with
    --overlap both hide them, and the overlapped layouts are the faster."""
    options = dict(chips=64, batch=64, prompt=2048, gen=64, precision="bf16",
                   weight_precision="int8")  # fmt: skip
    plain = xpusim.simulate("palm-540b", "tpu-v4", **options)
    hidden = xpusim.simulate("palm-540b", "tpu-v4", overlap=True, **options)
    assert "overlap" not in plain.layout
    assert hidden.layout.endswith("ws-2d-batch-kv-overlap") and hidden.tpot_s < plain.tpot_s
