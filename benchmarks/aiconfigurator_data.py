"""Reading aiconfigurator's measured kernel database (ai-dynamo/aiconfigurator, Apache-2.0)
from a git clone or bare mirror, for the scripts that write xpusim's kernel tables from it
(moe_kernel_tables.py, decode_attention_tables.py).

The project reads only the TOML those scripts write; this needs git and pyarrow (the `parquet`
extra). Every table records the commit and path it came from, so it can be regenerated and
checked.
"""

from __future__ import annotations

import argparse
import io
import subprocess
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


def table_toml(fields: dict[str, str], rows: list[str]) -> str:
    """One `[[table]]` of a kernel-table TOML (cost/kernel_tables.py): `fields` in order
    (name, kind, dtype, scope, measured_on, engine, engine_version, source, url, date,
    conditions; `chips` is measured_on alone), each a string, then the formatted rows."""
    lines = ["[[table]]"]
    for key, value in fields.items():
        lines.append(f'{key} = "{value}"')
        if key == "measured_on":
            lines.append(f'chips = ["{value}"]')
    return "\n".join([*lines, "rows = [", *(f"  {row}," for row in rows), "]"]) + "\n"


def arguments(doc: str, out: Path) -> argparse.ArgumentParser:
    """The regeneration scripts' command line: the mirror, its commit, where to write."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("repo", help="a git clone or bare mirror of ai-dynamo/aiconfigurator")
    parser.add_argument("--commit", default=COMMIT)
    parser.add_argument("--out", type=Path, default=out)
    return parser
