"""The push protocol: what the gateway POSTs to a worker, its answers, and the callbacks."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import Field, JsonValue

from sdk.wire.base import (
    InputModel,
    Json,
    OutputModel,
    PositiveSeconds,
    Seconds,
    Timestamp,
)
from sdk.wire.tasks import TaskState

MAX_STEPS_BYTES = 1024 * 1024
"""Most bytes a task's recorded steps may take, as stored (their JSON list)."""
MAX_STEP_NAME = 200


class PushStep(OutputModel):
    """A durable step a previous attempt recorded, as the push body carries it."""

    name: str
    result: JsonValue = None
    attempt: int = Field(description="The attempt that recorded it.")
    recorded_ms: int = Field(description="When it was recorded, in ms since the Unix epoch.")
    wait: JsonValue = Field(
        None,
        description="Set on the step a wait recorded: {kind, by, since_ms, event | queue and "
        "id} (what it waited for, what ended it); a worker may ignore it.",
    )


MAX_PASSED_RESULTS = 1024 * 1024
"""The most bytes of dependencies' results (their JSON, summed) one push carries; a result
that would go past it is sent as ``{"id": ..., "result": null, "truncated": true}``."""


class PassedResult(OutputModel):
    """One dependency's result, handed to a task enqueued with ``pass_results``."""

    id: str
    result: JsonValue = Field(
        None, description="Its result; null when it is gone (swept after retention) or truncated."
    )
    truncated: bool = Field(
        False, description="Left out: the results passed would have exceeded 1 MiB in all."
    )


class PushBody(OutputModel):
    """What the gateway POSTs to a worker endpoint."""

    id: str
    queue: str
    name: str
    payload: JsonValue = None
    attempt: int
    checkpoint: JsonValue = None
    lease_expires_at: datetime
    deadline: datetime = Field(description="Hard end of this attempt (max_run_time).")
    ready_at: datetime | None = Field(
        None,
        description="When the task became due (its run_at, or its creation): the worker's "
        "time-in-queue metric counts from it.",
    )
    steps: list[PushStep] | None = Field(
        None,
        description="The durable steps recorded by earlier attempts, in the order recorded "
        "(absent when there are none): a worker returns a step's recorded result instead of "
        "running it again (docs/durable.md).",
    )
    results: list[PassedResult] | None = Field(
        None,
        description="Only for a task enqueued with pass_results: its dependencies' results, "
        "in depends_on order.",
    )


class BatchItem(PushBody):
    """One task of a batch push: its push body, and what a single push carries in headers."""

    lease: str = Field(description="The lease token of this task's attempt.")
    callback: str = Field(description="The callback base URL of this task.")
    traceparent: str | None = Field(
        None, description="This task's W3C trace context (a single push has it in headers)."
    )
    tracestate: str | None = Field(None, description="Its W3C tracestate, when it has one.")


class PushBatch(OutputModel):
    """What the gateway POSTs to an endpoint whose ``batch_size`` is above 1 (with the
    ``jobgate-batch`` header giving the count). The signature covers the whole body."""

    tasks: list[BatchItem]


MAX_LEASE_TASKS = 100
MAX_LEASE_WAIT = 60.0


class LeaseRequest(InputModel):
    """Body of ``POST /v1/queues/{queue}/leases``: a pull worker asking for tasks. The answer
    is a :class:`PushBatch` (possibly empty): the items a batch push would carry."""

    endpoint_id: str = Field(
        min_length=1, max_length=64, description="The pull endpoint the worker serves."
    )
    max_tasks: int = Field(1, ge=1, le=MAX_LEASE_TASKS, description="Most tasks to lease.")
    wait: float = Field(
        0.0,
        ge=0,
        le=MAX_LEASE_WAIT,
        description="Seconds to wait for a task when none can be leased at once (a long poll).",
    )


class BatchResult(OutputModel):
    """A worker's answer for one task of a batch: the status a single push would have got."""

    id: str
    status: int = Field(
        ge=100,
        le=599,
        description="200 done (result), 202 accepted (callbacks follow), 429/503 busy, "
        "410 gone, other 4xx failed, 5xx retried; as for a single push.",
    )
    result: Json = None
    warning: WarningText | None = None
    error: ErrorIn | None = None
    retry_after: Seconds | None = None
    task_failure: bool = Field(
        False,
        description="With an error status: the task itself failed (it raised), not the "
        "endpoint; retried by the queue's policy without counting against the endpoint's "
        "circuit breaker (a single push says so with the jobgate-task-failure header).",
    )


class BatchAnswer(OutputModel):
    """The worker's 200 answer to a batch push: one result per task; a task left out is
    retried like a push that got no answer."""

    results: list[BatchResult]


class HeartbeatIn(InputModel):
    progress: float | None = Field(None, ge=0, le=1, description="Fraction done, 0 to 1.")
    extend: PositiveSeconds | None = Field(
        None, description="Lease extension; the task's lease timeout when absent."
    )


class HeartbeatOut(OutputModel):
    cancel_requested: bool
    lease_expires_at: datetime


class CheckpointIn(InputModel):
    state: Json


class StepIn(InputModel):
    """Body of the ``step`` callback: a durable step's name and JSON result."""

    name: Annotated[str, Field(min_length=1, max_length=MAX_STEP_NAME)]
    result: Json = None


class SleepIn(InputModel):
    """Body of the ``sleep`` callback: end this attempt and push the task again at ``until``."""

    until: Timestamp = Field(description="When to push the task again (a past time: at once).")


class StepOut(OutputModel):
    recorded: bool = Field(
        description="False when a step of this name was recorded before: the first stays."
    )
    attempt: int = Field(description="The attempt that recorded the step kept.")
    cancel_requested: bool = Field(
        False,
        description="A cancel of the task was requested, as a heartbeat's answer says: stop "
        "the task (the step is recorded all the same).",
    )


class LogLine(InputModel):
    message: Annotated[str, Field(max_length=8192)]
    level: Annotated[str, Field(max_length=16)] = "info"
    at: Timestamp | None = None


class LogIn(InputModel):
    lines: list[LogLine] = Field(min_length=1, max_length=500)


WarningText = Annotated[str, Field(min_length=1, max_length=8192)]


class ResultIn(InputModel):
    result: Json = None
    warning: WarningText | None = Field(
        None, description="Succeeded, with this warning (a job's run then shows 'warning')."
    )


class ErrorIn(InputModel):
    """The error callback, and the JSON body of a worker's inline error answer."""

    error: Annotated[str, Field(max_length=65_536)]
    traceback: Annotated[str, Field(max_length=262_144)] | None = None
    retryable: bool = True
    retry_delay: Seconds | None = None


class CallbackAck(OutputModel):
    state: TaskState
