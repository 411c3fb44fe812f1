"""Operators' tools: scheduled and running listings, dead letters and resubmits, cleaning, logs."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal, Self

from pydantic import ConfigDict, Field, WithJsonSchema, model_validator

from sdk.wire.base import (
    InputModel,
    Label,
    OutputModel,
    QueueName,
    Seconds,
    TaskId,
    TaskName,
    Timestamp,
)
from sdk.wire.pushes import LogLine
from sdk.wire.tasks import TaskState


class ScheduledTask(OutputModel):
    """A task waiting for its time: delayed by its producer, or backing off before a retry."""

    id: str
    name: str
    due_at: datetime
    kind: Literal["delayed", "retry"]
    attempt: int = Field(description="Attempts made so far (0 for a delayed task).")
    priority: int = 0
    owner: str | None = None
    error: str | None = Field(None, description="The last attempt's error, for a retry.")


class ScheduledPage(OutputModel):
    items: list[ScheduledTask]
    next_cursor: str | None = None


class RunningTask(OutputModel):
    id: str
    queue: str
    name: str
    attempt: int
    endpoint_id: str | None = None
    endpoint_url: str | None = None
    started_at: datetime
    elapsed: float = Field(description="Seconds since this attempt started.")
    last_heartbeat_at: datetime | None = None
    progress: float | None = None
    lease_expires_at: datetime | None = None
    stalled: bool = False
    owner: str | None = None


class RunningList(OutputModel):
    items: list[RunningTask]
    truncated: bool = Field(False, description="More tasks run than the limit returned.")


class DeadLetterFilter(InputModel):
    """Which dead tasks: every given field must match."""

    queue: QueueName | None = Field(None, description="One queue; every queue when absent.")
    name: TaskName | None = None
    version: Label | None = None
    owner: Label | None = None
    since: Timestamp | None = Field(None, description="Died at or after this time.")
    until: Timestamp | None = Field(None, description="Died before this time.")


class ResubmitRequest(InputModel):
    """Body of ``POST /v1/deadletters/resubmit``: give ``ids`` or ``filter``, not both."""

    model_config = ConfigDict(
        json_schema_extra={  # exactly one of ids and filter, given and not null
            "if": {"required": ["ids"], "properties": {"ids": {"type": "array"}}},
            "then": {"not": {"required": ["filter"], "properties": {"filter": {"type": "object"}}}},
            "else": {"required": ["filter"], "properties": {"filter": {"type": "object"}}},
        }
    )

    ids: list[TaskId] | None = Field(None, min_length=1, max_length=1000)
    filter: DeadLetterFilter | None = None
    limit: int = Field(1000, ge=1, le=1000, description="Most tasks resubmitted by a filter.")
    reset_attempts: bool = Field(
        True, description="Start the attempt count again (the history is kept either way)."
    )

    @model_validator(mode="after")
    def _ids_or_filter(self) -> Self:
        if (self.ids is None) == (self.filter is None):
            raise ValueError("give either ids or filter")
        return self


class Skipped(OutputModel):
    id: str
    reason: str


class ResubmitResult(OutputModel):
    resubmitted: list[str] = Field(description="Ids of the tasks queued again.")
    skipped: list[Skipped] = Field(
        default_factory=list, description="Ids given that were not dead letters, and why."
    )


_FINISHED_STATES = {"type": "string", "enum": ["succeeded", "failed", "dead", "cancelled"]}


class CleanRequest(InputModel):
    """Body of ``POST /v1/queues/{queue}/clean``: delete finished tasks now."""

    states: list[Annotated[TaskState, WithJsonSchema(_FINISHED_STATES)]] = Field(
        default_factory=lambda: [
            TaskState.SUCCEEDED,
            TaskState.FAILED,
            TaskState.DEAD,
            TaskState.CANCELLED,
        ],
        min_length=1,
        description="Finished states only.",
    )
    name: TaskName | None = None
    owner: Label | None = Field(None, description="Only tasks of this owner or tenant id.")
    older_than: Seconds = Field(0, description="Only tasks finished at least this long ago.")
    limit: int = Field(10_000, ge=1, le=100_000, description="Most tasks deleted by one call.")

    @model_validator(mode="after")
    def _finished_states(self) -> Self:
        if not all(s.finished for s in self.states):
            raise ValueError("states must be finished states: succeeded, failed, dead, cancelled")
        return self


_UNFINISHED_STATES = {
    "type": "string",
    "enum": ["queued", "scheduled", "waiting", "running"],
}


class CancelMatching(InputModel):
    """Body of ``POST /v1/queues/{queue}/tasks/cancel``: cancel the tasks in one unfinished
    state that match every filter given."""

    state: Annotated[TaskState, WithJsonSchema(_UNFINISHED_STATES)] = Field(
        TaskState.QUEUED, description="An unfinished state: queued, scheduled, waiting, running."
    )
    name: TaskName | None = None
    owner: Label | None = None
    limit: int = Field(1000, ge=1, le=1000, description="Most tasks cancelled by one call.")

    @model_validator(mode="after")
    def _unfinished_state(self) -> Self:
        if self.state.finished:
            raise ValueError("state must be unfinished: queued, scheduled, waiting, running")
        return self


class CancelledTasks(OutputModel):
    """What a bulk cancel did, each task counted by what its own cancel did (not by the state
    the filter saw it in: a task may be claimed, or end, during the call)."""

    cancelled: list[str] = Field(
        description="Ids of the tasks cancelled at once: they were queued, scheduled or waiting "
        "and are removed, ended `cancelled`."
    )
    cancel_requested: list[str] = Field(
        default_factory=list,
        description="Ids of the tasks that were running (some may have been claimed during the "
        "call): each is asked to stop (its next heartbeat answer says so) and ends `cancelled` "
        "when its attempt ends, unless the attempt succeeds first (then `succeeded`).",
    )
    skipped: list[Skipped] = Field(
        default_factory=list,
        description="Tasks that matched but were not cancelled, and why: they ended meanwhile "
        "('already ended as <state>') or were deleted ('gone').",
    )


class CleanResult(OutputModel):
    deleted: int


class LogPage(OutputModel):
    """A page of a task's log lines, oldest first. Lines are numbered from the task's first
    line; the gateway keeps the last ``log_lines_kept`` of them (10,000 by default)."""

    items: list[LogLine]
    first_line: int = Field(
        0, description="Number of the first item among every line the task logged, from 0."
    )
    dropped: int = Field(
        0,
        description="How many of the task's earliest lines were dropped because it logged more "
        "than the gateway keeps: the lines numbered below this are gone.",
    )
    next_cursor: str | None = Field(
        None,
        description="Cursor of the next page; null when no stored line follows (a running task "
        "may log more: ask again with cursor = first_line + the number of items).",
    )


class SessionsEnded(OutputModel):
    """Answer of ``DELETE /v1/keys/{key_name}/sessions``."""

    key_name: str = Field(description="The API key's name (its 'name' in JOBGATE_API_KEYS).")
    ended: int = Field(description="Admin UI sessions of the key that were open and are ended.")
