"""After its Redis is killed and started again, a gateway that says it is ready answers no 5xx.

A real gateway process on a real ``redis-server`` (AOF on), traffic through several pooled
connections before the kill (enqueues and reads from many clients at once), ``kill -9`` of
Redis and a start on the same port. Every connection the gateway pooled before the kill is
dead: redis-py 8 did not check them when lending them (its maintenance notifications, on by
default with RESP3, skip the check), so for seconds after ``/readyz`` was 200 again each first
use of one answered 503, and the same failure hit the clock sync and the completion notices.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections import Counter
from pathlib import Path

import httpx
import pytest

from gateway.redis_server import ManagedRedis
from tests.support import free_port

from .conftest import ADMIN, Cluster
from .test_e2e import until

pytestmark = pytest.mark.e2e

HEADERS = {"authorization": f"Bearer {ADMIN}"}
CONCURRENCY = 16


async def traffic(gateway: str, count: int) -> Counter[int]:
    """``count`` enqueues and as many reads of the task enqueued, ``CONCURRENCY`` at a time: the
    status codes answered."""
    limits = httpx.Limits(max_connections=CONCURRENCY)
    statuses: Counter[int] = Counter()
    gate = asyncio.Semaphore(CONCURRENCY)
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


async def test_no_5xx_once_ready_after_redis_is_killed_and_started_again(tmp_path: Path) -> None:
    redis = ManagedRedis(tmp_path / "redis", port=free_port(), appendonly=True)
    redis.start()
    cluster = Cluster(redis.url, tmp_path)
    log = tmp_path / "gateway.log"
    try:
        gateway = cluster.gateway(log=log)
        with cluster.api() as api:
            assert api.put("/v1/queues/q", json={}).status_code == 201
        # Many round trips at once: the gateway's pool holds many connections.
        assert set(await traffic(gateway, 200)) == {200, 201}

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
        statuses = await traffic(gateway, 200)
        assert statuses == {201: 200, 200: 200}, statuses
        after = log.read_text()[logged:]
        assert "Connection closed by server" not in after, after
    finally:
        cluster.stop()
        redis.stop()
