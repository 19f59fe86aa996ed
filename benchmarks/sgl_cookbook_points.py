"""Regenerates the `sglcook-` points of src/xpusim/validation/published.json: the speed
benchmarks the SGLang cookbook (sgl-project/sgl-cookbook) prints on its model pages, a closed
loop of 1-100 `sglang.bench_serving` clients against one launch, each run's medians of TTFT
and TPOT.

    python benchmarks/sgl_cookbook_points.py /path/to/sgl-cookbook.git

Needs git only; the directory may be a bare mirror of github.com/sgl-project/sgl-cookbook
holding every page's commit in PAGES (each page at its latest change as of 7b5bd9c,
2026-05). A page states a test environment ('Hardware: NVIDIA B200 GPU (8x)', 'Tensor
Parallelism: 8', 'sglang version: 0.5.8'), then launches (`sglang serve ...` or `python -m
sglang.launch_server ...`), each followed by 'Benchmark Command' blocks (`python3 -m
sglang.bench_serving --backend sglang --dataset-name random --random-input-len I
--random-output-len O --num-prompts N --max-concurrency C`) and their printed results. A run
is read with the environment and the launch above it, and kept where every setting it states
is one serve runs (SKIPPED says why the others are not).

The client's --random-range-ratio is left at its default 0 on every page kept: each prompt
and answer length is drawn uniformly from [1, I] and [0, O] (bench_serving's
sample_random_requests; on the Qwen3 page numpy's randint of those bounds under seed 1
reproduces every printed 'Total input tokens' and 'Total generated tokens'), so the points
take the run's printed means as prompt and gen with the uniform spread RANGE_SPREAD about
them. The points replace every `sglcook-` point in place, or go just before the
`inferencex-` block (nim_dli_points.write).
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from nim_dli_points import show, write_from_mirror

from xpusim.serving.engines import release_profile

PAGES = {  # page: its latest change as of the mirror's 7b5bd9c (2026-05)
    "docs/autoregressive/Qwen/Qwen3.md": "8e3bdb7e3f5ff87bd4cd7f65014e0e32634df894",
    "docs/autoregressive/DeepSeek/DeepSeek-R1.md": "268193ccf59631fe01880790f184bee7c35eee95",
    "docs/autoregressive/DeepSeek/DeepSeek-V3_1.md": "0e5d0fee1fb07e9636b5c737fdce91061a0ce994",
    "docs/autoregressive/MiniMax/MiniMax-M2.md": "ffd029dc9456b53bb8d8737c7841a2e8ea4a4179",
    "docs/autoregressive/MiniMax/MiniMax-M2.5.md": "7dfb02de3d0148c719b7b734179b34c89dbbef98",
    "docs/autoregressive/Moonshotai/Kimi-K2.5.md": "97c0becebd5c430f759f59c7d595ae1293c9e801",
    "docs/autoregressive/Llama/Llama4.md": "855445bd4d6116d9881e4b6056e62e95d0828f73",
    "docs/autoregressive/Qwen/Qwen3-Coder-Next.md": "60f2595db911f8738d9e4ec0cfe33c84d35d3692",
}
SKIPPED = {  # pages with speed results not read, and why
    "GLM/GLM-4.6.md": "one set of results under 'Hardware: NVIDIA B200 GPU (8x), AMD MI300X "
    "(8x), AMD MI325X (8x), AMD MI355X (8x)': which chip ran them is not said",
    "DeepSeek/DeepSeek-V3.md, DeepSeek/DeepSeek-V3_2.md (B200), OpenAI/GPT-OSS.md, "
    "Qwen/Qwen3-Next.md, Moonshotai/Kimi-K2.md": "the client names no --dataset-name, so "
    "bench_serving draws ShareGPT conversations (its default), whose lengths the page does "
    "not give beyond their totals; the others run EAGLE with no acceptance printed",
    "GLM/GLM-5.md, GLM/GLM-5.1.md, Qwen/Qwen3.5.md": "EAGLE/NEXTN speculative decoding, "
    "no acceptance length printed (and a commit or 'main branch' for the version)",
    "Moonshotai/Kimi-K2.6.md": "its H200 results are Kimi-K2.5's page's, figure for figure",
    "Qwen/Qwen3-Coder.md": "its MI300X launch sets SGLANG_USE_AITER=0 (SGLang's Triton "
    "kernels on ROCm, which no table here times) and --page-size 32",
    "DeepSeek/DeepSeek-V3_2.md (H800), Kimi-K2.5.md (MI350X)": "chips not in the catalog",
}
PREFIX = "sglcook-"
RANGE_SPREAD = 0.998
"""Lengths uniform from 1 to the stated length L (range ratio 0) have a mean of (L + 1) / 2
and reach (L - 1) / (L + 1) of it either side: 0.998 at L = 1000 (0.99975 at 8000), serve's
--spread about the run's mean."""
METRICS = (  # metric, the printed field (ms), stat, id suffix
    ("ttft_s", "Median TTFT (ms)", "p50", "ttft"),
    ("tpot_s", "Median TPOT (ms)", "p50", "tpot"),
)
CHIPS = {"B200": "b200", "H200": "h200-sxm", "H100": "h100-sxm", "MI300X": "mi300x"}
NOTES = (
    "SGLang cookbook, {page}, test environment {env}; server '{launch}'; client '{client}' "
    "(range ratio 0: lengths uniform from 1 to the stated ones; one warm-up request before, "
    "not counted); {ok} successful requests, {isl} input and {osl} generated tokens in all "
    "(means {isl_mean:.1f} and {osl_mean:.1f}). Field '{field}' (ms, converted to s); the "
    "run's mean TTFT {mean_ttft:g} ms, p99 TTFT {p99_ttft:g} ms, mean TPOT {mean_tpot:g} ms, "
    "output throughput {tok:g} tokens/s. Weights as the checkpoint stores them (no "
    "quantization flag)."
)
XPUSIM_SETUP = (
    "engine profile {profile} (SGLang {version}; the launch's other limits are the profile's "
    "defaults on {chip}); a closed loop of {conc} clients over the run's {ok} requests, none "
    "warm-up; prompts and answers uniform about the run's means ({prompt} and {gen} tokens) "
    "with spread {spread}; {plan}; compute {precision}, weights {weights} (the checkpoint's); "
    "KV cache BF16, the engine's 'auto' (the model's 16 bits; no --kv-cache-dtype)"
)
GAP = (
    "serve draws its own lengths about the run's means, not the client's draws (a run's "
    "answers may include 0-token ones, which serve's floor of 1 does not give); {ok} requests "
    "of {conc} clients: the loop's ramp and drain are part of the medians"
)


