"""Regenerates src/xpusim/cost/kernel_tables/collectives/<chip>.toml from aiconfigurator's
measured collective database (ai-dynamo/aiconfigurator, Apache-2.0).

    python benchmarks/collective_tables.py /path/to/aiconfigurator.git   # a bare mirror

Needs pyarrow (the `parquet` extra) and git; the project reads only the TOML it writes.

Two kinds of measurement, both on one node's NVLink (2, 4 or 8 GPUs of one HGX/DGX, or of
one GB200 NVL72 rack):

- `nccl_perf.parquet`: nccl-tests (all_reduce_perf, all_gather_perf, reduce_scatter_perf)
  run by collector/network/collect_nccl.py, one size at a time (-w 40 warm-ups, -n 100
  iterations up to 16 MiB, 60 above, out-of-place time). Its `message_size` is elements
  (the collector divides nccl-tests' bytes by the element size); we keep the `half` rows and
  write bytes = 2 x message_size, which is nccl-tests' size: the whole tensor (an
  all-gather's output, a reduce-scatter's input), as cost/collectives.py's S.
- `custom_allreduce_perf.parquet`: the engines' own all-reduce, timed by
  collector/network/collect_all_reduce.py inside the engine (a [tokens, 4096] BF16 tensor
  of message_size elements, CUDA graphs): TensorRT-LLM's AllReduce with strategy AUTO (its
  one-shot / two-shot custom kernels where it picks them, NCCL otherwise), vLLM's and
  SGLang's custom all-reduce (`graph` rows only: decode runs under CUDA graphs).

One version per chip and source (ENGINES). Rows are [gpus, bytes, microseconds]. An engine's
own all-reduce table names its `kernel` (KERNELS): a serving engine that lists it
(serving/engines.toml `kernels`) runs its all-reduces at that table's times
(cost/collectives.py, "An engine's own all-reduce").

    python benchmarks/collective_tables.py --compare   # needs xpusim on the path

prints, instead, each table's ratio to cost/collectives.py's analytic line on its chip's
default system at a few sizes (docs/cost.md), and every row faster than the line's
bandwidth term alone (bytes over the NVLink bandwidth), which the cost model refuses.
"""

from __future__ import annotations

import sys
from pathlib import Path

from aiconfigurator_data import KERNEL_TABLES, Mirror, arguments, table_toml, write

OUT = KERNEL_TABLES / "collectives"

# aiconfigurator chip directory -> xpusim catalog id
CHIPS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200-sxm", "b200_sxm": "b200", "b300_sxm": "b300",
         "gb200": "gb200"}
# source directory -> (version, engine key, engine name, file, the rows' kernel_source kept)
ENGINES = {
    "nccl": ("2.29.2", "nccl", "NCCL", "nccl_perf.parquet", {"NCCL"}),
    "trtllm": ("1.3.0rc10", "trtllm", "TensorRT-LLM", "custom_allreduce_perf.parquet", {"TRTLLM"}),
    "vllm": ("0.19.0", "vllm", "vLLM", "custom_allreduce_perf.parquet", {"vLLM_custom_graph"}),
    "sglang": ("0.5.10", "sglang", "SGLang", "custom_allreduce_perf.parquet",
               {"SGLang_CustomAllReduce_graph"}),
}
OPS = ("all_reduce", "all_gather", "reduce_scatter")
KERNELS = {"trtllm": "trtllm-allreduce", "vllm": "vllm-custom-allreduce",
           "sglang": "sglang-custom-allreduce"}  # fmt: skip
