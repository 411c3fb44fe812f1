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
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.serving.redis_server import ManagedRedis
from tests.support import free_port

from .conftest import ADMIN, Cluster
from .test_e2e import until

pytestmark = pytest.mark.e2e

HEADERS = {"authorization": f"Bearer {ADMIN}"}
CONCURRENCY = 16


@dataclass
class Receiver:
    """A completion callback URL and the ids of the tasks whose notices it accepted; it answers
    500 while ``refusing`` is set."""

    url: str = ""
    got: list[str] = field(default_factory=list)
    refusing: threading.Event = field(default_factory=threading.Event)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            task_id = json.loads(self.rfile.read(int(self.headers["content-length"])))["id"]
            if found.refusing.is_set():
                self.send_response(500)
            else:
                found.got.append(task_id)
                self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    found.url = f"http://127.0.0.1:{server.server_address[1]}/done"
    try:
        yield found
    finally:
        server.shutdown()
        server.server_close()


def cancelled_with_notice(api: httpx.Client, receiver: Receiver) -> str:
    """The id of a task with a completion callback, cancelled: its notice is recorded."""
    created = api.post("/v1/queues/q/tasks", json={"name": "t", "notify": receiver.url})
    assert created.status_code == 201, created.text
    task_id: str = created.json()["id"]
    cancelled = api.post(f"/v1/tasks/{task_id}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    return task_id


def delivered(api: httpx.Client, task_id: str, timeout: float = 20) -> dict[str, Any]:
    """The task once its notice is recorded as delivered."""

    def read() -> dict[str, Any] | None:
        task: dict[str, Any] = api.get(f"/v1/tasks/{task_id}").json()
        return task if task["notice"]["state"] == "delivered" else None

    found: dict[str, Any] = until(read, timeout=timeout, what="the notice delivered")
    return found


def notice(api: httpx.Client, receiver: Receiver) -> dict[str, Any]:
    """A task with a completion callback, cancelled: its notice delivered, the task as read."""
    task_id = cancelled_with_notice(api, receiver)
    task = delivered(api, task_id)
    assert task_id in receiver.got
    return task


def restart(redis: ManagedRedis, gateway: str) -> None:
    """``kill -9`` Redis, start it again on its port, and wait for the gateway's readiness."""
    process = redis.process
    assert process is not None
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    redis.start()  # same port, same AOF
    ready_again(gateway)


def ready_again(gateway: str) -> None:
    def ready() -> bool:
        try:
            return httpx.get(f"{gateway}/readyz", timeout=5).status_code == 200
        except httpx.TransportError:
            return False

    until(ready, timeout=30, what="ready once Redis is back")


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
    tmp_path: Path, receiver: Receiver
) -> None:
    redis = ManagedRedis(tmp_path / "redis", port=free_port(), appendonly=True)
    redis.start()
    cluster = Cluster(redis.url, tmp_path)
    log = tmp_path / "gateway.log"
    try:
        gateway = cluster.gateway(log=log, JOBGATE_CLOCK_SYNC_INTERVAL="0.2")
        api = cluster.api()
        assert api.put("/v1/queues/q", json={}).status_code == 201
        notice(api, receiver)
        # Many round trips at once: the gateway's pool holds many connections.
        assert set(await traffic(gateway, 256, concurrency=64)) == {200, 201}

        restart(redis, gateway)
        logged = log.stat().st_size
        assert notice(api, receiver)["notice"]["tries"] == 1
        statuses = await traffic(gateway, 200)
        assert statuses == {201: 200, 200: 200}, statuses
        assert notice(api, receiver)["notice"]["tries"] == 1
        after = log.read_text()[logged:]  # the clock sync and the notices' loop included
        assert "Traceback" not in after, after
        assert "Connection closed by server" not in after, after
        api.close()
    finally:
        cluster.stop()
        redis.stop()


def test_a_notice_due_while_redis_was_down_goes_out_once_it_is_back(
    tmp_path: Path, receiver: Receiver
) -> None:
    """The notices' loop, whose step failed while Redis was down, slept the longest it may
    (``rescan_interval``, 60 s): what woke it was a pub/sub message, and those published before
    its connection subscribed again are lost. The gateway now wakes it, and the job firing
    loop, when that connection is back."""
    redis = ManagedRedis(tmp_path / "redis", port=free_port(), appendonly=True)
    redis.start()
    cluster = Cluster(redis.url, tmp_path)
    log = tmp_path / "gateway.log"
    receiver.refusing.set()
    try:
        # A try cut off by the kill leaves its notice leased for the timeout and 5 s more.
        gateway = cluster.gateway(
            log=log, JOBGATE_NOTIFY_RETRY_DELAY="0.2", JOBGATE_NOTIFY_TIMEOUT="1"
        )
        api = cluster.api()
        assert api.put("/v1/queues/q", json={}).status_code == 201
        task_id = cancelled_with_notice(api, receiver)
        until(
            lambda: api.get(f"/v1/tasks/{task_id}").json()["notice"]["tries"] >= 1,
            what="a first try, refused",
        )
        process = redis.process
        assert process is not None
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        # The loop looked for the next notice while Redis was down: it sleeps its longest.
        until(
            lambda: "reading when the next completion callback is due failed" in log.read_text(),
            what="the notices' loop failing",
        )
        receiver.refusing.clear()
        redis.start()
        ready_again(gateway)
        # Once ready: the pub/sub connection subscribes again within a second or two, and a
        # notice leased when Redis died is free again 6 s after its try began.
        assert delivered(api, task_id, timeout=20)["notice"]["state"] == "delivered"
        api.close()
    finally:
        cluster.stop()
        redis.stop()
