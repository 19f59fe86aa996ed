"""Regenerates the `sglcook-` points of src/xpusim/validation/published.json: the SGLang
cookbook's Qwen3 speed benchmark (sgl-project/sgl-cookbook, docs/autoregressive/Qwen/Qwen3.md
section '5.1 Speed Benchmark'), Qwen3-235B-A22B-Instruct-2507 in BF16 on eight B200 under
SGLang 0.5.6 (`python -m sglang.launch_server --model Qwen/Qwen3-235B-A22B-Instruct-2507
--tp 8`), a closed loop of 1, 16, 64 or 100 `sglang.bench_serving` clients.

    python benchmarks/sgl_cookbook_points.py /path/to/sgl-cookbook.git

Needs git only; the directory may be a bare mirror of github.com/sgl-project/sgl-cookbook.
The page (PAGE at COMMIT, the page's latest change) states the test environment ('NVIDIA
B200 GPU (8x)', 'Tensor Parallelism: 8', 'sglang version: 0.5.6'), and for each of three
scenarios (1000 -> 1000, 1000 -> 8000 and 8000 -> 1000 tokens) the launch, then three
'Benchmark Command' blocks (`python3 -m sglang.bench_serving --backend sglang --dataset-name
random --random-input-len I --random-output-len O --num-prompts N --max-concurrency C`) each
followed by its printed result. The client's --random-range-ratio is left at its default 0:
every prompt and answer length is drawn uniformly from [1, I] and [0, O] (bench_serving's
sample_random_requests under seed 1: numpy's randint of those bounds reproduces every printed
'Total input tokens' and 'Total generated tokens' of the page exactly), so the points take
the run's printed means as prompt and gen with the uniform spread RANGE_SPREAD about them.
Each run gives two points: the median TTFT and the median TPOT (the means, p99 and output
throughput are in its notes). The page calls the data ShareGPT, but every command uses
--dataset-name random. The points replace every `sglcook-` point in place, or go just
before the `inferencex-` block (nim_dli_points.write).
"""

from __future__ import annotations

import re
import subprocess
from typing import Any

from nim_dli_points import write_from_mirror

COMMIT = "8e3bdb7e3f5ff87bd4cd7f65014e0e32634df894"  # 2026-01-14, the page's latest change
PAGE = "docs/autoregressive/Qwen/Qwen3.md"
SOURCE = f"github.com/sgl-project/sgl-cookbook (commit {COMMIT[:12]}) {PAGE}"
PREFIX = "sglcook-"
LAUNCH = "python -m sglang.launch_server --model Qwen/Qwen3-235B-A22B-Instruct-2507 --tp 8"
RANGE_SPREAD = 0.998
"""Lengths uniform from 1 to the stated length L (range ratio 0) have a mean of (L + 1) / 2
and reach (L - 1) / (L + 1) of it either side: 0.998 at L = 1000 (0.99975 at 8000), serve's
--spread about the run's mean."""
METRICS = (  # metric, the printed field (ms), stat, id suffix
    ("ttft_s", "Median TTFT (ms)", "p50", "ttft"),
    ("tpot_s", "Median TPOT (ms)", "p50", "tpot"),
)
NOTES = (
    "SGLang cookbook, Qwen3, '5.1 Speed Benchmark' ('Hardware: NVIDIA B200 GPU (8x)', "
    "'Model: Qwen3-235B-A22B-Instruct-2507', 'Tensor Parallelism: 8', 'sglang version: "
    "0.5.6'), section '{section}': server '{launch}'; client '{client}' (range ratio 0: "
    "lengths uniform from 1 to the stated ones, seed 1; one warm-up request before, not "
    "counted); {ok} successful requests, {isl} input and {osl} generated tokens in all "
    "(means {isl_mean:.1f} and {osl_mean:.1f}). Field '{field}' (ms, converted to s); the "
    "run's mean TTFT {mean_ttft:g} ms, p99 TTFT {p99_ttft:g} ms, mean TPOT {mean_tpot:g} ms, "
    "output throughput {tok:g} tokens/s. BF16 (the hub's checkpoint, no quantization flag)."
)
XPUSIM_SETUP = (
    "engine profile sglang-0.5.6 (SGLang 0.5.6; the launch sets only --tp 8, so its limits, memory "
    "fraction and overlap scheduler are the profile's defaults on B200); a closed loop of "
    "{conc} clients over the run's {ok} requests, none warm-up; prompts and answers uniform "
    "about the run's means ({isl_mean} and {osl_mean} tokens) with spread {spread}; weights "
    "and KV cache BF16; experts sharded as tensor parallelism (no --ep)"
)
GAP = (
    "serve draws its own lengths about the run's means, not the client's seed-1 draws (the "
    "500-request run's answers include 0-token ones, which serve's floor of 1 does not "
    "give); "
    "{ok} requests of {conc} clients: the loop's ramp and drain are part of the medians"
)


