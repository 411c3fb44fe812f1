"""Every exception the SDK raises, under one base class.

::

    JobgateError
    ├── ApiError          the gateway answered a request with a non-2xx status (problem+json)
    ├── UnreadableAnswer  a 2xx answer does not read as its model, e.g. a value outside an
    │                     enum that a gateway newer than the SDK sent (also a ValueError)
    ├── TaskFailed        a waited-for task ended failed, dead or cancelled
    ├── TaskTimeout       a waited-for task did not finish in time (also a TimeoutError)
    ├── SignatureError    a push's Standard Webhooks signature did not verify
    ├── Retry             raised by task code: try again later, optionally after ``delay``
    ├── Fail              raised by task code: give up now, ``reason`` is recorded
    ├── Sleep             raised by ``ctx.sleep``: end the attempt, come back at ``until``
    │   └── HandOver      raised by ``ctx.step`` near the worker's time limit: end the
    │                     attempt, come back at once (a fresh invocation), no attempt spent
    ├── WaitForEvent      raised by ``ctx.wait_for_event``: end the attempt, come back when
    │                     a matching event arrives or the wait times out
    ├── InvokeChild       raised by ``ctx.invoke``: end the attempt, come back when the child
    │                     task ends or the wait times out
    ├── ChildFailed       raised by ``ctx.invoke``: the child did not succeed
    ├── CallOut           raised by ``ctx.call``: end the attempt, come back when the gateway
    │                     has made the HTTP call
    ├── CallFailed        raised by ``ctx.call``: no answer came (refused, unreachable, timed
    │                     out, too large, too many redirects)
    ├── DuplicateStep     a step name used twice in one attempt (also a ValueError)
    └── Cancelled         raised inside task code: the gateway asked the task to stop
        └── LeaseLost     the gateway no longer knows this attempt's lease (409, or 404 for a
                          task deleted while it ran): stop quietly

Network failures are httpx's exceptions (``httpx.TransportError`` and its subclasses): the
failures of ``http.client`` (:class:`~sdk.client.Client`, :func:`sdk.blocking.blocking_error`)
and of aiohttp (the async clients, :func:`sdk.sessions.transport_error`) raised as their httpx
counterparts (``ConnectError``, ``ConnectTimeout``, ``ReadTimeout``, ...), and httpx's own when
a client sends through httpx (a given transport, a proxy).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sdk.wire import CallIn, InvokeIn, Problem, Task, WaitIn


__all__ = [
    "ApiError",
    "CallFailed",
    "CallOut",
    "Cancelled",
    "ChildFailed",
    "DuplicateStep",
    "Fail",
    "HandOver",
    "InvokeChild",
    "JobgateError",
    "LeaseLost",
    "Retry",
    "SignatureError",
    "Sleep",
    "TaskFailed",
    "TaskTimeout",
    "UnreadableAnswer",
    "WaitForEvent",
]


class JobgateError(Exception):
    """Base class of every exception the SDK raises on purpose."""


class ApiError(JobgateError):
    """The gateway refused a request: ``status`` and the RFC 9457 ``problem`` it sent."""

    def __init__(self, status: int, problem: Problem) -> None:
        self.status = status
        self.problem = problem
        super().__init__(status, problem)

    def __str__(self) -> str:
        text = f"{self.status} {self.problem.title}"
        if self.problem.detail:
            text += f": {self.problem.detail}"
        for error in self.problem.errors or ():
            text += f"\n  {error.field}: {error.reason}"
        return text


class UnreadableAnswer(JobgateError, ValueError):
    """A success answer that does not read as the ``model`` the SDK expects: ``errors`` holds
    a ``(field, reason, value)`` per field. Fields the SDK does not know are no error (they are
    ignored); a value it does not know where it knows them all (a task state, a policy's
    choice: ``unknown_value``) most likely comes from a gateway newer than the SDK, and the
    message says to upgrade the SDK rather than guess what the value means."""

    def __init__(
        self, model: str, errors: Sequence[tuple[str, str, object]], unknown_value: bool
    ) -> None:
        self.model = model
        self.errors = tuple(errors)
        self.unknown_value = unknown_value
        super().__init__(model, self.errors)

    def __str__(self) -> str:
        text = f"the gateway's answer does not read as a {self.model}"
        for field, reason, value in self.errors:
            text += f"\n  {field}: {reason} (got {value!r})"
        if self.unknown_value:
            text += (
                "\nIt holds a value this SDK does not know: the gateway is likely newer than "
                "the SDK; upgrade the SDK."
            )
        return text


class TaskFailed(JobgateError):
    """A task ended without success (failed, dead or cancelled); ``task`` is its final record."""

    def __init__(self, task: Task) -> None:
        self.task = task
        super().__init__(task)

    def __str__(self) -> str:
        text = f"task {self.task.id} ({self.task.name}) ended {self.task.state.value}"
        return f"{text}: {self.task.error}" if self.task.error else text


class TaskTimeout(JobgateError, TimeoutError):
    """A task was not finished after ``timeout`` seconds; ``task`` is its last known record."""

    def __init__(self, task_id: str, timeout: float, task: Task | None = None) -> None:
        self.task_id = task_id
        self.timeout = timeout
        self.task = task
        super().__init__(task_id, timeout)

    def __str__(self) -> str:
        state = f" (still {self.task.state.value})" if self.task else ""
        return f"task {self.task_id} not finished after {self.timeout:g}s{state}"


class SignatureError(JobgateError):
    """A push did not carry a valid Standard Webhooks signature for any known secret."""


class Retry(JobgateError):
    """Raise in a task to have it retried, after ``delay`` seconds or the queue's backoff."""

    def __init__(self, delay: float | None = None, message: str = "retry requested") -> None:
        if delay is not None and delay < 0:
            raise ValueError("delay must not be negative")
        self.delay = delay
        self.message = message
        super().__init__(message)


