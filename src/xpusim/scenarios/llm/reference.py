"""The LLM inference model as plain loops: one request batch on one chip, read as its spec.

    graph    every layer's ops for the prefill and for each decode step (no compact
             layers, no shape arrays): workloads/transformer.py
    memory   weights + KV cache (prompt + gen tokens a sequence) + the largest live
             activations; where each role lives: compiler/memory_plan.place
    per op   the roofline cost of each op alone (cost/roofline.evaluate), its activations
             on chip where its largest step's fit
    phases   TTFT = the prefill's op times summed; a decode step = its op times summed;
             TPOT = the mean decode step; latency = TTFT + (gen - 1) x TPOT;
             energy = every op's energy (one chip is busy the whole time)

`engine.py`, `graphs.py` and `timeline.py` compute the same for thousands of configurations
at once (compact graphs, shapes as arrays, decode steps sampled where costs are affine,
plans and chips as a leading axis); tests/test_reference.py holds them equal to this on
random models, chips and shapes. Plain decoding, one chip, one microbatch: what the engine
adds beyond that (plans, pipelines, speculative steps) it adds on top of these terms.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from xpusim.compiler.memory_plan import Footprint, peak_activation_bytes, place
from xpusim.compiler.partition import Plan, partition, weight_bytes
from xpusim.cost.op_table import op_table
from xpusim.cost.roofline import HardwareArrays, evaluate, placement_onehot
from xpusim.hardware.spec import Chip
from xpusim.ir.graph import Graph
from xpusim.ir.op import Op
from xpusim.scenarios.formats import resolve_formats
from xpusim.scenarios.llm.chunking import prefill_chunks
from xpusim.workloads.transformer import StepShape, build_step
from xpusim.workloads.transformer_config import TransformerConfig


@dataclass(frozen=True)
class Reference:
    ttft_s: float
    tpot_s: float
    latency_s: float
    energy_j: float
    memory_bytes: Footprint
    fits: bool


def simulate_reference(
    cfg: TransformerConfig, chip: Chip, batch: int, prompt: int, gen: int,
    precision: str | None = None, weight_precision: str | None = None,
) -> Reference:  # fmt: skip
    """One batch of `batch` sequences: `prompt` tokens in, `gen` out, on one chip."""
    act, weight, _ = resolve_formats(chip, precision, weight_precision)

    def graph(shape: StepShape) -> Graph:
        return partition(build_step(cfg, shape, act, weight), Plan())

    prefill = graph(StepShape(batch, prompt, prompt))
    # decode step i feeds one token that attends prompt + 1 + i keys; with gen 1 the step
    # that would follow is still costed, for TPOT
    decode = [graph(StepShape(batch, 1, prompt + 1 + i, decode=True))
              for i in range(max(gen - 1, 1))]  # fmt: skip

    kv_cache = batch * cfg.cache_bytes(prompt + gen, act.itemsize)
    memory = Footprint(sum(weight_bytes(cfg, Plan(), weight, act)), kv_cache,
                       prefill_chunks(chip, batch, prompt).peak_bytes(
                           peak_activation_bytes(prefill), peak_activation_bytes(decode[-1])))
    placement = place(chip, memory)

    def phase(steps: list[Graph]) -> tuple[list[float], list[float]]:
        """Each step's time and energy: its ops' summed, each op's activations on chip
        where they fit at the phase's largest step."""
        times, energies = [], []
        for graph_ in steps:
            time_s = energy_j = 0.0
            for i, op in enumerate(graph_.ops):
                largest = max(_activation_bytes(s.ops[i]) for s in steps)
                cost = _op_cost(op, chip, placement, largest)
                time_s += cost[0] * graph_.copies(op)
                energy_j += cost[1] * graph_.copies(op)
            times.append(time_s)
            energies.append(energy_j)
        return times, energies

    (ttft_s,), (prefill_j,) = phase([prefill])
    step_times, step_energies = phase(decode)
    tpot_s = float(np.mean(step_times))
    latency_s = ttft_s + (gen - 1) * tpot_s
    energy_j = prefill_j + (gen - 1) * float(np.mean(step_energies))
    return Reference(ttft_s, tpot_s, latency_s, energy_j, memory,
                     memory.total <= chip.capacity_bytes)  # fmt: skip


def _activation_bytes(op: Op) -> float:
    return float(op_table(Graph("op", [op])).activation_bytes[0])


def _op_cost(op: Op, chip: Chip, placement: object, activation_bytes: float) -> tuple[float, float]:
    """(time_s, energy_j) of one op alone on the chip."""
    table = op_table(Graph("op", [op]))
    hw = HardwareArrays.of(chip, table)
    where = placement_onehot(np.array([activation_bytes]), [placement],
                             hw.level_rate.shape[-2])[0]  # fmt: skip
    costs = evaluate(table, hw, where)
    return float(costs.time_s[..., 0]), float(costs.energy_j[..., 0])
