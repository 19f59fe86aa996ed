"""The chip specification: what one accelerator can do, every figure with its origin.

A chip file is TOML. Every number is a *figure*: an inline table with the value, the key of
a source in the file's `[sources]` table, a confidence word, and an optional note saying how
a derived figure was derived. Carrying the source beside the number is the point: a user who
doubts a prediction can trace each input to a datasheet, a paper or a measurement.

Validation happens on load (pydantic); a missing, negative or mistyped field is a
`UserError` naming the file and the field path.
"""

from __future__ import annotations

import tomllib
from enum import StrEnum
from functools import cached_property
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from xpusim.errors import UserError
from xpusim.files import read_text
from xpusim.ir.dtypes import DType

Confidence = Literal["published", "third-party", "measured", "derived", "assumed"]
"""How much to trust a figure.

published: read in the vendor's datasheet or the designers' paper.
third-party: a vendor figure quoted by press or a third party, not read at the origin.
measured: a microbenchmark (ours or a cited one).
derived: computed from other figures; the note says how.
assumed: no public figure exists; the note says why this value is reasonable.
"""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class Figure(_Strict):
    value: float = Field(ge=0, allow_inf_nan=False)
    source: str
    confidence: Confidence = "published"
    note: str = ""


class PositiveFigure(Figure):
    value: float = Field(gt=0, allow_inf_nan=False)


MIN_EFFICIENCY = 1e-3
"""The least fraction of a peak an efficiency may claim. The catalog's lowest is 0.15
(MTIA v1's random LPDDR5 row reads) and the lowest published for large, well-shaped work is
a few percent, so 0.1% is a typo (a percentage divided by 100 twice) or a denormal; every
time is a figure over an efficiency, and 5e-324 made them infinite. At 1e-3 the longest
time the ranges allow (1e16 B at 1e3 B/s) is 1e16 s, far from overflowing."""


class Fraction(Figure):
    """An efficiency: achieved over peak, in [MIN_EFFICIENCY, 1]."""

    value: float = Field(ge=MIN_EFFICIENCY, le=1)


PHYSICAL_RANGES: tuple[tuple[str, float, float, str], ...] = (
    # (how the field's name ends, lowest, highest, unit), first match wins. Wide enough for
    # any chip built or planned (the catalog spans 1e11-8e13 B/s, 2.5e11-2.6e15 ops/s,
    # 8-750 W),
    # narrow enough that no time, energy or power the cost model derives overflows a float
    # or divides by a denormal: 1e16 bytes over 1e3 B/s is 1e13 s, at 1e6 W 1e19 J.
    ("bytes_per_s", 1e3, 1e18, "B/s"),
    ("ops_per_s", 1e3, 1e21, "ops/s"),
    ("hz", 1e3, 1e12, "Hz"),
    ("pj_per_byte", 0.0, 1e6, "pJ/B"),
    ("bytes", 1.0, 1e16, "B"),
    ("_w", 0.0, 1e6, "W"),
    ("_s", 0.0, 1e3, "s"),
    ("count", 1.0, 1e7, ""),  # units, links, sparse cores
    ("links_per_chip", 1.0, 1e4, ""),
    ("rows", 1.0, 1e6, ""),  # a matrix unit's MACs along one side
    ("cols", 1.0, 1e6, ""),
)
"""Physical bounds of a chip's or system's figures, by unit (units are in the names)."""


def check_ranges(items: list[tuple[str, Figure]]) -> None:
    """Each named figure within its unit's PHYSICAL_RANGES; the first that is not raises."""
    for path, figure in items:
        rule = _range_of(path)
        if rule is None or isinstance(figure.value, bool):
            continue
        _, low, high, unit = rule
        if not low <= figure.value <= high:
            raise ValueError(f"{path} is {figure.value:g} {unit}".rstrip() + ", outside the "
                             f"physical range [{low:g}, {high:g}]")  # fmt: skip


def _range_of(path: str) -> tuple[str, float, float, str] | None:
    """The rule for a figure's path: its last name that carries a unit (a dict's entry,
    peak_ops_per_s.bf16, takes its field's); None for unitless figures (fractions)."""
    for name in reversed(path.split(".")):
        for rule in PHYSICAL_RANGES:
            if name.endswith(rule[0]):
                return rule
    return None


