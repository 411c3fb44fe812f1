"""Jobs and runs as admins see them: define, list, edit, preview, run now, stop, restart.

A job's next fire time is computed and stored on every change (create, replace, patch), and
its due time is written to the firing loop's index at once, so an edit takes effect on every
gateway at the next step of any of them. Making runs and reading their status is
``gateway.services.runs``'s; firing them on schedule is ``gateway.background.job_firing``'s.
"""

from __future__ import annotations

from typing import Any

from pydantic import JsonValue
from ulid import ULID

from gateway.core.errors import (
    FieldProblem,
    JobNotFound,
    QueueNotFound,
    RunActive,
    RunNotFound,
    TaskFinished,
    TaskNotFound,
    ValidationFailed,
)
from gateway.jobs.definition import Definition, definition, encode, job_view, new_definition
from gateway.jobs.schedule import cron_trigger, next_fire_time, next_fire_times, timezone_of
from gateway.services.catalog import CatalogService
from gateway.services.logs import LogService
from gateway.services.runs import RunRequest, Runs
from gateway.services.tasks import FILTER_SCAN, TaskService
from gateway.store.clock import Clock
from gateway.store.jobs import JobStore, StoredJob
from gateway.store.queues import QueueStore
from gateway.store.records import to_datetime
from sdk.wire import (
    CrontabSchedule,
    FireTimes,
    Job,
    JobCreate,
    JobPage,
    JobPatch,
    LogPage,
    Run,
    RunCreate,
    RunPage,
    RunStatus,
)

_NULLABLE = frozenset({"schedule", "notify", "args"})
"""Fields a PATCH may set to null; null for another leaves it as is."""


def _offset(cursor: str | None) -> int:
    if cursor is None:
        return 0
    if not cursor.isdigit() or len(cursor) > 9:
        raise ValidationFailed([FieldProblem("cursor", "is not a cursor this API gave out")])
    return int(cursor)


