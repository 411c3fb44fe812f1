"""The queues page: depth by state, throughput over the last minutes, pause and resume."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.admin.web import PREFIX, Admin, Visit, checked
from gateway.services.activity import Throughput
from sdk.wire import Queue, QueueName, QueuePolicyPatch, TaskState

WINDOWS = 10  # minutes of throughput shown
DEPTH_STATES = (
    TaskState.SCHEDULED,
    TaskState.WAITING,
    TaskState.QUEUED,
    TaskState.RUNNING,
)
DONE_STATES = (TaskState.SUCCEEDED, TaskState.FAILED, TaskState.DEAD, TaskState.CANCELLED)


@dataclass(frozen=True, slots=True)
class Bar:
    """One window of the throughput chart, in the chart's SVG units."""

    x: int
    height: int
    count: int
    failed: int


def bars(throughput: Throughput, *, height: int = 30, width: int = 8) -> list[Bar]:
    """The chart of tasks ended per window, scaled to the busiest window."""
    ended = throughput.ended()
    failed = [
        f + d
        for f, d in zip(
            throughput.finished[TaskState.FAILED], throughput.finished[TaskState.DEAD], strict=True
        )
    ]
    top = max(ended, default=0) or 1
    return [
        Bar(i * (width + 2), max(1 if n else 0, round(n * height / top)), n, f)
        for i, (n, f) in enumerate(zip(ended, failed, strict=True))
    ]


@dataclass(frozen=True, slots=True)
class QueueRow:
    queue: Queue
    throughput: Throughput
    bars: list[Bar]


async def _rows(visit: Visit) -> list[QueueRow]:
    rows = []
    for queue in (await visit.services.queues.list()).items:
        throughput = await visit.services.activity.throughput(queue.name, windows=WINDOWS)
        rows.append(QueueRow(queue, throughput, bars(throughput)))
    return rows


async def queues(visit: Visit) -> Response:
    return visit.render(
        "queues.html",
        "_queues.html",
        active="queues",
        rows=await _rows(visit),
        depth_states=DEPTH_STATES,
        done_states=DONE_STATES,
        windows=WINDOWS,
    )


async def _set_paused(visit: Visit, paused: bool) -> Response:
    queue = checked(QueueName, "queue", visit.path("queue"))
    await visit.services.queues.patch(queue, QueuePolicyPatch(paused=paused))
    return visit.redirect(f"{PREFIX}/queues?notice={'paused' if paused else 'resumed'}")


async def pause(visit: Visit) -> Response:
    return await _set_paused(visit, True)


async def resume(visit: Visit) -> Response:
    return await _set_paused(visit, False)


def routes(admin: Admin) -> list[BaseRoute]:
    return [
        Route("/queues", admin.page(queues), methods=["GET"]),
        Route("/queues/{queue}/pause", admin.page(pause, change=True), methods=["POST"]),
        Route("/queues/{queue}/resume", admin.page(resume, change=True), methods=["POST"]),
    ]
