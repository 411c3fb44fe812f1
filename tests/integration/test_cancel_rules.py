"""Cancelling a running task, against a real gateway served over loopback, a real Redis and a
worker that answers as each test asks (docs/operator-guide.md, "Cancelling"): the cancel is a
request, and the end of the attempt decides. A success (a 2xx answer to the push, a result
callback) ends the task ``succeeded``: the work was done. Any other end (an error, a refused or
failed push, a release, a sleep, a lease that ran out) ends it ``cancelled``, not retried, and
its attempt reads ``cancelled`` too. Callbacks that keep the attempt going (heartbeat,
checkpoint, step, logs) are recorded and say that a cancel was requested."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from sdk.wire import PushBody
from tests.support import live_gateway, serve, until

ADMIN = "cancel-rules-admin-key-0"
LEASE = 30.0  # seconds: queue q's lease_timeout, longer than any test's wait
SHORT_LEASE = 1.0  # seconds: queue 'short''s, for a lease that runs out
RECOVER = 0.05  # seconds: the gateway's recover_interval (live_gateway's)


@dataclass
class Worker:
    """Answers a push by its task's name: ``hold-200`` / ``hold-500`` keep the push open until
    the test lets it go (``let_go``), then answer 200 with a result or 500; ``accept`` answers
    202 (the test calls back, or never does)."""

    secrets: list[str] = field(default_factory=list)  # one per queue's endpoint
    pushes: dict[str, tuple[dict[str, str], PushBody]] = field(default_factory=dict)
    gates: dict[str, asyncio.Event] = field(default_factory=dict)

    async def handle(self, request: Request) -> Response:
        body = await request.body()
        headers = dict(request.headers)
        if not any(_verifies(secret, body, headers) for secret in self.secrets):
            return Response(status_code=401)
        push = PushBody.model_validate_json(body)
        gate = self.gates.setdefault(push.id, asyncio.Event())
        self.pushes[push.id] = (headers, push)
        if push.name == "accept":
            return Response(status_code=202)
        await gate.wait()
        if push.name == "hold-500":
            return Response("boom", status_code=500)
        return JSONResponse({"done": push.attempt})

    def let_go(self, task_id: str) -> None:
        self.gates[task_id].set()


def _verifies(secret: str, body: bytes, headers: dict[str, str]) -> bool:
    try:
        Webhook(secret).verify(body, headers)
    except WebhookVerificationError:
        return False
    return True


@dataclass
class Rig:
    api: httpx.AsyncClient
    worker: Worker

    async def running(self, name: str, queue: str = "q") -> tuple[str, str, str]:
        """Enqueue a task and wait for its push: its id, callback base and lease."""
        r = await self.api.post(f"/v1/queues/{queue}/tasks", json={"name": name})
        assert r.status_code == 201, r.text
        task_id = str(r.json()["id"])
        await until(lambda: task_id in self.worker.pushes, what="the push")
        headers, _ = self.worker.pushes[task_id]
        return task_id, headers["jobgate-callback"], headers["jobgate-lease"]

    async def cancel(self, task_id: str) -> None:
        r = await self.api.post(f"/v1/tasks/{task_id}/cancel")
        assert r.status_code == 200, r.text
        assert (r.json()["state"], r.json()["cancel_requested"]) == ("running", True)

    async def task(self, task_id: str) -> dict[str, Any]:
        r = await self.api.get(f"/v1/tasks/{task_id}")
        assert r.status_code == 200, r.text
        return dict(r.json())

    async def ended(self, task_id: str, timeout: float) -> dict[str, Any]:
        async def finished() -> dict[str, Any] | None:
            task = await self.task(task_id)
            return task if task["finished_at"] else None

        return await until(finished, timeout=timeout, what="the task's end")


@pytest.fixture
async def rig(redis_url: str) -> AsyncIterator[Rig]:
    worker = Worker()
    app = Starlette(routes=[Route("/", worker.handle, methods=["POST"])])
    async with serve(app) as worker_url, live_gateway(redis_url, ADMIN) as (_, api):
        for queue, lease in (("q", LEASE), ("short", SHORT_LEASE)):
            policy = {"max_attempts": 3, "lease_timeout": lease, "push_timeout": 60}
            (await api.put(f"/v1/queues/{queue}", json=policy)).raise_for_status()
            r = await api.post(f"/v1/queues/{queue}/endpoints", json={"url": worker_url + "/"})
            assert r.status_code == 201, r.text
            worker.secrets.append(r.json()["secret"])
        try:
            yield Rig(api, worker)
        finally:
            for gate in worker.gates.values():
                gate.set()  # no push left open for the server's shutdown


def outcomes(task: dict[str, Any]) -> list[str]:
    return [a["outcome"] for a in task["attempts"]]


async def test_a_push_answered_200_after_a_cancel_request_ends_succeeded(rig: Rig) -> None:
    task_id, _, _ = await rig.running("hold-200")
    await rig.cancel(task_id)
    rig.worker.let_go(task_id)
    task = await rig.ended(task_id, timeout=10)
    assert (task["state"], task["result"], outcomes(task)) == (
        "succeeded",
        {"done": 1},
        ["succeeded"],
    )
    assert task["cancel_requested"] is True  # asked, and the work was done all the same


async def test_a_result_callback_after_a_cancel_request_ends_succeeded(rig: Rig) -> None:
    task_id, base, lease = await rig.running("accept")
    await rig.cancel(task_id)
    async with httpx.AsyncClient() as cb:
        done = await cb.post(f"{base}/result", json={"result": 7}, headers={"jobgate-lease": lease})
    assert (done.status_code, done.json()) == (200, {"state": "succeeded"}), done.text
    task = await rig.task(task_id)
    assert (task["state"], task["result"], outcomes(task)) == ("succeeded", 7, ["succeeded"])


async def test_an_error_after_a_cancel_request_ends_cancelled_and_so_does_its_attempt(
    rig: Rig,
) -> None:
    """Retryable or not, an error ends a task asked to stop as cancelled (the SDK reports its
    stop as a non-retryable error 'cancelled'); the attempt keeps the error it ended with."""
    for retryable in (True, False):
        task_id, base, lease = await rig.running("accept")
        await rig.cancel(task_id)
        async with httpx.AsyncClient() as cb:
            body = {"error": "cancelled", "retryable": retryable}
            done = await cb.post(f"{base}/error", json=body, headers={"jobgate-lease": lease})
        assert (done.status_code, done.json()) == (200, {"state": "cancelled"}), done.text
        task = await rig.task(task_id)
        assert (task["state"], task["attempt"], outcomes(task)) == ("cancelled", 1, ["cancelled"])
        assert task["attempts"][0]["error"] == "cancelled"
        assert task["attempts"][0]["task_failure"] is True


async def test_a_failed_push_after_a_cancel_request_ends_cancelled_not_retried(
    rig: Rig,
) -> None:
    task_id, _, _ = await rig.running("hold-500")
    await rig.cancel(task_id)
    rig.worker.let_go(task_id)
    task = await rig.ended(task_id, timeout=10)
    assert (task["state"], task["attempt"], outcomes(task)) == ("cancelled", 1, ["cancelled"])
    assert (task["attempts"][0]["http_status"], task["attempts"][0]["failure"]) == (500, "5xx")


async def test_a_sleep_after_a_cancel_request_ends_cancelled_and_so_does_its_attempt(
    rig: Rig,
) -> None:
    task_id, base, lease = await rig.running("accept")
    await rig.cancel(task_id)
    until_at = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    async with httpx.AsyncClient() as cb:
        slept = await cb.post(
            f"{base}/sleep", json={"until": until_at}, headers={"jobgate-lease": lease}
        )
    assert (slept.status_code, slept.json()) == (200, {"state": "cancelled"}), slept.text
    task = await rig.task(task_id)
    # The attempt was made and ended the task: it reads cancelled, and it counts.
    assert (task["state"], task["attempt"], outcomes(task)) == ("cancelled", 1, ["cancelled"])


async def test_a_step_after_a_cancel_request_is_recorded_and_says_so(rig: Rig) -> None:
    task_id, base, lease = await rig.running("accept")
    headers = {"jobgate-lease": lease}
    async with httpx.AsyncClient() as cb:
        before = await cb.post(f"{base}/step", json={"name": "a", "result": 1}, headers=headers)
        assert before.json() == {"recorded": True, "attempt": 1, "cancel_requested": False}
        await rig.cancel(task_id)
        after = await cb.post(f"{base}/step", json={"name": "b", "result": 2}, headers=headers)
        assert (after.status_code, after.json()) == (
            200,
            {"recorded": True, "attempt": 1, "cancel_requested": True},
        ), after.text
        again = await cb.post(f"{base}/step", json={"name": "a", "result": 3}, headers=headers)
        assert again.json() == {"recorded": False, "attempt": 1, "cancel_requested": True}
        beat = await cb.post(f"{base}/heartbeat", json={}, headers=headers)
        assert beat.json()["cancel_requested"] is True
        kept = await cb.post(f"{base}/checkpoint", json={"state": {"n": 2}}, headers=headers)
        assert kept.status_code == 200, kept.text
        task = await rig.task(task_id)
        assert [s["name"] for s in task["steps"]] == ["a", "b"]
        assert task["checkpoint"] == {"n": 2}
        stopped = await cb.post(
            f"{base}/error", json={"error": "cancelled", "retryable": False}, headers=headers
        )
        assert stopped.json() == {"state": "cancelled"}
        # Once it ended, the attempt's lease is stale: 409, nothing recorded.
        late = await cb.post(f"{base}/step", json={"name": "c", "result": 4}, headers=headers)
        assert late.status_code == 409, late.text
    assert [s["name"] for s in (await rig.task(task_id))["steps"]] == ["a", "b"]


async def test_a_lease_that_runs_out_after_a_cancel_request_ends_cancelled(rig: Rig) -> None:
    task_id, _, _ = await rig.running("accept", queue="short")
    await rig.cancel(task_id)
    # The worker never calls back: the lease (SHORT_LEASE) runs out and the recoverer (every
    # RECOVER) ends the task; the deadline leaves room for a loaded machine.
    task = await rig.ended(task_id, timeout=SHORT_LEASE + RECOVER + 15)
    assert (task["state"], task["attempt"], outcomes(task)) == ("cancelled", 1, ["cancelled"])
    assert task["attempts"][0]["failure"] == "timeout"