class JobService:
    def __init__(
        self,
        store: JobStore,
        runs: Runs,
        queues: QueueStore,
        tasks: TaskService,
        clock: Clock,
        logs: LogService,
        catalog: CatalogService | None = None,
    ) -> None:
        self._logs = logs
        self._catalog = catalog
        self._store = store
        self._runs = runs
        self._queues = queues
        self._tasks = tasks
        self._clock = clock

    # --- jobs ---------------------------------------------------------------------------------

    async def create(self, spec: JobCreate) -> Job:
        await self._check(spec)
        job_id = str(ULID())
        now = self._clock.now_ms()
        found = new_definition(spec, now)
        await self._store.save(job_id, encode(found), _next(found, now), now, create=True)
        return await self.get(job_id)

    async def get(self, job_id: str) -> Job:
        job = await self._require(job_id)
        return await self._served(job_view(job, await self._runs.summary(job)))

    async def _served(self, view: Job) -> Job:
        """The view, saying whether the catalog knows an endpoint serving its task."""
        if self._catalog is None:
            return view
        served = await self._catalog.served(view.task.queue, view.task.name)
        return view.model_copy(update={"served": served})

    async def page(self, cursor: str | None, limit: int) -> JobPage:
        offset = _offset(cursor)
        ids, more = await self._store.page(offset, limit)
        jobs = [job for job in await self._store.get_many(ids) if job is not None]  # not deleted
        summaries = await self._runs.summaries(jobs)
        items = [
            await self._served(job_view(job, last))
            for job, last in zip(jobs, summaries, strict=True)
        ]
        return JobPage(items=items, next_cursor=str(offset + len(ids)) if more else None)

    async def replace(self, job_id: str, spec: JobCreate) -> Job:
        job = await self._require(job_id)
        previous = definition(job)
        await self._check(spec)
        now = self._clock.now_ms()
        found = new_definition(spec, now, previous)
        next_ms = _next(found, now)
        if (found.schedule, found.active) == (previous.schedule, previous.active):
            next_ms = job.next_ms  # unchanged timing: a due firing stays due
        if not await self._store.save(job_id, encode(found), next_ms, now, create=False):
            raise JobNotFound(job_id)
        return await self.get(job_id)

    async def patch(self, job_id: str, patch: JobPatch) -> Job:
        current = definition(await self._require(job_id))
        fields: dict[str, Any] = current.model_dump(
            exclude={"created_ms", "updated_ms", "anchor_ms"}
        )
        given = patch.model_dump(include=patch.model_fields_set)
        fields.update({k: v for k, v in given.items() if v is not None or k in _NULLABLE})
        return await self.replace(job_id, JobCreate.model_validate(fields))

    async def delete(self, job_id: str) -> None:
        if not await self._store.delete(job_id):
            raise JobNotFound(job_id)

    async def clone(self, job_id: str) -> Job:
        """A copy of the job's definition, inactive (so it does not fire beside the original
        until someone turns it on)."""
        found = definition(await self._require(job_id))
        copy = JobCreate.model_validate(
            {
                **found.model_dump(exclude={"created_ms", "updated_ms", "anchor_ms"}),
                "title": f"{found.title} (copy)"[:200],
                "active": False,
            }
        )
        return await self.create(copy)

    async def preview(self, job_id: str, count: int) -> FireTimes:
        """The next ``count`` fire times, from now (or from the stored next one, if due)."""
        job = await self._require(job_id)
        found = definition(job)
        if found.schedule is None or not found.active:
            return FireTimes(timezone=timezone_of(found.schedule), items=[])
        after = self._clock.now_ms()
        if job.next_ms is not None:
            after = min(after, job.next_ms - 1)
        times = next_fire_times(found.schedule, after, count, anchor_ms=found.anchor_ms)
        return FireTimes(
            timezone=timezone_of(found.schedule), items=[to_datetime(t) for t in times]
        )

    async def _require(self, job_id: str) -> StoredJob:
        job = await self._store.get(job_id)
        if job is None:
            raise JobNotFound(job_id)
        return job

    async def _check(self, spec: JobCreate) -> None:
        problems = []
        if isinstance(spec.schedule, CrontabSchedule):
            try:
                cron_trigger(spec.schedule)
            except ValueError as e:
                name, _, reason = str(e).partition(": ")
                problems.append(FieldProblem(f"schedule.{name}", reason))
        if problems:
            raise ValidationFailed(problems)
        await self._check_task(spec.task.queue, spec.task.name, spec.args, "args")

    async def _check_task(self, queue: str, name: str, payload: JsonValue, field: str) -> None:
        """The one place a job's (or run's) task is checked: its queue must be registered
        (404, as for an enqueue), its task name must be one an endpoint reported when the
        queue refuses unknown names (422 naming ``task.name``, as for an enqueue), and its args
        must fit the schema the task catalog holds for the name (422 naming ``field``)."""
        stored = await self._queues.get(queue)
        if stored is None:
            raise QueueNotFound(queue)
        if self._catalog is not None:
            await self._catalog.validate(
                queue,
                name,
                payload,
                field,
                unknown_tasks=stored.policy.unknown_tasks,
                name_field="task.name",
            )

    # --- runs ---------------------------------------------------------------------------------

    async def runs_page(
        self, job_id: str, status: RunStatus | None, cursor: str | None, limit: int
    ) -> RunPage:
        """Runs newest first. With ``status``, up to :data:`FILTER_SCAN` runs are read per
        call: a page may be short and still have a next cursor."""
        job = await self._require(job_id)
        offset = _offset(cursor)
        items: list[Run] = []
        step = limit if status is None else max(limit, 200)
        scanned = 0
        while True:
            rows, more = await self._store.runs(job_id, offset, step)
            views = await self._runs.views(job_id, rows, pending=job.pending_ids)
            taken = 0
            for view in views:
                taken += 1
                if status is None or view.status is status:
                    items.append(view)
                    if len(items) == limit:
                        break
            if taken < len(views):
                offset += taken
                more = True
                break
            offset += step
            scanned += step
            if not more or len(items) == limit or scanned >= FILTER_SCAN:
                break
        return RunPage(items=items, next_cursor=str(offset) if more else None)

    async def job_of_run(self, run_id: str) -> str | None:
        """The id of the job the run belongs to, None when no job has such a run."""
        return await self._store.job_of_run(run_id)

    async def run(self, job_id: str, run_id: str) -> Run:
        job = await self._require(job_id)
        record = await self._store.run(job_id, run_id)
        if record is None:
            raise RunNotFound(job_id, run_id)
        (view,) = await self._runs.views(job_id, [(run_id, record)], pending=job.pending_ids)
        return view

    async def run_now(self, job_id: str, body: RunCreate, started_by: str) -> Run:
        job = await self._require(job_id)
        found = definition(job)
        queue = body.queue or found.task.queue
        args_given = "args" in body.model_fields_set
        payload = body.args if args_given else found.args
        await self._check_task(queue, found.task.name, payload, "args")
        request = RunRequest(
            started_by,
            args=body.args,
            args_given=args_given,
            queue=queue,
            start_at=body.start_at,
            title=body.title,
            note=body.note,
        )
        return await self._start(job, request)

    async def restart(self, job_id: str, run_id: str, started_by: str) -> Run:
        """A new run with the old one's args and queue; the old one is kept."""
        job = await self._require(job_id)
        record = await self._store.run(job_id, run_id)
        if record is None:
            raise RunNotFound(job_id, run_id)
        await self._check_task(record["queue"], record["name"], record.get("args"), "args")
        request = RunRequest(
            started_by,
            args=record.get("args"),
            args_given=True,
            queue=record["queue"],
            title=record["title"],
            note=f"restart of run {run_id}",
        )
        return await self._start(job, request)

    async def _start(self, job: StoredJob, request: RunRequest) -> Run:
        _, run_id = await self._runs.start(job, request, self._clock.now_ms())
        assert run_id is not None  # a manual run is never refused
        return await self.run(job.id, run_id)

    async def stop(self, job_id: str, run_id: str) -> Run:
        """Cancel the run's task: at once while pending, cooperatively while running."""
        run = await self.run(job_id, run_id)
        if run.status.finished:
            raise TaskFinished(f"run '{run_id}' already ended as {run.status.value}")
        try:
            await self._tasks.cancel(run.queue, run.task_id)
        except TaskNotFound as e:
            raise TaskFinished(f"run '{run_id}' has no task left to stop") from e
        return await self.run(job_id, run_id)

    async def delete_run(self, job_id: str, run_id: str) -> None:
        run = await self.run(job_id, run_id)
        if not run.status.finished:
            raise RunActive(f"run '{run_id}' is {run.status.value}: stop it first")
        if not await self._store.delete_run(job_id, run_id):
            raise RunNotFound(job_id, run_id)

    async def logs(self, job_id: str, run_id: str) -> LogPage:
        run = await self.run(job_id, run_id)
        try:
            return await self._logs.logs_page(run.queue, run.task_id, None, RUN_LOG_LINES)
        except TaskNotFound:
            return LogPage(items=[])


RUN_LOG_LINES = 1000  # the first lines kept; GET /v1/tasks/{id}/logs pages through all


def _next(found: Definition, now_ms: int) -> int | None:
    if not found.active:
        return None
    return next_fire_time(found.schedule, now_ms, anchor_ms=found.anchor_ms)
