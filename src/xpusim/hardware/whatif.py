"""What-if chips: one field of a spec changed, validated like a file from the catalog.

A path names a field the way `xpusim chip ID` lists it; a memory level can be addressed by
name (`memory.hbm3...`), by kind (`memory.dram...`; `sram` means the largest on-chip level
that holds tensors) or by index (`memory[1]...`). The new chip says what changed in its id.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from xpusim.errors import UserError
from xpusim.hardware.spec import Chip, MemoryKind, parse_chip
from xpusim.hardware.system import System


def _memory_index(chip: Chip, key: str) -> int:
    if m := re.fullmatch(r"\[(\d+)\]", key):
        index = int(m.group(1))
        if index < len(chip.memory):
            return index
    names = [level.name for level in chip.memory]
    if key in names:
        return names.index(key)
    kinds = [i for i, level in enumerate(chip.memory) if level.kind.value == key]
    if kinds:
        if key == MemoryKind.SRAM.value:
            return max(kinds, key=lambda i: chip.memory[i].capacity_bytes.value)
        return kinds[-1]
    raise UserError(
        f"{chip.id}: no memory level {key!r}; levels are {', '.join(names)} "
        f"(or a kind: {', '.join(sorted({level.kind.value for level in chip.memory}))})"
    )


def override(chip: Chip, path: str, value: float) -> Chip:
    """A copy of `chip` with the figure at `path` set to `value` (source: 'what-if')."""
    data = chip.model_dump(mode="json")
    parts = path.replace("[", ".[").split(".")
    if parts[0] == "memory" and len(parts) > 1:
        parts = ["memory", str(_memory_index(chip, parts[1])), *parts[2:]]
    node = data
    for i, key in enumerate(parts[:-1]):
        container = node[int(key)] if isinstance(node, list) else node.get(key)
        if not isinstance(container, dict | list):
            raise UserError(f"--set {path}: no field {'.'.join(parts[: i + 1])!r} in {chip.id}")
        node = container
    leaf = parts[-1]
    figure = node.get(leaf) if isinstance(node, dict) else None
    unset = isinstance(node, dict) and leaf in node and figure is None  # an optional figure
    if not (unset or (isinstance(figure, dict) and "value" in figure)):
        raise UserError(f"--set {path}: {leaf!r} is not a figure of {chip.id}")
    if not unset and isinstance(figure["value"], str):  # a named choice, not a number
        raise UserError(f"--set {path}: {figure['value']!r} is a name, not a number a "
                        "what-if can set; copy the chip file and edit it")  # fmt: skip
    was = "unset (its default applied)" if unset else f"was {figure['value']:g}"
    node[leaf] = {"value": value, "source": "what-if", "confidence": "assumed",
                  "note": f"what-if: {was}"}  # fmt: skip
    data["sources"] = {**data["sources"], "what-if": "a user's what-if override"}
    data["id"] = f"{chip.id}[{path}={value:g}]"
    return parse_chip(data, f"--set {path}")


def apply(target: Chip | System, overrides: Iterable[tuple[str, float]]) -> Chip | System:
    """`--set` on what `--chip` names: a chip with every override applied in order, or a
    system of such chips (its links unchanged)."""
    chip = target.chip if isinstance(target, System) else target
    for path, value in overrides:
        chip = override(chip, path, value)
    return target.model_copy(update={"spec": chip}) if isinstance(target, System) else chip
