"""The ONNX front end: round trips of the torch-imported models, symbolic input shapes,
invalid files and unknown ops, and `xpusim run model.onnx` on every chip."""

from __future__ import annotations

import json

import pytest

onnx = pytest.importorskip("onnx")
from cli_run import run_cli  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

from xpusim.api import graph as ir  # noqa: E402
from xpusim.api import model  # noqa: E402
from xpusim.errors import UserError  # noqa: E402
from xpusim.hardware.catalog import chip_ids  # noqa: E402
from xpusim.ir.tensor import Role  # noqa: E402


def assert_user_error(capsys, *argv, mentions=()):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == "" and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    for word in mentions:
        assert word in err, err


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """ResNet-50 and the small Llama as torch.onnx writes them (needs the torch extra)."""
    pytest.importorskip("onnxscript")
    torch_models = pytest.importorskip("torch_models")
    return torch_models, torch_models.onnx_files(tmp_path_factory.mktemp("onnx"))


@pytest.fixture
def mlp(tmp_path):
    """x[batch, 64] -> MatMul(64x32) -> Relu, with a symbolic batch dimension."""
    w = helper.make_tensor("w", TensorProto.FLOAT, [64, 32], [0.0] * 64 * 32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 32])],
        [w],
    )
    path = tmp_path / "mlp.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), path)
    return path


@pytest.mark.parametrize("name", ["resnet50", "llama"])
def test_round_trip_gives_the_same_ir_totals(exported, name):
    torch_models, paths = exported
    via_torch = ir(getattr(torch_models, name)())
    via_onnx = ir(model(paths[name], torch_models.ONNX_SHAPES[name]))
    assert via_onnx.matrix_flops == via_torch.matrix_flops
    # The exporter writes RMSNorm and the rotary embedding as single ops (RMSNormalization,
    # RotaryEmbedding), counted with the builder's per-element figures; torch's decomposition
    # adds a rsqrt per row and a negation per half element. The rest is identical.
    assert via_onnx.flops == pytest.approx(via_torch.flops, rel=1e-3)
    assert via_onnx.bytes == pytest.approx(via_torch.bytes, rel=1e-3)
    weights = via_onnx.tensor_bytes(Role.WEIGHT), via_torch.tensor_bytes(Role.WEIGHT)
    assert weights[0] == pytest.approx(weights[1], rel=1e-3)


@pytest.mark.parametrize("chip", chip_ids())
def test_run_on_every_chip(capsys, exported, chip):
    _, paths = exported
    for path, shape in [
        (paths["resnet50"], []),
        (paths["llama"], ["--input-shape", "input_ids=4,32"]),
    ]:
        code, out, err = run_cli(capsys, "run", str(path), "--chip", chip, *shape, "--json")
        assert code == 0, err
        result = json.loads(out)
        assert result["fits"] and result["latency_s"] > 0 and result["throughput"] > 0
        assert {"weights", "activations", "total", "capacity"} <= set(result["memory_bytes"])


def test_symbolic_dimensions_take_input_shapes(capsys, mlp):
    d = json.loads(run_cli(capsys, "inspect", str(mlp), "--input-shape", "x=8,64", "--json")[1])
    assert d["total_flops"] == 2 * 8 * 64 * 32 + 8 * 32  # matmul, then relu
    assert [op["source"] for op in d["ops"]] == ["onnx.MatMul", "onnx.Relu"]
    result = model(mlp, {"x": (8, 64)})
    assert result.batch == 8 and result.inputs == {"x": (8, 64)}
    code, out, _ = run_cli(capsys, "run", str(mlp), "--chip", "mtia-v1", "--input-shape", "x=8,64")
    assert code == 0 and "mtia-v1" in out
    assert_user_error(capsys, "run", str(mlp), "--chip", "mtia-v1", mentions=["--input-shape x="])
    assert_user_error(capsys, "inspect", str(mlp), "--input-shape", "X=8,64", mentions=["x"])
    assert_user_error(capsys, "inspect", str(mlp), "--input-shape", "x=8", mentions=["2 dim"])
    assert_user_error(capsys, "inspect", str(mlp), "--input-shape", "x=8,65", mentions=["64"])
    assert_user_error(capsys, "inspect", str(mlp), "--input-shape", "x=8,a", mentions=["NAME="])
    assert_user_error(capsys, "inspect", "llama-2-7b", "--input-shape", "x=1", mentions=["ONNX"])


def test_invalid_files_are_one_line_errors(capsys, tmp_path):
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\x08\x07 this is not protobuf \xff\xfe")
    assert_user_error(capsys, "run", str(garbage), "--chip", "h100-sxm",
                      mentions=["garbage.onnx", "not a valid ONNX model"])  # fmt: skip
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    assert_user_error(capsys, "inspect", str(empty), mentions=["not a valid ONNX model"])
    assert_user_error(capsys, "inspect", str(tmp_path / "missing.onnx"), mentions=["missing"])


def test_graphs_with_nothing_to_cost_are_one_line_errors(capsys, tmp_path, mlp):
    """An empty graph and a zero-size input divided a per-item figure by zero items."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [0, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [0, 4])
    zero = tmp_path / "zero.onnx"
    onnx.save(helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])],
                                                  "zero", [x], [y])), zero)  # fmt: skip
    assert_user_error(capsys, "run", str(zero), "--chip", "h100-sxm", mentions=["size 0"])
    empty = tmp_path / "nonodes.onnx"
    onnx.save(helper.make_model(helper.make_graph([], "nonodes", [x], [x])), empty)
    assert_user_error(capsys, "run", str(empty), "--chip", "h100-sxm", mentions=["no ops"])
    assert_user_error(capsys, "inspect", str(mlp), "--input-shape", f"x={2**64},64",
                      mentions=["2^40"])  # fmt: skip


def test_unknown_ops_are_listed_with_counts(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])
    nodes = [
        helper.make_node("Einsum", ["x", "x"], ["y"], equation="ij,jk->ik"),
        helper.make_node("Det", ["x"], ["d"]),
        helper.make_node("Det", ["y"], ["e"]),
    ]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, []) for n in "de"]
    path = tmp_path / "odd.onnx"
    onnx.save(helper.make_model(helper.make_graph(nodes, "odd", [x], outputs)), path)
    with pytest.raises(UserError) as error:
        model(path)
    assert "onnx.Det x2" in str(error.value) and "onnx.Einsum x1" in str(error.value)


def test_inspect_zoo_model_prints_its_prefill(capsys):
    d = json.loads(run_cli(capsys, "inspect", "llama-2-7b", "--prompt", "64", "--json")[1])
    assert d["total_flops"] == pytest.approx(ir("llama-2-7b", prompt=64).flops)
    assert {"ops", "total_flops", "total_bytes"} <= set(d)
    code, out, _ = run_cli(capsys, "inspect", "llama-2-7b", "--batch", "2")
    assert code == 0 and "layers.31.down" in out


def test_docs_list_every_supported_op():
    from pathlib import Path

    from xpusim.workloads import onnx_import, onnx_ops, torch_import, torch_ops

    doc = (Path(__file__).parents[1] / "docs" / "importers.md").read_text()
    names = [*torch_import.HANDLERS, *torch_ops.VIEWS, *torch_ops.CREATION, *torch_ops.INLINED,
             *onnx_import.HANDLERS, *onnx_ops.VIEWS, *onnx_ops.CREATION]  # fmt: skip
    assert [n for n in names if f"`{n}`" not in doc] == []
