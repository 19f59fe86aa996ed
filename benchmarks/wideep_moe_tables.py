"""Regenerates src/xpusim/cost/kernel_tables/moe/nvidia-trtllm-wideep.toml from aiconfigurator's
measured TensorRT-LLM WIDEEP MoE compute database (ai-dynamo/aiconfigurator, Apache-2.0).

    python benchmarks/wideep_moe_tables.py /path/to/aiconfigurator.git   # a bare mirror

Needs pyarrow (the `parquet` extra) and git; the project reads only the TOML it writes.

TensorRT-LLM's `moe_backend` WIDEEP (WideEPMoE: the experts of a wide expert-parallel group,
its own all-to-all and optional EPLB) runs different kernels from the default CUTLASS fused
MoE that benchmarks/moe_kernel_tables.py's tables measured. aiconfigurator's collector
(collector/wideep/trtllm/collect_moe_compute.py, "accurate" mode) times WIDEEP's expert
compute alone, without the all-to-all, on the EP rank carrying the most routed tokens:
`num_tokens` is the whole EP group's step (each attention-DP rank holds num_tokens / ep), the
router is run on one rank's share, and the MoE on the tokens routed to rank 0, which the
power-law generator (collector/helper.py _generate_power_law_distribution) makes the busiest
rank. We keep:

- the `wideep_moe` rows (no EPLB: num_slots = num_experts; the MLPerf configs scored set no
  EPLB slots), `power_law_1.01` routing: the alpha aiconfigurator's own DeepSeek model runs
  (sdk/models/deepseek.py `_power_law_alpha = 1.01`); there are no balanced rows;
- DeepSeek-V3/R1's shape (hidden 7168, inter 2048, 256 experts, top-8), moe_tp 1, EP 4 and 8
  (the nodes of 4 and 8 GPUs the validation points run);
- TensorRT-LLM 1.3.0rc10, the only version with a WIDEEP table, on B200, B300 and GB200;
- steps of at least MIN_TOKENS tokens: their top-8 picks number at least 4 x the experts, so
  the rank touches (nearly) all its experts under power-law routing as under balanced, which
  the table's roofline assumes (cost/kernel_tables.py _moe_rows); at fewer, power-law routing
  reads fewer experts' weights, and B300's 32-token row came out 1.07x faster than the
  balanced roofline.

Rows are those of every `moe` table, [tokens, hidden, inter, topk, experts, moe_tp, moe_ep,
microseconds] with tokens the group's (cost/kernel_tables.py converts them to the busiest
rank's expected token-expert pairs under the same power law, `routing_alpha = 1.01`, as the
routed experts' ops count them, compiler/moe_expert.py), one NVFP4 table per chip, with
`backend = "WIDEEP"`.
"""

from __future__ import annotations

import sys

from aiconfigurator_data import KERNEL_TABLES, Mirror, arguments, table_toml, write

OUT = KERNEL_TABLES / "moe/nvidia-trtllm-wideep.toml"
VERSION = "1.3.0rc10"
CHIPS = {"b200_sxm": "b200", "b300_sxm": "b300", "gb200": "gb200"}
SHAPE = (7168, 2048, 256, 8)  # hidden, inter, experts, topk: DeepSeek-V3/R1
EPS = {8}
DISTRIBUTION = "power_law_1.01"
ROUTING_ALPHA = 1.01  # DISTRIBUTION's exponent, written as the table's routing_alpha
MIN_TOKENS = 128  # x top-8 = 4 x 256 experts


def main() -> int:
    args = arguments(__doc__, OUT).parse_args()
    mirror = Mirror.of(args)
    header = (
        "# Measured WIDEEP MoE compute times of TensorRT-LLM on NVIDIA chips, from\n"
        "# aiconfigurator's kernel database (Apache-2.0), written by\n"
        "# benchmarks/wideep_moe_tables.py (its docstring says which rows are kept); do not\n"
        "# edit by hand. Rows: [tokens, hidden, inter, topk, experts, moe_tp, moe_ep,\n"
        "# microseconds], tokens the whole EP group's step, the time the busiest rank's.\n"
        f"# Source commit {mirror.commit}.\n"
    )
    tables = []
    for chip_dir, chip_id in CHIPS.items():
        measured = mirror.read(f"{chip_dir}/moe/trtllm/{VERSION}/wideep_moe_perf.parquet")
        found = {}
        for r in measured.records():
            shape = (r["hidden_size"], r["inter_size"], r["num_experts"], r["topk"])
            if (r["op_name"] != "wideep_moe" or r["moe_dtype"] != "nvfp4"
                    or r["distribution"] != DISTRIBUTION or shape != SHAPE
                    or r["num_slots"] != shape[2] or r["moe_tp_size"] != 1
                    or r["moe_ep_size"] not in EPS or r["num_tokens"] < MIN_TOKENS):
                continue
            key = (r["num_tokens"], *SHAPE[:2], SHAPE[3], SHAPE[2], 1, r["moe_ep_size"])
            found[key] = r["latency"] * 1e3
        rows = [[*key, us] for key, us in sorted(found.items())]
        tables.append(table_toml(
            f"aiconfigurator-trtllm-wideep-moe-nvfp4-{chip_id}", "moe", "nvfp4", "nvfp4", chip_id,
            VERSION, f"wideep_moe, moe_dtype nvfp4, {DISTRIBUTION}, no EPLB", measured,
            f"{chip_id}, TensorRT-LLM {VERSION} WideEPMoE expert compute (moe_backend WIDEEP: "
            "router on one attention-DP rank's tokens, fc1 gate_up + SwiGLU, fc2 down, "
            "finalize; no all-to-all), NVFP4 weights and activations, CUTLASS grouped GEMMs; "
            f"the busiest EP rank under {DISTRIBUTION} routing, no EPLB; CUDA graphs, mean of "
            "5 routings (collector/wideep/trtllm/collect_moe_compute.py); DeepSeek-V3/R1's "
            "shape, EP 8", rows, backend="WIDEEP", routing_alpha=ROUTING_ALPHA))  # fmt: skip
    write(args.out, header, tables)
    return 0


if __name__ == "__main__":
    sys.exit(main())
