"""A bulk cancel (``POST /v1/queues/{queue}/tasks/cancel``) while work is being admitted: a real
gateway process pushing to a real SDK worker on a queue with per-key concurrency, where each
task that ends lets its key's next held task in, so tasks the filter listed as queued are
claimed during the call. The answer must count each task by what its cancel did, and match
every task's end state afterwards (issue 28: 81 to 185 tasks admitted mid-call were counted
as cancelled, then ran and succeeded)."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from gateway.store.keys import QueueKeys
from sdk import TaskCreate

from .conftest import Cluster, pushes
from .test_e2e import LONG_INLINE, setup, until

pytestmark = pytest.mark.e2e

KEYS = 20
PER_KEY = 30
WORK = 0.2  # seconds each task runs (answered inline: the worker's window is 0.5 s)


def test_a_bulk_cancel_counts_each_task_by_what_happened_to_it(
    cluster: Cluster, tmp_path: Path
) -> None:
    s = setup(cluster, tmp_path, key_concurrency={"limit": 1})
    specs = [
        TaskCreate(name=LONG_INLINE, payload={"args": [WORK]}, concurrency_key=f"k{k}")
        for _ in range(PER_KEY)
        for k in range(KEYS)
    ]
    ids = [t.id for t in s.client.enqueue_batch("e2e", specs)]
    # Every key has a task running: from now on one task of some key ends, and its key's next
    # held task is admitted, about every WORK / KEYS seconds.
    until(lambda: len(pushes(s.log)) >= KEYS, what="a push of every key")
    with cluster.api() as api:
        r = api.post("/v1/queues/e2e/tasks/cancel", json={"state": "queued", "limit": 1000})
        assert r.status_code == 200, r.text
        answer = r.json()
    cancelled = set(answer["cancelled"])
    requested = set(answer.get("cancel_requested", []))
    skipped = {entry["id"]: entry["reason"] for entry in answer["skipped"]}
    assert not cancelled & requested
    assert not (cancelled | requested) & skipped.keys()

    k = QueueKeys.of("e2e")
    finished = (k.succeeded, k.failed, k.dead, k.cancelled)
    with redis.Redis.from_url(cluster.redis_url, decode_responses=True) as r:
        # What is left runs one task per key at a time: those running when the call began and
        # those admitted during it (WORK each); the deadline leaves room for a loaded machine.
        until(
            lambda: sum(r.zcard(key) for key in finished) == len(ids),
            timeout=60,
            what="every task to end",
        )
    tasks = {task_id: s.client.get_task(task_id) for task_id in ids}
    for task_id in cancelled:  # removed before they ran
        task = tasks[task_id]
        assert (task.state.value, task.attempts) == ("cancelled", []), task_id
    for task_id in requested:  # running when asked: the end of their attempt decided
        task = tasks[task_id]
        assert task.cancel_requested, task_id
        assert task.attempts, task_id
        assert task.state.value in ("succeeded", "cancelled"), task_id
        assert task.attempts[-1].outcome.value == task.state.value, task_id
    for task_id, reason in skipped.items():  # they had ended before their cancel
        assert reason == f"already ended as {tasks[task_id].state.value}", task_id
    # Every task that ended cancelled is one the answer counted so, or one asked to stop.
    ended_cancelled = {t for t, task in tasks.items() if task.state.value == "cancelled"}
    assert ended_cancelled - requested == cancelled
    assert {task.state.value for task in tasks.values()} <= {"succeeded", "cancelled"}
    # The call did race the admissions: some tasks listed as queued were running by their turn.
    assert requested, answer
    assert cancelled
