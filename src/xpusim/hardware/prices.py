"""What an hour of a chip costs, as data with sources and dates (hardware/prices.toml).

Prices are not physics: they change every quarter and differ by buyer, which is why they
live in their own file, each with the date it was read, rather than in the chip files.

Two bases, as people choosing hardware compare them:
- on-demand: a public cloud's hourly price for an instance, divided by its chips. It already
  pays for the host, the network, the power and the building.
- tco: a purchase price written off over years of service, plus the energy the simulated
  run draws (its average power, times the facility's PUE, at an electricity price). It
  counts the chip and its power only, not the server, network or staff around it, so it
  is a floor under what owning costs; the notes say so.

A chip with an on-demand price is costed on it; else on TCO where a purchase price is
known; else it has no cost unless `--price` gives one.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from xpusim.errors import UserError
from xpusim.hardware.spec import Figure, _Strict, base_id, read_toml, validated

PRICES_FILE = Path(__file__).parent / "prices.toml"
HOURS_PER_YEAR = 8766.0  # 365.25 days

Basis = Literal["on-demand", "tco"]


class PriceFigure(Figure):
    """A price, with the date its source was read: a price without a date means little."""

    value: float = Field(gt=0, le=1e9, allow_inf_nan=False)
    date: str = Field(pattern=r"^\d{4}(-\d{2}(-\d{2})?)?$")


class ChipPrice(_Strict):
    on_demand_usd_per_chip_hour: PriceFigure | None = None
    purchase_usd: PriceFigure | None = None

    @model_validator(mode="after")
    def _some(self) -> ChipPrice:
        if self.on_demand_usd_per_chip_hour is None and self.purchase_usd is None:
            raise ValueError("give on_demand_usd_per_chip_hour, purchase_usd or both")
        return self


class Ownership(_Strict):
    """What TCO adds to a purchase price: power and the years it is spread over."""

    electricity_usd_per_kwh: PriceFigure
    pue: PriceFigure  # facility watts per IT watt
    service_years: PriceFigure

    @model_validator(mode="after")
    def _pue(self) -> Ownership:
        if not 1.0 <= self.pue.value <= 5.0:
            raise ValueError(f"pue is {self.pue.value:g}; a facility's PUE lies in [1, 5]")
        return self


class Prices(_Strict):
    sources: dict[str, str]
    ownership: Ownership
    chips: dict[str, ChipPrice]

    @model_validator(mode="after")
    def _cited(self) -> Prices:
        cited = [self.ownership.electricity_usd_per_kwh, self.ownership.pue,
                 self.ownership.service_years]  # fmt: skip
        for price in self.chips.values():
            cited += [f for f in (price.on_demand_usd_per_chip_hour, price.purchase_usd) if f]
        missing = sorted({f.source for f in cited if f.source not in self.sources})
        if missing:
            raise ValueError(f"prices cite sources not in [sources]: {', '.join(missing)}")
        return self


@cache
def prices() -> Prices:
    return validated(Prices, read_toml(PRICES_FILE, "prices"), str(PRICES_FILE))


def chip_price(chip_id: str) -> ChipPrice | None:
    """The catalog's prices for a chip; None for a chip nobody has priced."""
    return prices().chips.get(base_id(chip_id))  # a what-if keeps its base chip's price


def check_basis(chip_id: str, basis: Basis) -> None:
    """A UserError unless the chip has a price on this basis."""
    price = chip_price(chip_id)
    have = {"on-demand": price and price.on_demand_usd_per_chip_hour,
            "tco": price and price.purchase_usd}  # fmt: skip
    if not have[basis]:
        known = [b for b, figure in have.items() if figure]
        other = f" (it has: {', '.join(known)})" if known else " (the catalog has no price for it)"
        raise UserError(f"--price {basis}: no {basis} price for {chip_id}{other}; "
                        "give --price USD_PER_CHIP_HOUR")  # fmt: skip
