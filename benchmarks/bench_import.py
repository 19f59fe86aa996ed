"""How long and how much memory importing a 70B Llama through torch.export takes.

    python benchmarks/bench_import.py                 # needs the torch extra (torch, transformers)

Builds transformers' LlamaForCausalLM with the zoo's llama-2-70b config on the meta device
(no weights are allocated), imports it with `xpusim.from_torch` at batch 1 x 128 tokens
(torch.export, then the lowering to IR) and reports the wall time of each step and the
process's peak resident memory. It then compares the imported graph's totals, in fp16 and
compiled as a simulation compiles it, with the zoo builder's prefill graph of llama-2-70b.
Targets (issue 6): import under 20 s and 1.5 GB; totals within 1% of the zoo's.

Then transformers' Mamba-130M (the zoo's mamba-130m config) at 32 tokens, imported with its
scan traced as one fused op (workloads/torch_kernels.py) and, for comparison, traced as
written (a loop over tokens, unrolled): import time, op count and the H100 latency of each
beside the zoo config's. Target (issue 15): the import in seconds.
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


def mamba(tokens: int = 32, chip: str = "h100-sxm") -> None:
    import torch
    from transformers import MambaConfig, MambaForCausalLM

    from xpusim.workloads.torch_import import lower_program

    fields = json.loads((ZOO_DIR / "mamba-130m.json").read_text())
    fields.pop("_xpusim")
    with torch.device("meta"):
        module = MambaForCausalLM(MambaConfig(**fields))
    ids = torch.zeros(1, tokens, dtype=torch.long, device="meta")
    begin = time.perf_counter()
    fused = xpusim.from_torch(module, (ids,), {"use_cache": False}, name="mamba-130m")
    fused_s = time.perf_counter() - begin
    begin = time.perf_counter()
    program = torch.export.export(module, (ids,), kwargs={"use_cache": False})
    unrolled = lower_program(program, "mamba-130m")
    unrolled_s = time.perf_counter() - begin
    config = xpusim.simulate("mamba-130m", chip, batch=1, prompt=tokens, gen=1, precision="bf16")
    print(f"mamba-130m via torch.export on meta tensors, batch 1 x {tokens} tokens, on {chip}")
    print(f"  {'':<22} {'import':>8} {'IR ops':>7} {'latency':>10}")
    for label, model, seconds in [("scan as one op", fused, fused_s),
                                  ("scan loop unrolled", unrolled, unrolled_s)]:  # fmt: skip
        latency = xpusim.simulate(model, chip, precision="bf16").latency_s
        print(f"  {label:<22} {seconds:7.1f}s {len(model.graph.ops):7d} {latency * 1e3:8.2f} ms")
    print(f"  {'zoo config (prefill)':<22} {'':>8} {'':>7} {config.ttft_s * 1e3:8.2f} ms")


if __name__ == "__main__":
    main()
    mamba()
