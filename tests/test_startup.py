"""What `xpusim --help` and `xpusim run` import: only what they use (issue: start-up).

Each runs in a fresh interpreter; the modules it ends with are compared with the heavy
extras (which must never load for a run) and with the scenarios an LLM run does not use.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("torch", "onnx", "matplotlib", "pyarrow", "ray", "transformers", "onnxscript", "fastapi",
         "uvicorn", "starlette")
OTHER_SCENARIOS = ("xpusim.scenarios.recsys", "xpusim.scenarios.training",
                   "xpusim.scenarios.graph_inference", "xpusim.explore", "xpusim.validation",
                   "xpusim.serving", "xpusim.cli_serve", "xpusim.cli_sweep",
                   "xpusim.planning", "xpusim.cli_plan",
                   "xpusim.workloads.cnn", "xpusim.workloads.dlrm_config",
                   "xpusim.workloads.imported")  # fmt: skip


def _modules_after(*argv: str) -> set[str]:
    code = (
        "import json, sys\n"
        "from xpusim.cli import main\n"
        f"sys.argv = ['xpusim', *{list(argv)!r}]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)  # fmt: skip
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


@pytest.mark.parametrize("argv", [("--help",), ("run", "llama-2-7b", "--chip", "h100-sxm")])
def test_no_heavy_extra_is_imported(argv):
    loaded = _modules_after(*argv)
    assert not [m for m in loaded if m.split(".")[0] in HEAVY]


def test_help_imports_no_simulator():
    loaded = _modules_after("--help")
    assert not {"numpy", "pydantic", "xpusim.api"} & loaded


def test_an_llm_run_loads_no_other_scenario():
    """Nor the commands whose options are generated at import (serve, sweep: cli.py's
    _Commands), nor the other workloads' configs."""
    loaded = _modules_after("run", "llama-2-7b", "--chip", "h100-sxm")
    assert "xpusim.scenarios.llm.inference" in loaded
    # the engine profiles are data run shares with serve: its prefill chunk (chunking.py)
    shared = {"xpusim.serving", "xpusim.serving.engines"}
    assert not [m for m in loaded - shared if m.startswith(OTHER_SCENARIOS)]


def test_the_commands_imported_when_named_are_listed_and_run():
    done = subprocess.run([sys.executable, "-m", "xpusim", "--help"], capture_output=True,
                          text=True, check=True)  # fmt: skip
    assert {"plan", "serve", "sweep", "run"} <= {line.split()[0] for line in
                                         done.stdout.split("Commands:")[1].splitlines()
                                         if line.strip()}  # fmt: skip
    for command in ("plan", "serve", "sweep"):
        done = subprocess.run([sys.executable, "-m", "xpusim", command, "--help"],
                              capture_output=True, text=True, check=True)  # fmt: skip
        assert done.stdout.startswith(f"Usage: xpusim {command} [OPTIONS] MODEL")


def test_an_llm_run_imports_no_masked_arrays():
    """numpy.ma is imported by np.unique's first call without return_index (numpy 2.4):
    10-26 ms of every `xpusim run`, and of every sweep worker's first chunk, measured
    2026-12-03; the simulator finds distinct values otherwise."""
    assert "numpy.ma" not in _modules_after("run", "llama-2-70b", "--chip", "h100-sxm",
                                            "--chips", "8")  # fmt: skip
