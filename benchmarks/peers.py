"""Peers side by side: genz-llm and llm-analysis on the published LLM points, beside xpusim.

    python benchmarks/peers.py               # a table per point, then the error summary
    python benchmarks/peers.py --markdown    # the same as Markdown (what docs/peers.md shows)

Why: a performance model is worth as much as its measured error, and that error only means
something next to what the existing tools get on the same measurements. The two PyPI peers
are analytical rooflines like xpusim's floor; running them here, live, on the same points and
with the same scoring (absolute percentage error) keeps the comparison honest as xpusim's
cost model changes.

Each peer runs in two settings: its defaults, and the efficiency values its own documentation
uses (named, with where they are written, in `SETTINGS` below). Nothing here is tuned to the
scored points. A point a peer cannot express (hardware, plan, precision or model it has no
way to describe), and any exception it raises on a point, is counted as not expressible with
the reason, never dropped silently. A peer that is not installed is reported in one line and
the others still run: they are an optional extra (`pip install -e '.[peers]'`), not
dependencies of xpusim.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.metadata
import io
import statistics
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any, ClassVar

from xpusim.errors import UserError
from xpusim.ir.dtypes import Grouped, parse_weight_format
from xpusim.validation.adapters import Unexpressible
from xpusim.validation.points import Point, load_points
from xpusim.validation.score import ape, score_point

METRICS = ("tokens_per_s_per_user", "ttft_s", "tokens_per_s_per_chip")
"""The LLM inference metrics the published points carry and both peers can compute."""


class NotExpressible(Exception):
    """A peer has no way to describe this point; the message says what is missing."""


@dataclass(frozen=True)
class Setting:
    """One way of running a peer: its knob values and where those values are documented."""

    name: str  # "default" or "documented"
    knobs: dict[str, float]
    origin: str


@dataclass
class Run:
    """One tool on one point: a prediction (or None) with the reason, and its wall time."""

    value: float | None
    seconds: float
    note: str  # how the point was mapped, or why it could not be


@dataclass
class Column:
    """A tool in one setting: the header of a column of the table and its runs by point id."""

    label: str
    runs: dict[str, Run] = field(default_factory=dict)


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silences a peer's prints and warnings so that the table stays readable."""
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        yield


