"""Tasks: what a producer enqueues and what the gateway answers about a task."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Literal, Self

from pydantic import ConfigDict, Field, JsonValue, model_validator

from sdk.wire.attempts import Attempt, NoticeStatus, TaskStep
from sdk.wire.base import (
    DAY,
    MAX_PRIORITY,
    TRACEPARENT_PATTERN,
    Capability,
    GroupName,
    InputModel,
    Json,
    Key,
    Label,
    OutputModel,
    PositiveSeconds,
    Seconds,
    TaskId,
    TaskName,
    Timestamp,
    WebUrl,
)
from sdk.wire.waits import CancelOn, TaskWait


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


WindowSeconds = Annotated[float, Field(gt=0, le=7 * DAY)]


class Debounce(InputModel):
    """A task's ``debounce`` option: one pending task per key, which later enqueues inside
    the window replace (docs/durable.md, "Debounce and throttle")."""

    key: Key = Field(description="Enqueues of the same task name and key in the queue merge.")
    window: WindowSeconds = Field(
        description="Seconds (up to 7 days): the task runs this long after the last enqueue "
        "of the key; each enqueue inside the window replaces its payload and moves its start."
    )
    max_wait: WindowSeconds | None = Field(
        None,
        description="Seconds after the first enqueue of a burst at which the task runs however "
        "many enqueues keep coming (Inngest's timeout); none: no limit. Below window, the "
        "task runs max_wait after the burst's first enqueue.",
    )


class Throttle(InputModel):
    """A task's ``throttle`` option: at most ``limit`` enqueues of the key go per window; the
    rest are dropped or delayed to the next window with room (docs/durable.md)."""

    key: Key = Field(description="Enqueues of the same task name and key in the queue count.")
    window: WindowSeconds = Field(description="Seconds (up to 7 days) of one window.")
    limit: int = Field(1, ge=1, le=10_000, description="Enqueues let through per window.")
    mode: Literal["drop", "delay"] = Field(
        "drop",
        description="drop: an enqueue over the limit stores nothing (the answer shows the last "
        "task let through, flow.throttled: dropped); delay: it is stored to run at the start "
        "of the next window with room (flow.throttled: delayed).",
    )


# What a debounced task cannot also have: each would make "the pending task" ambiguous.
_NOT_WITH_DEBOUNCE = (
    "id",
    "delay",
    "run_at",
    "dedup_key",
    "singleton_key",
    "depends_on",
    "after_group",
    "group",
    "throttle",
)


class TaskCreate(InputModel):
    """Body of ``POST /v1/queues/{queue}/tasks``."""

    model_config = ConfigDict(
        json_schema_extra={
            "not": {
                "required": ["delay", "run_at"],
                "properties": {"delay": {"type": "number"}, "run_at": {"type": "string"}},
            },
            # The model validator's other two rules, so that every body the schema admits is
            # one the gateway takes (written as alternatives, not if/then: generators handle
            # them without rejection sampling).
            "allOf": [
                {  # pass_results needs depends_on
                    "anyOf": [
                        {"properties": {"pass_results": {"enum": [False, None]}}},
                        {"required": ["depends_on"], "properties": {"depends_on": {"minItems": 1}}},
                    ]
                },
                {  # a debounce comes with none of the options it cannot be combined with
                    "anyOf": [
                        {"properties": {"debounce": {"type": "null"}}},
                        {
                            "properties": {
                                name: {"maxItems": 0} if name == "depends_on" else {"type": "null"}
                                for name in _NOT_WITH_DEBOUNCE
                            }
                        },
                    ]
                },
            ],
        }
    )

    id: TaskId | None = Field(
        None,
        description="A ULID; the gateway makes one when absent. In a batch, each id at most "
        "once (409 otherwise, problem type 'tag:jobgate.dev,2026:problem/duplicate-task-id').",
    )
    name: TaskName
    payload: Json = None
    priority: int = Field(0, ge=-MAX_PRIORITY, le=MAX_PRIORITY, description="Higher runs first.")
    delay: Seconds | None = Field(
        None, description="Run no earlier than this many seconds; not with run_at."
    )
    run_at: Timestamp | None = Field(
        None, description="Run no earlier than this time; not with delay."
    )
    max_attempts: int | None = Field(None, ge=1, le=1000, description="Overrides the queue's.")
    lease_timeout: PositiveSeconds | None = Field(None, description="Overrides the queue's.")
    max_run_time: PositiveSeconds | None = Field(None, description="Overrides the queue's.")
    traceparent: str | None = Field(
        None,
        max_length=55,
        pattern=TRACEPARENT_PATTERN,
        description="W3C trace context of the producer's span, the parent of the enqueue "
        "(default: the request's traceparent header).",
    )
    tracestate: str | None = Field(
        None,
        max_length=512,
        pattern=r"^[ -~]*$",
        description="W3C tracestate that goes with traceparent.",
    )
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
    concurrency_key: Key | None = Field(
        None,
        description="This task's key under the queue's key_concurrency (which must be set: 422 "
        "otherwise), instead of the value at its path in the payload.",
    )
    depends_on: list[TaskId] = Field(
        default_factory=list,
        max_length=100,
        description="Run only after each of these tasks (of any queue) has succeeded; if one "
        "fails or is cancelled, this task fails. An id of no existing task is refused (422).",
    )
    pass_results: bool | None = Field(
        None,
        description="Hand this task its dependencies' results: its push body's `results` lists "
        "them in `depends_on` order (chains and chords). Needs `depends_on`; the payload is then "
        "not checked against the task catalog, since the worker completes it with the results.",
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
    notify: WebUrl | None = Field(
        None,
        description="Completion callback: when the task ends (succeeded, failed, dead, "
        "cancelled) the gateway POSTs a TaskNotice here, signed with the queue's notify secret "
        "(Standard Webhooks), retried with backoff until a 2xx answer: at least once. Checked "
        "against the same address rules as endpoint URLs.",
    )

    debounce: Debounce | None = Field(
        None,
        description="At most one pending task per (name, key): an enqueue inside the window "
        "replaces the pending task's payload (only: its other fields stay the first enqueue's) "
        "and moves its run_at to the window's end (200 with that task as stored, "
        "flow.replaced: true). Not with id, delay, run_at, dedup_key, singleton_key, depends_on, "
        "group, after_group or throttle (422).",
    )
    throttle: Throttle | None = Field(
        None,
        description="At most `limit` enqueues per (name, key) and window go; the rest are "
        "dropped (200 with the last task let through, flow.throttled: dropped) or delayed to "
        "the next window (201, flow.throttled: delayed).",
    )
    cancel_on: list[CancelOn] | None = Field(
        None,
        max_length=16,
        description="Cancel this task when a matching event is accepted (POST /v1/events): at "
        "once when it is not running (queued, scheduled, waiting, asleep or waiting for an "
        "event), by a cancel request when it is. Events accepted before the task was created "
        "do not count.",
    )

    @model_validator(mode="after")
    def _one_start_time(self) -> Self:
        if self.delay is not None and self.run_at is not None:
            raise ValueError("give either delay or run_at, not both")
        if self.pass_results and not self.depends_on:
            raise ValueError("pass_results needs depends_on: the tasks whose results are passed")
        if self.debounce is not None:
            clash = [f for f in _NOT_WITH_DEBOUNCE if getattr(self, f) not in (None, [])]
            if clash:
                raise ValueError(
                    f"debounce cannot be combined with {', '.join(clash)}: a debounced task "
                    "starts at its window's end and is replaced by later enqueues of its key"
                )
        return self


class BatchCreate(InputModel):
    """Body of ``POST /v1/queues/{queue}/tasks/batch``: all or none are stored."""

    tasks: list[TaskCreate] = Field(
        min_length=1,
        max_length=1000,
        description="At most 1000 tasks; a client-given id at most once among them (409 "
        "naming the repeat otherwise, problem type "
        "'tag:jobgate.dev,2026:problem/duplicate-task-id').",
    )


class TaskFlow(OutputModel):
    """What debounce or throttle did with a task and, in an enqueue's answer, with that enqueue
    (docs/durable.md, "Debounce and throttle"). One field of :class:`Task`, absent for tasks
    with neither option, so they pay for one field, not four."""

    debounce_key: str | None = None
    debounce_seq: int | None = Field(
        None,
        description="A debounced task: how many enqueues it has merged (1 when made, one more "
        "per replacement). In an enqueue's answer: that enqueue's number in the burst, so the "
        "answer with the highest number names the payload the task runs with.",
    )
    replaced: bool = Field(
        False,
        description="In an enqueue's answer: this enqueue was debounced into the pending task "
        "shown, as stored now (its payload this enqueue's, its run_at moved; everything else "
        "still the first enqueue's); nothing new was stored.",
    )
    throttled: Literal["dropped", "delayed"] | None = Field(
        None,
        description="dropped (in an enqueue's answer): the throttle stored nothing for this "
        "enqueue; the task shown is the last one its window let through. delayed: the task "
        "was stored to run at the start of the next window with room (its run_at); reads of "
        "the task show it too.",
    )


class Task(OutputModel):
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
    flow: TaskFlow | None = Field(
        None,
        description="Debounce and throttle: what they did with this task and, in an enqueue's "
        "answer, with that enqueue; none for a task with neither option.",
    )
    owner: str | None = None
    version: str | None = None
    trace_id: str | None = Field(
        None,
        description="The W3C trace id of the task's trace (its enqueue, pushes and callbacks), "
        "to find it in a tracing backend; none when it was enqueued without a trace context "
        "and the gateway does not trace.",
    )
    capability: str | None = None
    dedup_key: str | None = None
    singleton_key: str | None = None
    concurrency_key: str | None = Field(
        None, description="Its key under the queue's key_concurrency, if it has one."
    )
    group: str | None = None
    depends_on: list[str] = Field(default_factory=list)
    pass_results: bool = False
    after_group: str | None = None
    waiting_on: list[str] = Field(
        default_factory=list,
        description="While waiting: the dependencies not yet met (task ids, 'group:<name>').",
    )
    wait: TaskWait | None = Field(
        None,
        description="While scheduled by a wait for an event (ctx.wait_for_event, the 'wait' "
        "callback): the event it waits for, and until when.",
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
    cancel_requested: bool = Field(
        False,
        description="A cancel was asked of this task. Queued, scheduled or waiting, it ended "
        "cancelled at once; running, the end of its attempt decides: succeeded when that "
        "succeeds, else cancelled.",
    )
    result: JsonValue = None
    warning: str | None = Field(None, description="Succeeded, with this warning.")
    error: str | None = Field(
        None,
        description="The task's own error: while it waits to run again, its last failed "
        "attempt's; once it ended failed, dead or cancelled, the final attempt's; none once "
        "it succeeded. Each attempt's error stays in `attempts`.",
    )
    checkpoint: JsonValue = None
    steps: list[TaskStep] = Field(
        default_factory=list, description="Durable steps recorded, in the order recorded."
    )
    attempts: list[Attempt] = Field(default_factory=list)
    redrives: int = Field(
        0, description="Times the queue's redrive policy queued this task again after it died."
    )
    notify: str | None = Field(None, description="The completion callback URL, if any.")
    notice: NoticeStatus | None = Field(
        None, description="The completion callback's delivery, once the task has ended."
    )


class TaskPage(OutputModel):
    items: list[Task]
    next_cursor: str | None = None


class BatchCreated(OutputModel):
    tasks: list[Task]


class TaskReceipt(OutputModel):
    """A task as an enqueue answers it under ``Prefer: return=minimal``: what a producer needs
    to follow it (``GET /v1/tasks/{id}`` has the rest). Each field is the Task's own, so the
    receipt is the full answer cut to these fields (the gateway's builder is
    ``gateway.services.enqueue.created.receipt_value``; a test holds the two equal)."""

    id: str
    state: TaskState
    deduplicated: bool = Field(
        False,
        description="This enqueue matched an earlier task by dedup or singleton key; the id "
        "and state are that earlier task's, and nothing new was stored.",
    )
    flow: TaskFlow | None = Field(
        None,
        description="What a debounce or throttle option made of this enqueue (the Task's own "
        "flow); null for a task with neither.",
    )

    @classmethod
    def of(cls, task: Task) -> Self:
        """The receipt a whole Task answers for: its fields of the same names."""
        return cls.model_validate({name: getattr(task, name) for name in cls.model_fields})


class BatchReceipt(OutputModel):
    """A batch enqueue's answer under ``Prefer: return=minimal``."""

    tasks: list[TaskReceipt]


class TaskArgs(InputModel):
    """The SDK's payload convention: a task function is called as ``fn(*args, **kwargs)``.

    ``@task`` producers send this shape, SDK workers expect it; a ``null`` payload means no
    arguments. Other producers may send any JSON payload to workers of their own.
    """

    args: list[Json] = Field(default_factory=list)
    kwargs: dict[str, Json] = Field(default_factory=dict)
    results_as: Literal["first", "list"] | None = Field(
        None,
        description="For a task enqueued with pass_results: how the push body's results join "
        "the call. 'first': the first (single) dependency's result goes before args (a chain); "
        "'list': the list of every dependency's result does (a chord's callback).",
    )
