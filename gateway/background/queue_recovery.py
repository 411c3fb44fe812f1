"""The recoverer's work on one due queue: promote due tasks, record expired leases, redispatch
stalled attempts, deliver the outbox (dependency notices to other queues, ends of job runs to
their jobs), make again the durable HTTP calls whose lease ran out, sweep finished tasks.

:class:`QueueRecovery` does it for one queue at a time;
:class:`~gateway.background.recover_loop.Recoverer` decides which queues are due and when. Each
change is one script, fenced where it must be: an expiry read here and recorded by the finish
script changes nothing if the lease moved on in between (a heartbeat, a result, another
gateway's recoverer).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, fields

from gateway.core.backoff import retry_delay_ms
from gateway.dispatch.calls import CallRunner
from gateway.store.dependencies import OUTBOX_BATCH, DependencyStore
from gateway.store.scripts import RELINK_AFTER_MS
from gateway.store.tasks import Expired, Fence, Finish, Finished, TaskStore
from gateway.telemetry.metrics import Metrics
from sdk.wire import AttemptOutcome, Backoff, QueuePolicy, TaskState

__all__ = ["QueueRecovery", "RecoveryReport"]

EXPIRED_TEXT = "lease expired"
STALLED_TEXT = "heartbeats stopped"


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What one :meth:`~gateway.background.recover_loop.Recoverer.step` did, summed over the
    queues that were due.

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
    swept: int = 0  # finished tasks deleted past their queue's retention
    calls: int = 0  # durable HTTP calls claimed again after their lease ran out

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


class QueueRecovery:
    """Does the due work of one queue. ``on_ready(queue)`` is called when tasks of ``queue``
    went to its ready set; ``batch`` bounds each script call, and each kind of work loops until
    the queue has nothing more of it due. Finished tasks and dedup windows are swept at most
    every ``sweep_ms`` per queue (the reckoning puts their due time no sooner)."""

    def __init__(
        self,
        tasks: TaskStore,
        *,
        on_ready: Callable[[str], None],
        rng: random.Random,
        batch: int,
        sweep_ms: int,
        dependencies: DependencyStore | None,
        metrics: Metrics | None = None,
        calls: CallRunner | None = None,
    ) -> None:
        self._metrics = metrics or Metrics()
        self._tasks = tasks
        self._on_ready = on_ready
        self._rng = rng
        self._batch = batch
        self._sweep_ms = sweep_ms
        self._dependencies = dependencies
        self._calls = calls

    async def recover(self, queue: str, now: int) -> tuple[RecoveryReport, int | None]:
        """Everything of ``queue`` due by ``now``; returns what it did and the queue's next due
        time, reckoned afterwards (None: nothing due).

        The first script promotes and looks at the rest (``lua/recover.lua``); only the work it
        found due costs a round trip, and when it found none it also reckoned the due time, so
        a queue due only for its promotion costs that one call."""
        looked = await self._tasks.promote_and_look(queue, now, self._batch, self._sweep_ms)
        pending, policy = looked.pending, looked.policy
        if not pending:
            if looked.moved:
                self._on_ready(queue)
            return RecoveryReport(promoted=looked.moved), looked.due
        promoted = looked.moved + (await self._promote(queue, now) if "promote" in pending else 0)
        expired, requeued = RecoveryReport(), 0
        if policy is not None and "expired" in pending:
            expired, requeued = await self._expire(queue, now, policy.backoff)
        if policy is not None and "stalled" in pending:
            stalled, again = await self._redispatch_stalled(queue, now, policy.backoff)
            expired += stalled
            requeued += again
        if promoted or requeued:
            self._on_ready(queue)
        # Notices first: the sweep keeps a job's run while the outbox may hold its end.
        notified = await self._notify(queue, now, pending)
        calls = 0
        if self._calls is not None and "calls" in pending:
            calls = await self._calls.reclaim(queue, now)
        swept = await self._sweep(queue, now, policy) if "sweep" in pending else 0
        report = RecoveryReport(promoted=promoted, swept=swept, calls=calls) + expired + notified
        return report, await self._tasks.reckon_due(queue, now, self._sweep_ms)

    async def _sweep(self, queue: str, now: int, policy: QueuePolicy | None) -> int:
        """Delete the queue's finished tasks past retention (and its ended dedup windows);
        ``policy`` as just read (None: the sweep reads it)."""
        deleted = 0
        while True:
            # The script deletes up to ``batch`` tasks of each finished state.
            n = await self._tasks.sweep(queue, now, self._batch, policy)
            deleted += n
            if n < self._batch:
                return deleted

    async def _notify(self, queue: str, now: int, pending: frozenset[str]) -> RecoveryReport:
        """Deliver this queue's outbox (dependency notices to other queues, ends of job runs to
        their jobs), and link again the cross-queue dependencies a stopped gateway left
        unregistered: each when ``pending`` says it is due."""
        if self._dependencies is None:
            return RecoveryReport()
        notified = 0
        while "outbox" in pending:
            n = await self._dependencies.deliver(queue, now)
            notified += n
            if n < OUTBOX_BATCH:
                break
        if "links" in pending:
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
        finishes = [
            Finish(
                s.task_id,
                s.token,
                AttemptOutcome.STALLED,
                text=STALLED_TEXT,
                delay_ms=retry_delay_ms(s.attempt, backoff, self._rng),
            )
            for s in stalled
        ]
        results = await self._tasks.finish_many(queue, finishes, now)
        self._metrics.finished(queue, finishes, results, now)
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
            finishes = [self._expiry(lease, backoff) for lease in leases]
            results = await self._tasks.finish_many(queue, finishes, now)
            self._metrics.finished(queue, finishes, results, now)
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