def one_line(error: BaseException, limit: int = 300) -> str:
    """An exception as one short line, for the not-expressible list."""
    text = " ".join(str(error).split()) or type(error).__name__
    if not isinstance(error, NotExpressible):
        text = f"{type(error).__name__}: {text}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def bits_of(precision: str) -> int:
    """Bits per value of a precision name as the published points spell them."""
    return {"fp32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "int8": 8, "int4": 4}[precision]


def setup_of(point: Point) -> dict[str, Any]:
    """The workload of a point with the defaults xpusim's own adapter applies. A grouped
    weight layout (AWQ's int4, gpt-fast's int4-torchao-g32) goes to the peers as its
    element format: neither peer stores a group's scales and zero points."""
    precision = point.get("precision", "bf16")
    weight = parse_weight_format(point.get("weight_precision") or precision)
    return {
        "model": point.get("model"),
        "chips": int(point.get("chips", 1)),
        "tp": int(point.get("tp", 1)),
        "pp": int(point.get("pp", 1)),
        "batch": int(point.get("batch", 1)),
        "prompt": int(point.get("prompt", 128)),
        "gen": int(point.get("gen", 128)),
        "precision": precision,
        "weight_precision": (weight.element if isinstance(weight, Grouped) else weight).value,
    }


class GenZPeer:
    """genz-llm (import name GenZ): per-operator roofline with TP/PP collectives.

    Hardware: GenZ's own presets for A100 80 GB and H100 (Systems/system_configs.py); a chip
    without a preset gets a custom system from the datasheet figures in xpusim's catalog.
    GenZ has one precision for weights, activations and KV cache, so a weight-only point runs
    at its weight precision (the weights dominate batch-1 decode); the note says so.
    """

    name = "genz-llm"
    package = "genz-llm"
    settings = (
        Setting("default", {"system_eff": 1.0}, "decode_moddeling/prefill_moddeling default"),
        Setting(
            "documented",
            {"system_eff": 0.8},
            "GenZ web app's 'System Efficiency' default 0.80 (GenZ-LLM-Analyzer "
            "Website/pages/*_Comparision.py; linked from the PyPI README)",
        ),
    )
    models: ClassVar[dict[str, str]] = {
        "llama-2-7b": "meta-llama/llama-2-7b",
        "llama-2-70b": "meta-llama/llama-2-70b",
    }
    presets: ClassVar[dict[str, str]] = {"a100-sxm-80gb": "A100_80GB_GPU", "h100-sxm": "H100_GPU"}
    bits: ClassVar[dict[str, str]] = {
        "fp32": "f32",
        "bf16": "bf16",
        "fp16": "bf16",
        "fp8": "fp8",
        "int8": "int8",
        "int4": "int4",
    }

    def load(self) -> None:
        """Imports GenZ (which pulls in plotting libraries: seconds, timed once)."""
        with quiet():
            self.genz = importlib.import_module("GenZ")

    def system(self, chip_id: str) -> str | dict[str, Any]:
        """GenZ's preset for the chip, or a custom system from xpusim's catalog figures."""
        if chip_id in self.presets:
            return self.presets[chip_id]
        import xpusim

        chip = xpusim.chip(chip_id)
        peaks = {str(getattr(k, "value", k)): f.value for k, f in chip.peak_ops_per_s.items()}
        flops = peaks.get("bf16") or peaks.get("fp16")
        if flops is None:
            raise NotExpressible(f"{chip_id} has no 16-bit peak, which GenZ's system needs")
        memory = max(chip.memory, key=lambda level: level.capacity_bytes.value)
        link = chip.chip_to_chip
        system: dict[str, Any] = {
            "Flops": flops / 1e12,  # TFLOPS at 16 bits; GenZ scales 8-bit work by 2x
            "Memory_size": memory.capacity_bytes.value / 1e9,
            "Memory_BW": memory.bandwidth_bytes_per_s.value / 1e9,
            "real_values": True,
        }
        if link is not None:
            system["ICN"] = link.count.value * link.bandwidth_bytes_per_s.value / 1e9
            system["ICN_LL"] = link.latency_s.value * 1e6
        return system

    def predict(self, point: Point, setting: Setting) -> tuple[float, str]:
        """Runs GenZ's prefill and/or decode model for the point's metric."""
        s = setup_of(point)
        model = self.models.get(s["model"])
        if model is None:
            raise NotExpressible(f"no GenZ model config mapped for {s['model']}")
        bits = self.bits[s["weight_precision"]]
        system = self.system(point.chip)
        note = f"{bits}" + (" for all tensors" if s["weight_precision"] != s["precision"] else "")
        tp, pp = s["tp"], s["pp"]
        if tp * pp != s["chips"]:
            tp, pp = self.searched_plan(model, system, bits, s)
        if tp * pp > 1:
            note += f", tp{tp} x pp{pp}"
        common = dict(
            model=model,
            system_name=system,
            bits=bits,
            tensor_parallel=tp,
            pipeline_parallel=pp,
            system_eff=setting.knobs["system_eff"],
        )
        if point.metric == "ttft_s":
            prefill = self.genz.prefill_moddeling(
                batch_size=s["batch"], input_tokens=s["prompt"], **common
            )
            return prefill["Latency"] / 1e3, note
        decode = self.genz.decode_moddeling(
            batch_size=s["batch"],
            input_tokens=s["prompt"],
            output_tokens=s["gen"],
            Bb=1,
            **common,
        )
        decode_s = decode["Latency"] / 1e3
        if point.metric == "tokens_per_s_per_user":
            return 1 / decode_s, note
        prefill = self.genz.prefill_moddeling(
            batch_size=s["batch"], input_tokens=s["prompt"], **common
        )
        total_s = prefill["Latency"] / 1e3 + s["gen"] * decode_s
        return s["batch"] * s["gen"] / total_s / s["chips"], note + ", prefill + gen x decode"

    def searched_plan(
        self, model: str, system: str | dict[str, Any], bits: str, s: dict[str, Any]
    ) -> tuple[int, int]:
        """The plan GenZ's own search picks when the point's plan is not published."""
        best = self.genz.get_best_parallization_strategy(
            stage="decode",
            model=model,
            total_nodes=s["chips"],
            batch_size=s["batch"],
            input_tokens=s["prompt"],
            output_tokens=s["gen"],
            system_name=system,
            bits=bits,
        )
        if best.empty:
            raise NotExpressible(
                f"plan not published, and GenZ's plan search (get_best_parallization_strategy) "
                f"finds no TP x PP for {s['chips']} chips at batch {s['batch']}: it keeps "
                f"PP <= batch and TP a divisor of the head count"
            )
        return int(best["TP"].iloc[0]), int(best["PP"].iloc[0])


class LLMAnalysisPeer:
    """llm-analysis: per-layer roofline of a GPU, tensor parallel inside one node.

    Hardware and models: its built-in GPU configs and model configs. Weight-only quantization
    is native (dtype wXa16e16); fp8 has no dtype of its own and runs as w8a8e16, which uses
    the GPU's int8 peak (on H100, the same dense rate as fp8).
    """

    name = "llm-analysis"
    package = "llm-analysis"
    settings = (
        Setting(
            "default",
            {"flops_efficiency": 1.0, "hbm_memory_efficiency": 1.0},
            "llm_analysis/constant.py FLOPS_EFFICIENCY, HBM_MEMORY_EFFICIENCY",
        ),
        Setting(
            "documented",
            {"flops_efficiency": 0.7, "hbm_memory_efficiency": 0.9},
            "llm-analysis examples/llama/README.md and examples/fastertransformer/README.md "
            "(inference, fe=0.7, hbme=0.9, from profiling in kipply's blog)",
        ),
    )
    models: ClassVar[dict[str, str]] = {
        "llama-2-7b": "NousResearch_Llama-2-7b-hf",
        "llama-2-70b": "upstage_Llama-2-70b-instruct-v2",
    }
    gpus: ClassVar[dict[str, str]] = {"a100-sxm-80gb": "a100-sxm-80gb", "h100-sxm": "h100-sxm-80gb"}
    dtypes = ("w16a16e16", "w8a16e16", "w8a8e16", "w4a16e16", "w4a8e16", "w4a4e16")

    def load(self) -> None:
        """Imports llm_analysis (transformers comes with it: seconds, timed once)."""
        with quiet():
            self.analysis = importlib.import_module("llm_analysis.analysis")

    def predict(self, point: Point, setting: Setting) -> tuple[float, str]:
        """Runs llm-analysis's `infer` for the point and reads the metric from its summary."""
        s = setup_of(point)
        if s["chips"] != s["tp"]:
            raise NotExpressible(
                f"{s['chips']} chips without a published all-tensor-parallel plan: "
                "llm-analysis costs multi-chip inference as tensor parallelism in one node "
                "(its pipeline-parallel inference costs one stage and shards no weights)"
            )
        gpu = self.gpus.get(point.chip)
        if gpu is None:
            raise NotExpressible(f"no GPU config for {point.chip} (it describes GPUs only)")
        model = self.models.get(s["model"])
        if model is None:
            raise NotExpressible(f"no llm-analysis model config mapped for {s['model']}")
        weight_bits = bits_of(s["weight_precision"])
        activation_bits = min(16, bits_of(s["precision"]))
        dtype = f"w{weight_bits}a{activation_bits}e16"
        if dtype not in self.dtypes:
            raise NotExpressible(f"no dtype config {dtype}")
        with quiet():
            summary = self.analysis.infer(
                model_name=model,
                gpu_name=gpu,
                dtype_name=dtype,
                log_level="ERROR",
                batch_size_per_gpu=s["batch"],
                tp_size=s["tp"],
                seq_len=s["prompt"],
                num_tokens_to_generate=s["gen"],
                **setting.knobs,
            )
        note = dtype + (f", tp{s['tp']}" if s["tp"] > 1 else "")
        if point.metric == "ttft_s":
            return summary["prefill_latency"], note
        if point.metric == "tokens_per_s_per_user":
            return 1 / summary["decode_latency"], note
        return summary["total_tokens_per_sec"] / s["chips"], note + ", total_tokens_per_sec"


PEERS: tuple[type[GenZPeer] | type[LLMAnalysisPeer], ...] = (GenZPeer, LLMAnalysisPeer)


def timed(call: Callable[[], tuple[float, str]]) -> Run:
    """Runs one prediction, catching a failure as not expressible, and times it."""
    start = time.perf_counter()
    try:
        with quiet():
            value, note = call()
        return Run(value, time.perf_counter() - start, note)
    except Exception as error:  # a peer's failure on one point must not stop the others
        return Run(None, time.perf_counter() - start, one_line(error))


def xpusim_run(point: Point) -> Run:
    """xpusim's prediction through the validation scorer, computed live."""
    start = time.perf_counter()
    try:
        scored = score_point(point)
        return Run(scored.predicted, time.perf_counter() - start, scored.detail)
    except (Unexpressible, UserError) as why:
        return Run(None, time.perf_counter() - start, one_line(NotExpressible(str(why))))
    except Exception as error:  # a bug in xpusim on one point must not hide the peers' results
        return Run(None, time.perf_counter() - start, f"xpusim failed: {one_line(error)}")


def llm_points() -> list[Point]:
    """The published points both peers could in principle express: LLM inference metrics."""
    return [p for p in load_points() if p.workload == "llm-inference" and p.metric in METRICS]


def run_all(points: list[Point]) -> tuple[list[Column], list[str]]:
    """Every tool in every setting on every point; returns the columns and status lines."""
    status = []
    xp = Column("xpusim")
    xp.runs = {p.id: xpusim_run(p) for p in points}
    columns = [xp]
    for peer_type in PEERS:
        peer = peer_type()
        try:
            version = importlib.metadata.version(peer.package)
            start = time.perf_counter()
            peer.load()
        except Exception as error:  # not installed, or installed but broken
            hint = f"pip install {peer.package}, or pip install -e '.[peers]'"
            status.append(f"{peer.name}: not run ({one_line(error)}); {hint}")
            continue
        status.append(f"{peer.name} {version}: import took {time.perf_counter() - start:.1f} s")
        for setting in peer.settings:
            column = Column(f"{peer.name} {setting.name}")
            for point in points:
                column.runs[point.id] = timed(partial(peer.predict, point, setting))
            columns.append(column)
    return columns, status


def signed_error(value: float, measured: float) -> str:
    """The miss with its direction, e.g. '+12%': a peer that is always optimistic shows it."""
    return f"{(value - measured) / measured:+.0%}"


def cell(run: Run, measured: float) -> str:
    """A table cell: prediction and signed error, or a dash when not expressible."""
    if run.value is None:
        return "—"
    return f"{run.value:.4g} ({signed_error(run.value, measured)})"


def render(rows: list[list[str]], markdown: bool) -> str:
    """A table as aligned plain text or as Markdown."""
    if markdown:
        lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
        lines += ["| " + " | ".join(row) + " |" for row in rows[1:]]
        return "\n".join(lines)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows
    )


