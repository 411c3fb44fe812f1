"""One clock for leases and schedules: the Redis server's.

Gateways with skewed wall clocks must agree on when a lease expires, so every "now" handed to a
script comes from :class:`RedisClock`, which measures the offset between this host's clock and
Redis's ``TIME`` and re-measures it periodically. Tests use :class:`ManualClock` and move it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from gateway.core.backoff import loop_retry_delay


class Clock(Protocol):
    def now_ms(self) -> int:
        """Milliseconds since the Unix epoch, on the shared clock."""
        ...


class RedisClock:
    """This host's clock corrected by its measured offset from the Redis server's ``TIME``
    (read by ``server_ms``, which the store provides)."""

    def __init__(self, server_ms: Callable[[], Awaitable[float]]) -> None:
        self._server_ms = server_ms
        self._offset_ms = 0.0

    async def sync(self) -> None:
        """Measure the offset, halving the round trip as NTP does."""
        before = time.time()
        server_ms = await self._server_ms()
        after = time.time()
        self._offset_ms = server_ms - (before + after) * 500

    async def sync_within(self, seconds: float) -> None:
        """:meth:`sync`, tried again after a failure (a capped backoff of at most half a
        second: a Redis that comes back is measured within that) for up to ``seconds``; raises
        the last failure. The periodic sync runs this, so one failed measurement (Redis down, or
        a pooled connection it closed when it restarted) does not leave the old offset in use
        for a whole period -- Redis may now be another host, with another clock."""
        deadline = time.monotonic() + seconds
        failures = 0
        while True:
            try:
                await self.sync()
                return
            except Exception:
                failures += 1
                pause = loop_retry_delay(0, failures)
                if time.monotonic() + pause > deadline:
                    raise
                await asyncio.sleep(pause)

    @property
    def offset_ms(self) -> float:
        return self._offset_ms

    def now_ms(self) -> int:
        return int(time.time() * 1000 + self._offset_ms)


class ManualClock:
    """A clock that moves only when told to."""

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self._now_ms = now_ms

    def now_ms(self) -> int:
        return self._now_ms

    def advance(self, ms: int) -> None:
        self._now_ms += ms
