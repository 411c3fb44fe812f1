"""The SDK's HTTP client candidates: CPU per request of the calling process, one request at a
time (a producer's single enqueue, a worker's heartbeat), against a trivial loopback server.

The server is a bare asyncio protocol in a child process that answers every request with a
small JSON body over keep-alive, so the figures are the client's own cost. The candidates run
in alternating rounds in one sitting (asyncio's default loop, as a producer has it):

- ``httpx-aiohttp``: ``httpx.AsyncClient`` over ``httpx_aiohttp.AiohttpTransport`` (the
  AsyncClient before issue 19);
- ``httpx``: ``httpx.AsyncClient`` on its own pool, httpcore (the worker's callbacks before);
- ``aiohttp``: :class:`sdk.sessions.AioSession` (both now);
- ``httpx sync``: ``httpx.Client`` (the blocking :class:`sdk.Client`), no event loop.

Prints µs of CPU per request (median of the rounds) and the ratio to ``aiohttp``.
Run: ``.venv/bin/python -m bench.sdk_client_cost`` (``--requests``, ``--rounds``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator

import httpx

from sdk.sessions import AioSession

BODY = b'{"progress":0.5}'
ANSWER = b'{"cancel_requested":false,"lease_expires_at":"2030-01-01T00:00:00Z"}'
RESPONSE = (
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
    + str(len(ANSWER)).encode()
    + b"\r\n\r\n"
    + ANSWER
)


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
            self.transport.write(RESPONSE)  # type: ignore[attr-defined]


async def _serve() -> None:
    server = await asyncio.get_running_loop().create_server(_Answering, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()


@contextlib.contextmanager
def server() -> Iterator[str]:
    child = subprocess.Popen(
        [sys.executable, "-m", "bench.sdk_client_cost", "--serve"], stdout=subprocess.PIPE
    )
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


def _httpx_sync(url: str, requests: int) -> float:
    with httpx.Client() as http:
        for _ in range(100):
            http.post(url, content=BODY, headers=HEADERS)
        start = time.process_time()
        for _ in range(requests):
            http.post(url, content=BODY, headers=HEADERS)
        return (time.process_time() - start) / requests * 1e6


Measure = Callable[[str, int], float]


def _on_loop(measure: Callable[[str, int], Awaitable[float]]) -> Measure:
    return lambda url, requests: asyncio.run(measure(url, requests))


CANDIDATES: dict[str, Measure] = {
    "httpx-aiohttp": _on_loop(_httpx_aiohttp),
    "httpx": _on_loop(_httpx),
    "aiohttp": _on_loop(_aiohttp),
    "httpx sync": _httpx_sync,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve())
        return
    found: dict[str, list[float]] = {name: [] for name in CANDIDATES}
    with server() as url:
        for _ in range(args.rounds):
            for name, measure in CANDIDATES.items():
                found[name].append(measure(url, args.requests))
    base = statistics.median(found["aiohttp"])
    print("| client | CPU µs per request (median) | rounds | over aiohttp |")
    print("| --- | --- | --- | --- |")
    for name, values in found.items():
        median = statistics.median(values)
        rounds = ", ".join(f"{v:.0f}" for v in values)
        print(f"| {name} | {median:.0f} | {rounds} | {median / base:.2f}x |")


if __name__ == "__main__":
    main()
