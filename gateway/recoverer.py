"""The recoverer: moves due scheduled tasks to ready, expires leases, sweeps finished tasks.

One :class:`Recoverer` runs in every gateway process, all of them on the same Redis, driven by
APScheduler (:meth:`Recoverer.schedule`). Correctness never depends on there being just one:

- promoting and sweeping are single scripts, so two gateways doing it at once each move or
  delete a task at most once between them;
- expiring reads the expired leases first and then records each expiry with the finish script,
  fenced by the lease token it read. Whatever happened in between -- another gateway recorded
  the expiry (``STALE``), a heartbeat extended the lease (``ALIVE``), the worker's result
  arrived (``STALE``) -- the script changes nothing, so every attempt expires at most once.

Tests drive :meth:`Recoverer.step` and :meth:`Recoverer.sweep` one call at a time with a
:class:`~gateway.clock.ManualClock`; nothing here sleeps.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, fields

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from gateway.backoff import retry_delay_ms
from gateway.clock import Clock
from gateway.store.dependencies import OUTBOX_BATCH, DependencyStore
from gateway.store.queues import QueueStore
from gateway.store.tasks import Expired, Fence, Finish, Finished, TaskStore
from sdk.wire import AttemptOutcome, Backoff, StallPolicy, TaskState

__all__ = ["RECOVER_JOB_ID", "SWEEP_JOB_ID", "Recoverer", "RecoveryReport"]

logger = logging.getLogger(__name__)

RECOVER_JOB_ID = "jobgate.recover"
SWEEP_JOB_ID = "jobgate.sweep"
EXPIRED_TEXT = "lease expired"
STALLED_TEXT = "heartbeats stopped"
RELINK_AFTER_MS = 10_000


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What one :meth:`Recoverer.step` did, summed over every queue.

    ``expired`` counts the expiries this step recorded; each ended as ``retried`` (back to
    scheduled or queued), ``failed``, ``dead`` or ``cancelled``. ``skipped`` counts leases read
    as expired that changed before their expiry was recorded (a heartbeat, a result, another
    gateway): nothing was done to them. ``errors`` counts queues whose recovery raised (logged).
    """

    promoted: int = 0
    expired: int = 0
    retried: int = 0
    failed: int = 0
    dead: int = 0
    cancelled: int = 0
    skipped: int = 0
    errors: int = 0
    stalled: int = 0  # attempts ended early because heartbeats stopped (stall policy redispatch)
    notified: int = 0  # dependency notices delivered to other queues

    def __add__(self, other: RecoveryReport) -> RecoveryReport:
        return RecoveryReport(
            **{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)}
        )


def _tally(results: list[Finished]) -> RecoveryReport:
    """Count the finish script's answers to expiries."""
    counts = dict.fromkeys(("retried", "failed", "dead", "cancelled", "skipped"), 0)
    for r in results:
        if r.fence is not Fence.OK:
            counts["skipped"] += 1
        elif r.state in (TaskState.SCHEDULED, TaskState.QUEUED):
            counts["retried"] += 1
        elif r.state in (TaskState.FAILED, TaskState.DEAD, TaskState.CANCELLED):
            counts[r.state.value] += 1
    return RecoveryReport(expired=len(results) - counts["skipped"], **counts)


