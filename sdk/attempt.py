"""One attempt of a task on this worker: run it, keep its lease alive, report how it ended.

An :class:`Attempt` starts the task function at once — an ``async def`` as an asyncio task, a
plain function in a worker thread — together with its automatic heartbeats. The worker
(:mod:`sdk.runner`) then waits for it to be :attr:`~Attempt.settled` within the inline window
and, if it has, answers the push with its verdict; else it hands it to
:meth:`Attempt.supervise`, which waits for the end and sends the verdict as a callback.

An attempt is settled when its function has ended, or when the worker gave up waiting for it at
shutdown (:meth:`Attempt.abandon`: a thread cannot be stopped, and a cancelled coroutine may
not stop): its verdict is then the shutdown policy's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from sdk.callbacks import CallbackChannel
from sdk.context import AsyncContext, Context, StopFlag, TaskInfo, TimeBudget
from sdk.errors import ApiError, LeaseLost
from sdk.outcomes import Stop, Verdict, stopped, verdict_of
from sdk.tasks import TaskFunction
from sdk.telemetry.tracing import ProcessSpan
from sdk.wire import PushBody

__all__ = ["Attempt"]


def _fraction(value: Any) -> float | None:
    """A yielded value as a heartbeat's progress: a number from 0 to 1, else none."""
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1:
        return float(value)
    return None


log = logging.getLogger(__name__)

MIN_HEARTBEAT_INTERVAL = 0.1
PROGRESS_INTERVAL = 0.2
"""An async-generator task's yields become heartbeats at most this often (seconds): values
yielded faster are not all sent, but the last one is always the result."""


