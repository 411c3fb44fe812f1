"""How much of a push's client CPU is aiohttp's, and how much any HTTP client would pay.

A one-time measurement behind a decision (bench/HISTORY.md, "A minimal push client"): should
the gateway push through an HTTP/1.1 client of its own rather than aiohttp? The floor is
measured with the smallest client that can do the gateway's job on a keep-alive connection: a
request written in one call, the answer read by httptools' parser (the one uvicorn uses),
connections pooled, nothing else (no timeouts, redirects, TLS, proxies or SSRF checks, which a
real client would add back).

Both clients POST the gateway's push shape (its headers and a no-op task's body) to a bare ASGI
app under uvicorn (uvloop, httptools) in another process, ``--in-flight`` at a time, and the
client process's CPU per request is reported; each client runs ``--repeat`` times, alternating.
Run: ``.venv/bin/python -m bench.probes.push_client_floor``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import cast

import aiohttp
import httptools
import uvloop

from bench.e2e import wait_http
from gateway.serving.redis_server import free_port

HEADERS = {
    "content-type": "application/json",
    "webhook-id": "01KAQ2Z8X3J5N7P9R1T3V5X7Z9",
    "webhook-timestamp": "1763887000",
    "webhook-signature": "v1," + "x" * 44,
    "jobgate-attempt": "1",
    "jobgate-lease": "a" * 40,
    "jobgate-callback": "http://127.0.0.1:9/v1/callbacks/bench/01KAQ2Z8X3J5N7P9R1T3V5X7Z9",
}
BODY = (
    b'{"id":"01KAQ2Z8X3J5N7P9R1T3V5X7Z9","queue":"bench","name":"bench.worker_app.noop",'
    b'"payload":{"args":[],"kwargs":{}},"attempt":1,"checkpoint":null,'
    b'"lease_expires_at":"2026-11-23T08:00:30+00:00","deadline":"2026-11-23T08:05:00+00:00"}'
)

# The worker side: reads the body, answers 200 "null" (a no-op task's result).
BARE_APP = """
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": b"null"})
"""


class _Connection(asyncio.Protocol):
    """One keep-alive connection: a request at a time, its answer parsed by httptools."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self.closed = False
        self._body: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionError("connection lost"))

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_message_begin(self) -> None:
        self._body = []

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        assert self.waiter is not None
        self.waiter.set_result((self.parser.get_status_code(), b"".join(self._body)))

    async def request(self, head: bytes, body: bytes) -> tuple[int, bytes]:
        assert self.transport is not None
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(head + body)
        return await self.waiter


class MinimalClient:
    def __init__(self, host: str, port: int) -> None:
        self._host, self._port = host, port
        self._idle: collections.deque[_Connection] = collections.deque()

    async def post(self, path: str, headers: dict[str, str], body: bytes) -> int:
        connection = None
        while self._idle and connection is None:
            candidate = self._idle.pop()
            connection = None if candidate.closed else candidate
        if connection is None:
            _, connection = await asyncio.get_running_loop().create_connection(
                _Connection, self._host, self._port
            )
        lines = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        head = (
            f"POST {path} HTTP/1.1\r\nhost: {self._host}:{self._port}\r\n"
            f"content-length: {len(body)}\r\n{lines}\r\n"
        ).encode("latin-1")
        status, _ = await connection.request(head, body)
        if connection.parser.should_keep_alive():
            self._idle.append(connection)
        elif connection.transport is not None:
            connection.transport.close()
        return status


async def _measure(client: str, port: int, requests: int, in_flight: int) -> float:
    """Client CPU per request in µs."""
    url = f"http://127.0.0.1:{port}/"
    session: aiohttp.ClientSession | None = None
    one: Callable[[], Awaitable[int]]
    if client == "aiohttp":
        session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=512, limit_per_host=0), trust_env=False
        )
        timeout = aiohttp.ClientTimeout(total=30)

        async def via_aiohttp() -> int:
            assert session is not None
            async with session.post(
                url, data=BODY, headers=HEADERS, allow_redirects=False, timeout=timeout
            ) as answer:
                await answer.read()
                return answer.status

        one = via_aiohttp
    else:
        minimal = MinimalClient("127.0.0.1", port)

        async def via_minimal() -> int:
            return await minimal.post("/", HEADERS, BODY)

        one = via_minimal

    async def worker(count: int) -> None:
        for _ in range(count):
            if await one() != 200:
                raise SystemExit("the bare app did not answer 200")

    try:
        await asyncio.gather(*(worker(10) for _ in range(in_flight)))  # warm up
        before = time.process_time()
        await asyncio.gather(*(worker(requests // in_flight) for _ in range(in_flight)))
        return (time.process_time() - before) / (requests // in_flight * in_flight) * 1e6
    finally:
        if session is not None:
            await session.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--in-flight", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    found: dict[str, list[float]] = {"aiohttp": [], "minimal": []}
    with tempfile.TemporaryDirectory(prefix="push-client-floor-") as tmp:
        (Path(tmp) / "bare_app.py").write_text(BARE_APP)
        port = free_port()
        command = [sys.executable, "-m", "uvicorn", "--app-dir", tmp, "bare_app:app"]
        command += ["--port", str(port), "--log-level", "warning", "--no-access-log"]
        server = subprocess.Popen([*command, "--loop", "uvloop", "--http", "httptools"])
        try:
            wait_http(f"http://127.0.0.1:{port}/", server)
            for _ in range(args.repeat):
                for client in found:
                    found[client].append(
                        uvloop.run(_measure(client, port, args.requests, args.in_flight))
                    )
        finally:
            server.terminate()
            server.wait(10)
    print(f"\nclient CPU per request (µs), {args.in_flight} in flight, runs alternating\n")
    print("| client | runs | median |")
    print("| --- | --- | --: |")
    for client, runs in found.items():
        shown = ", ".join(f"{run:.0f}" for run in runs)
        print(f"| {client} | {shown} | {sorted(runs)[len(runs) // 2]:.0f} |")


if __name__ == "__main__":
    main()
