"""Steps with prompt tokens run without CUDA graphs where the engine runs them so
(engines.toml eager_prefill): each takes at least the host's time to launch its ops."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import xpusim
from xpusim.errors import UserError
from xpusim.hardware.catalog import load_chip
from xpusim.serving.engines import engine, engines
from xpusim.serving.replica import eager
from xpusim.serving.step_cost import StepTime

times = st.floats(min_value=0.0, max_value=10.0, allow_nan=False)


@given(st.lists(st.tuples(times, times), min_size=1, max_size=4), times, times, times)
def test_an_eager_step_never_costs_less_than_the_graphed_one(stages, send_s, energy_j,
                                                             static_w):
    """Physics: launching one by one only adds host time; the work's energy stays, and the
    chips draw their static power while they wait on the host (at least, never more than
    static power for the whole stretch added)."""
    step = StepTime([s for s, _ in stages], send_s, energy_j)
    host = tuple(h for _, h in stages)
    run = eager(step, host, static_w)
    assert all(e >= s and e >= h for e, s, h in zip(run.stage_s, step.stage_s, host,
                                                     strict=True))  # fmt: skip
    wait_s = run.trip_s - step.trip_s
    assert wait_s >= 0
    assert run.energy_j == pytest.approx(step.energy_j + static_w * wait_s, abs=1e-9)
    assert eager(step, tuple(0.0 for _ in host), static_w) == step  # no host time: graphed


def test_each_profile_states_where_its_prefill_runs_eagerly():
    """SGLang 0.5 graphs prefill by default but not on ROCm nor under attention DP; 0.4
    never did; the others are graphed or not modelled, each saying which."""
    sglang, old = engine("sglang"), engine("sglang-0.4")
    assert sglang.eager_on("AMD", False) and sglang.eager_on("NVIDIA", True)
    assert not sglang.eager_on("NVIDIA", False)
    assert old.eager_on("NVIDIA", False) and old.eager_on("AMD", False)
    for name in ("vllm", "vllm-v0", "trtllm", "atom", "ideal"):
        assert not engine(name).eager_on("AMD", True) and not engine(name).eager_launch_s
    assert all(p.eager_source for p in engines().values())


SHORT = dict(engine="sglang", concurrency=1, requests=6, prompt=200, gen=16, warmup=1)


def test_sglang_never_graphs_qwen3_nexts_prompt_steps():
    """SGLang's own list of architectures left out of its piecewise graphs names Qwen3-Next
    (engines.toml eager_models): on an NVIDIA chip its prompt steps run eagerly, each at least
    its launches' host time, where a Qwen3 MoE's are graphed; decode steps are untouched, and
    --no-eager-prefill still graphs them."""
    sglang = engine("sglang")
    assert sglang.eager_on("NVIDIA", False, "qwen3_next")
    assert not sglang.eager_on("NVIDIA", False, "qwen3_moe")
    assert not engine("vllm").eager_on("NVIDIA", False, "qwen3_next")
    assert sglang.eager_rule("NVIDIA", False, "qwen3_next") == "eager_models"
    assert sglang.eager_rule("AMD", False, "qwen3_next") == "eager_prefill"  # the chip's rule
    nxt = xpusim.serve("qwen3-next-80b-a3b-instruct", "h200-sxm", chips=2, tp=2, **SHORT)
    graphed = xpusim.serve("qwen3-next-80b-a3b-instruct", "h200-sxm", chips=2, tp=2, **SHORT,
                           eager_prefill=False)  # fmt: skip
    (note,) = [n for n in nxt.notes if "without CUDA graphs" in n]
    assert "leave out qwen3_next" in note and "eager_models" in note
    assert nxt.ttft_s.mean > graphed.ttft_s.mean + 0.02  # ~960 launches at 62.1 us
    assert nxt.tpot_s.mean == pytest.approx(graphed.tpot_s.mean, rel=1e-9)
    moe = xpusim.serve("qwen3-30b-a3b", "h200-sxm", **SHORT)
    assert not [n for n in moe.notes if "without CUDA graphs" in n]



def test_sglang_before_its_piecewise_graph_default_runs_every_prompt_step_eagerly():
    """sglang-0.5.6 is the sglang profile but for where prompt steps run eagerly: on every
    chip, as SGLang did before piecewise CUDA graphs became its default (2026); the same run
    as the sglang profile asked for eager prefill."""
    early, late = engine("sglang-0.5.6"), engine("sglang")
    assert early.eager_on("NVIDIA", False) and early.eager_on("AMD", False)
    assert early.eager_launch_s == late.eager_launch_s > 0
    kept = ("name", "base", "eager_prefill", "eager_source", "version", "releases", "about")
    assert {k: v for k, v in vars(early).items() if k not in kept} == \
        {k: v for k, v in vars(late).items() if k not in kept}
    forced = xpusim.serve("llama-3-8b", "h100-sxm", **SHORT, eager_prefill=True)
    assert xpusim.serve("llama-3-8b", "h100-sxm", **{**SHORT, "engine": "sglang-0.5.6"}
                        ).ttft_s == forced.ttft_s  # fmt: skip


def test_published_sglang_points_name_their_releases_profile():
    """A point of an SGLang 0.5 release before the graph default (0.5.0-0.5.8) is scored
    on sglang-0.5.6, one of a later release on sglang: a new source labelled by hand keeps
    to it."""
    from xpusim.serving.engines import release_profile
    from xpusim.validation.points import load_points

    for p in load_points():
        if p.get("engine") != "sglang" or p.get("engine_profile") not in ("sglang", "sglang-0.5.6"):
            continue
        assert p.get("engine_profile") == release_profile("sglang", p.get("engine_version")), p.id


def test_a_release_names_one_profile_and_an_unstated_one_is_refused_with_the_ranges():
    """engines.toml `releases`: SGLang 0.5.0-0.5.8 (before piecewise CUDA graphs were its
    default) is sglang-0.5.6, 0.5.9 and every later release sglang, whatever the text
    around the numbers; a release no profile states is refused, naming the ranges."""
    from itertools import pairwise

    from xpusim.errors import UserError
    from xpusim.serving.engines import _release, engines, lineage, release_profile

    assert release_profile("sglang", "0.5.0") == "sglang-0.5.6"
    assert release_profile("sglang", "0.5.6.post2") == "sglang-0.5.6"
    assert release_profile("sglang", "0.5.8+") == "sglang-0.5.6"
    assert release_profile("sglang", "lmsysorg/sglang:v0.5.9-cu129") == "sglang"
    assert release_profile("sglang", "0.5.12") == "sglang"
    ranges = r"sglang 0\.5\.9-, sglang-0\.5\.6 0\.5\.0-0\.5\.8"
    with pytest.raises(UserError, match=r"0\.4\.3.*" + ranges):
        release_profile("sglang", "0.4.3")
    stated = [p.releases for n, p in engines().items() if "sglang" in lineage(n) and p.releases]
    assert len(stated) == 2
    spans = sorted((_release(first), _release(last) if last else (99,)) for first, last in stated)
    assert all(a[1] < b[0] for a, b in pairwise(spans)), spans  # each release has one


def test_the_host_floor_applies_only_where_the_profile_says_eager():
    """Llama-3-8B's 200-token prefill on one chip is shorter on the device than its
    forward's launches on the host: on an MI300X (SGLang's ROCm build: eager) TTFT is the
    host's time, on an H100 (piecewise graphs) the device's; decode steps are untouched."""
    rocm = xpusim.serve("llama-3-8b", "mi300x", **SHORT)
    graphed = xpusim.serve("llama-3-8b", "mi300x", **SHORT, eager_prefill=False)
    nvidia = xpusim.serve("llama-3-8b", "h100-sxm", **SHORT)
    forced = xpusim.serve("llama-3-8b", "h100-sxm", **SHORT, eager_prefill=True)
    host_s = 292 * engine("sglang").eager_launch_s  # the note's launches x the figure
    front_s = engine("sglang").frontend_s  # each TTFT's time outside the steps
    assert rocm.ttft_s.mean - front_s == pytest.approx(host_s, rel=0.02)
    assert forced.ttft_s.mean - front_s == pytest.approx(host_s, rel=0.02)
    assert graphed.ttft_s.mean - front_s < 0.8 * host_s
    assert nvidia.ttft_s.mean - front_s < 0.8 * host_s
    assert rocm.tpot_s.mean == pytest.approx(graphed.tpot_s.mean, rel=1e-9)
    assert forced.tpot_s.mean == pytest.approx(nvidia.tpot_s.mean, rel=1e-9)
    assert any("without CUDA graphs" in n for n in rocm.notes)
    assert not any("without CUDA graphs" in n for n in nvidia.notes)


def test_eager_prefill_is_refused_where_no_host_time_was_measured():
    with pytest.raises(UserError, match="engine 'trtllm' has no measured host time"):
        xpusim.serve("llama-3-8b", "h100-sxm", **{**SHORT, "engine": "trtllm"},
                     eager_prefill=True)  # fmt: skip


def test_the_note_says_the_figure_is_deepseeks_where_the_model_is_not():
    """The per-op figure is one DeepSeek-V3 forward's: a dense model's run says it may be up
    to ~2x high (docs/validation.md a7: Llama-3-8B 18 ms against 8.2 measured); an MLA
    model's run does not."""
    dense = xpusim.serve("llama-3-8b", "mi300x", **SHORT)
    mla = xpusim.serve("deepseek-v2-lite", "mi300x", **SHORT)
    eager = [n for n in dense.notes if "without CUDA graphs" in n]
    assert len(eager) == 1 and "up to ~2x high" in eager[0]
    assert [n for n in mla.notes if "without CUDA graphs" in n]
    assert not any("up to ~2x high" in n for n in mla.notes)