class Attempt:
    """A task function running for one push, with its callback channel."""

    def __init__(
        self,
        fn: TaskFunction[Any, Any],
        push: PushBody,
        channel: CallbackChannel,
        heartbeat_interval: float | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        trace: Mapping[str, str] | None = None,
        budget: TimeBudget | None = None,
    ) -> None:
        self.fn = fn
        self.budget = budget
        self._trace = trace or {}
        self.push = push
        self.channel = channel
        self.stopped: Stop | None = None
        self._heartbeat_interval = heartbeat_interval
        self._clock = clock
        self._cancel = StopFlag()
        self._future: asyncio.Future[Any] | None = None
        self._settled: asyncio.Future[None] | None = None
        # The first heartbeat is a timer; only an attempt that lives that long gets the task
        # that sends them (most end long before: no task to make and cancel for them).
        self._first_beat: asyncio.TimerHandle | None = None
        self._heartbeats: asyncio.Task[None] | None = None
        self._judged: tuple[Stop | None, Verdict | None] | None = None

    @property
    def future(self) -> asyncio.Future[Any]:
        """The task function's run: its value or exception."""
        assert self._future is not None, "the attempt has not started"
        return self._future

    @property
    def settled(self) -> asyncio.Future[None]:
        """Done once the function has ended, or the attempt was abandoned at shutdown."""
        assert self._settled is not None, "the attempt has not started"
        return self._settled

    def context(self) -> AsyncContext | Context:
        push = self.push
        info = TaskInfo(
            push.id,
            push.name,
            push.queue,
            push.attempt,
            push.checkpoint,
            push.deadline,
            {step.name: step.result for step in push.steps} if push.steps else {},
        )
        if self.fn.is_async:
            return AsyncContext(info, self.channel, self._cancel, self.budget)
        return Context(info, self.channel, asyncio.get_running_loop(), self._cancel, self.budget)

    def start(self, args: Sequence[Any], kwargs: dict[str, Any]) -> None:
        """Start the function with arguments laid out by ``fn.signature.layout``, under its
        span (:class:`~sdk.telemetry.tracing.ProcessSpan`), whose context the callbacks carry."""
        span = ProcessSpan(self.push, self._trace)
        self.channel.trace_headers = span.headers
        if span.span is None:  # not tracing (the common case): no span to make current or end
            self._future = self._run(args, kwargs)
        else:
            with span.current():
                self._future = self._run(args, kwargs)
            self._future.add_done_callback(span.end)
        loop = asyncio.get_running_loop()
        self._settled = loop.create_future()
        self._first_beat = loop.call_later(self._interval(), self._start_heartbeats)
        self._future.add_done_callback(lambda _: self.abandon())  # settled; no heartbeat after

    def _run(self, args: Sequence[Any], kwargs: dict[str, Any]) -> asyncio.Future[Any]:
        """The function's run: an ``async def`` as a task, a plain function in a thread."""
        fn = self.fn.fn
        if self.fn.is_generator:
            return asyncio.ensure_future(self._progress(fn(*args, **kwargs)))
        if self.fn.is_async:
            running: asyncio.Future[Any] = asyncio.ensure_future(fn(*args, **kwargs))
            return running
        return asyncio.ensure_future(asyncio.to_thread(fn, *args, **kwargs))

    async def _progress(self, values: AsyncGenerator[Any, None]) -> Any:
        """Run an async-generator task: each value it yields is sent as progress in a heartbeat
        (a number from 0 to 1 as the ``progress``; any other value keeps the lease alive only),
        at most every :data:`PROGRESS_INTERVAL` seconds, and the last one is the result. A
        cancel the heartbeat brings raises :class:`~sdk.errors.Cancelled` here, and the
        generator is closed (its ``finally`` blocks run)."""
        ctx = self.context()
        assert isinstance(ctx, AsyncContext)  # an async generator gets the async context
        loop = asyncio.get_running_loop()
        last: Any = None
        sent = -PROGRESS_INTERVAL
        try:
            async for value in values:
                last = value
                if loop.time() - sent >= PROGRESS_INTERVAL:
                    sent = loop.time()
                    await ctx.heartbeat(progress=_fraction(value))
        finally:
            await values.aclose()
        return last

    def ended(self) -> bool:
        """True once the attempt is settled: its verdict is known."""
        return self.settled.done()

    def verdict(self) -> Verdict | None:
        """How the attempt ended; ``None`` when it must end quietly (lease lost)."""
        if self.channel.lost:
            return None
        if not self.future.done():  # abandoned at shutdown
            return stopped(self.stopped)
        # Asked twice per attempt (its metrics, its answer): judged once per stop reason.
        if self._judged is None or self._judged[0] is not self.stopped:
            self._judged = (self.stopped, verdict_of(self.future, self.stopped))
        return self._judged[1]

    def stop(self, why: Stop) -> None:
        """Stop the function: cancel an ``async def``, flag a thread (its next heartbeat raises).

        A thread cannot be stopped: at shutdown it is abandoned at once, so its verdict (the
        shutdown policy's) is given now while it runs on.
        """
        if self.stopped is None:
            self.stopped = why
        self._cancel.set()
        if self.fn.is_async:
            self.future.cancel()
        elif why.shutdown:
            self.abandon()

    def abandon(self) -> None:
        """Settle the attempt without waiting any longer for its function, and stop its
        heartbeats (the function's own end calls this too)."""
        self._stop_heartbeats()
        if not self.settled.done():
            self.settled.set_result(None)

    async def supervise(self) -> None:
        """Wait for the end in the background, then send the verdict as the final callback
        (or hand the task back, when the shutdown policy says so)."""
        try:
            await asyncio.wait({self.settled})  # not `await`: cancelling must not cancel it
        finally:
            self._stop_heartbeats()
        verdict = self.verdict()
        if verdict is None:
            log.info("task %s (%s): lease lost, stopped quietly", self.push.id, self.push.name)
        elif verdict.release:
            await self.channel.release()
        elif verdict.sleep_until is not None:
            await self.channel.sleep(verdict.sleep_until)
        elif verdict.wait is not None:
            await self.channel.wait(verdict.wait)
        else:
            await self.channel.finish(verdict.final)

    def _start_heartbeats(self) -> None:
        self._first_beat = None
        self._heartbeats = asyncio.create_task(self._beat())

    def _stop_heartbeats(self) -> None:
        if self._first_beat is not None:
            self._first_beat.cancel()
            self._first_beat = None
        if self._heartbeats is not None:
            self._heartbeats.cancel()

    def _interval(self) -> float:
        if self._heartbeat_interval is not None:
            return self._heartbeat_interval
        left = (self.channel.lease_expires_at - self._clock()).total_seconds()
        return max(left / 3, MIN_HEARTBEAT_INTERVAL)

    async def _beat(self) -> None:
        """Send a heartbeat now, then one every interval."""
        import httpx  # here, not at import: a worker that sends no callback never loads it

        while not self.channel.lost:
            try:
                cancel_requested = await self.channel.heartbeat(None)
            except LeaseLost as e:
                log.info("task %s: heartbeat refused, the lease is lost: %s", self.push.id, e)
                self.stop(Stop.LEASE_LOST)
                return
            except (ApiError, httpx.TransportError) as e:
                log.warning("task %s: heartbeat failed: %s", self.push.id, e)
            else:
                if cancel_requested and self.stopped is None:
                    log.info("task %s: cancel requested by the gateway", self.push.id)
                    self.stop(Stop.CANCEL)
            await asyncio.sleep(self._interval())
