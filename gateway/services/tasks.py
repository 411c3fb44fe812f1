"""Tasks as producers and operators see them: enqueue, read, wait, list, cancel."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Sequence

from ulid import ULID

from gateway.clock import Clock
from gateway.directory import Directory
from gateway.errors import (
    FieldProblem,
    QueueNotFound,
    TaskFinished,
    TaskNotFound,
    ValidationFailed,
)
from gateway.store.pubsub import Notifier
from gateway.store.queues import QueueStore
from gateway.store.records import (
    NewTask,
    attempt_from_record,
    seconds_to_ms,
    task_from_record,
    to_ms,
)
from gateway.store.tasks import CancelResult, TaskStore
from sdk.wire import LogLine, LogPage, QueuePolicy, Task, TaskCreate, TaskPage, TaskState

MAX_WAIT = 60.0


def _new_task(spec: TaskCreate, now_ms: int) -> NewTask:
    if spec.run_at is not None:
        run_at = to_ms(spec.run_at)
    elif spec.delay:
        run_at = now_ms + seconds_to_ms(spec.delay)
    else:
        run_at = now_ms
    return NewTask(
        id=spec.id or str(ULID()),
        name=spec.name,
        payload_json=json.dumps(spec.payload, separators=(",", ":")),
        priority=spec.priority,
        created_ms=now_ms,
        run_at_ms=run_at,
        max_attempts=spec.max_attempts,
        lease_ms=None if spec.lease_timeout is None else seconds_to_ms(spec.lease_timeout),
        run_ms=None if spec.max_run_time is None else seconds_to_ms(spec.max_run_time),
        traceparent=spec.traceparent,
    )


def _created_view(
    queue: str, spec: TaskCreate, new: NewTask, state: TaskState, policy: QueuePolicy
) -> Task:
    record = {
        "name": new.name,
        "prio": new.priority,
        "state": state.value,
        "att": 0,
        "created": new.created_ms,
        "run_at": new.run_at_ms,
    }
    if new.max_attempts is not None:
        record["max_att"] = new.max_attempts
    view = task_from_record(queue, new.id, record, policy)
    return view.model_copy(update={"payload": spec.payload})


class TaskService:
    def __init__(
        self,
        tasks: TaskStore,
        queues: QueueStore,
        directory: Directory,
        clock: Clock,
        notifier: Notifier,
        *,
        on_ready: Callable[[str], None],
    ) -> None:
        self._tasks = tasks
        self._queues = queues
        self._directory = directory
        self._clock = clock
        self._notifier = notifier
        self._on_ready = on_ready

    async def enqueue(self, queue: str, specs: Sequence[TaskCreate]) -> list[Task]:
        """Store every task or none; the answer shows each as stored."""
        seen: dict[str, int] = {}
        problems = []
        for i, spec in enumerate(specs):
            if spec.id is not None:
                if spec.id in seen:
                    problems.append(
                        FieldProblem(f"tasks.{i}.id", f"repeats tasks.{seen[spec.id]}.id")
                    )
                seen[spec.id] = i
        if problems:
            raise ValidationFailed(problems)
        # The policy only shapes the answer (max_attempts): a second-old copy will do, and the
        # enqueue script itself refuses a queue that does not exist.
        view = await self._directory.view(queue)
        if view is None:
            raise QueueNotFound(queue)
        now = self._clock.now_ms()
        new = [_new_task(spec, now) for spec in specs]
        states = await self._tasks.enqueue(queue, new, now, client_ids=bool(seen))
        if TaskState.QUEUED in states:
            self._on_ready(queue)
        return [
            _created_view(queue, spec, n, state, view.policy)
            for spec, n, state in zip(specs, new, states, strict=True)
        ]

    async def locate(self, task_id: str) -> str:
        queue = await self._tasks.locate(task_id)
        if queue is None:
            raise TaskNotFound(task_id)
        return queue

    async def get(self, queue: str, task_id: str, *, wait: float = 0) -> Task:
        """The task with its full history; with ``wait``, once it has finished or the wait ran
        out, whichever comes first."""
        if wait <= 0:
            return await self._read(queue, task_id)
        async with self._notifier.watch(task_id) as finished:
            task = await self._read(queue, task_id)
            if task.state.finished:
                return task
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(finished.wait(), min(wait, MAX_WAIT))
        return await self._read(queue, task_id)

    async def _read(self, queue: str, task_id: str) -> Task:
        found = await self._tasks.read(queue, task_id)
        stored = await self._queues.get(queue)
        if found is None or stored is None:
            raise TaskNotFound(task_id)
        record, payload, result, checkpoint, history = found
        return task_from_record(
            queue,
            task_id,
            record,
            stored.policy,
            payload=payload,
            result=result,
            checkpoint=checkpoint,
            history=[attempt_from_record(a) for a in history],
        )

    async def page(self, queue: str, state: TaskState, cursor: str | None, limit: int) -> TaskPage:
        stored = await self._queues.require(queue)
        offset = _offset(cursor)
        rows, more = await self._tasks.page(queue, state, offset, limit)
        items = [
            task_from_record(queue, task_id, record, stored.policy, payload=payload)
            for task_id, record, payload in rows
        ]
        return TaskPage(items=items, next_cursor=str(offset + limit) if more else None)

    async def cancel(self, queue: str, task_id: str) -> Task:
        outcome = await self._tasks.cancel(queue, task_id, self._clock.now_ms())
        if outcome is CancelResult.NOTASK:
            raise TaskNotFound(task_id)
        if outcome is CancelResult.FINISHED:
            task = await self._read(queue, task_id)
            raise TaskFinished(f"task '{task_id}' already ended as {task.state.value}")
        return await self._read(queue, task_id)

    async def logs(self, queue: str, task_id: str) -> LogPage:
        await self._read(queue, task_id)
        lines = await self._tasks.logs(queue, task_id)
        return LogPage(items=[LogLine.model_validate_json(line) for line in lines])


def _offset(cursor: str | None) -> int:
    if cursor is None:
        return 0
    if not cursor.isdigit() or len(cursor) > 9:
        raise ValidationFailed([FieldProblem("cursor", "is not a cursor this API gave out")])
    return int(cursor)
