"""Making runs and reading them: what the jobs API and the firing loop share.

A run is a task, enqueued through the task service into the job's queue with the run's id as
its task id, plus a run record in the job's keys (who started it, title, note, the args
snapshot, the fire time). Making one is three steps: ``begin_run`` claims the firing, stores
the record and puts the run in the job's pending set (one script), the task is enqueued,
``end_run`` takes the run out of the set. The task lives in its queue's keys, on another
Redis Cluster slot than the job's, so the enqueue cannot share a script with either. When a
gateway stops between the first two steps, the job's due time (``resume_ms`` after the oldest
pending run began) brings it back to the firing loop of some gateway, which enqueues the task
of every pending run that old from its record. The task id is the run id, fixed at the claim,
so a task that exists already counts as done and two gateways resuming the same run make one
task: a claimed firing, or a run now, always ends as exactly one task.

A run's status is read from its task (``run_status``). The task's record names its job, and
the script that ends it records the end for the run (:mod:`gateway.store.run_ends`), kept
beside the run record, which outlives the task's retention: a run whose task is gone reads as
that end says.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import JsonValue, ValidationError
from ulid import ULID

from gateway.core.errors import GatewayError, InvalidRequest, QueueNotFound, TaskExists
from gateway.services.tasks import TaskService
from gateway.store.jobs import Begun, JobStore, StoredJob
from gateway.store.records import to_datetime, to_ms
from gateway.store.run_ends import RunEnd, end_of
from sdk.wire import LAST_SUCCESSFUL_RUN, Run, RunStatus, RunSummary, TaskCreate, TaskState

logger = logging.getLogger(__name__)

SYSTEM = "system"
"""``started_by`` of the runs the schedule makes."""
TEMPLATE_SCAN = 1000
"""Most runs looked at (newest first) to resolve ``{{ last_successful_run }}``."""

_STATUS = {
    TaskState.SCHEDULED: RunStatus.PENDING,
    TaskState.WAITING: RunStatus.PENDING,
    TaskState.QUEUED: RunStatus.PENDING,
    TaskState.RUNNING: RunStatus.RUNNING,
    TaskState.SUCCEEDED: RunStatus.SUCCESS,
    TaskState.FAILED: RunStatus.FAILURE,
    TaskState.DEAD: RunStatus.FAILURE,
    TaskState.CANCELLED: RunStatus.STOPPED,
}


def run_status(
    record: dict[str, Any], task: dict[str, Any] | None, *, pending: bool = False
) -> tuple[RunStatus, str | None]:
    """A run's status and message, from its task's record or the end kept for it (None: the
    task is gone and no end is kept)."""
    if task is None:
        if "status" in record:
            return RunStatus(record["status"]), record.get("message")
        if pending:
            return RunStatus.PENDING, None
        return RunStatus.FAILURE, record.get("message") or "its task no longer exists"
    state = TaskState(task["state"])
    status = _STATUS[state]
    if status is RunStatus.SUCCESS and task.get("warn"):
        return RunStatus.WARNING, str(task["warn"])
    if status is RunStatus.STOPPED:
        return status, task.get("error") or "stopped"
    if status is RunStatus.FAILURE:
        return status, task.get("error")
    return status, None


def _ms(task: dict[str, Any] | None, record: dict[str, Any], field: str) -> datetime | None:
    value = (task or {}).get(field) or record.get(field)
    return to_datetime(value) if value else None


def run_view(
    job_id: str, run_id: str, record: dict[str, Any], task: dict[str, Any] | None, pending: bool
) -> Run:
    """The run as the API shows it: from its task while the task exists, then from the end
    kept beside its record (the same fields as the task's), then from the record alone."""
    if task is None:
        task = record.get("end")
    status, message = run_status(record, task, pending=pending)
    return Run(
        id=run_id,
        job_id=job_id,
        title=record["title"],
        note=record.get("note"),
        started_by=record["by"],
        status=status,
        message=message,
        args=record.get("args"),
        queue=record["queue"],
        task_id=run_id,
        fire_time=to_datetime(record["fire"]) if record.get("fire") else None,
        created_at=to_datetime(record["created"]),
        started_at=_ms(task, record, "first"),
        ended_at=_ms(task, record, "finished"),
        attempts=(task or {}).get("att", record.get("att", 0)),
    )


def _unkept(record: dict[str, Any], task: dict[str, Any]) -> bool:
    """Whether a finished task's end is newer than the end kept for its run: the script that
    ended it records it (through the outbox, delivered soon after), except for a task enqueued
    by an older version, which does not name its job."""
    kept = record.get("end")
    return kept is None or kept.get("finished", 0) < task.get("finished", 0)


@dataclass(frozen=True, slots=True)
class RunRequest:
    """What a new run is made of, besides its job."""

    started_by: str
    kind: str = "manual"  # 'fire' | 'release' | 'manual'
    fire_ms: int | None = None  # the fire time the run is for
    claim_ms: int | None = None  # the job's ``next`` as read, which the claim is keyed by (fire)
    next_ms: int | None = None  # the job's next fire time after this one (fire)
    action: str = "run"  # 'run' | 'skip' | 'hold'
    args: JsonValue = None
    args_given: bool = False  # use ``args`` instead of the job's default args
    queue: str | None = None
    start_at: datetime | None = None
    title: str | None = None
    note: str | None = None
    coalesced: int = 1  # how many fire times this run stands for


class Runs:
    """Makes runs (``start``, ``resume``) and reads them (``views``)."""

    def __init__(
        self, store: JobStore, tasks: TaskService, *, pause_after_claim_ms: int = 0
    ) -> None:
        self._store = store
        self._tasks = tasks
        # Tests only (JOBGATE_TEST_PAUSE_AFTER_CLAIM_MS): a window between the claim and the
        # enqueue in which a test kills the gateway.
        self._pause_after_claim_ms = pause_after_claim_ms
        # Runs begun here whose enqueue then failed (Redis went away in between), by job: the
        # firing loop resumes them as soon as Redis is back rather than after resume_ms.
        self._interrupted: dict[str, set[str]] = {}

    async def start(
        self, job: StoredJob, request: RunRequest, now_ms: int
    ) -> tuple[Begun, str | None]:
        """Claim the firing (or record the manual run) and enqueue its task; returns how the
        claim went and the run id (None when no run was made)."""
        definition = job.definition
        args = request.args
        if not request.args_given and request.action == "run":
            args = await self.resolve(job.id, definition.get("args"))
        run_id = str(ULID())
        record: dict[str, Any] = {
            "job": job.id,
            "title": request.title or definition["title"],
            "by": request.started_by,
            "queue": request.queue or definition["task"]["queue"],
            "name": definition["task"]["name"],
            "args": args,
            "created": now_ms,
        }
        optional = {
            "note": request.note,
            "fire": request.fire_ms,
            "run_at": None if request.start_at is None else to_ms(request.start_at),
            "coalesced": request.coalesced if request.coalesced > 1 else None,
            "notify": definition.get("notify"),
        }
        record.update({k: v for k, v in optional.items() if v is not None})
        begun = await self._store.begin_run(
            job.id,
            now_ms,
            kind=request.kind,
            fire_ms=job.held_ms if request.kind == "release" else request.claim_ms,
            last=job.last,
            next_ms=request.next_ms,
            action=request.action,
            run_id=run_id,
            record=record,
        )
        if begun is not Begun.OK or request.action != "run":
            return begun, None
        if self._pause_after_claim_ms:
            logger.warning(
                "test pause: run %s of job %s claimed; its enqueue waits %d ms",
                run_id,
                job.id,
                self._pause_after_claim_ms,
            )
            await asyncio.sleep(self._pause_after_claim_ms / 1000)
        try:
            await self._enqueue(job.id, run_id, record, now_ms)
        except Exception:
            self._interrupted.setdefault(job.id, set()).add(run_id)
            raise
        return begun, run_id

    def interrupted(self, job_id: str) -> frozenset[str]:
        """The job's runs begun here whose enqueue failed and that no resume finished since."""
        return frozenset(self._interrupted.get(job_id, ()))

    def interrupted_jobs(self) -> list[str]:
        """The jobs with runs :meth:`interrupted` here."""
        return list(self._interrupted)

    async def resume(self, job_id: str, run_ids: Sequence[str], now_ms: int) -> None:
        """Finish the enqueue of runs whose gateway stopped after beginning them."""
        records = await self._store.run_records([(job_id, run_id) for run_id in run_ids])
        for run_id in run_ids:
            record = records.get((job_id, run_id))
            if record is None:  # deleted meanwhile
                await self._store.end_run(job_id, run_id, now_ms)
            else:
                await self._enqueue(job_id, run_id, record, now_ms)

    async def _enqueue(self, job_id: str, run_id: str, record: dict[str, Any], now_ms: int) -> None:
        """Enqueue the run's task, then take the run out of the pending set. A refusal that
        another try would meet again (the queue is gone, the args no longer fit) fails the run;
        anything else (Redis unreachable) leaves it pending, to be resumed."""
        queue = record["queue"]
        try:
            spec = TaskCreate.model_validate(
                {
                    "id": run_id,
                    "name": record["name"],
                    "payload": record.get("args"),
                    "run_at": to_datetime(record["run_at"]) if record.get("run_at") else None,
                    # Completion callbacks: a task's notify URL, once tasks have one.
                    **(
                        {"notify": record["notify"]}
                        if record.get("notify") and "notify" in TaskCreate.model_fields
                        else {}
                    ),
                }
            )
            await self._tasks.enqueue(queue, [spec], batch=False, job=job_id)
        except TaskExists:
            pass  # a resumed enqueue that had been done
        except (QueueNotFound, InvalidRequest, ValidationError) as e:
            failed = dict(record, status=RunStatus.FAILURE.value, message=_reason(e))
            await self._store.settle_run(job_id, run_id, failed)
        await self._store.end_run(job_id, run_id, now_ms)
        runs = self._interrupted.get(job_id)
        if runs is not None:
            runs.discard(run_id)
            if not runs:
                del self._interrupted[job_id]

    async def resolve(self, job_id: str, args: JsonValue) -> JsonValue:
        """Default args with ``{{ last_successful_run }}`` (a whole string value) replaced."""
        if not _has_template(args):
            return args
        when = await self.last_success(job_id)
        value = None if when is None else when.isoformat().replace("+00:00", "Z")
        return _substitute(args, value)

    async def last_success(self, job_id: str) -> datetime | None:
        """Start time of the newest run that succeeded (with or without a warning)."""
        offset = 0
        while offset < TEMPLATE_SCAN:
            runs, more = await self._store.runs(job_id, offset, 100)
            for run in await self.views(job_id, runs, pending=frozenset()):
                if run.status in (RunStatus.SUCCESS, RunStatus.WARNING):
                    return run.started_at or run.created_at
            if not more:
                break
            offset += 100
        return None

    async def views(
        self,
        job_id: str,
        runs: Sequence[tuple[str, dict[str, Any]]],
        *,
        pending: frozenset[str],
    ) -> list[Run]:
        """The runs of one job as the API shows them (``pending``: the job's pending runs)."""
        return await self._views(
            [(job_id, run_id, record, run_id in pending) for run_id, record in runs]
        )

    async def _views(self, runs: Sequence[tuple[str, str, dict[str, Any], bool]]) -> list[Run]:
        """Runs ``(job id, run id, record, whether it is pending)`` as the API shows them, their
        tasks read in one round trip. A finished task whose end is not kept yet (its task was
        enqueued by an older version, or the outbox is not delivered yet) has it kept now."""
        tasks = await self._store.task_records([(r["queue"], run_id) for _, run_id, r, _ in runs])
        views = []
        unkept: list[RunEnd] = []
        for (job_id, run_id, record, pending), (task, _) in zip(runs, tasks, strict=True):
            view = run_view(job_id, run_id, record, task, pending)
            if task is not None and view.status.finished and _unkept(record, task):
                unkept.append((job_id, run_id, end_of(task)))
            views.append(view)
        await self._store.keep_ends(unkept)
        return views

    async def summary(self, job: StoredJob) -> RunSummary | None:
        (found,) = await self.summaries([job])
        return found

    async def summaries(self, jobs: Sequence[StoredJob]) -> list[RunSummary | None]:
        """The newest run of each job, read in two round trips for all of them."""
        newest = [(job.id, job.last) for job in jobs if job.last is not None]
        records = await self._store.run_records(newest)
        found = [
            (job.id, job.last, record, job.last in job.pending_ids)
            for job in jobs
            if job.last is not None and (record := records.get((job.id, job.last))) is not None
        ]
        views = {(v.job_id, v.id): v for v in await self._views(found)}
        return [_summary(views.get((job.id, job.last or ""))) for job in jobs]

    async def active(self, job: StoredJob) -> bool:
        """Whether the job's newest run is pending or running."""
        summary = await self.summary(job)
        return summary is not None and not summary.status.finished


def _reason(error: Exception) -> str:
    if isinstance(error, GatewayError):
        return error.detail or str(error)
    return f"its task cannot be made: {error}"


def _summary(view: Run | None) -> RunSummary | None:
    if view is None:
        return None
    return RunSummary(
        id=view.id,
        status=view.status,
        started_by=view.started_by,
        created_at=view.created_at,
        started_at=view.started_at,
        ended_at=view.ended_at,
    )


def _has_template(value: JsonValue) -> bool:
    if isinstance(value, str):
        return value == LAST_SUCCESSFUL_RUN
    if isinstance(value, list):
        return any(_has_template(v) for v in value)
    if isinstance(value, dict):
        return any(_has_template(v) for v in value.values())
    return False


def _substitute(value: JsonValue, replacement: str | None) -> JsonValue:
    if isinstance(value, str):
        return replacement if value == LAST_SUCCESSFUL_RUN else value
    if isinstance(value, list):
        return [_substitute(v, replacement) for v in value]
    if isinstance(value, dict):
        return {k: _substitute(v, replacement) for k, v in value.items()}
    return value
