"""The timeline of one microbatch of an LLM request, costed for K plans at once as arrays.

One microbatch (`batch` sequences): its prefill crosses every pipeline stage and
yields the first token (TTFT); each of the other gen - 1 tokens takes one decode step, the
new token attending to prompt + 1 ... prompt + gen - 1 keys, and crosses every stage again.
A pipeline of pp stages keeps `microbatches` (default pp) of them in flight, so the time
between a sequence's tokens (TPOT) is

    max(sum of the stage times + sends,  microbatches x slowest stage)

the first term being a token's trip through the pipeline and the second the stages' turn
at each microbatch. More stages therefore add sequences in flight (throughput) but never
shorten a token's trip (per-user speed): Groq's explanation of its design. Tensor
parallelism shortens every stage until its all-reduces dominate; data parallelism adds
replicas. latency = TTFT + (microbatches - 1) x slowest prefill stage + (gen - 1) x TPOT.
With gen = 1 TPOT is still reported for the step that would follow.

A request that decodes otherwise (scenarios/decoding.py) keeps this timeline with other
shapes: beams and samples widen each step's batch; a speculative step feeds K + 1 tokens,
runs the draft's K steps beside it and outputs `advance` tokens in expectation, so a
request takes ceil((gen - 1) / advance) steps and TPOT is a step over `advance`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from operator import attrgetter
from typing import NamedTuple

import numpy as np

from xpusim.compiler.memory_plan import Placement
from xpusim.compiler.partition import Plan
from xpusim.cost.collectives import Collective, CollectiveLine, collective_line
from xpusim.cost.ordered_sum import ordered_sum
from xpusim.cost.roofline import Bottleneck, bottleneck_of
from xpusim.cost.stream_machine import hop_line
from xpusim.hardware.system import System
from xpusim.memo import distinct
from xpusim.scenarios.decoding import DraftCost
from xpusim.scenarios.llm.engine import PhaseCosts
from xpusim.scenarios.llm.request import Request
from xpusim.workloads.transformer import hidden_state_bytes
from xpusim.workloads.transformer_config import TransformerConfig


class CostBatch(NamedTuple):
    """What `timeline` needs of K plans of one graph group, as columns."""

    systems: list[System]
    reqs: list[Request]
    plans: list[Plan]
    placements: list[Placement]
    rows: np.ndarray
    microbatches: np.ndarray
    overlap: np.ndarray
    drafts: list[DraftCost | None]  # speculative decoding's draft model (decoding.py)


@dataclass(frozen=True)
class Metrics:
    """The costed timeline of K plans of one graph group, each figure a (K,) array."""

    ttft_s: np.ndarray
    tpot_s: np.ndarray
    latency_s: np.ndarray
    energy_j: np.ndarray
    comm_s: np.ndarray
    trip_s: np.ndarray  # a token's mean trip through the pipeline
    send_prefill_s: np.ndarray  # one stage's prefill activations to the next (0 at pp 1)
    send_decode_s: np.ndarray  # the same for a decode step
    phases: tuple[PhaseCosts, PhaseCosts]
    decode_steps: np.ndarray  # (K,) a request's decode steps after its first token
    send_total_s: np.ndarray  # (K,) a request's pipeline sends, all steps

    @cached_property
    def bottlenecks(self) -> list[str]:
        """Each plan's bottleneck, as results name them: worked out when a result asks."""
        return self.bottlenecks_of(slice(None))

    def bottlenecks_of(self, ks: np.ndarray | slice) -> list[str]:
        """The bottlenecks of plans `ks` only: a sweep's rows ask for each job's chosen
        plan's, a few of the plans costed (tests/test_result_table.py: equal to
        `bottlenecks`)."""
        labels = _bottleneck(*self.phases, self.decode_steps[ks], self.send_total_s[ks], ks)
        return [_LABELS[label] for label in labels.tolist()]


