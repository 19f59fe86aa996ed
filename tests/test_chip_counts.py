"""`--chip ID:N` on every command, and a comparison where one chip cannot run the point."""

from __future__ import annotations

import csv
import json

from cli_run import refused, run_cli

import xpusim


def test_run_takes_a_count_with_the_chip(capsys):
    code, out, err = run_cli(capsys, "run", "llama-2-70b", "--chip", "h100-sxm:8", "--json")
    assert code == 0, err
    assert json.loads(out)["chips"] == 8


def test_compare_gives_each_chip_its_own_count(capsys):
    code, out, err = run_cli(capsys, "compare", "llama-2-70b", "--chip", "h100-sxm:8",
                             "--chip", "mi300x:2", "--json")  # fmt: skip
    assert code == 0, err
    assert [r["chips"] for r in json.loads(out)["results"]] == [8, 2]


def test_serve_and_sensitivity_take_a_count(capsys):
    code, out, err = run_cli(capsys, "serve", "llama-2-7b", "--chip", "h100-sxm:2",
                             "--concurrency", "2", "--requests", "10", "--json")  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["chips"] == 2
    code, out, err = run_cli(capsys, "sensitivity", "llama-2-7b", "--chip", "h100-sxm:2",
                             "--json")  # fmt: skip
    assert code == 0, err


def test_a_count_given_twice_differently_is_refused(capsys):
    err = refused(capsys, "run", "llama-2-7b", "--chip", "h100-sxm:2", "--chips", "4")
    assert "--chip h100-sxm:2 and --chips 4" in err
    assert "--chip" in refused(capsys, "run", "llama-2-7b", "--chip", "h100-sxm:0")


def test_a_mistyped_count_is_named_as_the_count(capsys):
    """`h100-sxm:-2` read as an unknown chip 'h100-sxm:-2' ('did you mean h100-sxm?')."""
    for count in ("-2", "x", "2.5", ""):
        for command in ("run", "compare"):
            err = refused(capsys, command, "llama-2-7b", "--chip", f"h100-sxm:{count}")
            assert "expected ID:N with N a count of chips" in err, err


def test_sweep_gives_each_chip_its_own_count_as_compare_does(capsys, tmp_path):
    """`--chip h100-sxm:1 --chip mi300x:4` was refused ('the same N on every chip'): each
    chip's points run at its own count, a chip named twice at both, one without a count at
    --chips' (here none: one chip); a --chips list beside a different N is refused, and so
    is a chip named both with and without a count."""

    def counts(*chips: str, name: str) -> set[tuple[str, str]]:
        argv = [a for c in chips for a in ("--chip", c)]
        code, _, err = run_cli(capsys, "sweep", "llama-2-7b", *argv, "--batch", "1,2",
                               "--no-plots", "--workers", "1", "--out", str(tmp_path / name),
                               "--json")  # fmt: skip
        assert code == 0, err
        with open(tmp_path / name / "results.csv") as f:
            return {(row["target"], row["chips"]) for row in csv.DictReader(f)}

    assert counts("h100-sxm:1", "mi300x:4", name="a") == {("h100-sxm", "1"), ("mi300x", "4")}
    assert counts("h100-sxm:1", "h100-sxm:2", "mi300x", name="b") == {
        ("h100-sxm", "1"), ("h100-sxm", "2"), ("mi300x", "1")}
    err = refused(capsys, "sweep", "llama-2-7b", "--chip", "h100-sxm:2", "--chips", "1,4",
                  "--out", str(tmp_path / "c"))  # fmt: skip
    assert "--chip h100-sxm:2 and --chips 1,4 disagree" in err
    # the plain one's points were dropped: h100-sxm at --chips' count never ran
    err = refused(capsys, "sweep", "llama-2-7b", "--chip", "h100-sxm", "--chip", "h100-sxm:2",
                  "--out", str(tmp_path / "d"))  # fmt: skip
    assert "--chip h100-sxm and --chip h100-sxm:2 disagree" in err