class Flag(Figure):
    """A yes/no property of the hardware, sourced like any figure."""

    value: bool


class MemoryKind(StrEnum):
    LOCAL = "local"  # per-core scratchpad: holds tiles in flight, never a tensor's home
    CACHE = "cache"  # hardware-managed on-chip cache: speeds working sets, adds no capacity
    SRAM = "sram"  # software-managed on-chip memory that can hold tensors (MTIA, Groq, CMEM)
    DRAM = "dram"  # off-chip (or in-package) memory: HBM, LPDDR, GDDR

    @property
    def on_chip(self) -> bool:
        return self is not MemoryKind.DRAM

    @property
    def holds_tensors(self) -> bool:
        return self in (MemoryKind.SRAM, MemoryKind.DRAM)


class MemoryLevel(_Strict):
    name: str
    kind: MemoryKind
    capacity_bytes: PositiveFigure
    bandwidth_bytes_per_s: PositiveFigure
    energy_pj_per_byte: Figure
    # Random row reads (embedding lookups): the smallest transfer, to which every row read is
    # rounded up, and the fraction of peak bandwidth such reads reach. Both optional; the
    # defaults, and why, are in cost/embedding.py.
    access_granularity_bytes: PositiveFigure | None = None
    random_access_efficiency: Fraction | None = None
    # The fraction of this level's bandwidth that streaming kernels reach, where it was
    # measured apart from the chip's other levels (MTIA v1's operators reach about 40% of
    # LPDDR5 and two thirds of SRAM bandwidth); absent: the chip's efficiency.memory.
    efficiency: Fraction | None = None
    # Bytes of this level the device's runtime keeps from its reported total (CUDA's
    # cudaMemGetInfo total, what PyTorch and the serving engines multiply their memory
    # fractions by, under the driver's nvidia-smi figure): capacity less what the runtime
    # reports; absent: none measured (HIP reports an AMD GPU's whole capacity).
    runtime_reserved_bytes: Figure | None = None


class SparseCore(_Strict):
    """Embedding engines beside the matrix units (TPU v4's SparseCores).

    They gather and pool embedding rows while the matrix units run the dense layers, so the
    two overlap; their power is part of the TDP, so it is taken out of the compute budget.
    """

    count: PositiveFigure
    vector_ops_per_s: PositiveFigure  # pooling arithmetic, all sparse cores together
    power_w: Figure  # drawn at their full rate


class DataflowFigure(Figure):
    """How a systolic matrix unit runs a GEMM (cost/systolic.py), sourced like any figure."""

    value: Literal["weight-stationary", "output-stationary"]


class MatrixUnit(_Strict):
    """Geometry of the matrix engine: `count` units of `rows` x `cols` MACs each.

    Padding waste follows from it: a weight tile of K x N is rounded up to rows x cols. A
    unit whose `dataflow` is known is a systolic array, and a GEMM's time on it is its cycles
    (cost/systolic.py: folds, fill, drain, and with `double_buffered` weights the folds
    overlapped), in place of padded FLOPs over peak times an assumed efficiency.
    """

    count: PositiveFigure
    rows: PositiveFigure
    cols: PositiveFigure
    dataflow: DataflowFigure | None = None
    double_buffered: Flag | None = None  # weight-stationary: the next tile loads meanwhile
    # True when the unit cannot read an operand transposed, so the transposed operands of
    # backpropagation (W^T in dX = dY W^T, X^T in dW = X^T dY) are copied by a separate op
    # first (compiler/transpose.py). Absent: it reads either layout at no cost, as GPU
    # tensor cores do (BLAS transpose flags, ldmatrix.trans).
    explicit_transpose: Flag | None = None


