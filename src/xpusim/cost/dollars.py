"""What a result costs in money: its system's dollars per hour, dollars per million of what it
produces (output tokens, queries, samples, training tokens), and what it produces per second
per dollar-hour.

The rate per chip-hour comes from hardware/prices.toml (on-demand, else TCO) or `--price`;
everything else is the result's own throughput and power, so a cost is never a second
model of the run: it is the run's numbers times a price.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from xpusim.errors import UserError
from xpusim.hardware.prices import HOURS_PER_YEAR, check_basis, chip_price, prices
from xpusim.hardware.spec import base_id
from xpusim.result import Nested, Table

BASES = ("on-demand", "tco")

Price = float | str | None
"""`--price`: dollars per chip-hour, a basis the catalog must have ("on-demand", "tco"),
or None for the catalog's own choice (on-demand where published, else TCO)."""


@dataclass
class Cost:
    basis: str  # "on-demand", "tco" or "given" (--price)
    source: str  # where the rate comes from, in one line
    usd_per_chip_hour: float
    usd_per_hour: float  # the whole system
    per: str  # what usd_per_million counts: "output tokens", "queries", ...
    usd_per_million: float
    per_s_per_usd_hour: float  # throughput (per second) per dollar-hour of the system


MIN_PRICE, MAX_PRICE = 1e-6, 1e9
"""Dollars per chip-hour a price may be: a millionth of a cent an hour is below any chip's
power bill, and tokens per dollar-hour stay finite (a subnormal price made them infinite,
found by fuzzing `xpusim web`'s API)."""


def parse_price(value: Any, chip_id: str) -> Price:
    """A `price` option as the API takes it, checked before anything is simulated: a
    UserError names what is accepted, or the basis the chip has no price on."""
    if value is None:
        return None
    price = price_value(value)
    if isinstance(price, str):
        check_basis(chip_id, price)  # type: ignore[arg-type]
    return price


def price_value(value: Any) -> float | str:
    """A basis name as it is, or dollars per chip-hour as a number in [MIN_PRICE, MAX_PRICE];
    anything else a UserError saying what is accepted (the command line's --price type too)."""
    if isinstance(value, str) and value in BASES:
        return value
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not (math.isfinite(number) and MIN_PRICE <= number <= MAX_PRICE):
        raise UserError(f"--price {value!r}: give dollars per chip-hour (a number from "
                        f"{MIN_PRICE:g} to {MAX_PRICE:g}) or a basis: "
                        f"{', '.join(BASES)}")  # fmt: skip
    return number


def priced(result: Any, price: Price = None) -> Any:
    """The result with its `cost` filled in (left None where no price is known, where the
    model does not fit, or where nothing was produced). Returns the same object. `price`
    is parse_price's."""
    if getattr(type(result), "PRICED_BY", None) is None:
        return result
    table = Table.of([result])
    priced_table(table, [price])
    result.cost, result.notes = table.cell("cost", 0), table.cell("notes", 0)
    if GOODPUT_COLUMN in table.columns:
        setattr(result, GOODPUT_COLUMN, table.cell(GOODPUT_COLUMN, 0))
    return result


GOODPUT_COLUMN = "usd_per_million_goodput"
"""Where a result whose kind names its GOODPUT_BY (serving: output tokens/s of requests
within the SLOs) gets dollars per million of that: what `plan` ranks by and `sweep --rank
cost` ranks serving points by."""


Rate = tuple[float, str, str]
"""chip_hour_rate's: dollars per chip-hour, basis, source line."""


