"""What queues have been doing lately: tasks finished per time window, by final state.

Counts come from the ``done:<state>`` indexes (scored by finish time) with one ZCOUNT per state
and window, so the cost is the same with ten tasks or ten million. Tasks swept past their
queue's retention no longer count, so windows older than the retention read low.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from gateway.store.clock import Clock
from gateway.store.keys import FINISHED_STATES
from gateway.store.queues import QueueStore
from gateway.store.records import to_datetime
from gateway.store.tasks import TaskStore
from sdk.wire import TaskState


@dataclass(frozen=True, slots=True)
class Throughput:
    """Tasks of one queue that ended in each final state, per window of ``window_seconds``,
    oldest window first; the last window ends at ``until``."""

    queue: str
    window_seconds: int
    until: datetime
    finished: dict[TaskState, list[int]]

    def total(self, state: TaskState, last: int | None = None) -> int:
        """Tasks that ended in ``state`` over the last ``last`` windows (all when None)."""
        counts = self.finished[state]
        return sum(counts if last is None else counts[-last:])

    @property
    def windows(self) -> int:
        return len(self.finished[TaskState.SUCCEEDED])

    def ended(self) -> list[int]:
        """Tasks that ended in any final state, per window."""
        return [sum(c) for c in zip(*self.finished.values(), strict=True)]


class ActivityService:
    def __init__(self, tasks: TaskStore, queues: QueueStore, clock: Clock) -> None:
        self._tasks = tasks
        self._queues = queues
        self._clock = clock

    async def throughput(
        self, queue: str, *, windows: int = 10, window_seconds: int = 60
    ) -> Throughput:
        """Finished tasks of ``queue`` per window over the last ``windows * window_seconds``."""
        await self._queues.require(queue)
        now = self._clock.now_ms()
        step = window_seconds * 1000
        edges = [now - (windows - i) * step + 1 for i in range(windows + 1)]
        counts = await self._tasks.finished_between(queue, edges)
        return Throughput(
            queue=queue,
            window_seconds=window_seconds,
            until=to_datetime(now),
            finished={s: counts[s] for s in FINISHED_STATES},
        )
