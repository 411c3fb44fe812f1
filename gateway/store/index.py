"""The id index: task id → queue, in 4,096 hash buckets (``jg:ix:<the id's low 12 bits>``).

A task's field is written in its enqueue's round trip (:mod:`gateway.store.tasks.enqueue`; ids a
client chose are claimed before it, :func:`claim_ids`) and dropped right after the script that
deletes the task (the sweep, ``clean``, queue deletion: :func:`drop_commands`). Each is a
command of its own beside the queue's script, as the bucket lies outside the queue's slot, so
a gateway that dies between the two leaves a field without a task (or, for an enqueue refused
after its index write, an entry of a task never stored).
:class:`IndexRepair` finds those: Redis has no expiry per hash field (before 7.4), so instead
of the key-per-task expiry older versions used as a backstop, a slow pass reads every bucket
and drops the fields whose task is gone. A field is dropped only when two passes in a row,
an hour apart with the defaults, find its task missing: the index is written a moment before
the enqueue script in the same round trip, so a task being stored is never taken for gone.

Reads fall back to the key per task older versions wrote (``jg:idx:<id>``,
:func:`gateway.store.keys.legacy_task_index`) when the bucket has no field for an id.
"""

from __future__ import annotations

import secrets
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any, cast

from redis.asyncio import Redis

from gateway.core.errors import TaskExists
from gateway.store import keys
from gateway.store.keys import QueueKeys
from gateway.store.scripts import Scripts

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford's base32, as task ids are written
BUCKETS = tuple(f"jg:ix:{q}{a}{b}" for q in "0123" for a in _ALPHABET for b in _ALPHABET)
"""Every bucket of the index (:func:`gateway.store.keys.task_index`)."""
CHECK = 1_000
"""Ids per ``missing`` script call: about 1.5 ms of Redis, so the repair never holds a shard
for long."""


async def locate(redis: Redis, task_id: str) -> str | None:
    """The queue of a task, or None: its bucket's field, else the key per task older versions
    wrote."""
    found = cast(str | None, await redis.hget(keys.task_index(task_id), task_id))
    if found is None:
        found = cast(str | None, await redis.get(keys.legacy_task_index(task_id)))
    return found


async def locate_many(redis: Redis, task_ids: Sequence[str]) -> list[str | None]:
    """The queue of each task (None when unknown): one HGET each (the buckets lie in several
    Cluster slots), then for those not found one GET each of the older key per task."""
    async with redis.pipeline(transaction=False) as pipe:
        for task_id in task_ids:
            pipe.hget(keys.task_index(task_id), task_id)
        found = cast(list[str | None], await pipe.execute())
    missing = [i for i, queue in enumerate(found) if queue is None]
    if missing:
        async with redis.pipeline(transaction=False) as pipe:
            for i in missing:
                pipe.get(keys.legacy_task_index(task_ids[i]))
            for i, queue in zip(missing, await pipe.execute(), strict=True):
                found[i] = queue
    return found


Entry = tuple[str, str]
"""An index entry: the bucket (:func:`gateway.store.keys.task_index`) and the task id."""


async def claim_ids(redis: Redis, queue: str, entries: list[Entry]) -> list[Entry]:
    """Point index entries at ``queue`` (ids a client chose, before their enqueue's script);
    returns those set now. Raises TaskExists when one points at another queue already, in the
    index or in the key per task older versions wrote."""
    async with redis.pipeline(transaction=False) as pipe:
        for bucket, task_id in entries:
            pipe.hsetnx(bucket, task_id, queue)
            pipe.get(keys.legacy_task_index(task_id))
        answers = await pipe.execute()
    fresh, legacy = answers[0::2], answers[1::2]
    new = [e for e, ok in zip(entries, fresh, strict=True) if ok]
    taken = [e for e, ok in zip(entries, fresh, strict=True) if not ok]
    foreign = [
        task_id
        for (_, task_id), owner in zip(entries, legacy, strict=True)
        if owner is not None and owner != queue
    ]
    if taken:
        # HGETs in a pipeline: the buckets of several ids lie in several Cluster slots.
        async with redis.pipeline(transaction=False) as pipe:
            for bucket, task_id in taken:
                pipe.hget(bucket, task_id)
            owners = await pipe.execute()
        foreign += [e[1] for e, owner in zip(taken, owners, strict=True) if owner != queue]
    if foreign:
        if new:
            await unindex(redis, new)
        raise TaskExists(foreign[0])
    return new


async def set_entries(redis: Redis, queue: str, entries: list[Entry]) -> None:
    """Index entries pointing at ``queue``, one HSET each, in one round trip (an enqueue's
    whose index script Redis had lost)."""
    async with redis.pipeline(transaction=False) as pipe:
        for bucket, task_id in entries:
            pipe.hset(bucket, task_id, queue)
        await pipe.execute()


