"""``ctx.wait_for_event`` end to end (docs/durable.md, "Waiting for an event"): a real gateway and
SDK worker process, a real Redis, events sent with ``POST /v1/events`` (the SDK's
``send_event``): the gateway pushes each waiting task again, once, with its event as the wait's
result; a wait whose timeout passes gets ``None``; an event sent before a wait was recorded does
not end it."""

from __future__ import annotations

from pathlib import Path

import pytest

from sdk import TaskState

from .conftest import Cluster
from .test_durable_e2e import runs, setup, until

pytestmark = pytest.mark.e2e

APPROVAL = "tests.e2e.durable_worker_app.approval"
APPROVAL_SYNC = "tests.e2e.durable_worker_app.approval_sync"


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
