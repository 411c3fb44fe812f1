"""Routes for operators: dead letters (search, bulk resubmit), scheduled and running tasks, and
cleaning finished tasks now."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from gateway.api.routing import QUEUE, Call, Operation, Param
from gateway.security.auth import Access
from gateway.services.bulk import cancel_matching
from gateway.services.operations import DeadLetterCursor, ScheduledCursor
from sdk.wire import (
    CancelledTasks,
    CancelMatching,
    CleanRequest,
    CleanResult,
    DeadLetterFilter,
    Label,
    QueueName,
    ResubmitRequest,
    ResubmitResult,
    RunningList,
    ScheduledPage,
    TaskName,
    TaskPage,
    Timestamp,
)

TIME_EXAMPLE = "'2030-01-01T00:00:00Z'"


def query_filter(call: Call, params: tuple[Param, ...]) -> DeadLetterFilter:
    """The filter the query parameters ``params`` give (each checked as it is declared)."""
    return DeadLetterFilter(**{p.name: call.param(p) for p in params})


async def search_dead_letters(call: Call) -> BaseModel:
    f = query_filter(call, DEAD_LETTER_FILTER)
    limit = call.param(DEAD_LETTER_LIMIT)
    return await call.services.operations.dead_letters(f, limit, call.param(DEAD_LETTER_CURSOR))


async def resubmit_dead_letters(call: Call) -> BaseModel:
    return await call.services.operations.resubmit(call.body)


async def list_scheduled(call: Call) -> BaseModel:
    limit, cursor = call.param(SCHEDULED_LIMIT), call.param(SCHEDULED_CURSOR)
    return await call.services.operations.scheduled(call.queue, limit, cursor)


async def list_running(call: Call) -> BaseModel:
    f = query_filter(call, (ANY_QUEUE, OWNER))
    return await call.services.operations.running(f.queue, f.owner, call.param(RUNNING_LIMIT))


async def cancel_tasks(call: Call) -> BaseModel:
    return await cancel_matching(call.services.tasks, call.queue, call.body)


async def clean_queue(call: Call) -> BaseModel:
    return await call.services.operations.clean(call.queue, call.body)


def _limit(high: int, default: int) -> Param:
    limit = Annotated[int, Field(ge=1, le=high)]
    return Param("limit", "query", "Most items returned.", limit, default=default)


ANY_QUEUE = Param("queue", "query", "One queue; every registered queue when absent.", QueueName)
OWNER = Param("owner", "query", "Only tasks of this owner (tenant) id.", Label)
DEAD_LETTER_FILTER = (
    ANY_QUEUE,
    Param("name", "query", "Only tasks of this task name.", TaskName),
    Param("version", "query", "Only tasks of this version.", Label),
    OWNER,
    Param(
        "since",
        "query",
        f"Died at or after this RFC 3339 time, e.g. {TIME_EXAMPLE}.",
        Timestamp,
    ),
    Param("until", "query", "Died before this RFC 3339 time.", Timestamp),
)
DEAD_LETTER_LIMIT = _limit(1000, 100)
DEAD_LETTER_CURSOR = Param(
    "cursor", "query", "The next_cursor of the previous page.", DeadLetterCursor
)
SCHEDULED_LIMIT = _limit(500, 100)
SCHEDULED_CURSOR = Param(
    "cursor", "query", "The next_cursor of the previous page.", ScheduledCursor
)
RUNNING_LIMIT = _limit(5000, 500)

OPERATIONS = [
    Operation(
        "GET",
        "/v1/deadletters",
        "Search dead tasks, each with every attempt",
        "operations",
        Access.READ,
        search_dead_letters,
        response=TaskPage,
        params=(*DEAD_LETTER_FILTER, DEAD_LETTER_LIMIT, DEAD_LETTER_CURSOR),
        errors=(404, 422),
        description="Dead tasks of one queue or all, oldest death first (queues in name "
        "order), matching every filter given. Each item carries its whole attempt history "
        "with errors and stack traces.",
    ),
    Operation(
        "POST",
        "/v1/deadletters/resubmit",
        "Queue dead tasks again, by ids or by filter",
        "operations",
        Access.ADMIN,
        resubmit_dead_letters,
        body=ResubmitRequest,
        response=ResubmitResult,
        errors=(400, 404, 413, 422),
        description="Each dead task goes back to its queue's ready set at once, keeping its "
        "attempt history; with reset_attempts (the default) its attempt count starts again. "
        "Ids that are not dead letters are reported in 'skipped' with the reason.",
    ),
    Operation(
        "GET",
        "/v1/queues/{queue}/scheduled",
        "List tasks waiting for their time: delayed ones and retries in backoff",
        "operations",
        Access.READ,
        list_scheduled,
        response=ScheduledPage,
        params=(QUEUE, SCHEDULED_LIMIT, SCHEDULED_CURSOR),
        errors=(404, 422),
        description="By due time, soonest first.",
    ),
    Operation(
        "GET",
        "/v1/running",
        "List running tasks: where, for how long, and whether they stalled",
        "operations",
        Access.READ,
        list_running,
        response=RunningList,
        params=(ANY_QUEUE, OWNER, RUNNING_LIMIT),
        errors=(404, 422),
        description="Longest running first. A task is 'stalled' when it has been silent (no "
        "heartbeat, else since it started) for longer than its max_heartbeat_interval or its "
        "queue's.",
    ),
    Operation(
        "POST",
        "/v1/queues/{queue}/clean",
        "Delete finished tasks now",
        "operations",
        Access.ADMIN,
        clean_queue,
        body=CleanRequest,
        response=CleanResult,
        params=(QUEUE,),
        errors=(400, 404, 413, 422),
        description="Deletes tasks that ended in the given states (oldest first in each), "
        "finished at least older_than seconds ago, of one task name when given, up to limit; "
        "with their payloads, results, checkpoints, attempts and logs.",
    ),
    Operation(
        "POST",
        "/v1/queues/{queue}/tasks/cancel",
        "Cancel the tasks matching a filter",
        "operations",
        Access.ADMIN,
        cancel_tasks,
        body=CancelMatching,
        response=CancelledTasks,
        params=(QUEUE,),
        errors=(400, 404, 413, 422),
        description="Cancels up to limit tasks of the queue in one unfinished state (queued by "
        "default), of one task name and one owner when given, in the state's order: as "
        "POST /v1/tasks/{task_id}/cancel does for each. The answer counts each task by what "
        "its cancel did: 'cancelled' (it was queued, scheduled or waiting: ended at once), "
        "'cancel_requested' (it was running, perhaps claimed during the call: asked to stop, "
        "it ends cancelled unless its attempt succeeds first), 'skipped' (it had ended, or "
        "was deleted, meanwhile).",
    ),
]
