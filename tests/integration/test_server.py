"""The gateway's servers: uvicorn on plain TCP by default, Hypercorn when chosen (or with TLS),
started on sockets bound beforehand, stopped by an event, and failing with a reason."""

from __future__ import annotations

import asyncio
import socket

import httpx
import pytest

from gateway.serving.server import Listening, ServerError, serve_async
from gateway.settings import Settings
from tests.support import free_port

SERVERS = ["uvicorn", "hypercorn"]


def settings_for(redis_url: str, server: str, port: int = 0) -> Settings:
    return Settings(redis_url=redis_url, host="127.0.0.1", port=port, server=server)  # type: ignore[arg-type]


@pytest.mark.parametrize("server", SERVERS)
async def test_serves_until_told_to_stop_then_closes_its_port(redis_url: str, server: str) -> None:
    stop = asyncio.Event()
    ready: asyncio.Future[Listening] = asyncio.get_running_loop().create_future()
    serving = asyncio.create_task(
        serve_async(settings_for(redis_url, server), stop, on_ready=ready.set_result)
    )
    listening = await asyncio.wait_for(ready, 30)
    async with httpx.AsyncClient(base_url=listening.url) as http:
        answer = await http.get("/healthz")
        assert answer.status_code == 200
        assert answer.http_version == "HTTP/1.1"
    assert listening.quic_port is None
    stop.set()
    await asyncio.wait_for(serving, 30)
    port = int(listening.url.rsplit(":", 1)[1])
    with (
        pytest.raises(ConnectionRefusedError),
        socket.create_connection(("127.0.0.1", port), timeout=5),
    ):
        pass


@pytest.mark.parametrize("server", SERVERS)
async def test_a_gateway_without_redis_does_not_start_and_says_why(server: str) -> None:
    nothing_there = f"redis://127.0.0.1:{free_port()}/0"
    with pytest.raises(ServerError) as raised:
        await asyncio.wait_for(serve_async(settings_for(nothing_there, server)), 60)
    message = str(raised.value)
    assert message.startswith("the gateway could not start: ")
    assert "ConnectionError" in message or "connect" in message.lower()


async def test_a_port_in_use_fails_at_once(redis_url: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ServerError, match=r"cannot listen on 127\.0\.0\.1:"):
            await serve_async(settings_for(redis_url, "uvicorn", port))
