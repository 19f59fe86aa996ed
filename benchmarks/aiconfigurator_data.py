"""Reading aiconfigurator's measured kernel database (ai-dynamo/aiconfigurator, Apache-2.0)
from a git clone or bare mirror, for the scripts that write xpusim's kernel tables from it
(moe_kernel_tables.py, decode_attention_tables.py, mla_decode_tables.py), and the TOML
tables and command line they share.

The project reads only the TOML those scripts write; this needs git and pyarrow (the `parquet`
extra). Every table records the commit and path it came from, so it can be regenerated and
checked.
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
from pathlib import Path

COMMIT = "095f58a51c4ca8e61b66ec108d86f223f8d559ce"
"""The mirror commit the project's tables were written from."""
DATA = "aic-core/src/aiconfigurator_core/systems/data"
URL = "https://github.com/ai-dynamo/aiconfigurator/blob/{commit}/{path}"


def _git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True,
                          text=True).stdout.strip()  # fmt: skip


def full_commit(repo: str, commit: str) -> str:
    return _git(repo, "rev-parse", commit)


def last_change(repo: str, commit: str, path: str) -> str:
    """The date (YYYY-MM-DD) the file last changed at or before `commit`."""
    return _git(repo, "log", "-1", "--format=%cs", commit, "--", path)


def read_parquet(repo: str, commit: str, path: str) -> dict[str, list]:
    import pyarrow.parquet as pq

    blob = subprocess.run(["git", "-C", repo, "show", f"{commit}:{path}"], check=True,
                          capture_output=True).stdout  # fmt: skip
    return pq.read_table(io.BytesIO(blob)).to_pydict()


def arguments(doc: str, out: Path) -> argparse.ArgumentParser:
    """The scripts' command line: the mirror, the commit to read it at, the file to write."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("repo", help="a git clone or bare mirror of ai-dynamo/aiconfigurator")
    parser.add_argument("--commit", default=COMMIT)
    parser.add_argument("--out", type=Path, default=out)
    return parser


def table_toml(name: str, kind: str, dtype: str, scope: str, chip_id: str, version: str,
               source: str, path: str, commit: str, date: str, conditions: str,
               rows: list[list], engine: tuple[str, str] = ("trtllm", "TensorRT-LLM"),
               ) -> str:  # fmt: skip
    """One `[[table]]` of cost/kernel_tables/*.toml: measured on `chip_id` alone, by
    `engine` (its key and name) `version`, each row's last value in microseconds."""
    lines = [
        "[[table]]",
        f'name = "{name}"',
        f'kind = "{kind}"',
        f'dtype = "{dtype}"',
        f'scope = "{scope}"',
        f'measured_on = "{chip_id}"',
        f'chips = ["{chip_id}"]',
        f'engine = "{engine[0]}"',
        f'engine_version = "{engine[1]} {version}"',
        f'source = "ai-dynamo/aiconfigurator {path} at {commit[:7]} ({source})"',
        f'url = "{URL.format(commit=commit, path=path)}"',
        f'date = "{date}"',
        f'conditions = "{conditions}"',
        "rows = [",
        *(f"  [{', '.join(str(v) for v in r[:-1])}, {r[-1]:.4g}]," for r in rows),
        "]",
    ]
    return "\n".join(lines) + "\n"


def write(out: Path, parts: list[str]) -> None:
    """The TOML file, its comment header and tables in order."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(parts))
    print(f"wrote {out}", file=sys.stderr)
