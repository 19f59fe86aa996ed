"""Time Triton's compile of AITER's block-scaled FP8 GEMM for one GPU target, once for each
new GRID_MN, the figure behind engines.toml jit_compile_s.

AITER's `_gemm_a8w8_blockscale_kernel` takes GRID_MN = cdiv(M, BLOCK_SIZE_M) x cdiv(N,
BLOCK_SIZE_N) as a tl.constexpr, so every new bucket of M (a prompt step's tokens) compiles
a new variant of each GEMM shape (ROCm/aiter PR #5217). This compiles the kernel ahead of
time for a ROCm target, which needs no AMD GPU: Triton's AMD backend lowers it to an object
file; ROCm's linker is not needed either, as a stand-in copies the object (the link, a few
milliseconds, is left out of the time). It reports each compile's wall and CPU seconds:
the CPU time is the work, whatever else the machine runs.

    python -m venv /tmp/tri && /tmp/tri/bin/pip install triton==3.4.0
    /tmp/tri/bin/python benchmarks/triton_compile_time.py \
        /work/.mirror/ROCm+aiter/repo e4048607a5 gfx942

The kernel's source and its two helper modules are read from an AITER git repository
(`git show COMMIT:path`) into a temporary package; nothing of AITER is kept here.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FILES = ("aiter/ops/triton/utils/_triton/pid_preprocessing.py",
         "aiter/ops/triton/utils/_triton/kernel_repr.py",
         "aiter/ops/triton/_triton_kernels/gemm/basic/gemm_a8w8_blockscale.py")  # fmt: skip
# DeepSeek-R1's dense block-FP8 GEMMs at TP 8, (N, K); M: a 1k prompt's two buckets and
# an 8k prompt's first (the configs' 'any' tile: 128 x 128 x 128, 4 warps, 2 stages)
SHAPES = ((2112, 7168), (3072, 1536), (7168, 2048), (4608, 7168), (7168, 2304), (512, 7168),
          (7168, 256))  # fmt: skip
TOKENS = (7 * 128, 8 * 128, 52 * 128)
LINKER = "#!/bin/sh\n[ \"$1\" = --version ] && { echo 'LLD 20 (stand-in)'; exit 0; }\n" \
    "while [ $# -gt 0 ]; do case $1 in -o) o=$2; shift 2;; -flavor) shift 2;; " \
    "-shared) shift;; *) i=$1; shift;; esac; done\ncp \"$i\" \"$o\"\n"


def unpack(repo: str, commit: str, into: Path) -> None:
    """The kernel and its helpers as a package under `into` (config loading stubbed)."""
    for path in FILES:
        target = into / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(subprocess.check_output(["git", "-C", repo, "show", f"{commit}:{path}"],
                                                  text=True))  # fmt: skip
    utils = into / "aiter/ops/triton/utils"
    (utils / "gemm_config_utils.py").write_text("def get_gemm_config(*args, **kwargs):\n"
                                                "    raise NotImplementedError\n")
    for folder in [p for p in into.rglob("*") if p.is_dir()]:
        (folder / "__init__.py").touch()


def main(repo: str, commit: str, arch: str) -> list[dict]:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.runtime.jit import JITFunction

    work = Path(tempfile.mkdtemp(prefix="aiter-compile-"))
    unpack(repo, commit, work)
    linker = work / "ld.lld"
    linker.write_text(LINKER)
    linker.chmod(0o755)
    os.environ |= {"TRITON_HIP_LLD_PATH": str(linker), "TRITON_CACHE_DIR": str(work / "cache")}
    sys.path.insert(0, str(work))
    from aiter.ops.triton._triton_kernels.gemm.basic.gemm_a8w8_blockscale import (
        _gemm_a8w8_blockscale_kernel as kernel,
    )

    while not isinstance(kernel, JITFunction):  # under its heuristics
        kernel = kernel.fn
    fp8 = "fp8e4b8" if arch == "gfx942" else "fp8e4nv"  # gfx942's FP8 is e4m3fnuz
    pointers = {"a_ptr": f"*{fp8}", "b_ptr": f"*{fp8}", "c_ptr": "*bf16",
                "a_scale_ptr": "*fp32", "b_scale_ptr": "*fp32"}  # fmt: skip
    names = kernel.arg_names
    rows = []
    for n, k in SHAPES:
        for m in TOKENS:
            consts = dict(GROUP_K=128, GROUP_N=128, BLOCK_SIZE_M=128, BLOCK_SIZE_N=128,
                          BLOCK_SIZE_K=128, GROUP_SIZE_M=1, NUM_KSPLIT=1, SPLITK_BLOCK_SIZE=k,
                          EVEN_K=True, GRID_MN=-(-m // 128) * -(-n // 128), cache_modifier="",
                          num_stages=2)  # fmt: skip
            signature = {a: "constexpr" if a in consts else pointers.get(a, "i32") for a in names}
            source = ASTSource(fn=kernel, signature=signature,
                               constexprs={(names.index(a),): v for a, v in consts.items()})
            wall, cpu = time.perf_counter(), time.process_time()
            triton.compile(source, target=GPUTarget("hip", arch, 64),
                           options=dict(num_warps=4, num_stages=2, waves_per_eu=2,
                                        matrix_instr_nonkdim=16,
                                        kpack=2 if arch == "gfx942" else 1))  # fmt: skip
            rows.append(dict(N=n, K=k, M=m, wall_s=round(time.perf_counter() - wall, 3),
                             cpu_s=round(time.process_time() - cpu, 3)))  # fmt: skip
            print(json.dumps(rows[-1]), flush=True)
    cpu = [r["cpu_s"] for r in rows]
    print(f"{len(rows)} compiles for {arch} (Triton {triton.__version__}): CPU s median "
          f"{statistics.median(cpu):.3g}, range {min(cpu):.3g}-{max(cpu):.3g}")
    return rows


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: triton_compile_time.py AITER_REPO COMMIT ARCH (gfx942)")
    main(*sys.argv[1:])
