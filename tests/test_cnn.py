"""ResNet-50 from the zoo (workloads/cnn.py), built without torch: its count, its FLOPs,
the command line, and its refusals. tests/test_torch_import.py holds it equal to the same
module through torch.export."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from cli_run import run_cli

import xpusim
from xpusim.errors import UserError
from xpusim.ir.dtypes import DType
from xpusim.ir.tensor import Role
from xpusim.workloads.cnn import resnet_from_json


def test_resnet50_counts_torchvisions_parameters_and_flops():
    cfg = xpusim.model("resnet-50")
    assert cfg.param_count == 25_557_032  # torchvision's ResNet50_Weights num_params
    graph = cfg.model(2, DType.FP32).graph
    running_stats = sum(op.inputs[3].numel + op.inputs[4].numel
                        for op in graph if op.attr("norm") == "batch")  # fmt: skip
    assert graph.tensor_bytes(Role.WEIGHT) == 4 * (cfg.param_count + running_stats)
    assert graph.matrix_flops / 2 == pytest.approx(2 * 4.09e9, rel=0.01)  # 4.09 GMACs


def test_run_gives_images_per_second(capsys):
    code, out, err = run_cli(capsys, "run", "resnet-50", "--chip", "h100-sxm", "--batch", "4",
                             "--precision", "int8", "--json")  # fmt: skip
    assert code == 0, err
    r = json.loads(out)
    assert r["inputs"] == {"images": [4, 3, 224, 224]}
    assert r["throughput"] == pytest.approx(4 / r["latency_s"])
    assert r["latency_s"] >= r["total_flops"] / 1979e12  # H100 INT8 dense peak


@pytest.mark.parametrize("args, says", [
    (["--gen", "4"], "--gen does not apply"),
    (["--chips", "4"], "a CNN runs on one chip"),
    (["--mode", "training"], "training is modelled for transformers"),
])  # fmt: skip
def test_what_a_cnn_cannot_take_is_one_line(capsys, args, says):
    code, out, err = run_cli(capsys, "run", "resnet-50", "--chip", "h100-sxm", *args)
    assert code == 2 and says in err and err.count("\n") == 1 and not out


@pytest.mark.parametrize("data, says", [
    ({"stages": [[64, 3, 1]], "depth": 50}, "unknown field 'depth'"),
    ({"stages": [[64, 3]]}, "[width, blocks, stride] triples"),
    ({"stages": [[64, 0, 1]]}, "'stages[0].blocks' must be an integer from 1"),
    ({"stages": [[64, 3, 1]], "image_size": 0}, "'image_size' must be an integer from 1"),
    # each of these was taken as written (224.7, "224", true) or overflowed or hung
    ({"stages": [[64, 3, 1]], "image_size": 224.7}, "'image_size' must be an integer"),
    ({"stages": [[64, 3, 1]], "image_size": True}, "'image_size' must be an integer"),
    ({"stages": [[64, 3, 1]], "image_size": 10**300}, "'image_size' must be an integer"),
    ({"stages": [[64, 10**7, 1]]}, "'stages[0].blocks' must be an integer"),
    ({"stages": [[64, 9_000, 1], [64, 9_000, 1]]}, "more than 10,000 blocks"),
])  # fmt: skip
def test_a_bad_config_is_refused_by_field(data, says):
    with pytest.raises(UserError, match=r"^cfg\.json: ") as e:
        resnet_from_json(data, "x", "cfg.json")
    assert says in str(e.value)


def test_python_dash_m_runs_the_command_line():
    done = subprocess.run([sys.executable, "-m", "xpusim", "models", "--json"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert "resnet-50" in {m["id"] for m in json.loads(done.stdout)["models"]}


def test_served_alone_a_query_takes_what_one_image_takes():
    """At a rate where queries never meet, with no batching window, each runs as a batch of
    one: its latency is run's batch-1 latency; more load batches them and raises p50."""
    one = xpusim.simulate("resnet-50", "h100-sxm", batch=1, precision="int8")
    alone = xpusim.serve("resnet-50", "h100-sxm", rate=10, window_ms=0, requests=500,
                         precision="int8")  # fmt: skip
    assert alone.latency_s.p50 == pytest.approx(one.latency_s, rel=1e-9)
    # a Poisson arrival lands inside another's 0.4 ms now and then: it waits, or joins
    assert alone.latency_s.mean == pytest.approx(one.latency_s, rel=0.01)
    assert alone.mean_batch == pytest.approx(1, rel=0.01)
    loaded = xpusim.serve("resnet-50", "h100-sxm", rate=20000, window_ms=0, requests=5000,
                          precision="int8", sla_ms=15)  # fmt: skip
    assert loaded.mean_batch > 1 and loaded.latency_s.p50 > alone.latency_s.p50
    assert loaded.latency_s.p99 >= loaded.latency_s.p50
    assert loaded.goodput_queries_per_s <= loaded.queries_per_s


def test_serving_a_cnn_refuses_an_llms_load_in_one_line(capsys):
    code, out, err = run_cli(capsys, "serve", "resnet-50", "--chip", "h100-sxm", "--rate", "100",
                             "--concurrency", "4")  # fmt: skip
    assert code == 2 and "a CNN's serving takes no option 'concurrency'" in err and not out
