"""A task as ``GET /v1/tasks/{task_id}`` shows it: its record, payload, result, checkpoint,
durable steps and every attempt, read from the store. The task service's reads and the
enqueue's answers (a dedup hit, a task its link decided: :mod:`gateway.services.enqueue.answers`)
both read a task here."""

from __future__ import annotations

from gateway.core.errors import TaskNotFound
from gateway.store.clock import Clock
from gateway.store.queues import QueueStore
from gateway.store.records import attempt_from_record, task_from_record
from gateway.store.tasks import TaskStore
from sdk.wire import Task


class TaskReader:
    def __init__(self, tasks: TaskStore, queues: QueueStore, clock: Clock) -> None:
        self._tasks = tasks
        self._queues = queues
        self._clock = clock

    async def read(self, queue: str, task_id: str) -> Task:
        """The task with its full history; raises TaskNotFound."""
        found = await self._tasks.read(queue, task_id)
        stored = await self._queues.get(queue)
        if found is None or stored is None:
            raise TaskNotFound(task_id)
        record, payload, result, checkpoint, history = found
        steps = await self._tasks.steps(queue, task_id) if record.get("stp") else None
        return task_from_record(
            queue,
            task_id,
            record,
            stored.policy,
            payload=payload,
            result=result,
            checkpoint=checkpoint,
            steps=steps,
            history=[attempt_from_record(a) for a in history],
            now_ms=self._clock.now_ms(),
        )
