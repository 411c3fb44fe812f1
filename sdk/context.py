"""What a running task sees of its attempt: :class:`AsyncContext` and :class:`Context`.

A task function that declares a ``ctx`` parameter gets one: an :class:`AsyncContext`
(awaitable methods) when it is ``async def``, a :class:`Context` (blocking methods, safe to call
from the worker thread it runs in) otherwise. Both reach the gateway through a
:class:`Channel`; under a :class:`~sdk.worker.Worker` that is the attempt's callbacks, and when a
task function is simply called, a :class:`DetachedChannel` that only logs locally.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar

from pydantic import JsonValue

from sdk.errors import Cancelled

__all__ = ["AsyncContext", "Channel", "Context", "DetachedChannel", "TaskInfo"]

T = TypeVar("T")

log = logging.getLogger(__name__)


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

    async def log(self, message: str, level: str) -> None: ...


class DetachedChannel:
    """The channel of a task called directly, outside a worker: nothing leaves the process."""

    def __init__(self) -> None:
        self.checkpoints: list[JsonValue] = []

    async def heartbeat(self, progress: float | None) -> bool:
        return False

    async def checkpoint(self, state: JsonValue) -> None:
        self.checkpoints.append(state)

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


class _Base:
    def __init__(self, info: TaskInfo, channel: Channel, cancel: CancelFlag | None = None) -> None:
        self.info = info
        self._channel = channel
        self._cancel: CancelFlag = cancel or StopFlag()

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
    def cancelled(self) -> bool:
        """True once the gateway has asked this task to stop, or the worker is shutting down
        and stopped it."""
        return self._cancel.is_set()

    def _before_heartbeat(self) -> None:
        """A task already told to stop (cancel, or the worker's shutdown) stops at its next
        heartbeat without a call to the gateway."""
        if self._cancel.is_set():
            raise Cancelled(f"task {self.id} was cancelled")

    def _after_heartbeat(self, cancel_requested: bool) -> None:
        if cancel_requested:
            self._cancel.set()
        self._before_heartbeat()

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
    ) -> None:
        super().__init__(info, channel, cancel)
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
