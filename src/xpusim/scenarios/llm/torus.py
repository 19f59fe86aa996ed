"""Pope et al.'s torus layouts offered to `run`'s plan search beside its (tp, pp, dp) plans.

On a system whose chips form a torus (TPU v4/v5p/v6e/v7, Trainium2), a dense transformer
may also be served with the layouts of compiler/torus_layouts.py: weights split over two
axis groups at once, a multi-query cache split by sequence, weights gathered for large
prefills, collectives inside the matmuls. Each phase takes its own layout from the same
weight split (ExFyz, Pope section 3.2.3: only the communication changes between phases),
the one of least time whose fullest chip holds the weights, the longest cache and the
phase's activations. Layouts that hide their collectives behind the matmuls are offered with
`--overlap` only, as `run` hides its own plans' collectives only then: by default both
serialize them, so that neither is credited with an overlap the other is denied. The
answer is a layout's when it fits and the searched plan does not, or when it beats that
plan on the job's objective (TPOT, or tokens/s), the plan costed the same way; otherwise
the searched plan stands.

A layout's figures come from compiler/torus_layouts.py's per-step cost (no op graph): the
result names the layout and has no per-op rows.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from xpusim.compiler.partition import Plan, weight_bytes
from xpusim.compiler.torus_layouts import LayoutCost, layout_cost, layouts
from xpusim.scenarios.llm.plans import Setup
from xpusim.workloads.transformer_config import TransformerConfig

if TYPE_CHECKING:  # inference.py calls offer_layouts: its types only, not the module
    from xpusim.scenarios.llm.inference import LLMInferenceResult


def on_torus(setup: Setup) -> bool:
    """Whether the system's chips form one torus (its first level holds them all)."""
    levels, chips = setup.system.levels, setup.system.chips
    return bool(levels) and levels[0].kind == "torus" and 1 < chips <= levels[0].size


def layout_model(cfg: TransformerConfig) -> bool:
    """Whether the layouts cost this model: dense multi-head or multi-query attention."""
    return cfg.num_experts <= 1 and not cfg.is_mla and not cfg.ssm \
        and not cfg.is_encoder_decoder and not cfg.bounded_layers


@dataclass(frozen=True)
class PhaseLayout:
    time: LayoutCost  # its cost at the phase's mean context
    memory: LayoutCost  # its footprint at the phase's longest context


def _phase(cfg: TransformerConfig, setup: Setup, tokens: int, mean_context: float,
           longest_context: int) -> PhaseLayout | None:  # fmt: skip
    """The phase's fastest layout whose fullest chip fits, or None: each costed at the
    phase's mean context, its cache grown to the longest (a cache holds context + tokens)."""
    system, req = setup.system, setup.req
    chip, chips = system.chip, system.chips
    wbytes = _bytes_per_param(cfg, setup)
    kv = (req.kv or req.act).itemsize
    grown = (longest_context + tokens) / (round(mean_context) + tokens)
    best: PhaseLayout | None = None
    for name, lay in layouts().items():
        if lay.overlap and not setup.overlap:  # as run's plans: overlapped with --overlap
            continue
        time = layout_cost(cfg, chip, chips, name, req.batch, tokens, round(mean_context),
                           wbytes, req.act, kv, system.levels[0])  # fmt: skip
        memory = replace(time, kv_bytes=time.kv_bytes * grown)
        if memory.total_bytes <= chip.capacity_bytes and (
                best is None or time.step_s < best.time.step_s):
            best = PhaseLayout(time, memory)
    return best


def _bytes_per_param(cfg: TransformerConfig, setup: Setup) -> float:
    """The model's weights, each part in its format, per parameter: what the layouts'
    cost takes in place of an op graph's weight tensors."""
    req = setup.req
    return sum(weight_bytes(cfg, Plan(), req.weight, req.act)) / cfg.param_count


def _energy_j(setup: Setup, cost: LayoutCost) -> float:
    """One step on every chip: static power over its time, arithmetic at the chip's energy
    per operation (its compute power budget at peak) and HBM bytes at their energy."""
    chip = setup.system.chip
    hbm = next(m for m in reversed(chip.memory) if m.kind.holds_tensors)
    per_chip = (chip.energy.static_power_w.value * cost.step_s
                + chip.compute_power_budget_w * cost.flops / chip.peak(setup.req.act)
                + cost.hbm_bytes * hbm.energy_pj_per_byte.value * 1e-12)  # fmt: skip
    return per_chip * cost.chips


def _bound(cost: LayoutCost) -> str:
    terms = {"compute": cost.compute_s, "memory": cost.memory_s,
             "interconnect": cost.link_s + cost.hop_s}  # fmt: skip
    return max(terms, key=terms.__getitem__)


def _beats(cfg: TransformerConfig, setup: Setup, plan: dict[str, int], dec: LayoutCost,
           latency_s: float) -> bool:  # fmt: skip
    """Whether the layouts beat the searched plan on the job's objective, both costed the
    same way: the plan as Megatron tensor parallelism over its tp chips ("ws-1d") for the
    job's batch, which each of its dp replicas runs (its pipeline stages run a token's
    layers one after another, so a step takes as long). Comparing the layouts' per-step
    cost with run's op-level one would credit the layouts with what their coarser cost
    leaves out (vector ops, per-op overheads), not with their splits."""
    req, system = setup.req, setup.system
    tp, dp = plan.get("tp", 1), plan.get("dp", 1)
    wbytes = _bytes_per_param(cfg, setup)
    kv = (req.kv or req.act).itemsize
    batch = req.batch  # per replica: dp replicas hold dp x batch in flight
    mean = round(req.prompt + (req.gen - 1) / 2)
    level = system.levels[0].sliced(tp)
    hidden = setup.overlap  # with --overlap, the plan's collectives hidden too
    same = layout_cost(cfg, system.chip, tp, "ws-1d", batch, 1, mean, wbytes, req.act, kv,
                       level)  # fmt: skip
    if setup.objective == "throughput":
        pre = layout_cost(cfg, system.chip, tp, "ws-1d", batch, req.prompt, 0, wbytes,
                          req.act, kv, level)  # fmt: skip
        plan_latency_s = pre.step_with(hidden) + req.decode_steps * same.step_with(hidden)
        return req.batch / latency_s > batch * dp / plan_latency_s
    return dec.step_s < same.step_with(hidden)


