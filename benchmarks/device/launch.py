"""What a near-empty kernel costs back to back on an NVIDIA GPU: in a CUDA graph (as engines
run decode steps) and launched eagerly from Python.

    python benchmarks/device/launch.py --out launch.csv

xpusim charges every op `overhead.per_op_s` of dispatch (2 us on the H100 and H200, assumed:
"kernel-to-kernel gap under CUDA graphs, a few microseconds") and every matmul the
calibration's fixed time on top; these rows say what a kernel that does almost nothing
takes: the floor under both. Each row is the median over 10 replays of 1,000 launches.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

LAUNCHES = 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    import torch
    import torch.nn.functional as F

    sys.path.insert(0, str(Path(__file__).parent))
    from measure import captured, median_replay_s, source_of, write_rows

    dev, bf16 = "cuda", torch.bfloat16
    one, vector = torch.zeros(1, device=dev), torch.zeros(8192, device=dev, dtype=bf16)
    h, w = torch.randn(1, 8192, device=dev, dtype=bf16), torch.ones(8192, device=dev, dtype=bf16)
    a = torch.randn(1, 128, device=dev, dtype=bf16)
    b = torch.randn(128, 128, device=dev, dtype=bf16)
    kernels = {
        "add_ of 1 fp32 element": lambda: one.add_(1.0),
        "add_ of 8192 bf16 elements": lambda: vector.add_(1.0),
        "rms_norm of 1 x 8192 bf16 (several kernels in eager PyTorch)":
            lambda: F.rms_norm(h, (8192,), w),
        "matmul 1 x 128 x 128 bf16": lambda: a @ b,
    }  # fmt: skip
    rows = []
    for name, fn in kernels.items():
        graph = median_replay_s(captured(fn, LAUNCHES).replay, LAUNCHES, 10)
        eager = median_replay_s(lambda fn=fn: [fn() for _ in range(LAUNCHES)], LAUNCHES, 10)
        rows.append(dict(kernel=name, graph_s=graph, eager_s=eager,
                         source=source_of("launch.py")))
        print(f"{name}: {graph * 1e6:.2f} us in a graph, {eager * 1e6:.2f} us eagerly",
              file=sys.stderr)  # fmt: skip
    write_rows(args.out, rows)


if __name__ == "__main__":
    main()
