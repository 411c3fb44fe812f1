"""Routes for producers and operators: enqueue, read, wait for, list and cancel tasks."""

from __future__ import annotations

from typing import Annotated

import orjson
from pydantic import BaseModel, Field
from starlette.responses import Response

from gateway.api.prefer import wants_minimal
from gateway.api.routing import QUEUE, TASK_ID, Call, Link, Operation, Param, Reply
from gateway.core.errors import DuplicateTaskId, UnknownTaskName
from gateway.security.auth import Access
from gateway.services.enqueue.created import Created, answer_json
from gateway.services.tasks import MAX_WAIT, OffsetCursor
from gateway.telemetry.tracing import TraceHeaders
from sdk.wire import (
    HEADER_PREFER,
    HEADER_PREFERENCE_APPLIED,
    RETURN_MINIMAL,
    BatchCreate,
    BatchCreated,
    BatchReceipt,
    Label,
    Task,
    TaskCreate,
    TaskName,
    TaskPage,
    TaskReceipt,
    TaskState,
)

_APPLIED = {HEADER_PREFERENCE_APPLIED: RETURN_MINIMAL}


async def enqueue(call: Call) -> BaseModel | Reply | Response:
    (created,) = await call.services.tasks.enqueue_created(
        call.queue, [call.body], batch=False, trace=TraceHeaders.of(call.request.headers)
    )
    wait = call.param(WAIT)
    if wait > 0 and not created.finished:
        # Subscribed before it reads, so a task that ends in between is not missed.
        waited = await call.services.tasks.get(call.queue, created.id, wait=wait)
        task = waited.model_copy(update=_how(created))
        if not task.state.finished:
            return Reply(task, status=202)
        return task if created.stored_new else Reply(task, status=200)
    status = 201 if created.stored_new else 200
    if wait == 0 and _minimal(call):
        return _json(orjson.dumps(created.receipt_value()), status, _APPLIED)
    return _json(orjson.dumps(created.json_value()), status)


def _how(created: Created) -> dict[str, object]:
    """What the enqueue's answer says of how it went, to keep on the task read after a wait."""
    flow = created.flowed.flow if created.flowed is not None else None
    if flow and (flow.replaced or flow.throttled):
        return {"deduplicated": created.deduplicated, "flow": flow}
    return {"deduplicated": created.deduplicated}


async def enqueue_batch(call: Call) -> Response:
    created = await call.services.tasks.enqueue_created(
        call.queue, call.body.tasks, trace=TraceHeaders.of(call.request.headers)
    )
    if _minimal(call):
        return _json(answer_json(created, minimal=True), 201, _APPLIED)
    return _json(answer_json(created), 201)


def _minimal(call: Call) -> bool:
    return wants_minimal(call.request.headers.get(HEADER_PREFER))


def _json(content: bytes, status: int, headers: dict[str, str] | None = None) -> Response:
    """An answer the handler wrote itself (:mod:`gateway.services.enqueue.created`)."""
    return Response(content, status_code=status, headers=headers, media_type="application/json")


async def get_task(call: Call) -> BaseModel:
    return await call.services.tasks.get(call.queue, call.task_id, wait=call.param(WAIT))


async def list_tasks(call: Call) -> BaseModel:
    return await call.services.tasks.page(
        call.queue,
        call.param(STATE),
        call.param(CURSOR),
        call.param(LIMIT),
        owner=call.param(OWNER),
        name=call.param(NAME),
    )


async def cancel_task(call: Call) -> BaseModel:
    return await call.services.tasks.cancel(call.queue, call.task_id)


WAIT = Param(
    "wait",
    "query",
    f"Seconds to wait for the task to finish (long poll), at most {MAX_WAIT:g}.",
    Annotated[float, Field(ge=0, le=MAX_WAIT)],
    default=0.0,
)
STATE = Param("state", "query", "Which tasks to list.", TaskState, default=TaskState.QUEUED)
LIMIT = Param("limit", "query", "Page size.", Annotated[int, Field(ge=1, le=500)], default=50)
CURSOR = Param("cursor", "query", "The next_cursor of the previous page.", OffsetCursor)
OWNER = Param("owner", "query", "Only tasks of this owner (tenant).", Label)
NAME = Param("name", "query", "Only tasks of this name.", TaskName)
PREFER = Param(
    "Prefer",
    "header",
    "RFC 7240. 'return=minimal': each task is answered by its id, state and deduplicated "
    "only (TaskReceipt), with 'Preference-Applied: return=minimal'; GET /v1/tasks/{task_id} "
    "has the rest. Other preferences are ignored, and so is this one on an enqueue with wait.",
)

