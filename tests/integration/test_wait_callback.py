"""The ``wait`` callback and ``cancel_on`` against a real gateway and Redis: the callback ends the
attempt with the task scheduled and its wait shown, fenced by the lease; an event handed to the
waits' consumer (here in the test's process, on the same Redis, as the events service of any
gateway will) resumes it, and the gateway pushes it again with the event among its steps; a
task enqueued with ``cancel_on`` is cancelled by its event."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from datetime import datetime

import httpx
import pytest
from redis.asyncio import Redis
from ulid import ULID

from gateway.services.event_types import AcceptedEvent, Touched
from gateway.services.waits import WaitResumer
from gateway.store.clock import ManualClock
from gateway.store.scripts import Scripts
from gateway.store.tasks import TaskStore
from tests.integration.test_release_callback import (
    Rig,
    rig,  # noqa: F401  (the fixture)
)


@pytest.fixture
async def resumer(redis_url: str) -> AsyncIterator[WaitResumer]:
    redis = Redis.from_url(redis_url, decode_responses=True)
    scripts = Scripts(redis)
    await scripts.load()
    yield WaitResumer(TaskStore(redis, scripts), ManualClock(int(time.time() * 1000)))
    await redis.aclose()


def event(name: str, **data: object) -> AcceptedEvent:
    return AcceptedEvent(str(ULID()), name, data, int(time.time() * 1000))  # type: ignore[arg-type]


async def test_a_wait_ends_the_attempt_until_its_event_then_the_task_goes_on(
    rig: Rig,  # noqa: F811
    resumer: WaitResumer,
) -> None:
    task_id, base, lease = await rig.running()
    body = {"step": "approval", "event": "approved", "match": {"doc": 7}, "timeout": 600}
    async with httpx.AsyncClient() as cb:
        missing = await cb.post(f"{base}/wait", json={"step": "a", "event": "approved"})
        assert missing.status_code == 422, missing.text  # no timeout
        stale = await cb.post(f"{base}/wait", json=body, headers={"jobgate-lease": "not-it"})
        assert stale.status_code == 409, stale.text
        waited = await cb.post(f"{base}/wait", json=body, headers={"jobgate-lease": lease})
        assert waited.status_code == 200, waited.text
        assert waited.json()["state"] == "scheduled"
    task = await rig.task(task_id)
    assert (task["state"], task["attempt"]) == ("scheduled", 0)
    assert {k: v for k, v in task["wait"].items() if k != "until"} == {
        "step": "approval",
        "event": "approved",
        "match": {"doc": 7},
        "child": None,  # (a wait for a child task has it, and no event)
        "call": None,  # (a wait for an HTTP call has it)
    }
    assert datetime.fromisoformat(task["wait"]["until"]) == datetime.fromisoformat(task["run_at"])
    assert await resumer.consume(event("approved", doc=8)) == []
    approved = event("approved", doc=7, by="ann")
    assert await resumer.consume(approved) == [Touched("q", task_id, "resumed", "approval")]
    task = await rig.task(task_id, wait=10)
    assert (task["state"], task["result"]) == ("succeeded", {"attempt": 1})
    assert "wait" not in task or task["wait"] is None
    [(_, second)] = rig.worker.of(task_id)[1:]
    assert second.steps is not None
    assert {s.name: s.result for s in second.steps} == {
        "approval": {"id": approved.id, "name": "approved", "data": {"doc": 7, "by": "ann"}}
    }
    assert await resumer.consume(approved) == []


async def test_a_task_with_cancel_on_is_cancelled_by_its_event(
    rig: Rig,  # noqa: F811
    resumer: WaitResumer,
) -> None:
    cancel_on = [{"event": "refunded", "match": {"order": "o-1"}}]
    r = await rig.api.post(
        "/v1/queues/q/tasks", json={"name": "job", "delay": 600, "cancel_on": cancel_on}
    )
    assert r.status_code == 201, r.text
    task_id = r.json()["id"]
    assert await resumer.consume(event("refunded", order="o-2")) == []
    touched = await resumer.consume(event("refunded", order="o-1", why="customer"))
    assert touched == [Touched("q", task_id, "cancelled", "cancel_on")]
    assert (await rig.task(task_id))["state"] == "cancelled"
    bad = await rig.api.post(
        "/v1/queues/q/tasks",
        json={"name": "job", "cancel_on": [{"event": "has space", "match": {}}]},
    )
    assert bad.status_code == 422, bad.text
