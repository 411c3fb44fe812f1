"""The async clients' aiohttp session over real loopback sockets: what it sends, and network
failures raised as httpx's exceptions (as they were when httpx sent)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from sdk import AsyncClient
from sdk.sessions import AioSession
from tests.support import bind, serve

TASK = {
    "id": "01J00000000000000000000001",
    "queue": "q",
    "name": "n",
    "payload": None,
    "state": "queued",
    "max_attempts": 5,
    "created_at": "2030-01-01T00:00:00Z",
    "run_at": "2030-01-01T00:00:00Z",
}


async def _echo(request: Request) -> JSONResponse:
    seen = {
        "path": request.scope["raw_path"].decode(),
        "query": request.url.query,
        "authorization": request.headers.get("authorization"),
        "body": (await request.body()).decode(),
    }
    request.app.state.seen.append(seen)
    return JSONResponse(TASK)


@pytest.fixture
async def echo() -> AsyncIterator[tuple[str, list[dict[str, str]]]]:
    app = Starlette(routes=[Route("/{rest:path}", _echo, methods=["GET", "POST"])])
    app.state.seen = []
    async with serve(app) as url:
        yield url, app.state.seen


async def test_async_client_sends_paths_queries_and_key_over_aiohttp(
    echo: tuple[str, list[dict[str, str]]],
) -> None:
    url, seen = echo
    async with AsyncClient(url + "/prefix/", "key-1") as client:
        assert isinstance(client._http, AioSession)
        await client.get_task("a/b c", wait=1.5)
        await client.enqueue("q", "n", {"x": 1})
    assert seen[0]["path"] == "/prefix/v1/tasks/a%2Fb%20c"
    assert seen[0]["query"] == "wait=1.5"
    assert seen[0]["authorization"] == "Bearer key-1"
    assert seen[1]["path"] == "/prefix/v1/queues/q/tasks"
    assert '"payload":{"x":1}' in seen[1]["body"]


async def test_a_refused_connection_is_httpx_connect_error() -> None:
    sock = bind()
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    async with AsyncClient(f"http://127.0.0.1:{port}", "key") as client:
        with pytest.raises(httpx.ConnectError):
            await client.list_queues()


async def test_a_silent_server_is_httpx_read_timeout() -> None:
    accepted: list[socket.socket] = []
    listener = bind()
    listener.listen()
    listener.setblocking(False)

    async def accept() -> None:
        conn, _ = await asyncio.get_running_loop().sock_accept(listener)
        accepted.append(conn)  # read nothing, answer nothing

    acceptor = asyncio.create_task(accept())
    port = listener.getsockname()[1]
    try:
        async with AsyncClient(f"http://127.0.0.1:{port}", "key", timeout=0.2) as client:
            with pytest.raises(httpx.ReadTimeout):
                await client.list_queues()
    finally:
        acceptor.cancel()
        for conn in accepted:
            conn.close()
        listener.close()
