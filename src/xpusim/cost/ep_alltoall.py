"""Measured expert-parallel dispatch and combine (DeepEP) as a floor under the all-to-all.

With attention data parallelism and every chip holding whole experts (partition.py), an MoE
layer sends each chip's tokens to the chips of their top-k experts (dispatch) and brings the
expert outputs back (combine). cost/collectives.py prices that all-to-all from the links
alone: (p - 1) steps of the level's latency and the bytes over the chip's injection
bandwidth. The engines' kernels do not reach that: DeepEP (the kernels SGLang's WIDEEP
serving and vLLM's EP run) on one 8-GPU node spends 20-55 us before the first byte and moves
a token slower than the links would (its dispatch casts to FP8, its combine sums top-k
results in BF16, its low-latency mode uses IBGDA/NVSHMEM puts of one token at a time).

`kernel_tables/all_to_all/*.toml` holds aiconfigurator's measurements of those kernels
(benchmarks/ep_alltoall_tables.py writes them): per chip, DeepEP mode (`ll`: low latency,
decode; `normal`: high throughput, prefill) and MoE shape (hidden, top-k, experts), each
row [tokens per rank, dispatch us, combine us] over `ranks` GPUs of one node. Each row is
checked against physics on load: no dispatch moves each token's hidden values in FP8 to
the other ranks that hold one of its top-k experts (`remote_ranks`; DeepEP's normal kernels
send a token once a rank), nor a combine the same in BF16, faster than the system's node
links allow (the innermost level of the table's `system`).

What the cost model takes from them is a line per chip, shape and step, in tokens: of each
mode's rows, the lower supporting line (slope: the least of (t - t_min) / n over its rows
of n >= LINE_FROM tokens; intercept: the least t - slope x n over all its rows), so that it
lies under every measured point; and of the two modes the smaller intercept and the smaller
slope (an engine runs whichever mode is faster where it is faster: SGLang's `auto` picks
low latency for decode and normal for prefill). The all-to-all op's line is then its
analytic line's fixed time and per-byte time, each raised to the measured one's
(`floor_line`): it only ever adds time, and stays a line in the op's bytes, as the sweeps
need (collectives.CollectiveLine). It applies to an all-to-all of the `ep` group whose size
is the table's ranks, on a catalog chip (no what-if copy: a faster chip's kernels are not
these), on the innermost level of a system of that chip, with its hidden width and top-k
(the op's tensor: tokens x top-k x hidden) measured; the experts' count only decides which
receive buffers DeepEP sizes, and of several measured for one shape the fastest is taken.
Other all-to-alls keep the links' model.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from xpusim.errors import UserError

if TYPE_CHECKING:
    from xpusim.cost.collectives import CollectiveLine
    from xpusim.hardware.system import System
    from xpusim.ir.op import Op

TABLES = Path(__file__).parent / "kernel_tables" / "all_to_all"
LINE_FROM = 256
"""Tokens per rank from which a mode's rows set its slope: below it the fixed time dominates
and a slope from two nearby small counts is noise (B200 LL dispatch: 21.1-24.4 us at 1-32
tokens)."""
STEPS = ("dispatch", "combine")
BYTES_PER_VALUE = {"dispatch": 1, "combine": 2}
"""The fewest bytes a value of each step crosses the links in (DeepEP: an FP8 dispatch with
its scales, a BF16 combine), for the physical check on load."""


@dataclass(frozen=True)
class Line:
    """A measured step's floor: fixed_s + s_per_token x tokens per rank."""

    fixed_s: float
    s_per_token: float


@dataclass(frozen=True)
class Table:
    name: str
    mode: str
    chip: str
    ranks: int
    hidden: int
    topk: int
    experts: int
    tokens: np.ndarray  # per rank
    seconds: dict[str, np.ndarray]  # step -> time at each row
    source: str


def supporting_line(tokens: np.ndarray, seconds: np.ndarray) -> Line:
    """The module docstring's lower supporting line of one mode's rows."""
    big = tokens >= LINE_FROM
    if not big.any():
        big = tokens == tokens.max()
    slope = float(np.min((seconds[big] - seconds.min()) / tokens[big]))
    slope = max(slope, 0.0)
    return Line(float(np.min(seconds - slope * tokens)), slope)


def remote_ranks(topk: int, experts: int, ranks: int) -> float:
    """Other ranks a token must reach at the least, on average: those holding at least one
    of its top-k experts (uniform routing, experts / ranks a rank), as DeepEP's normal
    kernels send a token once a rank, not once an expert."""
    local = experts // ranks
    miss = math.comb(experts - local, topk) / math.comb(experts, topk)
    return (ranks - 1) * (1.0 - miss)


