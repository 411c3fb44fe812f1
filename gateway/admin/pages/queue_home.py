"""A queue's home page and its jobs: the header every tab of a queue keeps (counts, a warning
when nothing can take its queued tasks), its recent tasks of every state or of one, and the
jobs that enqueue into it. Endpoints and settings, the other tabs, are ``pages.queue``'s."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import quote, urlencode

from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.admin.web import PREFIX, Admin, Visit, checked
from gateway.services.overview import COUNTED_STATES
from gateway.services.tasks import OffsetCursor
from sdk.wire import CircuitState, Endpoint, Job, Queue, QueueName, Task, TaskState

RECENT = 50  # tasks shown under "all"
PAGE_SIZE = 50  # tasks a page in one state
JOB_PAGES = 20  # job listing pages walked for a queue's jobs (50 each)
ALL = "all"


def unserved(queued: int, endpoints: list[Endpoint]) -> str | None:
    """Why nothing can take a queue's ``queued`` tasks, None when something can (or none
    wait): no endpoint registered, every one disabled, or every enabled one's circuit open."""
    if not queued:
        return None
    enabled = [e for e in endpoints if e.enabled]
    if any(e.circuit is not CircuitState.OPEN for e in enabled):
        return None
    if not endpoints:
        return "no endpoint is registered"
    if not enabled:
        return "its endpoint is disabled" if len(endpoints) == 1 else "every endpoint is disabled"
    if len(enabled) == 1:
        return "its enabled endpoint's circuit is open"
    return "every enabled endpoint's circuit is open"


async def header(
    visit: Visit, queue: Queue, endpoints: list[Endpoint] | None = None
) -> dict[str, Any]:
    """What ``_queue_tabs.html`` needs beside the queue: the warning, the states counted."""
    if endpoints is None:
        endpoints = (await visit.services.queues.endpoints(queue.name)).items
    queued = queue.counts.get(TaskState.QUEUED, 0)
    return {"unserved": unserved(queued, endpoints), "counted_states": COUNTED_STATES}


def _base(queue: str) -> str:
    return f"{PREFIX}/queues/{quote(queue, safe='')}"


def _moment(task: Task) -> datetime:
    return task.finished_at or task.started_at or task.created_at


async def _recent(visit: Visit, queue: Queue) -> list[Task]:
    """The newest tasks of every state: the last ones of each finished state's index (ordered
    by finish time), the first ones of the others (in run order), newest first by the time
    they last moved."""
    found: list[Task] = []
    for state in COUNTED_STATES:
        n = queue.counts.get(state, 0)
        if not n:
            continue
        cursor = str(max(n - RECENT, 0)) if state.finished else None
        page = await visit.services.tasks.page(queue.name, state, cursor, RECENT)
        found.extend(page.items)
    found.sort(key=_moment, reverse=True)
    return found[:RECENT]


async def home(visit: Visit) -> Response:
    name = str(checked(QueueName, "queue", visit.path("queue")))
    queue = await visit.services.queues.get(name)
    picked = visit.query("state") or ALL
    state = None if picked == ALL else checked(TaskState, "state", picked)
    cursor = visit.query("cursor")
    if cursor is not None:
        checked(OffsetCursor, "cursor", cursor)
    here = _base(name)
    next_url = None
    if state is None:
        items = await _recent(visit, queue)
    else:
        page = await visit.services.tasks.page(name, state, cursor, PAGE_SIZE)
        items = page.items
        if page.next_cursor is not None:
            next_url = f"{here}?{urlencode({'state': state.value, 'cursor': page.next_cursor})}"
    return visit.render(
        "queue.html",
        "_queue_tasks.html",
        active="queues",
        queue=queue,
        tab="tasks",
        hour=None,
        **await header(visit, queue),
        state=state,
        states=COUNTED_STATES,
        items=items,
        shown_max=RECENT,
        paged=cursor is not None,
        first_url=f"{here}?{urlencode({'state': picked})}",
        next_url=next_url,
        self_url=visit.here,
    )


async def queue_jobs(visit: Visit) -> Response:
    """The jobs whose task goes to this queue (the job listing walked, up to 1,000 jobs)."""
    name = str(checked(QueueName, "queue", visit.path("queue")))
    queue = await visit.services.queues.get(name)
    found: list[Job] = []
    cursor: str | None = None
    walked = 0
    for walked in range(1, JOB_PAGES + 1):  # noqa: B007 - walked is shown
        page = await visit.services.jobs.page(cursor, 50)
        found.extend(j for j in page.items if j.task.queue == name)
        cursor = page.next_cursor
        if cursor is None:
            break
    return visit.render(
        "queue_jobs.html",
        active="queues",
        queue=queue,
        tab="jobs",
        hour=None,
        **await header(visit, queue),
        jobs=found,
        incomplete=cursor is not None,
        walked=walked * 50,
    )


def routes(admin: Admin) -> list[BaseRoute]:
    return [
        Route("/queues/{queue}", admin.page(home), methods=["GET"]),
        Route("/queues/{queue}/jobs", admin.page(queue_jobs), methods=["GET"]),
    ]
