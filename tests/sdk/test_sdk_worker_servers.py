"""The worker under real ASGI servers (uvicorn, hypercorn) over loopback, with real callbacks."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from hypercorn.asyncio import serve as hypercorn_serve
from hypercorn.config import Config

from sdk import Worker, task
from tests.sdk.fakes import SECRET, FakeGateway, Pusher
from tests.support import free_port, until
from tests.support import serve as uvicorn_serve


def _accepts(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@asynccontextmanager
async def hypercorn(app: Any) -> AsyncIterator[str]:
    port = free_port()
    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.accesslog = None
    stop = asyncio.Event()
    server = asyncio.create_task(hypercorn_serve(app, config, shutdown_trigger=stop.wait))
    try:
        await until(lambda: _accepts(port) or server.done(), what="hypercorn start")
        yield f"http://127.0.0.1:{port}"
    finally:
        stop.set()
        await asyncio.wait_for(server, 15)


SERVERS = {"uvicorn": uvicorn_serve, "hypercorn": hypercorn}


@pytest.mark.parametrize("server", sorted(SERVERS))
async def test_worker_serves_pushes_and_calls_back_over_http(server: str) -> None:
    release = asyncio.Event()

    @task("default", name="add")
    def add(x: int, y: int) -> int:
        return x + y

    @task("default", name="slow")
    async def slow() -> str:
        await release.wait()
        return "done"

    gateway = FakeGateway()
    worker = Worker(tasks=[add, slow], secret=SECRET, inline_window=0.05, heartbeat_interval=0.05)
    async with (
        uvicorn_serve(gateway.app()) as gateway_url,
        SERVERS[server](worker) as worker_url,
        httpx.AsyncClient(base_url=worker_url) as http,
    ):
        push = Pusher(http, gateway=gateway_url, path="/jobs")
        inline = await push("add", {"args": [2, 3]})
        background = await push("slow")
        await gateway.wait_for("heartbeat")
        release.set()
        [result] = await gateway.wait_for("result")
    assert (inline.status_code, inline.json()) == (200, 5)
    assert background.status_code == 202
    assert result.body == {"result": "done"}
