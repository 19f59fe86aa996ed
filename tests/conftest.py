"""Shared fixtures: catalog chips and zoo models are loaded once per session."""

from __future__ import annotations

import pytest

from xpusim.hardware.catalog import chip_ids, load_chip
from xpusim.workloads.zoo import load_model


@pytest.fixture(scope="session", params=chip_ids())
def any_chip(request):
    return load_chip(request.param)


@pytest.fixture(scope="session")
def llama7b():
    return load_model("llama-2-7b")
