"""The SDK's HTTP client candidates: CPU per request of the calling process, one request at a
time (a producer's single enqueue, a worker's heartbeat), against a trivial loopback server.

The server is a bare asyncio protocol in a child process that answers every request over
keep-alive, with a task's JSON (as an enqueue's answer) when the path holds ``/tasks`` (its
receipt when the request carries ``Prefer: return=minimal``, as the gateway does), else
with a heartbeat's small answer; so the figures are the client's own cost. The candidates run
in alternating rounds in one sitting (asyncio's default loop, as a producer has it):

- ``httpx-aiohttp``: ``httpx.AsyncClient`` over ``httpx_aiohttp.AiohttpTransport`` (the
  AsyncClient before issue 19);
- ``httpx``: ``httpx.AsyncClient`` on its own pool, httpcore (the worker's callbacks before);
- ``aiohttp``: :class:`sdk.sessions.AioSession` (the async clients since issue 19);
- ``httpx sync``: ``httpx.Client`` (the blocking :class:`sdk.Client` before issue 20);
- ``urllib3 sync``: ``urllib3.PoolManager``;
- ``http.client sync``: :class:`sdk.blocking.BlockingSession` (the blocking client since).

``--sdk`` measures the whole producer path instead, as a user calls it: ``task.delay()``
through a default ``Client`` and ``await task.delay_async()`` through a default
``AsyncClient``, request built, sent and its answer read into a handle; and the AsyncClient
over httpx-aiohttp (given as its transport: the producer issue 20's baseline was measured
on). ``--trees A B ...`` runs ``--sdk`` with each source tree first on the path, alternating,
for before/after figures (the same script, the server shared).

Prints µs of CPU per request (median of the rounds) and the ratio to the first candidate.
Run: ``.venv/bin/python bench/sdk_client_cost.py`` (``--requests``, ``--rounds``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

from sdk.sessions import AioSession

BODY = b'{"progress":0.5}'
ANSWER = b'{"cancel_requested":false,"lease_expires_at":"2030-01-01T00:00:00Z"}'
TASK = (
    b'{"id":"01KAQ2Z8X3J5N7P9R1T3V5X7Z9","queue":"bench","name":"bench.noop","payload":'
    b'{"args":[1],"kwargs":{}},"priority":0,"state":"queued","deduplicated":false,"owner":null,'
    b'"version":null,"trace_id":null,"capability":null,"dedup_key":null,"singleton_key":null,'
    b'"group":null,"depends_on":[],"after_group":null,"waiting_on":[],"endpoint_id":null,'
    b'"last_heartbeat_at":null,"stalled":false,"attempt":0,"max_attempts":5,'
    b'"created_at":"2026-11-26T20:00:00.123000Z","run_at":"2026-11-26T20:00:00.123000Z",'
    b'"started_at":null,"finished_at":null,"lease_expires_at":null,"progress":null,'
    b'"cancel_requested":false,"result":null,"warning":null,"error":null,"checkpoint":null,'
    b'"attempts":[],"redrives":0,"notify":null,"notice":null}'
)


RECEIPT = b'{"id":"01KAQ2Z8X3J5N7P9R1T3V5X7Z9","state":"queued","deduplicated":false}'
MINIMAL = b"prefer: return=minimal"


def _response(status: bytes, body: bytes, extra: bytes = b"") -> bytes:
    head = b"HTTP/1.1 " + status + b"\r\ncontent-type: application/json\r\n" + extra
    return head + b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body


RESPONSE = _response(b"200 OK", ANSWER)
CREATED = _response(b"201 Created", TASK)
CREATED_MINIMAL = _response(b"201 Created", RECEIPT, b"preference-applied: return=minimal\r\n")


class _Answering(asyncio.Protocol):
    """Answers each request (headers, then its content-length of body) with RESPONSE."""

    def __init__(self) -> None:
        self.buffer = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            head = self.buffer[:end].lower()
            length = 0
            for line in head.split(b"\r\n"):
                if line.startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            if len(self.buffer) < end + 4 + length:
                return
            self.buffer = self.buffer[end + 4 + length :]
            answer = RESPONSE
            if b"/tasks" in head.split(b"\r\n", 1)[0]:
                answer = CREATED_MINIMAL if MINIMAL in head else CREATED
            self.transport.write(answer)  # type: ignore[attr-defined]


async def _serve() -> None:
    server = await asyncio.get_running_loop().create_server(_Answering, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()


@contextlib.contextmanager
def server() -> Iterator[str]:
    child = subprocess.Popen([sys.executable, __file__, "--serve"], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        yield f"http://127.0.0.1:{port}/v1/callbacks/q/t/heartbeat"
    finally:
        child.terminate()
        child.wait(10)


Send = Callable[[], Awaitable[object]]


async def _cpu_per_request(send: Send, requests: int) -> float:
    for _ in range(100):  # connect, warm caches
        await send()
    start = time.process_time()
    for _ in range(requests):
        await send()
    return (time.process_time() - start) / requests * 1e6


HEADERS = {"content-type": "application/json", "jobgate-lease": "L" * 26}


async def _httpx_aiohttp(url: str, requests: int) -> float:
    from httpx_aiohttp import AiohttpTransport

    async with httpx.AsyncClient(transport=AiohttpTransport()) as http:
        return await _cpu_per_request(
            lambda: http.post(url, content=BODY, headers=HEADERS), requests
        )


async def _httpx(url: str, requests: int) -> float:
    async with httpx.AsyncClient() as http:
        return await _cpu_per_request(
            lambda: http.post(url, content=BODY, headers=HEADERS), requests
        )


async def _aiohttp(url: str, requests: int) -> float:
    session = AioSession()
    try:
        return await _cpu_per_request(
            lambda: session.request("POST", url, content=BODY, headers=HEADERS, timeout=10),
            requests,
        )
    finally:
        await session.aclose()


def _blocking_cpu(send: Callable[[], object], requests: int) -> float:
    for _ in range(100):
        send()
    start = time.process_time()
    for _ in range(requests):
        send()
    return (time.process_time() - start) / requests * 1e6


def _httpx_sync(url: str, requests: int) -> float:
    with httpx.Client() as http:
        return _blocking_cpu(lambda: http.post(url, content=BODY, headers=HEADERS), requests)


def _urllib3_sync(url: str, requests: int) -> float:
    import urllib3

    with urllib3.PoolManager() as pool:
        return _blocking_cpu(
            lambda: pool.request("POST", url, body=BODY, headers=HEADERS).data, requests
        )


def _http_client_sync(url: str, requests: int) -> float:
    from sdk.blocking import BlockingSession

    base, path = url.split("/v1/", 1)
    session = BlockingSession(base)
    try:
        return _blocking_cpu(
            lambda: session.request(
                "POST", "/v1/" + path, content=BODY, headers=HEADERS, timeout=10
            ),
            requests,
        )
    finally:
        session.close()


Measure = Callable[[str, int], float]


def _on_loop(measure: Callable[[str, int], Awaitable[float]]) -> Measure:
    return lambda url, requests: asyncio.run(measure(url, requests))


CANDIDATES: dict[str, Measure] = {
    "aiohttp": _on_loop(_aiohttp),
    "httpx-aiohttp": _on_loop(_httpx_aiohttp),
    "httpx": _on_loop(_httpx),
    "httpx sync": _httpx_sync,
    "urllib3 sync": _urllib3_sync,
    "http.client sync": _http_client_sync,
}


def _noop_task() -> Any:
    from sdk import task

    @task("bench", name="bench.noop")
    def noop(x: int) -> None: ...

    return noop


def _sdk_sync(url: str, requests: int) -> float:
    from sdk import Client

    with Client(url.split("/v1/")[0]) as client:
        delay = _noop_task().using(client).delay
        return _blocking_cpu(lambda: delay(1), requests)


async def _sdk_async(url: str, requests: int) -> float:
    from sdk import AsyncClient

    async with AsyncClient(url.split("/v1/")[0]) as client:
        delay = _noop_task().using(client).delay_async
        return await _cpu_per_request(lambda: delay(1), requests)


async def _sdk_httpx_aiohttp(url: str, requests: int) -> float:
    from httpx_aiohttp import AiohttpTransport

    from sdk import AsyncClient

    async with AsyncClient(url.split("/v1/")[0], transport=AiohttpTransport()) as client:
        delay = _noop_task().using(client).delay_async
        return await _cpu_per_request(lambda: delay(1), requests)


SDK: dict[str, Measure] = {
    "task.delay() through Client": _sdk_sync,
    "task.delay_async() through AsyncClient": _on_loop(_sdk_async),
    "task.delay_async() through AsyncClient over httpx-aiohttp": _on_loop(_sdk_httpx_aiohttp),
}


def _table(found: dict[str, list[float]]) -> None:
    base = statistics.median(next(iter(found.values())))
    print("| client | CPU µs per request (median) | rounds | over the first |")
    print("| --- | --- | --- | --- |")
    for name, values in found.items():
        median = statistics.median(values)
        rounds = ", ".join(f"{v:.0f}" for v in values)
        print(f"| {name} | {median:.0f} | {rounds} | {median / base:.2f}x |")


def _in_tree(tree: str, url: str, requests: int) -> dict[str, float]:
    """One ``--sdk`` round with ``tree`` first on the path, in a child process."""
    command = [sys.executable, __file__, "--sdk", "--url", url, "--requests", str(requests)]
    env = {**os.environ, "PYTHONPATH": tree}
    out = subprocess.run(command, env=env, capture_output=True, text=True, check=True, cwd=tree)
    return {k: float(v) for k, v in (line.rsplit("=", 1) for line in out.stdout.splitlines())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sdk", action="store_true", help="the whole producer path")
    parser.add_argument("--trees", nargs="+", help="--sdk with each source tree, alternating")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)  # one --sdk round, for --trees
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve())
        return
    if args.url:
        for name, measure in SDK.items():
            print(f"{name}={measure(args.url, args.requests)}")
        return
    found: dict[str, list[float]] = {}
    with server() as url:
        for _ in range(args.rounds):
            if args.trees:
                for tree in args.trees:
                    for name, value in _in_tree(tree, url, args.requests).items():
                        found.setdefault(f"{name}, {Path(tree).name}", []).append(value)
                continue
            for name, measure in (SDK if args.sdk else CANDIDATES).items():
                found.setdefault(name, []).append(measure(url, args.requests))
    _table(found)


if __name__ == "__main__":
    main()
