"""`xpusim validate` in parts: filters, scoring on a process pool, BERT through the encoder
scenario, the parity plot's panels."""

from __future__ import annotations

import json

import pytest
from cli_run import refused, run_cli

from xpusim.errors import UserError
from xpusim.validation.points import load_points
from xpusim.validation.score import select, validate


def test_filters_pick_by_chip_source_and_workload():
    points = load_points()
    tpu = select(points, chips=["tpu-v4"])
    assert tpu and {p.chip for p in tpu} == {"tpu-v4"}
    gemms = select(points, workloads=["gemm"], sources=["firoozshahian"])
    assert gemms and all(p.workload == "gemm" and "Firoozshahian" in p.source for p in gemms)
    with pytest.raises(UserError, match="did you mean tpu-v4"):
        select(points, chips=["tpu-v44"])


def test_a_pool_scores_what_one_process_does():
    points = select(load_points(), workloads=["gemm", "cnn-inference", "llm-training"])
    ticks = []
    one = validate(points, workers=1)
    two = validate(points, lambda done, total: ticks.append((done, total)), workers=2)
    assert [(p.id, p.predicted) for p in one.points] == [(p.id, p.predicted) for p in two.points]
    assert ticks[-1] == (len(points), len(points))


def test_bert_is_scored_through_the_encoder_scenario():
    v = validate(select(load_points(), workloads=["encoder-inference"]))
    # skipped only: Groq's BERT-Large on 4 TSPs, a published P99 bound (no value to score)
    assert v.n_points == 2 and all("range" in s.reason for s in v.skipped)
    assert all(p.predicted > 0 and "384 tokens" in p.detail for p in v.points)


def test_validate_on_one_chip_from_the_command(capsys, tmp_path):
    code, out, err = run_cli(capsys, "validate", "--chip", "tpu-v4", "--json", "--out",
                             str(tmp_path))  # fmt: skip
    assert code == 0, err
    found = json.loads(out)
    assert {p["chip"] for p in found["points"]} == {"tpu-v4"}
    assert "did you mean" in refused(capsys, "validate", "--chip", "tpu-v5x", "--out",
                                     str(tmp_path))  # fmt: skip


def test_the_parity_plot_has_a_panel_per_metric(tmp_path):
    pytest.importorskip("matplotlib", reason="the parity plot needs the 'plot' extra")
    import matplotlib.image

    from xpusim.validation.report import parity_plot

    v = validate(select(load_points(), workloads=["gemm", "cnn-inference"]))
    path = tmp_path / "parity.png"
    assert parity_plot(v, path)
    height, width = matplotlib.image.imread(path).shape[:2]
    assert width > 1.5 * height  # two metrics: two panels side by side
