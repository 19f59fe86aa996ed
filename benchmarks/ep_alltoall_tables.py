"""Regenerates src/xpusim/cost/kernel_tables/all_to_all/nvidia-deepep.toml from aiconfigurator's
measured DeepEP dispatch and combine kernels (ai-dynamo/aiconfigurator, Apache-2.0), and prints
them against the all-to-all xpusim's links model charges at the same shapes.

    python benchmarks/ep_alltoall_tables.py /path/to/aiconfigurator.git   # a bare mirror

Needs pyarrow (the `parquet` extra) and git; the project reads only the TOML it writes.

aiconfigurator's collector (collector/wideep/sglang/collect_deepep_ll.py, _normal.py) runs
DeepEP's intranode kernels as SGLang 0.5.12 ships them on the GPUs of one node (node_num 1,
one process a GPU: 8 on these HGX/DGX nodes): `num_token` tokens on every rank, each routed
to `num_topk` of `num_experts` experts spread evenly over the ranks, timed with CUDA events.
`ll` (low latency, the decode kernels) gives dispatch_avg_t_us and combine_avg_t_us (FP8
dispatch, BF16 combine); `normal` (high throughput, prefill) gives dispatch_transmit_us and
combine_transmit_us at each of 4-24 SMs, of which we keep the fastest (SGLang tunes the SM
count per shape). We keep every shape measured on the B200, B300, H100 and H200 (the NVIDIA
chips of 8-GPU nodes the catalog has a system for, SYSTEMS); GB200/GB300 rows (node_num 1 of
an NVL72 rack, ranks not stated) are left out.
"""

from __future__ import annotations

import sys

from aiconfigurator_data import KERNEL_TABLES, Measured, Mirror, arguments, toml_table, write

OUT = KERNEL_TABLES / "all_to_all/nvidia-deepep.toml"
VERSION = "0.5.12"  # SGLang, the only version with DeepEP rows on every chip kept
SYSTEMS = {  # aiconfigurator chip directory -> (catalog chip, catalog system), 8 GPUs a node
    "b200_sxm": ("b200", "dgx-b200"),
    "b300_sxm": ("b300", "hgx-b300"),
    "h100_sxm": ("h100-sxm", "dgx-h100"),
    "h200_sxm": ("h200-sxm", "hgx-h200"),
}
RANKS = 8
COLUMNS = {"ll": ("dispatch_avg_t_us", "combine_avg_t_us"),
           "normal": ("dispatch_transmit_us", "combine_transmit_us")}  # fmt: skip


def rows_of(data: dict[str, list], mode: str) -> dict[tuple, dict[int, list[float]]]:
    """(hidden, topk, experts) -> tokens -> [dispatch us, combine us], the fastest of a
    normal row's SM counts."""
    found: dict[tuple, dict[int, list[float]]] = {}
    dispatch, combine = COLUMNS[mode]
    for i in range(len(data["num_token"])):
        if data["node_num"][i] != 1:
            continue
        shape = (data["hidden_size"][i], data["num_topk"][i], data["num_experts"][i])
        times = [data[dispatch][i], data[combine][i]]
        best = found.setdefault(shape, {}).setdefault(data["num_token"][i], times)
        found[shape][data["num_token"][i]] = [min(a, b) for a, b in zip(best, times, strict=True)]
    return found


def table_text(chip_dir: str, mode: str, shape: tuple, rows: dict[int, list[float]],
               measured: Measured) -> str:  # fmt: skip
    chip, system = SYSTEMS[chip_dir]
    hidden, topk, experts = shape
    how = ("low-latency kernels (decode): FP8 dispatch, BF16 combine, mean of the timed runs"
           if mode == "ll" else
           "normal (high-throughput, prefill) kernels: transmit time, the fastest of 4-24 SMs")
    conditions = (f"{chip}, {RANKS} GPUs of one node over NVLink (node_num 1), DeepEP {how}; "
                  f"every rank sends its tokens to top-{topk} of {experts} experts spread "
                  f"evenly (collector/wideep/sglang/collect_deepep_{mode}.py)")
    return toml_table({
        "name": f"aiconfigurator-deepep-{mode}-{chip}-h{hidden}-k{topk}-e{experts}",
        "kind": "all_to_all", "mode": mode, "chip": chip, "system": system, "ranks": RANKS,
        "hidden": hidden, "topk": topk, "experts": experts, "engine": "sglang",
        "engine_version": f"SGLang {VERSION} (DeepEP)", **measured.provenance(),
        "conditions": conditions,
    }, [f"{n}, {d:.4g}, {c:.4g}" for n, (d, c) in sorted(rows.items())])  # fmt: skip


def report(chip_dir: str, found: dict[str, dict[tuple, dict[int, list[float]]]]) -> None:
    """DeepSeek-V3/R1's shape (hidden 7168, top-8 of 256): each mode's measured dispatch +
    combine against the links model's two all-to-alls of the same tokens in BF16."""
    from xpusim.cost.collectives import Collective, collective_line
    from xpusim.hardware.system import load_system

    chip, system = SYSTEMS[chip_dir]
    line = collective_line(load_system(system), Collective.ALL_TO_ALL, RANKS)
    for mode, shapes in found.items():
        for n, (d, c) in sorted(shapes.get((7168, 8, 256), {}).items()):
            if n in (1, 16, 64, 128, 256, 512, 1024, 4096, 16384):
                model_us = 2e6 * (line.fixed_s + line.s_per_byte * n * 8 * 7168 * 2)
                print(f"  {chip:9s} {mode:6s} {n:6d} tokens: dispatch {d:8.1f} + combine "
                      f"{c:8.1f} us = {d + c:8.1f}; links model {model_us:8.1f} us "
                      f"(measured/model {(d + c) / model_us:.2f})")  # fmt: skip


def main() -> int:
    args = arguments(__doc__, OUT).parse_args()
    mirror = Mirror.of(args)
    header = (
        "# Measured DeepEP dispatch and combine times on one 8-GPU NVIDIA node, from\n"
        "# aiconfigurator's kernel database (Apache-2.0), written by\n"
        "# benchmarks/ep_alltoall_tables.py (its docstring says which rows are kept); do not\n"
        "# edit by hand. Rows: [tokens per rank, dispatch us, combine us].\n"
        "# cost/ep_alltoall.py reads them as a floor under the MoE all-to-all.\n"
        f"# Source commit {mirror.commit}.\n"
    )
    tables = []
    for chip_dir in SYSTEMS:
        found = {}
        for mode in COLUMNS:
            measured = mirror.read(
                f"{chip_dir}/comm/sglang/{VERSION}/wideep_deepep_{mode}_perf.parquet")
            found[mode] = rows_of(measured.columns, mode)
            for shape, rows in sorted(found[mode].items()):
                tables.append(table_text(chip_dir, mode, shape, rows, measured))
        report(chip_dir, found)
    write(args.out, header, tables)
    return 0


if __name__ == "__main__":
    sys.exit(main())
