"""Systems: N chips of one kind joined by a hierarchy of interconnect levels.

A level is a set of chips that talk to each other over the same kind of link: an NVLink
switch inside a DGX node, a 3D torus of TPU v4 ICI links, a fully connected Groq node. Levels
are listed innermost first and each is a group size: chips 0..size-1 share the first level,
and a collective over p chips runs on the smallest level that holds p contiguous chips. That
covers the common systems with one concept and keeps collective costs closed-form.

Like chips, system files are TOML with a source beside every figure.
"""

from __future__ import annotations

import itertools
import math
from functools import cache
from pathlib import Path
from typing import Literal, NamedTuple

from pydantic import Field, model_validator

from xpusim.errors import UserError, closest
from xpusim.hardware.catalog import chip_ids, load_chip
from xpusim.hardware.spec import (
    Chip,
    Figure,
    PositiveFigure,
    _Strict,
    base_id,
    check_ranges,
    read_toml,
    validated,
)
from xpusim.memo import remembered, scoped

SYSTEMS_DIR = Path(__file__).parent / "systems"

MAX_CHIPS = 2**20
"""The most chips a system may have: 32x the catalog's largest system (dgx-h100's fabric of
32,768), and where the plan search's enumeration of divisors and placements still takes
seconds (Llama-2-7B on 2^20 MTIA v1 chips: 1.2 s, 2026-12-01; #17 measured minutes at 2^40)."""


class Axis(NamedTuple):
    """One torus dimension a group spans: its chips, and whether its ends are joined (a
    ring) or not (a line). cost/collectives.py turns it into hops and links."""

    dim: int
    wrapped: bool


class TopologyLevel(_Strict):
    name: str
    kind: Literal["switch", "fully-connected", "torus"]
    size: int = Field(ge=1, le=MAX_CHIPS)  # chips in one group at this level
    dims: tuple[int, ...] = ()  # torus only: the group's shape, product == size
    # torus only: which dims have wrap-around links, as dims; () for all of them (a whole
    # torus). A slice sets it (sliced()): an axis shorter than the torus's is a line.
    wrapped: tuple[bool, ...] = ()
    # torus only: where optical switches join cubes of this edge, a slice whose every axis
    # is a multiple of it has wrap-around links on all its axes, however short (TPU v4/v5p:
    # "any multiple of a full cube (e.g. 4x4x4 or 4x4x8) will have wraparounds"); absent,
    # an axis wraps only where it is the whole torus's (TPU v5e/v6e: "without wraps on dims
    # < 16")
    wraparound_cube: PositiveFigure | None = None
    links_per_chip: PositiveFigure  # links a chip has into this level
    bandwidth_bytes_per_s: PositiveFigure  # per link, per direction
    latency_s: Figure  # one step of a collective: link, switch and software latency

    @model_validator(mode="after")
    def _check(self) -> TopologyLevel:
        if self.kind == "torus" and math.prod(self.dims) != self.size:
            raise ValueError(f"level {self.name}: torus dims {self.dims} do not multiply to size")
        if self.wrapped and len(self.wrapped) != len(self.dims):
            raise ValueError(f"level {self.name}: wrapped names {len(self.wrapped)} dims, "
                             f"dims has {len(self.dims)}")  # fmt: skip
        return self

    @property
    def all_links_bytes_per_s(self) -> float:
        """What one chip pushes into this level over all its links at once, per direction:
        a collective's injection bandwidth on a switch or full mesh (a torus's collectives
        use fewer links: cost/collectives.injection_bytes_per_s)."""
        return self.links_per_chip.value * self.bandwidth_bytes_per_s.value

    @property
    def axes(self) -> tuple[Axis, ...]:
        """This torus's dimensions with their wrap-around links."""
        wrapped = self.wrapped or (True,) * len(self.dims)
        return tuple(Axis(d, w) for d, w in zip(self.dims, wrapped, strict=True))

    def group_placements(self, group: int) -> list[tuple[Axis, ...]]:
        """Where a group of `group` chips can lie as a sub-torus, each as its axes: filling
        the dimensions in order (group_shape), and, where whole dimensions multiply to it,
        on those (12 chips of a 16x16x12 torus: its axis of 12), as a device mesh maps a
        parallel axis onto whole torus axes. An extent that is a whole dimension keeps its
        wrap-around, a part of one is a line. [] when the group is no sub-torus."""
        placements = []
        if shape := self.group_shape(group):
            placements.append(tuple(Axis(d, d == full.dim and full.wrapped)
                                    for d, full in zip(shape, self.axes, strict=False)))
        whole = [a for a in self.axes if a.dim > 1]
        for k in range(1, len(whole) + 1):
            for axes in itertools.combinations(whole, k):
                if math.prod(a.dim for a in axes) == group:
                    return [*placements, axes]
        return placements

    def torus_dims_spanned(self, group: int) -> int:
        """Dimensions a contiguous group of `group` chips spans in this torus."""
        spanned, covered = 0, 1
        for d in self.dims:
            if covered >= group:
                break
            covered *= d
            spanned += 1
        return max(spanned, 1)

    def group_shape(self, group: int) -> tuple[int, ...]:
        """A contiguous group's extent in each dimension it spans (16 chips of a 4x4x4
        torus: 4 x 4), filling the dimensions in order; () when `group` chips do not make a
        sub-torus of this one (6 of a 4x4x4: a ring over contiguous chips instead)."""
        shape, left = [], group
        for d in self.dims:
            if left == 1:
                break
            take = d if left % d == 0 else left
            if take > d:
                return ()
            shape.append(take)
            left //= take
        return tuple(shape) if left == 1 else ()

    def sliced(self, chips: int) -> TopologyLevel:
        """The part of this level `chips` chips get: a torus slice is shaped as near a cube
        as the torus allows, as Cloud TPU allocates them (a 64-chip TPU v4 slice is 4x4x4,
        128 chips 4x4x8), so a group inside it spans more dimensions, and more links, than
        the same chips laid along one dimension of the whole torus would."""
        if self.kind != "torus" or chips >= self.size:
            return self
        return _torus_slice(self, chips)


