"""Serving an LLM under load: options resolved into replicas, the simulation, the result.

Each replica runs the plan `xpusim run` would choose for a batch of the expected in-flight
sequences (the concurrency, else the max batch) at the mean lengths, or the plan given; the
system's data-parallel replicas are the engine's instances, and the router spreads requests
over them. A replica's KV cache is what its fullest chip has left after weights and the
largest iteration's activations, as the engine reads its memory fraction (`kv_utilization`:
vLLM's gpu_memory_utilization, SGLang's mem_fraction_static, TensorRT-LLM's
free_gpu_memory_fraction), in blocks of `kv_block` tokens; the engine's profile
(serving/engines.toml) gives every setting not given.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from xpusim.errors import UserError
from xpusim.files import atomic, atomic_path
from xpusim.hardware.spec import Chip
from xpusim.hardware.system import System
from xpusim.memo import in_scope
from xpusim.serving.capacity import answer, offline_requests
from xpusim.serving.load import draw
from xpusim.serving.metrics import Frames, ServingResult
from xpusim.serving.options import Engine, Load, Search, default_warmup
from xpusim.serving.run import prepare, run
from xpusim.workloads.transformer_config import TransformerConfig


def write_frames(frames: Frames, out: Path, parquet: bool) -> list[str]:
    """requests.csv and timeline.csv (and .parquet with the extra) in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, columns in (("requests", frames.requests), ("timeline", frames.timeline)):
        path = out / f"{name}.csv"
        header = ",".join(columns)
        rows = np.column_stack([np.asarray(v, dtype=float) for v in columns.values()])
        with atomic(path) as f:
            np.savetxt(f, rows, delimiter=",", header=header, comments="", fmt="%.9g")
        written.append(str(path))
        if parquet:
            import pyarrow as pa
            import pyarrow.parquet as pq

            with atomic_path(out / f"{name}.parquet") as tmp:
                pq.write_table(pa.table({k: np.asarray(v) for k, v in columns.items()}), tmp)
            written.append(str(out / f"{name}.parquet"))
    return written


PLAN_OPTIONS = ("precision", "weight_precision", "attention_precision", "kv_precision",
                "moe_backend", "chips", "tp", "pp", "dp", "ep", "dp_attention",
                "objective")  # fmt: skip


def serve_llm(
    cfg: TransformerConfig, target: Chip | System, load: Load, engine: Engine, search: Search,
    plan_options: dict[str, Any], progress: Callable[[int, int], None] | None = None,
) -> tuple[ServingResult, Frames | None]:  # fmt: skip
    """One serving run, or the answer to search.find (serving/capacity.py)."""
    requests = draw(load)
    warmup = default_warmup(len(requests)) if search.warmup is None else search.warmup
    if warmup >= len(requests):
        raise UserError(f"warmup ({warmup}) leaves none of the {len(requests)} requests")
    shortest = int(requests.prompt.min())
    if engine.prefix >= shortest:
        raise UserError(f"prefix ({engine.prefix} tokens) must be shorter than every prompt, "
                        f"which begins with it; the shortest is {shortest} tokens")  # fmt: skip
    if search.find is not None:
        return answer(cfg, target, load, engine, search, plan_options, warmup, progress)
    prepared = prepare(cfg, target, load, requests, engine, plan_options)
    tick = None if progress is None else (lambda done: progress(done, len(requests)))
    return run(prepared, load, requests, warmup, search.slo, progress=tick,
               until_steady=search.until == "steady")


RECSYS_OPTIONS = ("rate", "requests", "seed", "max_batch", "window_ms", "sla_ms", "warmup",
                  "precision", "weight_precision", "chips", "sharding")  # fmt: skip
CNN_OPTIONS = tuple(o for o in RECSYS_OPTIONS if o != "sharding")  # one chip, no tables