def test_chips_waiting_on_the_hosts_launches_draw_static_power():
    """A prefill step stretched to the host's launch time keeps its chips powered: the run
    costs the graphed run's energy plus at least static power for the host's extra time
    of each prefill (6 prompts, one chip)."""
    rocm = xpusim.serve("llama-3-8b", "mi300x", **SHORT)
    graphed = xpusim.serve("llama-3-8b", "mi300x", **SHORT, eager_prefill=False)
    static_w = load_chip("mi300x").energy.static_power_w.value
    wait_s = rocm.ttft_s.mean - graphed.ttft_s.mean  # one prefill's wait on the host
    assert wait_s > 0.005
    assert rocm.energy_j - graphed.energy_j >= 0.9 * static_w * wait_s * SHORT["requests"]


def test_sglang_graphs_an_mla_prefill_only_up_to_its_token_bound():
    """SGLang's piecewise graphs stop at 2,048 tokens under an MLA attention backend
    (engines.toml mla_graph_max_tokens): DeepSeek-V2-Lite's 2,200-token prefill on a B200
    runs eagerly, its TTFT the host's launches, while a 2,000-token one and a dense model's
    2,200-token one stay graphed; --no-eager-prefill (SGLang's larger
    --piecewise-cuda-graph-max-tokens) graphs them all; decodes are untouched."""
    short = {**SHORT, "requests": 4, "gen": 8}
    mla = xpusim.serve("deepseek-v2-lite", "b200", **{**short, "prompt": 2200})
    graphed = xpusim.serve("deepseek-v2-lite", "b200", **{**short, "prompt": 2200},
                           eager_prefill=False)  # fmt: skip
    under = xpusim.serve("deepseek-v2-lite", "b200", **{**short, "prompt": 2000})
    under_graphed = xpusim.serve("deepseek-v2-lite", "b200", **{**short, "prompt": 2000},
                                 eager_prefill=False)  # fmt: skip
    dense = xpusim.serve("llama-3-8b", "b200", **{**short, "prompt": 2200})
    dense_graphed = xpusim.serve("llama-3-8b", "b200", **{**short, "prompt": 2200},
                                 eager_prefill=False)  # fmt: skip
    sglang = engine("sglang")
    assert sglang.mla_graph_max_tokens == 2048 and sglang.graphed_up_to(False) == 0
    front_s = sglang.frontend_s
    host_s = 484 * sglang.eager_launch_s  # the note's launches x the figure
    assert mla.ttft_s.mean - front_s == pytest.approx(host_s, rel=0.02)
    assert graphed.ttft_s.mean - front_s < 0.7 * host_s
    assert under.ttft_s.mean == pytest.approx(under_graphed.ttft_s.mean, rel=1e-12)
    assert dense.ttft_s.mean == pytest.approx(dense_graphed.ttft_s.mean, rel=1e-12)
    assert mla.tpot_s.mean == pytest.approx(graphed.tpot_s.mean, rel=1e-9)
    assert any("over 2,048 tokens" in n for n in mla.notes)
    assert not any("without CUDA graphs" in n for n in dense.notes + graphed.notes)
