"""Completion callback notices in Redis: which queues have notices due, claiming due notices
under a lease, recording how a delivery went, and each queue's notify secret.

A notice is written by the script that ends its task (``record_notice`` in ``lua/prelude.lua``)
into the task's record (``ntc``) and the queue's ``notify`` set. The global ``jg:notify`` index
(queue → ms its earliest notice is due) lives on another Cluster slot, so it is written right
after that script (:func:`mark`), and :meth:`NoticeStore.rescan` rebuilds it from every queue's
set for a gateway that stopped in between. Delivery (``gateway/dispatch/notices.py``) reads the
index with one command per tick, so idle queues cost nothing.
"""

from __future__ import annotations

import base64
import secrets
from dataclasses import dataclass
from typing import Any, cast

from redis.asyncio import Redis

from gateway.store import keys
from gateway.store.keys import QueueKeys
from gateway.store.records import load_record
from gateway.store.scripts import Scripts


def new_notify_secret() -> str:
    """A Standard Webhooks secret, shaped like an endpoint's (``whsec_`` and 32 random bytes in
    base64): kept as a queue's notify secret when it has none yet."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


async def mark(redis: Redis, queue: str, due_ms: int) -> None:
    """Note in the global index that ``queue`` has a notice due at ``due_ms`` (an earlier due
    time already noted stays)."""
    await redis.zadd(keys.NOTIFY_INDEX, {queue: due_ms}, lt=True)
    # Wakes the delivery loop of every gateway (it sleeps until the earliest notice is due).
    await redis.publish(keys.NOTICE_CHANNEL, due_ms)


@dataclass(frozen=True, slots=True)
class ClaimedNotice:
    """One notice claimed for one delivery try."""

    queue: str
    task_id: str
    record: dict[str, Any]  # the task's record, ``ntc`` and ``nfy`` included
    result_json: str | None  # what it returned, when it succeeded

    @property
    def url(self) -> str:
        return str(self.record["nfy"])

    @property
    def finished_ms(self) -> int:
        return int(self.record["finished"])

    @property
    def tries(self) -> int:
        """Tries so far, this one included."""
        return int(self.record["ntc"]["n"])

    @property
    def message_id(self) -> str:
        """The same on every try of one notice: the receiver's key to drop repeats."""
        return f"{self.task_id}_{self.finished_ms}"


@dataclass(frozen=True, slots=True)
class NoticeClaim:
    secrets: tuple[str, ...]  # to sign with: the current one, and the previous during a rotation
    next_due_ms: int | None  # the queue's earliest notice after this claim, leased ones included
    notices: list[ClaimedNotice]


