"""A step table's rows are costed a block at a time when first read (serving/lazy_rows.py):
every row equals the table costed whole, bit for bit, whatever order the rows are read in,
and only the blocks read are costed."""

from __future__ import annotations

from dataclasses import fields, replace

import numpy as np
import pytest

import xpusim
from xpusim.scenarios.llm.inference import chosen_plan
from xpusim.serving.lazy_rows import LazyTable, Rows
from xpusim.serving.step_cost import TOKEN_BLOCK_ROWS, Work, step_cost


def _counted(length: int, block_rows: int) -> tuple[LazyTable, list[tuple[int, int]], np.ndarray]:
    values = np.arange(length * 3, dtype=float).reshape(length, 3) ** 1.5
    costed: list[tuple[int, int]] = []

    def cost(lo: int, hi: int) -> list[np.ndarray]:
        costed.append((lo, hi))
        return [values[lo:hi], -values[lo:hi]]

    return LazyTable(length, block_rows, cost), costed, values


def test_only_the_blocks_read_are_costed_and_read_as_the_array():
    lazy, costed, values = _counted(1000, 64)
    rows = Rows(lazy, 0)
    assert rows[999] == values[999].tolist() and rows[5] == values[5].tolist()
    assert costed == [(960, 1000), (0, 64)]
    assert Rows(lazy, 1)[6] == (-values[6]).tolist() and len(costed) == 2  # costed together
    np.testing.assert_array_equal(rows.array(60, 130), values[60:130])
    assert costed[2:] == [(64, 128), (128, 192)]
    short = rows.head(100)
    np.testing.assert_array_equal(short.stage_s[:], values[:100, :-1])
    np.testing.assert_array_equal(short.energy_j[97], values[97, -1])
    np.testing.assert_array_equal(short.stage_s[-1], values[99, :-1])
    assert short.stage_s[5:5].shape == (0, 2) and len(short.energy_j) == 100
    with pytest.raises(IndexError):
        short[100]


@pytest.mark.parametrize("model, chip, plan", [
    ("llama-3-8b", "h100-sxm", {}),
    ("llama-3-8b", "h100-sxm", {"chips": 4, "tp": 2, "pp": 2}),  # stages
    # experts tabulated apart from the rest under attention data parallelism
    ("deepseek-v2-lite", "h100-sxm", {"chips": 2, "tp": 2, "ep": 2, "dp_attention": True}),
    ("mamba-130m", "a100-sxm-80gb", {}),  # state ops
    ("mixtral-8x7b", "mi300x", {"chips": 8, "tp": 8}),  # a kernel-table floor on another chip
])  # fmt: skip
def test_lazy_step_tables_equal_the_tables_costed_whole(model, chip, plan):
    cfg, target = xpusim.model(model), xpusim.target(chip)
    setup, cand = chosen_plan(cfg, target, {"batch": 8, "prompt": 512, "gen": 64, **plan})
    tokens = 3 * TOKEN_BLOCK_ROWS + 77  # a last block shorter than the rest
    cost = step_cost(cfg, cand.setup.system, replace(cand.plan, dp=1), setup.req,
                     cand.placement, tokens, 40, 3000)  # fmt: skip
    lazy = [f.name for f in fields(cost) if isinstance(getattr(cost, f.name), Rows)]
    assert {"tokens", "prompts", "decodes"} <= set(lazy)
    for name in lazy:
        rows = getattr(cost, name)
        whole = rows.source.reference()[rows.table]
        for i in (len(rows) - 1, 0, len(rows) // 2, min(TOKEN_BLOCK_ROWS, len(rows) - 2), 7):
            assert rows[i] == whole[i].tolist(), f"{name} row {i}"
        np.testing.assert_array_equal(rows.array(), whole, err_msg=name)
    # an iteration prices through them as through the whole tables
    works = [Work.of([700] * 5, [], [], 5), Work.of([], [tokens], [tokens], 1),
             Work.of([900] * 3, [300], [400], 4)]
    got = [cost(w) for w in works]
    for name in lazy:
        rows = getattr(cost, name)
        whole = rows.source.reference()
        setattr(cost, name, Rows(LazyTable(len(rows), len(rows), lambda lo, hi, w=whole: w),
                                 rows.table))  # fmt: skip
    assert [cost(w) for w in works] == got


def test_decode_rows_are_read_once_per_chip_share_and_priced_per_batch_size():
    """Under attention DP a decode-kernel row is a function of a chip's share of the n
    sequences, and StepCost turns it into floats once per share: each batch size, read in
    any order, still prices as its own row of the table (decode_steps reads the array)."""
    cfg, target = xpusim.model("deepseek-v2-lite"), xpusim.target("h100-sxm")
    setup, cand = chosen_plan(cfg, target, {"batch": 8, "prompt": 512, "gen": 64, "chips": 2,
                                            "tp": 2, "ep": 2, "dp_attention": True})
    cost = step_cost(cfg, cand.setup.system, replace(cand.plan, dp=1), setup.req,
                     cand.placement, 600, 40, 3000)  # fmt: skip
    assert cost.attention_dp == 2
    sizes = [4, 3, 1, 2, 6, 5, 3, 40, 39]
    for n in sizes:
        step = cost(Work.of([700] * n, [], [], n))
        stage_s, energy_j = cost.decode_steps(n, np.array([700 * n]))
        assert (step.stage_s, step.energy_j) == ([stage_s[0]], energy_j[0]), n
    assert sorted(cost._share_rows) == [1, 2, 3, 20]