class PeGrid(_Strict):
    """A grid of processing elements that computes a GEMM in output blocks (MTIA v1's 8 x 8
    PEs, ISCA'23 section 4 and Figs. 7-8).

    Each PE's accumulators hold a pe_output_rows x pe_output_cols block of C while all of K
    streams past. With `multicast`, one read of an A block serves every PE of a grid row
    and one read of a B block every PE of a grid column, so a pass of the grid holds a
    (rows x pe_output_rows) x (cols x pe_output_cols) block of C; without it each PE reads
    its own operands and a pass's reuse is one PE's block. B is read again for every
    further block of C's rows and A for every further block of its columns
    (cost/pe_grid.py), at the memory that holds each. Chips without a grid read operands once.
    """

    rows: PositiveFigure  # PEs down the grid: C's row blocks side by side
    cols: PositiveFigure  # PEs across the grid: C's column blocks side by side
    pe_output_rows: PositiveFigure  # the block of C one PE's accumulators hold
    pe_output_cols: PositiveFigure
    multicast: Flag  # one read of an operand block serves a whole grid row or column

    @property
    def output_block(self) -> tuple[float, float]:
        """Rows x columns of C one pass of the grid holds: the reuse each operand read gets."""
        rows, cols = self.pe_output_rows.value, self.pe_output_cols.value
        if self.multicast.value:
            return self.rows.value * rows, self.cols.value * cols
        return rows, cols


class Link(_Strict):
    name: str
    count: PositiveFigure
    bandwidth_bytes_per_s: PositiveFigure  # per link, per direction
    latency_s: Figure


class OverlapExponent(Figure):
    """The p of a p-norm, (a^p + b^p)^(1/p): 1 is a sum, larger tends to the maximum."""

    value: float = Field(ge=1)


class Efficiency(_Strict):
    """Achievable fractions of peak for large, well-shaped work; each with its origin."""

    matmul: Fraction
    vector: Fraction
    memory: Fraction
    # How a matmul kernel's compute and memory times combine, (c^p + m^p)^(1/p), when no
    # calibration file fits p (cost/calibration.py); absent means max(c, m), p = infinity.
    matmul_overlap_p: OverlapExponent | None = None


class Overhead(_Strict):
    per_op_s: Figure  # launch/dispatch cost paid by every op, however small
    # Fixed time inside every matmul kernel (block launch, prologue, epilogue, last wave),
    # when no calibration file fits it (cost/calibration.py); absent means none is known.
    matmul_fixed_s: Figure | None = None


class Energy(_Strict):
    static_power_w: Figure  # drawn whenever the chip is busy, whatever it computes
    # The chip's draw with its arithmetic at peak, where a source gives it apart from the
    # power limit (tdp_w): TPU v4's production maximum is 192 W, yet its MLPerf runs
    # averaged 197-206 W, so the limit is higher than what sets the energy per op.
    # Absent: tdp_w is both.
    peak_arithmetic_w: PositiveFigure | None = None


