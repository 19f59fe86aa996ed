"""xpusim: compile ML models onto models of AI accelerators and simulate them.

    import xpusim
    result = xpusim.simulate("llama-2-7b", "h100-sxm", batch=1, prompt=128, gen=128)
    result.tpot_s, result.to_dict()

The API is loaded on first use so that `xpusim --help` does not pay for numpy and pydantic.
"""

from __future__ import annotations

__version__ = "0.1.0"
_API = {"chip", "chip_ids", "compare", "from_torch", "graph", "model", "model_ids", "serve",
        "simulate", "simulate_many", "system", "system_ids", "target"}  # fmt: skip
_PLAN = {"plan"}  # planning/search.py: imports nothing until called


def __getattr__(name: str):
    if name in _PLAN:
        from xpusim.planning import search

        return search.plan
    if name in _API:
        from xpusim import api

        return getattr(api, name)
    raise AttributeError(f"module 'xpusim' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API, *_PLAN])
