"""What arrives at the server: requests with their lengths, and when they come.

Closed loop (`concurrency` C): C clients, each sending its next request the moment its last
one finishes, as genai-perf/aiperf, vLLM's benchmark_serving at a max concurrency and
MLPerf's loadgen measure. Open loop (`rate` R): arrivals in a Poisson process, or a gamma
process of shape `burstiness` (1 is Poisson; below 1 burstier), vLLM's benchmark's model.
A trace replays arrival times and lengths from a file. Lengths are fixed, or drawn
uniformly within ±`spread` of them (vLLM's random dataset's range ratio). One seed gives one
set of requests.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from xpusim.errors import UserError
from xpusim.files import MAX_INPUT_BYTES, parse_json, read_text, regular_file
from xpusim.serving.options import MAX_SPAN_S

if TYPE_CHECKING:
    from xpusim.serving.options import Load


@dataclass(frozen=True)
class Requests:
    """N requests in arrival order: lengths, and arrival times (None in a closed loop,
    where a client's completion sends the next)."""

    prompt: np.ndarray  # (N,) input tokens
    gen: np.ndarray  # (N,) output tokens
    arrival_s: np.ndarray | None
    dispatch_s: np.ndarray | None = None  # when a harness's batcher sends each to the engine
    batch: np.ndarray | None = None  # which of its batches: batch k goes to replica k mod R

    def __len__(self) -> int:
        return len(self.prompt)


def held(arrival_s: list[float], wait_s: float, most: int) -> tuple[list[float], list[int]]:
    """(dispatch time, batch index) of each arrival under a harness's batcher, as AMD's MLPerf
    harness runs it (inference_results_v4.1 closed/AMD/code/llama2-70b-99.9/VllmFp8/sync_sut.py
    batch_samples_loop): arrivals queue; the loop checks at each arrival and, with none,
    `wait_s` after its last check; a check sends the first `most` queued when `most` are
    queued or `wait_s` has passed since the last send (the first arrival, at the start)."""
    dispatch = [0.0] * len(arrival_s)
    batch = [0] * len(arrival_s)
    queued: list[int] = []
    sent = 0
    stamp = checked = arrival_s[0] if arrival_s else 0.0

    def check(now: float) -> None:
        nonlocal stamp, sent, queued
        if queued and (len(queued) >= most or now - stamp >= wait_s):
            for i in queued[:most]:
                dispatch[i], batch[i] = now, sent
            queued, sent, stamp = queued[most:], sent + 1, now

    for i, t in enumerate(arrival_s):
        while queued and checked + wait_s < t:  # timed-out waits before this arrival
            checked += wait_s
            check(checked)
        queued.append(i)
        checked = t
        check(t)
    while queued:
        checked += wait_s
        check(checked)
    return dispatch, batch


def draw(load: Load) -> Requests:
    """The requests of a load: its trace's, or drawn from its seed."""
    if load.trace is not None:
        return _held(read_trace(load.trace, load.requests), load)
    rng = np.random.default_rng(load.seed)
    prompt, gen = (_lengths(rng, n, load.requests, load.spread) for n in (load.prompt, load.gen))
    if load.lengths is not None:  # rows drawn with replacement; --gen where it has no outputs
        found_prompt, found_gen = read_lengths(load.lengths)
        if load.scale_gen:
            found_gen = scaled_outputs(load.lengths, found_gen, load.gen)
        rows = rng.integers(0, len(found_prompt), size=load.requests)
        prompt = found_prompt[rows]
        gen = gen if found_gen is None else found_gen[rows]
    arrival = None
    if load.rate is not None:
        shape = load.burstiness
        gaps = rng.gamma(shape, 1.0 / (load.rate * shape), size=load.requests)
        arrival = np.cumsum(gaps) - gaps[0]  # the first request at time 0
    return _held(Requests(prompt, gen, arrival), load)


def scaled_outputs(path: Path, outputs: np.ndarray | None, mean: int) -> np.ndarray:
    """A file's output lengths scaled to `mean` over its rows, each at least 1 token: the
    shape of a dataset's reference outputs at the tokens per request a run generated. MLPerf's
    DeepSeek-R1 run by NVIDIA generated 0.90x the reference's tokens on the samples it
    published (TEST06: 100 samples, correlation 0.89, the same coefficient of variation
    1.18), so the run's mean over the reference's shape is what the data supports."""
    if outputs is None:
        raise UserError(f"--scale-gen: {Path(path).name} has no output-token column to scale")
    return np.maximum(1, np.rint(outputs * (mean / outputs.mean()))).astype(np.int64)


def _held(requests: Requests, load: Load) -> Requests:
    """The requests with their harness dispatch, where the load has a batcher."""
    if load.hold_s is None or requests.arrival_s is None:
        return requests
    dispatch, batch = held(requests.arrival_s.tolist(), load.hold_s, load.hold_batch)
    return Requests(requests.prompt, requests.gen, requests.arrival_s, np.array(dispatch),
                    np.array(batch))  # fmt: skip


def _lengths(rng: np.random.Generator, mean: int, n: int, spread: float) -> np.ndarray:
    if spread == 0:
        return np.full(n, mean, dtype=np.int64)
    low, high = max(1, round(mean * (1 - spread))), max(1, round(mean * (1 + spread)))
    return rng.integers(low, high + 1, size=n)


# Column names accepted for each field, first match wins: ours, then the public Azure LLM
# inference traces' (TIMESTAMP, ContextTokens, GeneratedTokens), then common variants.
_COLUMNS = {
    "arrival": ("arrival_s", "timestamp", "arrival_time", "time"),
    "prompt": ("input_tokens", "contexttokens", "prompt_tokens", "prompt", "input_length"),
    "gen": ("output_tokens", "generatedtokens", "completion_tokens", "gen", "output_length"),
}


def read_trace(path: Path, limit: int | None = None) -> Requests:
    """A JSONL or CSV trace: arrival time (seconds, or a date-time as in Azure's traces),
    input tokens and output tokens per line; arrivals are taken relative to the first.
    A line that does not parse is refused with its line number."""
    path = Path(path)
    rows = _rows(path)[:limit]
    columns = _columns(path, rows, ("arrival", "prompt", "gen"))
    arrival = np.array(_parsed(path, rows, columns["arrival"], _seconds), dtype=float)
    prompt = np.array(_parsed(path, rows, columns["prompt"], _tokens))
    gen = np.array(_parsed(path, rows, columns["gen"], _tokens))
    order = np.argsort(arrival, kind="stable")
    with np.errstate(over="ignore"):  # a span past float range is refused below, as inf
        times = arrival[order] - arrival[order[0]]
    if not times[-1] <= MAX_SPAN_S:
        span = f"{times[-1]:.3g} s" if np.isfinite(times[-1]) else "past any float"
        raise UserError(f"{path.name}: arrivals span {span}; at most "
                        f"{MAX_SPAN_S:.0e} s can be simulated")  # fmt: skip
    return Requests(prompt[order], gen[order], times)


def read_lengths(path: Path) -> tuple[np.ndarray, np.ndarray | None]:
    """Input tokens per row of a CSV or JSONL, and output tokens where it has the column
    (a dataset's length distribution: MLPerf's, ShareGPT's). A file is parsed once per
    version (path, size, modification time): a --find search draws its requests at every
    trial, and parsing MLPerf's 24,576 rows each time was an eighth of a validation's
    max-rate point (cProfile, 2026-12-04)."""
    path = Path(path)
    regular_file(path, "request", MAX_INPUT_BYTES)  # the true error for a pipe or device
    stat = path.stat()
    prompt, gen = _read_lengths(path.resolve(), stat.st_size, stat.st_mtime_ns)
    return prompt.copy(), None if gen is None else gen.copy()


@lru_cache(maxsize=8)
def _read_lengths(path: Path, size: int, mtime_ns: int) -> tuple[np.ndarray, np.ndarray | None]:
    rows = _rows(path)
    columns = _columns(path, rows, ("prompt",))
    prompt = np.array(_parsed(path, rows, columns["prompt"], _tokens))
    out = next((c for c in _COLUMNS["gen"] if c in rows[0][1]), None)
    return prompt, None if out is None else np.array(_parsed(path, rows, out, _tokens))


def _rows(path: Path) -> list[tuple[int, dict[str, object]]]:
    """(line number, record with lower-case keys) of every row of a JSONL or CSV file."""
    text = read_text(path, "request")
    rows: list[tuple[int, dict[str, object]]] = []
    if path.suffix.lower() in (".jsonl", ".json"):
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            record = parse_json(line, f"{path.name} line {number}")
            if not isinstance(record, dict):
                raise UserError(f"{path.name} line {number}: not a JSON object")
            rows.append((number, {k.lower(): v for k, v in record.items()}))
    else:
        for number, record in enumerate(csv.DictReader(io.StringIO(text, newline="")), 2):
            rows.append((number, {(k or "").strip().lower(): v for k, v in record.items()}))
    if not rows:
        raise UserError(f"{path.name} holds no rows")
    return rows


def _columns(path: Path, rows: list, fields: tuple[str, ...]) -> dict[str, str]:
    names = {f: next((c for c in _COLUMNS[f] if c in rows[0][1]), None) for f in fields}
    missing = [f"{f} ({', '.join(_COLUMNS[f][:3])})" for f, c in names.items() if c is None]
    if missing:
        raise UserError(f"{path.name}: no column for {'; '.join(missing)}")
    return names  # type: ignore[return-value]


def _parsed(path: Path, rows: list, column: str, parse) -> list:
    values = []
    for number, record in rows:
        if record.get(column) in (None, ""):  # a JSONL record without it, a short CSV row
            raise UserError(f"{path.name} line {number}: no value in column {column!r}")
        try:
            values.append(parse(record[column]))
        except (TypeError, ValueError) as error:
            raise UserError(f"{path.name} line {number}: {error}") from None
    return values


def _seconds(value: object) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    else:
        text = str(value).strip()
        try:
            seconds = float(text)
        except ValueError:
            # Azure's traces: "2023-11-16 18:15:46.6805900" (seven fractional digits)
            head, _, frac = text.partition(".")
            stamp = datetime.fromisoformat(head)
            seconds = stamp.timestamp() + (float("0." + frac) if frac.isdigit() else 0.0)
    if not np.isfinite(seconds):
        raise ValueError(f"arrival time {value!r} is not a number")
    return seconds


def _tokens(value: object) -> int:
    if isinstance(value, bool):  # JSON true is not a count (float(True) is 1)
        raise ValueError(f"token count {value!r} is not a positive integer")
    number = float(value)  # type: ignore[arg-type]
    if not number.is_integer() or number < 1:
        raise ValueError(f"token count {value!r} is not a positive integer")
    return int(number)