class Fail(JobgateError):
    """Raise in a task to fail it now, without further attempts; ``reason`` is recorded."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class Sleep(JobgateError):
    """Raised by ``ctx.sleep``/``ctx.sleep_until`` (a durable sleep): the worker ends the
    attempt with the ``sleep`` callback and the gateway pushes the task again at ``until``
    without spending an attempt. Let it propagate (do not catch it in the task)."""

    def __init__(self, name: str, until: datetime) -> None:
        self.name = name
        self.until = until
        super().__init__(f"sleeping ({name}) until {until.isoformat()}")


class HandOver(Sleep):
    """Raised by ``ctx.step`` when the worker's time limit (its ``time_limit``, or a Lambda
    invocation's remaining time) is too near for the step to fit: the attempt ends as a durable
    sleep with no delay, so the gateway pushes the task again at once, to a fresh invocation,
    without spending an attempt; the steps recorded so far are replayed there. Let it propagate
    (do not catch it in the task)."""

    def __init__(self, name: str, left: float, needed: float) -> None:
        super().__init__(name, datetime.now(UTC))
        self.left = left
        self.needed = needed

    def __str__(self) -> str:
        return (
            f"step {self.name!r} handed over to a fresh attempt: {self.left:.2f}s left before "
            f"the time limit, {self.needed:.2f}s needed"
        )


class WaitForEvent(JobgateError):
    """Raised by ``ctx.wait_for_event`` (a wait for an event): the worker ends the attempt with
    the ``wait`` callback (``wait``, its body) and the gateway pushes the task again once a
    matching event arrives or the timeout passes, the step recorded, without spending an
    attempt. Let it propagate (do not catch it in the task)."""

    def __init__(self, wait: WaitIn) -> None:
        self.wait = wait
        super().__init__(f"waiting ({wait.step}) for event {wait.event!r}")


class InvokeChild(JobgateError):
    """Raised by ``ctx.invoke``: the worker ends the attempt with the ``invoke`` callback
    (``invoke``, its body), the gateway enqueues the child and pushes the task again once the
    child ends or the timeout passes, the step recorded, without spending an attempt. Let it
    propagate (do not catch it in the task)."""

    def __init__(self, invoke: InvokeIn) -> None:
        self.invoke = invoke
        super().__init__(f"waiting ({invoke.step}) for child task {invoke.name!r}")


class CallOut(JobgateError):
    """Raised by ``ctx.call``: the worker ends the attempt with the ``call`` callback
    (``call``, its body), the gateway makes the HTTP request and pushes the task again once it
    has an answer (or gave up), the step recorded, without spending an attempt. Let it
    propagate (do not catch it in the task)."""

    def __init__(self, call: CallIn) -> None:
        self.call = call
        super().__init__(f"waiting ({call.step}) for {call.method} {call.url}")


class CallFailed(JobgateError):
    """Raised by ``ctx.call`` when no answer came: ``kind`` is ``refused`` (the SSRF rules),
    ``unreachable`` (connection errors, three tries), ``timed_out`` (a try's timeout, or the
    gateway's backstop), ``too_large`` (the answer's body) or ``redirects`` (more than 5);
    ``error`` says more. An answer of any HTTP status is an answer, not this."""

    def __init__(self, step: str, kind: str, error: str) -> None:
        self.step = step
        self.kind = kind
        self.error = error
        super().__init__(f"the call of step {step!r} failed ({kind}): {error}")


class ChildFailed(JobgateError):
    """Raised by ``ctx.invoke`` when the child did not succeed: ``state`` is its final state
    (``failed``, ``dead``, ``cancelled``), or ``timed_out`` (the invoke's timeout came first;
    the child goes on), or ``refused`` (the gateway could not enqueue it); ``error`` says why;
    ``child_id`` is the child's id."""

    def __init__(self, step: str, state: str, child_id: str, error: object) -> None:
        self.step = step
        self.state = state
        self.child_id = child_id
        self.error = error
        super().__init__(f"child task {child_id} of step {step!r} ended {state}: {error}")


class DuplicateStep(JobgateError, ValueError):
    """A step or sleep name used twice in one attempt: names key the recorded results, so a
    loop must make one per iteration (``f"page-{n}"``, or ``ctx.step_name("page")``)."""


class Cancelled(JobgateError):
    """Raised inside a task (by ``ctx.heartbeat()``) when the gateway asked it to stop."""


class LeaseLost(Cancelled):
    """The gateway answered 409: this attempt's lease is stale, the task runs elsewhere now; or
    404 for the task or its queue: it was deleted while it ran (a forced queue delete)."""
