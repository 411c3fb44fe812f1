"""A request target with a fragment ('#') is refused with 400, under both servers: a client
never sends one (RFC 9112, section 3.2), and a server that drops it would act on another
resource (``PUT /v1/queues/a#b`` used to create queue ``a``). Sent over a raw socket: HTTP
clients strip the fragment themselves, and what reaches the app is the server's parser's
decision."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx
import pytest

from gateway.serving.server import Listening, serve_async
from gateway.settings import ApiKey, Settings
from sdk.wire import PROBLEM_CONTENT_TYPE

SERVERS = ["uvicorn", "hypercorn"]
KEY = "target-admin-key-0123456789"


@pytest.fixture(params=SERVERS)
async def gateway(redis_url: str, request: pytest.FixtureRequest) -> AsyncIterator[str]:
    settings = Settings(
        redis_url=redis_url,
        host="127.0.0.1",
        port=0,
        server=request.param,
        api_keys=[ApiKey(key=KEY, scopes=["admin"])],
    )
    stop = asyncio.Event()
    ready: asyncio.Future[Listening] = asyncio.get_running_loop().create_future()
    serving = asyncio.create_task(serve_async(settings, stop, on_ready=ready.set_result))
    try:
        yield (await asyncio.wait_for(ready, 30)).url
    finally:
        stop.set()
        await asyncio.wait_for(serving, 30)


async def raw_request(url: str, method: str, target: str, body: bytes = b"") -> tuple[int, bytes]:
    """Send one HTTP/1.1 request with ``target`` exactly as given; its status and body."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    head = (
        f"{method} {target} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {KEY}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    writer.write(head.encode() + body)
    answer = await asyncio.wait_for(reader.read(), 30)  # to the end: the server closes
    writer.close()
    status_line, _, rest = answer.partition(b"\r\n")
    headers, _, content = rest.partition(b"\r\n\r\n")
    assert f"content-type: {PROBLEM_CONTENT_TYPE}".encode() in headers.lower()
    return int(status_line.split()[1]), content


@pytest.mark.parametrize(
    ("method", "target"),
    [
        ("PUT", "/v1/queues/a#b"),
        ("PUT", "/v1/queues/a?x=1#b"),
        ("GET", "/healthz#x"),
        ("GET", "/nowhere#x"),
    ],
)
async def test_a_target_with_a_fragment_is_refused(gateway: str, method: str, target: str) -> None:
    status, content = await raw_request(gateway, method, target, b"{}" if method == "PUT" else b"")
    assert status == 400, content
    problem = json.loads(content)
    assert problem["status"] == 400
    assert "#" in problem["detail"]
    admin = {"authorization": f"Bearer {KEY}"}
    async with httpx.AsyncClient(base_url=gateway, headers=admin) as api:
        assert (await api.get("/v1/queues/a")).status_code == 404  # nothing was created


async def test_a_percent_encoded_hash_is_a_character_of_the_path(gateway: str) -> None:
    """'%23' is how a '#' travels in a path: a queue name cannot hold it (422), not a 400."""
    status, content = await raw_request(gateway, "PUT", "/v1/queues/a%23b", b"{}")
    assert status == 422, content
