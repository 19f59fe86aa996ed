"""An engine's own kernels outside the matmul and attention families, timed per call.

The layer builder emits some work as one op where an engine of a given version launched a
chain of small kernels for it: SGLang before April 2025 chose DeepSeek-V3/R1's experts with
`biased_grouped_topk`, a chain of torch ops (sigmoid, bias, per-group top-2, group top-k,
mask, top-k; torch.compile'd in the copies read) that PR #5371 replaced with one fused
kernel ("36us->8us" a layer, H200). The chip's figures price xpusim's one `router_topk` op
at one dispatch; the chain's time is launch and latency, not FLOPs or bytes, so no roofline
gives it. Such a measured time is kept here as data (kernel_tables/op_time/*.toml, each
table its source, date and conditions): the engine's `kernel` name (serving/engines.toml
`kernels`, stamped on the op by the builder), the op it prices (its name's last part),
whether it is a group-limited router's chain (SGLang ran it for DeepSeek's routers alone; a
softmax top-k over all experts, Mixtral's or Qwen's, was one fused kernel) and the chips it
was timed on. An op so stamped takes at least that time on those chips: its dispatch
overhead (roofline.HardwareArrays) is raised to the measured time, its roofline work added
on top, so the op is never faster than either the measurement or the physics, and an op of
another engine, or on another chip, keeps the cost it had.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, fields
from functools import cache
from pathlib import Path

from xpusim.cost.kernel_tables import catalog_chip
from xpusim.errors import UserError
from xpusim.hardware.spec import base_id
from xpusim.ir.op import Op

OP_TIME_DIR = Path(__file__).resolve().parent / "kernel_tables" / "op_time"


@dataclass(frozen=True)
class OpTime:
    """One engine kernel's measured time per call of the op it runs."""

    name: str
    kernel: str  # the engine's kernel name (serving/engines.toml `kernels`)
    op: str  # the last part of the op names it prices ("router_topk")
    # a group-limited router's chain (DeepSeek's, its n_group): it prices only routers
    # that pick within groups (the op's `expert_groups`, set from the model's n_group)
    grouped_router: bool
    chips: tuple[str, ...]  # catalog ids it prices: those it was timed on
    measured_on: str
    time_s: float
    engine: str
    engine_version: str
    source: str
    url: str
    date: str
    conditions: str

    def prices(self, chip_id: str, op: Op) -> bool:
        """Whether it times `op` on `chip_id` (a what-if copy: its base chip's)."""
        return (base_id(chip_id) in self.chips and op.name.rsplit(".", 1)[-1] == self.op
                and self.kernel in (op.attr("kernels") or ())
                and (not self.grouped_router or bool(op.attr("expert_groups"))))  # fmt: skip

    def describe(self) -> tuple[str, str]:
        """(figure, value) as `xpusim chip` lists it."""
        return (f"op_time.{self.op}@{self.kernel}",
                f"{self.name}: at least {self.time_s * 1e6:.3g} us a call of {self.engine}'s "
                f"{self.kernel} ({self.engine_version}), for that engine's ops alone")  # fmt: skip


_FIELDS = tuple(f.name for f in fields(OpTime))  # a table's keys: OpTime's fields


def _entry(entry: dict, where: str) -> OpTime:
    missing = [f for f in _FIELDS if f not in entry]
    extra = sorted(set(entry) - set(_FIELDS))
    if missing or extra:
        raise UserError(f"{where}: fields missing {missing}, unknown {extra}")
    for chip_id in (entry["measured_on"], *entry["chips"]):
        catalog_chip(chip_id, where)
    if not isinstance(entry["grouped_router"], bool):
        raise UserError(f"{where}: grouped_router {entry['grouped_router']!r}: true or false")
    if not entry["time_s"] > 0:
        raise UserError(f"{where}: time_s {entry['time_s']!r}: a measured time, above 0")
    return OpTime(**{**entry, "chips": tuple(entry["chips"]), "time_s": float(entry["time_s"])})


@cache
def op_times() -> tuple[OpTime, ...]:
    """Every committed measurement, in file and table order."""
    found = []
    for path in sorted(OP_TIME_DIR.glob("*.toml")):
        with path.open("rb") as f:
            found += [_entry(e, f"{path.name} table {i}")
                      for i, e in enumerate(tomllib.load(f)["table"])]  # fmt: skip
    return tuple(found)


def op_times_for_chip(chip_id: str) -> tuple[OpTime, ...]:
    """The measurements that price some op of `chip_id` (a what-if copy: its base chip's)."""
    return tuple(t for t in op_times() if base_id(chip_id) in t.chips)


def op_time_for(chip_id: str, op: Op) -> OpTime | None:
    """The first measurement that prices `op` on `chip_id`, or None."""
    return next((t for t in op_times() if t.prices(chip_id, op)), None)


def op_time_s(chip_id: str, op: Op) -> float:
    """The least time `op` takes on `chip_id` as its engine's own kernels ran it: the first
    measurement's that prices it, else 0 (no floor)."""
    found = op_time_for(chip_id, op)
    return 0.0 if found is None else found.time_s
