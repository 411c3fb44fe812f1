"""``ctx.wait_for_event`` end to end (docs/durable.md, "Waiting for an event"): a real gateway and
SDK worker process, a real Redis, events sent with ``POST /v1/events`` (the SDK's
``send_event``): the gateway pushes each waiting task again, once, with its event as the wait's
result; a wait whose timeout passes gets ``None``; an event sent before a wait was recorded does
not end it; 200 waits on 200 keys, their events sent concurrently in random order through two
gateways, each resume their own task once."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import pytest

from sdk import AsyncClient, Task, TaskState
from sdk.wire import Event

from .conftest import ADMIN, Cluster, pushes
from .test_durable_e2e import runs, setup, until

pytestmark = pytest.mark.e2e

APPROVAL = "tests.e2e.durable_worker_app.approval"
APPROVAL_SYNC = "tests.e2e.durable_worker_app.approval_sync"
WAITS = 200
IN_FLIGHT = 16  # requests at once from the test (enqueues, events, reads)


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
    one = s.client.send_event("doc.approved", {"doc": 1, "by": "ann"})
    assert [(t.queue, t.id, t.by) for t in one.resumed] == [("durable", first.id, "approved")]
    two = s.client.send_event("doc.approved", {"doc": 2})
    assert [t.id for t in two.resumed] == [second.id]
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
    assert s.client.send_event("doc.approved", {"doc": 1}).resumed == []  # resumed once only


def test_an_event_sent_before_the_wait_does_not_end_it_and_cancel_on_cancels(
    cluster: Cluster, tmp_path: Path
) -> None:
    """The rule for events before the wait (docs/durable.md): without a lookback, an event
    accepted before the wait was recorded does not end it; the next one does. A task enqueued
    with ``cancel_on`` is cancelled at once by a matching event while it waits to run."""
    s = setup(cluster, tmp_path, max_attempts=1)
    early = s.client.send_event("doc.approved", {"doc": 7})
    task = s.client.enqueue("durable", APPROVAL, {"args": [str(s.folder), 7, 600]})
    until(lambda: s.client.get_task(task.id).wait is not None, what="the wait recorded")
    assert s.client.get_task(task.id).state is TaskState.SCHEDULED  # the early event is ignored
    later = s.client.send_event("doc.approved", {"doc": 7})
    assert [t.id for t in later.resumed] == [task.id]
    end = s.client.wait(task.id, timeout=40)
    assert end.state is TaskState.SUCCEEDED
    assert end.result["event"]["id"] == later.id != early.id  # type: ignore[index,call-overload]

    held = s.client.enqueue(
        "durable",
        APPROVAL,
        {"args": [str(s.folder), 8, 600]},
        delay=600,
        cancel_on=[{"event": "doc.withdrawn", "match": {"doc": 8}}],
    )
    withdrawn = s.client.send_event("doc.withdrawn", {"doc": 8})
    assert [t.id for t in withdrawn.cancelled] == [held.id]
    assert s.client.get_task(held.id).state is TaskState.CANCELLED


def test_200_waits_on_200_keys_resume_once_each_with_their_own_event_through_two_gateways(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Issue 30: 200 tasks wait on 200 keys (``doc.approved`` with ``{"doc": i}``); once every
    wait is recorded, the 200 events are sent at once, in random order, each to one of the two
    gateways at random. Each event resumes its own task, and only it; each task is pushed again
    once, goes on from its wait with its own event's data, and spends no attempt waiting."""
    s = setup(cluster, tmp_path, concurrency=64, max_attempts=1)
    gateways = [cluster.gateways[0], cluster.gateway()]
    folder = str(s.folder)
    rng = random.Random(30)
    order = list(range(WAITS))
    rng.shuffle(order)
    targets = [rng.randrange(2) for _ in order]

    async def run() -> tuple[list[Task], dict[int, Event], list[Task]]:
        limit = asyncio.Semaphore(IN_FLIGHT)
        async with AsyncClient(gateways[0], ADMIN) as one, AsyncClient(gateways[1], ADMIN) as two:
            clients = (one, two)

            async def enqueue(doc: int) -> Task:
                async with limit:
                    return await clients[doc % 2].enqueue(
                        "durable", APPROVAL, {"args": [folder, doc, 600]}
                    )

            async def send(doc: int, target: int) -> tuple[int, Event]:
                async with limit:
                    data = {"doc": doc, "n": doc * 7}
                    return doc, await clients[target].send_event("doc.approved", data)

            async def read(task: Task) -> Task:
                async with limit:
                    return await one.get_task(task.id)

            tasks = await asyncio.gather(*(enqueue(doc) for doc in range(WAITS)))
            await until_async(lambda: counted(one, TaskState.SCHEDULED), "every wait recorded")
            sent = await asyncio.gather(*(send(d, t) for d, t in zip(order, targets, strict=True)))
            await until_async(lambda: counted(one, TaskState.SUCCEEDED), "every task to end")
            return tasks, dict(sent), await asyncio.gather(*(read(t) for t in tasks))

    tasks, events, ends = asyncio.run(run())
    for doc, task in enumerate(tasks):
        assert [(t.queue, t.id, t.by) for t in events[doc].resumed] == [
            ("durable", task.id, "approved")
        ], doc
    for doc, end in enumerate(ends):
        assert end.state is TaskState.SUCCEEDED, (doc, [a.error for a in end.attempts])
        assert [a.outcome for a in end.attempts] == ["released", "succeeded"], doc
        assert [step.name for step in end.steps] == ["before", "approved"], doc
        assert end.result == {
            "before": 1,
            "event": {
                "id": events[doc].id,
                "name": "doc.approved",
                "data": {"doc": doc, "n": doc * 7},
            },
            "attempt": 1,
        }, doc
        assert runs(s.folder, f"before-{doc}") == 1, doc
    assert len(pushes(s.log)) == 2 * WAITS  # the first push and one resume each


async def counted(client: AsyncClient, state: TaskState) -> bool:
    """Every task of the test is in ``state`` (a waiting task is ``scheduled``)."""
    return (await client.get_queue("durable")).counts.get(state, 0) == WAITS


async def until_async(check: Any, what: str, timeout: float = 90) -> None:
    """Poll ``check`` (a coroutine function) until true, or fail after ``timeout`` seconds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)
