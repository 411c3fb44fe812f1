"""Operators' reads and bulk changes of a queue's tasks: dead letters, scheduled and running
tasks, resubmitting dead tasks, cleaning finished ones.

Reads walk one of the queue's ZSETs in order (:meth:`OperationsStore.walk`, ``lua/walk.lua``)
and resume after a :class:`Position`, so a page never skips or repeats a task when tasks before
it leave the set meanwhile (a task promoted, resubmitted or swept). Changes are one script call
per chunk of tasks (``lua/resubmit.lua``, ``lua/clean.lua``), each deciding every task on its
own record.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, cast

from redis.asyncio import Redis

from gateway.store import index, keys
from gateway.store.keys import QueueKeys
from gateway.store.overview import index_sizes
from gateway.store.records import load_record
from gateway.store.scripts import Scripts
from gateway.store.tasks import TaskStore
from sdk.wire import TaskState

CHUNK = 500
Record = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Position:
    """Where a walk over a ZSET stopped: the last member returned and its score."""

    score: int
    member: str


@dataclass(frozen=True, slots=True)
class Entry:
    """A ZSET member (a task id) with its score and the task's record (None when gone)."""

    task_id: str
    score: int
    record: Record | None


@dataclass(frozen=True, slots=True)
class FullRecord:
    """A task as stored: record, payload, result, checkpoint and finished attempts (oldest
    first), the raw JSON of each."""

    record: Record
    payload: str | None
    result: str | None
    checkpoint: str | None
    history: list[str] = field(default_factory=list)


class Resubmit(StrEnum):
    OK = "OK"  # queued again
    NOTASK = "NOTASK"  # no such task in the queue
    NOTDEAD = "NOTDEAD"  # the task is in another state: nothing changed


@dataclass(frozen=True, slots=True)
class Resubmitted:
    task_id: str
    outcome: Resubmit
    state: TaskState | None = None  # with NOTDEAD: the state the task is in


@dataclass(frozen=True, slots=True)
class RunningRow:
    task_id: str
    record: Record
    endpoint_url: str | None


