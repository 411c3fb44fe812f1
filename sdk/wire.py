"""The wire contract: every shape that crosses HTTP between producers, the gateway and workers.

Both sides import this module (the gateway imports ``sdk.wire``; the SDK never imports
``gateway``), so a client and the server cannot drift apart.

Conventions:

- durations are seconds (floats), timestamps are RFC 3339 date-times in UTC;
- a task's ``payload``, ``result`` and ``checkpoint`` are any JSON value;
- errors are RFC 9457 ``application/problem+json`` documents (:class:`Problem`).

The push protocol (gateway → worker)::

    POST <endpoint url>
    webhook-id: <task id>            same for every attempt: the worker's idempotency key
    webhook-timestamp: <unix seconds>
    webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">
    jobgate-attempt: <attempt number, from 1>
    jobgate-lease: <lease token>
    jobgate-callback: <callback base URL>
    traceparent: <W3C trace context>
    body: PushBody

An endpoint registered with ``batch_size`` above 1 gets every push as a batch instead: the
same Standard Webhooks headers (``webhook-id`` naming the batch), ``jobgate-batch: <count>``,
and a :class:`PushBatch` body whose items carry their own lease and callback; it answers 200
with a :class:`BatchAnswer`, one :class:`BatchResult` per task.

Callbacks (worker → gateway) are ``POST <callback base>/<kind>`` with the lease token in the
``jobgate-lease`` header; kinds: ``heartbeat``, ``checkpoint``, ``logs``, ``result``, ``error``,
``release`` (give the task back at once, no attempt spent).
"""

from __future__ import annotations

import re
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    model_validator,
)

__all__ = [
    "HEADER_ATTEMPT",
    "HEADER_BATCH",
    "HEADER_CALLBACK",
    "HEADER_LEASE",
    "PROBLEM_CONTENT_TYPE",
    "Attempt",
    "AttemptOutcome",
    "Backoff",
    "BackoffStrategy",
    "BatchAnswer",
    "BatchCreate",
    "BatchCreated",
    "BatchItem",
    "BatchResult",
    "CallbackAck",
    "CheckpointIn",
    "CircuitBreaker",
    "CircuitState",
    "CleanRequest",
    "CleanResult",
    "DeadLetterFilter",
    "Endpoint",
    "EndpointCreate",
    "EndpointCreated",
    "EndpointList",
    "ErrorIn",
    "FieldError",
    "HeartbeatIn",
    "HeartbeatOut",
    "LogIn",
    "LogLine",
    "LogPage",
    "Problem",
    "PushBatch",
    "PushBody",
    "Queue",
    "QueueList",
    "QueuePolicy",
    "QueuePolicyPatch",
    "RateLimit",
    "ResubmitRequest",
    "ResubmitResult",
    "ResultIn",
    "RunningList",
    "RunningTask",
    "ScheduledPage",
    "ScheduledTask",
    "Skipped",
    "StallPolicy",
    "Task",
    "TaskArgs",
    "TaskCreate",
    "TaskPage",
    "TaskState",
]

HEADER_LEASE = "jobgate-lease"
HEADER_CALLBACK = "jobgate-callback"
HEADER_ATTEMPT = "jobgate-attempt"
HEADER_BATCH = "jobgate-batch"
PROBLEM_CONTENT_TYPE = "application/problem+json"

_QUEUE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_TASK_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,199}$")
_ULID = re.compile(r"^[0-7][0-9A-HJKMNP-TV-Z]{25}$")
_CAPABILITY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")
_KEY = re.compile(r"^[\x21-\x7e]{1,256}$")

MAX_PRIORITY = 1000
DAY = 86_400.0


