"""The recoverer's reads and moves: due tasks, expired and stalled leases, sweeping."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from redis.asyncio.cluster import RedisCluster

from gateway.store import keys
from gateway.store.index import drop_commands, unindex_keys
from gateway.store.keys import QueueKeys
from gateway.store.queues import stored_policy
from gateway.store.records import load_record
from gateway.store.tasks.base import StoreBase
from sdk.wire import QueuePolicy, TaskState


@dataclass(frozen=True, slots=True)
class Expired:
    """A running task whose lease has run out, as read before its expiry is recorded (``token``
    is empty for an index entry whose task is not running)."""

    task_id: str
    token: str
    attempt: int
    max_attempts: int | None


@dataclass(frozen=True, slots=True)
class Looked:
    """What :meth:`Recovering.promote_and_look` did and found: ``moved`` tasks promoted, the
    queue's ``policy`` (None: no such queue), the other work ``pending`` (``promote``,
    ``expired``, ``stalled``, ``outbox``, ``links``, ``calls``, ``sweep``) and, when none is,
    the queue's next ``due`` time as reckoned (None: nothing due)."""

    moved: int
    policy: QueuePolicy | None
    pending: frozenset[str]
    due: int | None


def _promote_keys(k: QueueKeys) -> list[str]:
    """The keys of ``lua/promote.lua``, the first of ``lua/recover.lua``'s."""
    return [
        k.meta,
        k.scheduled,
        k.ready,
        k.seq,
        k.policy,
        k.key_counts,
        k.steps,
        k.waits,
        k.wait_shapes,
        k.calls,
    ]


