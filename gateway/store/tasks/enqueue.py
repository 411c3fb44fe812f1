"""Storing new tasks: one enqueue script per batch, and the id index beside it.

:meth:`Enqueuing.enqueue_batch` reads top to bottom: the script's words
(:mod:`.enqueue_words`), the id index claimed for ids a client chose
(:func:`gateway.store.index.claim_ids`), one round trip (the index entries, the script, the
claim it carries: :mod:`.carried`, and ``WAIT`` when replicas must confirm), then the reply read
back into each task's outcome (:mod:`.enqueue_reply`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from redis.asyncio.cluster import RedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.store import keys
from gateway.store.coalescing import Command, Packed, Word, unpacked
from gateway.store.index import Entry, claim_ids, set_entries, unindex
from gateway.store.notices import mark as mark_noticed
from gateway.store.records import NewTask
from gateway.store.scripts import Reply
from gateway.store.tasks.base import StoreBase
from gateway.store.tasks.carried import Carried, ClaimOrder
from gateway.store.tasks.enqueue_reply import Enqueued, Stored, read_entry, refusal, stored_before
from gateway.store.tasks.enqueue_words import index_words, keys_of, task_words
from gateway.store.tasks.waits import mark_waits


class Enqueuing(StoreBase):
    """Stores new tasks, all of a batch or none."""

    async def enqueue(
        self, queue: str, tasks: Sequence[NewTask], now_ms: int, *, client_ids: bool = False
    ) -> list[Stored]:
        """:meth:`enqueue_batch`, each task's outcome only."""
        return (await self.enqueue_batch(queue, tasks, now_ms, client_ids=client_ids)).stored

    async def enqueue_batch(
        self,
        queue: str,
        tasks: Sequence[NewTask],
        now_ms: int,
        *,
        client_ids: bool = False,
        claim: ClaimOrder | None = None,
    ) -> Enqueued:
        """Store tasks atomically; raises QueueNotFound or TaskExists and then stores nothing.

        The id index lives outside the queue's slot. Ids the gateway made are unique, so their
        index entries ride in the script's round trip; ids a client chose are claimed in the
        index first, so one already used in another queue is refused before anything is stored.

        ``claim``: a push claim run right after the enqueue script in the same round trip (a
        script of its own: the claim's rules are the claim script's), handed to its ``take``
        whatever the enqueue's outcome.
        """
        events = {event for t in tasks for event, _, _ in t.cancel_on}
        if events:  # before the script: an event after it then finds the queue (store/keys.py)
            await mark_waits(self._redis, queue, events)
        order = Carried(queue, claim)
        try:
            args: list[Word] = [now_ms, queue, keys.WAKE_CHANNEL, keys.DONE_CHANNEL_PREFIX]
            args += (task_words(tasks), self._origin)
            script_keys = keys_of(queue, tasks)
            index = [(keys.task_index(t.id), t.id) for t in tasks]
            if client_ids:
                indexed = await claim_ids(self._redis, queue, index)
                reply, confirmed = await self._store(queue, script_keys, args, [], order)
            else:
                indexed = index
                reply, confirmed = await self._store(queue, script_keys, args, index, order)
        finally:
            order.unanswered()
        if reply[0] == "OK":
            entries = reply[1 : len(tasks) + 1]
            markers = reply[len(tasks) + 1 :]
            if "NOTICE" in markers:  # a completion callback notice was recorded
                await mark_noticed(self._redis, queue, now_ms)
            stored = [read_entry(entry) for entry in entries]
            unused = [e for e, s in zip(index, stored, strict=True) if s.state is None]
            if unused:
                await unindex(self._redis, unused)
            if confirmed is not None:
                self._durability.confirm(confirmed)
            return Enqueued(stored, "WOKE" in markers)
        if reply[0] == "EXISTS" and not client_ids:
            earlier = await stored_before(self._redis, queue, tasks)
            if earlier is not None:
                return Enqueued(earlier, announced=False)
        if indexed:
            await unindex(self._redis, indexed)
        raise refusal(queue, reply)

    async def _store(
        self,
        queue: str,
        script_keys: Packed,
        args: list[Word],
        index: list[Entry],
        order: Carried,
    ) -> tuple[Reply, int | None]:
        """Run the enqueue script, with the index entries ``index`` set
        before it and the claim ``order`` asks for after it, in the same round trip. Returns its
        reply and, when replicas must confirm, how many did."""
        indexed, reply, claimed, confirmed = await self._pipeline(
            queue, script_keys, args, index, order
        )
        await order.hand_over(self._scripts, self._redis, claimed)
        if isinstance(reply, NoScriptError):
            await self._scripts.load()  # Redis restarted or failed over: load, run again
            indexed, reply, claimed, confirmed = await self._pipeline(
                queue, script_keys, args, index, order
            )
            await order.hand_over(self._scripts, self._redis, claimed)
        elif isinstance(indexed, NoScriptError):  # scripts flushed between the two commands
            await self._scripts.load()
            await set_entries(self._redis, queue, index)
        for answer in (reply, confirmed):
            if isinstance(answer, Exception):
                raise answer
        return await self._scripts.unwrap("enqueue", script_keys.words, reply), confirmed

    async def _pipeline(
        self,
        queue: str,
        script_keys: Packed,
        args: list[Word],
        index: list[Entry],
        order: Carried,
    ) -> tuple[Reply, Reply, Reply, Reply]:
        """One round trip: the index entries, the script, the claim
        script when ``order`` still asks for it, and ``WAIT`` when replicas must confirm (on the
        connection that wrote, as WAIT requires). Returns the replies of the index script (None
        without it), the enqueue script, the claim (None without it) and WAIT (None without
        it); errors come back as replies.

        On a single Redis the round trip is shared with the enqueues of the same moment
        (:mod:`gateway.store.coalescing`); when its connection fails, it is sent again through
        redis-py's pipeline, which retries (an enqueue whose first answer was lost is read back
        as stored: :func:`.enqueue_reply.stored_before`)."""
        one_command = len(index) > 1 and not isinstance(self._redis, RedisCluster)
        commands: list[Command]
        if one_command:  # one script call, not an HSET per task (5x the CPU for a batch)
            sha = self._scripts.sha("index")
            commands = [("EVALSHA", sha, len(index), index_words(index, queue))]
        else:  # one task; or a cluster, which refuses a script over several slots
            commands = [("HSET", bucket, task_id, queue) for bucket, task_id in index]
        # EVALSHA through execute_command: redis-py's cluster pipeline refuses
        # pipe.evalsha() but routes the command by its first key all the same.
        sha = self._scripts.sha("enqueue")
        commands.append(("EVALSHA", sha, len(script_keys.words), script_keys, *args))
        claim = order.pending
        if claim is not None:
            commands.append(order.command(self._scripts))
        replies = None
        if self._coalescer is not None:
            with contextlib.suppress(RedisConnectionError, RedisTimeoutError):
                replies = await self._coalescer.run(commands)
        if replies is None:
            async with self._redis.pipeline(transaction=False) as pipe:
                for command in commands:
                    pipe.execute_command(*unpacked(command))
                if self._durability.waits:
                    pipe.execute_command(*self._durability.wait_command())
                replies = await pipe.execute(raise_on_error=False)
        indexed = replies[0] if one_command else None
        confirmed = replies.pop() if self._durability.waits else None
        claimed = replies.pop() if claim is not None else None
        return indexed, replies[-1], claimed, confirmed
