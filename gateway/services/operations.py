"""Operator tools: search and resubmit dead letters, see what waits and what runs, clean.

Dead letters are found by walking each queue's ``done:dead`` index (oldest death first) over
the time window asked for, and matching the other fields on each task's record here. Pages of
several queues go through the queues in name order; a cursor names the queue, death time and id
of the last task shown, so tasks that leave meanwhile never make a page skip or repeat one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated

from pydantic import Field

from gateway.core.errors import FieldProblem, ValidationFailed
from gateway.store.clock import Clock
from gateway.store.operations import (
    Entry,
    OperationsStore,
    Position,
    Record,
    Resubmit,
    RunningRow,
)
from gateway.store.queues import QueueStore
from gateway.store.records import (
    attempt_from_record,
    is_stalled,
    seconds_to_ms,
    task_from_record,
    to_datetime,
    to_ms,
)
from sdk.wire import (
    QUEUE_NAME_PATTERN,
    CleanRequest,
    CleanResult,
    DeadLetterFilter,
    ResubmitRequest,
    ResubmitResult,
    RunningList,
    RunningTask,
    ScheduledPage,
    ScheduledTask,
    Skipped,
    Task,
    TaskPage,
    TaskState,
)

Window = tuple[int | None, int | None]


# --- pure helpers -----------------------------------------------------------------------------


_POSITION = r"([0-9]{1,15}):([0-7][0-9A-HJKMNP-TV-Z]{25})"
_QUEUE = QUEUE_NAME_PATTERN.removeprefix("^").removesuffix("$")
ScheduledCursor = Annotated[str, Field(pattern=f"^{_POSITION}$")]
"""A scheduled listing's cursor: ``<due ms>:<task id>`` of the last task shown."""
DeadLetterCursor = Annotated[str, Field(pattern=f"^({_QUEUE}):{_POSITION}$")]
"""A dead-letter search's cursor: ``<queue>:<death ms>:<task id>`` of the last task shown."""


def encode_cursor(position: Position, queue: str | None = None) -> str:
    text = f"{position.score}:{position.member}"
    return text if queue is None else f"{queue}:{text}"


def decode_cursor(cursor: str) -> tuple[str, Position]:
    """The queue (empty for a scheduled listing's cursor) and position a cursor names; the
    cursor's format is checked with its parameter (:data:`ScheduledCursor`,
    :data:`DeadLetterCursor`)."""
    queue, _, position = cursor.rpartition(":")
    queue, _, score = queue.rpartition(":")
    try:
        return queue, Position(int(score), position)
    except ValueError as e:
        problem = FieldProblem("cursor", "is not a cursor this API gave out")
        raise ValidationFailed([problem]) from e


def time_window(f: DeadLetterFilter) -> Window:
    """``since`` (inclusive) and ``until`` (exclusive) in ms."""
    return (
        None if f.since is None else to_ms(f.since),
        None if f.until is None else to_ms(f.until),
    )


def matches(record: Record | None, f: DeadLetterFilter) -> bool:
    """Whether a record is a dead task with every field the filter gives."""
    return (
        record is not None
        and record.get("state") == TaskState.DEAD
        and (f.name is None or record.get("name") == f.name)
        and (f.version is None or record.get("ver") == f.version)
        and (f.owner is None or record.get("own") == f.owner)
    )


def scheduled_view(entry: Entry) -> ScheduledTask:
    record = entry.record or {}
    attempt = int(record.get("att") or 0)
    retry = attempt > 0 or int(record.get("hist") or 0) > 0
    return ScheduledTask(
        id=entry.task_id,
        name=record.get("name", ""),
        due_at=to_datetime(entry.score),
        kind="retry" if retry else "delayed",
        attempt=attempt,
        priority=record.get("prio", 0),
        owner=record.get("own"),
        error=record.get("error"),
    )


