"""How deep `xpusim run` calls before an op's cost formula (issue #42's target: at most 6
frames through at most 5 files, the click command and the formula included), so that a
reader follows one run from the command line to the physics without getting lost."""

from __future__ import annotations

import traceback
from pathlib import Path

from xpusim import cli
from xpusim.cost import roofline
from xpusim.scenarios.llm import engine


def test_run_reaches_the_cost_formula_in_six_frames_through_five_files(monkeypatch, capsys):
    stacks: list[list[traceback.FrameSummary]] = []
    evaluate = roofline.evaluate

    def spy(*args, **kwargs):
        stacks.append(traceback.extract_stack()[:-1])  # up to evaluate's caller
        return evaluate(*args, **kwargs)

    monkeypatch.setattr(roofline, "evaluate", spy)
    monkeypatch.setattr(engine, "evaluate", spy)
    cli.main(["run", "llama-2-7b", "--chip", "h100-sxm", "--json"])
    capsys.readouterr()
    assert stacks, "run never reached roofline.evaluate"
    deepest = []
    for stack in stacks:
        start = max(i for i, f in enumerate(stack)
                    if f.name == "run" and Path(f.filename).name == "cli.py")  # fmt: skip
        # the command's frame down to evaluate's, evaluate itself included
        frames = [*stack[start:], traceback.FrameSummary(roofline.__file__, 0, "evaluate")]
        deepest = max(deepest, frames, key=len)
    names = [f"{Path(f.filename).name}:{f.name}" for f in deepest]
    assert len(deepest) <= 6, names
    assert len({f.filename for f in deepest}) <= 5, names