def check_queue_name(name: str) -> str:
    """Check a queue name: 1 to 64 letters, digits, dots, underscores or dashes."""
    if not _QUEUE_NAME.match(name):
        raise ValueError(
            "must be 1-64 characters of letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return name


def _check_task_name(name: str) -> str:
    if not _TASK_NAME.match(name):
        raise ValueError(
            "must be 1-200 characters of letters, digits, '_', '.', ':' or '-', "
            "starting with a letter or '_'"
        )
    return name


def _check_ulid(value: str) -> str:
    upper = value.upper()
    if not _ULID.match(upper):
        raise ValueError("must be a ULID: 26 Crockford base32 characters")
    return upper


def _check_capability(value: str) -> str:
    if not _CAPABILITY.match(value):
        raise ValueError("must be 1-64 characters of letters, digits, '.', '_', ':' or '-'")
    return value


def _check_key(value: str) -> str:
    if not _KEY.match(value):
        raise ValueError("must be 1-256 printable ASCII characters without spaces")
    return value


QueueName = Annotated[str, AfterValidator(check_queue_name)]
TaskName = Annotated[str, AfterValidator(_check_task_name)]
TaskId = Annotated[str, AfterValidator(_check_ulid)]
Capability = Annotated[str, AfterValidator(_check_capability)]
Key = Annotated[str, AfterValidator(_check_key)]
GroupName = Annotated[str, AfterValidator(_check_capability)]
Label = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[\x21-\x7e]+$")]
Seconds = Annotated[float, Field(ge=0, le=365 * DAY)]
PositiveSeconds = Annotated[float, Field(gt=0, le=365 * DAY)]


class _Input(BaseModel):
    """What a client sends: unknown fields are an error, not silently dropped."""

    model_config = ConfigDict(extra="forbid")


class _Output(BaseModel):
    """What a server sends: tolerant of fields added by newer servers."""

    model_config = ConfigDict(extra="ignore")


# --- queues -----------------------------------------------------------------------------------


class BackoffStrategy(StrEnum):
    """How the delay before retry ``n`` grows (``n`` counts failed attempts, from 1)."""

    CONSTANT = "constant"  # base
    LINEAR = "linear"  # base * n
    EXPONENTIAL = "exponential"  # base * 2 ** (n - 1)
    EXPONENTIAL_JITTER = "exponential_jitter"  # uniform(0, base * 2 ** (n - 1)), "full jitter"


class Backoff(_Input):
    """Retry delays: ``strategy`` from ``base_delay``, never more than ``max_delay``."""

    strategy: BackoffStrategy = BackoffStrategy.EXPONENTIAL_JITTER
    base_delay: Seconds = 1.0
    max_delay: Seconds = 300.0

    @model_validator(mode="after")
    def _cap_not_below_base(self) -> Self:
        if self.max_delay < self.base_delay:
            raise ValueError("max_delay must be at least base_delay")
        return self


class RateLimit(_Input):
    """A token bucket shared by every gateway: ``per_second`` dispatches on average, at most
    ``burst`` at once after a quiet spell."""

    per_second: float = Field(gt=0, le=100_000, description="Dispatches per second.")
    burst: int = Field(1, ge=1, le=100_000, description="Most dispatches at once.")


class CircuitBreaker(_Input):
    """When an endpoint keeps failing: after ``failures`` failed pushes in a row it gets no
    pushes for ``open_for`` seconds, then one probe; each failed probe doubles the pause, up to
    ``max_open_for``. One success closes it."""

    failures: int = Field(5, ge=1, le=10_000, description="Failed pushes in a row that open it.")
    open_for: PositiveSeconds = Field(5.0, description="First pause.")
    max_open_for: PositiveSeconds = Field(300.0, description="Longest pause.")

    @model_validator(mode="after")
    def _cap_not_below_first(self) -> Self:
        if self.max_open_for < self.open_for:
            raise ValueError("max_open_for must be at least open_for")
        return self


class StallPolicy(StrEnum):
    """What happens to a running task whose heartbeats stopped (``max_heartbeat_interval``)."""

    WAIT = "wait"  # flag it 'stalled'; the lease expiry ends the attempt as usual
    REDISPATCH = "redispatch"  # end the attempt now (outcome 'stalled') and retry it


class QueuePolicy(_Input):
    """A queue's policy: the body of ``PUT /v1/queues/{queue}``. Every field has a default."""

    lease_timeout: PositiveSeconds = Field(
        30.0, description="Visibility lease of a dispatched task; heartbeats extend it."
    )
    max_attempts: int = Field(5, ge=1, le=1000, description="Attempts before a task fails.")
    backoff: Backoff = Field(default_factory=Backoff)
    push_timeout: PositiveSeconds = Field(
        30.0, le=900, description="How long one push waits for the worker's answer."
    )
    max_run_time: PositiveSeconds = Field(
        3600.0, description="Hard limit of one attempt; no heartbeat extends a lease past it."
    )
    max_concurrency: int = Field(
        100, ge=1, le=100_000, description="Tasks of this queue running at once."
    )
    max_retry_duration: Seconds = Field(
        3600.0,
        description="How long a busy worker (429/503) is retried without spending attempts, "
        "counted from the task's first dispatch.",
    )
    dead_letter: bool = Field(True, description="Failed tasks end as 'dead' instead of 'failed'.")
    retention_succeeded: Seconds = Field(7 * DAY, description="How long succeeded tasks are kept.")
    retention_failed: Seconds = Field(
        30 * DAY, description="How long failed, dead and cancelled tasks are kept."
    )
    paused: bool = Field(False, description="A paused queue accepts tasks but dispatches none.")
    rate_limit: RateLimit | None = Field(
        None, description="Dispatches per second, shared by all gateways; none when absent."
    )
    circuit_breaker: CircuitBreaker = Field(default_factory=CircuitBreaker)
    dedup_window: Seconds = Field(
        3600.0, description="How long a dedup key keeps returning the first task."
    )
    max_heartbeat_interval: PositiveSeconds | None = Field(
        None, description="A running task silent for longer is 'stalled'; tasks may override."
    )
    stall_policy: StallPolicy = Field(StallPolicy.WAIT, description="What a stall leads to.")


class QueuePolicyPatch(_Input):
    """Body of ``PATCH /v1/queues/{queue}``: only the fields given change."""

    lease_timeout: PositiveSeconds | None = None
    max_attempts: int | None = Field(None, ge=1, le=1000)
    backoff: Backoff | None = None
    push_timeout: PositiveSeconds | None = Field(None, le=900)
    max_run_time: PositiveSeconds | None = None
    max_concurrency: int | None = Field(None, ge=1, le=100_000)
    max_retry_duration: Seconds | None = None
    dead_letter: bool | None = None
    retention_succeeded: Seconds | None = None
    retention_failed: Seconds | None = None
    paused: bool | None = None
    rate_limit: RateLimit | None = Field(
        None, description="Sets the rate limit; remove_rate_limit drops it."
    )
    remove_rate_limit: bool | None = Field(None, description="true drops the queue's rate limit.")
    circuit_breaker: CircuitBreaker | None = None
    dedup_window: Seconds | None = None
    max_heartbeat_interval: PositiveSeconds | None = None
    stall_policy: StallPolicy | None = None


class TaskState(StrEnum):
    SCHEDULED = "scheduled"
    WAITING = "waiting"
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    DEAD = "dead"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in _FINISHED


_FINISHED = frozenset({TaskState.SUCCEEDED, TaskState.FAILED, TaskState.DEAD, TaskState.CANCELLED})


class Queue(_Output):
    name: str
    policy: QueuePolicy
    created_at: datetime
    counts: dict[TaskState, int] = Field(description="Tasks in each state.")
    unroutable: dict[str, int] = Field(
        default_factory=dict,
        description="Queued tasks per required capability that no enabled endpoint advertises: "
        "they wait until such an endpoint is registered.",
    )


# --- endpoints --------------------------------------------------------------------------------


class EndpointCreate(_Input):
    """Body of ``POST /v1/queues/{queue}/endpoints``."""

    url: Annotated[str, Field(min_length=8, max_length=2048, pattern=r"^https?://")]
    concurrency: int = Field(10, ge=1, le=10_000, description="Tasks in flight at once.")
    capabilities: list[Capability] = Field(default_factory=list, max_length=32)
    batch_size: int = Field(
        1,
        ge=1,
        le=500,
        description="Most tasks one push carries. Above 1 the endpoint receives every push as "
        "a PushBatch and answers a BatchAnswer.",
    )


class CircuitState(StrEnum):
    CLOSED = "closed"  # pushes flow
    OPEN = "open"  # failing: no pushes until open_until
    HALF_OPEN = "half_open"  # one probe push is out; its answer closes or reopens the circuit


class Endpoint(_Output):
    id: str
    queue: str
    url: str
    concurrency: int
    capabilities: list[str]
    batch_size: int = 1
    enabled: bool
    disabled_reason: str | None = None
    created_at: datetime
    in_flight: int = 0
    circuit: CircuitState = CircuitState.CLOSED
    failures: int = Field(0, description="Failed pushes in a row.")
    open_until: datetime | None = Field(
        None, description="While the circuit is open: when the next probe may go."
    )


class EndpointCreated(Endpoint):
    """Returned once, at registration: the only time the signing secret is shown."""

    secret: str = Field(description="Standard Webhooks signing secret, 'whsec_…'.")


# --- tasks ------------------------------------------------------------------------------------


class TaskCreate(_Input):
    """Body of ``POST /v1/queues/{queue}/tasks``."""

    id: TaskId | None = Field(None, description="A ULID; the gateway makes one when absent.")
    name: TaskName
    payload: JsonValue = None
    priority: int = Field(0, ge=-MAX_PRIORITY, le=MAX_PRIORITY, description="Higher runs first.")
    delay: Seconds | None = Field(None, description="Run no earlier than this many seconds.")
    run_at: datetime | None = Field(None, description="Run no earlier than this time.")
    max_attempts: int | None = Field(None, ge=1, le=1000, description="Overrides the queue's.")
    lease_timeout: PositiveSeconds | None = Field(None, description="Overrides the queue's.")
    max_run_time: PositiveSeconds | None = Field(None, description="Overrides the queue's.")
    traceparent: str | None = Field(None, max_length=55, pattern=r"^[0-9a-f]{2}-[0-9a-f]{32}-")
    dedup_key: Key | None = Field(
        None,
        description="Enqueueing again with this key within the queue's dedup_window returns "
        "the first task (200) instead of making a second.",
    )
    singleton_key: Key | None = Field(
        None,
        description="At most one queued or scheduled task per key in the queue: while one "
        "waits to run, enqueueing another returns it (200).",
    )
    depends_on: list[TaskId] = Field(
        default_factory=list,
        max_length=100,
        description="Run only after each of these tasks (of any queue) has succeeded; if one "
        "fails or is cancelled, this task fails.",
    )
    group: GroupName | None = Field(None, description="Join this group of the queue.")
    after_group: GroupName | None = Field(
        None,
        description="Run only after every task of this group of the queue has succeeded "
        "(the members enqueued so far, including those earlier in the same batch).",
    )
    capability: Capability | None = Field(
        None, description="Only endpoints advertising this capability receive the task."
    )
    owner: Label | None = Field(None, description="Owner or tenant id, for filtering.")
    version: Label | None = Field(None, description="Version of the task's code, for search.")
    max_heartbeat_interval: PositiveSeconds | None = Field(
        None, description="Overrides the queue's: silent longer than this, it is 'stalled'."
    )

    @model_validator(mode="after")
    def _one_start_time(self) -> Self:
        if self.delay is not None and self.run_at is not None:
            raise ValueError("give either delay or run_at, not both")
        if self.run_at is not None and self.run_at.tzinfo is None:
            raise ValueError("run_at needs a timezone, e.g. '2030-01-01T00:00:00Z'")
        return self


class BatchCreate(_Input):
    """Body of ``POST /v1/queues/{queue}/tasks/batch``: all or none are stored."""

    tasks: list[TaskCreate] = Field(min_length=1, max_length=1000)


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
    CANCELLED = "cancelled"


class Attempt(_Output):
    number: int
    endpoint_id: str | None = None
    started_at: datetime
    ended_at: datetime | None = None
    outcome: AttemptOutcome
    http_status: int | None = None
    error: str | None = None
    traceback: str | None = None


class Task(_Output):
    id: str
    queue: str
    name: str
    payload: JsonValue = None
    priority: int = 0
    state: TaskState
    deduplicated: bool = Field(
        False,
        description="This enqueue matched an earlier task by dedup or singleton key; the task "
        "shown is that earlier one, and nothing new was stored.",
    )
    owner: str | None = None
    version: str | None = None
    capability: str | None = None
    dedup_key: str | None = None
    singleton_key: str | None = None
    group: str | None = None
    depends_on: list[str] = Field(default_factory=list)
    after_group: str | None = None
    waiting_on: list[str] = Field(
        default_factory=list,
        description="While waiting: the dependencies not yet met (task ids, 'group:<name>').",
    )
    endpoint_id: str | None = Field(None, description="Where the running attempt was pushed.")
    last_heartbeat_at: datetime | None = None
    stalled: bool = Field(
        False, description="Running, and silent for longer than its max_heartbeat_interval."
    )
    attempt: int = Field(0, description="Attempts started so far (busy answers not counted).")
    max_attempts: int
    created_at: datetime
    run_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    lease_expires_at: datetime | None = None
    progress: float | None = None
    cancel_requested: bool = False
    result: JsonValue = None
    error: str | None = None
    checkpoint: JsonValue = None
    attempts: list[Attempt] = Field(default_factory=list)


class TaskPage(_Output):
    items: list[Task]
    next_cursor: str | None = None


class BatchCreated(_Output):
    tasks: list[Task]


class QueueList(_Output):
    items: list[Queue]


class EndpointList(_Output):
    items: list[Endpoint]


# --- operators: what is running, what waits, dead letters, cleaning ----------------------------


class ScheduledTask(_Output):
    """A task waiting for its time: delayed by its producer, or backing off before a retry."""

    id: str
    name: str
    due_at: datetime
    kind: Literal["delayed", "retry"]
    attempt: int = Field(description="Attempts made so far (0 for a delayed task).")
    priority: int = 0
    owner: str | None = None
    error: str | None = Field(None, description="The last attempt's error, for a retry.")


class ScheduledPage(_Output):
    items: list[ScheduledTask]
    next_cursor: str | None = None


class RunningTask(_Output):
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


class RunningList(_Output):
    items: list[RunningTask]
    truncated: bool = Field(False, description="More tasks run than the limit returned.")


class DeadLetterFilter(_Input):
    """Which dead tasks: every given field must match."""

    queue: QueueName | None = Field(None, description="One queue; every queue when absent.")
    name: TaskName | None = None
    version: Label | None = None
    owner: Label | None = None
    since: datetime | None = Field(None, description="Died at or after this time.")
    until: datetime | None = Field(None, description="Died before this time.")


class ResubmitRequest(_Input):
    """Body of ``POST /v1/deadletters/resubmit``: give ``ids`` or ``filter``, not both."""

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


class Skipped(_Output):
    id: str
    reason: str


class ResubmitResult(_Output):
    resubmitted: list[str] = Field(description="Ids of the tasks queued again.")
    skipped: list[Skipped] = Field(
        default_factory=list, description="Ids given that were not dead letters, and why."
    )


class CleanRequest(_Input):
    """Body of ``POST /v1/queues/{queue}/clean``: delete finished tasks now."""

    states: list[TaskState] = Field(
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
    older_than: Seconds = Field(0, description="Only tasks finished at least this long ago.")
    limit: int = Field(10_000, ge=1, le=100_000, description="Most tasks deleted by one call.")

    @model_validator(mode="after")
    def _finished_states(self) -> Self:
        if not all(s.finished for s in self.states):
            raise ValueError("states must be finished states: succeeded, failed, dead, cancelled")
        return self


class CleanResult(_Output):
    deleted: int


class LogPage(_Output):
    items: list[LogLine]


# --- push and callbacks -----------------------------------------------------------------------


class PushBody(_Output):
    """What the gateway POSTs to a worker endpoint."""

    id: str
    queue: str
    name: str
    payload: JsonValue = None
    attempt: int
    checkpoint: JsonValue = None
    lease_expires_at: datetime
    deadline: datetime = Field(description="Hard end of this attempt (max_run_time).")


class HeartbeatIn(_Input):
    progress: float | None = Field(None, ge=0, le=1, description="Fraction done, 0 to 1.")
    extend: PositiveSeconds | None = Field(
        None, description="Lease extension; the task's lease timeout when absent."
    )


class HeartbeatOut(_Output):
    cancel_requested: bool
    lease_expires_at: datetime


class CheckpointIn(_Input):
    state: JsonValue


class LogLine(_Input):
    message: Annotated[str, Field(max_length=8192)]
    level: Annotated[str, Field(max_length=16)] = "info"
    at: datetime | None = None


class LogIn(_Input):
    lines: list[LogLine] = Field(min_length=1, max_length=500)


class ResultIn(_Input):
    result: JsonValue = None


class ErrorIn(_Input):
    """The error callback, and the JSON body of a worker's inline error answer."""

    error: Annotated[str, Field(max_length=65_536)]
    traceback: Annotated[str, Field(max_length=262_144)] | None = None
    retryable: bool = True
    retry_delay: Seconds | None = None


class BatchItem(PushBody):
    """One task of a batch push: its push body, and what a single push carries in headers."""

    lease: str = Field(description="The lease token of this task's attempt.")
    callback: str = Field(description="The callback base URL of this task.")


class PushBatch(_Output):
    """What the gateway POSTs to an endpoint whose ``batch_size`` is above 1 (with the
    ``jobgate-batch`` header giving the count). The signature covers the whole body."""

    tasks: list[BatchItem]


class BatchResult(_Output):
    """A worker's answer for one task of a batch: the status a single push would have got."""

    id: str
    status: int = Field(
        ge=100,
        le=599,
        description="200 done (result), 202 accepted (callbacks follow), 429/503 busy, "
        "410 gone, other 4xx failed, 5xx retried; as for a single push.",
    )
    result: JsonValue = None
    error: ErrorIn | None = None
    retry_after: Seconds | None = None


class BatchAnswer(_Output):
    """The worker's 200 answer to a batch push: one result per task; a task left out is
    retried like a push that got no answer."""

    results: list[BatchResult]


class CallbackAck(_Output):
    state: TaskState


class TaskArgs(_Input):
    """The SDK's payload convention: a task function is called as ``fn(*args, **kwargs)``.

    ``@task`` producers send this shape, SDK workers expect it; a ``null`` payload means no
    arguments. Other producers may send any JSON payload to workers of their own.
    """

    args: list[JsonValue] = Field(default_factory=list)
    kwargs: dict[str, JsonValue] = Field(default_factory=dict)


# --- errors -----------------------------------------------------------------------------------


class FieldError(_Output):
    field: str = Field(description="Dotted path of the offending field, e.g. 'tasks.0.name'.")
    reason: str


class Problem(_Output):
    """An RFC 9457 problem document."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str | None = None
    errors: list[FieldError] | None = None
