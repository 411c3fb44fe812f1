"""The pull route: a worker that cannot receive pushes leases tasks (``work:<queue>`` scope)."""

from __future__ import annotations

from starlette.responses import Response

from gateway.api.routing import QUEUE, Call, Operation
from gateway.security.auth import Access
from sdk.wire import LeaseRequest, PushBatch


async def lease_tasks(call: Call) -> Response:
    body = await call.services.pulls.lease(call.queue, call.body, gone=call.request.is_disconnected)
    return Response(body, 200, media_type="application/json")


OPERATIONS = [
    Operation(
        "POST",
        "/v1/queues/{queue}/leases",
        "Lease tasks for a pull worker (a long poll)",
        "pull",
        Access.WORK,
        lease_tasks,
        body=LeaseRequest,
        response=PushBatch,
        params=(QUEUE,),
        errors=(404,),
        description="Claims up to max_tasks ready tasks for the pull endpoint endpoint_id, "
        "under the same limits as pushes (queue and endpoint concurrency, rate limit, "
        "capabilities, priority), and answers with the items a batch push would carry: each "
        "task's push body with its lease token and callback URL. The tasks count as accepted at "
        "once: keep their leases alive with heartbeats and report through the callbacks, as for "
        "a push answered 202. When none can be leased, waits up to `wait` seconds for one; the "
        "answer may hold no task. 404: unknown queue or endpoint; 422: a push endpoint. Needs "
        "the admin scope or work:<pattern> matching the queue.",
    ),
]
