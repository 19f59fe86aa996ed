"""The measured error `serve` prints beside an answer (validation/error_bands.py): how it is
reduced from a validation run, which group a run falls in, and that the committed bands are
those of the points published now."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from xpusim.hardware.catalog import chip_ids
from xpusim.serving.engines import engines, lineage
from xpusim.validation.error_bands import METRICS, _band, _bands, build, measured_error, note
from xpusim.validation.points import Point, load_points


def _point(id_: str, metric: str, engine: str, workload: str = "llm-serving") -> Point:
    return Point(id=id_, workload=workload, chip="h100-sxm", metric=metric, value=1.0,
                 source="s", setup={"engine_profile": engine})


def test_build_groups_serving_ratios_by_engine_and_chip():
    points = {p.id: p for p in (
        _point("a-1-ttft", "ttft_s", "vllm-0.11"), _point("a-2-ttft", "ttft_s", "vllm-0.11"),
        _point("b-1-ttft", "ttft_s", "vllm-0.11"), _point("c-1-tok", "output_tokens_per_s",
                                                          "trtllm"),
        _point("c-1-itl", "itl_s", "trtllm"),  # not a band's metric
        _point("d-1", "tokens_per_s_per_user", "trtllm", workload="llm-inference"),
    )}  # fmt: skip
    scored = [{"id": i, "chip": "h100-sxm", "metric": points[i].metric, "ratio": r}
              for i, r in (("a-1-ttft", 0.5), ("a-2-ttft", 0.7), ("b-1-ttft", 0.9),
                           ("c-1-tok", 1.2), ("c-1-itl", 3.0), ("d-1", 9.0))]  # fmt: skip
    bands = build(scored, points, "abc1234")
    assert bands["tree"] == "abc1234" and bands["serving_points"] == 4
    vllm, trtllm = bands["groups"][1], bands["groups"][0]
    assert (vllm["engine"], vllm["chip"], vllm["sources"]) == ("vllm-0.11", "h100-sxm", ["a", "b"])
    assert vllm["metrics"]["ttft_s"] == {"points": 3, "median_ratio": 0.7, "q1_ratio": 0.6,
                                         "q3_ratio": 0.8, "median_ape": 0.3}  # fmt: skip
    assert list(trtllm["metrics"]) == ["output_tokens_per_s"]
    assert bands["all"]["ttft_s"]["points"] == 3


@given(st.lists(st.floats(0.01, 100.0), min_size=1, max_size=40))
def test_a_band_is_ordered_and_counts_its_ratios(ratios):
    band = _band(ratios)
    assert band["points"] == len(ratios)
    assert band["q1_ratio"] <= band["median_ratio"] <= band["q3_ratio"]
    assert min(ratios) - 1e-3 <= band["q1_ratio"] and band["q3_ratio"] <= max(ratios) + 1e-3


def test_a_run_takes_its_engine_and_chip_else_its_base_release_else_every_point():
    own = measured_error("trtllm", "b200")
    assert (own["engine"], own["chip"]) == ("trtllm", "b200")
    assert lineage("vllm") == ("vllm", "vllm-0.11")
    written_over = measured_error("vllm", "h200-sxm")  # vllm (0.19) has no scored run
    assert written_over["engine"] == "vllm-0.11"
    whatif = measured_error("trtllm", "b200[memory.hbm3.bandwidth_bytes_per_s=1e+13]")
    assert whatif == own  # a what-if copy: the runs of the chip it was made from
    none = measured_error("ideal", "h100-sxm")
    assert none["engine"] is None and none["metrics"] == _bands()["all"]
    assert "none of engine ideal on h100-sxm is scored" in note("ideal", "h100-sxm")
    assert "vllm is written over that release" in note("vllm", "h200-sxm")
    ttft = own["metrics"]["ttft_s"]
    assert f"TTFT {ttft['median_ratio']:.2f}x" in note("trtllm", "b200")


def test_the_committed_bands_are_those_of_the_points_published_now():
    """The bands are written from a full validation run (benchmarks/error_bands.py); this
    fails when serving points are added or removed and the file was not written again."""
    bands = _bands()
    published = [p for p in load_points() if p.workload == "llm-serving" and p.metric in METRICS]
    assert bands["serving_points"] == len(published), (
        "serving points changed: rerun xpusim validate --json and benchmarks/error_bands.py")
    profiles, chips = engines(), set(chip_ids())
    for group in bands["groups"]:
        assert group["engine"] in profiles and group["chip"] in chips, group
    for metric, band in bands["all"].items():
        assert band["points"] == sum(g["metrics"][metric]["points"] for g in bands["groups"]
                                     if metric in g["metrics"])
