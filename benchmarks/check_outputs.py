"""Byte-identity check for refactors: every user-visible output of a fixed set of commands.

A restructuring that must not change a number runs this twice: once on the commit before it
(`capture`), once after (`diff`), and the two folders must match byte for byte.

    python benchmarks/check_outputs.py capture /tmp/base          # on the old tree
    python benchmarks/check_outputs.py diff /tmp/base             # on the new tree: 1 on a change
    python benchmarks/check_outputs.py diff /tmp/base --validate  # also `validate --json` (minutes)

The cases cover dense, GQA, MLA, MoE, windowed and SSM models; H100, H200, A100, MI300X,
TPU v4, Groq (many chips) and MTIA v1; TP/PP/EP plans and plan searches; speculative
decoding, beams, training, `--ops` and the tables; `compare`; two small sweeps (one in this
process, one over worker processes, so that unpickled chips are exercised) with their CSV,
Parquet and JSON summary; `serve` under open and closed loops. Each command runs in a fresh
process, as a user runs it. `validate` is opt-in: it takes minutes of CPU.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

RUNS: dict[str, list[str]] = {
    "run-dense-h100-ops": ["run", "llama-2-7b", "--chip", "h100-sxm", "--json", "--ops"],
    "run-dense-h100-table": ["run", "llama-2-7b", "--chip", "h100-sxm", "--ops"],
    "run-gqa-tpuv4": ["run", "llama-3-8b", "--chip", "tpu-v4", "--batch", "8", "--prompt", "512",
                      "--gen", "64", "--json"],
    "run-mla-moe-h200": ["run", "deepseek-v2-lite", "--chip", "h200-sxm", "--batch", "4", "--json"],
    "run-moe-ep": ["run", "mixtral-8x7b", "--chip", "h100-sxm", "--chips", "8", "--tp", "2",
                   "--ep", "4", "--json"],
    "run-windowed-mtia-int8": ["run", "gemma-2-2b", "--chip", "mtia-v1", "--precision", "int8",
                               "--json", "--ops"],
    "run-windowed-mi300x-long": ["run", "mistral-7b-v0.1", "--chip", "mi300x", "--prompt", "8192",
                                 "--json"],
    "run-ssm-a100": ["run", "mamba-130m", "--chip", "a100-sxm-80gb", "--batch", "16", "--json"],
    "run-groq-search": ["run", "llama-2-70b", "--chip", "groq-lpu", "--chips", "576", "--json"],
    "run-tp-pp": ["run", "llama-2-70b", "--chip", "h100-sxm", "--chips", "8", "--tp", "4", "--pp",
                  "2", "--json"],
    "run-throughput-search": ["run", "llama-2-70b", "--chip", "h100-sxm", "--chips", "8",
                              "--objective", "throughput", "--batch", "32", "--json"],
    "run-speculative": ["run", "llama-3-8b", "--chip", "h100-sxm", "--speculative", "llama-3.2-1b",
                        "--acceptance", "0.7", "--json"],
    "run-beams": ["run", "gpt-j-6b", "--chip", "a100-sxm-80gb", "--beams", "4", "--json"],
    "run-int4-mtia": ["run", "llama-2-7b", "--chip", "mtia-v1", "--weight-precision", "int4",
                      "--batch", "4", "--json"],
    "run-whatif-overlap": ["run", "llama-2-13b", "--chip", "h100-sxm", "--chips", "2",
                           "--tp", "2", "--overlap", "--set",
                           "memory.dram.bandwidth_bytes_per_s=4e12", "--json"],
    "run-training": ["run", "llama-3-8b", "--chip", "h100-sxm", "--chips", "8", "--mode",
                     "training", "--json"],
    "run-no-fit": ["run", "llama-2-70b", "--chip", "mtia-v1", "--json"],
    "run-recsys": ["run", "dlrm-v2", "--chip", "mtia-v1", "--chips", "8", "--batch", "512",
                   "--json"],
    "compare-json": ["compare", "llama-2-7b", "--chip", "h100-sxm", "--chip", "tpu-v4", "--chip",
                     "mtia-v1", "--batch", "4", "--json"],
    "compare-table": ["compare", "llama-2-7b", "llama-3-8b", "--chip", "h100-sxm", "--chip",
                      "tpu-v4"],
    "serve-rate": ["serve", "llama-3-8b", "--chip", "h100-sxm", "--rate", "5", "--requests", "200",
                   "--spread", "0.5", "--json"],
    "serve-chunked-vllm": ["serve", "llama-2-7b", "--chip", "a100-sxm-80gb", "--concurrency", "16",
                           "--requests", "150", "--scheduler", "chunked", "--engine", "vllm",
                           "--json"],
    "serve-tp-table": ["serve", "llama-2-70b", "--chip", "h100-sxm", "--chips", "4", "--rate", "2",
                       "--requests", "100"],
}

SWEEPS: dict[str, list[str]] = {
    "sweep-shapes": ["sweep", "llama-2-7b", "--chip", "h100-sxm", "--chip", "tpu-v4", "--batch",
                     "1,4,16", "--prompt", "128,1024", "--gen", "64", "--precision", "bf16,int8",
                     "--workers", "1"],
    "sweep-systems": ["sweep", "llama-2-70b", "--chip", "h100-sxm", "--chips", "4,8", "--batch",
                      "1,8", "--set", "memory.dram.bandwidth_bytes_per_s=2e12,4e12", "--workers",
                      "2"],
}

VALIDATE = ["validate", "--json"]


def _xpusim(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    """One command in a fresh process, on this checkout's sources, as a user runs it."""
    src = Path(__file__).resolve().parent.parent / "src"
    env = dict(os.environ, PYTHONPATH=str(src), COLUMNS="160", NO_COLOR="1")
    return subprocess.run([sys.executable, "-m", "xpusim", *argv], cwd=cwd, env=env,
                          capture_output=True, check=False)


