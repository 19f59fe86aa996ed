"""The command's contract under generated hostile input (docs/reliability.md).

Every case is a command line, built from the commands' own option declarations (so a new
option is fuzzed without a line here): figures that are infinite, NaN, denormal or absurd,
integers past 64 bits, wrong words, and chip, system and model files mutated field by field,
byte by byte or into another encoding. Each runs through `xpusim.cli.main` in this process and
must end in one of two ways:

- exit 0, nothing on stderr, and with --json exactly one JSON object of finite numbers
  (without, no `nan` or `inf` printed);
- exit 2 and one line on stderr starting `error:`.

Anything else (a traceback, exit 1, a warning, a second line) fails with the command line, so
it can be rerun by hand. CI runs FUZZ_EXAMPLES cases, seeded; `XPUSIM_FUZZ_EXAMPLES=5000`
asks for a long run (`XPUSIM_FUZZ_SEED` another draw), and `XPUSIM_FUZZ_REPORT=cases.jsonl`
keeps every case's outcome
(docs/reliability.md has the last long run's figures).
"""

from __future__ import annotations

import contextlib
import functools
import io
import itertools
import json
import os
import re
import tomllib
import warnings
from pathlib import Path

import click
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from xpusim.cli import cli, main
from xpusim.cli_lists import CommaList, Finite
from xpusim.hardware.catalog import CATALOG_DIR, load_chip
from xpusim.workloads.zoo import ZOO_DIR, model_ids

FUZZ_EXAMPLES = int(os.environ.get("XPUSIM_FUZZ_EXAMPLES", "120"))
FUZZ_SEED = int(os.environ.get("XPUSIM_FUZZ_SEED", "20261201"))
SWEEP_FOLDERS = itertools.count()  # another case's folder would be refused as its results
REPORT = os.environ.get("XPUSIM_FUZZ_REPORT")  # a JSONL file of every case's outcome

COMMANDS = ("run", "compare", "serve", "sweep", "inspect", "sensitivity", "chip")
MODELS = ("llama-2-7b", "mixtral-8x7b", "gpt-j-6b", "dlrm-v2", "meta-lc1", "llama-2-70b")
TARGETS = ("h100-sxm", "mtia-v1", "groq-lpu", "tpu-v4", "apple-m2-ane", "dgx-h100",
           "tpu-v4-pod")  # fmt: skip
SLOW = {"--find", "--mode"}  # fuzzed rarely: a capacity search or training is seconds a case

HOSTILE_NUMBERS = ("inf", "-inf", "nan", "1e-300", "1e300", "0", "-1", "-0.0", "1e309",
                   "99999999999999999999999", "2147483648", "abc", "", "0x10", "1_000")  # fmt: skip
SPECIAL_FILES = ("/dev/zero", "/dev/null", "/proc/self/status", "/tmp")
"""Names that are not regular files: a device that never ends, one that is empty, a /proc
file that reports no size, a folder (a named pipe is added per run: fixture `files`)."""
HOSTILE_WORDS = ("", "x" * 300, "bf17", "../../etc/passwd", "\u00e9\u00e8", "a,b", "--json")


def mostly(ordinary: st.SearchStrategy, hostile: tuple[str, ...]) -> st.SearchStrategy[str]:
    """Mostly ordinary values, so that a case gets past the first check to the next; one in
    five hostile."""
    return st.integers(0, 4).flatmap(
        lambda roll: st.sampled_from(hostile) if roll == 0 else ordinary.map(str))


def numbers(ordinary: st.SearchStrategy) -> st.SearchStrategy[str]:
    return mostly(ordinary, HOSTILE_NUMBERS)


INTS = numbers(st.sampled_from([1, 2, 3, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096]))
FLOATS = numbers(st.sampled_from([1e-3, 0.05, 0.5, 1.0, 2.0, 10.0, 100.0, 1e4]))


def value_for(option: click.Option, files: dict[str, str]) -> st.SearchStrategy[str]:
    """Values of an option's own type, ordinary and hostile."""
    kind = option.type
    if isinstance(kind, CommaList):  # a sweep's list: one to three of the item's values
        item = value_for(click.Option(["--x"], type=kind.item), files)
        return st.lists(item, min_size=1, max_size=3).map(",".join)
    if isinstance(kind, click.Choice):
        return mostly(st.sampled_from(list(kind.choices)), HOSTILE_WORDS)
    if isinstance(kind, click.types.IntParamType):
        return INTS
    if isinstance(kind, Finite | click.types.FloatParamType):
        return FLOATS
    if isinstance(kind, click.Path):
        return st.sampled_from([files["trace"], files["trace"], files["config"], "missing.csv",
                                "/proc/nope", "x" * 5000, files["fifo"],
                                *SPECIAL_FILES])  # fmt: skip
    return st.sampled_from(WORDS.get(option.name, HOSTILE_WORDS))