class NoticeStore:
    def __init__(self, redis: Redis, scripts: Scripts) -> None:
        self._redis = redis
        self._scripts = scripts

    async def due_queues(self, now_ms: int, limit: int) -> list[str]:
        """Queues with a notice due by ``now_ms``, earliest first."""
        return cast(
            list[str],
            await self._redis.zrangebyscore(keys.NOTIFY_INDEX, "-inf", now_ms, 0, limit),
        )

    async def claim(self, queue: str, now_ms: int, lease_ms: int, count: int) -> NoticeClaim | None:
        """Claim up to ``count`` due notices of ``queue``; None when the queue is gone (it is
        then dropped from the index)."""
        k = QueueKeys.of(queue)
        reply = await self._scripts.call(
            "notice_claim",
            [k.policy, k.meta, k.result, k.notify],
            [now_ms, lease_ms, count, new_notify_secret()],
        )
        if reply[0] == "NOQUEUE":
            await self._redis.zrem(keys.NOTIFY_INDEX, queue)
            return None
        _, secrets, next_due, *rest = reply
        claimed = [
            ClaimedNotice(queue, rest[i], load_record(rest[i + 1]), rest[i + 2] or None)
            for i in range(0, len(rest), 3)
        ]
        return NoticeClaim(
            tuple(secrets.split(" ")), int(float(next_due)) if next_due else None, claimed
        )

    async def reindex(self, queue: str, next_due_ms: int | None) -> None:
        """Set the queue's entry in the index to what a claim found (or drop it), then look
        again: a notice recorded meanwhile, whose :func:`mark` this may have overwritten, is
        seen by the second look (or its mark comes after this write and stands)."""
        if next_due_ms is None:
            await self._redis.zrem(keys.NOTIFY_INDEX, queue)
        else:
            await self._redis.zadd(keys.NOTIFY_INDEX, {queue: next_due_ms})
        first = await self._earliest(queue)
        if first is not None and (next_due_ms is None or first < next_due_ms):
            await mark(self._redis, queue, first)

    async def _earliest(self, queue: str) -> int | None:
        found = cast(
            list[tuple[str, float]],
            await self._redis.zrange(QueueKeys.of(queue).notify, 0, 0, withscores=True),
        )
        return int(found[0][1]) if found else None

    async def settle(
        self,
        notice: ClaimedNotice,
        outcome: str,
        now_ms: int,
        *,
        retry_at_ms: int = 0,
        error: str = "",
    ) -> bool:
        """Record a delivery try: ``delivered``, ``retry`` (at ``retry_at_ms``) or ``failed``.
        False when the try is stale (its lease ran out and another gateway claimed it)."""
        k = QueueKeys.of(notice.queue)
        reply = await self._scripts.call(
            "notice_settle",
            [k.meta, k.notify],
            [
                notice.task_id,
                notice.finished_ms,
                notice.tries,
                outcome,
                now_ms,
                retry_at_ms,
                error,
            ],
        )
        if reply[0] != "OK":
            return False
        await self.reindex(notice.queue, await self._earliest(notice.queue))
        return True

    async def earliest(self) -> int | None:
        """When the first notice of any queue is due, from the index: one command."""
        first = await self._redis.zrange(keys.NOTIFY_INDEX, 0, 0, withscores=True)
        return int(first[0][1]) if first else None

    async def rescan(self) -> int:
        """Put every queue's earliest notice into the index (a gateway may have stopped between
        a script that recorded a notice and its :func:`mark`). One command per queue, so it
        runs rarely. Returns how many queues have notices."""
        queues = sorted(cast(set[str], await self._redis.smembers(keys.QUEUES)))
        if not queues:
            return 0
        async with self._redis.pipeline(transaction=False) as pipe:
            for queue in queues:
                pipe.zrange(QueueKeys.of(queue).notify, 0, 0, withscores=True)
            firsts = await pipe.execute()
        found = {q: int(f[0][1]) for q, f in zip(queues, firsts, strict=True) if f}
        for queue, due in found.items():
            await mark(self._redis, queue, due)
        return len(found)

    async def secret(self, queue: str, now_ms: int = 0) -> str | None:
        """The queue's notify secret (made now when it has none); None when the queue is not
        registered."""
        found = await self.secret_and_overlap(queue, now_ms)
        return None if found is None else found[0]

    async def secret_and_overlap(self, queue: str, now_ms: int) -> tuple[str, int | None] | None:
        """The queue's notify secret (made now when it has none), and until when (ms) the
        previous one still signs beside it, if it does; None when the queue is not
        registered."""
        found = await self._scripts.call(
            "notify_secret", [QueueKeys.of(queue).policy], [new_notify_secret(), now_ms]
        )
        if not found:
            return None
        secret, until = found
        return str(secret), int(until) if until else None

    async def rotate_secret(self, queue: str, secret: str, previous_until_ms: int | None) -> bool:
        """Make ``secret`` the queue's notify secret; the current one signs beside it until
        ``previous_until_ms`` (None: dropped at once). False when the queue is not
        registered."""
        rotated = await self._scripts.call(
            "rotate_notify_secret", [QueueKeys.of(queue).policy], [secret, previous_until_ms or 0]
        )
        return bool(rotated)
