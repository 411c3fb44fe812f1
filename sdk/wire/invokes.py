"""Invoking a child task (docs/durable.md, "Invoking a task"): the ``invoke`` callback's body,
the child a task's view shows it waits for, and the step's result its end records."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from sdk.wire.base import DAY, MAX_PRIORITY, InputModel, Json, OutputModel, QueueName, TaskName

MAX_INVOKE_WAIT = 365 * DAY


class InvokeIn(InputModel):
    """Body of the ``invoke`` callback: enqueue a child task and end this attempt until it
    ends (the task is pushed again with the child's end as the step's result) or ``timeout``
    seconds pass."""

    step: Annotated[str, StringConstraints(min_length=1, max_length=200)] = Field(
        description="The step the child's end is recorded as; once recorded, a later attempt "
        "finds it in the push's steps and goes past the invoke. The child's id is derived "
        "from this task's id and this name, so the same step always invokes the same child."
    )
    queue: QueueName | None = Field(
        None, description="The child's queue; absent: this task's queue."
    )
    name: TaskName = Field(description="The child's task name.")
    payload: Json = Field(None, description="The child's payload.")
    priority: int = Field(0, ge=-MAX_PRIORITY, le=MAX_PRIORITY, description="The child's.")
    max_attempts: int | None = Field(None, ge=1, le=1000, description="The child's.")
    timeout: float = Field(
        gt=0,
        le=MAX_INVOKE_WAIT,
        description="Seconds to wait for the child; then the step's result is "
        "{state: 'timed_out', id, error} (the child itself goes on).",
    )


class TaskChild(OutputModel):
    """The child task a waiting task invoked."""

    queue: str = Field(description="The child's queue.")
    id: str = Field(description="The child's id.")
