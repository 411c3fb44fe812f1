"""What a running task sees of its attempt: :class:`AsyncContext` and :class:`Context`.

A task function that declares a ``ctx`` parameter gets one: an :class:`AsyncContext`
(awaitable methods) when it is ``async def``, a :class:`Context` (blocking methods, safe to call
from the worker thread it runs in) otherwise. Both reach the gateway through a
:class:`Channel`; under a :class:`~sdk.worker.Worker` that is the attempt's callbacks, and when a
task function is simply called, a :class:`DetachedChannel` that only logs locally.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Callable, Coroutine, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from pydantic import JsonValue
from pydantic_core import to_jsonable_python

from sdk.context_parts import (
    CancelFlag,
    Channel,
    DetachedChannel,
    StopFlag,
    TaskInfo,
    TimeBudget,
    Waits,
)
from sdk.errors import Cancelled, DuplicateStep, HandOver, Sleep

__all__ = [
    "AsyncContext",
    "CancelFlag",
    "Channel",
    "Context",
    "DetachedChannel",
    "StopFlag",
    "TaskInfo",
    "TimeBudget",
]

T = TypeVar("T")

log = logging.getLogger(__name__)


class _Base(Waits):
    def __init__(
        self,
        info: TaskInfo,
        channel: Channel,
        cancel: CancelFlag | None = None,
        budget: TimeBudget | None = None,
    ) -> None:
        self.info = info
        self._channel = channel
        self._cancel: CancelFlag = cancel or StopFlag()
        self._names: set[str] = set()  # step and sleep names used in this attempt
        self._counts: dict[str, int] = {}
        self._budget = budget
        self._longest: float | None = None  # the longest step run (and recorded) here, seconds

    @property
    def id(self) -> str:
        """The task's id; the same in every attempt, so usable as an idempotency key."""
        return self.info.id

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def queue(self) -> str:
        return self.info.queue

    @property
    def attempt(self) -> int:
        """This attempt's number, from 1."""
        return self.info.attempt

    @property
    def previous_checkpoint(self) -> JsonValue:
        """The last state a previous attempt saved with ``checkpoint``, else ``None``."""
        return self.info.previous_checkpoint

    @property
    def deadline(self) -> datetime | None:
        """The hard end of this attempt (the task's max run time), when known."""
        return self.info.deadline

    @property
    def time_left(self) -> float | None:
        """Seconds left before this attempt's time limit, when the worker knows one
        (``Worker(time_limit=...)``, a Lambda invocation), else ``None``."""
        return None if self._budget is None else self._budget.left()

    @property
    def cancelled(self) -> bool:
        """True once the gateway has asked this task to stop, or the worker is shutting down
        and stopped it."""
        return self._cancel.is_set()

    def step_name(self, prefix: str) -> str:
        """``prefix#1``, ``prefix#2``, ... on each call in this attempt: unique step names for
        a loop whose iterations run in the same order in every attempt."""
        n = self._counts.get(prefix, 0) + 1
        self._counts[prefix] = n
        return f"{prefix}#{n}"

    def _replayed(self, name: str) -> bool:
        """Claim ``name`` for this attempt; True when an earlier attempt recorded it."""
        if name in self._names:
            raise DuplicateStep(
                f"step name {name!r} is used twice in this attempt: give each step (and each "
                'loop iteration) its own name, e.g. f"page-{n}" or ctx.step_name("page")'
            )
        self._names.add(name)
        return name in self.info.steps

    def _fit(self, name: str) -> float:
        """Before running the step ``name``: hand the task over (:class:`~sdk.errors.HandOver`)
        when the time left before the limit is less than the longest step this attempt has run
        plus the margin. The first step an attempt runs always runs, so every attempt makes
        progress. Returns the step's start, for :meth:`_ran`."""
        if self._budget is not None and self._longest is not None:
            left = self._budget.left()
            needed = self._longest + self._budget.margin
            if left < needed:
                raise HandOver(name, left, needed)
        return time.monotonic()

    def _ran(self, began: float) -> None:
        """A step that began at ``began`` has run and been recorded."""
        took = time.monotonic() - began
        if self._longest is None or took > self._longest:
            self._longest = took

    def _wake(self, name: str, until: datetime) -> tuple[datetime, bool]:
        """The sleep ``name``'s wake time (the recorded one on replay), and whether it is
        yet to be recorded. A sleep recorded and past is done: nothing to do."""
        if until.tzinfo is None:
            raise ValueError("sleep_until needs an aware datetime (with a timezone)")
        if self._replayed(name):
            recorded = self.info.steps[name]
            wake = recorded.get("until") if isinstance(recorded, dict) else None
            return (datetime.fromisoformat(wake) if isinstance(wake, str) else until), False
        return until, True

    def _before_heartbeat(self) -> None:
        """A task already told to stop (cancel, or the worker's shutdown) stops at its next
        heartbeat without a call to the gateway."""
        if self._cancel.is_set():
            raise Cancelled(f"task {self.id} was cancelled")

    def _after_heartbeat(self, cancel_requested: bool) -> None:
        if cancel_requested:
            self._cancel.set()
        self._before_heartbeat()

    def _after_step(self, cancel_requested: bool) -> None:
        """A step's answer that asks the task to stop stops it as a heartbeat's would (the
        step is recorded: a later attempt, if any, replays it)."""
        if cancel_requested:
            self._cancel.set()
            raise Cancelled(f"task {self.id} was cancelled")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r}, name={self.name!r}, attempt={self.attempt})"


