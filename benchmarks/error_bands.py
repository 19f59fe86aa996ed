"""Writes src/xpusim/validation/error_bands.json, the bands `serve` prints beside an answer,
from a full validation run:

    xpusim validate --json --workers 2 > validation.json
    python benchmarks/error_bands.py validation.json --tree $(git rev-parse --short HEAD)

Run it after every full re-score (docs/validation.md, "Re-scoring"); a test fails when the
serving points change and the file was not written again.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from xpusim.files import write_text
from xpusim.validation.error_bands import BANDS, build
from xpusim.validation.points import load_points


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("validation", type=Path, help="xpusim validate --json's output")
    parser.add_argument("--tree", required=True, help="the commit the validation scored")
    args = parser.parse_args()
    scored = json.loads(args.validation.read_text())["points"]
    bands = build(scored, {p.id: p for p in load_points()}, args.tree)
    write_text(BANDS, json.dumps(bands, indent=1) + "\n")
    print(f"{BANDS}: {len(bands['groups'])} groups, {bands['serving_points']} points")


if __name__ == "__main__":
    main()
