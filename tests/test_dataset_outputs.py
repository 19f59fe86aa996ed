"""A dataset's output lengths at a run's own mean (serve's --scale-gen), and the MLPerf
DeepSeek-R1 outputs the published points draw from."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xpusim
from xpusim.errors import UserError
from xpusim.serving.load import draw, read_lengths, scaled_outputs
from xpusim.serving.options import Load
from xpusim.validation.points import DATA, load_points

DSR1 = DATA.parent / "lengths/mlperf-deepseek-r1.csv"


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(1, 30_000), min_size=2, max_size=200), st.integers(1, 20_000))
def test_scaled_outputs_keep_the_shape_at_the_mean_asked(outputs, mean):
    found = np.array(outputs)
    got = scaled_outputs(DSR1, found, mean)
    assert got.min() >= 1
    # each length within rounding (and the 1-token floor) of its share of the mean
    exact = found * (mean / found.mean())
    assert np.all(np.abs(got - np.maximum(exact, 1)) <= 1)
    assert abs(got.mean() - mean) <= 1 + (exact < 1).sum()


def test_drawn_requests_take_the_files_shape_at_gen():
    """The draw, not just the helper: a run's requests carry the scaled lengths, so a
    regression that dropped --scale-gen would read the file's own mean (3,886) here."""
    plain = draw(Load(rate=1.0, requests=4000, lengths=DSR1, gen=3748))
    scaled = draw(Load(rate=1.0, requests=4000, lengths=DSR1, gen=3748, scale_gen=True))
    assert np.array_equal(plain.prompt, scaled.prompt)
    assert abs(plain.gen.mean() / scaled.gen.mean() - 3886.2 / 3748) < 0.002
    assert plain.gen.max() <= 20_000 and scaled.gen.max() < 20_000


def test_the_deepseek_r1_outputs_are_the_reference_cut_at_max_output_len():
    """The dataset's reference outputs, cut at the benchmark's max_output_len 20,000
    (lengths/README.md): their mean 3,886 and the long tail that sets the in-flight keys."""
    prompt, gen = read_lengths(DSR1)
    assert len(prompt) == len(gen) == 4388
    assert gen.max() == 20_000 and (gen == 20_000).sum() == 83
    assert round(gen.mean(), 1) == 3886.2
    assert np.median(gen) == 2194


def test_the_mlperf_deepseek_points_scale_the_file_to_their_run():
    points = [p for p in load_points() if p.get("lengths") == "lengths/mlperf-deepseek-r1.csv"]
    assert len(points) == 25
    assert all(p.get("scale_gen") for p in points)
    assert {p.get("gen") for p in points} == {3748, 3681, 3684, 3733, 3676}


def test_scale_gen_needs_output_lengths(tmp_path):
    only_inputs = tmp_path / "inputs.csv"
    only_inputs.write_text("input_tokens\n100\n200\n")
    with pytest.raises(UserError, match="no output-token column"):
        xpusim.serve("llama-3.2-1b", "h100-sxm", rate=1.0, requests=10,
                     lengths=str(only_inputs), scale_gen=True)  # fmt: skip


def test_scale_gen_without_lengths_exits_2_with_one_line():
    code = "from xpusim.cli import main; main()"
    done = subprocess.run([sys.executable, "-c", code, "serve", "llama-3.2-1b", "--chip",
                           "h100-sxm", "--rate", "1", "--scale-gen"],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--lengths" in lines[0] and "Traceback" not in done.stderr


def test_a_points_scale_gen_reaches_serve(monkeypatch):
    """The adapter passes the point's `scale_gen` with its lengths file; without the key
    serve reads the file's own outputs."""
    from test_published_serving import _options_served

    from xpusim.validation import adapters

    seen = _options_served(monkeypatch)
    point = next(p for p in load_points() if p.get("scale_gen"))
    adapters._llm_serving(point)
    assert seen[0]["scale_gen"] is True and seen[0]["lengths"].endswith("mlperf-deepseek-r1.csv")
    assert seen[0]["gen"] == point.get("gen")


def test_serve_says_what_mean_the_outputs_were_scaled_to():
    """--gen left at its default with --scale-gen scales a dataset's outputs to 128 tokens: the
    run says which mean it used, so a forgotten --gen is seen rather than silently served."""
    import xpusim

    served = xpusim.serve("llama-3-8b", "h100-sxm", rate=2.0, requests=40, lengths=DSR1,
                          scale_gen=True)  # fmt: skip
    note = next(n for n in served.notes if n.startswith("--scale-gen"))
    assert "mean of --gen 128" in note and DSR1.name in note