def flags(command: str) -> dict[str, str]:
    """A command's --flags (`--a b`, `--a=b`, and a bare `--a` as 'true'), env prefix left out."""
    words = shlex.split(command.replace("\\\n", " "))
    out: dict[str, str] = {}
    for i, w in enumerate(words):
        if w.startswith("--"):
            key, _, value = w[2:].partition("=")
            following = words[i + 1] if i + 1 < len(words) else "--"
            out[key] = value or (following if not following.startswith("--") else "true")
    return out


def runs(text: str) -> list[dict[str, Any]]:
    """Every bench_serving run of a page with the environment and launch above it: the
    prose's 'Hardware:'/'Tensor Parallelism:'/'version:' lines (a new 'Hardware:' line starts
    a new environment), the last launch block, the command block and the result after it."""
    out: list[dict[str, Any]] = []
    env: dict[str, str] = {}
    launch = section = ""
    blocks = re.split(r"^\s*```.*$", text, flags=re.M)  # outside, inside, outside, ...
    for i, block in enumerate(blocks):
        if i % 2 == 0:
            headings = re.findall(r"^#+\s+(.+?)\s*$", block, flags=re.M)
            section = headings[-1] if headings else section
            for key, value in re.findall(r"^\s*(?:-\s*)?(Hardware|Tensor Parallelism|Expert "
                                         r"Parallelism|[Ss][Gg][Ll]ang [Vv]ersion):\s*(.+?)\s*$",
                                         block, flags=re.M):  # fmt: skip
                if key == "Hardware":
                    env, launch = {}, ""
                env[key.lower()] = value
        elif "sglang serve" in block or "sglang.launch_server" in block:
            launch = " ".join(block.replace("\\\n", " ").split())
        elif "sglang.bench_serving" in block and env:
            result = blocks[i + 2]  # the next code block
            if "Serving Benchmark Result" not in result:
                continue  # a command whose result the page leaves out
            fields = {k.strip(): float(v) for k, v in
                      re.findall(r"^([^:\n]+):\s+(-?[\d.]+)\s*$", result, flags=re.M)}
            client = " ".join(block.replace("\\\n", " ").split())
            out.append(dict(env=dict(env), launch=launch, client=client, fields=fields,
                            section=section))
    return out


def version(env: dict[str, str]) -> str:
    return next(v for k, v in env.items() if k.endswith("version"))


def profile(stated: str) -> str:
    """The engine profile of a stated release: engines.toml's `releases` say which (the
    sglang-0.5.6 profile, every prompt step eager, stands for the releases before SGLang's
    piecewise CUDA graphs became its default; on AMD both profiles run them eagerly)."""
    return release_profile("sglang", stated)