class Chip(_Strict):
    id: str
    name: str
    vendor: str
    year: int = Field(ge=1990, le=2100)
    process: str
    description: str = ""
    sources: dict[str, str]
    clock_hz: PositiveFigure
    tdp_w: PositiveFigure
    peak_ops_per_s: dict[DType, PositiveFigure]
    vector_ops_per_s: PositiveFigure
    matrix_unit: MatrixUnit
    memory: list[MemoryLevel] = Field(min_length=1)
    host_link: Link
    chip_to_chip: Link | None = None
    efficiency: Efficiency
    overhead: Overhead
    energy: Energy
    sparse_core: SparseCore | None = None
    pe_grid: PeGrid | None = None

    @model_validator(mode="after")
    def _check(self) -> Chip:
        items = self.figure_items()
        missing = sorted({f.source for _, f in items if f.source not in self.sources})
        if missing:
            raise ValueError(f"figures cite sources not in [sources]: {', '.join(missing)}")
        check_ranges(items)
        if not any(level.kind.holds_tensors for level in self.memory):
            raise ValueError("memory: no level of kind 'sram' or 'dram' can hold tensors")
        if self.compute_power_budget_w <= 0:
            raise ValueError(
                f"energy: static power and the sparse cores draw "
                f"{self.tdp_w.value - self.compute_power_budget_w:.1f} W, not below "
                f"tdp_w {self.tdp_w.value:g} W: a figure is wrong"
            )
        return self

    def figures(self) -> list[Figure]:
        """Every figure in the spec, for source checks and for `xpusim chip ID`."""
        return [f for _, f in self.figure_items()]

    def figure_items(self) -> list[tuple[str, Figure]]:
        return list(_walk_figures(self, ""))

    # --- derived views the cost model uses -------------------------------------------
    @cached_property  # a sweep asks for it for every plan of every point
    def tensor_levels(self) -> tuple[int, ...]:
        """Positions in `memory` of the levels that can hold tensors (SRAM and DRAM)."""
        return tuple(i for i, m in enumerate(self.memory) if m.kind.holds_tensors)

    @cached_property  # a sweep asks for it for every plan of every point
    def capacity_bytes(self) -> float:
        """Bytes that can hold tensors: SRAM and DRAM levels (caches and scratchpads don't)."""
        return sum(m.capacity_bytes.value for m in self.memory if m.kind.holds_tensors)

    @property
    def runtime_capacity_bytes(self) -> float:
        """The tensor-holding bytes the device's runtime reports as its total: what a serving
        engine's memory fraction multiplies (MemoryLevel.runtime_reserved_bytes)."""
        return sum(m.capacity_bytes.value - (m.runtime_reserved_bytes.value
                                             if m.runtime_reserved_bytes else 0.0)
                   for m in self.memory if m.kind.holds_tensors)  # fmt: skip

    @property
    def compute_power_budget_w(self) -> float:
        """Power above static draw (and any sparse cores) that arithmetic at peak may use.

        Energy per matrix or vector op is derived from it (cost/roofline.py): arithmetic at
        the peak rate alone draws exactly the TDP (or energy.peak_arithmetic_w, where a
        source puts the chip's power limit above that draw). Memory traffic is charged per
        byte on top (its measured path energy, hardware/catalog), so an op that computes and
        streams at once can ask for more than the TDP; the chip then runs slower, as a GPU's
        power limiter lowers its clocks, and cost/roofline.py stretches the op's time until
        its average power is the TDP. Where a measured pJ/op exists it should replace this
        derivation.
        """
        sparse_w = self.sparse_core.power_w.value if self.sparse_core else 0.0
        at_peak = self.energy.peak_arithmetic_w or self.tdp_w
        return at_peak.value - self.energy.static_power_w.value - sparse_w

    def peak(self, dtype: DType, option: str = "--precision") -> float:
        """The dtype's peak; a format the chip lacks is a UserError naming the option that
        asked for it and the formats it has."""
        fig = self.peak_ops_per_s.get(dtype)
        if fig is None:
            supported = ", ".join(d.value for d in self.peak_ops_per_s)
            raise UserError(
                f"{option} {dtype.value}: {self.id} has no {dtype.value} peak "
                f"(supported: {supported}); pick one of those"
            )
        return fig.value


def _walk_figures(node: object, path: str):
    if isinstance(node, Figure):
        yield path, node
    elif isinstance(node, BaseModel):
        for name in type(node).model_fields:
            yield from _walk_figures(getattr(node, name), f"{path}.{name}" if path else name)
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from _walk_figures(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _walk_figures(value, f"{path}[{i}]")


ModelT = TypeVar("ModelT", bound=BaseModel)


def read_toml(path: Path, what: str) -> dict:
    """A spec file's TOML; unreadable or malformed files are a UserError naming the file."""
    text = read_text(path, what)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{path}: malformed TOML: {e}") from None
    except RecursionError:
        raise UserError(f"{path}: TOML nested too deeply to be a {what} file") from None


def validated(model: type[ModelT], data: dict, origin: str) -> ModelT:
    """The data as a validated spec; the first problem is one line naming its field path."""
    try:
        return model.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        more = f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else ""
        message = err["msg"].removeprefix("Value error, ")  # a validator's own words
        field = f" field {where}:" if where else ""
        raise UserError(f"{origin}:{field} {message}{more}") from None


def load_chip_file(path: Path) -> Chip:
    return parse_chip(read_toml(path, "chip"), str(path))


def base_id(chip_id: str) -> str:
    """The catalog chip a what-if copy ('h100-sxm[memory.hbm3.bandwidth_bytes_per_s=4e+12]',
    hardware/whatif.py) was made from; a catalog id is its own."""
    return chip_id.split("[", 1)[0]


def display_id(chip_id: str) -> str:
    """A chip id as a table shows it: a what-if copy as its base id and a star (the changes
    are in its note; rich would read the brackets as markup and drop them)."""
    base = base_id(chip_id)
    return chip_id if base == chip_id else f"{base}*"


def parse_chip(data: dict, origin: str) -> Chip:
    return validated(Chip, data, origin)