class Recoverer:
    """Promotes due tasks and expires leases of every registered queue, and sweeps them.

    ``on_ready(queue)`` is called when a step put tasks of ``queue`` in its ready set, so this
    process's dispatcher can claim them without waiting for the wake channel. ``batch`` bounds
    each script call; a step loops until a queue has nothing more due.
    """

    def __init__(
        self,
        tasks: TaskStore,
        queues: QueueStore,
        clock: Clock,
        *,
        on_ready: Callable[[str], None] = lambda q: None,
        rng: random.Random | None = None,
        batch: int = 500,
        dependencies: DependencyStore | None = None,
    ) -> None:
        if batch < 1:
            raise ValueError("batch must be at least 1")
        self._tasks = tasks
        self._queues = queues
        self._dependencies = dependencies
        self._clock = clock
        self._on_ready = on_ready
        self._rng = rng or random.Random()
        self._batch = batch
        self._failures: dict[str, int] = {}

    async def step(self, now_ms: int | None = None) -> RecoveryReport:
        """Promote due scheduled tasks and record expired leases, in every queue.

        A queue whose recovery raises is logged and counted in ``errors``, and the step goes on
        with the next queue, so one broken queue cannot stall the others. Listing the queues
        is not guarded: when Redis is unreachable, the step raises.
        """
        now = self._clock.now_ms() if now_ms is None else now_ms
        report = RecoveryReport()
        for queue in await self._queues.names():
            try:
                report += await self._recover(queue, now)
            except Exception:
                logger.exception("recovering queue %r failed", queue)
                report += RecoveryReport(errors=1)
        return report

    async def sweep(self, now_ms: int | None = None) -> int:
        """Delete finished tasks past their queue's retention; returns how many were deleted.

        A queue whose sweep raises is logged and skipped, as in :meth:`step`.
        """
        now = self._clock.now_ms() if now_ms is None else now_ms
        deleted = 0
        for queue in await self._queues.names():
            try:
                while True:
                    # The script deletes up to ``batch`` tasks of each finished state.
                    n = await self._tasks.sweep(queue, now, self._batch)
                    deleted += n
                    if n < self._batch:
                        break
            except Exception:
                logger.exception("sweeping queue %r failed", queue)
        return deleted

    async def recover_job(self) -> None:
        """The scheduled recover job: :meth:`step`, logging a failure instead of raising."""
        await self._guard("recover", self.step)

    async def sweep_job(self) -> None:
        """The scheduled sweep job: :meth:`sweep`, logging a failure instead of raising."""
        await self._guard("sweep", self.sweep)

    def schedule(
        self, scheduler: AsyncIOScheduler, recover_interval: float, sweep_interval: float
    ) -> None:
        """Add the recover and sweep jobs to ``scheduler``; its owner starts and stops it.

        Each job runs one instance at a time; runs missed while one was late are coalesced
        into one, and a run later than one interval (at least a second) is dropped for the
        next. The jobs are coroutine methods, which the scheduler's asyncio executor awaits on
        its loop; they log failures and go on. Calling this again replaces them.
        """
        for job_id, job, interval in (
            (RECOVER_JOB_ID, self.recover_job, recover_interval),
            (SWEEP_JOB_ID, self.sweep_job, sweep_interval),
        ):
            scheduler.add_job(
                job,
                "interval",
                seconds=interval,
                id=job_id,
                name=job_id,
                max_instances=1,
                coalesce=True,
                misfire_grace_time=max(1, math.ceil(interval)),
                replace_existing=True,
            )

    async def _guard(self, name: str, run: Callable[[], Awaitable[object]]) -> None:
        """Run one job, so that it never dies: a failure is logged and the next run goes on.

        The first failure of a streak is logged with its traceback, later ones of the same
        streak only at debug level (the recover job runs several times a second), and the
        recovery once, as a warning.
        """
        try:
            await run()
        except asyncio.CancelledError:
            # The scheduler shuts down mid-run. Every change is one atomic script, so the next
            # run (here or on another gateway) simply carries on; nothing to report.
            logger.debug("the %s job was stopped mid-run by shutdown", name)
            return
        except Exception:
            failures = self._failures[name] = self._failures.get(name, 0) + 1
            if failures == 1:
                logger.exception("the %s job failed; it runs again at its next time", name)
            else:
                logger.debug("the %s job failed again (%d runs in a row)", name, failures)
            return
        failures = self._failures.pop(name, 0)
        if failures:
            logger.warning("the %s job works again after %d failed runs", name, failures)

    async def _recover(self, queue: str, now: int) -> RecoveryReport:
        promoted = await self._promote(queue, now)
        stored = await self._queues.get(queue)
        if stored is None:  # deleted since it was listed
            expired, requeued = RecoveryReport(), 0
        else:
            expired, requeued = await self._expire(queue, now, stored.policy.backoff)
            if stored.policy.stall_policy is StallPolicy.REDISPATCH:
                stalled, again = await self._redispatch_stalled(queue, now, stored.policy.backoff)
                expired += stalled
                requeued += again
        if promoted or requeued:
            self._on_ready(queue)
        return RecoveryReport(promoted=promoted) + expired + await self._notify(queue, now)

    async def _notify(self, queue: str, now: int) -> RecoveryReport:
        """Deliver this queue's dependency notices to other queues, and link again the
        cross-queue dependencies a stopped gateway left unregistered."""
        if self._dependencies is None:
            return RecoveryReport()
        notified = 0
        while True:
            n = await self._dependencies.deliver(queue, now)
            notified += n
            if n < OUTBOX_BATCH:
                break
        await self._dependencies.relink(queue, now - RELINK_AFTER_MS, now)
        return RecoveryReport(notified=notified)

    async def _redispatch_stalled(
        self, queue: str, now: int, backoff: Backoff
    ) -> tuple[RecoveryReport, int]:
        """End the attempts whose heartbeats stopped, to retry them now (stall policy
        ``redispatch``); fenced like expiries, so a heartbeat meanwhile keeps the attempt."""
        stalled = await self._tasks.stalled(queue, now, self._batch)
        if not stalled:
            return RecoveryReport(), 0
        results = await self._tasks.finish_many(
            queue,
            [
                Finish(
                    s.task_id,
                    s.token,
                    AttemptOutcome.STALLED,
                    text=STALLED_TEXT,
                    delay_ms=retry_delay_ms(s.attempt, backoff, self._rng),
                )
                for s in stalled
            ],
            now,
        )
        done = _tally(results)
        requeued = sum(r.fence is Fence.OK and r.state is TaskState.QUEUED for r in results)
        return RecoveryReport(stalled=done.expired) + done, requeued

    async def _promote(self, queue: str, now: int) -> int:
        promoted = 0
        while True:
            moved = await self._tasks.promote(queue, now, self._batch)
            promoted += moved
            if moved < self._batch:
                return promoted

    async def _expire(self, queue: str, now: int, backoff: Backoff) -> tuple[RecoveryReport, int]:
        """Record the expired leases of ``queue``; returns the counts and how many tasks went
        straight back to the ready set (a zero retry delay)."""
        report, requeued = RecoveryReport(), 0
        while True:
            leases = await self._tasks.expired(queue, now, self._batch)
            if not leases:
                return report, requeued
            results = await self._tasks.finish_many(
                queue, [self._expiry(lease, backoff) for lease in leases], now
            )
            done = _tally(results)
            report += done
            requeued += sum(r.fence is Fence.OK and r.state is TaskState.QUEUED for r in results)
            # Stop after a short batch, and after one that recorded nothing, so that a lease
            # the script keeps refusing can never make this loop spin.
            if len(leases) < self._batch or not done.expired:
                return report, requeued

    def _expiry(self, lease: Expired, backoff: Backoff) -> Finish:
        return Finish(
            lease.task_id,
            lease.token,
            AttemptOutcome.EXPIRED,
            text=EXPIRED_TEXT,
            delay_ms=retry_delay_ms(lease.attempt, backoff, self._rng),
        )
