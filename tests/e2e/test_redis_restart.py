"""After its Redis is killed and started again, a gateway that says it is ready answers no 5xx.

A real gateway process on a real ``redis-server`` (AOF on), traffic through several pooled
connections before the kill (enqueues and reads from many clients at once, a completion notice,
the clock sync every 0.2 s), ``kill -9`` of Redis and a start on the same port. Every connection
the gateway pooled before the kill is dead: redis-py 8 did not check them when lending them
(its maintenance notifications, on by default with RESP3, skip the check), so for seconds after
``/readyz`` was 200 again each first use of one answered 503, and the same failure hit the
clock sync and the completion notices (gateway/store/stale.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.redis_server import ManagedRedis
from tests.support import free_port

from .conftest import ADMIN, Cluster
from .test_e2e import until

pytestmark = pytest.mark.e2e

HEADERS = {"authorization": f"Bearer {ADMIN}"}
CONCURRENCY = 16


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[str]]]:
    """A completion callback URL, and the ids of the tasks whose notices reached it."""
    got: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            got.append(json.loads(self.rfile.read(int(self.headers["content-length"])))["id"])
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/done", got
    finally:
        server.shutdown()
        server.server_close()


def notice(api: httpx.Client, url: str, got: list[str]) -> dict[str, Any]:
    """A task with a completion callback, cancelled: its notice delivered, the task as read."""
    created = api.post("/v1/queues/q/tasks", json={"name": "t", "notify": url})
    assert created.status_code == 201, created.text
    task_id = created.json()["id"]
    cancelled = api.post(f"/v1/tasks/{task_id}/cancel")
    assert cancelled.status_code == 200, cancelled.text

    def delivered() -> dict[str, Any] | None:
        task: dict[str, Any] = api.get(f"/v1/tasks/{task_id}").json()
        return task if task["notice"]["state"] == "delivered" else None

    task = until(delivered, what="the notice delivered")
    assert task_id in got
    return task


async def traffic(gateway: str, count: int, concurrency: int = CONCURRENCY) -> Counter[int]:
    """``count`` enqueues and as many reads of the task enqueued, ``concurrency`` at a time: the
    status codes answered."""
    limits = httpx.Limits(max_connections=concurrency)
    statuses: Counter[int] = Counter()
    gate = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(base_url=gateway, headers=HEADERS, limits=limits) as http:

        async def one(i: int) -> None:
            async with gate:
                r = await http.post("/v1/queues/q/tasks", json={"name": "t", "payload": {"i": i}})
                statuses[r.status_code] += 1
                if r.status_code == 201:
                    read = await http.get(f"/v1/tasks/{r.json()['id']}")
                    statuses[read.status_code] += 1

        await asyncio.gather(*(one(i) for i in range(count)))
    return statuses


async def test_no_5xx_once_ready_after_redis_is_killed_and_started_again(
    tmp_path: Path, receiver: tuple[str, list[str]]
) -> None:
    redis = ManagedRedis(tmp_path / "redis", port=free_port(), appendonly=True)
    redis.start()
    cluster = Cluster(redis.url, tmp_path)
    log = tmp_path / "gateway.log"
    try:
        gateway = cluster.gateway(log=log, JOBGATE_CLOCK_SYNC_INTERVAL="0.2")
        api = cluster.api()
        assert api.put("/v1/queues/q", json={}).status_code == 201
        notice(api, *receiver)
        # Many round trips at once: the gateway's pool holds many connections.
        assert set(await traffic(gateway, 256, concurrency=64)) == {200, 201}

        process = redis.process
        assert process is not None
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        redis.start()  # same port, same AOF

        def ready() -> bool:
            try:
                return httpx.get(f"{gateway}/readyz", timeout=5).status_code == 200
            except httpx.TransportError:
                return False

        until(ready, timeout=30, what="ready once Redis is back")
        logged = log.stat().st_size
        assert notice(api, *receiver)["notice"]["tries"] == 1
        statuses = await traffic(gateway, 200)
        assert statuses == {201: 200, 200: 200}, statuses
        assert notice(api, *receiver)["notice"]["tries"] == 1
        after = log.read_text()[logged:]  # the clock sync and the notices' loop included
        assert "Traceback" not in after, after
        assert "Connection closed by server" not in after, after
        api.close()
    finally:
        cluster.stop()
        redis.stop()
