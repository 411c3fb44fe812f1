"""Automatic redrive in Redis: the per-queue cadence lock and the redrive mode of
``lua/resubmit.lua``.

A pass walks the queue's dead index (``done:dead``, scored by death time) with
:meth:`gateway.store.operations.OperationsStore.walk` and hands each page of ids to
:meth:`RedriveStore.redrive`, one script call per page; the script decides each task on its own
record (dead, its last failure's kind, its death time, its redrive count), so two passes at once
move each task at most once between them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from redis.asyncio import Redis

from gateway.store import keys
from gateway.store.keys import QueueKeys
from gateway.store.operations import OperationsStore, Position
from gateway.store.scripts import Scripts
from sdk.wire import Redrive


class Redriven(StrEnum):
    OK = "OK"  # queued again, the redrive counted and recorded in the task's history
    NOTASK = "NOTASK"  # no such task in the queue
    NOTDEAD = "NOTDEAD"  # the task is in another state (moved meanwhile)
    NOMATCH = "NOMATCH"  # dead, but the policy leaves it: see ``RedriveReply.why``


@dataclass(frozen=True, slots=True)
class RedriveReply:
    task_id: str
    outcome: Redriven
    # NOMATCH: 'kind', 'young' or 'cap' (max_redrives reached); NOTDEAD: the task's state
    why: str | None = None


class RedriveStore:
    def __init__(self, redis: Redis, scripts: Scripts, operations: OperationsStore) -> None:
        self._redis = redis
        self._scripts = scripts
        self._operations = operations

    async def dead(
        self, queue: str, before_ms: int, after: Position | None, count: int
    ) -> list[tuple[str, int]]:
        """Up to ``count`` dead task ids with their death times, oldest first, that died before
        ``before_ms``, coming after ``after``."""
        dead = QueueKeys.of(queue).dead
        return await self._operations.walk(dead, before=before_ms, after=after, count=count)

    async def take_turn(self, queue: str, holder: str, every_ms: int) -> tuple[bool, int]:
        """Whether this gateway makes the queue's pass now, and the ms until the next turn can
        be had: the first to ask in each period of ``every_ms`` gets it (``SET NX PX`` on the
        queue's own key, so Cluster-safe), the others learn when it ends (its ``PTTL``), in the
        same round trip. The key expires by itself, so a gateway that died holds nothing."""
        key = QueueKeys.of(queue).redrive
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.set(key, holder, nx=True, px=every_ms)
            pipe.pttl(key)
            won, left = await pipe.execute()
        return bool(won), max(int(left), 0) if not won else every_ms

    async def redrive(
        self,
        queue: str,
        task_ids: Sequence[str],
        now_ms: int,
        policy: Redrive,
        died_before_ms: int,
    ) -> list[RedriveReply]:
        """Queue again the dead tasks among ``task_ids`` that ``policy`` matches and that died
        before ``died_before_ms``; one script call."""
        if not task_ids:
            return []
        k = QueueKeys.of(queue)
        replies = await self._scripts.call(
            "resubmit",
            [k.meta, k.ready, k.seq, k.dead, k.attempts, k.policy, k.key_counts],
            [
                now_ms,
                "redrive",
                keys.WAKE_CHANNEL,
                queue,
                policy.max_redrives,
                " ".join(kind.value for kind in policy.on),
                died_before_ms,
                *task_ids,
            ],
        )
        return [
            RedriveReply(task_id, Redriven(reply[0]), reply[1] if len(reply) > 1 else None)
            for task_id, reply in zip(task_ids, replies, strict=True)
        ]
