"""Throughput per time window, counted from the finished-task indexes (no scans)."""

from __future__ import annotations

import pytest

from gateway.core.errors import QueueNotFound
from gateway.services.activity import ActivityService
from sdk.wire import AttemptOutcome, TaskState

from .conftest import Stores
from .test_operations import SECOND, Q, enqueue, make_queue, run_and_end

MINUTE = 60 * SECOND


async def test_tasks_ended_are_counted_in_the_window_they_ended(stores: Stores) -> None:
    s = stores
    await make_queue(s)
    service = ActivityService(s.tasks, s.queues, s.clock)
    await enqueue(s, 3)
    await run_and_end(s, Q, AttemptOutcome.SUCCEEDED)  # 3 succeed at t0
    s.clock.advance(2 * MINUTE)
    await enqueue(s, 2)
    await run_and_end(s, Q, AttemptOutcome.FAILED)  # 2 die at t0 + 2 min (max_attempts 1)
    s.clock.advance(MINUTE - 1)  # t0 + 3 min - 1 ms: the dead ones are in the last window
    await enqueue(s, 1)
    await run_and_end(s, Q, AttemptOutcome.SUCCEEDED)  # 1 succeeds now
    found = await service.throughput(Q, windows=4, window_seconds=60)
    assert found.windows == 4
    assert found.finished[TaskState.SUCCEEDED] == [0, 3, 0, 1]
    assert found.finished[TaskState.DEAD] == [0, 0, 0, 2]
    assert found.finished[TaskState.FAILED] == [0, 0, 0, 0]
    assert found.total(TaskState.SUCCEEDED) == 4
    assert found.total(TaskState.SUCCEEDED, last=1) == 1
    assert found.ended() == [0, 3, 0, 3]
    s.clock.advance(1)  # a millisecond on, each window starts one later: t0 and t0 + 2 min
    later = await service.throughput(Q, windows=4, window_seconds=60)  # fall one window back
    assert later.finished[TaskState.SUCCEEDED] == [3, 0, 0, 1]
    assert later.finished[TaskState.DEAD] == [0, 0, 2, 0]


async def test_throughput_of_an_unknown_queue_is_404(stores: Stores) -> None:
    with pytest.raises(QueueNotFound):
        await ActivityService(stores.tasks, stores.queues, stores.clock).throughput("nope")
