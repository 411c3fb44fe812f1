"""The recoverer's reads and moves: due tasks, expired and stalled leases, sweeping."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from redis.asyncio.cluster import RedisCluster

from gateway.store import keys
from gateway.store.index import drop_commands, unindex_keys
from gateway.store.keys import QueueKeys
from gateway.store.records import load_record
from gateway.store.tasks.base import StoreBase
from sdk.wire import TaskState


@dataclass(frozen=True, slots=True)
class Expired:
    """A running task whose lease has run out, as read before its expiry is recorded (``token``
    is empty for an index entry whose task is not running)."""

    task_id: str
    token: str
    attempt: int
    max_attempts: int | None


class Recovering(StoreBase):
    """What the recoverer needs: promote, find expiries and stalls, sweep."""

    async def promote(self, queue: str, now_ms: int, limit: int) -> int:
        """Move due scheduled tasks to the ready set; returns how many moved."""
        k = QueueKeys.of(queue)
        moved: int = await self._scripts.call(
            "promote",
            [k.meta, k.scheduled, k.ready, k.seq, k.policy, k.key_counts],
            [now_ms, limit, keys.WAKE_CHANNEL, queue],
        )
        return moved

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

    async def sweep(self, queue: str, now_ms: int, limit: int) -> int:
        """Delete finished tasks past their retention; returns how many. A job's run is kept
        while the outbox holds anything (its end may be there): deliver it first."""
        k = QueueKeys.of(queue)
        ids: list[str] = await self._scripts.call(
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
                k.outbox,
            ],
            [now_ms, limit],
        )
        await self.forget(queue, ids)
        return len(ids)

    async def forget(self, queue: str, task_ids: Sequence[str]) -> None:
        """Delete the index entries, log lists and durable steps of tasks that are gone: per
        chunk of 500, one round trip for the queue's keys and the index's entries on a cluster
        (a command per bucket and per older key), and one ``unindex`` script call for the
        index's on a single Redis."""
        k = QueueKeys.of(queue)
        cluster = isinstance(self._redis, RedisCluster)
        for start in range(0, len(task_ids), 500):
            chunk = task_ids[start : start + 500]
            if not chunk:
                break
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.hdel(k.steps, *chunk)
                pipe.delete(*(k.log(task_id) for task_id in chunk))  # all in the queue's slot
                if cluster:
                    drop_commands(pipe, chunk)
                await pipe.execute()
            if not cluster:
                await self._scripts.call("unindex", unindex_keys(chunk), chunk)