_LABELS = [b.label for b in sorted(Bottleneck)]  # by value: 0, 1, ...


def timeline(
    cfg: TransformerConfig, batch: CostBatch, phases: tuple[PhaseCosts, PhaseCosts]
) -> Metrics:
    """The timeline of one microbatch (see the module docstring) for K plans that share
    formats, tp and ep, each with its own request, system, depth, microbatches and
    overlap, from their (prefill, decode) costs (engine.cost_phases)."""
    sequences, decode_steps, advance, prompt = (
        np.array(list(map(attrgetter(name), batch.reqs)))
        for name in ("batch", "steps_after_first", "advance", "prompt"))  # fmt: skip
    # a sweep's K configurations share a few systems and plans: their figures once each
    systems, system_of = distinct(batch.systems)
    plans, plan_of = distinct(batch.plans)
    draft_s = draft_step_s = draft_j = draft_step_j = np.zeros(len(batch.reqs))
    if any(batch.drafts):
        draft_s, draft_step_s, draft_j, draft_step_j = (np.array(v) for v in zip(
            *[(d.prefill_s, d.step_s, d.prefill_j, d.step_j) if d else (0.0,) * 4
              for d in batch.drafts], strict=True))  # fmt: skip
    hops = np.array([p.hops for p in plans])[plan_of]  # pp - 1 but for a chained pipeline
    m, overlap = batch.microbatches, batch.overlap
    prefill, decode = phases
    static_w = np.array([s.chip.energy.static_power_w.value for s in systems])[system_of]
    headroom_w = np.array([s.chip.tdp_w.value for s in systems])[system_of] - static_w

    def stage_times(phase: PhaseCosts) -> np.ndarray:  # (K, steps, stages)
        """Each stage's time: its ops' times in sequence, or with overlap the longer of its
        computation and its collectives, but never shorter than its ops' energy allows at
        the TDP (compute already slowed to the power limit cannot also hide link traffic):
        each op's power_s, and the dynamic energy the ops are charged over the TDP's headroom
        (a measured kernel's energy, roofline.measured_gemm_energy_j, can exceed what its
        power_s counts)."""
        total = phase.stage_sums("time_s")
        if not overlap.any():
            return total
        comm = phase.stage_sums("time_s", comm_only=True)
        dynamic_j = phase.stage_sums("energy_j") - static_w[:, None, None] * total
        allowed = np.maximum(phase.stage_sums("power_s"), dynamic_j / headroom_w[:, None, None])
        hidden = np.maximum(np.maximum(total - comm, comm), allowed)
        return np.where(overlap[:, None, None], hidden, total)

    # a pipeline's sends (pp > 1 only), by topology and the chips they span
    lines: dict[tuple[int, int], CollectiveLine] = {}
    none = CollectiveLine(0.0, 0.0, "none", "")  # one stage sends nothing
    pairs, pair_of = np.unique(system_of * len(plans) + plan_of, return_inverse=True)
    send = []
    for pair in pairs.tolist():
        system, plan = systems[pair // len(plans)], plans[pair % len(plans)]
        key = (id(system.levels), plan.pp, plan.chain)
        if plan.hops and key not in lines:
            span = plan.tp * plan.pp
            lines[key] = hop_line(system, plan) if plan.chain > 1 else collective_line(
                system, Collective.SEND_RECV, 2, span)  # fmt: skip
        send.append(lines.get(key, none))
    send_fixed_s, send_s_per_byte = (np.array(v)[pair_of.reshape(-1)] for v in zip(
        *[(line.fixed_s, line.s_per_byte) for line in send], strict=True))
    per_token = hidden_state_bytes(cfg, batch.reqs[0].act)

    def send_s(tokens: np.ndarray) -> np.ndarray:
        return send_fixed_s + send_s_per_byte * (sequences * tokens * per_token)

    pre, dec = stage_times(prefill)[:, 0], stage_times(decode)  # (K, stages), (K, steps, stages)
    send_pre, send_dec = send_s(prompt), send_s(np.ones_like(prompt))
    ttft_s = ordered_sum(pre, axis=-1) + hops * send_pre + draft_s
    trip = ordered_sum(dec, axis=-1) + (hops * send_dec)[:, None]
    step_s = decode.step_mean(np.maximum(trip, m[:, None] * dec.max(axis=-1))) + draft_step_s
    tpot_s = step_s / advance  # a speculative step outputs `advance` tokens, expected
    latency_s = ttft_s + (m - 1) * pre.max(axis=-1) + decode_steps * step_s

    # Energy: every chip's ops, then static power for the time each chip waits.
    group_chips = np.array([p.tp * p.dp for p in plans])[plan_of]
    chips = np.array([s.chips for s in systems])[system_of]
    busy_s = m * (ordered_sum(pre, axis=-1)
                  + decode_steps * decode.step_mean(ordered_sum(dec, axis=-1)))  # fmt: skip
    overlapped = bool(overlap.any())
    op_energy = m * (_phase_energy(prefill, pre[:, None], static_w, overlapped)
                     + decode_steps * _phase_energy(decode, dec, static_w, overlapped))  # fmt: skip
    energy_j = group_chips * op_energy + static_w * (chips * latency_s - group_chips * busy_s)
    if any(batch.drafts):  # its chips' energy over its time, static power included
        dp = np.array([p.dp for p in plans])[plan_of]
        draft_busy_s = m * (draft_s + decode_steps * draft_step_s)
        energy_j = (energy_j - static_w * group_chips * draft_busy_s
                    + dp * m * (draft_j + decode_steps * draft_step_j))  # fmt: skip

    comm_s = decode.step_mean(decode.totals("time_s", comm_only=True))
    comm_s += hops * send_dec
    send_total_s = hops * (send_pre + decode_steps * send_dec)
    return Metrics(
        ttft_s, tpot_s, latency_s, energy_j, comm_s, decode.step_mean(trip),
        send_pre, send_dec,  # zero at pp 1: its line is `none`
        (prefill, decode), decode_steps, send_total_s,
    )  # fmt: skip


def _phase_energy(
    phase: PhaseCosts, stage_s: np.ndarray, static_w: np.ndarray, overlapped: bool
) -> np.ndarray:
    """Energy of one microbatch's pass through all stages, on one chip of each stage.

    With overlap, a stage takes less than the sum of its ops' times; the static energy of
    the hidden time was counted in both overlapped ops and is taken back once.
    """
    energy = phase.totals("energy_j")
    if overlapped:
        hidden = ordered_sum(phase.stage_sums("time_s"), axis=-1) - ordered_sum(stage_s, axis=-1)
        energy = energy - static_w[:, None] * hidden
    return phase.step_mean(energy)


def _bottleneck(
    prefill: PhaseCosts, decode: PhaseCosts, decode_steps: np.ndarray, send_s: np.ndarray,
    ks: np.ndarray | slice,
) -> np.ndarray:  # fmt: skip
    """The label carrying the most time over the request's path of each plan `ks` indexes:
    each op's time (decode's averaged over the steps) goes to its own bottleneck; pipeline
    sends to interconnect."""
    totals = np.zeros((len(send_s), len(Bottleneck)))
    totals[:, Bottleneck.INTERCONNECT] = send_s
    for phase, repeats in ((prefill, np.ones(1)), (decode, decode_steps)):
        mean = [phase.op_mean(f, ks) for f in
                ("compute_s", "memory_s", "overhead_s", "comm_s", "power_s", "time_s")]  # (k, n)
        labels = bottleneck_of(*mean[:5])
        time = mean[5] * phase.table.count * repeats[:, None]
        for label in Bottleneck:
            totals[:, label] += np.where(labels == label, time, 0.0).sum(axis=-1)
    return np.argmax(totals, axis=-1)