class AsyncContext(_Base):
    """The context of an ``async def`` task."""

    async def heartbeat(self, progress: float | None = None) -> None:
        """Extend the lease, reporting ``progress`` (0 to 1) if given.

        Raises :class:`~sdk.errors.Cancelled` when the gateway asks the task to stop, or the
        worker is shutting down.
        """
        self._before_heartbeat()
        self._after_heartbeat(await self._channel.heartbeat(progress))

    async def checkpoint(self, state: JsonValue) -> None:
        """Save ``state``; a later attempt of this task finds it in ``previous_checkpoint``."""
        await self._channel.checkpoint(state)

    async def step(self, name: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` (awaited when it returns an awaitable) once per task: its
        result, as JSON, is recorded with the task before this returns, and a later attempt
        gets the recorded result back without running ``fn``. Returns the JSON result (the
        same value in every attempt). ``name`` may be used once per attempt
        (:class:`~sdk.errors.DuplicateStep`). On a worker that knows its time limit, a step
        that would not fit before it raises :class:`~sdk.errors.HandOver` instead of running:
        the task goes on in a fresh attempt, none spent (docs/durable.md, "Time limits").
        Raises :class:`~sdk.errors.Cancelled`, once the step is recorded, when the gateway's
        answer asks the task to stop (as a heartbeat's does)."""
        if self._replayed(name):
            return self.info.steps[name]
        began = self._fit(name)
        value = fn(*args, **kwargs)
        if inspect.isawaitable(value):
            value = await value
        result: JsonValue = to_jsonable_python(value)
        cancel_requested = await self._channel.step(name, result)
        self._ran(began)
        self._after_step(cancel_requested)
        return result

    async def sleep(self, name: str, delay: timedelta) -> None:
        """A durable sleep: end this attempt and come back after ``delay`` without holding a
        worker or spending an attempt (raises :class:`~sdk.errors.Sleep`, which the worker
        turns into the ``sleep`` callback). Once the task is back, the sleep ``name`` counts
        as done and this returns at once."""
        await self.sleep_until(name, datetime.now(UTC) + delay)

    async def sleep_until(self, name: str, until: datetime) -> None:
        """Like :meth:`sleep`, until an aware datetime."""
        wake, record = self._wake(name, until)
        if record:
            self._after_step(await self._channel.step(name, {"until": wake.isoformat()}))
        if wake > datetime.now(UTC):
            raise Sleep(name, wake)

    async def wait_for_event(
        self,
        step: str,
        *,
        event: str,
        match: Mapping[str, JsonValue] | None = None,
        timeout: float | timedelta,
        lookback: float | timedelta = 0,
    ) -> JsonValue:
        """Wait for an event without holding a worker: end this attempt (raises
        :class:`~sdk.errors.WaitForEvent`, which the worker turns into the ``wait`` callback)
        until an event named ``event`` whose data has every field of ``match`` at the same
        value is accepted (``POST /v1/events``), or ``timeout`` (seconds) passes; no attempt
        is spent. The task is then pushed again, and this returns the step ``step``'s result:
        the event as ``{"id", "name", "data"}``, or ``None`` at the timeout. An event accepted
        before the wait was recorded counts only within ``lookback`` (seconds; docs/durable.md,
        "Waiting for an event")."""
        return self._awaited(step, event, match, timeout, lookback)

    async def invoke(
        self,
        step: str,
        task: Any,
        /,
        *args: Any,
        queue: str | None = None,
        timeout: float | timedelta = 86_400.0,
        **kwargs: Any,
    ) -> JsonValue:
        """Enqueue the child task ``task`` (an ``@task`` function, or a task name) with
        ``args``/``kwargs`` in ``queue`` (the function's, else this task's) and end this
        attempt until it ends, without holding a worker or spending an attempt; on the next
        attempt return its result, or raise :class:`~sdk.errors.ChildFailed` (it failed, was
        dead-lettered or cancelled, or ``timeout`` seconds passed first). Recorded as the step
        ``step``: the same step invokes the same child once (docs/durable.md)."""
        return self._invoked(step, task, args, kwargs, queue, timeout)

    async def call(
        self,
        step: str,
        url: str,
        *,
        method: str | None = None,
        json: Any = None,
        body: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | timedelta = 60.0,
    ) -> JsonValue:
        """Have the gateway make this HTTP request (POST when ``json`` or ``body`` is given,
        else GET, unless ``method`` says) and end this attempt until it answers, without
        holding a worker or spending an attempt; on the next attempt return ``{"status",
        "headers", "body"}`` (any status), or raise :class:`~sdk.errors.CallFailed` when no
        answer came. Recorded as the step ``step``; the request carries ``Idempotency-Key:
        <task id>:<step>`` and is made at least once (docs/durable.md)."""
        return self._called(step, url, method, json, body, headers, timeout)

    async def log(self, message: str, level: str = "info") -> None:
        """Add a line to the task's log, kept by the gateway."""
        await self._channel.log(message, level)


class Context(_Base):
    """The context of a plain (``def``) task, which runs in a worker thread.

    Its methods block until the gateway has answered; they run the call on the worker's event
    loop, so they must not be called from that loop's own thread.
    """

    def __init__(
        self,
        info: TaskInfo,
        channel: Channel,
        loop: asyncio.AbstractEventLoop | None = None,
        cancel: CancelFlag | None = None,
        budget: TimeBudget | None = None,
    ) -> None:
        super().__init__(info, channel, cancel, budget)
        self._loop = loop

    def _run(self, call: Coroutine[Any, Any, T]) -> T:
        if self._loop is None:
            return _run_now(call)
        return asyncio.run_coroutine_threadsafe(call, self._loop).result()

    def heartbeat(self, progress: float | None = None) -> None:
        """Extend the lease, reporting ``progress`` (0 to 1) if given.

        Raises :class:`~sdk.errors.Cancelled` when the gateway asks the task to stop, or the
        worker is shutting down.
        """
        self._before_heartbeat()
        self._after_heartbeat(self._run(self._channel.heartbeat(progress)))

    def checkpoint(self, state: JsonValue) -> None:
        """Save ``state``; a later attempt of this task finds it in ``previous_checkpoint``."""
        self._run(self._channel.checkpoint(state))

    def step(self, name: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` once per task, as :meth:`AsyncContext.step` does (here
        in the task's own thread; ``fn`` is a plain function)."""
        if self._replayed(name):
            return self.info.steps[name]
        began = self._fit(name)
        result: JsonValue = to_jsonable_python(fn(*args, **kwargs))
        cancel_requested = self._run(self._channel.step(name, result))
        self._ran(began)
        self._after_step(cancel_requested)
        return result

    def sleep(self, name: str, delay: timedelta) -> None:
        """A durable sleep, as :meth:`AsyncContext.sleep`."""
        self.sleep_until(name, datetime.now(UTC) + delay)

    def sleep_until(self, name: str, until: datetime) -> None:
        """Like :meth:`sleep`, until an aware datetime."""
        wake, record = self._wake(name, until)
        if record:
            self._after_step(self._run(self._channel.step(name, {"until": wake.isoformat()})))
        if wake > datetime.now(UTC):
            raise Sleep(name, wake)

    def wait_for_event(
        self,
        step: str,
        *,
        event: str,
        match: Mapping[str, JsonValue] | None = None,
        timeout: float | timedelta,
        lookback: float | timedelta = 0,
    ) -> JsonValue:
        """Wait for an event without holding a worker, as :meth:`AsyncContext.wait_for_event`."""
        return self._awaited(step, event, match, timeout, lookback)

    def invoke(
        self,
        step: str,
        task: Any,
        /,
        *args: Any,
        queue: str | None = None,
        timeout: float | timedelta = 86_400.0,
        **kwargs: Any,
    ) -> JsonValue:
        """Invoke a child task without holding a worker, as :meth:`AsyncContext.invoke`."""
        return self._invoked(step, task, args, kwargs, queue, timeout)

    def call(
        self,
        step: str,
        url: str,
        *,
        method: str | None = None,
        json: Any = None,
        body: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | timedelta = 60.0,
    ) -> JsonValue:
        """Have the gateway make an HTTP request, as :meth:`AsyncContext.call`."""
        return self._called(step, url, method, json, body, headers, timeout)

    def log(self, message: str, level: str = "info") -> None:
        """Add a line to the task's log, kept by the gateway."""
        self._run(self._channel.log(message, level))


def _run_now(call: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (a detached channel's) without an event loop."""
    try:
        call.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    call.close()
    raise RuntimeError("a context without an event loop can only use a detached channel")
