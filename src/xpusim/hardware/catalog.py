"""Finds chips by catalog id or by path to a TOML file."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from xpusim.errors import UserError, closest
from xpusim.files import is_file
from xpusim.hardware.spec import Chip, load_chip_file

CATALOG_DIR = Path(__file__).parent / "catalog"


@cache  # the catalog does not change while xpusim runs; a system's chip is looked up often
def chip_ids() -> list[str]:
    return sorted(p.stem for p in CATALOG_DIR.glob("*.toml"))


@cache
def _load_catalog_chip(chip_id: str) -> Chip:
    chip = load_chip_file(CATALOG_DIR / f"{chip_id}.toml")
    if chip.id != chip_id:
        raise UserError(f"{CATALOG_DIR / chip_id}.toml: field id: {chip.id!r} != file name")
    return chip


def load_chip(id_or_path: str | Path) -> Chip:
    """A catalog id (`h100-sxm`) or a path to a chip TOML file."""
    text = str(id_or_path)
    if text in chip_ids():  # first: a system's chip is looked up per simulation
        return _load_catalog_chip(text)
    if text.endswith(".toml") or is_file(text):
        return load_chip_file(Path(text))
    raise UserError(f"unknown chip {text!r}" + closest(text, chip_ids()))
