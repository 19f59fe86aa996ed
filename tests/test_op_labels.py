"""`--ops` rows name every op they stand for (issue #46): the all-reduces after o_proj and
down share one signature with the embedding's, and the row was labelled `embed.all_reduce`."""

from __future__ import annotations

import xpusim


def test_a_shared_collective_row_names_the_ops_it_follows():
    result = xpusim.simulate("llama-2-7b", "h100-sxm", chips=2, tp=2, batch=1, prompt=128,
                             gen=8)  # fmt: skip
    names = [op.name for op in result.ops if op.kind == "collective" and op.count > 1]
    assert names, "tp 2 has per-layer all-reduces"
    assert all(not name.startswith("embed.") for name in names), names
    assert any("o_proj" in name and "down" in name for name in names), names


def test_a_row_of_one_role_keeps_its_op_name():
    result = xpusim.simulate("llama-2-7b", "h100-sxm", batch=1, prompt=128, gen=8)
    assert "lm_head" in [op.name for op in result.ops]


def test_roofline_labels_that_would_overlap_are_left_out():
    """One op's prefill and decode points at the same spot get one label, not two printed
    over each other; an op far away keeps its own."""
    from types import SimpleNamespace

    from xpusim.report.plots import _labels_apart

    def op(name, flops, nbytes, time_s):
        return SimpleNamespace(name=name, flops=flops, bytes=nbytes, time_s=time_s)

    ops = [op("layers.0.gate_up", 1e9, 1e7, 1e-3), op("layers.0.gate_up", 1.05e9, 1e7, 1e-3),
           op("lm_head", 1e6, 1e7, 1e-3)]  # fmt: skip
    assert [name for name, _ in _labels_apart(ops)] == ["gate_up", "lm_head"]
