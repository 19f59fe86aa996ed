"""A sweep's results as columns (inference._table) equal the plain per-job result
(inference._result) bit for bit, on random mixes of jobs: the columns may be as clever as
they like behind this."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import xpusim
from xpusim.errors import UserError
from xpusim.memo import scope
from xpusim.scenarios.llm.inference import _ranked_jobs, _result, _table

MODELS = ("llama-3.2-1b", "gemma-3-1b", "mamba-130m", "deepseek-v2-lite", "llama-2-13b")
CHIPS = ("h100-sxm", "tpu-v4", "mtia-v1", "mi300x", "groq-lpu")
JOB = st.fixed_dictionaries(
    {"chip": st.sampled_from(CHIPS), "batch": st.integers(1, 64), "prompt": st.integers(1, 9000),
     "gen": st.integers(1, 300), "chips": st.sampled_from([1, 2, 4, 8]),
     "precision": st.sampled_from([None, "int8", "bf16", "fp32"])},
    optional={"pp": st.sampled_from([1, 2]), "beams": st.sampled_from([2, 4]),
              "objective": st.sampled_from(["latency", "throughput"]),
              "microbatches": st.sampled_from([1, 3])},
)  # fmt: skip


def _plain(result) -> dict:
    """A result's dict without its search's wall time (which differs from call to call)."""
    found = result.to_dict()
    if found["plan_search"]:
        found["plan_search"].pop("search_s")
    return found


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(MODELS), jobs=st.lists(JOB, min_size=1, max_size=6))
def test_table_rows_equal_the_reference_result(model, jobs):
    cfg = xpusim.model(model)
    targets = {chip: xpusim.target(chip) for chip in CHIPS}
    pairs = [(targets[job["chip"]], {k: v for k, v in job.items() if k != "chip"})
             for job in jobs]  # fmt: skip
    with scope():
        found = _ranked_jobs(cfg, pairs)
        costed = [ranks for ranks in found if not isinstance(ranks, UserError)]
        if not costed:
            return
        table = _table(cfg, costed)
        table.check_finite()
        for row, ranks in enumerate(costed):
            assert _plain(table.row(row)) == _plain(_result(cfg, ranks)), (model, jobs[row])


def test_a_torus_layouts_answer_replaces_its_row_as_one_job_gets_it():
    """simulate_many's rows that a torus layout answers equal simulate's for the same job,
    beside rows the layouts are not offered to (one chip, another chip)."""
    from xpusim.api import simulate_many

    cfg = xpusim.model("palm-540b")
    options = dict(chips=64, batch=64, prompt=2048, gen=64, precision="bf16",
                   weight_precision="int8")  # fmt: skip
    jobs = [(xpusim.target("tpu-v4"), options), (xpusim.target("h100-sxm"), {"chips": 8}),
            (xpusim.target("tpu-v4"), {**options, "batch": 8})]  # fmt: skip
    many = simulate_many(cfg, jobs)
    assert many[0].layout
    for (target, opts), got in zip(jobs, many, strict=True):
        alone = xpusim.simulate(cfg, target, **opts)
        assert _plain(got) | {"ops": [], "collectives": []} == \
            _plain(alone) | {"ops": [], "collectives": []}


def test_jobs_whose_options_are_all_refused_come_back_as_their_errors():
    """A sweep's chunk in which every job's options are refused (a fuzzed `--speculative`
    without --acceptance) gets each job's UserError, not an IndexError from an empty table."""
    from xpusim.api import simulate_table

    jobs = [(xpusim.target("h100-sxm"), {"speculative": "mtp"}),
            (xpusim.target("a100-sxm-80gb"), {"tp": 3})]  # fmt: skip
    many = simulate_table(xpusim.model("llama-2-7b"), jobs)
    assert many.tables == [] and all(isinstance(f, UserError) for f in many.found)


def test_a_shaped_request_and_setup_equal_their_plain_copies():
    """Request.shaped and Setup.shaped (a sweep's per-point copies) equal
    dataclasses.replace and copy.copy."""
    from copy import copy
    from dataclasses import replace

    from xpusim.scenarios.llm.inference import _setup

    cfg, chip = xpusim.model("llama-3.2-1b"), xpusim.target("h100-sxm")
    with scope():
        job = _setup(cfg, chip, {"batch": 4, "beams": 2})
        req = job.req.shaped(7, 300, 21)
        assert req == replace(job.req, batch=7, prompt=300, gen=21)
        assert hash(req) == hash(replace(job.req, batch=7, prompt=300, gen=21))
        plain = copy(job)
        plain.req, plain.notes, plain.started_s = req, ["a note"], 1.5
        assert job.shaped(req, ["a note"], 1.5) == plain