def summary_rows(points: list[Point], columns: list[Column]) -> list[list[str]]:
    """Per column: points expressed, median and mean error, xpusim on the same points, time."""
    rows = [
        [
            "tool",
            "expressed",
            "not expressible",
            "median error",
            "mean error",
            "xpusim median on same points",
            "median time/point",
        ]
    ]
    xp = columns[0]
    for column in columns:
        scored = [p for p in points if column.runs[p.id].value is not None]
        errors = [ape(column.runs[p.id].value, float(p.value)) for p in scored]
        same = [
            ape(xp.runs[p.id].value, float(p.value))
            for p in scored
            if xp.runs[p.id].value is not None
        ]
        times = [run.seconds for run in column.runs.values()]
        rows.append(
            [
                column.label,
                str(len(scored)),
                str(len(points) - len(scored)),
                f"{statistics.median(errors):.0%}" if errors else "—",
                f"{statistics.fmean(errors):.0%}" if errors else "—",
                f"{statistics.median(same):.0%} ({len(same)})" if same else "—",
                f"{statistics.median(times) * 1e3:.1f} ms",
            ]
        )
    return rows


def report(points: list[Point], columns: list[Column], status: list[str], markdown: bool) -> str:
    """The whole printout: status, predictions, times, summary, and what was not expressed."""
    out = [*status, ""]
    head = ["point", "metric", "measured", *(c.label for c in columns)]
    rows = [head]
    for p in points:
        measured = float(p.value)
        rows.append(
            [p.id, p.metric, f"{measured:.4g}", *(cell(c.runs[p.id], measured) for c in columns)]
        )
    out += ["Predictions (signed error against the measurement)", "", render(rows, markdown), ""]
    times = [head[:2] + [c.label for c in columns]]
    for p in points:
        times.append([p.id, p.metric, *(f"{c.runs[p.id].seconds * 1e3:.1f}" for c in columns)])
    out += ["Wall time per point (ms)", "", render(times, markdown), ""]
    out += ["Absolute percentage error over the points each tool expresses", ""]
    out += [render(summary_rows(points, columns), markdown), ""]
    out += ["How each point was expressed (the first setting of each tool)", ""]
    first: dict[str, Column] = {}
    for c in columns:
        first.setdefault(c.label.split()[0], c)
    mapped = [["point", *first]]
    for p in points:
        mapped.append(
            [
                p.id,
                *("—" if c.runs[p.id].value is None else c.runs[p.id].note for c in first.values()),
            ]
        )
    out += [render(mapped, markdown), "", "Not expressible, and why", ""]
    for c in columns:
        reasons: dict[str, list[str]] = {}
        for p in points:
            if c.runs[p.id].value is None:
                reasons.setdefault(c.runs[p.id].note, []).append(p.id)
        for why, ids in reasons.items():
            out.append(f"- {c.label}: {len(ids)} ({', '.join(ids)}): {why}")
    return "\n".join(out)


def settings_text() -> str:
    """The knob values of every setting and where each is documented."""
    lines = []
    for peer_type in PEERS:
        for s in peer_type.settings:
            knobs = ", ".join(f"{k}={v:g}" for k, v in s.knobs.items())
            lines.append(f"{peer_type.name} {s.name}: {knobs}  [{s.origin}]")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    args = parser.parse_args()
    points = llm_points()
    columns, status = run_all(points)
    version = importlib.metadata.version("xpusim")
    print(f"{len(points)} published LLM inference points; xpusim {version} computed live")
    print(settings_text())
    print(report(points, columns, status, args.markdown))


if __name__ == "__main__":
    main()
