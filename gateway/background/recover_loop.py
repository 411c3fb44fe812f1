"""The recoverer: moves due scheduled tasks to ready, expires leases, sweeps finished tasks.

One :class:`Recoverer` runs in every gateway process, all of them on the same Redis. It does not
scan queues: the due index (``jg:due``, :mod:`gateway.store.tasks.due`) holds when each queue
next needs it, and :meth:`Recoverer.run` sleeps until the earliest entry, or until a script
announces an earlier one over pub/sub (:meth:`Recoverer.notice`). Each :meth:`Recoverer.step`
reads the head of the index with one command and handles only the queues that are due. An
APScheduler job checks the index against every queue every ``rescan_interval``
(:meth:`Recoverer.rescan`), which repairs what a gateway that died half way left behind; every
``RECKON_EVERY`` of its runs it also repairs the id index (:class:`IndexRepair`), and in the
same turn drops durable steps earlier versions left without their task (:class:`StepsRepair`).

Correctness never depends on there being just one recoverer:

- promoting and sweeping are single scripts, so two gateways doing it at once each move or
  delete a task at most once between them;
- expiring reads the expired leases first and then records each expiry with the finish script,
  fenced by the lease token it read. Whatever happened in between -- another gateway recorded
  the expiry (``STALE``), a heartbeat extended the lease (``ALIVE``), the worker's result
  arrived (``STALE``) -- the script changes nothing, so every attempt expires at most once.

Tests drive :meth:`Recoverer.step` and :meth:`Recoverer.rescan` one call at a time with a
:class:`~gateway.store.clock.ManualClock`; nothing here sleeps but :meth:`Recoverer.run`.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
from collections.abc import Awaitable, Callable
from functools import partial

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from gateway.background.queue_recovery import QueueRecovery, RecoveryReport
from gateway.dispatch.calls import CallRunner
from gateway.store.clock import Clock
from gateway.store.dependencies import DependencyStore
from gateway.store.index import IndexRepair
from gateway.store.orphans import StepsRepair
from gateway.store.queues import QueueStore
from gateway.store.tasks import TaskStore
from gateway.store.tasks.due import mark
from gateway.telemetry.metrics import Metrics

__all__ = ["RESCAN_JOB_ID", "Recoverer", "RecoveryReport"]

logger = logging.getLogger(__name__)

RESCAN_JOB_ID = "jobgate.rescan"
# One rescan in this many reckons every queue in full instead (hourly, with the default
# rescan_interval): it finds due times no gateway announced (queues written by an older version
# during a rolling upgrade, a Redis restored from a backup). It also makes a pass of the id
# index's repair (one gateway a pass among all).
RECKON_EVERY = 60


class Recoverer:
    """Promotes due tasks, expires leases and sweeps finished tasks of the queues that are due.

    ``on_ready(queue)`` is called when a step put tasks of ``queue`` in its ready set, so this
    process's dispatcher can claim them without waiting for the wake channel. ``batch`` bounds
    each script call and the queues one step takes in hand; a step loops until a queue has
    nothing more due. :meth:`run` steps at most every ``interval`` seconds, so anything due is
    handled within ``interval`` of its time. Finished tasks and dedup windows are swept at most
    every ``sweep_interval`` seconds per queue, so sweeps come in batches. ``max_sleep`` bounds
    a sleep in case a wake-up was lost (a broken pub/sub connection).
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
        interval: float = 0.25,
        sweep_interval: float = 60.0,
        max_sleep: float = 60.0,
        metrics: Metrics | None = None,
        index_repair: IndexRepair | None = None,
        steps_repair: StepsRepair | None = None,
        calls: CallRunner | None = None,
    ) -> None:
        if batch < 1:
            raise ValueError("batch must be at least 1")
        self._tasks = tasks
        self._queues = queues
        self._clock = clock
        self._batch = batch
        self._sweep_ms = round(sweep_interval * 1000)
        self._work = QueueRecovery(
            tasks,
            on_ready=on_ready,
            rng=rng or random.Random(),
            batch=batch,
            sweep_ms=self._sweep_ms,
            dependencies=dependencies,
            metrics=metrics,
            calls=calls,
        )
        self._interval_ms = round(interval * 1000)
        self._max_sleep_ms = round(max_sleep * 1000)
        self._failures: dict[str, int] = {}
        self._rescans = 0
        self._index_repair = index_repair
        self._steps_repair = steps_repair
        self._repair_every_ms = 3_600_000  # set by schedule()
        self._next_due_ms: int | None = None  # from the last step: the index, and reckonings
        self._noticed_ms: int | None = None  # announced since the last step read the index
        self._woken = asyncio.Event()
        self._stopping = False
        self._stalled = False  # the last step of run() failed
        # Queues whose recovery raised, with the mark their entry holds: due again at the mark
        # (a broken queue is not retried at every step), or at once after Redis came back.
        self._failed: dict[str, float] = {}
        self._retry_failed = False

    @property
    def stalled(self) -> bool:
        """True from a failed step of :meth:`run` until one works: due work may be waiting."""
        return self._stalled

    @property
    def next_due_ms(self) -> int | None:
        """When something is next due, as far as this recoverer knows (None: nothing)."""
        return _earliest(self._next_due_ms, self._noticed_ms)

    def reconnected(self) -> None:
        """Redis answers again (the pub/sub connection is back): queues whose recovery failed
        meanwhile are taken in hand at the next step, not at their mark, and it steps now."""
        self._retry_failed = True
        self.notice(self._clock.now_ms())

    def notice(self, due_ms: int) -> None:
        """Something is due at ``due_ms`` (the due index's new earliest entry, announced over
        pub/sub): wake :meth:`run` if it sleeps past that."""
        self._noticed_ms = _earliest(self._noticed_ms, due_ms)
        self._woken.set()

    async def step(self, now_ms: int | None = None) -> RecoveryReport:
        """Handle every queue due by now: promote due scheduled tasks, record expired leases,
        deliver dependency notices, sweep; then reckon its next due time.

        Each due queue's index entry is first set to a mark (due again a while later), so that
        if this gateway dies mid-way another one takes the queue in hand then. A queue whose
        recovery raises is logged and counted in ``errors``, its entry left at the mark, and the
        step goes on with the next queue, so one broken queue cannot stall the others. Reading
        the index is not guarded: when Redis is unreachable, the step raises.
        """
        now = self._clock.now_ms() if now_ms is None else now_ms
        if self._retry_failed:
            await self._due_now(now)
        self._noticed_ms = None  # the read below sees every entry announced before it
        entries = await self._tasks.due_queues(self._batch)
        due = [queue for queue, at in entries if at <= now]
        later = [math.ceil(at) for _, at in entries if at > now]
        next_due = now if len(due) == self._batch else (later[0] if later else None)
        report = RecoveryReport()
        if due:
            held = mark(now)
            await self._tasks.hold(due, held)
            for queue in due:
                try:
                    done, at = await self._work.recover(queue, now)
                    report += done
                    await self._tasks.settle_due(queue, at, held)
                    self._failed.pop(queue, None)
                except Exception:
                    logger.exception("recovering queue %r failed", queue)
                    report += RecoveryReport(errors=1)
                    at = math.ceil(held)  # tried again at its mark
                    self._failed[queue] = held
                next_due = _earliest(next_due, at)
        self._next_due_ms = next_due
        return report

    async def _due_now(self, now: int) -> None:
        """Make the queues whose recovery failed due at ``now`` (where their entry still holds
        this recoverer's mark; else only lowered to it)."""
        self._retry_failed = False
        failed, self._failed = self._failed, {}
        try:
            for queue, held in list(failed.items()):
                await self._tasks.settle_due(queue, now, held)
                del failed[queue]
        except BaseException:
            self._failed.update(failed)
            self._retry_failed = True
            raise

    async def rescan(self) -> int:
        """Repair the due index after gateways that died half way; returns how many entries
        were repaired.

        A gateway that dies between a script and the index update leaves the queue's ``due``
        field saying the index was told a time it never got. Every queue's field is compared
        with its entry (one command per queue, in one round trip per ``batch`` queues), and the
        entry lowered where the field is earlier. It reads every queue, so it runs rarely
        (``rescan_interval``). Listing the queues is not guarded.
        """
        names = await self._queues.names()
        repaired = 0
        for start in range(0, len(names), self._batch):
            chunk = names[start : start + self._batch]
            found = await self._tasks.told_and_indexed(chunk)
            for queue, (told, indexed) in zip(chunk, found, strict=True):
                if told is not None and (indexed is None or told < indexed):
                    await self._tasks.lower_due(queue, told)
                    repaired += 1
        return repaired

    async def reckon_all(self, now_ms: int | None = None) -> int:
        """Reckon the due time of every registered queue from its own sets and lower its index
        entry to it; returns how many queues have something due.

        This builds the index from nothing, when Redis lost it or an older version wrote the
        queues, and rewrites ready-set members an older version wrote
        (:meth:`~gateway.store.tasks.TaskStore.reshape`). A gateway does it once when it
        starts. A queue whose reckoning raises is logged
        and skipped; listing the queues is not guarded.
        """
        now = self._clock.now_ms() if now_ms is None else now_ms
        found = 0
        for queue in await self._queues.names():
            if self._stopping:
                break
            try:
                # Members queued by gateways before the ready set's shorter shape, rewritten
                # (a rolling upgrade: the last gateway to start finds them all).
                await self._tasks.reshape(queue, self._batch)
                at = await self._tasks.reckon_due(queue, now, self._sweep_ms)
                if at is not None:
                    await self._tasks.lower_due(queue, at)
                    found += 1
            except Exception:
                logger.exception("reckoning the due time of queue %r failed", queue)
        return found

    async def run(self) -> None:
        """Reckon every queue once, then step whenever something is due, until cancelled.

        Between steps it sleeps until the next due time, but at least ``interval`` after the
        previous step began (so a busy index cannot make it spin) and at most ``max_sleep``; a
        :meth:`notice` of an earlier time shortens the sleep. A failed step (Redis did not
        answer) is tried again after ``interval``, or at once when the pub/sub connection is
        back (:meth:`notice`); until one works the recoverer is :attr:`stalled`.
        """
        await self._guard("reckon", self.reckon_all)
        while not self._stopping:
            began = self._clock.now_ms()
            self._stalled = not await self._guard("recover", partial(self.step, began))
            if self._stalled:
                self._next_due_ms = began  # tried again after interval (or when woken)
            await self._sleep(began)

    def stop(self) -> None:
        """Make :meth:`run` return after its current step (or at once, when it sleeps).

        Shutdown asks this way rather than only by cancelling: a cancellation that lands
        inside a Redis call can be lost (the client may absorb it), and then the loop would
        sleep on for up to ``max_sleep``."""
        self._stopping = True
        self._woken.set()

    async def _sleep(self, began: int) -> None:
        while not self._stopping:
            self._woken.clear()
            due = self.next_due_ms
            if due is None:
                wait_ms = self._max_sleep_ms
            else:
                wait_ms = max(due, began + self._interval_ms) - self._clock.now_ms()
                wait_ms = min(wait_ms, self._max_sleep_ms)
            if wait_ms <= 0:
                return
            try:
                async with asyncio.timeout(wait_ms / 1000):
                    await self._woken.wait()
            except TimeoutError:
                return

    async def recover_job(self) -> bool:
        """One :meth:`step`, logging a failure instead of raising; returns whether it worked."""
        return await self._guard("recover", self.step)

    async def rescan_job(self) -> None:
        """The scheduled rescan: :meth:`rescan`, or every ``RECKON_EVERY`` runs
        :meth:`reckon_all`, logging a failure instead of raising."""
        self._rescans += 1
        full = self._rescans % RECKON_EVERY == 0
        try:
            await self._guard("rescan", self.reckon_all if full else self.rescan)
            if full and self._index_repair is not None:
                await self._guard("index repair", self.repair_index)
        except asyncio.CancelledError:
            # The scheduler shuts down mid-run. The next rescan (here or on another gateway)
            # simply does it again; nothing to report.
            return

    async def repair_index(self) -> int | None:
        """A pass of the id index's repair when no other gateway made one within the cadence
        (``RECKON_EVERY`` rescans); returns how many fields it dropped, None when it was not
        this gateway's turn. In its turn, a pass of the steps' repair follows."""
        if self._index_repair is None:
            return None
        dropped = await self._index_repair.run(self._repair_every_ms)
        if dropped is not None and self._steps_repair is not None:
            steps = await self._steps_repair.repair(await self._queues.names())
            if steps:
                logger.info("dropped the steps of %d tasks that were gone", steps)
        return dropped

    def schedule(self, scheduler: AsyncIOScheduler, rescan_interval: float) -> None:
        """Add the rescan job to ``scheduler``; its owner starts and stops it.

        The job runs one instance at a time; runs missed while one was late are coalesced into
        one. It is a coroutine method, which the scheduler's asyncio executor awaits on its
        loop; it logs failures and goes on. Calling this again replaces it.
        """
        self._repair_every_ms = math.ceil(rescan_interval * RECKON_EVERY * 1000)
        scheduler.add_job(
            self.rescan_job,
            "interval",
            seconds=rescan_interval,
            id=RESCAN_JOB_ID,
            name=RESCAN_JOB_ID,
            max_instances=1,
            coalesce=True,
            misfire_grace_time=max(1, math.ceil(rescan_interval)),
            replace_existing=True,
        )

    async def _guard(self, name: str, run: Callable[[], Awaitable[object]]) -> bool:
        """Run one job, so that it never dies: a failure is logged and the next run goes on.

        The first failure of a streak is logged with its traceback, later ones of the same
        streak only at debug level (the recover job may run several times a second), and the
        recovery once, as a warning.
        """
        try:
            await run()
        except asyncio.CancelledError:
            # Shutdown mid-run. Every change is one atomic script, and a queue taken in hand
            # is due again at its mark, so the next run (here or on another gateway) carries on.
            logger.debug("the %s job was stopped mid-run by shutdown", name)
            raise
        except Exception:
            failures = self._failures[name] = self._failures.get(name, 0) + 1
            if failures == 1:
                logger.exception("the %s job failed; it runs again at its next time", name)
            else:
                logger.debug("the %s job failed again (%d runs in a row)", name, failures)
            return False
        failures = self._failures.pop(name, 0)
        if failures:
            logger.warning("the %s job works again after %d failed runs", name, failures)
        return True


def _earliest(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)