def priced_table(table: Table, prices: list[Price]) -> None:
    """`priced` over a table's rows, each at its own price: fills its `cost` column (as
    columns, Nested: a sweep's rows make no Cost object) and adds each priced row's note
    to its own copy of its notes. A rate that does not depend on a row's power (all but
    TCO's) is looked up once per chip and price."""
    rate_of = getattr(table.kind, "PRICED_BY", None)
    if rate_of is None:
        return
    c, n = table.columns, table.size
    fits = c.get("fits") or [True] * n
    rates: list[Rate | None] = [None] * n
    shared: dict[tuple[str, Price], Rate | None] = {}
    for i, (price, chip, fit, power) in enumerate(zip(prices, c["chip"], fits, c["avg_power_w"],
                                                      strict=True)):  # fmt: skip
        if fit:
            rate = shared[chip, price] if (chip, price) in shared else chip_hour_rate(
                chip, price, power)  # fmt: skip
            if rate is None or rate[1] != "tco":
                shared[chip, price] = rate
            rates[i] = rate
    throughput = np.array(c[rate_of[0]], dtype=float)
    at = np.flatnonzero(np.array([r is not None for r in rates]) & (throughput > 0))
    if not len(at):
        c["cost"] = [None] * n
        return
    found = [rates[i] for i in at.tolist()]
    usd_per_chip_hour = np.array([rate[0] for rate in found])
    usd_per_hour, usd_per_million, per_s_per_usd_hour = cost_figures(
        usd_per_chip_hour, np.array(c["chips"])[at], throughput[at])  # fmt: skip
    columns = {"basis": [rate[1] for rate in found], "source": [rate[2] for rate in found],
               "usd_per_chip_hour": usd_per_chip_hour, "usd_per_hour": usd_per_hour,
               "per": [rate_of[1]] * len(at), "usd_per_million": usd_per_million,
               "per_s_per_usd_hour": per_s_per_usd_hour}  # fmt: skip
    if len(at) == n:
        c["cost"] = Nested(Cost, {name: _listed(values) for name, values in columns.items()})
    else:
        present = np.zeros(n, dtype=bool)
        present[at] = True
        c["cost"] = Nested(Cost, {name: _spread(values, at, n) for name, values in
                                  columns.items()}, present.tolist())  # fmt: skip
    goodput_of = getattr(table.kind, "GOODPUT_BY", None)
    if goodput_of is not None:
        per_goodput: list[float | None] = [None] * n
        for i, usd_hour in zip(at.tolist(), usd_per_hour.tolist(), strict=True):
            goodput = c[goodput_of][i]
            if goodput:  # none without SLOs, or with none met
                per_goodput[i] = usd_hour / 3600.0 / goodput * 1e6  # as cost_figures'
        c[GOODPUT_COLUMN] = per_goodput
    said: dict[Rate, str] = {}
    notes = c["notes"]
    for i, rate in zip(at.tolist(), found, strict=True):
        note = said.get(rate)
        if note is None:
            note = said[rate] = rate_note(rate)
        notes[i] = [*notes[i], note]


def _listed(values: Any) -> list:
    return values.tolist() if isinstance(values, np.ndarray) else values


def _spread(values: Any, at: np.ndarray, n: int) -> list:
    """A column of n cells from the values of rows `at`, None in the others."""
    cells = np.full(n, None, dtype=object)
    cells[at] = values
    return cells.tolist()


def cost_figures(usd_per_chip_hour: Any, chips: Any, throughput: Any) -> tuple[Any, Any, Any]:
    """The system's dollars per hour, dollars per million of what it produces and what it
    produces a second per dollar-hour, from a chip-hour rate, the chips and its throughput
    (numbers or arrays)."""
    usd_per_hour = usd_per_chip_hour * chips
    return usd_per_hour, usd_per_hour / 3600.0 / throughput * 1e6, throughput / usd_per_hour


def rate_note(rate: Rate) -> str:
    """The note a priced result carries: its rate and where the rate comes from."""
    usd_per_chip_hour, basis, source = rate
    return f"cost: ${usd_per_chip_hour:.3g} per chip-hour, {basis}: {source}"


def chip_hour_rate(chip_id: str, price: Price, avg_power_w: float) -> Rate | None:
    """(dollars per chip-hour, basis, source line), or None where no price is known.

    TCO is the purchase price over its years of service plus the energy the run draws:
    its average chip power times the facility's PUE, at the electricity price.
    """
    if isinstance(price, float):
        return price, "given", f"--price {price:g} $/chip-hour"
    found = chip_price(chip_id)
    if found is None:
        return None
    kept = "" if base_id(chip_id) == chip_id else f"; a what-if keeps {base_id(chip_id)}'s price"
    on_demand = found.on_demand_usd_per_chip_hour
    if on_demand is not None and price in (None, "on-demand"):
        return on_demand.value, "on-demand", f"{on_demand.note} ({on_demand.date}){kept}"
    purchase = found.purchase_usd
    if purchase is None:
        return None
    own = prices().ownership
    capital = purchase.value / (own.service_years.value * HOURS_PER_YEAR)
    energy = avg_power_w / 1000.0 * own.pue.value * own.electricity_usd_per_kwh.value
    source = (f"${purchase.value:,.0f} ({purchase.date}) over "
              f"{own.service_years.value:g} years + {avg_power_w:.0f} W x PUE "
              f"{own.pue.value:g} at ${own.electricity_usd_per_kwh.value:g}/kWh; chip "
              f"and power only{kept}")  # fmt: skip
    return capital + energy, "tco", source
