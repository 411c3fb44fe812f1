"""What the worker says about one task of a push: a :class:`Verdict`, a :class:`Refusal` or
:data:`ACCEPTED` — together an :data:`Outcome`.

A :class:`Verdict` is how a task function ended. The same verdict is sent two ways: as the
answer for the task when it finished within the inline window, or as the final callback when it
ran on in the background (it was then answered :data:`ACCEPTED`, 202).

==============================  ======  =================================================
the task function               inline  callback
==============================  ======  =================================================
returned a value                200     ``result``: the value (JSON)
returned ``Warn(msg, result)``  200     ``result`` with ``warning``; inline: the
                                        ``jobgate-warning`` header (percent-encoded)
raised ``Retry(delay)``         500*    ``error``, retryable, ``retry_delay``; Retry-After
raised ``Fail(reason)``         422*    ``error``, not retryable
was cancelled                   422     ``error`` "cancelled", not retryable
was stopped by shutdown,        503     ``release``: back to the queue at once, no attempt
policy ``requeue``                      spent (inline: busy, with Retry-After: 0)
raised ``Sleep`` (``ctx.sleep``)  202     ``sleep``: pushed again at its time, no attempt
                                        spent (always by callback, never inline)
raised ``WaitForEvent``         202     ``wait``: pushed again at the event or the
(``ctx.wait_for_event``)                timeout, no attempt spent (by callback)
raised ``CallOut``              202     ``call``: pushed again when the gateway made the
(``ctx.call``)                          HTTP call, no attempt spent (by callback)
raised ``InvokeChild``          202     ``invoke``: pushed again when the child ends or
(``ctx.invoke``)                        at the timeout, no attempt spent (by callback)
was stopped by shutdown,        422     ``error`` "worker shut down", not retryable
policy ``fail``
raised anything else            500*    ``error`` with the traceback, retryable
returned what JSON cannot hold  422*    ``error``, not retryable
lost its lease                  409     nothing: the task runs elsewhere now
==============================  ======  =================================================

Starred answers are marked as the task's own failure (:attr:`Verdict.task_failure`): inline,
the ``jobgate-task-failure: 1`` header; in a batch, the result's ``task_failure``. The gateway
then retries by the queue's policy without counting the answer against the endpoint's circuit
breaker (an error callback is a task's failure by itself, unmarked).

A :class:`Refusal` is a task that did not run — the worker is busy or shutting down (503 with
Retry-After, see :func:`busy`), has no such task (404), cannot call it with the payload (422) —
or the 409 of a lost lease. How an outcome is written into a single push's answer or into one
:class:`~sdk.wire.BatchResult` of a batch is :mod:`sdk.pushes`' business.
"""

from __future__ import annotations

import asyncio
import math
import traceback
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, TypeAlias

from pydantic import ValidationError
from pydantic_core import PydanticSerializationError, to_json, to_jsonable_python

from sdk.errors import (
    CallOut,
    Cancelled,
    Fail,
    InvokeChild,
    LeaseLost,
    Retry,
    Sleep,
    WaitForEvent,
)
from sdk.warnings import MAX_WARNING, Warn
from sdk.wire import CallIn, ErrorIn, FieldError, InvokeIn, Problem, ResultIn, WaitIn
from sdk.wire.base import reason

__all__ = [
    "ACCEPTED",
    "CANCELLED",
    "LEASE_LOST",
    "RELEASED",
    "SHUT_DOWN",
    "Accepted",
    "Outcome",
    "Refusal",
    "Stop",
    "Verdict",
    "busy",
    "field_errors",
    "stopped",
    "verdict_of",
]

_MAX_ERROR = 65_536
_MAX_TRACEBACK = 262_144


class Stop(StrEnum):
    """Why the worker stopped a task before it ended by itself."""

    CANCEL = "cancel"  # the gateway asked (heartbeat answer)
    LEASE_LOST = "lease lost"  # a callback got 409: the task was dispatched again
    REQUEUE = "requeue"  # the worker is shutting down: hand the task back to the queue
    FAIL = "fail"  # the worker is shutting down: fail the task, not retried

    @property
    def shutdown(self) -> bool:
        return self in (Stop.REQUEUE, Stop.FAIL)


