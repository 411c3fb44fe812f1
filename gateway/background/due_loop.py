"""A loop that runs a step whenever something is due, and costs nothing while nothing is.

The completion callback delivery and the job firing loop are both driven this way: after each
step the loop reads when the next item is due (one command), sleeps until then -- at least
``interval`` after the step began, so a busy index cannot make it spin, and at most
``max_sleep``, which bounds the delay of an item whose index entry a stopped gateway never
wrote -- and is woken early by :meth:`DueLoop.notice` (pub/sub, from any gateway).

A turn fails when its step says so (Redis did not answer) or when reading the next due time
raises. The loop is then *stalled* (:attr:`DueLoop.stalled`, which readiness reports) and tries
again soon, not after ``max_sleep``: after :func:`~gateway.core.backoff.loop_retry_delay` (from
``interval``, doubling with each failure in a row, capped at half a second), so a Redis that
comes back is used again within that cap of answering. A notice (the pub/sub connection back)
ends that wait at once too. The first turn that works clears the stall.

It stops on :meth:`DueLoop.stop` (a flag and a wake-up) rather than by cancellation alone: on
Python 3.11 a cancellation that lands as a wait ends can be lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from gateway.core.backoff import loop_retry_delay
from gateway.store.clock import Clock

__all__ = ["DueLoop"]

logger = logging.getLogger(__name__)


class DueLoop:
    """Runs ``step`` (which logs its own failures and returns whether it worked) whenever
    ``earliest()`` says it is due."""

    def __init__(
        self,
        what: str,
        step: Callable[[], Awaitable[bool]],
        earliest: Callable[[], Awaitable[int | None]],
        clock: Clock,
        *,
        interval: float,
        max_sleep: float,
    ) -> None:
        self._what = what
        self._step = step
        self._earliest = earliest
        self._clock = clock
        self._interval = interval
        self._interval_ms = round(interval * 1000)
        self._max_sleep_ms = round(max_sleep * 1000)
        self._woken = asyncio.Event()
        self._stopping = False
        self._failures = 0  # failed turns in a row

    @property
    def stalled(self) -> bool:
        """True from a failed turn until a turn works: what is due may be waiting."""
        return self._failures > 0

    def notice(self, due_ms: int) -> None:
        """Something is due at ``due_ms``, or Redis is reachable again: wake the loop if it
        sleeps past it."""
        self._woken.set()

    def stop(self) -> None:
        """Make :meth:`run` return after its current step (at once when it sleeps)."""
        self._stopping = True
        self._woken.set()

    async def run(self) -> None:
        while not self._stopping:
            began = self._clock.now_ms()
            self._woken.clear()
            worked = await self._step()
            try:
                due = await self._earliest()
            except Exception:
                if self._failures == 0:
                    logger.exception("reading when the next %s is due failed", self._what)
                worked = False
                due = None
            if self._stopping:
                return
            if worked:
                if self._failures:
                    logger.warning(
                        "the %s loop works again after %d failed turns", self._what, self._failures
                    )
                self._failures = 0
                await self._sleep(began, due)
            else:
                self._failures += 1
                await self._retry()

    async def _retry(self) -> None:
        """Wait before trying a failed turn again, or until woken."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(loop_retry_delay(self._interval, self._failures)):
                await self._woken.wait()

    async def _sleep(self, began: int, due: int | None) -> None:
        now = self._clock.now_ms()
        earliest_step = began + self._interval_ms
        wait_ms = self._max_sleep_ms if due is None else min(due - now, self._max_sleep_ms)
        wait_ms = max(wait_ms, earliest_step - now)
        if wait_ms <= 0:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait_ms / 1000):
                await self._woken.wait()
        if self._woken.is_set() and not self._stopping:
            # Woken by something new, perhaps due at once: still keep the interval.
            await asyncio.sleep(max(0, earliest_step - self._clock.now_ms()) / 1000)
