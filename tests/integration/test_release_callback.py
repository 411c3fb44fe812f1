"""The ``release`` callback against a real gateway and Redis: a worker shutting down gives a task
back; it is queued again at once, without spending an attempt, and the lease is fenced as for
every callback."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from standardwebhooks import Webhook
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from sdk.wire import PushBody
from tests.support import live_gateway, serve, until

ADMIN = "admin-key-0123456789"


@dataclass
class Worker:
    """Accepts (202) a task's first push, answers the next ones 200; records each push."""

    secret: str = ""
    pushes: list[tuple[dict[str, str], PushBody]] = field(default_factory=list)

    async def handle(self, request: Request) -> Response:
        body = await request.body()
        headers = dict(request.headers)
        Webhook(self.secret).verify(body, headers)
        push = PushBody.model_validate_json(body)
        self.pushes.append((headers, push))
        if len(self.of(push.id)) == 1:
            return Response(status_code=202)
        return JSONResponse({"attempt": push.attempt})

    def of(self, task_id: str) -> list[tuple[dict[str, str], PushBody]]:
        return [(h, p) for h, p in self.pushes if p.id == task_id]


@dataclass
class Rig:
    api: httpx.AsyncClient
    worker: Worker
    url: str = ""  # the gateway's

    async def running(self, **task: Any) -> tuple[str, str, str]:
        """Enqueue a task and wait for its first push: its id, callback base and lease."""
        r = await self.api.post("/v1/queues/q/tasks", json={"name": "job", **task})
        assert r.status_code == 201, r.text
        task_id = str(r.json()["id"])
        await until(lambda: self.worker.of(task_id), what="first push")
        ((headers, _),) = self.worker.of(task_id)
        return task_id, headers["jobgate-callback"], headers["jobgate-lease"]

    async def task(self, task_id: str, wait: float | None = None) -> dict[str, Any]:
        params = {"wait": wait} if wait else None
        r = await self.api.get(f"/v1/tasks/{task_id}", params=params, timeout=30)
        assert r.status_code == 200, r.text
        return dict(r.json())


@pytest.fixture
async def rig(redis_url: str) -> AsyncIterator[Rig]:
    worker = Worker()
    app = Starlette(routes=[Route("/", worker.handle, methods=["POST"])])
    async with serve(app) as worker_url, live_gateway(redis_url, ADMIN) as (gateway_url, api):
        (await api.put("/v1/queues/q", json={"max_attempts": 1})).raise_for_status()
        r = await api.post("/v1/queues/q/endpoints", json={"url": worker_url + "/"})
        assert r.status_code == 201, r.text
        worker.secret = r.json()["secret"]
        yield Rig(api, worker, gateway_url)


async def test_release_requeues_at_once_without_spending_an_attempt(rig: Rig) -> None:
    task_id, base, lease = await rig.running()
    async with httpx.AsyncClient() as cb:
        released = await cb.post(f"{base}/release", headers={"jobgate-lease": lease})
    assert released.status_code == 200, released.text
    assert released.json()["state"] in ("queued", "running")  # the dispatcher may be quick
    task = await rig.task(task_id, wait=10)
    # max_attempts is 1: had the release spent it, the task could not have run again
    assert (task["state"], task["result"]) == ("succeeded", {"attempt": 1})
    assert [a["outcome"] for a in task["attempts"]] == ["released", "succeeded"]
    assert [a["number"] for a in task["attempts"]] == [1, 1]
    assert task["attempt"] == 1
    [(_, second)] = rig.worker.of(task_id)[1:]
    assert second.attempt == 1


async def test_release_is_fenced_by_the_lease(rig: Rig) -> None:
    task_id, base, lease = await rig.running()
    async with httpx.AsyncClient() as cb:
        missing = await cb.post(f"{base}/release")
        stale = await cb.post(f"{base}/release", headers={"jobgate-lease": "not-the-lease"})
        assert (missing.status_code, stale.status_code) == (401, 409)
        assert stale.headers["content-type"] == "application/problem+json"
        assert (await rig.task(task_id))["state"] == "running"
        ok = await cb.post(f"{base}/release", json={}, headers={"jobgate-lease": lease})
        assert ok.status_code == 200, ok.text
        again = await cb.post(f"{base}/release", headers={"jobgate-lease": lease})
        assert again.status_code == 409  # the lease ended with the release
    task = await rig.task(task_id, wait=10)
    assert task["state"] == "succeeded"


async def test_a_cancel_requested_before_the_release_wins(rig: Rig) -> None:
    task_id, base, lease = await rig.running()
    cancel = await rig.api.post(f"/v1/tasks/{task_id}/cancel")
    assert cancel.status_code == 200, cancel.text
    async with httpx.AsyncClient() as cb:
        released = await cb.post(f"{base}/release", headers={"jobgate-lease": lease})
    assert released.status_code == 200, released.text
    assert released.json()["state"] == "cancelled"
    task = await rig.task(task_id)
    # The attempt ended the task, cancelled: it reads so, and it counts (docs/durable.md).
    assert [a["outcome"] for a in task["attempts"]] == ["cancelled"]
    assert task["attempt"] == 1
    assert len(rig.worker.of(task_id)) == 1
