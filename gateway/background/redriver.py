"""The redriver: queues dead tasks again by their queues' redrive policies, so that tasks killed
by an infrastructure failure (a timeout, a 5xx, a broken connection) heal without an operator.

One :class:`Redriver` runs in every gateway; APScheduler calls :meth:`Redriver.step` every
``redrive_interval`` seconds and :meth:`Redriver.refresh` every ``rescan_interval``.

- **Cheap when unused.** The redriver keeps the redrive policies in memory: :meth:`refresh`
  reads every queue's policy (one round trip per 500 queues), and a queue changed through this
  gateway (:meth:`changed`) is read again at the next step. A step with no policy sends nothing
  to Redis; with policies, only queues whose cadence is due here cost a command.
- **One pass per cadence among all gateways.** A pass begins by taking the queue's turn,
  ``SET jg:{<queue>}:redrive NX PX <every>``; the gateways that lose try again when the key
  expires (its ``PTTL``, read in the same round trip). The key expires by itself, so a gateway
  that died holds nothing for long.
- **Each task at most once.** Even two passes at once cannot move a task twice: the script
  (``lua/resubmit.lua``, redrive mode) moves a task only while it is dead, and a moved task is
  no longer dead.
- **Bounded.** A pass walks the dead index oldest first, up to the tasks that died ``after``
  seconds ago, in pages, and stops after moving ``max_moved`` tasks or reading ``max_read``
  entries; the next pass of this gateway then goes on from where it stopped (tasks it passed
  over stay unmatched: their kind and redrive count do not change while dead), so a long head
  of tasks that are never redriven (refused, or at their cap) cannot hide the newer ones.

- **Back with Redis.** A pass that failed (Redis did not answer) would wait a whole cadence;
  when the pub/sub connection is back (:meth:`reconnected`) those queues are due at once and
  the app runs the refresh and the step then. A refresh that failed is made again by the next
  step, before its passes.

Tests drive :meth:`step` with a :class:`~gateway.store.clock.ManualClock`; nothing here sleeps.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from gateway.store.clock import Clock
from gateway.store.operations import Position
from gateway.store.queues import QueueStore
from gateway.store.redrive import Redriven, RedriveStore
from sdk.wire import Redrive

__all__ = ["REDRIVE_JOB_ID", "REFRESH_JOB_ID", "RedrivePass", "Redriver"]

logger = logging.getLogger(__name__)

REDRIVE_JOB_ID = "jobgate.redrive"
REFRESH_JOB_ID = "jobgate.redrive-policies"
PAGE = 500
MAX_MOVED = 1_000
MAX_READ = 10_000
QUEUES_PER_READ = 500


@dataclass(frozen=True, slots=True)
class RedrivePass:
    """What one pass over one queue did."""

    queue: str
    moved: int = 0
    read: int = 0  # dead index entries examined
    capped: int = 0  # dead tasks of a matching kind left because they reached max_redrives


class Redriver:
    """``on_ready(queue)`` is called when a pass put tasks of ``queue`` in its ready set, so
    this process's dispatcher pushes them at once. ``holder`` names this gateway in the turn
    keys (random unless given)."""

    def __init__(
        self,
        store: RedriveStore,
        queues: QueueStore,
        clock: Clock,
        *,
        on_ready: Callable[[str], None] = lambda q: None,
        holder: str | None = None,
        page: int = PAGE,
        max_moved: int = MAX_MOVED,
        max_read: int = MAX_READ,
    ) -> None:
        if min(page, max_moved, max_read) < 1:
            raise ValueError("page, max_moved and max_read must be at least 1")
        self._store = store
        self._queues = queues
        self._clock = clock
        self._on_ready = on_ready
        self._holder = holder or secrets.token_hex(8)
        self._page = page
        self._max_moved = max_moved
        self._max_read = max_read
        self._policies: dict[str, Redrive] = {}
        self._changed: set[str] = set()  # queues changed through this gateway: read again
        self._next_try: dict[str, int] = {}  # queue → ms before which this gateway waits
        self._resume: dict[str, Position] = {}  # queue → where a pass cut short stopped
        self._failed: set[str] = set()  # queues whose last pass here raised
        self._refresh_failed = False  # the last refresh raised: the next step refreshes first

    @property
    def policies(self) -> dict[str, Redrive]:
        """The redrive policies this gateway knows, by queue."""
        return dict(self._policies)

    def changed(self, queue: str) -> None:
        """The queue's policy changed (or the queue was deleted) through this gateway."""
        self._changed.add(queue)

    async def refresh(self) -> None:
        """Read the redrive policy of every queue (changes made through other gateways are seen
        here; deleted queues drop out)."""
        changed, self._changed = self._changed, set()  # every queue is read below
        found: dict[str, Redrive] = {}
        try:
            names = await self._queues.names()
            for start in range(0, len(names), QUEUES_PER_READ):
                chunk = names[start : start + QUEUES_PER_READ]
                for queue, policy in (await self._queues.policies(chunk)).items():
                    if policy.redrive is not None:
                        found[queue] = policy.redrive
        except BaseException:
            self._changed |= changed  # read again at the next step
            self._refresh_failed = True  # and the whole refresh with it
            raise
        self._refresh_failed = False
        self._policies = found
        self._forget_gone()

    async def step(self, now_ms: int | None = None) -> list[RedrivePass]:
        """Make the pass of every queue whose cadence is due and whose turn this gateway gets.

        A queue whose pass raises is logged and skipped (its turn key expires by itself), so
        one broken queue cannot stop the others.
        """
        now = self._clock.now_ms() if now_ms is None else now_ms
        if self._refresh_failed:
            await self.refresh()
        if self._changed:
            await self._read_changed()
        passes = []
        for queue, policy in list(self._policies.items()):
            if self._next_try.get(queue, 0) > now:
                continue
            every_ms = round(policy.every * 1000)
            self._next_try[queue] = now + every_ms  # after a failure too
            try:
                won, wait_ms = await self._store.take_turn(queue, self._holder, every_ms)
                self._next_try[queue] = now + wait_ms
                if not won:
                    continue
                done = await self.redrive(queue, policy, now)
            except Exception:
                logger.exception("the redrive pass of queue %r failed", queue)
                self._failed.add(queue)
                continue
            self._failed.discard(queue)
            passes.append(done)
        return passes

    def reconnected(self) -> None:
        """Redis answers again: the queues whose pass failed meanwhile (each waiting a whole
        cadence for its next try) are due at the next step (which the app runs at once, with a
        refresh of the policies)."""
        for queue in self._failed:
            self._next_try.pop(queue, None)
        self._failed.clear()

    async def redrive(self, queue: str, policy: Redrive, now_ms: int) -> RedrivePass:
        """One pass over ``queue``'s dead tasks (the turn already taken)."""
        died_before = now_ms - round(policy.after * 1000)
        after = self._resume.pop(queue, None)
        moved = read = capped = 0
        while moved < self._max_moved and read < self._max_read:
            count = min(self._page, self._max_moved - moved, self._max_read - read)
            rows = await self._store.dead(queue, died_before, after, count)
            if rows:
                ids = [task_id for task_id, _ in rows]
                replies = await self._store.redrive(queue, ids, now_ms, policy, died_before)
                moved += sum(r.outcome is Redriven.OK for r in replies)
                capped += sum(r.outcome is Redriven.NOMATCH and r.why == "cap" for r in replies)
                read += len(rows)
                after = Position(rows[-1][1], rows[-1][0])
            if len(rows) < count:
                break  # the whole index up to died_before was read: the next pass starts over
        else:
            assert after is not None  # the loop ran: each full page set it
            self._resume[queue] = after
        done = RedrivePass(queue, moved, read, capped)
        if moved:
            logger.info(
                "redrive of queue %r: %d dead task(s) queued again (%d read, %d at max_redrives)",
                queue,
                moved,
                read,
                capped,
            )
            self._on_ready(queue)
        return done

    async def _read_changed(self) -> None:
        changed, self._changed = self._changed, set()
        names = sorted(changed)
        try:
            policies = await self._queues.policies(names)
        except BaseException:
            self._changed |= changed  # read again at the next step
            raise
        for queue in names:
            policy = policies.get(queue)
            if policy is None or policy.redrive is None:
                self._policies.pop(queue, None)
            else:
                if self._policies.get(queue) != policy.redrive:
                    self._next_try.pop(queue, None)  # a new cadence: due at once
                self._policies[queue] = policy.redrive
        self._forget_gone()

    def _forget_gone(self) -> None:
        for state in (self._next_try, self._resume):
            for queue in [q for q in state if q not in self._policies]:
                del state[queue]
        self._failed &= set(self._policies)

    async def step_job(self) -> None:
        """The scheduled step, logging a failure instead of raising."""
        await _guard("redrive", self.step)

    async def refresh_job(self) -> None:
        """The scheduled policy refresh, logging a failure instead of raising."""
        await _guard("redrive policy refresh", self.refresh)

    def run_soon(self, scheduler: AsyncIOScheduler) -> None:
        """Run the refresh and the step jobs now rather than at their next times (after
        :meth:`reconnected`)."""
        for job_id in (REFRESH_JOB_ID, REDRIVE_JOB_ID):
            scheduler.modify_job(job_id, next_run_time=datetime.now(UTC))

    def schedule(
        self, scheduler: AsyncIOScheduler, interval: float, refresh_interval: float
    ) -> None:
        """Add the step job (every ``interval`` s) and the refresh job (at once, then every
        ``refresh_interval`` s) to ``scheduler``; one instance of each at a time, missed runs
        coalesced."""
        scheduler.add_job(
            self.refresh_job,
            "interval",
            seconds=refresh_interval,
            id=REFRESH_JOB_ID,
            name=REFRESH_JOB_ID,
            max_instances=1,
            coalesce=True,
            next_run_time=datetime.now(UTC),
            replace_existing=True,
        )
        scheduler.add_job(
            self.step_job,
            "interval",
            seconds=interval,
            id=REDRIVE_JOB_ID,
            name=REDRIVE_JOB_ID,
            max_instances=1,
            coalesce=True,
            replace_existing=True,
        )


async def _guard(name: str, run: Callable[[], Awaitable[object]]) -> None:
    try:
        await run()
    except asyncio.CancelledError:
        # Shutdown mid-run: every change is one script, so the next run simply goes on.
        logger.debug("the %s job was stopped mid-run by shutdown", name)
    except Exception:
        logger.exception("the %s job failed; it runs again at its next time", name)