"""The `kernel` name of each engine's own all-reduce table (NCCL's times every engine's)."""
MiB = 1 << 20
_VLLM_SM90 = [[2, 8 * MiB], [4, 8 * MiB], [6, MiB // 2], [8, MiB // 4]]
_VLLM_SM100 = [[2, 2 * MiB], [4, 2 * MiB], [6, MiB], [8, MiB]]
_VLLM_OTHER = [[2, 8 * MiB], [4, 8 * MiB], [6, 8 * MiB], [8, 8 * MiB]]
BELOW = {"vllm": {"h100-sxm": _VLLM_SM90, "h200-sxm": _VLLM_SM90, "b200": _VLLM_SM100,
                  "gb200": _VLLM_SM100, "b300": _VLLM_OTHER}}
"""Where an engine runs its own all-reduce only below a size, that size by chip and GPUs
(the table's `below_bytes`; cost/collectives.py prices larger tensors as it would without
the kernel). vLLM 0.11: min(CustomAllreduce's max_size 8 MiB, CUSTOM_ALL_REDUCE_MAX_SIZES by
capability), the table applied where torch's symmetric memory is on (BELOW_SOURCE)."""
BELOW_SOURCE = {
    "vllm": "vLLM runs its custom all-reduce for a tensor of fewer bytes than its max_size "
            "and hands larger ones on (vllm/distributed/device_communicators/"
            "custom_all_reduce.py should_custom_ar: 'return inp_size < self.max_size' on a "
            "fully connected node; cuda_communicator.py all_reduce: custom all-reduce, then "
            "torch symmetric memory, then pynccl). max_size is the constructor's 8192 x 1024 "
            "bytes, cut to all_reduce_utils.py CUSTOM_ALL_REDUCE_MAX_SIZES[capability][world "
            "size] where the symmetric-memory communicator is enabled "
            "(VLLM_ALLREDUCE_USE_SYMM_MEM; its own table has capabilities 9.0 and 10.0 only): "
            "9.0 (H100, H200) "
            "64 / 32 MiB / 512 / 256 KiB at 2 / 4 / 6 / 8 GPUs, 10.0 (B200, GB200) 2 / 2 / 1 / "
            "1 MiB; 10.3 (B300) has no entry in 0.11, so 8 MiB. Read in the 0.11-era copies of "
            "the code index (all_reduce_utils.py id 183845377, custom_all_reduce.py ids "
            "61173341770 and 55067854270, cuda_communicator.py id 32194246381, envs.py id "
            "6351456); later releases add a 10.3 entry (4 / 4 / 8 / 4 MiB), not taken here. "
            "Whether the communicator is on is the release's default, which moved: on from "
            "vllm-project/vllm PR #25070 (2025-09-17, so in 0.11.0), off again from PR #26925 "
            "(2025-10-15, 'Temporally Disable VLLM_ALLREDUCE_USE_SYMM_MEM by Default', so in "
            "0.11.1 unless re-enabled), on in the 2026 copy read; when it came back on, and so "
            "0.13.0's default, was not found. Taken on, an assumption: off, the bound is 8 MiB "
            "at every TP, which prices tensors of the bound to 8 MiB (steps of 45-1,450 gpt-oss "
            "tokens at TP 8 on Hopper) at this table's time instead of the floor's",
}
WHAT = {
    "nccl": "nccl-tests {op}_perf over NVLink, FP16, out-of-place, one size a run "
            "(collector/network/collect_nccl.py)",
    "trtllm": "TensorRT-LLM AllReduce (strategy AUTO: its one-shot/two-shot custom kernels or "
              "NCCL, as it picks), BF16 [tokens, 4096], CUDA graphs "
              "(collector/network/collect_all_reduce.py)",
    "vllm": "vLLM custom all-reduce, BF16 [tokens, 4096], CUDA graphs "
            "(collector/network/collect_all_reduce.py)",
    "sglang": "SGLang custom all-reduce, BF16 [tokens, 4096], CUDA graphs "
              "(collector/network/collect_all_reduce.py)",
}


def tables(mirror: Mirror, chip_dir: str, source: str) -> list[str]:
    version, engine, engine_name, name, kernels = ENGINES[source]
    chip_id = CHIPS[chip_dir]
    measured = mirror.read(f"{chip_dir}/comm/{source}/{version}/{name}")
    data = measured.columns
    dtype_key = "nccl_dtype" if source == "nccl" else "allreduce_dtype"
    by_op: dict[str, dict[tuple[int, int], float]] = {}
    for i in range(len(data["latency"])):
        if (data["op_name"][i] not in OPS or data["kernel_source"][i] not in kernels
                or data[dtype_key][i] not in ("half", "bfloat16")):
            continue
        key = (data["num_gpus"][i], 2 * data["message_size"][i])
        by_op.setdefault(data["op_name"][i], {})[key] = data["latency"][i] * 1e3
    return [table_toml(
        f"aiconfigurator-{engine}-{op.replace('_', '-')}-{chip_id}", "collective", "bf16", op,
        chip_id, version, f"{source} {op}", measured,
        f"{chip_id} NVLink, {engine_name} {version}: {WHAT[source].format(op=op)}",
        [[*key, us] for key, us in sorted(found.items())],
        engine=(engine, engine_name), kernel=KERNELS.get(source, ""),
        extra=({"below_bytes": BELOW[source][chip_id], "below_source": BELOW_SOURCE[source]}
               if op == "all_reduce" and chip_id in BELOW.get(source, {}) else None))
        for op, found in by_op.items()]


SIZES = (2**13, 2**16, 2**20, 2**23, 2**26, 2**28)  # bytes compared (8 KiB to 256 MiB)


def compare(folder: Path) -> None:
    """The ratio table and the rows faster than the bandwidth bound (module docstring)."""
    import tomllib

    from xpusim.cost.collectives import Collective, bandwidth_bound_s, collective_line
    from xpusim.hardware.catalog import load_chip
    from xpusim.hardware.system import default_system

    print("| table | gpus | " + " | ".join(f"{n / 2**20:g} MiB" for n in SIZES) + " |")
    print("|---|---|" + "---|" * len(SIZES))
    faster = []
    for table in [t for path in sorted(folder.glob("*.toml"))
                  for t in tomllib.loads(path.read_text())["table"]]:  # fmt: skip
        system = default_system(load_chip(table["chips"][0]), 8)
        kind = Collective(table["scope"])
        for gpus in sorted({r[0] for r in table["rows"]}):
            rows = {r[1]: r[2] * 1e-6 for r in table["rows"] if r[0] == gpus}
            line = collective_line(system, kind, gpus)
            ratios = [f"{rows[n] / line.cost(n).time_s:.2f}" if n in rows else "-" for n in SIZES]
            print(f"| {table['name'].removeprefix('aiconfigurator-')} | {gpus} | "
                  + " | ".join(ratios) + " |")
            faster += [(table["name"], gpus, n, t) for n, t in rows.items()
                       if t < bandwidth_bound_s(system, kind, n, gpus)]
    print(f"\n{len(faster)} rows faster than bytes over the NVLink bandwidth:")
    for name, gpus, n, t in faster:
        print(f"  {name} gpus {gpus} {n} B {t * 1e6:.1f} us")


def main() -> int:
    if "--compare" in sys.argv:
        compare(OUT)
        return 0
    args = arguments(__doc__, OUT).parse_args()
    mirror = Mirror.of(args)
    for chip_dir, chip_id in CHIPS.items():
        header = (
            f"# Measured all-reduce / all-gather / reduce-scatter times on {chip_id} NVLink,\n"
            "# from aiconfigurator's comm database (Apache-2.0), written by\n"
            "# benchmarks/collective_tables.py (its docstring says which rows are kept); do\n"
            "# not edit by hand. Rows: [gpus, bytes of the whole tensor, microseconds]; scope:\n"
            f"# the op. Source commit {mirror.commit}.\n"
        )
        write(args.out / f"{chip_id}.toml", header,
              [t for source in ENGINES for t in tables(mirror, chip_dir, source)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
