"""Shapes as arrays: one graph whose dimensions are arrays over many requests counts every
op's FLOPs and bytes exactly as a graph built for each request alone, and costing many
shapes together gives each the result it gets alone (issue: shapes as arrays)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import xpusim
from xpusim.compiler.memory_plan import peak_activation_bytes
from xpusim.compiler.partition import Plan, partition
from xpusim.cost.op_table import op_table
from xpusim.errors import UserError
from xpusim.explore.grid import Point
from xpusim.explore.rows import Columns
from xpusim.ir.dtypes import DType
from xpusim.scenarios.llm.graphs import shape_graphs
from xpusim.scenarios.llm.inference import simulate_many
from xpusim.scenarios.llm.request import Request
from xpusim.workloads.transformer import StepShape, build_step

MODELS = {"llama-2-7b": (1, 2, 4), "mixtral-8x7b": (1, 2), "gpt-j-6b": (1, 4)}
FORMATS = [(DType.BF16, DType.BF16), (DType.INT8, DType.INT8), (DType.FP16, DType.INT4)]

requests = st.builds(lambda b, p, g: (b, p, g), st.integers(1, 300), st.integers(1, 5000),
                     st.integers(1, 3000))  # fmt: skip


def _alone(cfg, step: StepShape, act: DType, weight: DType, tp: int, ep: int,
           dp_attention: bool = False):  # fmt: skip
    graph = partition(build_step(cfg, step, act, weight, compact=True),
                      Plan(tp=tp, ep=ep, dp_attention=dp_attention))  # fmt: skip
    return graph, op_table(graph)


def _same_counts(ours, alone, row, step):
    """Each op of a request's row of the shared table equals the table built for it alone."""
    assert [op.name for op in ours.ops] == [op.name for op in alone.ops]
    assert np.array_equal(ours.count, alone.count)
    for name in ("matrix_flops", "vector_flops", "role_bytes"):
        np.testing.assert_allclose(getattr(ours, name)[row, step], getattr(alone, name),
                                   rtol=1e-12, err_msg=name)  # fmt: skip


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(sorted(MODELS)), formats=st.sampled_from(FORMATS),
       shapes=st.lists(requests, min_size=1, max_size=6, unique=True), data=st.data())
def test_one_graph_over_many_requests_counts_each_exactly(model, formats, shapes, data):
    cfg = xpusim.model(model)
    tp = data.draw(st.sampled_from(MODELS[model]), label="tp")
    ep = data.draw(st.sampled_from((1, tp) if cfg.is_moe else (1,)), label="ep")
    act, weight = formats
    reqs = [Request(b, p, g, act, weight) for b, p, g in shapes]
    # attention data parallelism splits the shape arrays themselves (the sequences)
    dp_attention = data.draw(st.booleans(), label="dp_attention") if tp > 1 else False
    graphs = shape_graphs(cfg, reqs, tp, ep, dp_attention)
    prefill, decode = graphs.phase_values
    for req in reqs:
        r = graphs.row[req]
        graph, alone = _alone(cfg, StepShape(req.batch, req.prompt, req.prompt), act, weight,
                              tp, ep, dp_attention)  # fmt: skip
        _same_counts(prefill.ends, alone, r, 0)
        assert graphs.activation_bytes[r] >= peak_activation_bytes(graph)
        # the decode steps the request is costed at: ends exactly, the others interpolated
        steps = max(req.gen - 1, 1)
        for node in sorted({0, steps - 1, steps // 2}):
            kv = req.prompt + 1 + node
            _, alone = _alone(cfg, StepShape(req.batch, 1, kv), act, weight, tp, ep,
                              dp_attention)  # fmt: skip
            at = np.flatnonzero(np.isclose(graphs.step_fraction[r] * max(steps - 1, 1), node))
            assert len(at) or node == steps // 2  # the first and last steps are always costed
            if len(at):
                full = decode.steps_of(r)
                for name in ("matrix_flops", "vector_flops", "role_bytes"):
                    np.testing.assert_allclose(getattr(full, name)[at[0]], getattr(alone, name),
                                               rtol=1e-12, err_msg=name)  # fmt: skip


windowed = st.tuples(st.integers(1, 64), st.integers(1, 1500), st.integers(1, 1500))


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shapes=st.lists(windowed, min_size=2, max_size=8, unique=True), speculative=st.booleans())
def test_windowed_shapes_costed_together_equal_each_alone(shapes, speculative):
    """Gemma-3-1B's 512-key window bends the keys a step reads at 511 cached tokens: a
    request whose steps cross it is interpolated piecewise between its break steps, one
    that does not along its one line (graphs._between gathers the crossing rows only).
    Beside any others, padded to their steps and ends, a request costs what it costs alone
    (to rounding: an op that varies only beside others is summed over its constant steps)."""
    extra = dict(speculative="llama-3.2-1b", draft_tokens=3, acceptance=0.7) if speculative \
        else {}  # a verify feeding 4 tokens, advancing 2.5: every count near 511 costed
    gemma = xpusim.model("gemma-3-1b")
    target = xpusim.target("h100-sxm")
    jobs = [(target, dict(batch=b, prompt=p, gen=g, precision="fp8", **extra))
            for b, p, g in shapes]  # fmt: skip
    together = simulate_many(gemma, jobs)
    for job, result in zip(jobs, together, strict=True):
        (alone,) = simulate_many(gemma, [job])
        for name in ("ttft_s", "tpot_s", "energy_j"):
            assert getattr(result, name) == pytest.approx(getattr(alone, name), rel=1e-12)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shapes=st.lists(requests, min_size=2, max_size=8, unique=True),
       chips=st.sampled_from((1, 4, 8)), precision=st.sampled_from(("int8", "bf16")))