WORDS = {"find": ["max-rate", "min-chips", "pd-split", "nope"],
         "engine": ["vllm", "vllm-v0", "sglang", "trtllm", "ideal", "nope"],
         "scheduler": ["static", "continuous", "chunked", "nope"],
         "metric": ["latency_s", "tpot_s", "tokens_per_s_per_user", "nope"],
         "input_shapes": ["x=1,2", "x=0", "x"]}  # fmt: skip


@functools.cache
def options_of(command: str, model: str) -> tuple[click.Option, ...]:
    """The command's options that the model takes (a case that types one it does not is
    refused at once, which tests little): the rest of the fuzz goes deeper."""
    from xpusim import api

    try:
        workload = api.model(model)
    except Exception:
        workload = None
    skip = ("as_json", "out", "chip_id", "chip_ids", "sets", "workers", "use_ray",
            "ray_address", "no_plots", "top")  # fmt: skip
    found = []
    for p in cli.get_command(click.Context(cli), command).params:
        if not isinstance(p, click.Option) or p.name in skip:
            continue
        try:
            if workload is not None and command in ("run", "compare", "sensitivity", "sweep"):
                api.check_options(workload, **{p.name: None})
        except Exception:
            continue
        found.append(p)
    return tuple(found)


FIGURES = [(path, f.value) for path, f in load_chip("h100-sxm").figure_items()
           if not isinstance(f.value, bool)] + [("memory.dram.bandwidth_bytes_per_s", 3.35e12),
                                                ("memory.sram.capacity_bytes", 5e7),
                                                ("memory[9].x", 1.0), ("nope", 1.0)]  # fmt: skip


@st.composite
def what_if(draw) -> str:
    """A --set of a real figure: scaled (x0.1 to x10, as a what-if study does) or hostile."""
    path, value = draw(st.sampled_from(FIGURES))
    if path.startswith("efficiency.") and not draw(st.integers(0, 2)):  # the range's edges
        return f"{path}={draw(st.sampled_from(['5e-324', '0.000999', '0.001', '1', '1.01']))}"
    scaled = st.sampled_from([0.1, 0.5, 0.9, 1.1, 2.0, 10.0]).map(lambda k: f"{k * value:g}")
    return f"{path}={draw(st.one_of(scaled, scaled, scaled, FLOATS))}"


def mutated_toml(text: str, draw) -> bytes:
    """A chip or system TOML with one figure, line or encoding broken."""
    how = draw(st.sampled_from(["value", "value", "drop-line", "bytes", "latin-1", "nest"]))
    lines = text.splitlines()
    if how == "value":
        numbered = [i for i, line in enumerate(lines) if re.search(r"value = [-0-9.e+]+", line)]
        i = draw(st.sampled_from(numbered))
        bad = draw(st.sampled_from(["inf", "nan", "1e-300", "1e300", "-5", "0", '"x"', "[]",
                                    "5e-324", "0.001", "0.000999", "1.0000001"]))  # fmt: skip
        lines[i] = re.sub(r"value = [-0-9.e+]+", f"value = {bad}", lines[i], count=1)
    elif how == "drop-line":
        lines.pop(draw(st.integers(0, len(lines) - 1)))
    elif how == "nest":
        lines.append("deep = " + "[" * 5000 + "]" * 5000)
    out = "\n".join(lines)
    if how == "bytes":
        return out.encode()[: draw(st.integers(0, len(out)))] + b"\xff\xfe\x00"
    return out.encode("latin-1", "replace") + (b"\xe9" if how == "latin-1" else b"")


