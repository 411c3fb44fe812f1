"""The due index: when each queue next needs the recoverer, in one sorted set for all queues.

``jg:due`` (ZSET) maps a queue name to the earliest time something of that queue is due: a
scheduled task, a lease expiry, a stall deadline (stall policy ``redispatch``), an undelivered
dependency notice, a cross-queue dependency to link again, a dedup window or finished task to
sweep. The recoverer reads its head with one command and sleeps until the earliest entry, so an
idle queue costs nothing, however many there are.

Redis Cluster forbids one script to touch the index and a queue's keys (two slots), so the index
is kept in two steps. Each queue's hash has a ``due`` field, the time the index was last told:

1. **Announce.** A script that makes something due (``enqueue``, ``claim``, ``finish``,
   ``cancel``, ``resolve``; the prelude's ``due_at``) compares the earliest such time with
   ``due``. Only when it is earlier does it store it there and return it, and the caller then
   lowers the index entry (``lower_due.lua``: ``ZADD LT``, which never raises it). A busy queue
   whose due time does not move earlier pays nothing beyond the comparison in the script.
2. **Reckon.** When the recoverer takes a due queue in hand, it first sets its index entry to a
   *mark*: a time ``HOLD_MS`` ahead with half a millisecond added, which no due time can equal.
   Then it does the queue's due work, and ``reckon_due.lua`` (or ``recover.lua``, when the
   queue was due only for its promotion) works out the queue's next due time from its own sets
   and stores it in ``due``. While the entry still holds the mark, the recoverer sets it to
   that time (or removes it: nothing due); otherwise a script announced a time meanwhile, and
   the entry is only lowered (``settle_due.lua``). Last, ``due`` is read again: a script that
   announced a time after the reckoning may have found the entry at the mark, which ``ZADD
   LT`` leaves alone when the time is later than the mark; then the entry is lowered to that
   time (on a single Redis inside the settling script; on a Cluster, where the index and the
   queue lie in two slots, by a read after it).

Why nothing is lost:

- Entries only go down (``ZADD LT``), except when a recoverer sets a mark or settles its own
  mark. The recoverer that set a mark reckons afterwards from the queue's own sets, which
  include every change made before the reckoning; a change made after it compares with the
  ``due`` the reckoning stored and announces itself if earlier, and if that announcement met
  the mark, the recoverer's last read of ``due`` finds it.
- Two recoverers on one queue each mark, reckon and settle; a mark is replaced by the settling
  only while it is still the entry, otherwise the lowest time wins.

What a crash costs (a gateway dying between two steps, or a failed index command):

- between a script and its index update: ``due`` says announced, the index does not know; the
  slow rescan finds it (every ``rescan_interval`` it compares every queue's ``due`` with its
  index entry, one command per queue, and lowers the entry where ``due`` is earlier), or the
  queue's next due work does, whichever comes first. Policy changes mark the queue due now in
  ``due`` together with the change, so they are covered the same way;
- between the mark and the reckoning: the entry holds the mark, so the queue is taken in hand
  again ``HOLD_MS`` later, by any gateway.

So a due time is never lost, and at worst late by one rescan interval after a crash. When a
gateway starts, and hourly, its recoverer also reckons every queue from its own sets
(``reckon_due``), which builds the index from nothing (a Redis restored without it, or queues
written by an older version).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from gateway.store import keys
from gateway.store.keys import QueueKeys
from gateway.store.tasks.base import StoreBase

HOLD_MS = 10_000


def mark(now_ms: int) -> float:
    """The index score that says "taken in hand at ``now_ms``": due again ``HOLD_MS`` later if
    the recoverer dies, and unlike any due time (those are whole milliseconds)."""
    return now_ms + HOLD_MS + 0.5


class DueIndexing(StoreBase):
    """Reads and writes of the due index, and the reckoning of one queue's due time."""

    async def due_queues(self, limit: int) -> list[tuple[str, float]]:
        """The ``limit`` earliest entries of the index, earliest first: (queue, due ms)."""
        rows = cast(
            list[tuple[str, float]],
            await self._redis.zrange(keys.DUE, 0, limit - 1, withscores=True),
        )
        return [(queue, float(at)) for queue, at in rows]

    async def hold(self, queues: Sequence[str], held: float) -> None:
        """Set the index entries of ``queues`` to the mark ``held`` (only entries that exist)."""
        if queues:
            await self._redis.zadd(keys.DUE, dict.fromkeys(queues, held), xx=True)

    async def reckon_due(self, queue: str, now_ms: int, sweep_every_ms: int) -> int | None:
        """The queue's next due time from its own sets (None: nothing, or no such queue); also
        stored as the time the index was told, so later scripts compare with it."""
        k = QueueKeys.of(queue)
        due = await self._scripts.call(
            "reckon_due",
            [
                k.policy,
                k.scheduled,
                k.running,
                k.stalls,
                k.dedup_exp,
                k.links,
                k.outbox,
                k.succeeded,
                k.failed,
                k.dead,
                k.cancelled,
                k.calls,
            ],
            [now_ms, sweep_every_ms],
        )
        return None if due is None else int(due)

    async def settle_due(self, queue: str, due_ms: int | None, held: float) -> None:
        """After a reckoning: while the entry still holds the mark ``held``, set it to
        ``due_ms`` (or drop it: nothing due); otherwise only lower it to ``due_ms``."""
        # A script that announced a time after the reckoning may have found the entry at the
        # mark (which ZADD LT leaves alone when it is earlier) and the settling may then have
        # replaced or removed it. What it announced is in the queue's ``due`` field: the
        # script reads it itself on a single Redis; on a Cluster (another slot) it is read here.
        hash_key = QueueKeys.of(queue).policy
        await self._scripts.call(
            "settle_due",
            [keys.DUE] if self._cluster else [keys.DUE, hash_key],
            [queue, repr(held), "" if due_ms is None else due_ms, keys.DUE_CHANNEL],
        )
        if not self._cluster:
            return
        told = await self._redis.hget(hash_key, "due")
        if told is not None and (due_ms is None or int(told) < due_ms):
            await self._scripts.lower_due(queue, int(told))

    async def told_and_indexed(
        self, queues: Sequence[str]
    ) -> list[tuple[int | None, float | None]]:
        """For each queue: the due time its hash says the index was told, and the index's entry.
        One round trip (on Cluster, one per node); one command per queue and one for the index.
        """
        if not queues:
            return []
        async with self._redis.pipeline(transaction=False) as pipe:
            for queue in queues:
                pipe.hget(QueueKeys.of(queue).policy, "due")
            pipe.zmscore(keys.DUE, list(queues))
            *told, indexed = await pipe.execute()
        return [(None if t is None else int(t), i) for t, i in zip(told, indexed, strict=True)]

    async def lower_due(self, queue: str, due_ms: int) -> None:
        """Lower the queue's entry to ``due_ms`` (or add it); a failure is logged, not raised."""
        await self._scripts.lower_due(queue, due_ms)

    async def due_of(self, queue: str) -> float | None:
        """The queue's entry in the index (for tests and operators)."""
        return await self._redis.zscore(keys.DUE, queue)
