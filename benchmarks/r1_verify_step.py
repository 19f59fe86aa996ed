"""Prices DeepSeek-R1's MTP verify attention on 8 B200 under SGLang op by op, the NVFP4
checkpoint beside the FP8 one, at the same shape (docs/validation.md "DeepSeek-R1's MTP
verify: kv_b_proj read once a step, and SGLang's BF16 absorbed products"; issue #48). The
InferenceX runs it answers (published.json inferencex-dsr1-b200-sglang-fp4-mtp-* and
-fp8-mtp-*) launch both with `--attention-backend trtllm_mla --kv-cache-dtype fp8_e4m3`,
TP 8, MTP with 2 draft tokens: a verify runs 3 tokens a sequence.

    python benchmarks/r1_verify_step.py [SEQUENCES [CONTEXT]]   # default 493 and 1,400

Needs xpusim on the path; it changes nothing. It prints, for each checkpoint, the verify's
ops (StepCost.verify: q_absorb, the MLA attention over the cached latents, v_absorb) as
`serve --engine sglang` stamps them, each op's microseconds a layer and the three ops' sum
over the 61 layers, with each op's compute format and the bytes of weights it reads.
"""

from __future__ import annotations

import sys
from dataclasses import replace

import numpy as np

CHIP, TP, DRAFT_TOKENS = "b200", 8, 2
SETUPS = (  # label, zoo id, precision, weight precision
    ("NVFP4 (FP4-V2)", "deepseek-r1-0528-fp4-v2", "nvfp4", None),
    ("FP8 (block-scaled)", "deepseek-r1-0528", "fp8", "fp8-block"),
)


def verify_ops(model: str, precision: str, weight: str | None, sequences: int,
               context: int) -> list[tuple[str, str, float, float]]:  # fmt: skip
    """(op, compute format, weight bytes read, microseconds a layer) of one verify of
    `sequences` sequences of DRAFT_TOKENS + 1 tokens over `context` cached tokens each."""
    import xpusim
    from xpusim.ir.tensor import ROLES, Role
    from xpusim.scenarios.llm.inference import chosen_plan
    from xpusim.serving.engines import engine
    from xpusim.serving.step_cost import step_cost

    cfg = xpusim.model(model)
    setup, cand = chosen_plan(cfg, xpusim.target(CHIP), {
        "chips": TP, "tp": TP, "batch": sequences, "prompt": context, "gen": 2,
        "precision": precision, "weight_precision": weight, "kv_precision": "fp8",
        "moe_backend": "TRTLLM"})  # fmt: skip
    req = replace(setup.req, kernels=engine("sglang").kernels_on("NVIDIA", cfg, 1, "TRTLLM"))
    q = DRAFT_TOKENS + 1
    verify = step_cost(cfg, setup.system, replace(cand.plan, dp=1), req, cand.placement, 64, 8,
                       context + q, verify_tokens=q).verify  # fmt: skip
    n, c = sequences, context
    basis = np.array([(n, n * q, n * c, n * q * c, n * q * q)], dtype=float)
    weights = verify.coefficients[2].reshape(5, len(ROLES), -1)[0, ROLES.index(Role.WEIGHT)]
    found = []
    for i, op in enumerate(verify.table.ops):
        alone = np.zeros_like(verify.counts)
        alone[i] = verify.counts[i]
        stage_s, _ = replace(verify, counts=alone).cost(basis)
        found.append((op.name.split(".", 2)[-1], str(op.attr("compute")), float(weights[i]),
                      float(stage_s.sum()) / float(verify.counts[i].sum()) * 1e6))
    return found


def main() -> int:
    sequences = int(sys.argv[1]) if len(sys.argv) > 1 else 493
    context = int(sys.argv[2]) if len(sys.argv) > 2 else 1400
    for label, model, precision, weight in SETUPS:
        ops = verify_ops(model, precision, weight, sequences, context)
        print(f"\n{label}: {sequences} sequences x {DRAFT_TOKENS + 1} tokens over {context:,} "
              f"keys, {CHIP} TP{TP} (SGLang's kernels)")  # fmt: skip
        for name, compute, weight_bytes, us in ops:
            print(f"  {name:10s} {compute:5s} weights {weight_bytes / 1e6:6.2f} MB  {us:8.1f} us")
        print(f"  verify, 61 layers: {sum(us for *_, us in ops) * 61 / 1e3:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
