"""A task's history as the gateway answers it: its attempts (each with its outcome and, for an
infrastructure failure, its kind), its recorded durable steps and its completion notice."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import Field, JsonValue

from sdk.wire.base import OutputModel
from sdk.wire.calls import StepCall
from sdk.wire.invokes import TaskChild


class AttemptOutcome(StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    ERROR = "error"  # retryable failure: 5xx, 408, timeout, connection error, error callback
    FAILED = "failed"  # not retryable: other 4xx, or the worker said so
    BUSY = "busy"  # 429/503: retried without spending an attempt
    GONE = "gone"  # 410: the endpoint is disabled, the task goes back untouched
    EXPIRED = "expired"  # the lease ran out with no answer
    STALLED = "stalled"  # heartbeats stopped and the queue's stall policy re-dispatched it
    RELEASED = "released"  # the worker gave the task back (shutting down): no attempt spent
    # A cancel was requested and the attempt ended any way but a success: the task ended
    # cancelled (the status, error and failure kind say how the attempt ended).
    CANCELLED = "cancelled"
    REDRIVEN = "redriven"  # not an attempt: the queue's redrive policy queued the dead task again


class FailureKind(StrEnum):
    """What kind of infrastructure failure ended an attempt; a queue's redrive policy resubmits
    dead tasks by it. Failures the worker reported itself (a refusal, a raised exception, an
    error callback) have no kind: resubmitting them would fail the same way."""

    TIMEOUT = "timeout"  # no answer within the push timeout, a 408, a lease that ran out, a stall
    SERVER_ERROR = "5xx"  # an answer >= 500 that is not the worker's own error report
    CONNECTION = "connection"  # no HTTP answer at all: refused, reset, DNS, TLS


class StepWait(OutputModel):
    """How a wait ended, on the step that recorded its end (docs/durable.md): what it waited
    for, since when, and what ended it."""

    kind: str = Field(
        description="What the task waited for: 'event', 'invoke' (a child task) or 'call' "
        "(an HTTP call the gateway made); a newer gateway may add kinds."
    )
    by: str = Field(
        description="What ended the wait: 'event' (a matching event), 'child' (the child's "
        "end), 'call' (the call's answer, or the gateway's failure to get one), 'timeout' (the "
        "wait's timeout came first); a newer gateway may add others."
    )
    since: datetime | None = Field(None, description="When the wait was recorded.")
    event: str | None = Field(None, description="The event's name (kind 'event').")
    child: TaskChild | None = Field(None, description="The child task (kind 'invoke').")
    call: StepCall | None = Field(None, description="The HTTP call (kind 'call').")


class TaskStep(OutputModel):
    """A durable step recorded with a task: its name, JSON result, attempt and time; a step a
    wait recorded says how the wait ended."""

    name: str
    result: JsonValue = None
    attempt: int
    recorded_at: datetime
    wait: StepWait | None = Field(
        None,
        description="Set on the step a wait recorded (an event, a child task's end, "
        "its timeout): what it waited for and what ended it.",
    )


class Attempt(OutputModel):
    number: int
    endpoint_id: str | None = None
    started_at: datetime
    ended_at: datetime | None = None
    outcome: AttemptOutcome
    http_status: int | None = None
    error: str | None = None
    traceback: str | None = None
    failure: FailureKind | None = Field(
        None,
        description="The kind of infrastructure failure that ended the attempt (timeout, 5xx, "
        "connection); null for a success and for failures the worker reported itself.",
    )
    task_failure: bool = Field(
        False,
        description="The worker marked this failure as the task's own (it raised, or it "
        "reported the error by callback): it did not count against the endpoint's circuit "
        "breaker.",
    )


class NoticeState(StrEnum):
    PENDING = "pending"  # to be delivered (or being retried)
    DELIVERED = "delivered"  # the notify URL answered 2xx
    FAILED = "failed"  # every try failed; the gateway gave up


class NoticeStatus(OutputModel):
    """Where the completion callback of a finished task stands."""

    state: NoticeState
    tries: int = Field(0, description="Deliveries tried so far.")
    last_error: str | None = None
    next_try_at: datetime | None = None
    delivered_at: datetime | None = None
