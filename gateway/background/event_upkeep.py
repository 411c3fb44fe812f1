"""The events' upkeep, beside the recoverer: finishing events whose accepting gateway stopped
half way, and deleting events past the retention.

Each step claims the pending events whose lease ran out (``gateway.store.events``: one script
on the pending index, which moves each claimed entry a lease ahead, so two gateways do not
finish the same event at once; were they to, the consumers are idempotent) and hands each to
every consumer again; and, every ``sweep_interval`` seconds, deletes up to a batch of events
accepted longer than ``event_retention`` ago. It runs as an APScheduler job every
:data:`INTERVAL` seconds on every gateway.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from gateway.services.events import EventService
from gateway.store.clock import Clock

logger = logging.getLogger(__name__)

JOB_ID = "event-upkeep"
INTERVAL = 1.0
"""Seconds between steps: a pending event waits its lease (10 s) and at most this much more."""


@dataclass(frozen=True, slots=True)
class Upkept:
    finished: int
    swept: int


class EventUpkeep:
    def __init__(self, events: EventService, clock: Clock, *, sweep_interval: float) -> None:
        self._events = events
        self._clock = clock
        self._sweep_ms = round(sweep_interval * 1000)
        self._next_sweep_ms = 0

    async def step(self, now_ms: int | None = None) -> Upkept:
        """Finish the due pending events, and sweep when its time has come."""
        now = self._clock.now_ms() if now_ms is None else now_ms
        finished = await self._events.finish_due(now)
        swept = 0
        if now >= self._next_sweep_ms:
            swept = await self._events.sweep(now)
            # A full batch: more may be past the retention, so sweep again at the next step.
            self._next_sweep_ms = now if swept >= 1000 else now + self._sweep_ms
        return Upkept(finished, swept)

    async def step_job(self) -> None:
        """The scheduled step, logging a failure instead of raising."""
        try:
            await self.step()
        except asyncio.CancelledError:
            logger.debug("the event upkeep was stopped mid-run by shutdown")
        except Exception:
            logger.exception("the event upkeep failed; it runs again at its next time")

    def schedule(self, scheduler: AsyncIOScheduler, interval: float = INTERVAL) -> None:
        """Add the step job to ``scheduler``: one instance at a time, missed runs coalesced."""
        scheduler.add_job(
            self.step_job,
            "interval",
            seconds=interval,
            id=JOB_ID,
            name=JOB_ID,
            max_instances=1,
            coalesce=True,
            replace_existing=True,
        )
