"""Queues: their policies, and what the gateway reports of them (their endpoints are in
:mod:`sdk.wire.endpoints`)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Self

from pydantic import BeforeValidator, ConfigDict, Field, model_validator

from sdk.wire.attempts import FailureKind
from sdk.wire.base import (
    DAY,
    InputModel,
    OutputModel,
    PositiveSeconds,
    Seconds,
    TaskName,
)
from sdk.wire.tasks import TaskState


class BackoffStrategy(StrEnum):
    """How the delay before retry ``n`` grows (``n`` counts failed attempts, from 1)."""

    CONSTANT = "constant"  # base
    LINEAR = "linear"  # base * n
    EXPONENTIAL = "exponential"  # base * 2 ** (n - 1)
    EXPONENTIAL_JITTER = "exponential_jitter"  # uniform(0, base * 2 ** (n - 1)), "full jitter"


class Backoff(InputModel):
    """Retry delays: ``strategy`` from ``base_delay``, never more than ``max_delay``. The cap
    wins: a ``max_delay`` below ``base_delay`` makes every delay ``max_delay`` (JSON Schema
    cannot compare two fields, so the schema admits that pair and the gateway takes it)."""

    strategy: BackoffStrategy = BackoffStrategy.EXPONENTIAL_JITTER
    base_delay: Seconds = 1.0
    max_delay: Seconds = Field(
        300.0,
        description="No computed delay is longer, base_delay included: below base_delay, "
        "every delay is max_delay.",
    )


class RateLimit(InputModel):
    """A token bucket shared by every gateway: ``per_second`` dispatches on average, at most
    ``burst`` at once after a quiet spell."""

    per_second: float = Field(gt=0, le=100_000, description="Dispatches per second.")
    burst: int = Field(1, ge=1, le=100_000, description="Most dispatches at once.")


RATE_KEY_PATH_PATTERN = r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+){0,7}$"
MAX_TASK_RATE_LIMITS = 100


class KeyRateLimit(RateLimit):
    """A token bucket per value of one payload field, e.g. at most 5 dispatches a second per
    ``customer_id``. The value is read when a task is enqueued: tasks enqueued before the limit
    was set (or within a second after, while gateways still hold the old policy) are not limited
    by key, and neither are tasks whose payload has no string, integer or boolean there."""

    path: str = Field(
        max_length=256,
        pattern=RATE_KEY_PATH_PATTERN,
        description="Dot path into the payload, e.g. 'kwargs.customer_id': 1 to 8 segments of "
        "letters, digits, '_' and '-'; a segment of digits indexes a list.",
    )


class KeyConcurrency(InputModel):
    """At most ``limit`` tasks per concurrency key running (or ready to run) at once, e.g. 2 per
    ``customer_id``, with fair rotation between keys. A task's key is its own
    ``concurrency_key`` when it gives one, else the payload's value at ``path`` (read when it
    is enqueued, as for ``key_rate_limit``); a task with neither is not limited by key. The
    tasks of a key at its limit wait in the queue (state 'queued') without delaying the others;
    when one of its tasks ends, the next goes behind the tasks of other keys already waiting."""

    limit: int = Field(ge=1, le=100_000, description="Tasks of one key running at once.")
    path: str | None = Field(
        None,
        max_length=256,
        pattern=RATE_KEY_PATH_PATTERN,
        description="Dot path into the payload, e.g. 'kwargs.customer_id' (as key_rate_limit's); "
        "none: only tasks that give a concurrency_key are limited.",
    )


class CircuitBreaker(InputModel):
    """When an endpoint keeps failing: after ``failures`` failed pushes in a row it gets no
    pushes for ``open_for`` seconds, then one probe; each failed probe doubles the pause, up to
    ``max_open_for`` (which caps the first pause too). One success closes it."""

    failures: int = Field(5, ge=1, le=10_000, description="Failed pushes in a row that open it.")
    open_for: PositiveSeconds = Field(5.0, description="First pause.")
    max_open_for: PositiveSeconds = Field(
        300.0,
        description="Longest pause, the first included: below open_for, every pause is "
        "max_open_for.",
    )


class Redrive(InputModel):
    """Automatic redrive: every ``every`` seconds, dead tasks whose last attempt failed by one of
    the kinds in ``on`` and that have been dead ``after`` seconds are queued again, each at most
    ``max_redrives`` times. A redriven task starts its attempt count again (``max_attempts`` new
    attempts), and its history shows each redrive."""

    on: list[FailureKind] = Field(
        default_factory=lambda: list(FailureKind),
        min_length=1,
        max_length=3,
        description="Failure kinds that are redriven: timeout, 5xx, connection.",
        json_schema_extra={"uniqueItems": True},
    )
    after: float = Field(
        300.0, ge=0, le=30 * DAY, description="Seconds a task has been dead before a redrive."
    )
    every: float = Field(
        300.0, ge=10, le=DAY, description="Seconds between redrive passes over the queue."
    )
    max_redrives: int = Field(3, ge=1, le=100, description="Most redrives of one task.")

    @model_validator(mode="after")
    def _distinct_kinds(self) -> Self:
        if len(set(self.on)) != len(self.on):
            raise ValueError("on must not repeat a failure kind")
        return self


class StallPolicy(StrEnum):
    """What happens to a running task whose heartbeats stopped (``max_heartbeat_interval``)."""

    WAIT = "wait"  # flag it 'stalled'; the lease expiry ends the attempt as usual
    REDISPATCH = "redispatch"  # end the attempt now (outcome 'stalled') and retry it


class UnknownTasks(StrEnum):
    """What an enqueue of a task name the queue's catalog lacks meets, once some endpoint of the
    queue has reported its task names (docs/workers.md, "The task catalog")."""

    REFUSE = "refuse"  # 422, problem type unknown-task-name, naming the closest reported names
    ACCEPT = "accept"  # stored, unchecked: a worker that reports nothing may serve it


class MetricsGranularity(StrEnum):
    """What the gateway's metrics tell apart within a queue (docs/observability.md)."""

    TASK = "task"  # one series per task name (bounded: past a limit, names fold into 'other')
    QUEUE = "queue"  # every task of the queue recorded as task '*': one series per queue