def mutated_config(draw) -> bytes:
    """A transformer config.json with one field wrong, missing or of the wrong type."""
    data = json.loads((ZOO_DIR / "llama-2-7b.json").read_text())
    data.pop("_xpusim")
    key = draw(st.sampled_from([*data, "model_type", "num_local_experts", "head_dim"]))
    how = draw(st.sampled_from(["value", "value", "drop", "bytes", "deep"]))
    if how == "drop":
        data.pop(key, None)
    elif how == "value":
        data[key] = draw(st.sampled_from([None, -1, 0, 1, 7, 10**9, 10**30, 1.5, "x", [],
                                          {"a": 1}, True, 2**63]))  # fmt: skip
    text = json.dumps(data)
    if how == "deep":
        text = text[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    if how == "bytes":
        return text.encode()[: draw(st.integers(0, len(text)))] + b"\xff"
    return text.encode()


@st.composite
def command_lines(draw, files: dict[str, str]) -> list[str]:
    command = draw(st.sampled_from(COMMANDS))
    if command == "chip":
        return ["chip", draw(st.sampled_from([*TARGETS, files["chip"], "nope"])), "--json"]
    zoo = model_ids() if command == "inspect" else MODELS  # every zoo model's IR as JSON
    model = draw(st.sampled_from([*zoo, *MODELS, files["config"], "nope", "x" * 5000,
                                  files["fifo"], *SPECIAL_FILES]))  # fmt: skip
    argv = [command, model]
    if command != "inspect":
        chips = TARGETS if command != "serve" else ("h100-sxm", "mi300x", "dgx-h100", "tpu-v4")
        argv += ["--chip", draw(st.sampled_from([*chips, *chips, files["chip"], "nope",
                                                 files["fifo"], "/dev/zero"]))]  # fmt: skip
    params = {p.opts[0]: p for p in options_of(command, model)}
    chosen = draw(st.lists(st.sampled_from(sorted(params)), max_size=4, unique=True))
    if any(name in SLOW for name in chosen) and draw(st.integers(0, 3)):
        chosen = [name for name in chosen if name not in SLOW]
    for name in chosen:
        option = params[name]
        argv += [name] if option.is_flag else [name, draw(value_for(option, files))]
    if command in ("run", "compare", "sweep", "sensitivity") and not draw(st.integers(0, 2)):
        argv += ["--set", draw(what_if())]
    if command == "serve":  # a serving run of the default 500 requests is seconds
        if "--requests" not in chosen:
            argv += ["--requests", str(draw(st.integers(20, 80)))]
        if not {"--concurrency", "--rate", "--trace"} & set(chosen):
            argv += ["--concurrency", str(draw(st.integers(1, 16)))]
    if command == "sweep":
        folder = f"{files['sweeps']}/{next(SWEEP_FOLDERS)}"  # a fresh one each
        argv += ["--workers", "1", "--no-plots", "--out", folder]
    return [*argv, "--json"] if draw(st.integers(0, 3)) else argv


def run_case(argv: list[str]) -> tuple[int, str, str, list[str]]:
    """(exit status, stdout, stderr, warnings) of `xpusim argv...` in this process."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):  # fmt: skip
        warnings.simplefilter("always")
        try:
            main(argv)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
    return code, out.getvalue(), err.getvalue(), [str(w.message) for w in caught]


def check_contract(argv: list[str]) -> None:
    code, out, err, caught = run_case(argv)
    if REPORT:  # one JSON line per case, for the figures in docs/reliability.md
        with open(REPORT, "a") as f:
            f.write(json.dumps({"argv": argv[:2] + [a[:60] for a in argv[2:]], "code": code,
                                "err": err.strip()[:300], "warnings": caught}) + "\n")
    shown = " ".join(a if len(a) < 80 else a[:20] + "..." for a in argv)
    assert not caught, f"xpusim {shown}: warnings {caught}"
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), f"xpusim {shown}:\n{err}"
        return
    assert code == 0 and not err, f"xpusim {shown}: exit {code}\n{err[-3000:]}"
    if argv[-1] == "--json":  # appended; "--json" as an option's value is not the flag
        json.loads(out, parse_constant=lambda name: pytest.fail(f"{name} in {shown}"))
    else:
        assert not re.search(r"\b(nan|inf)\b", out, re.I), f"xpusim {shown}:\n{out}"


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    """Paths the cases name, rewritten by each case's own draw (see test_contract)."""
    folder = tmp_path_factory.mktemp("fuzz")
    os.mkfifo(folder / "pipe.csv")  # opening it for reading would wait for a writer
    return {"chip": str(folder / "chip.toml"), "config": str(folder / "config.json"),
            "trace": str(folder / "trace.csv"), "sweeps": str(folder / "sweeps"),
            "fifo": str(folder / "pipe.csv")}  # fmt: skip


@seed(FUZZ_SEED)
@settings(max_examples=FUZZ_EXAMPLES, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))  # fmt: skip
@given(data=st.data())
def test_contract(files, data):
    chip_text = (CATALOG_DIR / f"{data.draw(st.sampled_from(['h100-sxm', 'tpu-v4']))}.toml")
    Path(files["chip"]).write_bytes(mutated_toml(chip_text.read_text(), data.draw))
    Path(files["config"]).write_bytes(mutated_config(data.draw))
    Path(files["trace"]).write_bytes(data.draw(st.sampled_from([
        b"arrival_s,prompt,gen\n0,100,10\n0.5,200,20\n", b"arrival_s,prompt\n0,inf\n",
        b"\xff\xfe", b"timestamp,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,5,5\n",
        b"prompt,gen\n1e30,1\n", b""])))  # fmt: skip
    check_contract(data.draw(command_lines(files)))


def test_mutated_files_parse_or_refuse_in_one_line(tmp_path):
    """Every mutation kind of the fuzz above, once each, deterministically."""
    assert tomllib.loads((CATALOG_DIR / "h100-sxm.toml").read_text())  # the seed is valid
    chip = tmp_path / "chip.toml"
    for text in ("tdp_w = { value = inf, source = 'x' }", "\xff", "a = " + "[" * 5000):
        chip.write_bytes(text.encode("latin-1", "replace"))
        check_contract(["run", "llama-2-7b", "--chip", str(chip)])