@dataclass(frozen=True)
class Verdict:
    """The outcome of one attempt: the inline answer's status, and the callback's body."""

    status: int
    final: ResultIn | ErrorIn
    release: bool = False  # report by the ``release`` callback (task handed back), not ``final``
    # A durable sleep (ctx.sleep): reported by the ``sleep`` callback, never inline (the
    # runner answers 202 and calls back), so the push answers' table stays as it is.
    sleep_until: datetime | None = None
    # A wait for an event (ctx.wait_for_event): reported by the ``wait`` callback, likewise;
    # for a child (ctx.invoke), by the ``invoke`` callback; for an HTTP call (ctx.call), by
    # the ``call`` callback.
    wait: WaitIn | InvokeIn | CallIn | None = None
    task_failure: bool = False  # the task itself failed (raised): the endpoint is not to blame

    @property
    def retry_after(self) -> float | None:
        """Seconds the gateway should wait before the next attempt, when the task said so."""
        return self.final.retry_delay if isinstance(self.final, ErrorIn) else None

    @property
    def body(self) -> bytes:
        """The inline answer's body: the result itself, or the error."""
        if isinstance(self.final, ResultIn):
            return to_json(self.final.result)
        return self.final.model_dump_json(exclude_none=True).encode()


CANCELLED = Verdict(422, ErrorIn(error="cancelled", retryable=False))
RELEASED = Verdict(
    503,
    ErrorIn(error="the worker shut down: task handed back", retryable=True, retry_delay=0),
    release=True,
)
SHUT_DOWN = Verdict(422, ErrorIn(error="worker shut down", retryable=False))
_STOPPED_BY_SHUTDOWN = {Stop.REQUEUE: RELEASED, Stop.FAIL: SHUT_DOWN}


def stopped(why: Stop | None) -> Verdict | None:
    """The verdict of a task stopped for ``why`` before it ended (``None``: lease lost)."""
    if why is Stop.LEASE_LOST:
        return None
    if why is None or why is Stop.CANCEL:
        return CANCELLED
    return _STOPPED_BY_SHUTDOWN[why]


@dataclass(frozen=True)
class Refusal:
    """A task the worker did not run, or whose end it must not report: a problem document."""

    status: int
    title: str
    detail: str | None = None
    errors: tuple[FieldError, ...] = ()
    retry_after: float | None = None

    @property
    def problem(self) -> Problem:
        """The answer to a single push (RFC 9457)."""
        return Problem(
            title=self.title,
            status=self.status,
            detail=self.detail,
            errors=list(self.errors) or None,
        )

    @property
    def error(self) -> ErrorIn:
        """The error of a batch result: the problem in one line; only "busy" is retryable."""
        parts = [self.title, self.detail, *(f"{e.field}: {e.reason}" for e in self.errors)]
        text = "; ".join(part for part in parts if part)
        return ErrorIn(error=text[:_MAX_ERROR], retryable=self.status >= 500)


def field_errors(error: ValidationError, prefix: str = "") -> tuple[FieldError, ...]:
    """A validation error as the field list of a refusal (``prefix`` starts every field)."""
    return tuple(
        FieldError(field=".".join([prefix, *map(str, e["loc"])]).strip("."), reason=reason(e))
        for e in error.errors(include_url=False)
    )


@dataclass(frozen=True)
class Accepted:
    """The task runs on after the answer: its verdict comes as a callback."""

    status: int = 202


Outcome: TypeAlias = Verdict | Refusal | Accepted

ACCEPTED = Accepted()
LEASE_LOST = Refusal(409, "Lease lost", "the task was dispatched again; this attempt stopped")


