"""How the end of a task function becomes the worker's answer: a :class:`Verdict`.

The same verdict is sent two ways: as the HTTP answer to the push when the task finished
within the inline window, or as the final callback when it ran on in the background.

=========================  ======  ===================================================
the task function          inline  callback
=========================  ======  ===================================================
returned a value           200     ``result``: the value (JSON)
raised ``Retry(delay)``    500     ``error``, retryable, ``retry_delay``; Retry-After
raised ``Fail(reason)``    422     ``error``, not retryable
was cancelled              422     ``error`` "cancelled", not retryable
was stopped by shutdown    503     ``error``, retryable (busy: no attempt is spent)
raised anything else       500     ``error`` with the traceback, retryable
lost its lease             409     nothing: the task runs elsewhere now
=========================  ======  ===================================================
"""

from __future__ import annotations

import asyncio
import math
import traceback
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pydantic_core import PydanticSerializationError, to_json, to_jsonable_python

from sdk.errors import Cancelled, Fail, LeaseLost, Retry
from sdk.wire import ErrorIn, ResultIn

__all__ = ["Stop", "Verdict", "verdict_of"]

_MAX_ERROR = 65_536
_MAX_TRACEBACK = 262_144


class Stop(StrEnum):
    """Why the worker stopped a task before it ended by itself."""

    CANCEL = "cancel"  # the gateway asked (heartbeat answer)
    LEASE_LOST = "lease lost"  # a callback got 409: the task was dispatched again
    SHUTDOWN = "shutdown"  # the worker is shutting down


@dataclass(frozen=True)
class Verdict:
    """The outcome of one attempt: the inline answer's status, and the callback's body."""

    status: int
    final: ResultIn | ErrorIn
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def body(self) -> bytes:
        """The inline answer's body: the result itself, or the error."""
        if isinstance(self.final, ResultIn):
            return to_json(self.final.result)
        return self.final.model_dump_json(exclude_none=True).encode()


CANCELLED = Verdict(422, ErrorIn(error="cancelled", retryable=False))
SHUT_DOWN = Verdict(
    503, ErrorIn(error="the worker shut down before the task finished", retryable=True)
)


def _error(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text[:_MAX_ERROR]


def _traceback(exc: BaseException) -> str:
    text = "".join(traceback.format_exception(exc))
    return text[-_MAX_TRACEBACK:]


def success(value: Any) -> Verdict:
    try:
        result = to_jsonable_python(value)
    except PydanticSerializationError as e:
        error = f"the result is not JSON-serialisable: {e}"[:_MAX_ERROR]
        return Verdict(422, ErrorIn(error=error, retryable=False))
    return Verdict(200, ResultIn(result=result))


def failure(exc: BaseException) -> Verdict | None:
    """The verdict of a task that raised ``exc``; ``None`` when it must end quietly."""
    if isinstance(exc, LeaseLost):
        return None
    if isinstance(exc, Cancelled):
        return CANCELLED
    if isinstance(exc, Retry):
        error = ErrorIn(error=exc.message[:_MAX_ERROR], retryable=True, retry_delay=exc.delay)
        headers = {} if exc.delay is None else {"retry-after": str(math.ceil(exc.delay))}
        return Verdict(500, error, headers)
    if isinstance(exc, Fail):
        return Verdict(422, ErrorIn(error=exc.reason[:_MAX_ERROR], retryable=False))
    error = ErrorIn(error=_error(exc), traceback=_traceback(exc), retryable=True)
    return Verdict(500, error)


def verdict_of(future: asyncio.Future[Any], stop: Stop | None) -> Verdict | None:
    """The verdict of a finished task; ``None`` when it must end quietly (lease lost)."""
    if stop is Stop.LEASE_LOST:
        return None
    if future.cancelled():
        return SHUT_DOWN if stop is Stop.SHUTDOWN else CANCELLED
    exc = future.exception()
    if exc is None:
        return success(future.result())
    return failure(exc)
