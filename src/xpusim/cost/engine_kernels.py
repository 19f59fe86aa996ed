"""Which of an engine's own kernels (serving/engines.toml `kernels`) priced some op of a run.

An engine lists every kernel of its that was measured anywhere: vLLM its block-FP8 GEMM, its
fused MoE and its MXFP4 MoE. A bf16 Llama on an H100 runs none of them, and serve's note that
named all three read as if it had. An op is priced by an engine's kernel where the first
measurement the cost model takes for it is that kernel's, as cost/roofline.py takes them:
the first kernel table its keys find (kernel_tables.first_table, fraction_grid's), the first
per-call time that prices it (op_times.op_time_for), or its collective's engine curve
(collectives.engine_curve). Kernels that only change the ops the builder emits
(transformer.GRAPH_KERNELS) have no measurement of their own and are never named here.
"""

from __future__ import annotations

from xpusim.cost.collectives import Collective, engine_curve
from xpusim.cost.kernel_tables import first_table
from xpusim.cost.op_table import OpTable
from xpusim.cost.op_times import op_time_for
from xpusim.hardware.system import System


def kernels_priced(table: OpTable, system: System, span: int) -> frozenset[str]:
    """The engine kernels whose measurements price some op of `table` on `system`, each
    collective's group spanning `span` chips (collectives.comm_seconds')."""
    chip_id = system.chip.id
    found = set()
    for op, has_matrix, keys, shapes in zip(table.ops, table.has_matrix, table.kernel_keys,
                                            table.kernel_shapes, strict=True):  # fmt: skip
        if has_matrix:
            kernels = first_table(chip_id, op.compute_dtype, keys, shapes)
            found.add(kernels.kernel if kernels is not None else "")
        timed = op_time_for(chip_id, op)
        found.add(timed.kernel if timed is not None else "")
    for _, op in table.collectives[0]:
        own = engine_curve(system, Collective(str(op.attr("collective"))),
                           int(op.attr("size")), span, op.attr("kernels") or ())  # fmt: skip
        found.add(own.kernel if own is not None else "")
    return frozenset(found - {""})