class Deployment(_Strict):
    """The layout the vendor's software serves models with on this system, where a source
    describes one: the plan search then offers that layout only (a user's --tp/--pp still
    run any plan). "pipeline": consecutive chips hold consecutive slices of the model, as
    deep as the chips (cost/stream_machine.py)."""

    layout: Literal["pipeline"]
    source: str
    note: str = ""


class System(_Strict):
    id: str
    name: str
    chip_id: str
    chips: int = Field(ge=1, le=MAX_CHIPS)
    default_for_chip: bool = False  # `--chips N` on the chip builds this system
    description: str = ""
    sources: dict[str, str]
    levels: list[TopologyLevel] = Field(min_length=1)
    deployment: Deployment | None = None
    spec: Chip | None = None  # the chip itself when it is not the catalog's (a what-if copy)

    @model_validator(mode="after")
    def _check(self) -> System:
        sizes = [level.size for level in self.levels]
        if sizes != sorted(sizes):
            raise ValueError("levels: sizes must grow from the innermost level outwards")
        cited = {
            f.source
            for level in self.levels
            for f in (level.links_per_chip, level.bandwidth_bytes_per_s, level.latency_s,
                      level.wraparound_cube)
            if f is not None
        } | ({self.deployment.source} if self.deployment else set())
        if missing := sorted(cited - set(self.sources)):
            raise ValueError(f"figures cite sources not in [sources]: {', '.join(missing)}")
        check_ranges([(f"levels[{i}].{name}", getattr(level, name))
                      for i, level in enumerate(self.levels)
                      for name in ("links_per_chip", "bandwidth_bytes_per_s", "latency_s")])
        if self.chips > self.max_chips:
            raise ValueError(f"chips: {self.chips} exceeds the outermost level's size")
        return self

    @property
    def max_chips(self) -> int:
        return self.levels[-1].size

    @property
    def chip(self) -> Chip:
        return self.spec or load_chip(self.chip_id)

    def level_for(self, group: int) -> TopologyLevel:
        """The innermost level holding `group` contiguous chips."""
        return next((lv for lv in self.levels if lv.size >= group), self.levels[-1])

    def with_chips(self, chips: int) -> System:
        if chips > self.max_chips:
            raise UserError(
                f"--chips {chips}: system {self.id} holds at most {self.max_chips} chips"
            )
        levels = [level.sliced(chips) for level in self.levels]
        return self.model_copy(update={"chips": chips, "levels": levels})


