"""What a context is made of: how it reaches the gateway (:class:`Channel`; outside a worker,
:class:`DetachedChannel`), the attempt's facts (:class:`TaskInfo`), its cancel flag, its
time budget, and the waits both contexts share (:class:`Waits`). :mod:`sdk.context` builds the
contexts on them and re-exports the public names."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from pydantic import JsonValue

from sdk.errors import WaitForEvent
from sdk.wire import WaitIn

__all__ = [
    "CancelFlag",
    "Channel",
    "DetachedChannel",
    "StopFlag",
    "TaskInfo",
    "TimeBudget",
    "Waits",
]

log = logging.getLogger("sdk.context")


class CancelFlag(Protocol):
    """A task's cancel request: set once (from the event loop), read from any thread.
    A :class:`threading.Event` is one; the worker uses the lighter :class:`StopFlag`."""

    def set(self) -> None: ...

    def is_set(self) -> bool: ...


class StopFlag:
    """The :class:`CancelFlag` each attempt gets: a plain attribute, which CPython writes and
    reads whole, so a worker thread sees it once set. Nothing waits on it, so it needs none of
    a :class:`threading.Event`'s lock and condition (a few µs per attempt, 6 % of the worker's
    CPU for a no-op task)."""

    __slots__ = ("_set",)

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set


class Channel(Protocol):
    """How a context talks to the gateway about one attempt."""

    async def heartbeat(self, progress: float | None) -> bool:
        """Keep the lease alive; True when the gateway asks the task to stop."""
        ...

    async def checkpoint(self, state: JsonValue) -> None: ...

    async def step(self, name: str, result: JsonValue) -> bool:
        """Record a durable step's result with the task, before the step returns; True when
        the gateway asks the task to stop (the step is recorded all the same)."""
        ...

    async def log(self, message: str, level: str) -> None: ...


class DetachedChannel:
    """The channel of a task called directly, outside a worker: nothing leaves the process."""

    def __init__(self) -> None:
        self.checkpoints: list[JsonValue] = []
        self.steps: dict[str, JsonValue] = {}

    async def heartbeat(self, progress: float | None) -> bool:
        return False

    async def checkpoint(self, state: JsonValue) -> None:
        self.checkpoints.append(state)

    async def step(self, name: str, result: JsonValue) -> bool:
        self.steps.setdefault(name, result)
        return False

    async def log(self, message: str, level: str) -> None:
        log.log(logging.getLevelNamesMapping().get(level.upper(), logging.INFO), "%s", message)


@dataclass(frozen=True)
class TaskInfo:
    """The facts of one attempt, as the push told them."""

    id: str
    name: str
    queue: str
    attempt: int = 1
    previous_checkpoint: JsonValue = None
    deadline: datetime | None = None
    steps: Mapping[str, JsonValue] = field(default_factory=dict)
    """The durable steps earlier attempts recorded: name → result."""


@dataclass(frozen=True)
class TimeBudget:
    """The time limit of one attempt on a worker that knows it (``Worker(time_limit=...)``, a
    Lambda invocation's remaining time; the push's ``deadline`` counts too): the
    :func:`time.monotonic` instant by which the attempt must have ended, and the ``margin`` kept
    before it for handing the task over."""

    ends_at: float
    margin: float

    def left(self) -> float:
        """Seconds left before the limit."""
        return self.ends_at - time.monotonic()


class Waits:
    """The waits of both contexts (an event, a child task, an HTTP call): each returns the
    step's result recorded on a later attempt, else raises the exception that ends this attempt
    with its callback. The context provides ``info`` and ``_replayed``."""

    info: TaskInfo

    def _replayed(self, name: str) -> bool:
        raise NotImplementedError

    def _awaited(
        self,
        step: str,
        event: str,
        match: Mapping[str, JsonValue] | None,
        timeout: float | timedelta,
        lookback: float | timedelta,
    ) -> JsonValue:
        """The wait ``step``'s recorded result (the event, or None at the timeout) on a later
        attempt; else raise :class:`~sdk.errors.WaitForEvent` to end this one with the wait."""
        if self._replayed(step):
            return self.info.steps[step]
        if isinstance(timeout, timedelta):
            timeout = timeout.total_seconds()
        if isinstance(lookback, timedelta):
            lookback = lookback.total_seconds()
        wait = WaitIn(
            step=step, event=event, match=dict(match or {}), timeout=timeout, lookback=lookback
        )
        raise WaitForEvent(wait)

    def _invoked(
        self,
        step: str,
        task: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        queue: str | None,
        timeout: float | timedelta,
    ) -> JsonValue:
        """The child's result from the invoke ``step`` recorded on a later attempt
        (:class:`~sdk.errors.ChildFailed` when it did not succeed); else raise
        :class:`~sdk.errors.InvokeChild` to end this one with the invoke."""
        from sdk.invoking import child_result, invoke_request

        if self._replayed(step):
            return child_result(step, self.info.steps[step])
        raise invoke_request(step, task, args, kwargs, queue, timeout)

    def _called(self, step: str, *request: Any) -> JsonValue:
        """The answer of the call ``step`` recorded on a later attempt (:class:`~sdk.errors.
        CallFailed` when none came); else raise :class:`~sdk.errors.CallOut` (sdk/calling.py)."""
        from sdk.calling import call_answer, call_request

        if self._replayed(step):
            return call_answer(step, self.info.steps[step])
        raise call_request(step, *request)