def test_shapes_costed_together_equal_each_alone(llama7b, shapes, chips, precision):
    """Bit-identical: a request's result does not depend on which others share its graph."""
    target = xpusim.target("h100-sxm")
    jobs = [(target, dict(batch=b, prompt=p, gen=g, chips=chips, precision=precision))
            for b, p, g in shapes]  # fmt: skip
    together = simulate_many(llama7b, jobs)
    for job, result in zip(jobs, together, strict=True):
        (alone,) = simulate_many(llama7b, [job])
        assert result.to_dict() == alone.to_dict() | {"plan_search": result.plan_search}


@pytest.fixture(scope="module")
def llama7b():
    return xpusim.model("llama-2-7b")


def test_grid_order_and_sorted_order_give_the_same_results(llama7b):
    """simulate_many groups jobs by graph itself: the order they come in changes nothing."""
    target = xpusim.target("a100-sxm-80gb")
    jobs = [(target, dict(batch=b, prompt=p, gen=g, precision=pr, chips=2))
            for pr in ("int8", "bf16") for b in (1, 7) for p in (64, 900) for g in (2, 40)]
    shuffled = [jobs[i] for i in np.random.default_rng(0).permutation(len(jobs))]
    by_key = {str(o): r.to_dict() for (_, o), r in zip(jobs, simulate_many(llama7b, jobs),
                                                       strict=True)}  # fmt: skip
    for (_, o), r in zip(shuffled, simulate_many(llama7b, shuffled), strict=True):
        got = r.to_dict()
        assert got | {"plan_search": None} == by_key[str(o)] | {"plan_search": None}


def test_simulate_many_is_exported_at_package_level():
    results = xpusim.simulate_many("llama-2-7b", [("h100-sxm", {"batch": 2}),
                                                  ("nope", {})])  # fmt: skip
    assert results[0].batch == 2
    assert isinstance(results[1], xpusim.api.UserError)


def test_a_plans_bottleneck_does_not_depend_on_the_jobs_costed_beside_it(llama7b):
    """A graph group's plans are labelled together (Metrics.bottlenecks): each job's label
    is the one it gets costed alone."""
    target = xpusim.target("h100-sxm")
    shapes = ((1, 128, 128), (256, 4096, 16), (64, 1024, 1024), (8, 32, 2000), (2, 8, 3))
    jobs = [(target, dict(batch=b, prompt=p, gen=g)) for b, p, g in shapes]
    together = [r.bottleneck for r in simulate_many(llama7b, jobs)]
    assert len(set(together)) > 1  # the shapes are bound by different things
    assert together == [simulate_many(llama7b, [job])[0].bottleneck for job in jobs]


def _varied_jobs():
    """Jobs whose results take every path of the LLM table: one chip and plan searches,
    a plan given, a model that does not fit, beams, a draft model, every price basis, a
    training job beside them and jobs that raise."""
    h100, tpu = xpusim.target("h100-sxm"), xpusim.target("tpu-v4")
    return [
        (h100, dict(batch=3, prompt=700, gen=40)),
        (h100, dict(batch=64, prompt=4096, gen=512, precision="fp32")),  # does not fit
        (h100, dict(batch=8, chips=8, objective="throughput", price="tco")),
        (tpu, dict(batch=1, chips=4, tp=2, dp=2, price=3.5)),
        (h100, dict(batch=2, beams=4, price="on-demand")),
        (h100, dict(batch=4, chips=2, tp=2, speculative="llama-2-7b", draft_tokens=3,
                    acceptance=0.7)),
        (h100, dict(batch=1, precision="fp4")),  # a format the H100 lacks
        (h100, dict(mode="training", batch=8, prompt=256)),
        ("nope", dict(batch=1)),
    ]


