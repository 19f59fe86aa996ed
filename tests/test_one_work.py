"""roofline.OneWork, evaluate() of one work in Python floats, against evaluate itself: bit
for bit, on every op of a layer (matmuls with and without measured kernel tables, attention,
norms, collectives), at any scale of their work and any fit of their activations on chip,
with a p-norm overlap and a kernel floor forced on; and StepCost's prefill chunk pricing,
which uses it, against its numpy reference over chunk lengths and contexts."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import xpusim
from xpusim.cost.kernel_tables import GRID_LOG2
from xpusim.cost.roofline import HardwareArrays, OneWork, evaluate, placement_onehot
from xpusim.ir.tensor import ROLES, Role
from xpusim.scenarios.llm.inference import chosen_plan
from xpusim.serving.step_cost import Work, _attention_probe, step_cost

CASES = [("llama-3-8b", "h100-sxm", 1), ("llama-3-8b", "b200", 1),  # B200: GEMM tables
         ("mixtral-8x7b", "mi300x", 2), ("deepseek-v2-lite", "h200-sxm", 1)]  # fmt: skip
_SETUPS: dict = {}


def _setup(model: str, chip: str, chips: int):
    if (model, chip, chips) not in _SETUPS:
        cfg, target = xpusim.model(model), xpusim.target(chip)
        setup, cand = chosen_plan(cfg, target, {"batch": 8, "prompt": 512, "gen": 64,
                                                "chips": chips, "tp": chips})  # fmt: skip
        plan = replace(cand.plan, dp=1)
        probe = _attention_probe(cfg, plan, *setup.req.formats)
        _SETUPS[model, chip, chips] = cfg, cand, setup, plan, probe
    return _SETUPS[model, chip, chips]


def _one_row(table, row: int, scale: np.ndarray):
    """The table's work at probe `row`, each op's FLOPs and bytes times `scale`."""
    return replace(table, matrix_flops=table.matrix_flops[row:row + 1] * scale,
                   vector_flops=table.vector_flops[row:row + 1] * scale,
                   role_bytes=table.role_bytes[row:row + 1] * scale)  # fmt: skip


def _assert_same(table, hw: HardwareArrays, placement, levels: int) -> None:
    act = table.role_bytes[:, ROLES.index(Role.ACTIVATION)]
    where = placement_onehot(act, [placement], levels, np.zeros(1, dtype=int))
    want = evaluate(table, hw, where)
    one = OneWork.of(table, hw)
    assert one is not None
    time_s, energy_j = one.costs(table.matrix_flops[0].tolist(), table.vector_flops[0].tolist(),
                                 table.role_bytes[0].tolist(), OneWork.kept(where[0]))
    assert np.array_equal(np.array(time_s), want.time_s[0])  # bit for bit, not close
    assert np.array_equal(np.array(energy_j), want.energy_j[0])


@pytest.mark.parametrize("case", CASES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(row=st.integers(0, 8), scale=st.floats(1e-3, 1e6),
       jitter=st.lists(st.floats(0.5, 2.0), min_size=64, max_size=64),
       room=st.floats(0.0, 1.0), p=st.sampled_from([None, 1.7, 4.0]), floored=st.booleans())
def test_one_work_is_evaluate_bit_for_bit(case, row, scale, jitter, room, p, floored):  # fmt: skip
    _, cand, _, _, probe = _setup(*case)
    n = len(probe)
    table = _one_row(probe, row, scale * np.resize(np.array(jitter), n))
    chip = cand.setup.system.chip
    hw = HardwareArrays.of(chip, table)
    if p is not None:  # a p-norm overlap on every op, not only matmuls
        hw = replace(hw, overlap_p=np.full(n, p))
    if floored:  # a measured kernel's floor on every op (attention priced by its bytes)
        rng = np.random.default_rng(row)
        hw = replace(hw, kernel_grid=rng.uniform(0.05, 1.0, hw.kernel_grid.shape),
                     kernel_peak=np.full(n, chip.peak(table.dtypes[0])),
                     kernel_fixed_s=rng.uniform(0.0, 5e-6, n),
                     kernel_sequence_s_per_byte=rng.uniform(0.0, 5e-11, n),
                     kernel_stream_s_per_byte=rng.uniform(0.0, 5e-12, n),
                     kernel_split=np.outer(rng.uniform(0.0, 1.0, n) < 0.5,
                                           [16, 16, 304, 576, 1 / 51e9]))  # fmt: skip
    act = table.role_bytes[0, ROLES.index(Role.ACTIVATION)]
    placement = replace(cand.placement, onchip_bytes=float(np.quantile(act, room)))
    _assert_same(table, hw, placement, len(chip.memory))


def test_one_work_declines_a_systolic_unit():
    """A systolic unit's GEMM time depends on M (cost/systolic.py): evaluate prices it."""
    cfg, target = xpusim.model("llama-3-8b"), xpusim.target("tpu-v4")
    setup, cand = chosen_plan(cfg, target, {"batch": 1, "prompt": 128, "gen": 8})
    probe = _attention_probe(cfg, replace(cand.plan, dp=1), *setup.req.formats)
    assert OneWork.of(probe, HardwareArrays.of(cand.setup.system.chip, probe)) is None


