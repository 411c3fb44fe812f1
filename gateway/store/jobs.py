"""Jobs and their runs in Redis.

Every key of one job carries the hash tag ``{job:<id>}`` (``keys.JobKeys``), so each change of
a job is one script on one Redis Cluster slot: ``save_job`` (create, replace), ``begin_run``
(claim a firing or record a manual run), ``end_run`` (its task is enqueued), ``settle_run`` (a
run that never got its task), ``run_ended`` (how its task ended: :mod:`gateway.store.run_ends`),
``delete_run``. A run's task lives in its queue's keys, like any task, so enqueuing it is a
script of its own: between ``begin_run`` and ``end_run`` the run waits in the job's pending set,
from which any gateway resumes it (``StoredJob.pending``).

Two global sorted sets sit outside the scripts: ``jg:jobs`` (listing order) and
``jg:jobs:due``, the firing loop's index. The due index is a hint of each job's ``due`` field:
the loop reads the jobs whose hint has come, then acts on the job hash, which is the truth. A
hint earlier than the truth costs one read; a later one would delay a firing, so every writer
follows :meth:`JobStore.hint`, which keeps it never later than the truth.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, cast

from redis.asyncio import Redis

from gateway.store import keys
from gateway.store.keys import JobKeys, QueueKeys
from gateway.store.records import load_record
from gateway.store.run_ends import RunEnd, end_field, keep_ends
from gateway.store.scripts import Scripts


class Begun(StrEnum):
    """How a ``begin_run`` went."""

    OK = "OK"
    NOJOB = "NOJOB"
    TAKEN = "TAKEN"  # another gateway claimed this firing, or the schedule moved
    CHANGED = "CHANGED"  # another run was made since the job was read


@dataclass(frozen=True, slots=True)
class StoredJob:
    """A job hash as read: its definition (JSON object) and scheduling state."""

    id: str
    definition: dict[str, Any]
    next_ms: int | None
    held_ms: int | None
    last: str | None
    pending: tuple[tuple[str, int], ...]
    """Runs begun whose task is not known to be enqueued yet: (run id, ms begun), oldest
    first."""
    count: int
    skipped: int
    due_ms: int | None

    @property
    def pending_ids(self) -> frozenset[str]:
        return frozenset(run_id for run_id, _ in self.pending)


def _record(raw: str, end: str | None) -> dict[str, Any]:
    """A run record as read, with the end kept beside it (if any) under ``end``."""
    record: dict[str, Any] = json.loads(raw)
    if end is not None:
        record["end"] = json.loads(end)
    return record


def _int(raw: str | None) -> int | None:
    return None if raw is None or raw == "" else int(raw)


def _job(job_id: str, raw: dict[str, str], pending: list[tuple[str, float]]) -> StoredJob | None:
    if "def" not in raw:
        return None
    begun = {run_id: int(at) for run_id, at in pending}
    if raw.get("pending"):
        # Written by an older version; the next job script moves it into the pending set.
        run_id, _, at = raw["pending"].partition(" ")
        begun.setdefault(run_id, int(at))
    return StoredJob(
        id=job_id,
        definition=json.loads(raw["def"]),
        next_ms=_int(raw.get("next")),
        held_ms=_int(raw.get("held")),
        last=raw.get("last") or None,
        pending=tuple(sorted(begun.items(), key=lambda item: (item[1], item[0]))),
        count=int(raw.get("count", 0)),
        skipped=int(raw.get("skipped", 0)),
        due_ms=_int(raw.get("due")),
    )


class JobStore:
    """Atomic changes of jobs and runs.

    ``recheck_ms``: how soon the loop looks again at a job holding a firing (overlap
    ``queue_one``) to see whether the running run ended. ``resume_ms``: how long after a run was
    begun any gateway may finish its enqueue (the one that began it stopped half-way).
    """

    def __init__(
        self,
        redis: Redis,
        scripts: Scripts,
        *,
        runs_kept: int = 1000,
        recheck_ms: int = 1000,
        resume_ms: int = 30_000,
    ) -> None:
        self._redis = redis
        self._scripts = scripts
        self.runs_kept = runs_kept
        self.recheck_ms = recheck_ms
        self.resume_ms = resume_ms

    # --- jobs ---------------------------------------------------------------------------------

    async def save(
        self, job_id: str, definition: str, next_ms: int | None, now_ms: int, *, create: bool
    ) -> bool:
        """Create (``create``) or replace a job; False when it exists (create) or does not
        (replace)."""
        k = JobKeys.of(job_id)
        reply = await self._scripts.call(
            "save_job",
            [k.job, k.pending],
            [
                now_ms,
                definition,
                "" if next_ms is None else next_ms,
                "create" if create else "replace",
                self.recheck_ms,
                self.resume_ms,
            ],
        )
        if reply[0] != "OK":
            return False
        if create:
            await self._redis.zadd(keys.JOBS, {job_id: now_ms})
        await self.hint(job_id, _int(reply[1]))
        return True

    async def get(self, job_id: str) -> StoredJob | None:
        (found,) = await self.get_many([job_id])
        return found

    async def get_many(self, job_ids: Sequence[str]) -> list[StoredJob | None]:
        async with self._redis.pipeline(transaction=False) as pipe:
            for job_id in job_ids:
                k = JobKeys.of(job_id)
                pipe.hgetall(k.job)
                pipe.zrange(k.pending, 0, -1, withscores=True)
            found = await pipe.execute()
        return [
            _job(job_id, raw, pending)
            for job_id, raw, pending in zip(job_ids, found[::2], found[1::2], strict=True)
        ]

    async def page(self, offset: int, limit: int) -> tuple[list[str], bool]:
        """Job ids in creation order, from ``offset``; and whether more follow."""
        ids = cast(list[str], await self._redis.zrange(keys.JOBS, offset, offset + limit))
        return ids[:limit], len(ids) > limit

    async def delete(self, job_id: str) -> bool:
        k = JobKeys.of(job_id)
        deleted = await self._redis.delete(*k.all())
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.zrem(keys.JOBS, job_id)
            pipe.zrem(keys.JOBS_DUE, job_id)
            listed, _ = await pipe.execute()
        return bool(deleted or listed)

    # --- the due index ------------------------------------------------------------------------

    async def due(self, now_ms: int, limit: int) -> list[str]:
        """Ids of jobs whose due hint has come, earliest first."""
        return cast(
            list[str],
            await self._redis.zrangebyscore(keys.JOBS_DUE, "-inf", now_ms, start=0, num=limit),
        )

    async def earliest(self) -> int | None:
        """When the firing loop must next look at some job, from the hints: one command."""
        first = await self._redis.zrange(keys.JOBS_DUE, 0, 0, withscores=True)
        return int(first[0][1]) if first else None

    async def hint(self, job_id: str, due_ms: int | None) -> None:
        """Write the due hint of a job whose ``due`` a script just set to ``due_ms``.

        Writers race: a gateway's write may land after another's later change of the truth.
        So each writer writes its value, then reads the truth again and, when it differs,
        lowers the hint to it (``ZADD LT``). Every write is followed by such a read, so once
        writers are done the hint is never later than the truth; an earlier hint only makes the
        loop look once more and write the truth.
        """
        k = JobKeys.of(job_id)
        if due_ms is None:
            await self._redis.zrem(keys.JOBS_DUE, job_id)
        else:
            await self._redis.zadd(keys.JOBS_DUE, {job_id: due_ms})
            # Wakes the firing loop of every gateway (it sleeps until the earliest due job).
            await self._redis.publish(keys.JOBS_CHANNEL, due_ms)
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.hget(k.job, "due")
            pipe.hexists(k.job, "def")
            truth, exists = await pipe.execute()
        if not exists:
            await self._redis.zrem(keys.JOBS_DUE, job_id)
        elif truth is not None and _int(truth) != due_ms:
            await self._redis.zadd(keys.JOBS_DUE, {job_id: int(truth)}, lt=True)

    # --- runs ---------------------------------------------------------------------------------

    async def begin_run(
        self,
        job_id: str,
        now_ms: int,
        *,
        kind: str,
        fire_ms: int | None = None,
        last: str | None = None,
        next_ms: int | None = None,
        action: str = "run",
        run_id: str = "",
        record: dict[str, Any] | None = None,
    ) -> Begun:
        """Claim a firing (``fire``: ``fire_ms`` is the ``next`` read; ``release``: the
        ``held`` read) or record a manual run; see ``lua/begin_run.lua``."""
        k = JobKeys.of(job_id)
        reply = await self._scripts.call(
            "begin_run",
            [k.job, k.runs, k.run, k.pending],
            [
                now_ms,
                kind,
                "" if fire_ms is None else fire_ms,
                last or "",
                "" if next_ms is None else next_ms,
                action,
                run_id,
                json.dumps(record or {}, separators=(",", ":")),
                self.runs_kept,
                self.recheck_ms,
                self.resume_ms,
            ],
        )
        begun = Begun(reply[0])
        if begun is Begun.OK:
            await self.hint(job_id, _int(reply[1]))
        return begun

    async def end_run(self, job_id: str, run_id: str, now_ms: int) -> None:
        """The run's task is enqueued (or the run failed for good): it leaves the job's
        pending set."""
        k = JobKeys.of(job_id)
        reply = await self._scripts.call(
            "end_run",
            [k.job, k.pending],
            [now_ms, run_id, self.recheck_ms, self.resume_ms],
        )
        if reply[0] == "OK":
            await self.hint(job_id, _int(reply[1]))

    async def touch(self, job_id: str, now_ms: int) -> None:
        """Recompute the job's due time as of ``now_ms`` and write its hint."""
        await self.end_run(job_id, "", now_ms)

    async def runs(
        self, job_id: str, offset: int, limit: int
    ) -> tuple[list[tuple[str, dict[str, Any]]], bool]:
        """Runs newest first, from ``offset``; and whether more follow."""
        k = JobKeys.of(job_id)
        ids = cast(list[str], await self._redis.zrevrange(k.runs, offset, offset + limit))
        more = len(ids) > limit
        ids = ids[:limit]
        if not ids:
            return [], more
        raw = cast(list[str | None], await self._redis.hmget(k.run, [*ids, *map(end_field, ids)]))
        found = zip(ids, raw[: len(ids)], raw[len(ids) :], strict=True)
        return [(i, _record(r, end)) for i, r, end in found if r is not None], more

    async def run(self, job_id: str, run_id: str) -> dict[str, Any] | None:
        """A run's record, with its end (``end``) when one is kept."""
        found = await self._redis.hmget(JobKeys.of(job_id).run, [run_id, end_field(run_id)])
        raw, end = cast(list[str | None], found)
        return None if raw is None else _record(raw, end)

    async def job_of_run(self, run_id: str) -> str | None:
        """The job that has a run with this id, or None. A run is filed under its job only, so
        this asks every job: one ZRANGE and one pipeline of HEXISTS, for an operator's search
        by id (never on a hot path)."""
        job_ids = cast(list[str], await self._redis.zrange(keys.JOBS, 0, -1))
        if not job_ids:
            return None
        async with self._redis.pipeline(transaction=False) as pipe:
            for job_id in job_ids:
                pipe.hexists(JobKeys.of(job_id).run, run_id)
            found = await pipe.execute()
        return next((j for j, has in zip(job_ids, found, strict=True) if has), None)

    async def run_records(
        self, runs: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], dict[str, Any]]:
        """The record of each (job id, run id) that exists, with its end (``end``) when one is
        kept."""
        if not runs:
            return {}
        async with self._redis.pipeline(transaction=False) as pipe:
            for job_id, run_id in runs:
                pipe.hmget(JobKeys.of(job_id).run, [run_id, end_field(run_id)])
            raw = await pipe.execute()
        return {
            key: _record(r, end) for key, (r, end) in zip(runs, raw, strict=True) if r is not None
        }

    async def settle_run(self, job_id: str, run_id: str, record: dict[str, Any]) -> None:
        """Write a run's record (a run whose task could not be made ends so)."""
        kept = {k: v for k, v in record.items() if k != "end"}  # (kept beside it, see run)
        await self._scripts.call(
            "settle_run",
            [JobKeys.of(job_id).run],
            [run_id, json.dumps(kept, separators=(",", ":"))],
        )

    async def keep_ends(self, ends: Sequence[RunEnd]) -> None:
        """Keep how runs ended (:mod:`gateway.store.run_ends`)."""
        await keep_ends(self._scripts, ends)

    async def delete_run(self, job_id: str, run_id: str) -> bool:
        k = JobKeys.of(job_id)
        return bool(await self._scripts.call("delete_run", [k.job, k.runs, k.run], [run_id]))

    async def task_records(
        self, tasks: Sequence[tuple[str, str]]
    ) -> list[tuple[dict[str, Any] | None, str | None]]:
        """The record and result JSON of each (queue, task id); None for a task that is gone."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for queue, task_id in tasks:
                k = QueueKeys.of(queue)
                pipe.hget(k.meta, task_id)
                pipe.hget(k.result, task_id)
            raw = await pipe.execute()
        return [
            (None if record is None else load_record(record), result)
            for record, result in zip(raw[::2], raw[1::2], strict=True)
        ]
