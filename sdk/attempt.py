"""One attempt of a task on this worker: run it, keep its lease alive, report how it ended.

An :class:`Attempt` starts the task function at once — an ``async def`` as an asyncio task, a
plain function in a worker thread — together with its automatic heartbeats. The worker
(:mod:`sdk.runner`) then waits for its :attr:`~Attempt.future` within the inline window and,
if it :meth:`~Attempt.ended`, answers the push with its verdict; else it hands it to
:meth:`Attempt.supervise`, which waits for the end and sends the verdict as a callback.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import httpx

from sdk.callbacks import CallbackChannel
from sdk.context import AsyncContext, Context, TaskInfo
from sdk.errors import ApiError, LeaseLost
from sdk.outcomes import CANCELLED, SHUT_DOWN, Stop, Verdict, verdict_of
from sdk.tasks import TaskFunction
from sdk.wire import PushBody

__all__ = ["Attempt"]

log = logging.getLogger(__name__)

MIN_HEARTBEAT_INTERVAL = 0.1


class Attempt:
    """A task function running for one push, with its callback channel."""

    def __init__(
        self,
        fn: TaskFunction[Any, Any],
        push: PushBody,
        channel: CallbackChannel,
        heartbeat_interval: float | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.fn = fn
        self.push = push
        self.channel = channel
        self.stopped: Stop | None = None
        self._heartbeat_interval = heartbeat_interval
        self._clock = clock
        self._cancel = threading.Event()
        self._abandoned = asyncio.Event()
        self._future: asyncio.Future[Any] | None = None
        self._heartbeats: asyncio.Task[None] | None = None

    @property
    def future(self) -> asyncio.Future[Any]:
        assert self._future is not None, "the attempt has not started"
        return self._future

    def context(self) -> AsyncContext | Context:
        push = self.push
        info = TaskInfo(
            push.id, push.name, push.queue, push.attempt, push.checkpoint, push.deadline
        )
        if self.fn.is_async:
            return AsyncContext(info, self.channel, self._cancel)
        return Context(info, self.channel, asyncio.get_running_loop(), self._cancel)

    def start(self, args: Sequence[Any], kwargs: dict[str, Any]) -> None:
        """Start the function with arguments laid out by ``fn.signature.layout``."""
        fn = self.fn.fn
        if self.fn.is_async:
            self._future = asyncio.ensure_future(fn(*args, **kwargs))
        else:
            self._future = asyncio.ensure_future(asyncio.to_thread(fn, *args, **kwargs))
        self._heartbeats = asyncio.create_task(self._beat())
        self._future.add_done_callback(lambda _: self._stop_heartbeats())  # none after the end

    def ended(self) -> bool:
        """True once the function has ended."""
        return self.future.done()

    def verdict(self) -> Verdict | None:
        """How the attempt ended; ``None`` when it must end quietly (lease lost)."""
        if self.channel.lost:
            return None
        if not self.future.done():  # a worker thread, abandoned at shutdown
            return CANCELLED if self.stopped is Stop.CANCEL else SHUT_DOWN
        return verdict_of(self.future, self.stopped)

    def stop(self, why: Stop) -> None:
        """Stop the function: cancel an ``async def``, flag a thread (its next heartbeat raises).

        At shutdown a thread cannot be stopped, so it is abandoned: the verdict is sent now.
        """
        if self.stopped is None:
            self.stopped = why
        self._cancel.set()
        if self.fn.is_async:
            self.future.cancel()
        elif why is Stop.SHUTDOWN:
            self._abandoned.set()

    async def supervise(self) -> None:
        """Wait for the end in the background, then send the verdict as the final callback."""
        abandoned = asyncio.ensure_future(self._abandoned.wait())
        try:
            await asyncio.wait({self.future, abandoned}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            abandoned.cancel()
            self._stop_heartbeats()
        verdict = self.verdict()
        if verdict is None:
            log.info("task %s (%s): lease lost, stopped quietly", self.push.id, self.push.name)
            return
        await self.channel.finish(verdict.final)

    def _stop_heartbeats(self) -> None:
        if self._heartbeats is not None:
            self._heartbeats.cancel()

    def _interval(self) -> float:
        if self._heartbeat_interval is not None:
            return self._heartbeat_interval
        left = (self.channel.lease_expires_at - self._clock()).total_seconds()
        return max(left / 3, MIN_HEARTBEAT_INTERVAL)

    async def _beat(self) -> None:
        while not self.channel.lost:
            await asyncio.sleep(self._interval())
            try:
                cancel_requested = await self.channel.heartbeat(None)
            except LeaseLost:
                log.info("task %s: heartbeat refused, the lease is stale", self.push.id)
                self.stop(Stop.LEASE_LOST)
                return
            except (ApiError, httpx.TransportError) as e:
                log.warning("task %s: heartbeat failed: %s", self.push.id, e)
                continue
            if cancel_requested and self.stopped is None:
                log.info("task %s: cancel requested by the gateway", self.push.id)
                self.stop(Stop.CANCEL)
