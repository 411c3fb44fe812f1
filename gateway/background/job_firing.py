"""The firing loop: makes the runs of due jobs, in every gateway at once, each firing once.

:class:`Firing` runs in every gateway process, driven by APScheduler (:meth:`Firing.schedule`),
all on one Redis. Each step reads the jobs whose due time has come from one sorted set (no scan
of the jobs), and for each:

1. finishes the enqueue of every run whose gateway stopped half-way (``Runs.resume``): the
   runs of the job's pending set begun more than ``resume_ms`` ago -- and, at once, those this
   gateway began itself when Redis went away before their enqueue, once it is back
   (:meth:`Firing.reconnected`);
2. releases a firing held by the ``queue_one`` overlap policy once the previous run ended;
3. fires a due fire time. The claim is ``begin_run``, keyed by the job and the fire time: of
   several gateways that read the same firing, exactly one makes its run.

Missed fire times: a fire time reached within ``misfire_grace_ms`` fires on its own (a loaded
gateway catches up one run per fire time); fire times missed by more than that -- every gateway
was down -- are coalesced into one run, made at once, for the latest of them. So after an
outage a job makes one run for all the fire times older than the grace, then one run for each
fire time within it.

Tests drive :meth:`Firing.step` with a :class:`~gateway.store.clock.ManualClock`; nothing sleeps.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, fields

from gateway.jobs.definition import definition
from gateway.jobs.schedule import MAX_CRON_STEPS, fire_times
from gateway.services.runs import SYSTEM, RunRequest, Runs
from gateway.store.clock import Clock
from gateway.store.jobs import Begun, JobStore, StoredJob
from sdk.wire import OverlapPolicy

__all__ = ["Firing", "FiringReport"]

logger = logging.getLogger(__name__)

MAX_ROUNDS = 100
"""Most changes one step makes to one job (catching up fire times one by one)."""


@dataclass(frozen=True, slots=True)
class FiringReport:
    """What one step did: runs made for fire times (``fired``, of which ``coalesced`` stand for
    several missed ones), firings skipped or held by the overlap policy, held firings released,
    half-made runs resumed, firings another gateway claimed first (``lost``), jobs that raised."""

    fired: int = 0
    coalesced: int = 0
    skipped: int = 0
    held: int = 0
    released: int = 0
    resumed: int = 0
    lost: int = 0
    errors: int = 0

    def __add__(self, other: FiringReport) -> FiringReport:
        return FiringReport(
            **{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)}
        )


@dataclass(frozen=True, slots=True)
class Due:
    """The firing a due job makes now: for ``fire_ms`` (the latest of ``missed`` fire times),
    then next at ``next_ms``."""

    fire_ms: int
    missed: int
    next_ms: int | None


def due_firing(job: StoredJob, now_ms: int, grace_ms: int) -> Due | None:
    """The firing of ``job`` at ``now_ms``, if its next fire time has come."""
    if job.next_ms is None or job.next_ms > now_ms:
        return None
    found = definition(job)
    if found.schedule is None:
        return Due(job.next_ms, 1, None)
    times = fire_times(found.schedule, job.next_ms - 1, anchor_ms=found.anchor_ms)
    late: list[int] = []
    following: int | None = None
    for when in times:
        if when >= now_ms - grace_ms or len(late) >= MAX_CRON_STEPS:
            following = when
            break
        late.append(when)
    if not late:
        after = fire_times(found.schedule, job.next_ms, anchor_ms=found.anchor_ms)
        return Due(job.next_ms, 1, next(after, None))
    if following is not None and following <= now_ms and len(late) >= MAX_CRON_STEPS:
        # Too many to count: skip ahead to the first fire time after now.
        following = next(fire_times(found.schedule, now_ms, anchor_ms=found.anchor_ms), None)
    return Due(late[-1], len(late), following)


class Firing:
    """Fires due jobs; ``grace_ms`` is the misfire grace time, ``batch`` the most jobs read per
    step, ``concurrency`` how many are worked on at once (each is a few Redis round trips)."""

    def __init__(
        self,
        store: JobStore,
        runs: Runs,
        clock: Clock,
        *,
        grace_ms: int = 30_000,
        batch: int = 500,
        concurrency: int = 16,
    ) -> None:
        self._store = store
        self._runs = runs
        self._clock = clock
        self._grace_ms = grace_ms
        self._batch = batch
        self._concurrency = concurrency
        self._failing = False
        self._resume_now = False  # Redis is back: resume the runs interrupted here at once

    def reconnected(self) -> None:
        """Redis answers again (the pub/sub connection is back): the next step resumes the
        runs this gateway began and could not enqueue without waiting ``resume_ms``."""
        self._resume_now = True

    async def step(self, now_ms: int | None = None) -> FiringReport:
        """Fire the due jobs (up to ``batch``), ``concurrency`` of them at a time; a job whose
        firing raises is logged and counted, and the others go on."""
        now = self._clock.now_ms() if now_ms is None else now_ms
        room = asyncio.Semaphore(self._concurrency)
        resume_now, self._resume_now = self._resume_now, False

        async def one(job_id: str) -> FiringReport:
            async with room:
                try:
                    return await self._job(job_id, now, resume_now)
                except Exception:
                    logger.exception("firing job %r failed", job_id)
                    return FiringReport(errors=1)

        try:
            due = await self._store.due(now, self._batch)
        except BaseException:
            self._resume_now |= resume_now
            raise
        if resume_now:  # their jobs may not be due: taken in hand all the same
            due = list(dict.fromkeys([*due, *self._runs.interrupted_jobs()]))
        report = sum(await asyncio.gather(*(one(job_id) for job_id in due)), FiringReport())
        if report.errors:
            self._resume_now |= resume_now  # some may have failed again: at the next step
        return report

    async def _job(self, job_id: str, now: int, resume_now: bool = False) -> FiringReport:
        report = FiringReport()
        for _ in range(MAX_ROUNDS):
            job = await self._store.get(job_id)
            if job is None:
                await self._store.hint(job_id, None)
                return report
            interrupted = self._runs.interrupted(job_id) if resume_now else frozenset()
            stale = [
                run_id
                for run_id, at in job.pending
                if now >= at + self._store.resume_ms or run_id in interrupted
            ]
            if stale:
                await self._runs.resume(job.id, stale, now)
                report += FiringReport(resumed=len(stale))
                continue
            if job.held_ms is not None and not await self._runs.active(job):
                request = RunRequest(SYSTEM, kind="release", fire_ms=job.held_ms)
                begun, _ = await self._runs.start(job, request, now)
                report += FiringReport(released=int(begun is Begun.OK))
                continue
            due = due_firing(job, now, self._grace_ms)
            if due is None:
                break
            report += await self._fire(job, due, now)
        else:
            logger.warning("job %r still has work after %d rounds", job_id, MAX_ROUNDS)
        # Nothing more to do now: make the hint the job's due time (re-checking a held firing
        # later rather than at every step).
        await self._store.touch(job_id, now)
        return report

    async def _fire(self, job: StoredJob, due: Due, now: int) -> FiringReport:
        found = definition(job)
        action = "run"
        if found.overlap is not OverlapPolicy.ALLOW and await self._runs.active(job):
            queue_one = found.overlap is OverlapPolicy.QUEUE_ONE
            action = "hold" if queue_one and job.held_ms is None else "skip"
        request = RunRequest(
            SYSTEM,
            kind="fire",
            claim_ms=job.next_ms,
            fire_ms=due.fire_ms,
            next_ms=due.next_ms,
            action=action,
            coalesced=due.missed,
        )
        begun, _ = await self._runs.start(job, request, now)
        if begun is not Begun.OK:
            return FiringReport(lost=1)
        if action == "skip":
            logger.info(
                "job %r: firing %d skipped, the previous run still runs", job.id, due.fire_ms
            )
            return FiringReport(skipped=1)
        if action == "hold":
            return FiringReport(held=1)
        return FiringReport(fired=1, coalesced=int(due.missed > 1))

    async def fire_job(self) -> bool:
        """One :meth:`step` now, logging a failure instead of raising; returns whether it
        worked (a job whose firing raised does not count: it stays due, so the loop comes back
        to it at its interval). A shutdown mid-step loses nothing: every change is one script,
        and the next step (here or on another gateway) carries on."""
        try:
            await self.step()
        except Exception:
            if not self._failing:
                logger.exception("the firing loop failed; it runs again shortly")
            self._failing = True
            return False
        if self._failing:
            logger.warning("the firing loop works again")
        self._failing = False
        return True
