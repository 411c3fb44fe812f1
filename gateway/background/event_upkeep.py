"""The events' upkeep, beside the recoverer: finishing events whose accepting gateway stopped
half way, and deleting events past the retention.

Each step claims the pending events whose lease ran out (``gateway.store.events``: one script
on the pending index, which moves each claimed entry a lease ahead, so two gateways do not
finish the same event at once; were they to, the consumers are idempotent) and hands each to
every consumer again; and, at most every ``sweep_interval`` seconds, deletes up to a batch of
events accepted longer than ``event_retention`` ago.

A :class:`~gateway.background.due_loop.DueLoop` drives it: after each step it reads when the
next pending entry or the oldest event's end of retention is due, and sleeps until then (at
least ``interval``, at most ``max_sleep``), so a gateway with no events sends Redis nothing
between its rescans. An event this gateway accepts wakes it (:meth:`EventUpkeep.notice`) when
its lease ends before the loop would wake; one accepted by another gateway that then stopped is
found at the next rescan (``rescan_interval``) or the next wake-up, whichever comes first.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from gateway.background.due_loop import DueLoop
from gateway.services.events import SWEEP_BATCH, EventService
from gateway.store.clock import Clock

logger = logging.getLogger(__name__)

INTERVAL = 1.0
"""Shortest time between steps, in seconds."""


@dataclass(frozen=True, slots=True)
class Upkept:
    finished: int
    swept: int


class EventUpkeep:
    def __init__(
        self,
        events: EventService,
        clock: Clock,
        *,
        sweep_interval: float,
        max_sleep: float = 60.0,
        interval: float = INTERVAL,
    ) -> None:
        self._events = events
        self._clock = clock
        self._sweep_ms = round(sweep_interval * 1000)
        self._next_sweep_ms = 0
        self._next_due: int | None = None  # when the loop wakes next, as last read
        self._loop = DueLoop(
            "event upkeep",
            self._tick,
            self.earliest,
            clock,
            interval=interval,
            max_sleep=max_sleep,
        )

    @property
    def stalled(self) -> bool:
        return self._loop.stalled

    async def step(self, now_ms: int | None = None) -> Upkept:
        """Finish the due pending events, and sweep when its time has come."""
        now = self._clock.now_ms() if now_ms is None else now_ms
        finished = await self._events.finish_due(now)
        swept = 0
        if now >= self._next_sweep_ms:
            swept = await self._events.sweep(now)
            # A full batch: more may be past the retention, so sweep again at the next step.
            self._next_sweep_ms = now if swept >= SWEEP_BATCH else now + self._sweep_ms
        return Upkept(finished, swept)

    async def earliest(self) -> int | None:
        """When the next step is due: the earliest pending entry's time, or the end of the
        oldest event's retention (no sooner than the next sweep); None when there is no
        event."""
        pending, oldest = await self._events.next_due()
        sweep = None if oldest is None else max(oldest, self._next_sweep_ms)
        found = [due for due in (pending, sweep) if due is not None]
        self._next_due = min(found) if found else None
        return self._next_due

    def notice(self, due_ms: int) -> None:
        """Something is due at ``due_ms`` (an event accepted here, its lease's end; or Redis
        is reachable again): wake the loop if it would sleep past it."""
        if self._next_due is None or due_ms < self._next_due:
            self._next_due = due_ms
            self._loop.notice(due_ms)

    async def run(self) -> None:
        await self._loop.run()

    def stop(self) -> None:
        self._loop.stop()

    async def _tick(self) -> bool:
        try:
            await self.step()
        except Exception:
            logger.exception("the event upkeep failed; it runs again soon")
            return False
        return True
