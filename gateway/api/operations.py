"""Routes for operators: dead letters (search, bulk resubmit), scheduled and running tasks, and
cleaning finished tasks now."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ValidationError

from gateway.api.body import field_problems
from gateway.api.routing import QUEUE, Call, Operation, Param
from gateway.auth import Access
from gateway.errors import FieldProblem, ValidationFailed
from sdk.wire import (
    CleanRequest,
    CleanResult,
    DeadLetterFilter,
    ResubmitRequest,
    ResubmitResult,
    RunningList,
    ScheduledPage,
    TaskPage,
)

TIME_EXAMPLE = "'2030-01-01T00:00:00Z'"


def _problem(name: str, reason: str) -> ValidationFailed:
    return ValidationFailed([FieldProblem(name, reason)])


def query_time(call: Call, name: str) -> datetime | None:
    """An RFC 3339 date-time with its timezone, or a 422 naming the parameter."""
    raw = call.query(name)
    if raw is None:
        return None
    try:
        when = datetime.fromisoformat(raw)
    except ValueError:
        when = None
    if when is None or when.tzinfo is None:
        raise _problem(name, f"must be an RFC 3339 date-time with a timezone, e.g. {TIME_EXAMPLE}")
    return when


def query_int(call: Call, name: str, low: int, high: int, default: int) -> int:
    raw = call.query(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        raise _problem(name, f"must be a whole number from {low} to {high}")
    return value


def query_filter(call: Call, names: tuple[str, ...]) -> DeadLetterFilter:
    """The query parameters ``names`` checked as the dead-letter filter declares them (queue
    and task names, version and owner labels, times)."""
    fields: dict[str, object] = {n: call.query(n) for n in names if call.query(n) is not None}
    for name in ("since", "until"):
        if name in names:
            fields[name] = query_time(call, name)
    try:
        return DeadLetterFilter.model_validate(fields)
    except ValidationError as e:
        raise ValidationFailed(field_problems(e)) from e


async def search_dead_letters(call: Call) -> BaseModel:
    f = query_filter(call, ("queue", "name", "version", "owner", "since", "until"))
    limit = query_int(call, "limit", 1, 1000, 100)
    return await call.services.operations.dead_letters(f, limit, call.query("cursor"))


async def resubmit_dead_letters(call: Call) -> BaseModel:
    return await call.services.operations.resubmit(call.body)


async def list_scheduled(call: Call) -> BaseModel:
    limit = query_int(call, "limit", 1, 500, 100)
    return await call.services.operations.scheduled(call.queue, limit, call.query("cursor"))


async def list_running(call: Call) -> BaseModel:
    f = query_filter(call, ("queue", "owner"))
    limit = query_int(call, "limit", 1, 5000, 500)
    return await call.services.operations.running(f.queue, f.owner, limit)


async def clean_queue(call: Call) -> BaseModel:
    return await call.services.operations.clean(call.queue, call.body)


def _limit(high: int, default: int) -> Param:
    schema = {"type": "integer", "minimum": 1, "maximum": high, "default": default}
    return Param("limit", "query", "Most items returned.", schema)


CURSOR = Param("cursor", "query", "The next_cursor of the previous page.")
ANY_QUEUE = Param(
    "queue",
    "query",
    "One queue; every registered queue when absent.",
    {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"},
)
OWNER = Param("owner", "query", "Only tasks of this owner (tenant) id.")
DEAD_LETTER_PARAMS = (
    ANY_QUEUE,
    Param("name", "query", "Only tasks of this task name."),
    Param("version", "query", "Only tasks of this version."),
    OWNER,
    Param(
        "since",
        "query",
        f"Died at or after this RFC 3339 time, e.g. {TIME_EXAMPLE}.",
        {"type": "string", "format": "date-time"},
    ),
    Param(
        "until",
        "query",
        "Died before this RFC 3339 time.",
        {"type": "string", "format": "date-time"},
    ),
    _limit(1000, 100),
    CURSOR,
)

OPERATIONS = [
    Operation(
        "GET",
        "/v1/deadletters",
        "Search dead tasks, each with every attempt",
        "operations",
        Access.READ,
        search_dead_letters,
        response=TaskPage,
        params=DEAD_LETTER_PARAMS,
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
        params=(QUEUE, _limit(500, 100), CURSOR),
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
        params=(ANY_QUEUE, OWNER, _limit(5000, 500)),
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
]