_TIMINGS = re.compile(rb'"(simulate_s|simulate_cpu_s|search_s)": [0-9.e+-]+')


def _write(folder: Path, name: str, done: subprocess.CompletedProcess[bytes], work: Path) -> None:
    """The output less what differs between two runs of one tree: the scratch folder and the
    wall and CPU times of the plan search and the sweep."""
    stdout = _TIMINGS.sub(rb'"\1": "<timing>"', done.stdout)
    (folder / f"{name}.out").write_bytes(stdout.replace(str(work).encode(), b"<work>"))
    (folder / f"{name}.rc").write_text(f"{done.returncode}\n{done.stderr.decode(errors='replace')}")


def capture(folder: Path, validate: bool) -> None:
    """Write every case's stdout, exit status and stderr (and the sweeps' files) to `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        for name, argv in RUNS.items():
            _write(folder, name, _xpusim(argv, work), work)
        for name, argv in SWEEPS.items():
            out = work / name
            done = _xpusim([*argv, "--out", str(out), "--no-plots", "--json"], work)
            _write(folder, name, done, work)
            for produced in ("results.csv", "results.parquet"):
                if (out / produced).exists():
                    shutil.copyfile(out / produced, folder / f"{name}.{produced}")
        if validate:
            _write(folder, "validate", _xpusim([*VALIDATE, "--out", str(work / "v")], work), work)
            shutil.copyfile(work / "v" / "validation.md", folder / "validate.md")


def _differences(base: Path, new: Path) -> list[str]:
    lines = []
    for old in sorted(base.iterdir()):
        fresh = new / old.name
        if not fresh.exists():
            if not old.name.startswith("validate"):  # validate is opt-in
                lines.append(f"missing: {old.name}")
            continue
        a, b = old.read_bytes(), fresh.read_bytes()
        if a == b:
            continue
        lines.append(f"differs: {old.name}")
        if old.suffix != ".parquet":
            diff = difflib.unified_diff(a.decode(errors="replace").splitlines(),
                                        b.decode(errors="replace").splitlines(), lineterm="", n=1)
            lines.extend(f"    {line}" for line in list(diff)[2:22])
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("capture", "diff"))
    parser.add_argument("folder", type=Path, help="capture: where to write; diff: the baseline")
    parser.add_argument("--validate", action="store_true", help="also `validate --json` (slow)")
    args = parser.parse_args()
    if args.mode == "capture":
        capture(args.folder, args.validate)
        print(f"captured {len(list(args.folder.iterdir()))} files in {args.folder}")
        return 0
    with tempfile.TemporaryDirectory() as fresh:
        capture(Path(fresh), args.validate)
        lines = _differences(args.folder, Path(fresh))
    print("\n".join(lines) if lines else f"identical to {args.folder}")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