TaskRateLimits = Annotated[
    dict[TaskName, RateLimit],
    # A name not matching the task name pattern is refused: said in the schema too, since
    # patternProperties alone would let any other name through.
    Field(max_length=MAX_TASK_RATE_LIMITS, json_schema_extra={"additionalProperties": False}),
]
"""Rate limits by task name (at most :data:`MAX_TASK_RATE_LIMITS` names)."""


class QueuePolicy(InputModel):
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
    task_rate_limits: TaskRateLimits = Field(
        default_factory=dict,
        description="Dispatches per second of each task name listed (at most 100 names), "
        "beside the queue's rate_limit; a task waits while its name's bucket is empty and "
        "the tasks behind it go on.",
    )
    key_rate_limit: KeyRateLimit | None = Field(
        None,
        description="Dispatches per second per value of one payload field (e.g. per "
        "customer); none when absent.",
    )
    key_concurrency: KeyConcurrency | None = Field(
        None,
        description="Tasks running at once per concurrency key (e.g. per customer), with fair "
        "rotation between keys; none when absent.",
    )
    circuit_breaker: CircuitBreaker = Field(default_factory=CircuitBreaker)
    dedup_window: Seconds = Field(
        3600.0, description="How long a dedup key keeps returning the first task."
    )
    max_heartbeat_interval: PositiveSeconds | None = Field(
        None, description="A running task silent for longer is 'stalled'; tasks may override."
    )
    stall_policy: StallPolicy = Field(StallPolicy.WAIT, description="What a stall leads to.")
    metrics_granularity: MetricsGranularity = Field(
        MetricsGranularity.TASK,
        description="'task': metrics carry the task name; 'queue': every task of the queue is "
        "recorded as task '*', so floods of many small tasks stay one series per queue.",
    )
    redrive: Redrive | None = Field(
        None, description="Resubmit dead tasks that failed by infrastructure; off when absent."
    )
    unknown_tasks: UnknownTasks = Field(
        UnknownTasks.REFUSE,
        description="Once an endpoint of the queue has reported its task names (the task "
        "catalog), what an enqueue or job of a name no endpoint reported meets: 'refuse' (422 "
        "naming the closest reported names) or 'accept' (for a queue whose workers do not all "
        "report). A queue whose endpoints reported nothing accepts every name.",
    )


