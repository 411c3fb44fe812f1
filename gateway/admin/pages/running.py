"""Running now: every running task, where it runs, for how long, its last heartbeat and
progress; stalled ones (silent past their heartbeat interval) flagged."""

from __future__ import annotations

from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.admin.web import Admin, Visit, checked
from gateway.core.errors import QueueNotFound
from sdk.wire import QueueName, RunningList

LIMIT = 500


async def running(visit: Visit) -> Response:
    queue = visit.query("queue")
    if queue is not None:
        queue = str(checked(QueueName, "queue", queue))
    unknown = None
    try:
        found = await visit.services.operations.running(queue, None, LIMIT)
    except QueueNotFound:  # a name typed in the picker
        found, unknown = RunningList(items=[]), queue
    return visit.render(
        "running.html",
        "_running.html",
        active="running",
        picked=queue,
        picker_placeholder="all queues",
        queue=queue,
        running=found,
        stalled=sum(1 for t in found.items if t.stalled),
        self_url=visit.here,
        unknown_queue=unknown,
        status=404 if unknown else 200,
    )


def routes(admin: Admin) -> list[BaseRoute]:
    return [Route("/running", admin.page(running), methods=["GET"])]