def busy(retry_after: float, *, closing: bool = False) -> Refusal:
    """A task refused because ``max_concurrency`` tasks run here, or the worker is shutting
    down: 503 with Retry-After, so the gateway tries again without spending an attempt."""
    if closing:
        return Refusal(503, "Worker shutting down", retry_after=retry_after)
    detail = "max_concurrency tasks run here already"
    return Refusal(503, "Worker busy", detail, retry_after=retry_after)


def _error(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text[:_MAX_ERROR]


def _traceback(exc: BaseException) -> str:
    text = "".join(traceback.format_exception(exc))
    return text[-_MAX_TRACEBACK:]


_PLAIN = (str, int, bool)


def _finite_float(value: Any) -> bool:
    return type(value) is float and math.isfinite(value)


_NONE = Verdict(200, ResultIn.model_construct(result=None, warning=None))


def success(value: Any) -> Verdict:
    """A returned value as the result (a :class:`~sdk.warnings.Warn`: its result, with its
    warning); one JSON cannot hold (an object, NaN, Infinity) fails the task instead of
    reaching the gateway as null."""
    warning = None
    if isinstance(value, Warn):
        warning = value.message[:MAX_WARNING] or None
        value = value.result
    if value is None and warning is None:
        return _NONE  # a task returning nothing: the common verdict, made once
    if warning is None and (type(value) in _PLAIN or _finite_float(value)):
        # JSON already, nothing to check (the common no-op and scalar results).
        return Verdict(200, ResultIn.model_construct(result=value, warning=None))
    try:
        return Verdict(200, ResultIn(result=to_jsonable_python(value), warning=warning))
    except (PydanticSerializationError, ValidationError) as e:
        error = f"the result is not JSON-serialisable: {e}"[:_MAX_ERROR]
        return Verdict(422, ErrorIn(error=error, retryable=False), task_failure=True)


def failure(exc: BaseException) -> Verdict | None:
    """The verdict of a task that raised ``exc``; ``None`` when it must end quietly."""
    if isinstance(exc, LeaseLost):
        return None
    if isinstance(exc, Cancelled):
        return CANCELLED
    if isinstance(exc, WaitForEvent):
        return Verdict(202, ErrorIn(error=str(exc), retryable=True), wait=exc.wait)
    if isinstance(exc, InvokeChild):
        return Verdict(202, ErrorIn(error=str(exc), retryable=True), wait=exc.invoke)
    if isinstance(exc, CallOut):
        return Verdict(202, ErrorIn(error=str(exc), retryable=True), wait=exc.call)
    if isinstance(exc, Sleep):
        return Verdict(202, ErrorIn(error=str(exc), retryable=True), sleep_until=exc.until)
    if isinstance(exc, Retry):
        error = ErrorIn(error=exc.message[:_MAX_ERROR], retryable=True, retry_delay=exc.delay)
        return Verdict(500, error, task_failure=True)
    if isinstance(exc, Fail):
        error = ErrorIn(error=exc.reason[:_MAX_ERROR], retryable=False)
        return Verdict(422, error, task_failure=True)
    error = ErrorIn(error=_error(exc), traceback=_traceback(exc), retryable=True)
    return Verdict(500, error, task_failure=True)


def _by_the_stop(exc: BaseException) -> bool:
    return isinstance(exc, Cancelled) and not isinstance(exc, LeaseLost)


def verdict_of(future: asyncio.Future[Any], stop: Stop | None) -> Verdict | None:
    """The verdict of a finished task; ``None`` when it must end quietly (lease lost).

    A task stopped at shutdown that ended by the stop (cancelled, or raising
    :class:`~sdk.errors.Cancelled` from a heartbeat) gets the shutdown policy's verdict; one
    that ended by itself meanwhile gets its own.
    """
    if stop is Stop.LEASE_LOST:
        return None
    if future.cancelled():
        return stopped(stop)
    exc = future.exception()
    if exc is None:
        return success(future.result())
    if stop is not None and stop.shutdown and _by_the_stop(exc):
        return stopped(stop)
    return failure(exc)
