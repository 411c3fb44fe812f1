#!/usr/bin/env python3
"""Benchmark HTTP clients for Jobgate's push path and ASGI servers for the worker side.

A trivial Starlette worker app (``POST /`` reads the JSON body and answers ``{"ok": true}``) is
started in a subprocess on a free 127.0.0.1 port, once under uvicorn (uvloop + httptools, one
worker) and once under hypercorn (default config). Each client option then POSTs a ~300-byte JSON
body with a few custom headers and reads the JSON answer, ``--requests`` times at each
``--concurrency`` level. Every measurement is repeated ``--repeats`` times (interleaved across
options) and the median of each metric is printed as Markdown tables.

Metrics: wall time, requests/s, client-process CPU time per request (``time.process_time()``),
worker-process CPU time per request (utime + stime from ``/proc/PID/stat``), and p50/p99 latency.

By default the client is pinned to CPU 0 and the worker to CPU 1 (when the machine has at least
two CPUs) so that the two processes do not fight over one core.

Usage (from the repository root)::

    .venv/bin/python bench/push_clients.py            # full run
    .venv/bin/python bench/push_clients.py --quick    # smoke run

Option (c) needs the ``httpx-aiohttp`` package (``pip install httpx-aiohttp``); it is skipped with
a note when the package is missing.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import http.client
import importlib.metadata
import importlib.util
import json
import math
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import uvloop
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

try:
    from httpx_aiohttp import AiohttpTransport
except ImportError:  # pragma: no cover - depends on the environment
    AiohttpTransport = None  # type: ignore[assignment,misc]

HOST = "127.0.0.1"
SERVERS = ("uvicorn", "hypercorn")
REQUEST_TIMEOUT_S = 10.0
HARD_TIMEOUT_MARGIN_S = 60.0
READY_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0
MAX_ERRORS = 50

# A push as the gateway sends it: ~300 bytes of JSON plus a few custom headers.
PAYLOAD: dict[str, Any] = {
    "job_id": "01JDQ3ZK6R0V9Y1C4M2W8N5T7B",
    "queue": "emails",
    "task": "send_welcome_email",
    "attempt": 1,
    "max_attempts": 5,
    "enqueued_at": "2026-11-22T02:50:59.123456Z",
    "args": {"user_id": 4242, "template": "welcome-v3", "locale": "en-GB"},
    "meta": {"tenant": "acme", "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"},
}
BODY: bytes = json.dumps(PAYLOAD, separators=(",", ":")).encode()
HEADERS: dict[str, str] = {
    "content-type": "application/json",
    "user-agent": "jobgate-bench/0.1",
    "x-jobgate-job-id": str(PAYLOAD["job_id"]),
    "x-jobgate-attempt": "1",
    "x-jobgate-queue": "emails",
    "webhook-signature": "v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=",
}
EXPECTED_ANSWER: dict[str, Any] = {"ok": True}


# --------------------------------------------------------------------------- worker app / server


async def push_endpoint(request: Request) -> JSONResponse:
    await request.json()
    return JSONResponse(EXPECTED_ANSWER)


def make_app() -> Starlette:
    return Starlette(routes=[Route("/", push_endpoint, methods=["POST"])])


def serve(server: str, port: int, cpu: int | None) -> None:
    """Run the worker app in this process until SIGTERM (the ``--serve`` child mode)."""
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    app = make_app()
    if server == "uvicorn":
        import uvicorn

        config = uvicorn.Config(
            app,
            host=HOST,
            port=port,
            loop="uvloop",
            http="httptools",
            workers=1,
            log_level="warning",
            access_log=False,  # hypercorn's default config has no access log either
        )
        uvicorn.Server(config).run()
    elif server == "hypercorn":
        from hypercorn.asyncio import serve as hypercorn_serve
        from hypercorn.config import Config

        hconfig = Config()
        hconfig.bind = [f"{HOST}:{port}"]
        asyncio.run(hypercorn_serve(app, hconfig))  # type: ignore[arg-type]
    else:
        raise SystemExit(f"unknown server {server!r}")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class ServerHandle:
    name: str
    pid: int
    url: str

    def cpu_seconds(self) -> float:
        """utime + stime of the server process, in seconds (NaN when /proc is unavailable)."""
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return float("nan")
        fields = stat.rsplit(")", 1)[1].split()
        ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 in proc(5))
        return ticks / os.sysconf("SC_CLK_TCK")


def probe_once(port: int) -> bool:
    conn = http.client.HTTPConnection(HOST, port, timeout=1.0)
    try:
        conn.request("POST", "/", body=BODY, headers=HEADERS)
        resp = conn.getresponse()
        resp.read()
        return resp.status == 200
    except OSError:
        return False
    finally:
        conn.close()


def wait_ready(proc: subprocess.Popen[bytes], port: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    delay = 0.01
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited early with code {proc.returncode}")
        if probe_once(port):
            return
        if time.monotonic() >= deadline:
            raise TimeoutError(f"server not ready on port {port} after {timeout_s:.0f}s")
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


@contextmanager
def running_server(name: str, cpu: int | None) -> Iterator[ServerHandle]:
    port = free_port()
    cmd = [sys.executable, str(Path(__file__).resolve()), "--serve", name, "--port", str(port)]
    if cpu is not None:
        cmd += ["--cpu", str(cpu)]
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        try:
            try:
                wait_ready(proc, port, READY_TIMEOUT_S)
            except Exception:
                log.seek(0)
                sys.stderr.write(log.read().decode(errors="replace")[-4000:])
                raise
            yield ServerHandle(name=name, pid=proc.pid, url=f"http://{HOST}:{port}/")
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


# --------------------------------------------------------------------------------- clients


class BadResponseError(Exception):
    pass


def check_answer(status: int, answer: Any) -> None:
    if status != 200 or answer != EXPECTED_ANSWER:
        raise BadResponseError(f"status={status} answer={answer!r}")


@dataclass(frozen=True)
class AsyncPusher:
    push: Callable[[], Awaitable[None]]
    protocol: Callable[[], Awaitable[str]]


AsyncFactory = Callable[[str, int], AbstractAsyncContextManager[AsyncPusher]]


def httpx_limits(concurrency: int) -> httpx.Limits:
    return httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)


def httpx_pusher(client: httpx.AsyncClient, url: str) -> AsyncPusher:
    async def push() -> None:
        resp = await client.post(url, content=BODY, headers=HEADERS)
        check_answer(resp.status_code, resp.json())

    async def protocol() -> str:
        resp = await client.post(url, content=BODY, headers=HEADERS)
        return resp.http_version

    return AsyncPusher(push, protocol)


@asynccontextmanager
async def httpx_h1(url: str, concurrency: int) -> AsyncIterator[AsyncPusher]:
    async with httpx.AsyncClient(
        limits=httpx_limits(concurrency), timeout=REQUEST_TIMEOUT_S
    ) as client:
        yield httpx_pusher(client, url)


@asynccontextmanager
async def httpx_http2(url: str, concurrency: int) -> AsyncIterator[AsyncPusher]:
    # http2=True only upgrades via TLS ALPN: on cleartext http:// this speaks HTTP/1.1.
    async with httpx.AsyncClient(
        http2=True, limits=httpx_limits(concurrency), timeout=REQUEST_TIMEOUT_S
    ) as client:
        yield httpx_pusher(client, url)


@asynccontextmanager
async def httpx_h2c(url: str, concurrency: int) -> AsyncIterator[AsyncPusher]:
    # HTTP/2 with prior knowledge over cleartext (h2c); needs a server that speaks it.
    async with httpx.AsyncClient(
        http1=False, http2=True, limits=httpx_limits(concurrency), timeout=REQUEST_TIMEOUT_S
    ) as client:
        yield httpx_pusher(client, url)


@asynccontextmanager
async def httpx_over_aiohttp(url: str, concurrency: int) -> AsyncIterator[AsyncPusher]:
    if AiohttpTransport is None:
        raise RuntimeError("httpx-aiohttp is not installed")
    # The transport builds its own aiohttp.TCPConnector(limit=limits.max_connections); the
    # AsyncClient's own ``limits`` argument is ignored once a transport is passed.
    transport = AiohttpTransport(limits=httpx_limits(concurrency))
    async with httpx.AsyncClient(transport=transport, timeout=REQUEST_TIMEOUT_S) as client:
        yield httpx_pusher(client, url)


@asynccontextmanager
async def aiohttp_session(url: str, concurrency: int) -> AsyncIterator[AsyncPusher]:
    connector = aiohttp.TCPConnector(limit=concurrency)
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def push() -> None:
            async with session.post(url, data=BODY, headers=HEADERS) as resp:
                check_answer(resp.status, await resp.json())

        async def protocol() -> str:
            async with session.post(url, data=BODY, headers=HEADERS) as resp:
                await resp.read()
                version = resp.version
                return "?" if version is None else f"HTTP/{version.major}.{version.minor}"

        yield AsyncPusher(push, protocol)


@dataclass(frozen=True)
class ClientOption:
    key: str
    label: str
    async_factory: AsyncFactory | None = None
    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None
    sync: bool = False
    only_concurrency: int | None = None
    only_servers: tuple[str, ...] | None = None
    unavailable: str | None = None

    def applies(self, server: str, concurrency: int) -> bool:
        if self.unavailable is not None:
            return False
        if self.only_concurrency is not None and concurrency != self.only_concurrency:
            return False
        return self.only_servers is None or server in self.only_servers


CLIENT_OPTIONS: tuple[ClientOption, ...] = (
    ClientOption("a", "httpx.AsyncClient (h1)", async_factory=httpx_h1),
    ClientOption("b", "httpx.AsyncClient(http2=True)", async_factory=httpx_http2),
    ClientOption(
        "b2",
        "httpx.AsyncClient(http1=False, http2=True) h2c",
        async_factory=httpx_h2c,
        only_servers=("hypercorn",),  # uvicorn has no HTTP/2
    ),
    ClientOption(
        "c",
        "httpx.AsyncClient + httpx_aiohttp.AiohttpTransport",
        async_factory=httpx_over_aiohttp,
        unavailable=None if AiohttpTransport is not None else "pip install httpx-aiohttp",
    ),
    ClientOption("d", "aiohttp.ClientSession", async_factory=aiohttp_session),
    ClientOption(
        "e",
        "aiohttp.ClientSession + uvloop",
        async_factory=aiohttp_session,
        loop_factory=uvloop.new_event_loop,
    ),
    ClientOption("f", "httpx.Client (sync)", sync=True, only_concurrency=1),
)


# ----------------------------------------------------------------------------- measurement


@dataclass
class Sample:
    completed: int
    wall_s: float
    rps: float
    client_cpu_us: float
    server_cpu_us: float
    p50_us: float
    p99_us: float
    errors: int
    protocol: str
    first_error: str | None = None


@dataclass
class DriveStats:
    issued: int = 0
    errors: int = 0
    first_error: str | None = None
    latencies: list[float] = field(default_factory=list)


async def drive(
    push: Callable[[], Awaitable[None]], concurrency: int, count: int, max_seconds: float
) -> DriveStats:
    """Issue up to ``count`` pushes from ``concurrency`` tasks.

    Stops issuing after ``max_seconds`` or after MAX_ERRORS errors, whichever comes first.
    """
    stats = DriveStats()
    remaining = count
    deadline = time.perf_counter() + max_seconds

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            stats.issued += 1
            start = time.perf_counter()
            try:
                await push()
            except Exception as exc:
                stats.errors += 1
                stats.first_error = stats.first_error or repr(exc)
                if stats.errors >= MAX_ERRORS:
                    remaining = 0
                continue
            end = time.perf_counter()
            stats.latencies.append(end - start)
            if end > deadline:
                remaining = 0

    async with asyncio.TaskGroup() as group:
        for _ in range(min(concurrency, count)):
            group.create_task(worker())
    return stats


def summarize(stats: DriveStats, wall: float, cpu: float, server_cpu: float, proto: str) -> Sample:
    lat = sorted(stats.latencies)
    if len(lat) >= 2:
        cuts = statistics.quantiles(lat, n=100, method="inclusive")
        p50, p99 = cuts[49], cuts[98]
    else:
        p50 = p99 = lat[0] if lat else float("nan")
    issued = max(stats.issued, 1)
    return Sample(
        completed=len(lat),
        wall_s=wall,
        rps=len(lat) / wall,
        client_cpu_us=cpu / issued * 1e6,
        server_cpu_us=server_cpu / issued * 1e6,
        p50_us=p50 * 1e6,
        p99_us=p99 * 1e6,
        errors=stats.errors,
        protocol=proto,
        first_error=stats.first_error,
    )


@dataclass(frozen=True)
class Budget:
    """How much work one measurement may do."""

    requests: int
    warmup: int
    max_seconds: float


async def measure_async_once(
    factory: AsyncFactory, server: ServerHandle, concurrency: int, budget: Budget
) -> Sample:
    async with factory(server.url, concurrency) as pusher:
        # Warm-up at full concurrency so the pool's connections are open before timing.
        await drive(pusher.push, concurrency, budget.warmup, budget.max_seconds)
        proto = await pusher.protocol()
        gc.collect()
        srv0, cpu0, t0 = server.cpu_seconds(), time.process_time(), time.perf_counter()
        stats = await drive(pusher.push, concurrency, budget.requests, budget.max_seconds)
        wall = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
        srv = server.cpu_seconds() - srv0
    return summarize(stats, wall, cpu, srv, proto)


def measure_sync_once(server: ServerHandle, budget: Budget) -> Sample:
    with httpx.Client(timeout=REQUEST_TIMEOUT_S) as client:

        def push() -> None:
            resp = client.post(server.url, content=BODY, headers=HEADERS)
            check_answer(resp.status_code, resp.json())

        for _ in range(budget.warmup):
            push()
        proto = client.post(server.url, content=BODY, headers=HEADERS).http_version
        gc.collect()
        stats = DriveStats()
        srv0, cpu0, t0 = server.cpu_seconds(), time.process_time(), time.perf_counter()
        deadline = t0 + budget.max_seconds
        for _ in range(budget.requests):
            stats.issued += 1
            start = time.perf_counter()
            try:
                push()
            except Exception as exc:
                stats.errors += 1
                stats.first_error = stats.first_error or repr(exc)
                if stats.errors >= MAX_ERRORS:
                    break
                continue
            end = time.perf_counter()
            stats.latencies.append(end - start)
            if end > deadline:
                break
        wall = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
        srv = server.cpu_seconds() - srv0
    return summarize(stats, wall, cpu, srv, proto)


def measure(option: ClientOption, server: ServerHandle, concurrency: int, budget: Budget) -> Sample:
    if option.sync:
        return measure_sync_once(server, budget)
    assert option.async_factory is not None
    coro = measure_async_once(option.async_factory, server, concurrency, budget)
    hard_timeout = 2 * budget.max_seconds + HARD_TIMEOUT_MARGIN_S
    with asyncio.Runner(loop_factory=option.loop_factory) as runner:
        return runner.run(asyncio.wait_for(coro, hard_timeout))


def failed_sample(exc: BaseException) -> Sample:
    nan = float("nan")
    return Sample(0, nan, nan, nan, nan, nan, nan, 1, "-", first_error=repr(exc))


def median_sample(samples: Sequence[Sample]) -> Sample:
    def med(attr: str) -> float:
        values = [float(getattr(s, attr)) for s in samples]
        values = [v for v in values if not math.isnan(v)]
        return statistics.median(values) if values else float("nan")

    errors = [s.first_error for s in samples if s.first_error]
    return Sample(
        completed=round(med("completed")),
        wall_s=med("wall_s"),
        rps=med("rps"),
        client_cpu_us=med("client_cpu_us"),
        server_cpu_us=med("server_cpu_us"),
        p50_us=med("p50_us"),
        p99_us=med("p99_us"),
        errors=sum(s.errors for s in samples),
        protocol="/".join(sorted({s.protocol for s in samples})),
        first_error=errors[0] if errors else None,
    )


# ---------------------------------------------------------------------------------- report

Key = tuple[str, str, int]  # server, client key, concurrency


def fmt(value: float, digits: int = 0) -> str:
    return "n/a" if math.isnan(value) else f"{value:,.{digits}f}"


def render(
    results: dict[Key, Sample],
    options: Sequence[ClientOption],
    servers: Sequence[str],
    concurrencies: Sequence[int],
) -> str:
    labels = {o.key: o.label for o in options}
    lines = [
        "| server | client | conc | n | wall s | req/s | client CPU µs/req | server CPU µs/req "
        "| p50 µs | p99 µs | errors | protocol |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|",
    ]
    for server in servers:
        for conc in concurrencies:
            for option in options:
                sample = results.get((server, option.key, conc))
                if sample is None:
                    continue
                lines.append(
                    f"| {server} | ({option.key}) {labels[option.key]} | {conc} "
                    f"| {sample.completed} | {fmt(sample.wall_s, 2)} | {fmt(sample.rps)} "
                    f"| {fmt(sample.client_cpu_us)} | {fmt(sample.server_cpu_us)} "
                    f"| {fmt(sample.p50_us)} | {fmt(sample.p99_us)} "
                    f"| {sample.errors} | {sample.protocol} |"
                )
    cols = [(s, c) for s in servers for c in concurrencies]
    lines += [
        "",
        "Requests/s (median):",
        "",
        "| client | " + " | ".join(f"{s} c={c}" for s, c in cols) + " |",
        "|---|" + "--:|" * len(cols),
    ]
    for option in options:
        cells = []
        for server, conc in cols:
            sample = results.get((server, option.key, conc))
            cells.append("-" if sample is None else fmt(sample.rps))
        if any(cell != "-" for cell in cells):
            lines.append(f"| ({option.key}) {option.label} | " + " | ".join(cells) + " |")
    notes = [f"- ({o.key}) {o.label}: skipped ({o.unavailable})" for o in options if o.unavailable]
    notes += [
        f"- {server} / ({key}) c={conc}: first error: {s.first_error}"
        for (server, key, conc), s in results.items()
        if s.first_error
    ]
    if notes:
        lines += ["", "Notes:", "", *notes]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------ main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=5000, help="max POSTs per measurement")
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=3.0,
        help="stop issuing POSTs after this long (bounds the slow options)",
    )
    parser.add_argument("--repeats", type=int, default=3, help="runs per measurement (median)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--servers", nargs="+", choices=SERVERS, default=list(SERVERS))
    parser.add_argument(
        "--clients",
        nargs="+",
        choices=[o.key for o in CLIENT_OPTIONS],
        default=[o.key for o in CLIENT_OPTIONS],
    )
    parser.add_argument("--warmup", type=int, default=None, help="default: max(100, 2*conc)")
    parser.add_argument("--no-pin", action="store_true", help="do not pin client/server CPUs")
    parser.add_argument("--json", type=Path, default=None, help="also write raw samples here")
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: 300 requests, 1 repeat, 1 s cap"
    )
    parser.add_argument("--serve", choices=SERVERS, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--cpu", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.requests, args.repeats, args.max_seconds = 300, 1, 1.0
    if args.requests < 1 or args.repeats < 1 or min(args.concurrency) < 1:
        parser.error("--requests, --repeats and --concurrency must be >= 1")
    if args.max_seconds <= 0:
        parser.error("--max-seconds must be > 0")
    return args


def has_module(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def describe_run(
    args: argparse.Namespace, pin: bool, elapsed: float, load: tuple[float, float, float]
) -> str:
    versions = ", ".join(
        f"{dist} {importlib.metadata.version(dist)}"
        for dist in ("httpx", "httpcore", "anyio", "aiohttp", "uvicorn", "hypercorn", "starlette")
    )
    return (
        f"Python {platform.python_version()}; {versions}; "
        f"sniffio {'installed' if has_module('sniffio') else 'NOT installed'}\n\n"
        f"Up to {args.requests} POSTs or {args.max_seconds:g} s per measurement, "
        f"{args.repeats} repeats (median), body {len(BODY)} B, "
        f"CPU pinning {'on (client CPU 0, server CPU 1)' if pin else 'off'}, "
        f"1-min load average at start {load[0]:.2f}, total {elapsed:.0f} s"
    )


def run_all(
    args: argparse.Namespace, options: Sequence[ClientOption], pin: bool
) -> dict[Key, list[Sample]]:
    started = time.perf_counter()
    raw: dict[Key, list[Sample]] = {}
    concurrencies = sorted(set(args.concurrency))
    for server_name in args.servers:
        with running_server(server_name, 1 if pin else None) as server:
            for rep in range(1, args.repeats + 1):
                for conc in concurrencies:
                    for option in options:
                        if not option.applies(server_name, conc):
                            continue
                        warmup = args.warmup if args.warmup is not None else max(100, 2 * conc)
                        budget = Budget(args.requests, warmup, args.max_seconds)
                        try:
                            sample = measure(option, server, conc, budget)
                        except Exception as exc:
                            sample = failed_sample(exc)
                        raw.setdefault((server_name, option.key, conc), []).append(sample)
                        print(
                            f"[{time.perf_counter() - started:6.1f}s] {server_name} rep {rep} "
                            f"({option.key}) c={conc}: n={sample.completed} "
                            f"{fmt(sample.rps)} req/s {fmt(sample.client_cpu_us)} µs CPU/req "
                            f"errors={sample.errors}",
                            file=sys.stderr,
                            flush=True,
                        )
    return raw


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.serve:
        serve(args.serve, args.port, args.cpu)
        return 0

    pin = not args.no_pin and hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) >= 2
    if pin:
        os.sched_setaffinity(0, {0})
    options = [o for o in CLIENT_OPTIONS if o.key in args.clients]
    load = os.getloadavg()
    started = time.perf_counter()
    raw = run_all(args, options, pin)
    results = {key: median_sample(samples) for key, samples in raw.items()}

    print(describe_run(args, pin, time.perf_counter() - started, load))
    print()
    print(render(results, options, args.servers, sorted(set(args.concurrency))))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        dump = {"|".join(map(str, k)): [asdict(s) for s in v] for k, v in raw.items()}
        args.json.write_text(json.dumps(dump, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
