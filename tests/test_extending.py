"""What docs/architecture.md says to touch when adding a chip, a scheduler or a scenario:
each test fails while such an addition is made half-way (op kinds: ir/op.py's own test)."""

from __future__ import annotations

import pytest

import xpusim
from xpusim import api
from xpusim.hardware.catalog import chip_ids
from xpusim.scenarios import registry
from xpusim.serving import engines, options, schedulers


def test_every_registered_scheduler_is_an_option_and_back():
    assert set(schedulers.SCHEDULERS) == set(options.SCHEDULERS)
    help_text = options.Engine.__dataclass_fields__["scheduler"].metadata["help"]
    assert all(name in help_text for name in options.SCHEDULERS)


def test_every_engine_profile_runs_a_registered_scheduler():
    """An engine profile's `policy` (serving/engines.toml) names a scheduler; the policies a
    profile may name (engines.POLICIES) are registered schedulers, so a scheduler renamed or
    removed half-way fails here, not in a user's serve."""
    assert set(engines.POLICIES) <= set(schedulers.SCHEDULERS)
    assert {p.policy for p in engines.engines().values()} <= set(engines.POLICIES)


@pytest.mark.parametrize("chip_id", chip_ids())
def test_every_catalog_chip_runs_a_model(chip_id):
    """A chip file that loads but lacks what costing reads (a precision's peak, a memory
    level's energy) fails here, not in a user's run."""
    result = xpusim.simulate("llama-3.2-1b", chip_id, prompt=16, gen=2)
    assert result.ttft_s > 0 and result.tpot_s > 0 and result.energy_j > 0


@pytest.mark.parametrize("kind_mode", registry.HOMES, ids="-".join)
def test_every_scenario_registers_itself_and_exposes_options(kind_mode):
    """Each (kind, mode) of the table is registered by the module it names, and takes
    options: a module listed but not registering, or registering under another name, fails."""
    scenario = registry.find(*kind_mode)
    assert scenario is not None and (scenario.kind, scenario.mode) == kind_mode
    assert api._taken(scenario)
