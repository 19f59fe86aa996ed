"""How long and how much memory importing a 70B Llama through torch.export takes.

    python benchmarks/bench_import.py                 # needs the torch extra (torch, transformers)

Builds transformers' LlamaForCausalLM with the zoo's llama-2-70b config on the meta device
(no weights are allocated), imports it with `xpusim.from_torch` at batch 1 x 128 tokens
(torch.export, then the lowering to IR) and reports the wall time of each step and the
process's peak resident memory. It then compares the imported graph's totals, in fp16 and
compiled as a simulation compiles it, with the zoo builder's prefill graph of llama-2-70b.
Targets (issue 6): import under 20 s and 1.5 GB; totals within 1% of the zoo's.
"""

from __future__ import annotations

import json
import resource
import time

import xpusim
from xpusim.ir.tensor import Role
from xpusim.workloads.zoo import ZOO_DIR

MODEL, BATCH, PROMPT, PRECISION = "llama-2-70b", 1, 128, "fp16"


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9  # Linux: KiB


def main() -> None:
    start = time.perf_counter()
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    imported_s = time.perf_counter() - start
    fields = json.loads((ZOO_DIR / f"{MODEL}.json").read_text())
    fields.pop("_xpusim")
    config = LlamaConfig(**fields, use_cache=False)
    with torch.device("meta"):
        module = LlamaForCausalLM(config)
    ids = torch.zeros(BATCH, PROMPT, dtype=torch.long, device="meta")

    begin = time.perf_counter()
    model = xpusim.from_torch(module, (ids,), {"logits_to_keep": 1}, name=MODEL)
    import_s = time.perf_counter() - begin
    rss = peak_rss_gb()

    ours = xpusim.graph(model, precision=PRECISION)
    zoo = xpusim.graph(MODEL, batch=BATCH, prompt=PROMPT, precision=PRECISION)
    print(f"{MODEL} via torch.export on meta tensors, batch {BATCH} x {PROMPT} tokens")
    print(f"  import torch + transformers  {imported_s:6.2f} s")
    print(f"  from_torch (export + lower)  {import_s:6.2f} s   target < 20 s")
    print(f"  peak resident memory         {rss:6.2f} GB  target < 1.5 GB")
    print(f"  IR ops: {len(model.graph)} lowered, {len(ours)} after fusion; zoo: {len(zoo)}")
    print(f"  {'total':<14} {'imported':>12} {'zoo':>12} {'difference':>11}  (fp16, target 1%)")
    for label, a, b in [
        ("FLOPs", ours.flops, zoo.flops),
        ("matrix FLOPs", ours.matrix_flops, zoo.matrix_flops),
        ("bytes", ours.bytes, zoo.bytes),
        ("weight bytes", ours.tensor_bytes(Role.WEIGHT), zoo.tensor_bytes(Role.WEIGHT)),
    ]:
        print(f"  {label:<14} {a:12.4e} {b:12.4e} {a / b - 1:+10.3%}")


if __name__ == "__main__":
    main()