async def unindex(redis: Redis, entries: list[Entry]) -> None:
    """Delete index entries written for tasks that were not stored."""
    async with redis.pipeline(transaction=False) as pipe:
        for bucket, ids in by_bucket(task_id for _, task_id in entries).items():
            pipe.hdel(bucket, *ids)
        await pipe.execute()


def by_bucket(task_ids: Iterable[str]) -> dict[str, list[str]]:
    """Task ids grouped by the bucket that holds their field."""
    grouped: dict[str, list[str]] = defaultdict(list)
    for task_id in task_ids:
        grouped[keys.task_index(task_id)].append(task_id)
    return grouped


def drop_commands(pipe: Any, task_ids: Sequence[str]) -> None:
    """Into ``pipe``: delete the index entries of tasks that are gone (an HDEL per bucket, and
    the older key per task, which may exist while tasks stored by older versions remain), as
    a cluster takes them; on a single Redis ``lua/unindex.lua`` does it in one command."""
    for bucket, ids in by_bucket(task_ids).items():
        pipe.hdel(bucket, *ids)
    for task_id in task_ids:
        pipe.delete(keys.legacy_task_index(task_id))


def unindex_keys(task_ids: Sequence[str]) -> list[str]:
    """The keys ``lua/unindex.lua`` takes for ``task_ids``: their buckets, then their older
    keys per task."""
    return [
        *(keys.task_index(task_id) for task_id in task_ids),
        *(keys.legacy_task_index(task_id) for task_id in task_ids),
    ]


class IndexRepair:
    """Drops index fields whose task is gone, left by gateways that died half way.

    :meth:`run` is one pass; the recoverer calls it hourly (every ``RECKON_EVERY`` rescans).
    One gateway makes a pass per ``every_ms`` (the turn ``jg:ix:turn``, ``SET NX PX``), reading
    ``batch`` buckets a round trip, then asking each queue seen which of their ids it no longer
    holds (``lua/missing.lua``, one call per queue). A field whose task is missing becomes a suspect
    (``jg:ix:suspects``); one that was a suspect of the previous pass already, naming the same
    queue, is dropped.
    """

    def __init__(self, redis: Redis, scripts: Scripts, *, batch: int = 64) -> None:
        self._redis = redis
        self._scripts = scripts
        self._batch = batch

    async def run(self, every_ms: int) -> int | None:
        """One pass, when this gateway takes the turn (else None); returns how many fields were
        dropped."""
        taken = await self._redis.set(
            keys.INDEX_TURN, secrets.token_hex(8), nx=True, px=max(every_ms * 9 // 10, 1)
        )
        if not taken:
            return None
        return await self.repair()

    async def repair(self) -> int:
        """One pass, unguarded: drop the suspects of the previous pass that are still missing,
        and record this pass's new suspects. Returns how many fields were dropped."""
        before = cast(dict[str, str], await self._redis.hgetall(keys.INDEX_SUSPECTS))
        missing: dict[str, str] = {}
        for start in range(0, len(BUCKETS), self._batch):
            async with self._redis.pipeline(transaction=False) as pipe:
                for bucket in BUCKETS[start : start + self._batch]:
                    pipe.hgetall(bucket)
                entries: list[dict[str, str]] = await pipe.execute()
            missing.update(await self._missing([e for bucket in entries for e in bucket.items()]))
        dropped = [task_id for task_id, queue in missing.items() if before.get(task_id) == queue]
        suspects = [x for i, q in missing.items() if before.get(i) != q for x in (i, q)]
        async with self._redis.pipeline(transaction=False) as pipe:
            for bucket, ids in by_bucket(dropped).items():
                pipe.hdel(bucket, *ids)
            pipe.delete(keys.INDEX_SUSPECTS)
            if suspects:
                pipe.hset(keys.INDEX_SUSPECTS, items=suspects)
            await pipe.execute()
        return len(dropped)

    async def _missing(self, entries: list[tuple[str, str]]) -> dict[str, str]:
        """Those of the (id, queue) entries whose queue holds no such task: one script call per
        queue (``lua/missing.lua``), which answers with those ids alone."""
        by_queue: dict[str, list[str]] = defaultdict(list)
        for task_id, queue in entries:
            by_queue[queue].append(task_id)
        missing: dict[str, str] = {}
        for queue, ids in by_queue.items():
            for start in range(0, len(ids), CHECK):
                gone = await self._scripts.call(
                    "missing", [QueueKeys.of(queue).meta], ids[start : start + CHECK]
                )
                missing.update((task_id, queue) for task_id in gone)
        return missing
