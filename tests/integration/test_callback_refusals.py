"""Every callback refused for every wrong queue, task or lease: a documented 4xx with a
problem+json body, and nothing stored changed.

A real gateway (in process) pushes to a real worker over loopback that accepts (202) every push,
so the tasks below hold real leases; each callback is then sent with one thing wrong.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from ulid import ULID

from gateway.settings import ApiKey, Settings
from sdk.wire import HEADER_LEASE, PushBody
from tests.support import gateway_client, serve, until

ADMIN = "admin-key-0123456789"

# Each callback with a valid body: (route, body). A retryable error reads the task before the
# script runs; a final one goes straight to the finish script.
KINDS: dict[str, tuple[str, dict[str, Any] | None]] = {
    "heartbeat": ("heartbeat", {"progress": 0.5}),
    "checkpoint": ("checkpoint", {"state": {"step": 2}}),
    "logs": ("logs", {"lines": [{"message": "hello"}]}),
    "result": ("result", {"result": {"ok": True}}),
    "retryable error": ("error", {"error": "boom", "retryable": True}),
    "final error": ("error", {"error": "boom", "retryable": False}),
    "release": ("release", None),
}


@dataclass
class Accepting:
    """A worker that accepts every push (202) and keeps each task's lease token."""

    leases: dict[str, str] = field(default_factory=dict)

    async def handle(self, request: Request) -> Response:
        push = PushBody.model_validate_json(await request.body())
        self.leases[push.id] = request.headers[HEADER_LEASE]
        return Response(status_code=202)


@dataclass
class Rig:
    api: httpx.AsyncClient
    redis: Redis
    worker: Accepting

    async def running(self, queue: str) -> tuple[str, str]:
        """Enqueue a task in ``queue`` and wait for its push: its id and lease token."""
        r = await self.api.post(f"/v1/queues/{queue}/tasks", json={"name": "job"})
        assert r.status_code == 201, r.text
        task_id = str(r.json()["id"])
        await until(lambda: self.worker.leases.get(task_id), what=f"push of {task_id}")
        return task_id, self.worker.leases[task_id]

    async def keyspace(self) -> dict[str, bytes | None]:
        """Every key with its serialized value: equal snapshots mean nothing was stored."""
        keys = sorted([k async for k in self.redis.scan_iter()])
        return {k: await self.redis.dump(k) for k in keys}


@pytest.fixture
async def rig(redis_url: str) -> AsyncIterator[Rig]:
    worker = Accepting()
    app = Starlette(routes=[Route("/", worker.handle, methods=["POST"])])
    settings = Settings(
        redis_url=redis_url,
        api_keys=[ApiKey(key=ADMIN, scopes=["admin"])],
        allow_private_endpoints=True,
    )
    async with (
        serve(app) as worker_url,
        gateway_client(settings, ADMIN) as api,
        Redis.from_url(redis_url) as redis,
    ):
        for queue in ("q", "other", "doomed"):
            policy = {"lease_timeout": 3600, "max_run_time": 7200}
            (await api.put(f"/v1/queues/{queue}", json=policy)).raise_for_status()
            r = await api.post(f"/v1/queues/{queue}/endpoints", json={"url": worker_url + "/"})
            assert r.status_code == 201, r.text
        yield Rig(api, redis, worker)


CASES = [
    "unknown queue",
    "deleted queue",
    "task in another queue",
    "unknown task",
    "stale token",
    "no token",
    "empty token",
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("kind", list(KINDS))
async def test_a_wrong_callback_gets_a_4xx_problem_and_changes_nothing(
    rig: Rig, kind: str, case: str
) -> None:
    task_id, lease = await rig.running("q")
    queue, headers = "q", {HEADER_LEASE: lease}
    expected = 404
    if case == "unknown queue":
        queue = "nope"
    elif case == "deleted queue":
        task_id, lease = await rig.running("doomed")
        headers = {HEADER_LEASE: lease}
        r = await rig.api.delete("/v1/queues/doomed", params={"force": "true"})
        assert r.status_code == 204, r.text
        queue = "doomed"
    elif case == "task in another queue":
        queue = "other"
    elif case == "unknown task":
        task_id = str(ULID())
    elif case == "stale token":
        headers, expected = {HEADER_LEASE: "not-the-lease"}, 409
    elif case == "no token":
        headers, expected = {}, 401
    elif case == "empty token":
        headers, expected = {HEADER_LEASE: ""}, 401
    before = await rig.keyspace()
    route, body = KINDS[kind]
    r = await rig.api.post(
        f"/v1/callbacks/{queue}/{task_id}/{route}",
        json=body,
        headers={"authorization": "", **headers},
    )
    assert r.status_code == expected, r.text
    assert r.headers["content-type"] == "application/problem+json"
    problem = r.json()
    assert problem["status"] == expected
    assert problem["title"]
    assert problem["detail"]
    assert await rig.keyspace() == before
