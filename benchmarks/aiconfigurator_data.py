"""What the scripts that write xpusim's kernel tables share: reading a pinned commit of a git
clone or bare mirror, their command line, and the TOML they write (a comment header, then
`[[table]]`s, each with the source it was read from). Most read aiconfigurator's measured
kernel database (ai-dynamo/aiconfigurator, Apache-2.0: gemm_kernel_tables.py,
moe_kernel_tables.py, decode_attention_tables.py, mla_decode_tables.py,
prefill_attention_tables.py, collective_tables.py, ep_alltoall_tables.py), through `Mirror`;
amd_kernel_tables.py reads AMD's AITER CSVs through `git` and writes with `toml_table`.

The project reads only the TOML those scripts write; this needs git and pyarrow (the `parquet`
extra). Every table records the commit and path it came from, so it can be regenerated and
checked.
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

KERNEL_TABLES = Path(__file__).resolve().parent.parent / "src/xpusim/cost/kernel_tables"
"""Where the tables go (cost/kernel_tables.py reads them)."""
COMMIT = "095f58a51c4ca8e61b66ec108d86f223f8d559ce"
"""The mirror commit the project's tables were written from."""
DATA = "aic-core/src/aiconfigurator_core/systems/data"
URL = "https://github.com/ai-dynamo/aiconfigurator/blob/{commit}/{path}"


def git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True,
                          text=True).stdout.strip()  # fmt: skip


def full_commit(repo: str, commit: str) -> str:
    return git(repo, "rev-parse", commit)


def last_change(repo: str, commit: str, path: str) -> str:
    """The date (YYYY-MM-DD) the file last changed at or before `commit`."""
    return git(repo, "log", "-1", "--format=%cs", commit, "--", path)


def read_parquet(repo: str, commit: str, path: str) -> dict[str, list]:
    import pyarrow.parquet as pq

    blob = subprocess.run(["git", "-C", repo, "show", f"{commit}:{path}"], check=True,
                          capture_output=True).stdout  # fmt: skip
    return pq.read_table(io.BytesIO(blob)).to_pydict()


@dataclass(frozen=True)
class Measured:
    """One file of aiconfigurator's database as read at a commit: its columns, and where it
    was read (what every table written from it records)."""

    columns: dict[str, list]
    path: str
    commit: str
    date: str  # YYYY-MM-DD, the file's last change at or before `commit`

    def records(self) -> list[dict]:
        """The rows, each a dict of its columns."""
        return [dict(zip(self.columns, values, strict=True))
                for values in zip(*self.columns.values(), strict=True)]  # fmt: skip

    def provenance(self, rows: str = "") -> dict[str, str]:
        """A table's source, url and date fields; `rows`: which of the file's rows it keeps."""
        source = f"ai-dynamo/aiconfigurator {self.path} at {self.commit[:7]}"
        return {"source": source + (f" ({rows})" if rows else ""),
                "url": URL.format(commit=self.commit, path=self.path), "date": self.date}


@dataclass(frozen=True)
class Mirror:
    """A git clone or bare mirror of aiconfigurator at one (full) commit."""

    repo: str
    commit: str

    @classmethod
    def of(cls, args: argparse.Namespace) -> Mirror:
        """The mirror and commit the command line (`arguments`) names."""
        try:
            return cls(args.repo, full_commit(args.repo, args.commit))
        except subprocess.CalledProcessError:  # one line, exit status 2, as bad input gets
            print(f"error: {args.repo!r} is not a git mirror of aiconfigurator holding commit "
                  f"{args.commit!r}", file=sys.stderr)  # fmt: skip
            raise SystemExit(2) from None

    def read(self, path: str) -> Measured:
        """The parquet file at `path` under the database's DATA folder
        (<chip>/<op>/<engine>/<version>/<name>.parquet)."""
        path = f"{DATA}/{path}"
        return Measured(read_parquet(self.repo, self.commit, path), path, self.commit,
                        last_change(self.repo, self.commit, path))  # fmt: skip


def arguments(doc: str, out: Path) -> argparse.ArgumentParser:
    """The scripts' command line: the mirror, the commit to read it at, the file to write."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("repo", help="a git clone or bare mirror of ai-dynamo/aiconfigurator")
    parser.add_argument("--commit", default=COMMIT)
    parser.add_argument("--out", type=Path, default=out)
    return parser


def toml_table(fields: dict[str, str | int | list[str]], rows: list[str]) -> str:
    """One `[[table]]`: its fields in order (a string quoted, a list of strings an array of
    them, a bool TOML's true or false), then its rows, each given as the text between its
    brackets."""

    def value(v: str | int | list[str]) -> str:
        if isinstance(v, list):
            return f"[{', '.join(value(s) for s in v)}]"
        if isinstance(v, bool):
            return str(v).lower()
        return f'"{v}"' if isinstance(v, str) else str(v)

    lines = ["[[table]]", *(f"{key} = {value(v)}" for key, v in fields.items()),
             "rows = [", *(f"  [{row}]," for row in rows), "]"]  # fmt: skip
    return "\n".join(lines) + "\n"


def table_toml(name: str, kind: str, dtype: str, scope: str, chip_id: str, version: str,
               source: str, measured: Measured, conditions: str, rows: list[list],
               engine: tuple[str, str] = ("trtllm", "TensorRT-LLM"),
               backend: str | None = None, routing_alpha: float | None = None,
               window: bool = False, kernel: str = "", routing: str | None = None,
               extra: dict | None = None,
               ) -> str:  # fmt: skip
    """One `[[table]]` of cost/kernel_tables/*.toml from `measured` (`source`: which of its
    rows): measured on `chip_id` alone, by `engine` (its key and name) `version` (a moe
    table: with its MoE `backend` where not the default's, the power law its rows were
    routed by where not balanced, the `routing` of its harness where not balanced
    (cost/kernel_tables.ROUTINGS), and `window` where it prices only the M its rows span;
    `kernel`: the engine's own kernel it timed, engines.toml `kernels`; `extra`: more fields,
    after those), each row's last value in microseconds."""
    return toml_table({
        "name": name, "kind": kind, "dtype": dtype, "scope": scope, "measured_on": chip_id,
        "chips": [chip_id], "engine": engine[0], "engine_version": f"{engine[1]} {version}",
        **({} if backend is None else {"backend": backend}),
        **({} if routing_alpha is None else {"routing_alpha": routing_alpha}),
        **({} if routing is None else {"routing": routing}),
        **({"window": True} if window else {}),
        **({"kernel": kernel} if kernel else {}), **(extra or {}),
        **measured.provenance(source), "conditions": conditions,
    }, [f"{', '.join(str(v) for v in r[:-1])}, {r[-1]:.4g}" for r in rows])  # fmt: skip


def write(out: Path, header: str, tables: list[str]) -> None:
    """The TOML file: its comment header, then its tables, a blank line before each."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(header + "".join("\n" + table for table in tables))
    print(f"wrote {out}", file=sys.stderr)
