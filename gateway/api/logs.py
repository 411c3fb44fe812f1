"""Routes for a task's log lines: pages of JSON, or a JSON Lines stream with
``Accept: application/jsonl``."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from gateway.api.routing import TASK_ID, Call, Operation, Param
from gateway.security.auth import Access
from gateway.services.logs import LogCursor, LogStream
from sdk.wire import LogPage

JSONL = "application/jsonl"
DROPPED_HEADER = "jobgate-log-dropped"


def wants_jsonl(request: Request) -> bool:
    """Whether the client asked for JSON Lines (``Accept: application/jsonl``)."""
    return JSONL in request.headers.get("accept", "")


def jsonl_response(stream: LogStream) -> Response:
    """A log stream as a streamed JSON Lines answer; the header says how many of the earliest
    lines were dropped."""
    return StreamingResponse(
        stream.lines, media_type=JSONL, headers={DROPPED_HEADER: str(stream.dropped)}
    )


async def task_logs(call: Call) -> BaseModel | Response:
    cursor = call.param(LOG_CURSOR)
    if wants_jsonl(call.request):
        stream = await call.services.logs.stream_logs(call.queue, call.task_id, cursor)
        return jsonl_response(stream)
    return await call.services.logs.logs_page(
        call.queue, call.task_id, cursor, call.param(LOG_LIMIT)
    )


LOG_CURSOR = Param(
    "cursor",
    "query",
    "The next_cursor of the previous page (a line number); from the first kept line when absent.",
    LogCursor,
)
LOG_LIMIT = Param(
    "limit",
    "query",
    "Page size (JSON answers; a stream sends every line from the cursor on).",
    Annotated[int, Field(ge=1, le=10_000)],
    default=1000,
)

OPERATIONS = [
    Operation(
        "GET",
        "/v1/tasks/{task_id}/logs",
        "Read a task's log lines",
        "tasks",
        Access.READ,
        task_logs,
        response=LogPage,
        params=(TASK_ID, LOG_CURSOR, LOG_LIMIT),
        errors=(404,),
        stream=JSONL,
        description="Pages of JSON by default; with 'Accept: application/jsonl', every stored "
        f"line from the cursor on as JSON Lines, streamed, with a '{DROPPED_HEADER}' header. "
        "The gateway keeps a task's last log_lines_kept lines (10,000 by default): 'dropped' "
        "says how many earlier ones are gone.",
    ),
]
