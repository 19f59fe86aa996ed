"""`xpusim serve`: the serving simulation's command, its options generated from the fields of
serving/options.py (one declaration per setting, shared with the API's keywords)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, fields
from typing import Any

import click

from xpusim.cli_lists import (
    CHIP_HELP,
    PRECISIONS,
    PRICE_HELP,
    WEIGHT_PRECISIONS,
    Finite,
    PriceType,
    chip_counts,
    count,
    merged_chips,
    offline_option,
)
from xpusim.cli_output import json_option as _json_option
from xpusim.cli_output import wide_option as _wide_option
from xpusim.run_options import MOE_BACKENDS
from xpusim.serving.options import PATH, Engine, Load, Search

PLAN_HELP = {
    "precision": ("Weights, activations and KV cache (default: the chip's bf16, else fp16, "
                  "else int8).", click.Choice(PRECISIONS)),
    "weight_precision": ("Weight-only quantization.",
                         click.Choice(WEIGHT_PRECISIONS)),
    "attention_precision": ("Attention's compute format when wider than --precision.",
                            click.Choice(PRECISIONS)),
    "kv_precision": ("The KV cache's storage format when not --precision.",
                     click.Choice(PRECISIONS)),
    "moe_backend": ("The engine's MoE backend (TensorRT-LLM's moe_backend), whose measured "
                    "kernels price the routed experts where the chip has a table of it "
                    "(default: the one the engine picks by itself where its profile says, "
                    "SGLang's flashinfer_trtllm for DeepSeek-V3's FP8 and NVFP4 experts on "
                    "Blackwell; else CUTLASS's).",
                    click.Choice(MOE_BACKENDS, case_sensitive=False)),
    "chips": ("Chips in the system; replicas of the plan fill it (default: --tp x --pp x "
              "--dp where given, else 1).", count()),
    "tp": ("Tensor parallel (one replica).", count()),
    "pp": ("Pipeline stages (one replica).", count()),
    "dp": ("Replicas (default: the chips the others leave).", count()),
    "ep": ("MoE: experts spread over this many of the --tp chips (engines' --ep).", count()),
    "dp_attention": ("Attention data parallelism (SGLang's --enable-dp-attention): each --tp "
                     "chip runs attention for its own share of the sequences.", bool),
    "price": (PRICE_HELP, PriceType()),
}  # fmt: skip
RECSYS_HELP = {
    "window_ms": ("Recommendation models: longest wait for a fuller batch (ms).", Finite(),
                  1.0),
    "sla_ms": ("Recommendation models: the latency bound goodput counts (ms).", Finite(),
               None),
}


def _declared(f: Callable) -> Callable:
    """Every field of Load, Engine and Search as an option, then the plan's and recsys's."""
    options = []
    for cls in (Load, Engine, Search):
        for fld in fields(cls):
            kind = fld.metadata["type"]
            kind = {PATH: click.Path(dir_okay=False), float: Finite(), int: count(None)}.get(
                kind, kind)
            default = None if fld.default is MISSING else fld.default
            flag = f"--{fld.name.replace('_', '-')}"
            if kind is bool:  # on, off, or (not given) the field's default
                flag, kind = f"{flag}/--no-{flag[2:]}", None
            options.append(click.option(flag, fld.name, type=kind,
                                        default=default, show_default=default is not None,
                                        help=fld.metadata["help"]))  # fmt: skip
    for name, (text, kind) in PLAN_HELP.items():
        flag = dict(is_flag=True, default=False) if kind is bool else dict(type=kind, default=None)
        options.append(click.option(f"--{name.replace('_', '-')}", name, help=text,
                                    **flag))  # fmt: skip
    for name, (text, kind, default) in RECSYS_HELP.items():
        options.append(click.option(f"--{name.replace('_', '-')}", name, type=kind,
                                    default=default, help=text))  # fmt: skip
    for option in reversed(options):
        f = option(f)
    return f


@click.command()
@click.argument("model")
@click.option("--chip", "chip_id", required=True, callback=chip_counts, help=CHIP_HELP)
@_declared
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Folder for per-request rows and the timeline (CSV; Parquet with the "
                   "extra) and plots.")  # fmt: skip
@offline_option
@_json_option
@_wide_option
def serve(model: str, chip_id: tuple[str, int | None], out: str | None, as_json: bool,
          **options: Any) -> None:  # fmt: skip
    """Serve MODEL under load: --concurrency clients, a --rate of requests/s or a --trace;
    TTFT, TPOT, ITL and end-to-end percentiles, throughput, goodput, energy."""
    from pathlib import Path

    from xpusim import api
    from xpusim.cli_output import emit_json as _emit_json
    from xpusim.cli_output import given as _given
    from xpusim.cli_output import print_tables as _print
    from xpusim.cli_output import progress as _progress
    from xpusim.serving.serve import serve as run_serve

    if out is not None:
        from xpusim.files import writable_dir

        writable_dir(Path(out), "--out")  # before the simulation, not after it
    from xpusim.cost.dollars import parse_price, priced

    workload, target = api.model(model), api.target(chip_id[0])
    given = merged_chips(chip_id, _given(options))
    price = parse_price(given.pop("price", None), getattr(target, "chip", target).id)
    given, notes = api.checkpoint_defaults(workload, target, "serving", given)
    with _progress("serving") as bar:
        tick = None if bar is None else (lambda done, total: bar(done, total or None))
        result, frames = run_serve(workload, target, given, tick)
    api.noted(priced(result, price), notes)
    written: list[str] = []
    if out is not None and frames is not None:
        from xpusim.serving.plots import plot_timeline
        from xpusim.serving.serve import write_frames

        written = write_frames(frames, Path(out), parquet=_has("pyarrow"))
        written += plot_timeline(frames, result, Path(out))
    if as_json:
        _emit_json({**result.to_dict(), **({"written": written} if written else {})})
        return
    from xpusim.report.serving_tables import serving_view

    result.to_dict()  # the result boundary's check (result.py), as --json has it

    _print(serving_view(result))
    for line in [*result.notes, result.reason]:
        if line:
            _print(f"note: {line}")
    if written:
        _print("wrote " + ", ".join(written))


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None
