"""Physics through a measured kernel table's floor, as the tests of each table kind check it."""

from __future__ import annotations

import dataclasses

import numpy as np

from xpusim.compiler.memory_plan import Placement
from xpusim.cost.op_table import OpTable
from xpusim.cost.roofline import HardwareArrays, evaluate, kernel_floor_s
from xpusim.hardware.spec import Chip


def assert_more_bandwidth_is_never_slower(chip: Chip, ops: OpTable, placement: Placement) -> None:
    """The ops take the table's floor (it is above zero), and twice every memory's and the
    table's bandwidth never makes one slower."""
    hw = HardwareArrays.build(chip, ops)
    base = evaluate(ops, hw, placement).time_s
    assert kernel_floor_s(ops, hw).min() > 0
    faster = dataclasses.replace(hw, level_rate=hw.level_rate * 2, kernel_bw=hw.kernel_bw * 2)
    assert np.all(evaluate(ops, faster, placement).time_s <= base * (1 + 1e-12))
