"""A load test of `xpusim web` on loopback: concurrent clients asking what the page asks.

    python benchmarks/bench_web.py                       # 50 clients for 30 s
    python benchmarks/bench_web.py --clients 10 --seconds 5

Starts `xpusim web` on a free 127.0.0.1 port in a process of its own, then runs `--clients`
clients (asyncio, httpx), each sending its next request when its last is answered, for
`--seconds`. Requests are the page's, in the proportions a person using it makes them, with
shapes varied so that no cache of the simulator's answers them all: the catalog; one run
(batch 1-256, prompt 128-4096, gen 32-1024, a chip drawn from the catalog); a comparison of
four chips; a sweep of 18 points on two chips; a serving run of 100 requests. Every request
is valid: any answer but 200 is an error. Reports requests/s, p50/p99 latency per kind and
overall, and the server's resident memory (from /proc) idle and at each tenth of the time.
docs/web.md has the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

MODELS = ("llama-2-7b", "llama-3-8b", "llama-2-13b", "mixtral-8x7b")
LLM_CHIPS = ("h100-sxm", "h200-sxm", "a100-sxm-80gb", "mi300x", "b200", "tpu-v4", "mtia-v1")


def body(kind: str, rng: random.Random) -> tuple[str, str, dict | None]:
    """A request of this kind, drawn."""
    model = rng.choice(MODELS)
    shape = {"batch": 2 ** rng.randint(0, 8), "prompt": 2 ** rng.randint(7, 12),
             "gen": 2 ** rng.randint(5, 10), "precision": "int8"}  # fmt: skip
    if kind == "chips":
        return "GET", "/api/chips", None
    if kind == "run":
        return "POST", "/api/run", {"model": model, "target": {"chip": rng.choice(LLM_CHIPS)},
                                    "options": shape}  # fmt: skip
    if kind == "compare":
        chips = rng.sample(LLM_CHIPS, 4)
        return "POST", "/api/compare", {"model": model, "options": shape,
                                        "targets": [{"chip": c} for c in chips]}  # fmt: skip
    if kind == "sweep":
        axes = {"batch": [1, 4, 16, 64, 128, 256], "prompt": [shape["prompt"]],
                "gen": [64, 256, 1024], "precision": ["int8"]}  # fmt: skip
        chips = rng.sample(LLM_CHIPS, 2)
        return "POST", "/api/sweep", {"model": model, "axes": axes,
                                      "targets": [{"chip": chips[0]}, {"chip": chips[1]}]}
    return "POST", "/api/serve", {"model": "llama-2-7b", "target": {"chip": "h100-sxm"},
                                  "options": {"concurrency": 2 ** rng.randint(0, 5),
                                              "requests": 100, "prompt": shape["prompt"],
                                              "gen": 128}}  # fmt: skip


MIX = (("chips", 2), ("run", 10), ("compare", 4), ("sweep", 1), ("serve", 1))


def rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1)) / 1024


async def client(url: str, seed: int, until: float, found: list) -> None:
    rng = random.Random(seed)
    kinds, weights = zip(*MIX, strict=True)
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        while time.perf_counter() < until:
            kind = rng.choices(kinds, weights)[0]
            method, path, payload = body(kind, rng)
            start = time.perf_counter()
            try:
                response = await http.request(method, path, json=payload)
                status = response.status_code
            except httpx.HTTPError as error:
                status = f"{type(error).__name__}"
            found.append((kind, time.perf_counter() - start, status))


async def load(url: str, clients: int, seconds: float, pid: int) -> dict:
    found: list = []
    start = time.perf_counter()
    until = start + seconds
    tasks = [asyncio.create_task(client(url, seed, until, found)) for seed in range(clients)]
    samples = []  # resident memory, a tenth of the time apart
    for _ in range(10):
        await asyncio.sleep(seconds / 10)
        samples.append(round(rss_mb(pid)))
    await asyncio.gather(*tasks)
    return {"found": found, "wall_s": time.perf_counter() - start, "rss_mb": samples}


def p(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 \
        else values[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args()
    server = subprocess.Popen([sys.executable, "-c", "from xpusim.cli import main; main()",
                               "web", "--port", "0"], stderr=subprocess.PIPE, text=True)
    try:
        line = server.stderr.readline()
        url = re.search(r"(http://\S+)/", line).group(1)
        httpx.get(f"{url}/api/chips", timeout=60).raise_for_status()  # imports done
        started = rss_mb(server.pid)
        run = asyncio.run(load(url, args.clients, args.seconds, server.pid))
    finally:
        server.terminate()
        server.wait(10)
    found = run["found"]
    errors = [f for f in found if f[2] != 200]
    summary = {
        "clients": args.clients, "seconds": round(run["wall_s"], 1), "requests": len(found),
        "requests_per_s": round(len(found) / run["wall_s"], 1), "errors": len(errors),
        "p50_ms": round(1e3 * p([f[1] for f in found], 50), 1),
        "p99_ms": round(1e3 * p([f[1] for f in found], 99), 1),
        "rss_mb_idle": round(started), "rss_mb_each_tenth": run["rss_mb"],
        "by_kind": {kind: {"n": len(ts), "p50_ms": round(1e3 * p(ts, 50), 1),
                           "p99_ms": round(1e3 * p(ts, 99), 1)}
                    for kind in dict(MIX) if (ts := [f[1] for f in found if f[0] == kind])},
    }  # fmt: skip
    if errors:
        summary["first_errors"] = errors[:5]
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