def test_a_chip_that_cannot_run_the_point_gets_a_row_and_the_rest_stand(capsys):
    args = ["compare", "llama-2-7b", "--chip", "h100-sxm", "--chip", "tpu-v4", "--chip",
            "mi300x", "--precision", "fp8"]  # fmt: skip
    code, out, err = run_cli(capsys, *args, "--wide")
    assert code == 0, err
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if "│" in line}
    assert {"h100-sxm", "tpu-v4", "mi300x"} <= set(rows)
    assert "no: see note" in rows["tpu-v4"] and "ms" in rows["mi300x"]
    assert "note: tpu-v4: --precision fp8: tpu-v4 has no fp8" in out
    code, out, err = run_cli(capsys, *args, "--json")
    found = json.loads(out)["results"]
    assert "error" in found[1] and found[2]["fits"]


def test_a_comparison_no_chip_can_run_is_one_line(capsys):
    err = refused(capsys, "compare", "llama-2-7b", "--chip", "tpu-v4", "--precision", "fp8")
    assert "tpu-v4 has no fp8" in err


def test_a_plan_without_a_count_takes_its_chips(capsys):
    """`--tp 8` on a bare chip id is eight chips, as an engine's --tensor-parallel-size is
    (it was refused: "plan tp 8 ... = 8 chips, but --chips is 1", a count never given)."""
    for command in (("run",), ("serve", "--concurrency", "2", "--requests", "4"),
                    ("run", "--mode", "training", "--batch", "8")):  # fmt: skip
        code, out, err = run_cli(capsys, *command, "llama-2-70b", "--chip", "h100-sxm",
                                 "--tp", "4", "--pp", "2", "--json")  # fmt: skip
        assert code == 0, err
        assert json.loads(out)["chips"] == 8
        assert json.loads(out)["plan"]["tp"] == 4
    code, out, err = run_cli(capsys, "run", "llama-2-70b", "--chip", "h100-sxm", "--chips",
                             "2", "--tp", "4")  # fmt: skip
    assert code == 2 and "--chips is 2" in err  # a count given still binds


def test_a_chip_written_as_its_makers_shorthand_is_found(capsys):
    """`--chip h200` and `--chip H100:8` name the one catalog chip they can mean (`h200` was
    refused, its first suggestion b200); a shorthand several ids share is still refused."""
    for chip, found in (("h200", "h200-sxm"), ("H100:8", "h100-sxm"), ("H200-SXM", "h200-sxm"),
                        ("a100", "a100-sxm-80gb")):  # fmt: skip
        code, out, err = run_cli(capsys, "run", "llama-2-7b", "--chip", chip, "--json")
        assert code == 0, err
        assert json.loads(out)["chip"] == found
    assert "trn2-instance" in refused(capsys, "run", "llama-2-7b", "--chip", "trn2")


def test_a_shorthand_is_the_same_chip_everywhere_a_chip_is_named(capsys):
    """`xpusim chip h100` shows h100-sxm as `--chip h100` runs it; plan's table, prices and
    launch name the id, so `--chip H100 --chip h100-sxm` is one chip, not two rows; a
    refusal suggests by the lower-case name (`TRN2` had no suggestion at all)."""
    code, out, err = run_cli(capsys, "chip", "h100", "--json")
    assert code == 0, err
    assert json.loads(out)["id"] == "h100-sxm"
    code, out, err = run_cli(capsys, "plan", "llama-2-7b", "--chip", "H100", "--chip",
                             "h100-sxm", "--chips", "1", "--rate", "1", "--requests", "40",
                             "--slo-ttft-ms", "2000", "--slo-tpot-ms", "100", "--json")  # fmt: skip
    assert code == 0, err
    assert [c["chip"] for c in json.loads(out)["chips"]] == ["h100-sxm"]
    assert "trn2-instance" in refused(capsys, "run", "llama-2-7b", "--chip", "TRN2")
    assert "expected ID:N" in refused(capsys, "run", "llama-2-7b", "--chip", "h100:x")


def test_sensitivity_changes_the_links_of_a_plans_own_chip_count():
    """`sensitivity --tp 8` on a bare chip is eight chips (hardware/system.plan_chips), so its
    links are a system's and can change, as with `--chips 8` given (they were a lone chip's,
    whose doubled links moved nothing)."""
    from xpusim.explore.sensitivity import sensitivity

    def links(**options):
        s = sensitivity(xpusim.model("llama-2-70b"), xpusim.target("h100-sxm"), tp=8,
                        **options)  # fmt: skip
        return next(g.value for g in s.changes if g.change.startswith("chip-to-chip links"))

    assert links() == links(chips=8)
