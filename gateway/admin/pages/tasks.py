"""Tasks: a queue's tasks by state (filtered by name and owner, paged with cursors), and one
task with its attempts, checkpoint, logs and result; cancel and retry."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlencode

from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.admin.timeline import pushes, timeline
from gateway.admin.web import PREFIX, Admin, Visit, checked
from gateway.core.errors import QueueNotFound
from gateway.services.tasks import OffsetCursor
from sdk.wire import (
    AttemptOutcome,
    Label,
    LogLine,
    QueueName,
    ResubmitRequest,
    Task,
    TaskId,
    TaskName,
    TaskState,
)

PAGE_SIZE = 50
STATES = tuple(TaskState)


def _filters(visit: Visit) -> dict[str, str]:
    """The filter fields given, checked as the JSON API checks them."""
    found: dict[str, str] = {}
    for name, kind in (
        ("queue", QueueName),
        ("state", TaskState),
        ("name", TaskName),
        ("owner", Label),
        ("cursor", OffsetCursor),
    ):
        value = visit.query(name)
        if value is not None:
            found[name] = str(checked(kind, name, value))
    return found


async def tasks(visit: Visit) -> Response:
    f = _filters(visit)
    queue = f.get("queue") or await visit.services.overview.first()
    state = TaskState(f.get("state", TaskState.QUEUED))
    filtered = "name" in f or "owner" in f
    found = unknown = None
    if queue is not None:
        try:
            found = await visit.services.tasks.search(
                queue,
                state,
                f.get("cursor"),
                PAGE_SIZE,
                owner=f.get("owner"),
                name=f.get("name"),
                total=filtered,
            )
        except QueueNotFound:  # a name typed in the picker
            unknown = queue
    query = {k: v for k, v in f.items() if k != "cursor"}
    if queue is not None:
        query["queue"] = queue
    next_url = None
    if found is not None and found.page.next_cursor is not None:
        next_url = f"{PREFIX}/tasks?{urlencode({**query, 'cursor': found.page.next_cursor})}"
    return visit.render(
        "tasks.html",
        "_tasks.html",
        active="tasks",
        queue=queue,
        picked=queue,
        picker_placeholder="queue name",
        state=state,
        states=STATES,
        name=f.get("name", ""),
        owner=f.get("owner", ""),
        page=found.page if found else None,
        searched=found if filtered else None,
        paged=("cursor" in f),
        first_url=f"{PREFIX}/tasks?{urlencode(query)}",
        next_url=next_url,
        self_url=visit.here,
        unknown_queue=unknown,
        status=404 if unknown else 200,
    )


LOG_LINES_SHOWN = 500  # the first ones kept; the API pages through the rest


def _task_id(visit: Visit) -> str:
    return str(checked(TaskId, "task id", visit.path("task_id").upper()))


@dataclass(frozen=True, slots=True)
class LogGroup:
    """The log lines written during one push (``attempt`` 0: before the first began)."""

    attempt: int
    running: bool
    lines: list[LogLine]


def by_attempt(task: Task, lines: Sequence[LogLine]) -> list[LogGroup]:
    """Log lines grouped by the push whose time they fall in (each line carries its time,
    stamped by the gateway when the worker gave none): a push's lines are those from its start
    to the next one's start. A push that spent no attempt (a durable sleep, busy, released)
    keeps its number, so pushes are told apart by their start, as on the timeline, and the
    running one is the push begun at the task's ``started_at``."""
    starts = sorted(pushes(task), key=lambda a: a.started_at)
    groups: dict[int, LogGroup] = {}
    for line in lines:
        index = -1  # before the first push
        for i, push in enumerate(starts):
            if line.at is not None and line.at >= push.started_at:
                index = i
        if index not in groups:
            begun = starts[index] if index >= 0 else None
            groups[index] = LogGroup(
                begun.number if begun else 0,
                begun is not None and begun.outcome is AttemptOutcome.RUNNING,
                [],
            )
        groups[index].lines.append(line)
    return [groups[i] for i in sorted(groups)]


async def task(visit: Visit) -> Response:
    task_id = _task_id(visit)
    queue = await visit.services.tasks.locate(task_id)
    found = await visit.services.tasks.get(queue, task_id)
    logs = await visit.services.logs.logs_page(queue, task_id, None, LOG_LINES_SHOWN)
    endpoints = await visit.services.queues.endpoints(queue)
    urls = {e.id: e.url or "pull" for e in endpoints.items}
    return visit.render(
        "task.html",
        "_task.html",
        active="tasks",
        task=found,
        logs=logs.items,
        log_groups=by_attempt(found, logs.items),
        endpoint_urls=urls,
        entries=timeline(found, datetime.now(UTC), urls),
    )


async def cancel(visit: Visit) -> Response:
    task_id = _task_id(visit)
    queue = await visit.services.tasks.locate(task_id)
    await visit.services.tasks.cancel(queue, task_id)
    if visit.form.get("back") == "running":  # cancelled from the running page
        return visit.redirect(f"{PREFIX}/running?notice=cancelled")
    return visit.redirect(f"{PREFIX}/tasks/{task_id}?notice=cancelled")


async def retry(visit: Visit) -> Response:
    task_id = _task_id(visit)
    result = await visit.services.operations.resubmit(ResubmitRequest(ids=[task_id]))
    n, skipped = len(result.resubmitted), len(result.skipped)
    return visit.redirect(f"{PREFIX}/tasks/{task_id}?notice=resubmitted&n={n}&skipped={skipped}")


def routes(admin: Admin) -> list[BaseRoute]:
    return [
        Route("/tasks", admin.page(tasks), methods=["GET"]),
        Route("/tasks/{task_id}", admin.page(task), methods=["GET"]),
        Route("/tasks/{task_id}/cancel", admin.page(cancel, change=True), methods=["POST"]),
        Route("/tasks/{task_id}/retry", admin.page(retry, change=True), methods=["POST"]),
    ]