def test_rows_from_result_columns_equal_rows_from_result_objects():
    """A sweep's chunk becomes rows straight from simulate_table's columns: the same rows,
    value for value, as from the result objects those columns make (Columns.of by
    attribute), and each object equals `simulate`'s for its job, priced alike."""
    from xpusim.api import simulate_table

    model = xpusim.model("llama-2-13b")
    jobs = _varied_jobs()
    points = [Point(str(i), (), tuple(options.items())) for i, (_, options) in enumerate(jobs)]
    table = simulate_table(model, jobs)
    objects = list(table)
    assert sum(isinstance(r, UserError) for r in objects) == 2
    assert Columns.of(points, table).cells == Columns.of(points, objects).cells
    for (target, options), result in zip(jobs, objects, strict=True):
        if isinstance(result, UserError) or options.get("mode") == "training":
            continue
        alone = xpusim.simulate(model, target, **options).to_dict()
        assert result.to_dict() == alone | {"ops": [], "collectives": [],
                                            "plan_search": result.plan_search}  # fmt: skip


def test_result_rows_are_their_own_objects():
    """Rows share a plan's degrees and a setup's notes in the columns; each result made of
    them has its own, so changing one result changes no other."""
    from xpusim.api import simulate_table

    results = simulate_table("llama-2-7b", [("h100-sxm", {"batch": b}) for b in (1, 2)])
    first, second = results
    first.plan["tp"] = 99
    first.notes.append("mine")
    first.memory_bytes.weights = -1.0
    again = results[0]
    assert second.plan["tp"] == 1 and again.plan["tp"] == 1
    assert "mine" not in second.notes and "mine" not in again.notes
    assert again.memory_bytes.weights > 0
    assert [r.batch for r in results[::-1]] == [2, 1] and results[-1].batch == 2


def test_a_request_is_made_from_its_fields_in_order():
    """Request's __init__ is written out (it sets the fields in one call): it takes every
    field a request compares by, in declaration order, and what it works out (the hash, the
    decode steps, the formats) is what the fields say, through replace and pickling too."""
    import dataclasses
    import inspect
    import math
    import pickle

    fields = [f.name for f in dataclasses.fields(Request) if f.init]
    assert list(inspect.signature(Request.__init__).parameters)[1:] == fields
    req = Request(2, 100, 30, DType.FP8, DType.BF16, kv=DType.FP8, advance=1.5)
    again = Request(**{name: getattr(req, name) for name in fields})
    assert again == req and hash(again) == hash(req)
    assert pickle.loads(pickle.dumps(req)) == req
    wider = dataclasses.replace(req, batch=3)
    assert wider.batch == 3 and wider != req and wider.formats == req.formats
    assert req.steps_after_first == math.ceil(29 / 1.5)
    assert req.formats == (DType.FP8, DType.BF16, None, DType.FP8, "", ())


@given(st.lists(st.floats(-1e300, 1e300) | st.sampled_from([0.0, -0.0]),
                min_size=1, max_size=70), st.integers(0, 2))  # fmt: skip
def test_an_ordered_sum_adds_as_its_zero_padded_tree(values, axis):
    """ordered_sum skips the zeros that pad its axis to a power of two: the sum, the sign of
    a zero included, is the padded tree's bit for bit, along any axis."""
    from xpusim.cost.ordered_sum import ordered_sum

    def padded_tree(x: np.ndarray) -> np.ndarray:
        size = 1 << max(len(x) - 1, 0).bit_length()
        x = np.concatenate([x, np.zeros((size - len(x), *x.shape[1:]))])
        while len(x) > 1:
            x = x[: len(x) // 2] + x[len(x) // 2 :]
        return x[0]

    column = np.array(values)
    block = np.stack([column, -column[::-1], column * 0.5], axis=1)[:, :, None] * [1.0, -1.0]
    moved = np.moveaxis(block, 0, axis)
    got, want = ordered_sum(moved, axis), padded_tree(block)
    assert np.array_equal(got, want) and np.array_equal(np.signbit(got), np.signbit(want))
