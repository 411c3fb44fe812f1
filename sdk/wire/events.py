"""Events and triggers: a named event published once per id, and the tasks it starts.

``POST /v1/events`` takes an :class:`EventCreate`; the gateway keeps the event (an
:class:`Event`) for its retention window, with what it did to tasks: the tasks its triggers
started, the waits it resumed, the tasks it cancelled (``cancel_on``). The same id twice is the
same event: the second answer (200) is the first's, and nothing is done twice.

A trigger (``PUT /v1/triggers/{trigger}``, :class:`TriggerCreate`) subscribes a task to an event
name: each accepted event of that name whose ``data`` matches the trigger's ``filter``
(equality of top-level fields) enqueues exactly one task, whose payload is
``{"kwargs": {"event": {"id", "name", "data"}}}``: a ``@task`` function takes it as its keyword
argument ``event``. docs/events.md is the guide.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, JsonValue

from sdk.wire.base import (
    MAX_PRIORITY,
    InputModel,
    Json,
    OutputModel,
    QueueName,
    TaskName,
    _pattern,
    matches,
)

EVENT_NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.:/-]{0,127}$"
EVENT_ID_PATTERN = r"^[A-Za-z0-9._:-]{1,128}$"
TRIGGER_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
EventName = Annotated[
    str,
    AfterValidator(
        matches(
            EVENT_NAME_PATTERN,
            "must be 1-128 characters of letters, digits, '_', '.', ':', '/' or '-', "
            "starting with a letter, digit or '_'",
        )
    ),
    _pattern(EVENT_NAME_PATTERN),
]
EventId = Annotated[
    str,
    AfterValidator(
        matches(
            EVENT_ID_PATTERN, "must be 1-128 characters of letters, digits, '.', '_', ':' or '-'"
        )
    ),
    _pattern(EVENT_ID_PATTERN),
]
TriggerId = Annotated[
    str,
    AfterValidator(
        matches(
            TRIGGER_ID_PATTERN,
            "must be 1-128 characters of letters, digits, '.', '_', ':' or '-', "
            "starting with a letter or digit",
        )
    ),
    _pattern(TRIGGER_ID_PATTERN),
]
EventData = dict[str, Json]
"""An event's data: a JSON object."""
EventState = Literal["pending", "done"]


class EventCreate(InputModel):
    """Body of ``POST /v1/events``."""

    name: EventName
    data: EventData = Field(
        default_factory=dict, description="A JSON object; triggers and waits match its fields."
    )
    id: EventId | None = Field(
        None,
        description="The producer's id for the event: sending it again (after a timeout, a "
        "refused connection) is the same event, answered 200 with what the first did. The "
        "gateway makes a ULID when absent.",
    )


class TouchedTask(OutputModel):
    """A task an event acted on: ``by`` names the trigger, the wait's step or ``cancel_on``."""

    queue: str
    id: str
    by: str


class Event(OutputModel):
    id: str
    name: str
    data: dict[str, JsonValue] = Field(default_factory=dict)
    accepted_ms: int = Field(description="When the gateway accepted it (ms since the epoch).")
    accepted_at: datetime
    state: EventState = Field(
        "done",
        description="pending while its tasks are being started (the recoverer finishes an "
        "event whose gateway stopped half way), then done.",
    )
    started: list[TouchedTask] = Field(default_factory=list, description="Triggers' tasks.")
    resumed: list[TouchedTask] = Field(default_factory=list, description="Waits it ended.")
    cancelled: list[TouchedTask] = Field(default_factory=list, description="By cancel_on.")
    cancel_requested: list[TouchedTask] = Field(
        default_factory=list, description="Running tasks asked to stop (cancel_on)."
    )


class EventPage(OutputModel):
    items: list[Event]
    next_cursor: str | None = None


class TriggerCreate(InputModel):
    """Body of ``PUT /v1/triggers/{trigger}``."""

    event: EventName = Field(description="The event name it starts a task for.")
    queue: QueueName = Field(description="A registered queue (404 otherwise).")
    task: TaskName = Field(description="The task's name.")
    filter: EventData = Field(
        default_factory=dict,
        description="Only events whose data has each of these top-level fields equal to the "
        "value given (JSON equality); empty: every event of the name.",
    )
    priority: int = Field(0, ge=-MAX_PRIORITY, le=MAX_PRIORITY, description="The task's.")
    description: str = Field("", max_length=1000)


class Trigger(OutputModel):
    id: str
    event: str
    queue: str
    task: str
    filter: dict[str, JsonValue] = Field(default_factory=dict)
    priority: int = 0
    description: str = ""
    created_at: datetime
    updated_at: datetime


class TriggerList(OutputModel):
    items: list[Trigger]
