"""`run`'s options are declared once (run_options.RunOptions): the command's flags, the web
schema and the scenario functions' keywords cannot drift apart."""

from __future__ import annotations

import pytest

import xpusim
from xpusim import api
from xpusim.cli import run
from xpusim.run_options import RUN_FIELDS
from xpusim.scenarios import registry
from xpusim.scenarios.llm.inference import simulate


def test_every_run_option_is_a_flag_of_run_in_order():
    flags = [p.name for p in run.params if p.name not in ("model", "chip_id", "as_json",
                                                            "input_shapes", "sets", "show_ops",
                                                            "offline", "wide")]
    assert flags == [f.name for f in RUN_FIELDS]


def test_every_run_option_is_a_scenario_keyword_and_back():
    """Each field some scenario takes (mode and price every scenario's: api.simulate's), and
    each keyword of the inference and training scenarios a field."""
    taken = set().union(*(api._taken(registry.find(*key)) for key in registry.HOMES
                          if key[1] != "serving"))  # fmt: skip
    assert {f.name for f in RUN_FIELDS} - {"mode", "price"} == taken - {"input_shapes"}


def test_every_option_says_what_it_does():
    assert all(f.metadata["help"] for f in RUN_FIELDS if f.name != "mode")


def test_llm_inference_refuses_a_keyword_it_does_not_take():
    """simulate takes **options named by RunOptions (run_options.takes): a misspelt one is
    refused as a plain keyword would be, not left out."""
    with pytest.raises(TypeError, match="bach"):
        simulate(xpusim.model("llama-2-7b"), xpusim.target("h100-sxm"), bach=2)