def layouts_offered(cfg: TransformerConfig, setup: Setup) -> bool:
    """Whether the layouts are offered to this job: a plan search, on a torus, of a model
    they cost, decoding one sequence at a time."""
    return setup.objective is not None and on_torus(setup) and layout_model(cfg) \
        and setup.decoding.width == 1 and setup.decoding.draft is None


def offer_layouts(cfg: TransformerConfig, setup: Setup,
                  result: LLMInferenceResult) -> LLMInferenceResult:  # fmt: skip
    """`result` (the plan search's), or the layouts' answer where it is better."""
    found = layouts_answer(cfg, setup, result.fits, result.plan)
    return result if found is None else answered(cfg, setup, result, *found)


def layouts_answer(cfg: TransformerConfig, setup: Setup, fits: bool,
                   plan: dict[str, int]) -> tuple[PhaseLayout, PhaseLayout] | None:  # fmt: skip
    """The (prefill, decode) layouts that answer the job in place of its searched plan
    (which `fits` or not, of these degrees), or None where the plan stands: all a sweep
    asks of most of its rows, before any result object is made (inference._table)."""
    req = setup.req
    if not layouts_offered(cfg, setup):
        return None
    longest = req.prompt + req.gen - 1
    decode = _phase(cfg, setup, 1, req.prompt + (req.gen - 1) / 2, longest)
    if decode is None:
        return None
    latency = setup.objective != "throughput"  # decided on TPOT: no prefill to cost first
    if latency and fits and not _beats(cfg, setup, plan, decode.time, 0.0):
        return None
    prefill = _phase(cfg, setup, req.prompt, 0, 0)
    if prefill is None:
        return None
    latency_s = prefill.time.step_s + req.decode_steps * decode.time.step_s
    if not latency and fits and not _beats(cfg, setup, plan, decode.time, latency_s):
        return None
    return prefill, decode


def answered(cfg: TransformerConfig, setup: Setup, result: LLMInferenceResult,
             prefill: PhaseLayout, decode: PhaseLayout) -> LLMInferenceResult:  # fmt: skip
    """`result` answered by the layouts (layouts_answer's)."""
    req = setup.req
    pre, dec = prefill.time, decode.time
    steps = req.decode_steps
    ttft_s, tpot_s = pre.step_s, dec.step_s
    latency_s = ttft_s + steps * tpot_s
    tokens = req.output_tokens
    chips = setup.system.chips
    energy_j = _energy_j(setup, pre) + steps * _energy_j(setup, dec)
    fullest = max((prefill.memory, decode.memory), key=lambda c: c.total_bytes)
    capacity = setup.system.chip.capacity_bytes
    per_chip = replace(result.per_chip_memory_bytes, weights=fullest.weight_bytes,
                       kv_cache=fullest.kv_bytes, activations=fullest.activation_bytes,
                       total=fullest.total_bytes, capacity=capacity)  # fmt: skip
    whole = replace(per_chip, **{k: v * chips for k, v in vars(per_chip).items()})
    named = f"prefill {pre.layout}, decode {dec.layout}"
    comm_s = dec.link_s + dec.hop_s
    search = dict(result.plan_search or {})
    search["layouts"] = {"prefill": pre.layout, "decode": dec.layout}
    search["runner_up"] = {"plan": result.plan, "fits": result.fits, "tpot_s": result.tpot_s,
                           "ttft_s": result.ttft_s, "tokens_per_s": result.tokens_per_s}
    note = (f"torus layouts (Pope et al., compiler/torus_layouts.py): {named}; decode "
            f"{dec.x_chips}x{chips // dec.x_chips} (d_model x d_ff), compute "
            f"{dec.compute_s * 1e3:.2f} ms, memory {dec.memory_s * 1e3:.2f} ms, links "
            f"{dec.link_s * 1e3:.2f} ms, collective latency {dec.hop_s * 1e3:.2f} ms a step; "
            f"no per-op rows")  # fmt: skip
    return replace(
        result, plan={"tp": chips, "pp": 1, "dp": 1, "ep": 1}, layout=named, fits=True,
        reason="", memory_bytes=whole, per_chip_memory_bytes=per_chip, placement={},
        ttft_s=ttft_s, tpot_s=tpot_s, latency_s=latency_s, tokens_per_s=tokens / latency_s,
        tokens_per_s_per_user=1.0 / tpot_s, energy_j=energy_j, joules_per_token=energy_j / tokens,
        avg_power_w=energy_j / latency_s / chips, bottleneck=_bound(dec), comm_s=comm_s,
        comm_share=comm_s / tpot_s, prefill_flops=pre.flops * chips,
        decode_flops_per_step=dec.flops * chips, plan_search=search,
        notes=[*result.notes, note], ops=[], collectives=[], microbatches=1,
        sequences_in_flight=req.batch,
    )  # fmt: skip
