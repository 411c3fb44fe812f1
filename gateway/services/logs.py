"""A task's log lines, as pages of JSON or one JSON Lines stream.

Lines are numbered from the task's first line. The gateway keeps the last ``log_lines_kept``
(``lua/append_log.lua``); the earlier ones are dropped and counted, and every answer says how
many (``LogPage.dropped``, the ``jobgate-log-dropped`` header of a stream). A job's run is a
task, so its logs are served by these same two methods.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated

from pydantic import Field

from gateway.core.errors import FieldProblem, TaskNotFound, ValidationFailed
from gateway.store.tasks import TaskStore
from gateway.store.tasks.reads import LogSlice
from sdk.wire import LogLine, LogPage

LogCursor = Annotated[str, Field(pattern=r"^[0-9]{1,9}$")]
"""A log's cursor: the number of the next line to read."""
STREAM_PAGE = 500
"""Lines a stream reads from Redis at a time."""


@dataclass(frozen=True, slots=True)
class LogStream:
    """A task's log from a line on: how many earlier lines were dropped, and the lines (JSON
    Lines, read from Redis a page at a time as the consumer takes them)."""

    dropped: int
    lines: AsyncIterator[bytes]


def _first(cursor: str | None) -> int:
    if cursor is None:
        return 0
    if not cursor.isdigit() or len(cursor) > 9:
        raise ValidationFailed([FieldProblem("cursor", "is not a cursor this API gave out")])
    return int(cursor)


class LogService:
    def __init__(self, tasks: TaskStore) -> None:
        self._tasks = tasks

    async def _slice(self, queue: str, task_id: str, first: int, count: int) -> LogSlice:
        found = await self._tasks.log_page(queue, task_id, first, count)
        if found is None:
            raise TaskNotFound(task_id)
        return found

    async def logs_page(self, queue: str, task_id: str, cursor: str | None, limit: int) -> LogPage:
        """Up to ``limit`` lines from the cursor (the first kept line when it points at
        dropped ones)."""
        found = await self._slice(queue, task_id, _first(cursor), limit)
        first = max(_first(cursor), found.dropped)
        after = first + len(found.lines)
        return LogPage(
            items=[LogLine.model_validate_json(line) for line in found.lines],
            first_line=first,
            dropped=found.dropped,
            next_cursor=str(after) if after < found.dropped + found.kept else None,
        )

    async def stream_logs(self, queue: str, task_id: str, cursor: str | None) -> LogStream:
        """Every stored line from the cursor as JSON Lines. The task is looked up (404) before
        the stream starts; the lines are then read a page at a time, never all at once."""
        start = _first(cursor)
        head = await self._slice(queue, task_id, start, STREAM_PAGE)

        async def lines() -> AsyncIterator[bytes]:
            found, at = head, max(start, head.dropped)
            while True:
                if found.lines:
                    yield ("\n".join(found.lines) + "\n").encode()
                if len(found.lines) < STREAM_PAGE:
                    return
                at += len(found.lines)
                found = await self._slice(queue, task_id, at, STREAM_PAGE)

        return LogStream(head.dropped, lines())
