"""``ctx.wait_for_event`` end to end (docs/durable.md, "Waiting for an event"): a real gateway and
SDK worker process, a real Redis. The events are handed to the waits' consumer in the test's
process, on the same Redis, as any gateway's events service will hand them (``POST /v1/events``
calls the same consumer): the gateway then pushes each task again, once, with its event as the
wait's result; a wait whose timeout passes gets ``None``."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from redis.asyncio import Redis
from ulid import ULID

from gateway.services.event_types import AcceptedEvent, Touched
from gateway.services.waits import WaitResumer
from gateway.store.clock import ManualClock
from gateway.store.scripts import Scripts
from gateway.store.tasks import TaskStore
from sdk import TaskState

from .conftest import Cluster
from .test_durable_e2e import runs, setup, until

pytestmark = pytest.mark.e2e

APPROVAL = "tests.e2e.durable_worker_app.approval"
APPROVAL_SYNC = "tests.e2e.durable_worker_app.approval_sync"


def consume(redis_url: str, name: str, **data: object) -> tuple[AcceptedEvent, list[Touched]]:
    """Hand an event to the waits' consumer, on the gateway's Redis."""

    async def run() -> tuple[AcceptedEvent, list[Touched]]:
        redis = Redis.from_url(redis_url, decode_responses=True)
        try:
            scripts = Scripts(redis)
            await scripts.load()
            now = int(time.time() * 1000)
            event = AcceptedEvent(str(ULID()), name, data, now)  # type: ignore[arg-type]
            return event, await WaitResumer(TaskStore(redis, scripts), ManualClock(now)).consume(
                event
            )
        finally:
            await redis.aclose()

    return asyncio.run(run())


def test_tasks_waiting_for_events_go_on_with_their_event_or_none_at_the_timeout(
    cluster: Cluster, tmp_path: Path
) -> None:
    s = setup(cluster, tmp_path, max_attempts=1)
    folder = str(s.folder)
    first = s.client.enqueue("durable", APPROVAL, {"args": [folder, 1, 600]})
    second = s.client.enqueue("durable", APPROVAL_SYNC, {"args": [folder, 2, 600]})
    late = s.client.enqueue("durable", APPROVAL, {"args": [folder, 3, 2]})
    for task in (first, second, late):
        until(
            lambda t=task: s.client.get_task(t.id).wait is not None,
            what="the wait recorded",
        )
    waiting = s.client.get_task(first.id)
    assert waiting.state is TaskState.SCHEDULED
    assert waiting.wait is not None
    assert (waiting.wait.step, waiting.wait.event, waiting.wait.match) == (
        "approved",
        "doc.approved",
        {"doc": 1},
    )
    one, touched = consume(cluster.redis_url, "doc.approved", doc=1, by="ann")
    assert touched == [Touched("durable", first.id, "resumed", "approved")]
    two, touched = consume(cluster.redis_url, "doc.approved", doc=2)
    assert [t.task_id for t in touched] == [second.id]
    done = {t.id: s.client.wait(t.id, timeout=40) for t in (first, second, late)}
    for task_id, end in done.items():
        assert end.state is TaskState.SUCCEEDED, (task_id, [a.error for a in end.attempts])
        assert [a.outcome for a in end.attempts] == ["released", "succeeded"]  # none spent
    assert done[first.id].result == {
        "before": 1,
        "event": {"id": one.id, "name": "doc.approved", "data": {"doc": 1, "by": "ann"}},
        "attempt": 1,
    }
    assert done[second.id].result["event"]["id"] == two.id  # type: ignore[index,call-overload]
    assert done[late.id].result == {"before": 1, "event": None, "attempt": 1}
    assert [runs(s.folder, f"before-{doc}") for doc in (1, 2, 3)] == [1, 1, 1]
    assert consume(cluster.redis_url, "doc.approved", doc=1)[1] == []  # resumed once only
