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
    traceparent: <W3C trace context>  the push's span (tracestate too, when the task has one)
    body: PushBody

A success may carry a warning (a job's run then shows ``warning``): the ``warning`` field of
the result callback or of a batch result, or, answered inline, the ``jobgate-warning`` header
(the text percent-encoded as UTF-8).

An endpoint registered with ``batch_size`` above 1 gets every push as a batch instead: the
same Standard Webhooks headers (``webhook-id`` naming the batch), ``jobgate-batch: <count>``,
and a :class:`PushBatch` body whose items carry their own lease and callback; it answers 200
with a :class:`BatchAnswer`, one :class:`BatchResult` per task.

Callbacks (worker → gateway) are ``POST <callback base>/<kind>`` with the lease token in the
``jobgate-lease`` header; kinds: ``heartbeat``, ``checkpoint``, ``logs``, ``result``, ``error``,
``release`` (give the task back at once, no attempt spent), ``sleep`` and ``wait`` (end the
attempt until a time, or an event: :mod:`sdk.wire.waits`).

The models live by concept -- :mod:`sdk.wire.tasks` (a task's history in
:mod:`sdk.wire.attempts`), :mod:`sdk.wire.queues`, :mod:`sdk.wire.endpoints`,
:mod:`sdk.wire.pushes` (pushes and callbacks), :mod:`sdk.wire.operations` (operator tools),
:mod:`sdk.wire.catalog` (the task catalog), :mod:`sdk.wire.jobs` (jobs and runs),
:mod:`sdk.wire.health` (the probes), :mod:`sdk.wire.waits` (waits for events) on
:mod:`sdk.wire.base` (headers, name formats, problems) -- and are imported from here.
"""

from __future__ import annotations

from sdk.wire.attempts import (
    Attempt,
    AttemptOutcome,
    FailureKind,
    NoticeState,
    NoticeStatus,
    TaskStep,
)
from sdk.wire.base import (
    DAY,
    HEADER_ATTEMPT,
    HEADER_BATCH,
    HEADER_CALLBACK,
    HEADER_LEASE,
    HEADER_PREFER,
    HEADER_PREFERENCE_APPLIED,
    HEADER_TASK_FAILURE,
    HEADER_TRACEPARENT,
    HEADER_TRACESTATE,
    HEADER_WARNING,
    MAX_PRIORITY,
    PROBLEM_CONTENT_TYPE,
    QUEUE_NAME_PATTERN,
    RETURN_MINIMAL,
    TRACEPARENT_PATTERN,
    Capability,
    FieldError,
    GroupName,
    Json,
    Key,
    Label,
    PositiveSeconds,
    Problem,
    QueueName,
    Seconds,
    TaskId,
    TaskName,
    Timestamp,
    WebUrl,
    check_queue_name,
)
from sdk.wire.catalog import (
    CatalogEndpoint,
    CatalogEntry,
    CatalogPage,
    CatalogTask,
    EndpointCatalog,
    EndpointTasks,
)
from sdk.wire.endpoints import (
    CircuitState,
    Endpoint,
    EndpointCreate,
    EndpointCreated,
    EndpointList,
    EndpointPatch,
    SecretRotation,
)
from sdk.wire.health import Health, Readiness
from sdk.wire.jobs import (
    LAST_SUCCESSFUL_RUN,
    CrontabSchedule,
    FireTimes,
    IntervalSchedule,
    Job,
    JobCreate,
    JobPage,
    JobPatch,
    JobTask,
    OverlapPolicy,
    Run,
    RunCreate,
    RunPage,
    RunStatus,
    RunSummary,
    Schedule,
)
from sdk.wire.notices import NotifySecret, TaskNotice
from sdk.wire.operations import (
    CancelledTasks,
    CancelMatching,
    CleanRequest,
    CleanResult,
    DeadLetterFilter,
    LogPage,
    ResubmitRequest,
    ResubmitResult,
    RunningList,
    RunningTask,
    ScheduledPage,
    ScheduledTask,
    SessionsEnded,
    Skipped,
)
from sdk.wire.pushes import (
    MAX_STEPS_BYTES,
    BatchAnswer,
    BatchItem,
    BatchResult,
    CallbackAck,
    CheckpointIn,
    ErrorIn,
    HeartbeatIn,
    HeartbeatOut,
    LeaseRequest,
    LogIn,
    LogLine,
    PassedResult,
    PushBatch,
    PushBody,
    PushStep,
    ResultIn,
    SleepIn,
    StepIn,
    StepOut,
)
from sdk.wire.queues import (
    Backoff,
    BackoffStrategy,
    CircuitBreaker,
    KeyConcurrency,
    KeyRateLimit,
    MetricsGranularity,
    Queue,
    QueueList,
    QueuePolicy,
    QueuePolicyPatch,
    RateLimit,
    Redrive,
    StallPolicy,
)
from sdk.wire.tasks import (
    BatchCreate,
    BatchCreated,
    BatchReceipt,
    Debounce,
    Task,
    TaskArgs,
    TaskCreate,
    TaskFlow,
    TaskPage,
    TaskReceipt,
    TaskState,
    Throttle,
)
from sdk.wire.waits import MAX_MATCH_FIELDS, CancelOn, TaskWait, WaitIn

__all__ = [
    "DAY",
    "HEADER_ATTEMPT",
    "HEADER_BATCH",
    "HEADER_CALLBACK",
    "HEADER_LEASE",
    "HEADER_PREFER",
    "HEADER_PREFERENCE_APPLIED",
    "HEADER_TASK_FAILURE",
    "HEADER_TRACEPARENT",
    "HEADER_TRACESTATE",
    "HEADER_WARNING",
    "LAST_SUCCESSFUL_RUN",
    "MAX_MATCH_FIELDS",
    "MAX_PRIORITY",
    "MAX_STEPS_BYTES",
    "PROBLEM_CONTENT_TYPE",
    "QUEUE_NAME_PATTERN",
    "RETURN_MINIMAL",
    "TRACEPARENT_PATTERN",
    "Attempt",
    "AttemptOutcome",
    "Backoff",
    "BackoffStrategy",
    "BatchAnswer",
    "BatchCreate",
    "BatchCreated",
    "BatchItem",
    "BatchReceipt",
    "BatchResult",
    "CallbackAck",
    "CancelMatching",
    "CancelOn",
    "CancelledTasks",
    "Capability",
    "CatalogEndpoint",
    "CatalogEntry",
    "CatalogPage",
    "CatalogTask",
    "CheckpointIn",
    "CircuitBreaker",
    "CircuitState",
    "CleanRequest",
    "CleanResult",
    "CrontabSchedule",
    "DeadLetterFilter",
    "Debounce",
    "Endpoint",
    "EndpointCatalog",
    "EndpointCreate",
    "EndpointCreated",
    "EndpointList",
    "EndpointPatch",
    "EndpointTasks",
    "ErrorIn",
    "FailureKind",
    "FieldError",
    "FireTimes",
    "GroupName",
    "Health",
    "HeartbeatIn",
    "HeartbeatOut",
    "IntervalSchedule",
    "Job",
    "JobCreate",
    "JobPage",
    "JobPatch",
    "JobTask",
    "Json",
    "Key",
    "KeyConcurrency",
    "KeyRateLimit",
    "Label",
    "LeaseRequest",
    "LogIn",
    "LogLine",
    "LogPage",
    "MetricsGranularity",
    "NoticeState",
    "NoticeStatus",
    "NotifySecret",
    "OverlapPolicy",
    "PassedResult",
    "PositiveSeconds",
    "Problem",
    "PushBatch",
    "PushBody",
    "PushStep",
    "Queue",
    "QueueList",
    "QueueName",
    "QueuePolicy",
    "QueuePolicyPatch",
    "RateLimit",
    "Readiness",
    "Redrive",
    "ResubmitRequest",
    "ResubmitResult",
    "ResultIn",
    "Run",
    "RunCreate",
    "RunPage",
    "RunStatus",
    "RunSummary",
    "RunningList",
    "RunningTask",
    "Schedule",
    "ScheduledPage",
    "ScheduledTask",
    "Seconds",
    "SecretRotation",
    "SessionsEnded",
    "Skipped",
    "SleepIn",
    "StallPolicy",
    "StepIn",
    "StepOut",
    "Task",
    "TaskArgs",
    "TaskCreate",
    "TaskFlow",
    "TaskId",
    "TaskName",
    "TaskNotice",
    "TaskPage",
    "TaskReceipt",
    "TaskState",
    "TaskStep",
    "TaskWait",
    "Throttle",
    "Timestamp",
    "WaitIn",
    "WebUrl",
    "check_queue_name",
]
