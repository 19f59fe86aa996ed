"""xpusim's systolic cycle counts beside SCALE-Sim v3's on layers of the zoo.

    python benchmarks/systolic_check.py                     # xpusim's side only
    python benchmarks/systolic_check.py --scalesim-python /path/to/venv/bin/python

cost/systolic.py counts a GEMM's cycles on a systolic array from its dataflow (folds, fill,
drain); cost/systolic_sim.py simulates the cells cycle by cycle. SCALE-Sim (Samajdar et al.,
ISPASS 2020; PyPI `scalesim` 3.0.0) is the reference peer. It pulls numba, pandas and
numpy < 2 (its 3.0.0 fails on numpy 2: `int()` of a one-element array), so it runs in a venv
of its own: `python -m venv V && V/bin/pip install scalesim==3.0.0 'numpy<2'`, then pass
V/bin/python. The run writes every layer's cycles, both tools', to
tests/data/systolic_scalesim.json, which tests/test_systolic.py holds the analytical model
to (SCALE-Sim's 'Total Cycles' column, without prefetch); SCALE-Sim takes minutes on the
128 x 128 layers.

Layers (M x K x N): the zoo's dlrm-v2 MLPs at batch 256, bert-base's projections at 128
tokens, Llama-3.2-1B's at decode (one token) and a small odd-shaped GEMM, on 32 x 32 arrays
(an MTIA v1 dot-product engine's size) both ways and 128 x 128 (a TPU v4 MXU)
weight-stationary, unbuffered as SCALE-Sim models it.
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import tempfile
import time
from pathlib import Path

from xpusim.cost.systolic import Dataflow, SystolicArray, gemm_cycles
from xpusim.workloads.resolve import load_model

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "systolic_scalesim.json"
CONFIG = """[general]
run_name = xpusim_check
[architecture_presets]
ArrayHeight: {rows}
ArrayWidth: {cols}
IfmapSramSzkB: 102400
FilterSramSzkB: 102400
OfmapSramSzkB: 102400
IfmapOffset: 0
FilterOffset: 100000000
OfmapOffset: 200000000
Dataflow: {dataflow}
Bandwidth: 10
ReadRequestBuffer: 32
WriteRequestBuffer: 32
[layout]
IfmapCustomLayout: False
IfmapSRAMBankBandwidth: 10
IfmapSRAMBankNum: 10
IfmapSRAMBankPort: 2
FilterCustomLayout: False
FilterSRAMBankBandwidth: 10
FilterSRAMBankNum: 10
FilterSRAMBankPort: 2
[sparsity]
SparsitySupport: false
SparseRep: ellpack_block
OptimizedMapping: false
BlockSize: 8
RandomNumberGeneratorSeed: 40
[run_presets]
InterfaceBandwidth: CALC
UseRamulatorTrace: False
"""
RUNNER = """
from scalesim.scale_sim import scalesim
s = scalesim(save_disk_space=True, verbose=False, config='scale.cfg', topology='gemm.csv',
             layout='layout.csv', input_type_gemm=True)
s.run_scale(top_path='out')
"""


def layers() -> list[tuple[str, int, int, int]]:
    """(name, M, K, N) from the zoo's configs."""
    dlrm, bert = load_model("dlrm-v2"), load_model("bert-base-uncased")
    llama = load_model("llama-3.2-1b")
    widths = [dlrm.dense_features, *dlrm.bottom_mlp]
    found = [(f"dlrm-v2.bottom.{i}", 256, k, n)
             for i, (k, n) in enumerate(itertools.pairwise(widths))]  # fmt: skip
    h, f = bert.hidden_size, bert.intermediate_size
    found += [("bert-base.qkv", 128, h, 3 * h), ("bert-base.o", 128, h, h),
              ("bert-base.up", 128, h, f), ("bert-base.down", 128, f, h)]  # fmt: skip
    h, kv = llama.hidden_size, llama.num_kv_heads * llama.head_dim
    found += [("llama-3.2-1b.qkv.decode", 1, h, h + 2 * kv), ("odd", 37, 100, 45)]
    return found


ARRAYS = [(32, 32, Dataflow.WEIGHT_STATIONARY), (32, 32, Dataflow.OUTPUT_STATIONARY),
          (128, 128, Dataflow.WEIGHT_STATIONARY)]  # fmt: skip


def scalesim_cycles(python: str, rows: int, cols: int, dataflow: Dataflow,
                    shapes: list[tuple[str, int, int, int]]) -> list[int]:  # fmt: skip
    """SCALE-Sim's 'Total Cycles' of each layer, run in its own interpreter."""
    flow = {Dataflow.WEIGHT_STATIONARY: "ws", Dataflow.OUTPUT_STATIONARY: "os"}[dataflow]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "scale.cfg").write_text(CONFIG.format(rows=rows, cols=cols, dataflow=flow))
        rows_csv = "".join(f"{name}, {m}, {n}, {k},\n" for name, m, k, n in shapes)
        (folder / "gemm.csv").write_text("Layer, M, N, K,\n" + rows_csv)
        layout = ",".join(["1"] * 6 + [str(x) for x in (0, 1, 2, 0, 1, 2, 0, 1, 2, 3,
                                                            0, 1, 2, 3)])  # fmt: skip
        (folder / "layout.csv").write_text("Layer name," + ",".join(["f"] * 20) + ",\n"
                                           + "".join(f"{s[0]},{layout},\n" for s in shapes))
        subprocess.run([python, "-c", RUNNER], cwd=folder, check=True, capture_output=True)
        report = next((folder / "out").rglob("COMPUTE_REPORT.csv")).read_text().splitlines()
    return [int(line.split(",")[2]) for line in report[1:] if line.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scalesim-python", help="an interpreter with scalesim installed")
    args = parser.parse_args()
    shapes, rows_out = layers(), []
    print(f"{'array':<26} {'layer':<26} {'M x K x N':>18} {'xpusim':>9} {'SCALE-Sim':>9}")
    for r, c, flow in ARRAYS:
        picked = [s for s in shapes if r == 32 or s[0].startswith(("llama", "bert-base.qkv"))]
        array = SystolicArray(r, c, flow)
        began = time.perf_counter()
        theirs = (scalesim_cycles(args.scalesim_python, r, c, flow, picked)
                  if args.scalesim_python else [None] * len(picked))  # fmt: skip
        seconds = time.perf_counter() - began
        for (name, m, k, n), other in zip(picked, theirs, strict=True):
            ours = int(gemm_cycles(array, m, k, n))
            print(f"{f'{r}x{c} {flow.value}':<26} {name:<26} {f'{m}x{k}x{n}':>18} "
                  f"{ours:>9} {other if other is not None else '-':>9}")
            rows_out.append({"rows": r, "cols": c, "dataflow": flow.value, "layer": name, "m": m,
                             "k": k, "n": n, "xpusim": ours, "scalesim": other})  # fmt: skip
        if args.scalesim_python:
            print(f"  SCALE-Sim: {seconds:.0f} s for {len(picked)} layers")
    if args.scalesim_python:
        OUT.parent.mkdir(exist_ok=True)
        OUT.write_text(json.dumps({"scalesim": "3.0.0", "layers": rows_out}, indent=1) + "\n")
        print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
