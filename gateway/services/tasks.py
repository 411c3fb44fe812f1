"""Tasks as producers and operators see them: enqueue, read, wait, list, cancel."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated

from pydantic import Field

from gateway.caches.directory import Directory
from gateway.core.errors import (
    FieldProblem,
    TaskFinished,
    TaskNotFound,
    ValidationFailed,
)
from gateway.services.catalog import CatalogService
from gateway.services.enqueue import Created, Enqueue
from gateway.services.task_reads import TaskReader
from gateway.store.clock import Clock
from gateway.store.dependencies import DependencyStore
from gateway.store.pubsub import Notifier
from gateway.store.queues import QueueStore
from gateway.store.records import task_from_record
from gateway.store.tasks import Cancel, CancelResult, ClaimOrder, TaskStore
from gateway.telemetry.metrics import Metrics
from gateway.telemetry.tracing import TraceHeaders, Tracing
from sdk.wire import (
    Task,
    TaskCreate,
    TaskPage,
    TaskState,
)

MAX_WAIT = 60.0
OffsetCursor = Annotated[str, Field(pattern=r"^[0-9]{1,9}$")]
"""A task listing's cursor: how many entries of the state's index came before."""
FILTER_SCAN = 10_000


@dataclass(frozen=True, slots=True)
class TaskSearch:
    """A page of tasks with what was looked at: the entries of the state's index from
    ``start`` up to ``end`` (None: to the end of the index), of ``total`` (when counted)."""

    page: TaskPage
    start: int
    end: int | None
    total: int | None


class TaskService:
    def __init__(
        self,
        tasks: TaskStore,
        queues: QueueStore,
        directory: Directory,
        clock: Clock,
        notifier: Notifier,
        dependencies: DependencyStore,
        *,
        on_ready: Callable[[str, int], None],
        claim_for: Callable[[str], ClaimOrder | None] = lambda queue: None,
        catalog: CatalogService | None = None,
        allow_private_urls: bool = False,
        tracing: Tracing | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self._tasks = tasks
        self._queues = queues
        self._clock = clock
        self._notifier = notifier
        self._reader = TaskReader(tasks, queues, clock)
        self._enqueue = Enqueue(
            tasks,
            directory,
            clock,
            dependencies,
            self._reader,
            on_ready=on_ready,
            claim_for=claim_for,
            catalog=catalog,
            allow_private_urls=allow_private_urls,
            tracing=tracing or Tracing.off(),
            metrics=metrics or Metrics(),
        )

    async def enqueue(
        self,
        queue: str,
        specs: Sequence[TaskCreate],
        *,
        batch: bool = True,
        trace: TraceHeaders | None = None,
        job: str | None = None,
        parent: tuple[str, str, str] | None = None,
    ) -> list[Task]:
        """Store every task or none; the answer shows each as stored (or, for a task that
        matched an earlier one by its dedup or singleton key, that earlier task).

        ``trace``: the request's W3C headers. A task without a ``traceparent`` of its own keeps
        them as its trace context; when tracing is on, each task gets an enqueue span instead
        (its parent: the task's own context, else the request's span) and keeps that.

        ``job``: the tasks are runs of this job (their ids the runs'); their records name it,
        so the scripts that end them record each run's end (:mod:`gateway.store.run_ends`).

        ``parent``: the tasks were invoked by this task (queue, id, step); the scripts that end
        them send their ends to it (:mod:`gateway.services.invokes`)."""
        created = await self.enqueue_created(
            queue, specs, batch=batch, trace=trace, job=job, parent=parent
        )
        return [c.view() for c in created]

    async def enqueue_created(
        self,
        queue: str,
        specs: Sequence[TaskCreate],
        *,
        batch: bool = True,
        trace: TraceHeaders | None = None,
        job: str | None = None,
        parent: tuple[str, str, str] | None = None,
    ) -> list[Created]:
        """:meth:`enqueue`, each task's answer not yet made into a Task (for the routes that
        answer with its JSON: :func:`gateway.services.enqueue.created.answer_json`). The
        stages are :mod:`gateway.services.enqueue`'s; here, the problems of a single enqueue
        are named as fields of its body, not of a batch's first task."""
        try:
            return await self._enqueue.run(queue, specs, batch, trace, job, parent)
        except ValidationFailed as e:
            if batch:
                raise
            raise e.renamed(
                [FieldProblem(p.field.removeprefix("tasks.0."), p.reason) for p in e.errors]
            ) from e

    async def locate(self, task_id: str) -> str:
        queue = await self._tasks.locate(task_id)
        if queue is None:
            raise TaskNotFound(task_id)
        return queue

    async def get(self, queue: str, task_id: str, *, wait: float = 0) -> Task:
        """The task with its full history; with ``wait``, once it has finished or the wait ran
        out, whichever comes first."""
        if wait <= 0:
            return await self._reader.read(queue, task_id)
        async with self._notifier.watch(task_id) as finished:
            task = await self._reader.read(queue, task_id)
            if task.state.finished:
                return task
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(finished.wait(), min(wait, MAX_WAIT))
        return await self._reader.read(queue, task_id)

    async def page(
        self,
        queue: str,
        state: TaskState,
        cursor: str | None,
        limit: int,
        *,
        owner: str | None = None,
        name: str | None = None,
    ) -> TaskPage:
        """One page of the tasks in ``state``. With filters, the listing is scanned (at most
        :data:`FILTER_SCAN` entries per call), so a page may hold fewer than ``limit`` items
        and still have a next cursor."""
        return (await self.search(queue, state, cursor, limit, owner=owner, name=name)).page

    async def search(
        self,
        queue: str,
        state: TaskState,
        cursor: str | None,
        limit: int,
        *,
        owner: str | None = None,
        name: str | None = None,
        total: bool = False,
    ) -> TaskSearch:
        """:meth:`page`, saying which entries of the state's index were looked at and, with
        ``total``, how many it holds (what the admin UI shows of a filtered search)."""
        stored = await self._queues.require(queue)
        offset = start = _offset(cursor)
        now = self._clock.now_ms()
        items: list[Task] = []
        scanned = 0
        step = limit if owner is None and name is None else max(limit, 200)
        while True:
            rows, more = await self._tasks.page(queue, state, offset, step)
            taken = 0
            for row in rows:
                taken += 1
                record = row.record
                if (owner is None or record.get("own") == owner) and (
                    name is None or record.get("name") == name
                ):
                    items.append(
                        task_from_record(
                            queue,
                            row.task_id,
                            record,
                            stored.policy,
                            payload=row.payload,
                            result=row.result,
                            now_ms=now,
                        )
                    )
                    if len(items) == limit:
                        break
            if taken < len(rows):  # the page filled up inside this chunk
                offset += taken
                more = True
                break
            offset += step  # the whole chunk (and any vanished entries in it) was read
            scanned += step
            if not more or len(items) == limit or scanned >= FILTER_SCAN:
                break
        size = (await self._tasks.counts(queue))[state] if total else None
        page = TaskPage(items=items, next_cursor=str(offset) if more else None)
        return TaskSearch(page, start, offset if more else None, size)

    async def cancel_one(self, queue: str, task_id: str) -> Cancel:
        """Cancel a task and say what the script did (a bulk cancel counts by it)."""
        return await self._tasks.cancel_task(queue, task_id, self._clock.now_ms())

    async def cancel(self, queue: str, task_id: str) -> Task:
        outcome = (await self.cancel_one(queue, task_id)).result
        if outcome in (CancelResult.NOTASK, CancelResult.NOQUEUE):
            raise TaskNotFound(task_id)
        if outcome is CancelResult.FINISHED:
            task = await self._reader.read(queue, task_id)
            raise TaskFinished(f"task '{task_id}' already ended as {task.state.value}")
        return await self._reader.read(queue, task_id)


def _offset(cursor: str | None) -> int:
    if cursor is None:
        return 0
    if not cursor.isdigit() or len(cursor) > 9:
        raise ValidationFailed([FieldProblem("cursor", "is not a cursor this API gave out")])
    return int(cursor)
