"""The DLRM builder against hand counts, the zoo against published figures, and bad configs."""

from __future__ import annotations

import json

import pytest

from xpusim.cli import main
from xpusim.errors import UserError
from xpusim.ir.dtypes import DType
from xpusim.ir.op import OpKind
from xpusim.ir.tensor import Role
from xpusim.workloads.dlrm import build_batch
from xpusim.workloads.dlrm_config import config_from_json
from xpusim.workloads.resolve import load_model
from xpusim.workloads.zoo import zoo_entry

# MLPerf DLRM-v2, shared/research/recsys-and-training.md section 1
V2_ROWS = [40000000, 39060, 17295, 7424, 20265, 3, 7122, 1543, 63, 40000000, 3067956, 405282,
           10, 2209, 11938, 155, 4, 976, 14, 40000000, 40000000, 40000000, 590152, 12973, 108,
           36]  # fmt: skip
V2_POOLING = [3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1]


def small(**changes) -> dict:
    """A two-table DLRM with dot interaction, small enough to count by hand."""
    data = {"dense_features": 4, "bottom_mlp": [8, 16],
            "tables": [{"rows": 100, "dim": 16, "pooling": 3},
                       {"rows": 50, "dim": 16, "pooling": 2, "count": 2}],
            "interaction": "dot", "top_mlp": [32, 1]}  # fmt: skip
    return {**data, **changes}


def test_dlrm_v2_matches_the_published_model():
    cfg = load_model("dlrm-v2")
    assert [t.rows for t in cfg.tables] == V2_ROWS
    assert [t.pooling for t in cfg.tables] == V2_POOLING
    assert {t.dim for t in cfg.tables} == {128}
    assert cfg.embedding_params == 26_135_627_264  # sum of rows x 128
    assert cfg.dense_params == 16_044_545  # bottom 171,392 + cross 10,627,200 + top 5,245,953
    assert cfg.concat_width == 3456 and cfg.lookups_per_sample == 214
    assert cfg.param_count == pytest.approx(zoo_entry("dlrm-v2").published_params, rel=0.002)
    assert cfg.matrix_flops_per_sample == pytest.approx(32.1e6, rel=0.005)  # "about 32.1"


def test_dlrm_v2_flops_and_bytes_against_hand_counts():
    cfg, b = load_model("dlrm-v2"), 4
    graph = build_batch(cfg, b, DType.BF16)
    macs = (13 * 512 + 512 * 256 + 256 * 128  # bottom MLP
            + 3 * 2 * 3456 * 512  # three low-rank cross layers: V then W
            + 3456 * 1024 + 1024 * 1024 + 1024 * 512 + 512 * 256 + 256 * 1)  # top MLP  # fmt: skip
    assert graph.matrix_flops == 2 * macs * b
    pooling = b * 214 * 128  # one add per gathered element
    cross_mix = 3 * b * 3456 * 2  # x0 * y + x per element
    assert graph.flops - graph.matrix_flops == pooling + cross_mix + b * 4  # + sigmoid
    assert graph.tensor_bytes(Role.WEIGHT) == cfg.param_count * 2
    bag = next(op for op in graph if op.name == "emb.20")  # pooling 100
    reads = b * 100 * 128 * 2 + b * 100 * 4  # the gathered rows and their int32 ids
    assert bag.bytes == reads + b * 128 * 2  # and the pooled row it writes


def test_int8_rows_carry_a_scale_and_bias():
    cfg = load_model("dlrm-v2")
    graph = build_batch(cfg, 2, DType.FP16, DType.INT8)
    tables = [op.inputs[0] for op in graph if op.kind is OpKind.EMBEDDING]
    assert sum(t.nbytes for t in tables) == sum(V2_ROWS) * (128 + 4)  # FBGEMM's fp16 scale+bias
    bag = next(op for op in graph if op.name == "emb.0")
    assert bag.vector_flops == 2 * 3 * 128 * 3  # dequantize (2) and accumulate (1)