class OperationsStore:
    """``chunk`` bounds every script call and every read of one walk step."""

    def __init__(
        self, redis: Redis, scripts: Scripts, tasks: TaskStore, *, chunk: int = CHUNK
    ) -> None:
        if chunk < 1:
            raise ValueError("chunk must be at least 1")
        self._redis = redis
        self._scripts = scripts
        self._tasks = tasks
        self.chunk = chunk

    # --- reads ----------------------------------------------------------------------------

    async def holding(self, names: Sequence[str], state: TaskState) -> list[str]:
        """The queues of ``names`` holding any task in ``state`` (running or dead), in their
        order, in one round trip: a walk over every queue skips the empty ones."""
        indexes = [keys.state_index(n, state) for n in names]
        sizes = await index_sizes(self._redis, self._scripts, indexes)
        return [name for name, n in zip(names, sizes, strict=True) if n]

    async def walk(
        self,
        key: str,
        *,
        since: int | None = None,
        before: int | None = None,
        after: Position | None = None,
        count: int | None = None,
    ) -> list[tuple[str, int]]:
        """Up to ``count`` (else ``chunk``) members of a ZSET with their scores, in order,
        scored from ``since`` (inclusive) to ``before`` (exclusive), coming after ``after``."""
        reply = await self._scripts.call(
            "walk",
            [key],
            [
                "-inf" if since is None else since,
                "" if before is None else before,
                count or self.chunk,
                "" if after is None else after.member,
                "" if after is None else after.score,
            ],
        )
        return [(str(reply[i]), int(float(reply[i + 1]))) for i in range(0, len(reply), 2)]

    async def dead(
        self,
        queue: str,
        *,
        since: int | None = None,
        before: int | None = None,
        after: Position | None = None,
        count: int | None = None,
    ) -> list[Entry]:
        """Dead tasks by the time they died (``done:dead``), with their records."""
        rows = await self.walk(
            QueueKeys.of(queue).dead, since=since, before=before, after=after, count=count
        )
        return await self.entries(queue, rows)

    async def scheduled(
        self, queue: str, *, after: Position | None = None, count: int | None = None
    ) -> list[Entry]:
        """Scheduled tasks by due time, with their records."""
        rows = await self.walk(QueueKeys.of(queue).scheduled, after=after, count=count)
        return await self.entries(queue, rows)

    async def locate_many(self, task_ids: Sequence[str]) -> list[str | None]:
        """The queue of each task (None when unknown): :func:`gateway.store.index.locate_many`."""
        return await index.locate_many(self._redis, task_ids)

    async def records(self, queue: str, task_ids: Sequence[str]) -> list[Record | None]:
        if not task_ids:
            return []
        raw = cast(list[str | None], await self._redis.hmget(QueueKeys.of(queue).meta, task_ids))
        return [None if r is None else load_record(r) for r in raw]

    async def entries(self, queue: str, rows: Sequence[tuple[str, int]]) -> list[Entry]:
        """The records of walked task ids."""
        records = await self.records(queue, [task_id for task_id, _ in rows])
        return [
            Entry(task_id, score, record)
            for (task_id, score), record in zip(rows, records, strict=True)
        ]

    async def read_many(self, queue: str, task_ids: Sequence[str]) -> list[FullRecord | None]:
        """Whole tasks with their attempt history, in two round trips."""
        if not task_ids:
            return []
        k = QueueKeys.of(queue)
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.hmget(k.meta, task_ids)
            pipe.hmget(k.payload, task_ids)
            pipe.hmget(k.result, task_ids)
            pipe.hmget(k.checkpoint, task_ids)
            metas, payloads, results, checkpoints = await pipe.execute()
        records = [None if m is None else load_record(m) for m in metas]
        fields = [
            f"{task_id}:{n}"
            for task_id, record in zip(task_ids, records, strict=True)
            if record is not None
            for n in range(1, int(record.get("hist") or 0) + 1)
        ]
        found = (
            cast(list[str | None], await self._redis.hmget(k.attempts, fields)) if fields else []
        )
        attempts = dict(zip(fields, found, strict=True))
        out: list[FullRecord | None] = []
        for i, task_id in enumerate(task_ids):
            record = records[i]
            if record is None:
                out.append(None)
                continue
            history = [
                a
                for n in range(1, int(record.get("hist") or 0) + 1)
                if (a := attempts.get(f"{task_id}:{n}")) is not None
            ]
            out.append(FullRecord(record, payloads[i], results[i], checkpoints[i], history))
        return out

    async def running(self, queue: str) -> list[RunningRow]:
        """Every running task of a queue, by lease expiry, with its endpoint's URL."""
        k = QueueKeys.of(queue)
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.zrange(k.running, 0, -1)
            pipe.hgetall(k.endpoints)
            task_ids, endpoints = await pipe.execute()
        urls = {ep_id: json.loads(raw).get("url") or None for ep_id, raw in endpoints.items()}
        rows = []
        for start in range(0, len(task_ids), self.chunk):
            chunk = task_ids[start : start + self.chunk]
            for task_id, record in zip(chunk, await self.records(queue, chunk), strict=True):
                if record is not None and record.get("state") == TaskState.RUNNING:
                    rows.append(RunningRow(task_id, record, urls.get(record.get("ep") or "")))
        return rows

    # --- changes --------------------------------------------------------------------------

    async def resubmit(
        self, queue: str, task_ids: Sequence[str], now_ms: int, *, reset_attempts: bool
    ) -> list[Resubmitted]:
        """Queue dead tasks again, up to ``chunk`` per script call; other tasks stay as they
        are and are reported as such."""
        k = QueueKeys.of(queue)
        out: list[Resubmitted] = []
        for start in range(0, len(task_ids), self.chunk):
            chunk = task_ids[start : start + self.chunk]
            replies = await self._scripts.call(
                "resubmit",
                [k.meta, k.ready, k.seq, k.dead, k.attempts, k.policy, k.key_counts],
                [
                    now_ms,
                    "1" if reset_attempts else "0",
                    keys.WAKE_CHANNEL,
                    queue,
                    "",
                    "",
                    "",
                    *chunk,
                ],
            )
            for task_id, reply in zip(chunk, replies, strict=True):
                outcome = Resubmit(reply[0])
                state = TaskState(reply[1]) if outcome is Resubmit.NOTDEAD else None
                out.append(Resubmitted(task_id, outcome, state))
        return out

    async def clean(
        self,
        queue: str,
        state: TaskState,
        finished_by_ms: int,
        limit: int,
        *,
        name: str | None = None,
        owner: str | None = None,
    ) -> int:
        """Delete up to ``limit`` tasks that ended in ``state`` at or before ``finished_by_ms``
        (of one task name and of one owner when given), oldest first; returns how many. Each
        chunk is read from the state's index, then one script call deletes all that its tasks
        keep in the queue's slot (their steps and log lists too: it is given those keys);
        their index entries, in other slots, are dropped after it."""
        k = QueueKeys.of(queue)
        index = k.finished(state)
        script_keys = [
            k.meta,
            k.payload,
            k.result,
            k.checkpoint,
            k.attempts,
            index,
            k.steps,
            k.dedup,
            k.dedup_exp,
            k.singleton,
            k.notify,
            k.waits,
            k.wait_shapes,
        ]
        deleted = 0
        skip = 0  # entries kept by earlier chunks (another name or owner): they stay first
        while deleted < limit:
            entries = cast(
                list[str],
                await self._redis.zrangebyscore(index, "-inf", finished_by_ms, skip, self.chunk),
            )
            examined, kept, *ids = await self._scripts.call(
                "clean",
                [*script_keys, *(k.log(task_id) for task_id in entries)],
                [
                    finished_by_ms,
                    name or "",
                    min(self.chunk, limit - deleted),
                    owner or "",
                    *entries,
                ],
            )
            await self._tasks.unindex(ids)
            deleted += len(ids)
            skip += int(kept)
            if int(examined) < self.chunk:  # the index holds no more (or the limit was reached)
                break
        return deleted
