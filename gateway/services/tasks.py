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
    DuplicateTaskId,
    FieldProblem,
    QueueNotFound,
    TaskFinished,
    TaskNotFound,
    ValidationFailed,
)
from gateway.core.ids import IdMaker
from gateway.security.ssrf import check_endpoint_url
from gateway.services.catalog import CatalogService
from gateway.services.created import Created
from gateway.services.enqueue_answers import answers
from gateway.services.new_tasks import (
    is_plain,
    is_ready_now,
    new_plain_task,
    new_task,
    runs_of,
)
from gateway.store.clock import Clock
from gateway.store.dependencies import DependencyStore
from gateway.store.pubsub import Notifier
from gateway.store.queues import QueueStore
from gateway.store.records import (
    attempt_from_record,
    task_from_record,
)
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
        self._tracing = tracing or Tracing.off()
        self._metrics = metrics or Metrics()
        self._catalog = catalog
        self._allow_private = allow_private_urls
        self._dependencies = dependencies
        self._tasks = tasks
        self._queues = queues
        self._directory = directory
        self._clock = clock
        self._notifier = notifier
        self._on_ready = on_ready
        self._claim_for = claim_for
        self._ids = IdMaker()

    async def enqueue(
        self,
        queue: str,
        specs: Sequence[TaskCreate],
        *,
        batch: bool = True,
        trace: TraceHeaders | None = None,
        job: str | None = None,
    ) -> list[Task]:
        """Store every task or none; the answer shows each as stored (or, for a task that
        matched an earlier one by its dedup or singleton key, that earlier task).

        ``trace``: the request's W3C headers. A task without a ``traceparent`` of its own keeps
        them as its trace context; when tracing is on, each task gets an enqueue span instead
        (its parent: the task's own context, else the request's span) and keeps that.

        ``job``: the tasks are runs of this job (their ids the runs'); their records name it,
        so the scripts that end them record each run's end (:mod:`gateway.store.run_ends`)."""
        created = await self.enqueue_created(queue, specs, batch=batch, trace=trace, job=job)
        return [c.view() for c in created]

    async def enqueue_created(
        self,
        queue: str,
        specs: Sequence[TaskCreate],
        *,
        batch: bool = True,
        trace: TraceHeaders | None = None,
        job: str | None = None,
    ) -> list[Created]:
        """:meth:`enqueue`, each task's answer not yet made into a Task (for the routes that
        answer with its JSON: :func:`gateway.services.created.answer_json`)."""
        try:
            return await self._enqueue(queue, specs, batch, trace, job)
        except ValidationFailed as e:
            if batch:
                raise
            raise ValidationFailed(
                [FieldProblem(p.field.removeprefix("tasks.0."), p.reason) for p in e.errors]
            ) from e

    async def _enqueue(
        self,
        queue: str,
        specs: Sequence[TaskCreate],
        batch: bool,
        trace: TraceHeaders | None,
        job: str | None = None,
    ) -> list[Created]:
        seen: dict[str, int] = {}
        repeats = []
        for i, spec in enumerate(specs):
            if spec.id is not None:
                if spec.id in seen:
                    repeats.append((i, seen[spec.id]))
                seen[spec.id] = i
        if repeats:
            raise DuplicateTaskId(repeats)
        problems = await self._check_notify_urls(specs)
        view = await self._directory.view(queue)
        if view is None:
            raise QueueNotFound(queue)
        if view.policy.key_concurrency is None:
            problems += [
                FieldProblem(f"tasks.{i}.concurrency_key", "the queue has no key_concurrency")
                for i, spec in enumerate(specs)
                if spec.concurrency_key is not None
            ]
        if problems:
            raise ValidationFailed(problems)
        # The policy only shapes the answer (max_attempts) and reads the keys: a second-old
        # copy will do, and the enqueue script itself refuses a queue that does not exist.
        if self._catalog is not None:
            await self._catalog.check_enqueue(queue, specs)
        located = await self._locate_dependencies(specs, seen)
        now = self._clock.now_ms()
        policy = view.policy
        # An idle dispatcher here has its claim ride in the enqueue's round trip, so a task
        # that can go now is pushed without waiting for a dispatcher cycle. (Asked for right
        # before the round trip: the store hands every order it was given its answer.)
        ready_now = any(is_ready_now(spec, now) for spec in specs)
        order = None
        ids = iter(self._ids.take(len(specs) - sum(spec.id is not None for spec in specs)))
        if not self._tracing.enabled:
            new = runs_of(
                job,
                [
                    new_plain_task(spec, now, trace, spec.id or next(ids))
                    if is_plain(spec, policy)
                    else new_task(spec, now, located, queue, policy, trace, spec.id or next(ids))
                    for spec in specs
                ],
            )
            order = self._claim_for(queue) if ready_now else None
            enqueued = await self._tasks.enqueue_batch(
                queue, new, now, client_ids=bool(seen), claim=order
            )
        else:
            untraced = runs_of(
                job,
                [
                    new_task(spec, now, located, queue, policy, task_id=spec.id or next(ids))
                    for spec in specs
                ],
            )
            with self._tracing.enqueue(queue, untraced, batch=batch) as new:
                order = self._claim_for(queue) if ready_now else None
                enqueued = await self._tasks.enqueue_batch(
                    queue, new, now, client_ids=bool(seen), claim=order
                )
        if order is not None:
            # The pushes of what the claim took were just started: let them write their
            # requests before this answer is built (the worker starts sooner; the answer waits
            # about as long as building a push takes). Two turns of the loop: in the first the
            # push tasks run up to their request, and aiohttp on Python < 3.12 starts a task of
            # its own to write the body, which runs in the second (on 3.12 and later it writes
            # at once, and the second turn costs about a microsecond).
            await asyncio.sleep(0)
            await asyncio.sleep(0)
        stored = enqueued.stored
        self._metrics.enqueued(queue, (n.name for n, s in zip(new, stored, strict=True) if s.state))
        links = [
            (n.id, q, d)
            for n, s in zip(new, stored, strict=True)
            if s.state
            for q, d in n.cross_deps
        ]
        if links:
            await self._dependencies.link(queue, links, now)
        ready = sum(
            s.state is TaskState.QUEUED
            or (s.replaced is not None and s.replaced.state is TaskState.QUEUED)
            for s in stored
        )
        if ready and not (order and enqueued.announced):
            # Pub/sub tells the pull polls of every gateway, this one's too, when the script
            # announced the tasks: counting them here as well would wake twice as many. (Then
            # only the dispatcher is left to wake, and a claim that rode along did that.)
            self._on_ready(queue, 0 if enqueued.announced else ready)
        linked = {task_id for task_id, _, _ in links}
        return await answers(queue, specs, new, stored, view.policy, self._read, linked)

    async def _check_notify_urls(self, specs: Sequence[TaskCreate]) -> list[FieldProblem]:
        """Completion callback URLs obey the endpoints' address rules (checked again at every
        delivery, by the guarded session)."""
        problems = []
        for i, spec in enumerate(specs):
            if spec.notify is not None:
                try:
                    await check_endpoint_url(spec.notify, self._allow_private)
                except ValueError as e:
                    problems.append(FieldProblem(f"tasks.{i}.notify", str(e)))
        return problems

    async def _locate_dependencies(
        self, specs: Sequence[TaskCreate], batch_ids: dict[str, int]
    ) -> dict[str, str]:
        """The queue of every dependency outside the batch; refuses unknown ones."""
        wanted = sorted({d for spec in specs for d in spec.depends_on if d not in batch_ids})
        located: dict[str, str] = {}
        problems = []
        for dep in wanted:
            found = await self._tasks.locate(dep)
            if found is None:
                where = next(i for i, spec in enumerate(specs) if dep in spec.depends_on)
                problems.append(
                    FieldProblem(f"tasks.{where}.depends_on", f"no task '{dep}' exists")
                )
            else:
                located[dep] = found
        if problems:
            raise ValidationFailed(problems)
        return located

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
            task = await self._read(queue, task_id)
            raise TaskFinished(f"task '{task_id}' already ended as {task.state.value}")
        return await self._read(queue, task_id)


def _offset(cursor: str | None) -> int:
    if cursor is None:
        return 0
    if not cursor.isdigit() or len(cursor) > 9:
        raise ValidationFailed([FieldProblem("cursor", "is not a cursor this API gave out")])
    return int(cursor)
