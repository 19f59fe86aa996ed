"""The server behind `xpusim web`: the page, and a JSON API over `xpusim.api`.

Each route validates its request with the models of web/schemas.py (generated from the
command line's own options), calls the API the command calls, and answers with the
`--json` object plus what the page draws (web/views.py). Why it is safe to leave running:
- bad input is a 400 with the simulator's one-line message, never a traceback: a UserError
  or a schema error (FastAPI's 422 becomes a 400 naming the field);
- no request touches the file system: models are zoo ids or pasted objects, chips catalog
  ids, the page's files are read into memory when the app is made, and options naming files
  are not in the schema;
- one request's work is bounded (schemas.Limits: body size, targets, sweep points, serving
  requests), and simulations run on worker threads, at most `Limits.threads` at once, so a
  slow one never blocks the event loop and the page stays responsive;
- the validation, minutes of work, runs as one background job whose progress the page polls.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from functools import cache
from importlib import resources
from importlib.metadata import version
from typing import Any

import anyio
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from xpusim.errors import UserError
from xpusim.serving.options import REQUESTS, default_requests
from xpusim.web import views
from xpusim.web.schemas import (
    CompareRequest,
    Limits,
    PlanRequest,
    RunRequest,
    ServeRequest,
    SweepRequest,
    Target,
    given,
)

STATIC_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
                ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}  # fmt: skip


FIND_RUNS = 10
"""What a serving `find` costs, in single runs of its requests, against the serving limit:
measured on this project's 2-core machine (2026-12-01, Llama-2-7B on H100s, 200 requests),
max-rate took 2.9 s, min-chips 1.5 s and pd-split 3.7 s, against 0.3 s for one run."""


class ErrorBody(BaseModel):
    error: str


class Progress(BaseModel):
    status: str  # "running"
    done: int
    total: int


ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "Bad input: the message names the field."},
    413: {"model": ErrorBody, "description": "The request asks for more than one may."},
}


def _static_files() -> dict[str, tuple[bytes, str]]:
    """The page's files, read once from the package: a request never opens a file."""
    folder = resources.files("xpusim.web") / "static"
    return {f.name: (f.read_bytes(), STATIC_TYPES[f.name[f.name.rfind("."):]])
            for f in folder.iterdir() if f.name[f.name.rfind("."):] in STATIC_TYPES}  # fmt: skip


class TooMuch(UserError):
    """More work than one request may ask for (HTTP 413)."""


class BodyLimit:
    """ASGI middleware refusing a request body over `limit` bytes before anything parses it,
    whether its length is declared or streamed: the body is read (up to the limit) first and
    handed on whole."""

    def __init__(self, app: Any, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            await self._refuse(send)
            return
        body, more = bytearray(), True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.limit:
                await self._refuse(send)
                return
        whole = [{"type": "http.request", "body": bytes(body), "more_body": False}]

        async def replay() -> dict:
            return whole.pop() if whole else await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send: Callable) -> None:
        response = JSONResponse({"error": f"request body over {self.limit:,} bytes"},
                                status_code=413)  # fmt: skip
        await response({"type": "http"}, None, send)  # type: ignore[arg-type]


