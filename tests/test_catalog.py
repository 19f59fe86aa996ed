"""The chip catalog: every file loads, every figure is traceable, and the figures people quote
match their datasheets; broken chip files fail with a one-line error naming file and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from xpusim.errors import UserError
from xpusim.hardware.catalog import CATALOG_DIR, chip_ids, load_chip
from xpusim.hardware.spec import Chip, MemoryKind, load_chip_file
from xpusim.ir.dtypes import DType

GiB = 2**30
MiB = 2**20

REQUIRED = [
    "mtia-v1",
    "mtia-v1-128gb",
    "tpu-v4",
    "tpu-v4i",
    "groq-lpu",
    "apple-m2-ane",
    "a100-sxm-80gb",
    "h100-sxm",
    "h200-sxm",
]


def level(chip: Chip, kind: MemoryKind):
    levels = [m for m in chip.memory if m.kind is kind]
    assert len(levels) == 1, f"{chip.id}: expected one {kind.value} level, found {len(levels)}"
    return levels[0]


# --- every catalog chip ----------------------------------------------------------------


def test_required_chips_are_in_the_catalog():
    assert set(REQUIRED) <= set(chip_ids())


@pytest.mark.parametrize("chip_id", chip_ids())
def test_chip_loads_and_its_id_matches_its_file(chip_id):
    chip = load_chip(chip_id)
    assert chip.id == chip_id
    assert chip.peak_ops_per_s, "a chip needs at least one matrix precision"


@pytest.mark.parametrize("chip_id", chip_ids())
def test_every_figure_cites_a_source_in_its_file(chip_id):
    chip = load_chip(chip_id)
    for path, fig in chip.figure_items():
        assert fig.source in chip.sources, f"{chip_id}: {path} cites unknown source {fig.source!r}"
        assert chip.sources[fig.source].strip(), f"{chip_id}: source {fig.source!r} is empty"


@pytest.mark.parametrize("chip_id", chip_ids())
def test_derived_and_assumed_figures_explain_themselves(chip_id):
    chip = load_chip(chip_id)
    for path, fig in chip.figure_items():
        if fig.confidence in ("derived", "assumed"):
            assert fig.note.strip(), f"{chip_id}: {path} is {fig.confidence} but has no note"


@pytest.mark.parametrize("chip_id", chip_ids())
def test_static_power_leaves_power_for_compute(chip_id):
    chip = load_chip(chip_id)
    assert 0 < chip.compute_power_budget_w < chip.tdp_w.value


# --- golden figures --------------------------------------------------------------------


def test_mtia_v1_quoted_figures():
    chip = load_chip("mtia-v1")
    assert chip.clock_hz.value == 800e6
    assert chip.peak(DType.INT8) == 102.4e12
    assert chip.peak(DType.FP16) == 51.2e12
    assert chip.peak(DType.BF16) == 51.2e12
    assert chip.tdp_w.value == 25
    assert "7 nm" in chip.process
    dram = level(chip, MemoryKind.DRAM)
    assert dram.bandwidth_bytes_per_s.value == 176e9
    assert dram.capacity_bytes.value == 64e9
    sram = level(chip, MemoryKind.SRAM)
    assert sram.capacity_bytes.value == 128e6
    assert sram.bandwidth_bytes_per_s.value == 800e9
    assert chip.chip_to_chip is None


def test_mtia_v1_128gb_differs_from_the_default_only_in_capacity():
    base, big = load_chip("mtia-v1"), load_chip("mtia-v1-128gb")
    assert level(big, MemoryKind.DRAM).capacity_bytes.value == 128e9
    a, b = base.model_dump(), big.model_dump()
    for d in (a, b):
        for key in ("id", "name", "description", "sources"):
            d.pop(key)
        for m in d["memory"]:
            if m["kind"] == MemoryKind.DRAM:
                m.pop("capacity_bytes")
    assert a == b


@pytest.mark.parametrize("chip_id", ["mtia-v1", "mtia-v1-128gb"])
def test_mtia_v1_has_no_fp8(chip_id):
    chip = load_chip(chip_id)
    with pytest.raises(UserError, match="fp8"):
        chip.peak(DType.FP8)


def test_tpu_v4_quoted_figures():
    chip = load_chip("tpu-v4")
    assert chip.peak(DType.BF16) == 275e12
    assert chip.peak(DType.INT8) == 275e12
    for dtype in (DType.FP8, DType.FP16):
        with pytest.raises(UserError):
            chip.peak(dtype)
    hbm = level(chip, MemoryKind.DRAM)
    assert hbm.capacity_bytes.value == 32 * GiB
    assert hbm.bandwidth_bytes_per_s.value == 1.2e12
    # the power limit is at least MLPerf's measured mean (206 W); the energy of an op is
    # still set by the production maximum (192 W), so the budget is unchanged
    assert chip.tdp_w.value == 206 and chip.energy.peak_arithmetic_w.value == 192
    assert chip.compute_power_budget_w == 192 - chip.energy.static_power_w.value - (
        chip.sparse_core.power_w.value)
    assert level(chip, MemoryKind.SRAM).capacity_bytes.value == 128 * MiB
    mxu = chip.matrix_unit
    assert (mxu.count.value, mxu.rows.value, mxu.cols.value) == (8, 128, 128)
    assert chip.chip_to_chip is not None
    assert chip.chip_to_chip.count.value == 6


def test_tpu_v4i_quoted_figures():
    chip = load_chip("tpu-v4i")
    assert chip.peak(DType.BF16) == 138e12
    hbm = level(chip, MemoryKind.DRAM)
    assert hbm.capacity_bytes.value == 8 * GiB
    assert hbm.bandwidth_bytes_per_s.value == 614e9
    assert level(chip, MemoryKind.SRAM).capacity_bytes.value == 128 * MiB
    assert chip.tdp_w.value == 175


def test_groq_is_sram_only():
    chip = load_chip("groq-lpu")
    assert not any(m.kind is MemoryKind.DRAM for m in chip.memory)
    sram = level(chip, MemoryKind.SRAM)
    assert sram.capacity_bytes.value == 220 * MiB == 230686720
    assert chip.capacity_bytes == 220 * MiB
    assert chip.peak(DType.INT8) == 750e12
    assert chip.peak(DType.FP16) == 188e12
    assert chip.clock_hz.value == 900e6
    assert chip.overhead.per_op_s.value == 0


def test_apple_m2_ane_quoted_figures():
    chip = load_chip("apple-m2-ane")
    assert chip.peak(DType.FP16) == 15.8e12
    dram = level(chip, MemoryKind.DRAM)
    assert dram.bandwidth_bytes_per_s.value == 100e9
    assert dram.capacity_bytes.value == 24e9


# (int8, fp8, bf16/fp16, tf32, fp32) dense datasheet peaks; None = not supported. Memory:
# nvidia-smi's memory.total in MiB, what the engines' memory fractions are of
NVIDIA = {
    "a100-sxm-80gb": (624e12, None, 312e12, 156e12, 19.5e12, 81920 * MiB, 2.039e12, 400),
    "h100-sxm": (1979e12, 1979e12, 989.5e12, 494.5e12, 67e12, 81559 * MiB, 3.35e12, 700),
    "h200-sxm": (1979e12, 1979e12, 989.5e12, 494.5e12, 67e12, 143771 * MiB, 4.8e12, 700),
}


@pytest.mark.parametrize("chip_id", sorted(NVIDIA))
def test_nvidia_datasheet_figures(chip_id):
    int8, fp8, half, tf32, fp32, hbm_bytes, hbm_bw, tdp = NVIDIA[chip_id]
    chip = load_chip(chip_id)
    assert chip.peak(DType.INT8) == int8
    assert chip.peak(DType.BF16) == half
    assert chip.peak(DType.FP16) == half
    assert chip.peak(DType.TF32) == tf32
    assert chip.peak(DType.FP32) == fp32
    if fp8 is None:
        with pytest.raises(UserError):
            chip.peak(DType.FP8)
    else:
        assert chip.peak(DType.FP8) == fp8
    hbm = level(chip, MemoryKind.DRAM)
    assert hbm.capacity_bytes.value == hbm_bytes
    assert hbm.bandwidth_bytes_per_s.value == hbm_bw
    assert chip.tdp_w.value == tdp


# --- loader errors -----------------------------------------------------------------------

H100_TEXT = (CATALOG_DIR / "h100-sxm.toml").read_text()


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "broken-chip.toml"
    path.write_text(text)
    return path


def replace_once(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"fixture text not found exactly once: {old!r}"
    return text.replace(old, new)


def load_error(path: Path) -> str:
    with pytest.raises(UserError) as info:
        load_chip(path)
    message = str(info.value)
    assert "\n" not in message, "a loader error must be one line"
    assert str(path) in message, "a loader error must name the file"
    return message


def test_the_unedited_fixture_loads(tmp_path):
    assert load_chip_file(write(tmp_path, H100_TEXT)).id == "h100-sxm"


def test_missing_field_is_named(tmp_path):
    lines = [ln for ln in H100_TEXT.splitlines() if not ln.startswith("tdp_w =")]
    message = load_error(write(tmp_path, "\n".join(lines)))
    assert "tdp_w" in message
    assert "required" in message.lower()


@pytest.mark.parametrize("old, new, named", [
    ("clock_hz = { value = 1.98e9", "clock_hz = { value = -1.98e9", "clock_hz.value"),
    ("capacity_bytes = { value = 85520809984", "capacity_bytes = { value = -85520809984",
     "memory.1.capacity_bytes.value"),  # a negative value in a nested table
    ("tdp_w = { value = 700", 'tdp_w = { value = "lots"', "tdp_w.value"),  # a string
])  # fmt: skip
def test_a_bad_value_is_named(tmp_path, old, new, named):
    assert named in load_error(write(tmp_path, replace_once(H100_TEXT, old, new)))


def test_malformed_toml_names_file_and_line(tmp_path):
    text = replace_once(
        H100_TEXT, 'tdp_w = { value = 700, source = "datasheet",', "tdp_w = { value = 700 source = "
    )
    message = load_error(write(tmp_path, text))
    assert "malformed TOML" in message
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if ln.startswith("tdp_w ="))
    assert f"line {line}" in message


def test_unknown_source_key_is_reported(tmp_path):
    text = replace_once(
        H100_TEXT,
        'tdp_w = { value = 700, source = "datasheet"',
        'tdp_w = { value = 700, source = "nowhere"',
    )
    message = load_error(write(tmp_path, text))
    assert "nowhere" in message


def test_unknown_field_is_reported(tmp_path):
    text = replace_once(H100_TEXT, "tdp_w = {", "tdp_watts = 700\ntdp_w = {")
    message = load_error(write(tmp_path, text))
    assert "tdp_watts" in message


# the datasheet's memory, in decimal GB: the driver reports more (nearly GiB), and that total
# is what the engines' memory fractions are of
DATASHEET_GB = {"a100-sxm-80gb": 80, "h100-sxm": 80, "h200-sxm": 141, "b200": 180, "b300": 270,
                "gb200": 186, "l40s": 48, "mi300x": 192, "mi325x": 256, "mi355x": 288}  # fmt: skip


@pytest.mark.parametrize("chip_id", sorted(DATASHEET_GB))
def test_gpu_memory_is_what_the_driver_reports(chip_id):
    dram = level(load_chip(chip_id), MemoryKind.DRAM).capacity_bytes
    assert dram.value % MiB == 0  # nvidia-smi and the ROCm driver count whole MiB
    assert DATASHEET_GB[chip_id] * 1e9 < dram.value < DATASHEET_GB[chip_id] * 2**30 * 1.08
    assert f"'{DATASHEET_GB[chip_id]}" in dram.note or f"{DATASHEET_GB[chip_id]} G" in dram.note