def setup(run: dict[str, Any]) -> dict[str, Any] | str:
    """A run's setup in serve's terms, or why serve cannot run it as stated."""
    from xpusim.workloads.resolve import resolve

    env, server, client = run["env"], flags(run["launch"]), flags(run["client"])
    found = [chip for name, chip in CHIPS.items() if name.lower() in env["hardware"].lower()]
    if len(found) != 1:
        return f"hardware {env['hardware']!r}: not one chip of the catalog"
    if client.get("dataset-name") != "random" or "random-range-ratio" in client:
        return "not bench_serving's random dataset at range ratio 0"
    if any(k.startswith("speculative") for k in server):
        return "speculative decoding, no acceptance length printed"
    unread = set(server) - {"model", "model-path", "tp", "tp-size", "ep", "ep-size",
                            "mem-fraction-static", "trust-remote-code", "reasoning-parser",
                            "tool-call-parser", "host", "port", "context-length"}  # fmt: skip
    if unread:
        return f"launch flags serve does not take: {sorted(unread)}"
    tp = int(server.get("tp") or server["tp-size"])
    ep = int(server.get("ep") or server.get("ep-size") or 1)
    if int(env.get("tensor parallelism", tp)) != tp:
        return "the environment's tensor parallelism is not the launch's"
    stated = version(env)
    resolved = resolve(server.get("model-path") or server["model"])
    checkpoint = getattr(resolved.workload, "checkpoint", None)  # a quantized repo's formats
    return {
        "workload": "llm-serving", "chip": found[0], "chips": tp, "tp": tp,
        **({"ep": ep} if ep > 1 else {}), "model": resolved.where,
        "precision": (checkpoint and checkpoint.compute) or "bf16",
        "weight_precision": checkpoint and checkpoint.weights, "kv_precision": "bf16",
        "engine": "sglang",
        "engine_version": f"SGLang {stated}", "engine_profile": profile(stated),
        **({"kv_utilization": float(server["mem-fraction-static"])}
           if "mem-fraction-static" in server else {}),
    }  # fmt: skip


def slug(launched: str) -> str:
    """The id's model part: the launched repo's name (the Qwen3 page's first points named
    theirs shorter)."""
    name = launched.rsplit("/", 1)[-1].lower()
    return {"qwen3-235b-a22b-instruct-2507": "qwen3-235b"}.get(name, name)


def points(mirror: str) -> list[dict[str, Any]]:
    """Every page's points (page_points), in PAGES' order."""
    return [p for path in PAGES for p in page_points(path, show(mirror, PAGES[path], path))]


def page_points(path: str, text: str) -> list[dict[str, Any]]:
    """Two points a run kept: its median TTFT and median TPOT."""
    out: list[dict[str, Any]] = []
    for run in runs(text):
        base = setup(run)
        if isinstance(base, str):
            continue
        f, client = run["fields"], flags(run["client"])
        conc, ok = int(f["Max request concurrency"]), int(f["Successful requests"])
        assert (conc, ok) == (int(client["max-concurrency"]), int(client["num-prompts"]))
        isl, osl = int(f["Total input tokens"]), int(f["Total generated tokens"])
        prompt, gen = round(isl / ok), round(osl / ok)
        s = {**base, "load": {"kind": "concurrency", "value": conc, "requests": ok,
                              "warmup": 0},
             "prompt": prompt, "gen": gen, "spread": RANGE_SPREAD}  # fmt: skip
        plan = f"tp {s['tp']}" + (f", experts over the same chips (ep {s['ep']})"
                                  if "ep" in s else ", experts split as tensor parallelism")
        env = "; ".join(f"'{k}: {v}'" for k, v in run["env"].items())
        server = flags(run["launch"])
        chip = s["chip"].split("-")[0]
        rid = (f"{PREFIX}{slug(server.get('model-path') or server['model'])}-{chip}"
               f"{'-' if chip.endswith('x') else ''}x{s['chips']}-sglang-"
               f"{client['random-input-len']}-{client['random-output-len']}-c{conc}")
        facts = dict(page=f"{path} (commit {PAGES[path][:12]})", env=env,
                     launch=run["launch"], client=run["client"], ok=ok, isl=isl, osl=osl,
                     isl_mean=isl / ok, osl_mean=osl / ok, mean_ttft=f["Mean TTFT (ms)"],
                     p99_ttft=f["P99 TTFT (ms)"], mean_tpot=f["Mean TPOT (ms)"],
                     tok=f["Output token throughput (tok/s)"])  # fmt: skip
        for metric, field, stat, suffix in METRICS:
            out.append({
                "id": f"{rid}-{suffix}", **s, "stat": stat, "metric": metric,
                "value": round(f[field] * 1e-3, 6), "unit": "s",
                "source": f"github.com/sgl-project/sgl-cookbook (commit "
                          f"{PAGES[path][:12]}) {path}, section '{run['section']}', "
                          f"field '{field}'",
                "notes": NOTES.format(**facts, field=field),
                "xpusim_setup": XPUSIM_SETUP.format(
                    profile=s["engine_profile"], version=version(run["env"]),
                    chip=s["chip"], conc=conc, ok=ok, prompt=prompt, gen=gen,
                    spread=RANGE_SPREAD, plan=plan, precision=s["precision"],
                    weights=s["weight_precision"] or s["precision"]),
                "known_gap": GAP.format(ok=ok, conc=conc),
            })  # fmt: skip
    return out


def main() -> None:
    write_from_mirror(__doc__, "git directory of sgl-cookbook (holding PAGES' commits)",
                      points, PREFIX, len(METRICS))


if __name__ == "__main__":
    main()