class ValidationJob:
    """`xpusim validate` as one background job per chip filter: the first request starts
    it, later ones see its progress, and its result is kept (it changes only with xpusim's
    version). One runs at a time: it is minutes of one core's work."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.results: dict[str, tuple[int, dict[str, Any]]] = {}  # key: (status, body)
        self.running: tuple[str, list[int]] | None = None  # (key, [done, total])

    def status(self, chip: str | None) -> tuple[int, dict[str, Any]]:
        from xpusim.validation.points import load_points

        points = tuple(p for p in load_points() if chip in (None, p.chip))
        if not points:
            chips = sorted({p.chip for p in load_points()})
            raise UserError(f"chip: no published point measures {chip!r}; those that do: "
                            f"{', '.join(chips)}")  # fmt: skip
        key = chip or "all"
        with self.lock:
            if key in self.results:
                return self.results[key]
            if self.running is not None:
                running, (done, total) = self.running
                if running != key:
                    raise UserError(f"a validation of {running} is running ({done} of {total} "
                                    "points); ask again when it has finished")  # fmt: skip
                return 202, {"status": "running", "done": done, "total": total}
            counts = [0, len(points)]
            self.running = (key, counts)
        threading.Thread(target=self._run, args=(key, points, counts), daemon=True).start()
        return 202, {"status": "running", "done": 0, "total": len(points)}

    def _run(self, key: str, points: tuple, counts: list[int]) -> None:
        from xpusim.validation.score import validate

        def progress(done: int, total: int) -> None:
            counts[0] = done

        try:
            found = 200, validate(points, progress).to_dict()
        except UserError as error:
            found = 400, {"error": str(error)}
        except Exception as error:  # a bug: said in the answer, not lost in a thread
            found = 500, {"error": f"validation failed (a bug in xpusim): {error}"}
        with self.lock:
            self.results[key] = found
            self.running = None


def create_app(limits: Limits | None = None) -> FastAPI:
    """The app, with its limits (a test shrinks them to fuzz quickly)."""
    limits = limits or Limits()
    app = FastAPI(title="xpusim", version=version("xpusim"), docs_url=None, redoc_url=None,
                  openapi_url="/api/openapi.json",
                  description="Simulate ML models on AI accelerators (docs/web.md).")  # fmt: skip
    app.add_middleware(BodyLimit, limit=limits.body_bytes)
    files = _static_files()
    threads: list[anyio.CapacityLimiter] = []  # made on the event loop, on first use
    jobs = ValidationJob()

    async def off_loop(work: Callable[[], Any]) -> Any:
        if not threads:
            threads.append(anyio.CapacityLimiter(limits.threads))
        return await anyio.to_thread.run_sync(work, limiter=threads[0])

    @app.exception_handler(UserError)
    async def user_error(request: Request, error: UserError) -> JSONResponse:
        code = 413 if isinstance(error, TooMuch) else 400
        return JSONResponse({"error": str(error)}, status_code=code)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"error": str(error.detail)}, status_code=error.status_code,
                            headers=getattr(error, "headers", None))  # fmt: skip

    @app.exception_handler(RequestValidationError)
    async def schema_error(request: Request, error: RequestValidationError) -> JSONResponse:
        return JSONResponse({"error": _one_line(error)}, status_code=400)

    @app.get("/", include_in_schema=False)
    async def page() -> Response:
        body, media = files["index.html"]
        return Response(body, media_type=media)

    @app.get("/static/{name}", include_in_schema=False)
    async def static(name: str) -> Response:
        if name not in files:
            return JSONResponse({"error": f"no file {name!r}"}, status_code=404)
        body, media = files[name]
        return Response(body, media_type=media, headers={"Cache-Control": "no-cache"})

    @app.get("/api/chips", summary="The chip and system catalog, each figure with its source")
    async def chips() -> dict[str, Any]:
        return await anyio.to_thread.run_sync(_catalog)  # kept once made: not queued

    @app.get("/api/models", summary="The model zoo")
    async def models() -> dict[str, Any]:
        return await anyio.to_thread.run_sync(_models)

    @app.post("/api/run", summary="One simulation, as `xpusim run --json`", responses=ERRORS)
    async def run(request: RunRequest) -> dict[str, Any]:
        def work() -> dict[str, Any]:
            from xpusim import api
            from xpusim.hardware.whatif import apply

            spec = request.target.spec()
            if request.set:
                spec = apply(spec, list(request.set.items()))
            options = _with_chips(given(request.options), request.target.chips)
            result = api.simulate(request.workload(), spec, options.pop("mode", "inference"),
                                  **options)  # fmt: skip
            return views.simulated(result, spec)

        return await off_loop(work)

    @app.post("/api/compare", summary="One workload on several targets", responses=ERRORS)
    async def compare(request: CompareRequest) -> dict[str, Any]:
        _at_most(len(request.targets), limits.targets, "targets")

        def work() -> dict[str, Any]:
            from xpusim import api

            workload, options = request.workload(), given(request.options)
            mode = options.pop("mode", "inference")
            api.check_options(workload, mode, **options)  # the request's own mistakes: a 400
            found = []
            for target in request.targets:  # a target's own (a format it lacks): its row
                try:
                    spec = target.spec()
                    result = api.simulate(workload, spec, mode,
                                          **_with_chips(options, target.chips))  # fmt: skip
                    found.append(views.simulated(result, spec))
                except UserError as error:
                    found.append({"target": target.chip, "error": str(error)})
            return {"results": found}

        return await off_loop(work)

    @app.post("/api/sweep", summary="Every combination of the axes, and Pareto fronts",
              responses=ERRORS)  # fmt: skip
    async def sweep(request: SweepRequest) -> dict[str, Any]:
        _at_most(len(request.targets), limits.targets, "targets")
        axes = given(request.axes)
        n = len(request.targets) * math.prod(len(v) for v in axes.values())
        _at_most(n, limits.sweep_points, "sweep points")

        def work() -> dict[str, Any]:
            from xpusim import api

            workload = request.workload()
            api.check_options(workload, **dict.fromkeys(axes))
            specs = {t.chip: t.spec() for t in request.targets}
            pairs = [(t.chip, t.chips) for t in request.targets]
            points = views.sweep_points(pairs, {k: list(dict.fromkeys(v)) for k, v in axes.items()})
            return views.sweep(workload, specs, points, request.rank)

        return await off_loop(work)

    @app.post("/api/serve", summary="Serving under load, as `xpusim serve --json`",
              responses=ERRORS)  # fmt: skip
    async def serve(request: ServeRequest) -> dict[str, Any]:
        options = _with_chips(given(request.options), request.target.chips)
        requests = _requests(options, REQUESTS, limits.serve_requests)
        if options.get("find") and requests * FIND_RUNS > limits.serve_requests:
            raise TooMuch(f"find runs up to {FIND_RUNS} simulations: give at most "
                          f"{limits.serve_requests // FIND_RUNS} requests with it")  # fmt: skip

        def work() -> dict[str, Any]:
            from xpusim import api

            spec = request.target.spec()
            result = api.serve(request.workload(), spec, **options)
            return {"result": result.to_dict(), "chip": views.chip_card(views.chip_of(spec))}

        return await off_loop(work)

    @app.post("/api/plan", summary="The cheapest configuration within p99 TTFT and TPOT "
              "objectives, as `xpusim plan --json`, with its front", responses=ERRORS)
    async def plan(request: PlanRequest) -> dict[str, Any]:
        _at_most(len(request.chips), limits.targets, "chips")
        options = given(request.options)
        from xpusim.planning.search import DEFAULT_REQUESTS

        _requests(options, DEFAULT_REQUESTS, limits.serve_requests)
        for name in ("num_chips", "max_chips"):
            _at_most(options.get(name) or 0, limits.plan_chips, name)

        def work() -> dict[str, Any]:
            from xpusim.planning.front import front
            from xpusim.planning.search import plan as run_plan

            for chip in request.chips:  # one message for an unknown id, as the targets'
                Target(chip=chip).spec()
            result = run_plan(request.workload(), request.chips, **options)
            return {**result.to_dict(), "front": front(result)}

        return await off_loop(work)

    @app.get("/api/validate", summary="Predictions against published measurements; 202 "
             "with progress while the job runs", responses={**ERRORS, 202: {"model": Progress}})
    async def validate(chip: str | None = None) -> JSONResponse:
        code, body = await off_loop(lambda: jobs.status(chip))
        return JSONResponse(body, status_code=code)

    return app


def _with_chips(options: dict[str, Any], chips: int | None) -> dict[str, Any]:
    return {**options, "chips": chips} if chips is not None else dict(options)


def _requests(options: dict[str, Any], base: int, limit: int) -> int:
    """The requests each simulation serves, held to the limit: those given, or the default
    (serving/options.default_requests: `base`, or 8 per client of a larger closed loop),
    which nobody typed, so its refusal names it and says what to give."""
    if options.get("requests") is not None:
        _at_most(options["requests"], limit, "serving requests")
        return options["requests"]
    n = default_requests(options.get("concurrency"), base)
    if n > limit:
        raise TooMuch(f"serving requests: {n:,} by default for this load ({base:,}, or 8 per "
                      f"client of a larger concurrency); at most {limit:,} per request: give "
                      "fewer as 'requests'")  # fmt: skip
    return n


def _at_most(n: int, limit: int, what: str) -> None:
    if n > limit:
        raise TooMuch(f"{what}: {n:,} asked for; at most {limit:,} per request (the command "
                      "line has no such limit)")  # fmt: skip


def _one_line(error: RequestValidationError) -> str:
    """The first schema error as `field.path: message` (more: "and N more")."""
    problems = error.errors()
    first = problems[0]
    where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "body"
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"{where}: {first.get('msg', 'invalid')}{more}"


@cache  # the catalog does not change while the server runs
def _catalog() -> dict[str, Any]:
    from xpusim.hardware.catalog import chip_ids, load_chip
    from xpusim.hardware.system import load_system, system_ids

    return {"chips": [views.chip_card(load_chip(i)) for i in chip_ids()],
            "systems": [views.system_card(load_system(i)) for i in system_ids()]}  # fmt: skip


@cache
def _models() -> dict[str, Any]:
    from xpusim.workloads.zoo import built_ids, zoo_entry

    found = []
    for entry in map(zoo_entry, built_ids()):
        params = getattr(entry.config, "param_count", None)
        found.append({"id": entry.id, "hf_repo": entry.hf_repo, "params": params,
                      "kind": type(entry.config).__name__, "source": entry.source})  # fmt: skip
    return {"models": found}


def serve(host: str, port: int, announce: Callable[[str], None]) -> None:
    """Runs the server until interrupted; port 0 takes a free one, announced before serving,
    after a warning where the address is reachable from beyond this machine."""
    import socket

    import uvicorn

    shared = not host_is_loopback(host)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise UserError(f"--host {host} --port {port}: cannot listen there: "
                        f"{e.strerror or e}") from None  # fmt: skip
    if shared:  # once it listens: a refused address says one line, not a warning too
        announce(f"warning: --host {host} is reachable beyond this machine: anyone who can "
                 "connect can run simulations on it")  # fmt: skip
    sock.listen(2048)  # connections made once the address is announced wait, not fail
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    announce(f"xpusim web: http://{shown}:{sock.getsockname()[1]}/ (Ctrl-C stops)")
    config = uvicorn.Config(create_app(), log_level="warning", access_log=False)
    uvicorn.Server(config).run(sockets=[sock])


def host_is_loopback(host: str) -> bool:
    """Whether `host` (an address or a name) listens on this machine's loopback only. An
    empty host, which the socket binds to every interface, is a UserError: sharing the
    server beyond this machine is asked for by name (0.0.0.0), never by an empty string.
    A name is resolved; one that resolves to anything but loopback counts as shared."""
    import ipaddress
    import socket

    if not host.strip():
        raise UserError(f"--host {host!r}: give an address: 127.0.0.1 (the default) for "
                        "this machine only, 0.0.0.0 for every interface")  # fmt: skip
    try:
        found = {info[4][0] for info in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)}
    except (OSError, UnicodeError) as e:
        raise UserError(f"--host {host}: not an address of this machine ({e})") from None
    return all(ipaddress.ip_address(a.split("%", 1)[0]).is_loopback for a in found)