@scoped(maxsize=1024)  # one level object per slice: collectives are memoized by identity
def _torus_slice(level: TopologyLevel, chips: int) -> TopologyLevel:
    """Each prime factor of `chips`, largest first, goes to the shortest dimension it fits
    in; a size the torus cannot hold as a sub-torus keeps the whole torus's shape. A slice's
    dimension keeps its wrap-around where it is the torus's whole (wrapped) dimension, or
    where the slice is whole cubes of the optical switches (`wraparound_cube`)."""
    dims = [1] * len(level.dims)
    left, factor = chips, 2
    factors = []
    while left > 1:
        while left % factor == 0:
            factors.append(factor)
            left //= factor
        factor += 1
    for f in sorted(factors, reverse=True):
        fits = [i for i, d in enumerate(dims) if d * f <= level.dims[i]]
        if not fits:
            return level
        i = min(fits, key=lambda i: (dims[i], i))
        dims[i] *= f
    cube = level.wraparound_cube
    whole_cubes = cube is not None and all(d % cube.value == 0 for d in dims)
    axes = sorted((d, whole_cubes or (d == full.dim and full.wrapped))
                  for d, full in zip(dims, level.axes, strict=True))
    return level.model_copy(update={"size": chips, "dims": tuple(d for d, _ in axes),
                                    "wrapped": tuple(w for _, w in axes)})


@cache  # the catalog does not change while xpusim runs
def system_ids() -> list[str]:
    return sorted(p.stem for p in SYSTEMS_DIR.glob("*.toml"))


def catalog_id(text: str) -> str | None:
    """The one chip or system id a shorthand names, case aside: the id itself, or the only
    id that starts with it and a dash (`H200` and `h200` are h200-sxm, as an engine's docs
    and a benchmark's table write it; `h200` was refused with b200 its first suggestion).
    None where no id or several do (`trn2`: trn2-instance, trn2-ultraserver)."""
    name = text.lower()
    ids = chip_ids() + system_ids()
    if name in ids:
        return name
    starting = [i for i in ids if i.startswith(f"{name}-")]
    return starting[0] if len(starting) == 1 else None


def load_system_file(path: Path) -> System:
    system = validated(System, read_toml(path, "system"), str(path))
    if system.chip_id not in chip_ids():
        raise UserError(f"{path}: field chip_id: unknown chip {system.chip_id!r}")
    return system


@cache
def _catalog_system(system_id: str) -> System:
    return load_system_file(SYSTEMS_DIR / f"{system_id}.toml")


def load_system(system_id: str) -> System:
    if system_id not in system_ids():
        raise UserError(f"unknown system {system_id!r}" + closest(system_id, system_ids()))
    return _catalog_system(system_id)


def host_system(chip: Chip, chips: int) -> System:
    """Chips without a chip-to-chip fabric talk through their host link (PCIe) and a switch.

    Used for chips no system file names as their default (MTIA, the ANE, ...); the host
    link's own figures and sources carry over.
    """
    link = chip.host_link
    return System(
        id=f"{chip.id}-over-{link.name.replace(' ', '-').lower()}",
        name=f"{chips} x {chip.name} over {link.name} through the host",
        chip_id=chip.id,
        chips=chips,
        spec=chip,
        sources=chip.sources,
        levels=[
            TopologyLevel(
                name="host", kind="switch", size=max(chips, 1),
                links_per_chip=link.count, bandwidth_bytes_per_s=link.bandwidth_bytes_per_s,
                latency_s=link.latency_s,
            )
        ],
    )  # fmt: skip


def default_system(chip: Chip, chips: int) -> System:
    """The system `--chips N` builds for a chip: its default system file, else the host."""
    base = base_id(chip.id)  # what-if copies keep their base chip's system
    for system_id in system_ids():
        system = _catalog_system(system_id)
        if system.default_for_chip and system.chip_id == base:
            return system.with_chips(chips).model_copy(update={"spec": chip})
    if chips > MAX_CHIPS:
        raise UserError(f"--chips {chips}: at most {MAX_CHIPS} (2^20) chips can be simulated")
    return host_system(chip, chips)


def plan_chips(target: Chip | System, chips: int | None, tp: int | None, pp: int | None,
               dp: int | None) -> int | None:  # fmt: skip
    """--chips, or on a bare chip id without it, the chips a given plan takes: `--chip
    h100-sxm --tp 8` is eight, as an engine's --tensor-parallel-size is (it was refused as
    "8 chips, but --chips is 1", a count never given). A system keeps its own size."""
    if chips is None and not isinstance(target, System) and any((tp, pp, dp)):
        return (tp or 1) * (pp or 1) * (dp or 1)
    return chips


def system_for(target: Chip | System, chips: int | None) -> System:
    """A chip with --chips N becomes its default system; a system takes --chips as its size.
    Kept per target object and size: a sweep asks for each thousands of times."""

    def make() -> System:
        if isinstance(target, System):
            return target.with_chips(chips) if chips else target
        if chips and chips > 1:
            return default_system(target, chips)
        return host_system(target, 1)

    return remembered("system", (target,), chips, make)