def page(mirror: str) -> str:
    """The page at COMMIT."""
    return subprocess.run(["git", "-C", mirror, "show", f"{COMMIT}:{PAGE}"],
                          capture_output=True, text=True, check=True).stdout  # fmt: skip


def runs(text: str) -> list[tuple[str, str, dict[str, str], dict[str, float]]]:
    """(section, client command, its flags, printed fields) of every bench_serving run of
    section 5.1, the command's block and the result block after it."""
    speed = text.split("### 5.1 Speed Benchmark", 1)[1].split("### 5.2", 1)[0]
    out: list[tuple[str, str, dict[str, str], dict[str, float]]] = []
    section = ""
    blocks = re.split(r"^```.*$", speed, flags=re.M)  # outside, inside, outside, ...
    for i, block in enumerate(blocks):
        if i % 2 == 0:  # prose: the last '#####' heading names the run
            headings = re.findall(r"^#####\s+(.+)$", block, flags=re.M)
            section = headings[-1].strip() if headings else section
        elif "sglang.bench_serving" in block:
            client = " ".join(block.replace("\\\n", " ").split())
            flags = dict(re.findall(r"--([\w-]+) (\S+)", client))
            result = blocks[i + 2]  # the next code block
            assert "Serving Benchmark Result" in result, section
            fields = {k.strip(): float(v) for k, v in
                      re.findall(r"^([^:\n]+):\s+(-?[\d.]+)\s*$", result, flags=re.M)}
            out.append((section, client, flags, fields))  # fmt: skip
    return out


def points(text: str) -> list[dict[str, Any]]:
    """Two points a run: its median TTFT and median TPOT."""
    assert text.count(LAUNCH.replace(" --", " \\\n  --")) == 2, "the launches changed"
    out: list[dict[str, Any]] = []
    for section, client, flags, f in runs(text):
        conc, ok = int(f["Max request concurrency"]), int(f["Successful requests"])
        assert (conc, ok) == (int(flags["max-concurrency"]), int(flags["num-prompts"])), client
        assert flags["dataset-name"] == "random" and "random-range-ratio" not in flags, client
        isl, osl = int(f["Total input tokens"]), int(f["Total generated tokens"])
        setup = {
            "workload": "llm-serving", "chip": "b200", "chips": 8, "tp": 8,
            "model": "qwen3-235b-a22b-instruct-2507", "precision": "bf16",
            "weight_precision": None, "kv_precision": "bf16", "engine": "sglang",
            "engine_version": "SGLang 0.5.6", "engine_profile": "sglang-0.5.6",
            "load": {"kind": "concurrency", "value": conc, "requests": ok, "warmup": 0},
            "prompt": round(isl / ok), "gen": round(osl / ok), "spread": RANGE_SPREAD,
        }  # fmt: skip
        base = (f"{PREFIX}qwen3-235b-b200x8-sglang-{flags['random-input-len']}-"
                f"{flags['random-output-len']}-c{conc}")  # fmt: skip
        facts = dict(section=section, launch=LAUNCH, client=client, ok=ok, isl=isl, osl=osl,
                     isl_mean=isl / ok, osl_mean=osl / ok, mean_ttft=f["Mean TTFT (ms)"],
                     p99_ttft=f["P99 TTFT (ms)"], mean_tpot=f["Mean TPOT (ms)"],
                     tok=f["Output token throughput (tok/s)"])  # fmt: skip
        for metric, field, stat, suffix in METRICS:
            out.append({
                "id": f"{base}-{suffix}", **setup, "stat": stat, "metric": metric,
                "value": round(f[field] * 1e-3, 6), "unit": "s",
                "source": f"{SOURCE}, section '{section}', field '{field}'",
                "notes": NOTES.format(**facts, field=field),
                "xpusim_setup": XPUSIM_SETUP.format(
                    conc=conc, ok=ok, isl_mean=setup["prompt"], osl_mean=setup["gen"],
                    spread=RANGE_SPREAD),
                "known_gap": GAP.format(ok=ok, conc=conc),
            })  # fmt: skip
    return out


def main() -> None:
    write_from_mirror(__doc__, "git directory of sgl-cookbook (or a fork holding COMMIT)",
                      lambda mirror: points(page(mirror)), PREFIX, len(METRICS))


if __name__ == "__main__":
    main()
