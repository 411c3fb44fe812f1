"""Waits for an event and ``cancel_on`` (docs/durable.md, "Waiting for an event"): the ``wait``
callback's body, a task's ``cancel_on`` entries, and the wait a task's view shows."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import Field, StringConstraints

from sdk.wire.base import DAY, InputModel, Json, OutputModel
from sdk.wire.calls import TaskCall
from sdk.wire.events import EventName  # as POST /v1/events takes it
from sdk.wire.invokes import TaskChild

MAX_MATCH_FIELDS = 16
Match = Annotated[
    dict[Annotated[str, StringConstraints(min_length=1, max_length=128)], Json],
    Field(max_length=MAX_MATCH_FIELDS),
]
MAX_WAIT = 365 * DAY
MAX_STEP_NAME = 200  # as the step callback's (sdk.wire.pushes, which imports this module's users)


class WaitIn(InputModel):
    """Body of the ``wait`` callback: end this attempt until an event named ``event`` whose
    data matches ``match`` arrives (the task is pushed again with the event as the step's
    result) or ``timeout`` seconds pass (the step's result is ``null``)."""

    step: Annotated[str, StringConstraints(min_length=1, max_length=MAX_STEP_NAME)] = Field(
        description="The step the event (or null) is recorded as; once recorded, a later "
        "attempt finds it in the push's steps and goes past the wait."
    )
    event: EventName = Field(description="The event's name.")
    match: Match = Field(
        default_factory=dict,
        description="Equality on top-level fields of the event's data (JSON values); empty: "
        "any event of that name.",
    )
    timeout: float = Field(
        gt=0, le=MAX_WAIT, description="Seconds to wait; then the step's result is null."
    )
    lookback: float = Field(
        0,
        ge=0,
        le=MAX_WAIT,
        description="An event accepted up to this many seconds before the wait was recorded "
        "resumes it too (the oldest such event); 0: only events accepted after.",
    )


class CancelOn(InputModel):
    """One ``cancel_on`` entry of a task: an event that cancels it."""

    event: EventName = Field(description="The event's name.")
    match: Match = Field(
        default_factory=dict,
        description="Equality on top-level fields of the event's data; empty: any event of "
        "that name.",
    )


class TaskWait(OutputModel):
    """What a scheduled task waits for: an event (``ctx.wait_for_event``, the ``wait``
    callback), a child task it invoked (``ctx.invoke``, the ``invoke`` callback) or an HTTP
    call the gateway makes for it (``ctx.call``, the ``call`` callback)."""

    step: str = Field(description="The step the event (or the child's end) will be recorded as.")
    event: str | None = Field(None, description="The event's name (a wait for an event).")
    match: dict[str, Json] | None = Field(
        None, description="The fields of the event's data to match (a wait for an event)."
    )
    child: TaskChild | None = Field(None, description="The child task (a wait for a child).")
    call: TaskCall | None = Field(None, description="The HTTP call (a wait for a call).")
    until: datetime = Field(description="When the wait times out.")
