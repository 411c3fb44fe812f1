"""Every error the gateway reports to a client, and its HTTP status.

One handler (``gateway.api.problems``) turns these into RFC 9457 problem documents; routes and
services only raise them::

    GatewayError                    500  (never raised on purpose)
    ├── InvalidRequest              400  malformed JSON, a bad query parameter
    │   └── ValidationFailed        422  fields that break the schema; carries field errors
    │       └── UnknownTaskName         a task name no endpoint of the queue reported
    ├── Unauthorized                401  no or unknown API key, no lease token
    ├── Forbidden                   403  the key's scopes do not cover the route
    ├── NotFound                    404
    │   ├── QueueNotFound
    │   ├── TaskNotFound
    │   ├── EndpointNotFound
    │   ├── JobNotFound
    │   ├── RunNotFound
    │   ├── EventNotFound
    │   └── TriggerNotFound
    ├── Conflict                    409
    │   ├── TaskExists              a task with this id exists already
    │   ├── DuplicateTaskId         a batch gives one task id twice
    │   ├── DuplicateTaskName       an endpoint's task list names one task twice
    │   ├── IdempotencyKeyReused    an Idempotency-Key already used with another body
    │   ├── QueueNotEmpty           deleting a queue with unfinished tasks
    │   ├── TaskFinished            cancelling a finished task (or stopping a finished run)
    │   ├── RunActive               deleting a run that is pending or running
    │   └── StaleLease              a callback whose lease token is not the current one
    ├── Throttled                   429  a throttle dropped an enqueue and its window's task is gone
    ├── PayloadTooLarge             413
    ├── UnsupportedMediaType        415
    └── Unavailable                 503  Redis is out of memory or unreachable
        └── NotReplicated               an enqueue that fewer replicas than asked confirmed
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FieldProblem:
    field: str
    reason: str


PROBLEM_TYPE_BASE = "tag:jobgate.dev,2026:problem/"
"""Where the gateway's own problem types are named (RFC 9457 §3.1.1 allows a tag URI, which
nobody dereferences); docs/api.md lists them. Every other error is ``about:blank``: its status
and title say it all."""


class GatewayError(Exception):
    status = 500
    title = "Internal error"
    problem_type = "about:blank"

    def __init__(self, detail: str | None = None) -> None:
        super().__init__(detail or self.title)
        self.detail = detail


class InvalidRequest(GatewayError):
    status = 400
    title = "Invalid request"


class ValidationFailed(InvalidRequest):
    status = 422
    title = "Validation failed"

    def __init__(self, errors: list[FieldProblem], detail: str | None = None) -> None:
        super().__init__(detail or "; ".join(f"{e.field}: {e.reason}" for e in errors))
        self.errors = errors
        self.given_detail = detail

    def renamed(self, errors: list[FieldProblem]) -> ValidationFailed:
        """The same refusal, of the same type, with its fields named otherwise (a single
        enqueue's ``name`` rather than a batch's ``tasks.0.name``)."""
        return type(self)(errors, self.given_detail)


class UnknownTaskName(ValidationFailed):
    """An enqueue or a job names a task no endpoint of the queue reported, while some endpoint
    reported its task names (the task catalog) and the queue's policy has unknown_tasks
    'refuse'. Each unknown name's field (name, tasks.<i>.name, task.name) says which names the
    endpoints did report that come closest. Nothing is stored."""

    title = "Unknown task name"
    problem_type = PROBLEM_TYPE_BASE + "unknown-task-name"


class Unauthorized(GatewayError):
    status = 401
    title = "Unauthorized"


class Forbidden(GatewayError):
    status = 403
    title = "Forbidden"


class NotFound(GatewayError):
    status = 404
    title = "Not found"


class QueueNotFound(NotFound):
    title = "Queue not found"

    def __init__(self, queue: str) -> None:
        super().__init__(
            f"queue '{queue}' is not registered; register it with PUT /v1/queues/{queue}"
        )


class TaskNotFound(NotFound):
    title = "Task not found"

    def __init__(self, task_id: str) -> None:
        super().__init__(f"no task '{task_id}'")


class EndpointNotFound(NotFound):
    title = "Endpoint not found"

    def __init__(self, endpoint_id: str) -> None:
        super().__init__(f"no endpoint '{endpoint_id}'")


class JobNotFound(NotFound):
    title = "Job not found"

    def __init__(self, job_id: str) -> None:
        super().__init__(f"no job '{job_id}'")


class RunNotFound(NotFound):
    title = "Run not found"

    def __init__(self, job_id: str, run_id: str) -> None:
        super().__init__(f"job '{job_id}' has no run '{run_id}'")


class EventNotFound(NotFound):
    title = "Event not found"

    def __init__(self, event_id: str) -> None:
        super().__init__(f"no event '{event_id}' (or it is past the event retention)")


class TriggerNotFound(NotFound):
    title = "Trigger not found"

    def __init__(self, trigger_id: str) -> None:
        super().__init__(f"no trigger '{trigger_id}'")


class Conflict(GatewayError):
    status = 409
    title = "Conflict"


class TaskExists(Conflict):
    title = "Task exists"

    def __init__(self, task_id: str) -> None:
        super().__init__(f"a task with id '{task_id}' exists already")


class DuplicateTaskId(Conflict):
    """A batch gives one task id twice: the second task would be the first one again, as an id
    that exists already is (TaskExists), and nothing of the batch is stored. JSON Schema cannot
    say "unique by id" (uniqueItems compares whole tasks), so the schema admits such a batch
    and this answer is declared for it."""

    title = "Duplicate task id"
    problem_type = PROBLEM_TYPE_BASE + "duplicate-task-id"

    def __init__(self, repeats: list[tuple[int, int]]) -> None:
        super().__init__(
            "; ".join(f"tasks.{i}.id repeats tasks.{first}.id" for i, first in repeats)
            + ": a task id at most once in a batch"
        )


class DuplicateTaskName(Conflict):
    """An endpoint's task list names one task twice, alike or not: the catalog holds one schema
    per name, and which one the worker meant is not the gateway's to guess. JSON Schema cannot
    say "unique by name", so the schema admits such a list and this answer is declared for it."""

    title = "Duplicate task name"
    problem_type = PROBLEM_TYPE_BASE + "duplicate-task-name"

    def __init__(self, name: str, first: str, again: str) -> None:
        super().__init__(f"task name '{name}' is listed twice: {first}.name and {again}.name")


class IdempotencyKeyReused(Conflict):
    """An ``Idempotency-Key`` already used with another body or query: the key is taken by the
    request it was first sent with. The draft standard answers 422 here; the body itself is
    valid, though, and only what happened before refuses it, so Jobgate answers 409 with its
    own problem type (docs/idempotency.md)."""

    title = "Idempotency-Key reused"
    problem_type = PROBLEM_TYPE_BASE + "idempotency-key-reused"


class QueueNotEmpty(Conflict):
    title = "Queue not empty"


class TaskFinished(Conflict):
    title = "Task finished"


class RunActive(Conflict):
    title = "Run active"


class StaleLease(Conflict):
    title = "Stale lease"


class Throttled(GatewayError):
    """A throttle dropped an enqueue, and the task its window let through (which the answer
    would show) no longer exists: there is no task to answer with."""

    status = 429
    title = "Throttled"


class PayloadTooLarge(GatewayError):
    status = 413
    title = "Payload too large"


class StepsTooLarge(PayloadTooLarge):
    title = "Steps too large"


class UnsupportedMediaType(GatewayError):
    status = 415
    title = "Unsupported media type"


class Unavailable(GatewayError):
    status = 503
    title = "Service unavailable"

    def __init__(self, detail: str, retry_after: int = 5) -> None:
        super().__init__(detail)
        self.retry_after = retry_after


class NotReplicated(Unavailable):
    """Fewer replicas than ``JOBGATE_WAIT_REPLICAS`` confirmed a write in time: the primary
    holds it, but a failover now could lose it, so it is not acknowledged."""

    def __init__(
        self,
        wanted: int,
        confirmed: int,
        timeout: float,
        outcome: str = "the task may or may not be stored: retry with the same task id or "
        "dedup key",
    ) -> None:
        super().__init__(
            f"{confirmed} of the {wanted} Redis replicas asked for confirmed the write within "
            f"{timeout:g}s; {outcome}",
            retry_after=1,
        )
