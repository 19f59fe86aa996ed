"""benchmarks/validation_tables.py: the docs' accuracy tables come from `validate --json`.

The generator runs on a small fixture (its figures checked by hand), and docs/validation.md
holds a block in the generator's format (not that its numbers match a live run: that takes
the full validation, minutes of CPU)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))
try:
    import validation_tables as vt
finally:
    sys.path.remove(str(BENCH))


def _point(id_: str, workload: str, metric: str, ratio: float, chip: str = "h200-sxm",
           gap: str = "") -> dict:  # fmt: skip
    return {"id": id_, "chip": chip, "workload": workload, "metric": metric, "measured": 1.0,
            "predicted": ratio, "ape": abs(ratio - 1), "ratio": ratio, "bottleneck": "memory",
            "detail": "", "source": "s", "notes": "", "known_gap": gap}  # fmt: skip


def _run(points: list[dict]) -> dict:
    errors = sorted(p["ape"] for p in points)
    return {"points": points, "skipped": [], "n_points": len(points), "n_skipped": 1,
            "median_ape": errors[len(errors) // 2], "mean_ape": sum(errors) / len(errors)}


FIXTURE = _run([
    _point("dstack-dsr1-h200-sglang-c4-ttft", "llm-serving", "ttft_s", 0.1, gap="early | engine"),
    _point("dstack-dsr1-h200-sglang-c8-ttft", "llm-serving", "ttft_s", 0.2),
    _point("dstack-dsr1-mi300x-vllm-c4-ttft", "llm-serving", "ttft_s", 0.95, chip="mi300x"),
    _point("mlperf51-amd-mi325x8-llama-2-70b-server-tok", "llm-serving", "output_tokens_per_s",
           1.10, chip="mi325x"),
    _point("mlperf30-a100-resnet50-offline", "cnn-inference", "samples_per_s", 0.8),
    _point("trt09-h100-l2-7b-fp8-b64", "llm-inference", "tokens_per_s_per_chip", 1.3),
])  # fmt: skip


def test_groups_give_count_median_ratio_share_within_15_and_worst():
    block = vt.render(FIXTURE)
    # three dstack TTFTs: errors 90%, 80%, 5%; ratios 0.1, 0.2, 0.95
    assert ("| dstack DeepSeek-R1 (Feb 2025 engines) · ttft_s | 3 | 80.0% | 0.20 | 33% | "
            "dstack-dsr1-h200-sglang-c4-ttft (0.10) |") in block  # fmt: skip
    assert "| mi300x · ttft_s | 1 | 5.0% | 0.95 | 100% |" in block
    assert "| MLPerf v5.1 (AMD) · output_tokens_per_s | 1 | 10.0% | 1.10 | 100% |" in block
    assert "| MLPerf v3.0 (NVIDIA) · cnn-inference | 1 | 20.0% |" in block
    assert "| llm-serving ttft_s | 3 | 80.0% |" in block and "| all | 6 | " in block
    # worst first; a stated gap's pipe cannot break the table
    worst = [line for line in block.splitlines() if re.match(r"\| \d+ \| ", line)]
    assert worst[0].startswith("| 1 | dstack-dsr1-h200-sglang-c4-ttft |")
    assert worst[0].endswith("| 90% | early / engine |") and len(worst) == 6


def test_before_column_says_old_to_new_and_new_groups():
    old = _run([_point("dstack-dsr1-h200-sglang-c4-ttft", "llm-serving", "ttft_s", 0.5)])
    block = vt.render(FIXTURE, before=old)
    assert "| h200-sxm · ttft_s | 2 | 50.0% (n=1) -> 85.0% |" in block
    assert "| mi300x · ttft_s | 1 | new -> 5.0% |" in block
    assert "(before: 50.0% over 1)" in block


def test_every_table_row_has_its_header_columns():
    for line_set in _tables(vt.render(FIXTURE)):
        assert {line.count("|") for line in line_set} == {line_set[0].count("|")}


def test_the_page_is_rewritten_between_the_markers_only(tmp_path):
    page = tmp_path / "v.md"
    page.write_text(f"intro\n{vt.BEGIN}\nstale\n{vt.END}\nprose kept\n")
    fixture = tmp_path / "run.json"
    fixture.write_text(json.dumps(FIXTURE))
    assert vt.main([str(fixture), "--docs", str(page)]) == 0
    text = page.read_text()
    assert text.startswith(f"intro\n{vt.BEGIN}\n6 points scored") and "stale" not in text
    assert text.endswith(f"{vt.END}\nprose kept\n")
    assert vt.main([str(fixture), "--docs", str(page)]) == 0 and page.read_text() == text


@pytest.mark.parametrize("content, says", [
    (None, "cannot be read"),
    ("{not json", "not JSON"),
    ('{"points": []}', "not the output of `xpusim validate --json`"),
])  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, content, says):
    run = tmp_path / "run.json"
    if content is not None:
        run.write_text(content)
    page = tmp_path / "v.md"
    page.write_text(f"{vt.BEGIN}\nkept\n{vt.END}\n")
    assert vt.main([str(run), "--docs", str(page)]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1 and "kept" in page.read_text()


def test_a_page_without_its_markers_is_refused(tmp_path, capsys):
    fixture = tmp_path / "run.json"
    fixture.write_text(json.dumps(FIXTURE))
    page = tmp_path / "v.md"
    page.write_text("no markers\n")
    assert vt.main([str(fixture), "--docs", str(page)]) == 2
    assert "validation-tables:begin" in capsys.readouterr().err
    assert page.read_text() == "no markers\n"


def _tables(block: str) -> list[list[str]]:
    """The Markdown tables of a block, each as its lines."""
    tables: list[list[str]] = []
    current: list[str] = []
    for line in [*block.splitlines(), ""]:
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    return tables


def test_docs_hold_the_generators_tables():
    """docs/validation.md's block is what the generator writes: the same headline sentence,
    the same tables in the same order with the same headers, and rows that fit them."""
    docs = vt.block_of(vt.DOCS.read_text())
    fixture = vt.render(FIXTURE)
    assert re.match(r"\d+ points scored, \d+ skipped; median absolute error \*\*[\d.]+%\*\*",
                    docs)  # fmt: skip
    ours, theirs = _tables(fixture), _tables(docs)
    strip = re.compile(r" \(before -> now\)")  # --before adds only that to a header
    assert [strip.sub("", t[0]) for t in theirs] == [t[0] for t in ours]
    assert [t[1] for t in theirs] == [t[1] for t in ours]
    for table in theirs:
        assert {line.count("|") for line in table} == {table[0].count("|")}
    assert len(theirs[-1]) == 2 + vt.WORST
    prose = [line for line in docs.splitlines() if line and not line.startswith("|")]
    assert prose[1:] == [line for line in fixture.splitlines()
                         if line and not line.startswith("|")][1:]  # fmt: skip