TASK_LINKS = tuple(
    Link(name, target, {"task_id": "$response.body#/id"})
    for name, target in (
        ("GetTask", "get_task"),
        ("CancelTask", "cancel_task"),
        ("TaskLogs", "task_logs"),
    )
)

OPERATIONS = [
    Operation(
        "POST",
        "/v1/queues/{queue}/tasks",
        "Enqueue a task",
        "tasks",
        Access.PRODUCE,
        enqueue,
        body=TaskCreate,
        response=Task,
        minimal=TaskReceipt,
        status=201,
        also=(202,),
        params=(QUEUE, WAIT, PREFER),
        errors=(404, 409, 429),
        problems=(UnknownTaskName,),
        description="201 with the new task; 200 with the earlier one when the dedup or "
        "singleton key matched it (deduplicated: true), with the pending task a debounce "
        "merged this enqueue into (flow.replaced: true), or with the task a throttle let "
        "through when it dropped this enqueue (flow.throttled: dropped; 429 when that task no "
        "longer exists). A depends_on or after_group naming nothing that exists is refused "
        "(422). With wait, the answer comes when the task "
        "has finished (201, or 200 when deduplicated, with its result) or when the wait runs "
        "out (202 with the task as it stands: it goes on, recorded like any other). With "
        "'Prefer: return=minimal' (and no wait) the answer is a TaskReceipt.",
        links=TASK_LINKS,
    ),
    Operation(
        "POST",
        "/v1/queues/{queue}/tasks/batch",
        "Enqueue many tasks: all are stored, or none",
        "tasks",
        Access.PRODUCE,
        enqueue_batch,
        body=BatchCreate,
        response=BatchCreated,
        minimal=BatchReceipt,
        status=201,
        params=(QUEUE, PREFER),
        errors=(404, 409, 429),
        problems=(DuplicateTaskId, UnknownTaskName),
        links=(Link("GetFirstTask", "get_task", {"task_id": "$response.body#/tasks/0/id"}),),
    ),
    Operation(
        "GET",
        "/v1/queues/{queue}/tasks",
        "List a queue's tasks in one state",
        "tasks",
        Access.READ,
        list_tasks,
        response=TaskPage,
        params=(QUEUE, STATE, LIMIT, CURSOR, OWNER, NAME),
        errors=(404,),
        description="Queued tasks in the order they will run; scheduled by due time; running "
        "by lease expiry; waiting by when they were enqueued; finished by when they ended. "
        "Items carry their result (succeeded tasks) but no attempt history, checkpoint or "
        "durable steps: GET /v1/tasks/{task_id} has those. With owner or name, up to 10,000 "
        "entries are scanned per call: a page may be short and still have a next_cursor.",
    ),
    Operation(
        "GET",
        "/v1/tasks/{task_id}",
        "Get a task with every attempt; optionally wait for it to finish",
        "tasks",
        Access.READ,
        get_task,
        response=Task,
        params=(TASK_ID, WAIT),
        errors=(404,),
        links=TASK_LINKS[1:],
    ),
    Operation(
        "POST",
        "/v1/tasks/{task_id}/cancel",
        "Cancel a task",
        "tasks",
        Access.PRODUCE,
        cancel_task,
        response=Task,
        params=(TASK_ID,),
        errors=(404, 409),
        description="A queued, scheduled or waiting task ends at once. A running one is asked "
        "to stop (cancel_requested): its next heartbeat answer says so, and its attempt's end "
        "decides: a success (a 2xx answer to the push, a result callback) ends it succeeded, "
        "as the work was done; any other end (an error, a release or sleep, a lease that ran "
        "out) ends it cancelled, not retried.",
    ),
]