@pytest.mark.parametrize("case", CASES)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chunks=st.lists(st.tuples(st.integers(1, 4096), st.integers(0, 60_000)),
                       min_size=1, max_size=6))
def test_prefill_chunk_pricing_equals_its_reference(case, chunks):
    """StepCost prices a set of prefill chunks (q new tokens at c keys each) through
    OneWork; Kernel.cost_counts_reference, through evaluate, gives the same bits."""
    cfg, cand, setup, plan, _ = _setup(*case)
    key = (*case, "step")
    if key not in _SETUPS:
        _SETUPS[key] = step_cost(cfg, cand.setup.system, plan, setup.req, cand.placement,
                                 4096, 16, 65_536)  # fmt: skip
    attention = _SETUPS[key].attention
    q = [a for a, _ in chunks]
    work = Work.of_cohort(0, 0, q, [a + b for a, b in chunks], len(chunks))
    basis = np.array([work.prefill_basis], dtype=float)
    matrix, vector, roles = (basis @ c.reshape(5, -1) for c in attention.coefficients)
    roles = roles.reshape(1, len(ROLES), len(attention.table))
    got = attention.cost_counts(matrix, vector, roles)
    want = attention.cost_counts_reference(matrix, vector, roles)
    assert attention._one is not None
    assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))


@pytest.mark.parametrize("log2_flops", [0.0, 1.0, 7.0, 7.5, 23.0, 45.0, 45.99, 46.0, 47.0, 60.0])
def test_flops_keyed_floor_at_and_between_grid_nodes(log2_flops):
    """OneFloor walks only the grid nodes above a FLOPs-keyed op's own FLOPs (prefill
    attention's envelope, kernel_tables.flops_envelope_s): at a node exactly, between
    two, and past the grid's ends, bit for bit evaluate's."""
    assert GRID_LOG2.tolist() == list(range(len(GRID_LOG2)))  # OneFloor indexes nodes so
    _, cand, _, _, probe = _setup("llama-3-8b", "h100-sxm", 1)
    assert probe.keyed_by_flops.any()  # the probe holds prefill attention ops
    n = len(probe)
    table = _one_row(probe, 4, np.ones(n))
    table = replace(table, matrix_flops=np.full((1, n), 2.0**log2_flops))
    chip = cand.setup.system.chip
    rng = np.random.default_rng(7)
    hw = HardwareArrays.of(chip, table)
    hw = replace(hw, kernel_grid=rng.uniform(0.05, 1.0, hw.kernel_grid.shape),
                 kernel_peak=np.full(n, chip.peak(table.dtypes[0])),
                 kernel_fixed_s=rng.uniform(0.0, 5e-6, n))  # fmt: skip
    _assert_same(table, hw, cand.placement, len(chip.memory))