def running_view(queue: str, row: RunningRow, now_ms: int) -> RunningTask:
    """A running task as operators see it. ``stalled`` follows the heartbeat interval the
    attempt is held to: the task's own, else its queue's when it was claimed (as the task view
    and the recoverer's stall handling do)."""
    r = row.record
    hb, exp = r.get("hb"), r.get("exp")
    return RunningTask(
        id=row.task_id,
        queue=queue,
        name=r["name"],
        attempt=r["att"],
        endpoint_id=r.get("ep"),
        endpoint_url=row.endpoint_url,
        started_at=to_datetime(r["started"]),
        elapsed=max(0, now_ms - r["started"]) / 1000,
        last_heartbeat_at=to_datetime(hb) if hb else None,
        progress=r.get("progress"),
        lease_expires_at=to_datetime(exp) if exp else None,
        stalled=is_stalled(r, now_ms),
        owner=r.get("own"),
    )


# --- the service ------------------------------------------------------------------------------


class OperationsService:
    """``on_ready(queue)`` is called when a resubmit put tasks of ``queue`` in its ready set, so
    this process's dispatcher pushes them at once."""

    def __init__(
        self,
        store: OperationsStore,
        queues: QueueStore,
        clock: Clock,
        *,
        on_ready: Callable[[str], None],
    ) -> None:
        self._store = store
        self._queues = queues
        self._clock = clock
        self._on_ready = on_ready

    async def _names(self, queue: str | None, holding: TaskState) -> list[str]:
        """``queue`` (which must exist), or every queue holding tasks in ``holding``."""
        if queue is None:
            return await self._store.holding(await self._queues.names(), holding)
        await self._queues.require(queue)
        return [queue]

    # --- dead letters ---------------------------------------------------------------------

    async def _matching(
        self, queue: str, f: DeadLetterFilter, window: Window, after: Position | None, want: int
    ) -> list[Entry]:
        """Up to ``want`` dead tasks of ``queue`` matching ``f``, oldest death first."""
        since, before = window
        found: list[Entry] = []
        while len(found) < want:
            batch = await self._store.dead(queue, since=since, before=before, after=after)
            found += [e for e in batch if matches(e.record, f)]
            if len(batch) < self._store.chunk:
                break
            after = Position(batch[-1].score, batch[-1].task_id)
        return found[:want]

    async def dead_letters(
        self, f: DeadLetterFilter, limit: int, cursor: str | None = None
    ) -> TaskPage:
        """Dead tasks matching ``f``, each with its whole attempt history."""
        window = time_window(f)
        start = None if cursor is None else decode_cursor(cursor)
        found: list[tuple[str, Entry]] = []
        for queue in await self._names(f.queue, TaskState.DEAD):
            if start is not None and queue < start[0]:
                continue
            after = start[1] if start is not None and queue == start[0] else None
            entries = await self._matching(queue, f, window, after, limit + 1 - len(found))
            found += [(queue, e) for e in entries]
            if len(found) > limit:
                break
        page = found[:limit]
        next_cursor = None
        if len(found) > limit:
            queue, last = page[-1]
            next_cursor = encode_cursor(Position(last.score, last.task_id), queue)
        return TaskPage(items=await self._full(page), next_cursor=next_cursor)

    async def _full(self, page: Sequence[tuple[str, Entry]]) -> list[Task]:
        """The tasks of a page as the task route shows them, in the page's order."""
        by_queue: dict[str, list[str]] = {}
        for queue, entry in page:
            by_queue.setdefault(queue, []).append(entry.task_id)
        tasks: dict[str, Task] = {}
        for queue, task_ids in by_queue.items():
            stored = await self._queues.get(queue)
            if stored is None:
                continue
            for task_id, full in zip(
                task_ids, await self._store.read_many(queue, task_ids), strict=True
            ):
                if full is not None:  # swept since it was found
                    tasks[task_id] = task_from_record(
                        queue,
                        task_id,
                        full.record,
                        stored.policy,
                        payload=full.payload,
                        result=full.result,
                        checkpoint=full.checkpoint,
                        history=[attempt_from_record(a) for a in full.history],
                    )
        return [tasks[e.task_id] for _, e in page if e.task_id in tasks]

    async def resubmit(self, request: ResubmitRequest) -> ResubmitResult:
        """Queue dead tasks again: the ids given, or up to ``limit`` matching the filter."""
        skipped: list[Skipped] = []
        by_queue: dict[str, list[str]] = {}
        if request.ids is not None:
            task_ids = list(dict.fromkeys(request.ids))
            for task_id, queue in zip(
                task_ids, await self._store.locate_many(task_ids), strict=True
            ):
                if queue is None:
                    skipped.append(Skipped(id=task_id, reason="not found"))
                else:
                    by_queue.setdefault(queue, []).append(task_id)
        else:
            assert request.filter is not None  # the model requires ids or filter
            f = request.filter
            window = time_window(f)
            left = request.limit
            for queue in await self._names(f.queue, TaskState.DEAD):
                entries = await self._matching(queue, f, window, None, left)
                if entries:
                    by_queue[queue] = [e.task_id for e in entries]
                left -= len(entries)
                if not left:
                    break
        resubmitted: list[str] = []
        now = self._clock.now_ms()
        for queue, task_ids in by_queue.items():
            results = await self._store.resubmit(
                queue, task_ids, now, reset_attempts=request.reset_attempts
            )
            moved = [r.task_id for r in results if r.outcome is Resubmit.OK]
            resubmitted += moved
            for r in results:
                if r.outcome is Resubmit.NOTASK:
                    skipped.append(Skipped(id=r.task_id, reason="not found"))
                elif r.outcome is Resubmit.NOTDEAD:
                    state = r.state.value if r.state else "unknown"
                    skipped.append(Skipped(id=r.task_id, reason=f"not dead (state {state})"))
            if moved:
                self._on_ready(queue)
        return ResubmitResult(resubmitted=resubmitted, skipped=skipped)

    # --- what waits, what runs --------------------------------------------------------------

    async def scheduled(self, queue: str, limit: int, cursor: str | None = None) -> ScheduledPage:
        """Tasks waiting for their time (delayed, or a retry's backoff), by due time."""
        await self._queues.require(queue)
        after = None
        if cursor is not None:
            _, after = decode_cursor(cursor)
        entries = await self._store.scheduled(queue, after=after, count=limit + 1)
        page = entries[:limit]
        next_cursor = None
        if len(entries) > limit:
            next_cursor = encode_cursor(Position(page[-1].score, page[-1].task_id))
        items = [
            scheduled_view(e)
            for e in page
            if e.record is not None and e.record.get("state") == TaskState.SCHEDULED
        ]
        return ScheduledPage(items=items, next_cursor=next_cursor)

    async def running(
        self, queue: str | None = None, owner: str | None = None, limit: int = 500
    ) -> RunningList:
        """Running tasks of one queue or all, longest running first."""
        now = self._clock.now_ms()
        items: list[RunningTask] = []
        for name in await self._names(queue, TaskState.RUNNING):
            for row in await self._store.running(name):
                if owner is None or row.record.get("own") == owner:
                    items.append(running_view(name, row, now))
        items.sort(key=lambda t: (t.started_at, t.id))
        return RunningList(items=items[:limit], truncated=len(items) > limit)

    # --- cleaning ---------------------------------------------------------------------------

    async def clean(self, queue: str, request: CleanRequest) -> CleanResult:
        """Delete finished tasks now: of the states given (in that order, oldest first in
        each), finished at least ``older_than`` seconds ago, of one name and one owner when
        given."""
        await self._queues.require(queue)
        finished_by = self._clock.now_ms() - seconds_to_ms(request.older_than)
        deleted = 0
        for state in dict.fromkeys(request.states):
            if deleted >= request.limit:
                break
            deleted += await self._store.clean(
                queue,
                state,
                finished_by,
                request.limit - deleted,
                name=request.name,
                owner=request.owner,
            )
        return CleanResult(deleted=deleted)