@in_scope
def serve(
    workload: Any, target: Chip | System, options: dict[str, Any],
    progress: Callable[[int, int], None] | None = None,
) -> tuple[Any, Frames | None]:  # fmt: skip
    """`xpusim.serve`'s work: options split into the load, the engine, the search and the
    plan (an option none of them takes is refused by name), then the run."""
    from dataclasses import fields

    from xpusim.errors import closest
    from xpusim.workloads.cnn import ResNetConfig
    from xpusim.workloads.dlrm_config import DLRMConfig

    if isinstance(workload, DLRMConfig | ResNetConfig):
        from xpusim.serving.queries import serve_queries

        kind, taken = (("recommendation", RECSYS_OPTIONS) if isinstance(workload, DLRMConfig)
                       else ("a CNN's", CNN_OPTIONS))  # fmt: skip
        unknown = sorted(set(options) - set(taken))
        if unknown:
            raise UserError(f"{kind} serving takes no option {unknown[0]!r}"
                            f"{closest(unknown[0], taken)}")  # fmt: skip
        return serve_queries(workload, target, **{"rate": None, **options}), None
    if not isinstance(workload, TransformerConfig):
        raise UserError(f"serve runs transformer LLMs, recommendation models and CNNs, not "
                        f"{type(workload).__name__}")  # fmt: skip
    if workload.encoder:
        raise UserError(f"{workload.name} is an encoder: serve runs decoders (an encoder's "
                        "request is one forward pass: xpusim run)")  # fmt: skip
    if workload.is_encoder_decoder:
        raise UserError(f"{workload.name} is an encoder-decoder: serving it is not modelled "
                        "yet (serve's step costs and KV blocks are a decoder's); xpusim run "
                        "simulates a batch")  # fmt: skip
    groups = {cls: {f.name for f in fields(cls)} for cls in (Load, Engine, Search)}
    taken = set().union(*groups.values(), PLAN_OPTIONS)
    unknown = sorted(set(options) - taken)
    if unknown:
        name = unknown[0]
        if name in RECSYS_OPTIONS:
            raise UserError(f"--{name.replace('_', '-')} applies to recommendation models only")
        raise UserError(f"serve takes no option {name!r}{closest(name, taken)}")
    if options.get("find") == "min-chips" and options.get("rate") is None \
            and options.get("trace") is None:
        raise UserError("--find min-chips serves a given load: give --rate (or --trace)")
    if options.get("find") == "max-rate" and options.get("concurrency") is not None:
        raise UserError("--find max-rate searches the arrival rate of an open loop: give no "
                        "--concurrency")  # a traceback before: tables sized for the clients
    if options.get("find") == "offline" and options.get("hold_s") is not None:
        raise UserError("--find offline sends every request at once: --hold-s holds "
                        "arrivals, of which a burst has none")  # fmt: skip
    given = {cls: {k: v for k, v in options.items() if k in names}
             for cls, names in groups.items()}  # fmt: skip
    load_options = given[Load]
    chip = getattr(target, "chip", target)
    engine = Engine(**given[Engine]).on(chip.id, chip.capacity_bytes)
    if options.get("find") in ("max-rate", "offline") and not any(
        load_options.get(k) is not None for k in ("concurrency", "rate", "trace")
    ):  # a placeholder: the search sets it (an offline burst: every request at once, as
        # many as its rounds can take, not the default of a closed loop of that many clients)
        chips = options.get("chips") or getattr(target, "chips", 1)  # --chips, else the system's
        n = load_options.get("requests")
        if n is None:
            n = offline_requests(engine.max_batch, chips // (options.get("tp") or 1))
        load_options = {**load_options, "rate": 1.0} if options["find"] == "max-rate" else \
            {**load_options, "concurrency": n, "requests": n}
    load = Load(**load_options)
    search = Search(**given[Search])
    plan = {k: v for k, v in options.items() if k in PLAN_OPTIONS}
    return serve_llm(workload, target, load, engine, search, plan, progress)