def test_dot_interaction_hand_count():
    cfg = config_from_json(small(), "small", "test")
    assert cfg.features == 4 and cfg.interaction_width == 16 + 6  # dense + 4 choose 2
    b = 3
    graph = build_batch(cfg, b, DType.FP16)
    macs = 4 * 8 + 8 * 16 + 4 * 4 * 16 + 22 * 32 + 32 * 1  # bottom, X X^T, top
    assert graph.matrix_flops == 2 * macs * b
    assert cfg.dense_params == (4 * 8 + 8) + (8 * 16 + 16) + (22 * 32 + 32) + (32 + 1)
    assert cfg.embedding_params == 100 * 16 + 2 * 50 * 16


def test_cat_interaction_concatenates():
    cfg = config_from_json(small(interaction="cat"), "small", "test")
    assert cfg.interaction_width == 16 + 3 * 16


@pytest.mark.parametrize(("changes", "field"), [
    ({"tables": [{"dim": 16, "pooling": 3}]}, "tables[0].rows"),
    ({"tables": [{"rows": 100, "dim": 0, "pooling": 3}]}, "tables[0].dim"),
    ({"tables": [{"rows": 100, "dim": 16, "pooling": -1}]}, "tables[0].pooling"),
    ({"tables": [{"rows": 100, "dim": 16, "pooling": 1, "size": 3}]}, "tables[0].size"),
    ({"tables": []}, "tables"),
    ({"bottom_mlp": [8, 0]}, "bottom_mlp[1]"),
    ({"top_mlp": "32,1"}, "top_mlp"),
    ({"interaction": "attention"}, "interaction"),
    ({"interaction": "dcn"}, "dcn_layers"),
    ({"tables": [{"rows": 100, "dim": 32, "pooling": 3}]}, "tables[0].dim"),  # dot needs 16
    ({"top_mpl": [1]}, "top_mpl"),
    # each layer is its own ops: 10^9 of them ran for minutes before
    ({"interaction": "dcn", "dcn_layers": 10**9, "dcn_low_rank": 8}, "dcn_layers' has"),
    ({"top_mlp": [8] * 10_001}, "top_mlp' has"),
])  # fmt: skip
def test_malformed_config_names_the_field(changes, field):
    with pytest.raises(UserError, match=field.replace("[", r"\[").replace("]", r"\]")):
        config_from_json(small(**changes), "small", "test.json")


def test_malformed_config_file_exits_2_naming_the_field(capsys, tmp_path):
    path = tmp_path / "model.json"
    for changes, field in [
        ({"tables": [{"dim": 16, "pooling": 3}]}, "tables[0].rows"),
        ({"tables": [{"rows": 9, "dim": 0, "pooling": 3}]}, "tables[0].dim"),
    ]:
        path.write_text(json.dumps({"_xpusim": {"kind": "dlrm"}, **small(**changes)}))
        with pytest.raises(SystemExit) as e:
            main(["run", str(path), "--chip", "mtia-v1"])
        out, err = capsys.readouterr()
        assert e.value.code == 2 and out == "" and len(err.strip().splitlines()) == 1
        assert field in err and "model.json" in err


def test_a_user_dlrm_file_runs(capsys, tmp_path):
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"_xpusim": {"kind": "dlrm"}, **small()}))
    main(["run", str(path), "--chip", "mtia-v1", "--batch", "64", "--json"])
    result = json.loads(capsys.readouterr().out)
    assert result["model"] == "mine" and result["fits"]
    assert result["lookups_served"] == {"sram": 1.0}  # 9.6 kB of tables live in SRAM


def test_family_complexities_match_the_published_classes():
    """LC1-LC5 and HC1-HC4 in MFLOP per sample (MTIA 2i, ISCA 2025, Fig. 6), within 3%."""
    targets = {"lc1": 15, "lc2": 50, "lc3": 57, "lc4": 91, "lc5": 105,
               "hc1": 480, "hc2": 600, "hc3": 940, "hc4": 1000}  # fmt: skip
    for name, mflop in targets.items():
        entry = zoo_entry(f"meta-{name}")
        cfg = entry.config
        assert cfg.matrix_flops_per_sample / 1e6 == pytest.approx(mflop, rel=0.03), name
        assert entry.published_params is None  # synthetic: nothing was published
        assert cfg.embedding_params / cfg.param_count > 0.9  # "90% of model size" (Table 1)
        assert 100e9 <= cfg.param_count * 4 <= 300e9  # 100-300 GB ranking models, fp32