def _check(entry: dict, where: str, link_bytes_per_s: float) -> Table:
    rows = np.array(entry["rows"], dtype=float)
    if rows.ndim != 2 or rows.shape[1] != 3 or not np.all(np.isfinite(rows) & (rows > 0)):
        raise UserError(f"{where}: rows must be [tokens, dispatch us, combine us], positive")
    for key in ("source", "url", "date", "conditions"):
        if not str(entry.get(key, "")).strip():
            raise UserError(f"{where}: {key} is empty")
    ranks, hidden, topk = int(entry["ranks"]), int(entry["hidden"]), int(entry["topk"])
    tokens = rows[:, 0]
    seconds = {"dispatch": rows[:, 1] * 1e-6, "combine": rows[:, 2] * 1e-6}
    experts = int(entry["experts"])
    for step, s in seconds.items():
        moved = tokens * remote_ranks(topk, experts, ranks) * hidden * BYTES_PER_VALUE[step]
        fastest = moved / link_bytes_per_s
        if np.any(s < fastest):
            bad = int(np.argmax(s < fastest))
            raise UserError(f"{where}: the {step} of row {bad + 1} ({rows[bad].tolist()}) "
                            f"moves its bytes faster than {link_bytes_per_s:.3g} B/s of links")
    return Table(entry["name"], entry["mode"], entry["chip"], ranks, hidden, topk,
                 experts, tokens, seconds, entry["source"])  # fmt: skip


@cache
def _link_bytes_per_s(system_id: str) -> float:
    """A chip's injection bandwidth into its catalog system's innermost level (the node the
    rows were measured on): a switched node's, every link at once, as
    collectives.injection_bytes_per_s has it for a switch."""
    from xpusim.hardware.system import load_system

    level = load_system(system_id).levels[0]
    if level.kind == "torus":
        raise UserError(f"{system_id}: DeepEP rows are measured on a switched node, not a torus")
    return level.all_links_bytes_per_s


@cache
def tables() -> tuple[Table, ...]:
    """Every committed table, checked (module docstring)."""
    found = []
    for path in sorted(TABLES.glob("*.toml")):
        with path.open("rb") as f:
            for entry in tomllib.load(f)["table"]:
                where = f"{path.name}: table {entry.get('name', '?')!r}"
                try:
                    found.append(_check(entry, where, _link_bytes_per_s(entry["system"])))
                except KeyError as e:
                    raise UserError(f"{where}: missing field {e}") from None
    return tuple(found)


@cache
def measured_line(chip: str, ranks: int, hidden: int, topk: int, step: str) -> Line | None:
    """The floor of one step (module docstring), or None where nothing was measured."""
    lines = []
    for mode in ("ll", "normal"):
        rows = [t for t in tables() if (t.chip, t.ranks, t.hidden, t.topk, t.mode)
                == (chip, ranks, hidden, topk, mode)]  # fmt: skip
        if rows:
            tokens = np.unique(np.concatenate([t.tokens for t in rows]))
            fastest = np.array([min(t.seconds[step][t.tokens == n].min() for t in rows
                                    if (t.tokens == n).any()) for n in tokens])  # fmt: skip
            lines.append(supporting_line(tokens, fastest))
    if not lines:
        return None
    return Line(min(line.fixed_s for line in lines), min(line.s_per_token for line in lines))


def floor_line(line: CollectiveLine, op: Op, system: System, span: int) -> CollectiveLine:
    """An MoE dispatch or combine op's line (`line`, the links' model) with its fixed and
    per-byte times raised to the measured kernels' where they apply (module docstring)."""
    group, sent = int(op.attr("size")), op.inputs[0]
    level = system.level_for(span)
    if line.algorithm == "none" or level is not system.levels[0] or level.size != group:
        return line
    _, topk, hidden = sent.shape
    # a what-if copy's id is its base's with its changes (`b200[...]`): no table's chip
    measured = measured_line(system.chip.id, group, int(hidden), int(topk), str(op.attr("step")))
    if measured is None:
        return line
    per_byte = measured.s_per_token / (int(topk) * int(hidden) * sent.dtype.itemsize)
    if measured.fixed_s <= line.fixed_s and per_byte <= line.s_per_byte:
        return line
    return replace(line, fixed_s=max(line.fixed_s, measured.fixed_s),
                   s_per_byte=max(line.s_per_byte, per_byte),
                   algorithm=f"{line.algorithm}, DeepEP measured floor")