class QueuePolicyPatch(InputModel):
    """Body of ``PATCH /v1/queues/{queue}``: only the fields given change."""

    model_config = ConfigDict(
        json_schema_extra={
            "allOf": [
                {
                    "not": {
                        "required": [field, f"remove_{field}"],
                        "properties": {
                            field: {"type": "object"},
                            f"remove_{field}": {"const": True},
                        },
                    }
                }
                for field in ("rate_limit", "key_rate_limit", "key_concurrency", "redrive")
            ]
        }
    )

    lease_timeout: PositiveSeconds | None = None
    max_attempts: int | None = Field(None, ge=1, le=1000)
    backoff: Backoff | None = Field(
        None,
        description="Replaces the queue's backoff whole: its fields not given take their defaults.",
    )
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
    remove_rate_limit: bool | None = Field(
        None, description="true drops the queue's rate limit; not with a rate_limit."
    )
    task_rate_limits: TaskRateLimits | None = Field(
        None,
        description="Replaces the per-name rate limits whole; {} drops them all.",
    )
    key_rate_limit: KeyRateLimit | None = Field(
        None, description="Sets the per-key rate limit; remove_key_rate_limit drops it."
    )
    remove_key_rate_limit: bool | None = Field(
        None, description="true drops the per-key rate limit; not with a key_rate_limit."
    )
    key_concurrency: KeyConcurrency | None = Field(
        None,
        description="Sets the per-key concurrency; remove_key_concurrency drops it (the tasks "
        "it held go to the queue at once).",
    )
    remove_key_concurrency: bool | None = Field(
        None, description="true drops the per-key concurrency; not with a key_concurrency."
    )
    circuit_breaker: CircuitBreaker | None = Field(
        None,
        description="Replaces the queue's circuit breaker whole: its fields not given take "
        "their defaults.",
    )
    dedup_window: Seconds | None = None
    max_heartbeat_interval: PositiveSeconds | None = None
    stall_policy: StallPolicy | None = None
    metrics_granularity: MetricsGranularity | None = None
    redrive: Redrive | None = Field(
        None, description="Sets the redrive policy (whole); remove_redrive turns it off."
    )
    remove_redrive: bool | None = Field(
        None, description="true turns automatic redrive off; not with a redrive."
    )
    unknown_tasks: UnknownTasks | None = Field(
        None,
        description="'refuse' or 'accept' task names no endpoint reported; takes effect at once "
        "on this gateway, within a second on the others.",
    )


def _known_states(counts: object) -> object:
    """The counts of the states this SDK knows: a gateway newer than the SDK may count a state
    added since, which a tally can leave out (a task in that state is another matter: reading
    it is an error, sdk/wire/base.py)."""
    if isinstance(counts, dict):
        return {state: n for state, n in counts.items() if state in _STATES}
    return counts


_STATES = frozenset(TaskState) | frozenset(s.value for s in TaskState)


class Queue(OutputModel):
    name: str
    policy: QueuePolicy
    created_at: datetime
    counts: Annotated[dict[TaskState, int], BeforeValidator(_known_states)] = Field(
        description="Tasks in each state."
    )
    unroutable: dict[str, int] = Field(
        default_factory=dict,
        description="Queued tasks per required capability that no enabled endpoint advertises: "
        "they wait until such an endpoint is registered.",
    )


class QueueList(OutputModel):
    """A page of queues in name order."""

    items: list[Queue]
    next_cursor: str | None = Field(
        None, description="Pass as cursor to get the next page; null on the last page."
    )