class Recovering(StoreBase):
    """What the recoverer needs: promote, find expiries and stalls, sweep."""

    async def promote(self, queue: str, now_ms: int, limit: int) -> int:
        """Move due scheduled tasks to the ready set (a wait for an event that timed out
        records its step's ``null`` first); returns how many moved."""
        k = QueueKeys.of(queue)
        moved: int = await self._scripts.call(
            "promote",
            _promote_keys(k),
            [now_ms, limit, keys.WAKE_CHANNEL, queue],
        )
        return moved

    async def promote_and_look(
        self, queue: str, now_ms: int, limit: int, sweep_every_ms: int
    ) -> Looked:
        """Promote as :meth:`promote` does and look at what else of the queue is due, in one
        script (``lua/recover.lua``); when nothing is, it reckons the queue's next due time as
        :meth:`~gateway.store.tasks.due.DueIndexing.reckon_due` does. A queue due only for its
        promotion (a busy queue's usual case) so costs one round trip here, not eight
        (bench/RESULTS.md, "How cost grows")."""
        k = QueueKeys.of(queue)
        moved, raw, pending, due = await self._scripts.call(
            "recover",
            [
                *_promote_keys(k),
                k.running,
                k.stalls,
                k.dedup_exp,
                k.links,
                k.outbox,
                *(k.finished(state) for state in keys.FINISHED_STATES),
            ],
            [now_ms, limit, keys.WAKE_CHANNEL, queue, sweep_every_ms],
        )
        policy = None if raw is None else stored_policy(raw)
        return Looked(int(moved), policy, frozenset(pending), None if due is None else int(due))

    async def expired(self, queue: str, now_ms: int, limit: int) -> list[Expired]:
        """Running tasks whose lease ran out by ``now_ms`` (read only; finish() records it)."""
        k = QueueKeys.of(queue)
        ids = cast(list[str], await self._redis.zrangebyscore(k.running, "-inf", now_ms, 0, limit))
        return await self._running(k, ids)

    async def stalled(self, queue: str, now_ms: int, limit: int) -> list[Expired]:
        """Running tasks silent past their heartbeat interval by ``now_ms`` (read only)."""
        k = QueueKeys.of(queue)
        ids = cast(list[str], await self._redis.zrangebyscore(k.stalls, "-inf", now_ms, 0, limit))
        return await self._running(k, ids)

    async def _running(self, k: QueueKeys, ids: list[str]) -> list[Expired]:
        if not ids:
            return []
        found = []
        for task_id, raw in zip(ids, await self._redis.hmget(k.meta, ids), strict=True):
            record = load_record(raw) if raw is not None else {}
            if record.get("state") == TaskState.RUNNING and "lease" in record:
                found.append(
                    Expired(task_id, record["lease"], record["att"], record.get("max_att"))
                )
            else:
                # Not running: a stray entry. Finishing it with no token changes no task, and
                # the script drops the entry, which would otherwise stay due for ever.
                found.append(Expired(task_id, "", 1, None))
        return found

    async def sweep(
        self, queue: str, now_ms: int, limit: int, policy: QueuePolicy | None = None
    ) -> int:
        """Delete finished tasks past their retention; returns how many. ``policy``: the
        queue's, when the caller has just read it (saves reading it again)."""
        ids = await self.sweep_slot(queue, now_ms, limit, policy)
        await self.unindex(ids)
        return len(ids)

    async def sweep_slot(
        self, queue: str, now_ms: int, limit: int, policy: QueuePolicy | None = None
    ) -> list[str]:
        """The sweep's script (up to ``limit`` tasks of each finished state): deletes all that
        the tasks past retention keep in the queue's slot, their log lists included, and
        returns their ids, whose index entries (other slots) :meth:`unindex` drops. What a
        gateway that stops right after it leaves: index entries, which the index's repair
        drops. The candidates are read first (the policy, then each state's oldest past its
        retention), so that the script can be given their log lists; it deletes only those
        still past retention when it runs. A job's run is kept while the queue's outbox holds
        anything (its end may be there): the recoverer delivers it first.

        The script runs only when there is something for it: a candidate, or a dedup window
        that has ended (read in the same round trip as the candidates). The recoverer calls
        this only when ``lua/recover.lua`` found either, so a busy queue's recoveries mostly
        skip it (bench/RESULTS.md, "How cost grows")."""
        k = QueueKeys.of(queue)
        if policy is None:
            raw = cast(str | None, await self._redis.hget(k.policy, "policy"))
            if raw is None:
                return []
            policy = stored_policy(raw)
        async with self._redis.pipeline(transaction=False) as pipe:
            for state in keys.FINISHED_STATES:
                retention = (
                    policy.retention_succeeded
                    if state is TaskState.SUCCEEDED
                    else policy.retention_failed
                )
                cutoff = now_ms - math.floor(retention * 1000 + 0.5)  # as the script's ms()
                pipe.zrangebyscore(k.finished(state), "-inf", cutoff, 0, limit)
            pipe.zrangebyscore(k.dedup_exp, "-inf", now_ms, 0, 1)
            *found, ended = cast(list[list[str]], await pipe.execute())
        candidates = [task_id for ids in found for task_id in ids]
        if not candidates and not ended:
            return []
        deleted: list[str] = await self._scripts.call(
            "sweep",
            [
                k.policy,
                k.meta,
                k.payload,
                k.result,
                k.checkpoint,
                k.attempts,
                k.succeeded,
                k.failed,
                k.dead,
                k.cancelled,
                k.dedup,
                k.dedup_exp,
                k.steps,
                k.singleton,
                k.notify,
                k.outbox,
                k.waits,
                k.wait_shapes,
                *(k.log(task_id) for task_id in candidates),
            ],
            [now_ms, limit, *(len(ids) for ids in found), *candidates],
        )
        return deleted

    async def reshape(self, queue: str, limit: int) -> int:
        """Rewrite the queue's ready-set members of the shape gateways before the 17-character
        place wrote (``lua/reshape.lua``), ``limit`` a call until none is left; returns how many
        it rewrote. Each call is atomic and idempotent, so a pass cut short is finished by the
        next one."""
        k = QueueKeys.of(queue)
        rewritten = 0
        while True:
            n = int(await self._scripts.call("reshape", [k.meta, k.ready, k.capabilities], [limit]))
            rewritten += n
            if n < limit:
                return rewritten

    async def forget(self, queue: str, task_ids: Sequence[str]) -> None:
        """Delete what the script that deleted a queue's tasks (queue deletion, which does not
        know their ids before) could not: their log lists (keys of their own, which expire by
        themselves) and their index entries (:meth:`unindex`), per chunk of 500."""
        k = QueueKeys.of(queue)
        for start in range(0, len(task_ids), 500):
            chunk = task_ids[start : start + 500]
            await self._redis.delete(*(k.log(task_id) for task_id in chunk))  # the queue's slot
            await self.unindex(chunk)

    async def unindex(self, task_ids: Sequence[str]) -> None:
        """Drop the id index entries of tasks that are gone (they lie in other slots than the
        tasks, so the script that deleted the tasks could not; the index's repair,
        :class:`~gateway.store.index.IndexRepair`, drops those a gateway that died before this
        left). Per chunk of 500: on a single Redis one ``unindex`` script call, on a cluster
        one round trip of a command per bucket and per older key."""
        cluster = isinstance(self._redis, RedisCluster)
        for start in range(0, len(task_ids), 500):
            chunk = task_ids[start : start + 500]
            if cluster:
                async with self._redis.pipeline(transaction=False) as pipe:
                    drop_commands(pipe, chunk)
                    await pipe.execute()
            else:
                await self._scripts.call("unindex", unindex_keys(chunk), chunk)
