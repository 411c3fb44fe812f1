"""Ending attempts: results, errors, retries, each fenced by its lease.

Every end goes through :meth:`Finishing._finish`, which reads top to bottom: the script's words
(:mod:`.finish_words`), one round trip shared with the finishes of the same moment and carrying
the claim an idle dispatcher asked for (:mod:`.carried`), then the reply read back into each
end's :class:`~.finish_reply.Finished` and the markers after them (:mod:`.finish_reply`).
"""

from __future__ import annotations

from collections.abc import Sequence

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.store import keys
from gateway.store.coalescing import Packed
from gateway.store.notices import mark as mark_noticed
from gateway.store.scripts import Reply
from gateway.store.tasks.base import StoreBase
from gateway.store.tasks.carried import Carried, ClaimOrder
from gateway.store.tasks.finish_reply import Ended, Finished, read_finished, read_markers
from gateway.store.tasks.finish_words import Finish, finish_keys, finish_words


class Finishing(StoreBase):
    """Ends attempts."""

    async def finish(self, queue: str, finish: Finish, now_ms: int) -> Finished:
        """:meth:`finish_many` of one end (a worker's callback)."""
        (done,) = (await self._finish(queue, [finish], now_ms, None, "")).done
        return done

    async def finish_many(
        self, queue: str, finishes: Sequence[Finish], now_ms: int
    ) -> list[Finished]:
        """End many attempts of one queue in one script call; each end is decided on its own
        (fenced by its own token), so one stale lease does not stop the others. When ready
        tasks wait for the room freed, every gateway's dispatcher is told (``jg:wake``)."""
        return (await self._finish(queue, finishes, now_ms, None, "")).done

    async def finish_batch(
        self,
        queue: str,
        finishes: Sequence[Finish],
        now_ms: int,
        *,
        claim: ClaimOrder | None = None,
    ) -> Ended:
        """:meth:`finish_many` for the dispatcher of this gateway, which acts on
        :attr:`Ended.ready` itself: the wake message names this gateway, so it reaches the
        other gateways' dispatchers and this one's pull polls only.

        ``claim``: a push claim run right after the finish script in the same round trip (the
        room just freed is taken without a second one), handed to its ``take`` whatever the
        finish's outcome, as an enqueue's (:meth:`Enqueuing.enqueue_batch`)."""
        return await self._finish(queue, finishes, now_ms, claim, self._origin)

    async def _finish(
        self,
        queue: str,
        finishes: Sequence[Finish],
        now_ms: int,
        claim: ClaimOrder | None,
        origin: str,
    ) -> Ended:
        order = Carried(queue, claim)
        try:
            if not finishes:
                return Ended([])
            wake = f"{queue}  {origin}" if origin else queue
            head = (now_ms, keys.DONE_CHANNEL_PREFIX, queue, keys.WAKE_CHANNEL, wake)
            ends = finish_words(finishes)
            replies = await self._finish_shared(finish_keys(queue), head, ends, order)
        finally:
            order.unanswered()
        ready, heard, noticed = read_markers(replies, len(finishes))
        if noticed:  # a completion callback notice was recorded
            await mark_noticed(self._redis, queue, now_ms)
        alone = ready and self._sharing is not None and heard <= 1  # not on a cluster
        shared = ready and heard >= 2
        return Ended([read_finished(reply) for reply in replies], ready, alone, shared)

    async def _finish_shared(
        self, script_keys: Packed, head: tuple[int | str, ...], ends: Packed, order: Carried
    ) -> Reply:
        """The finish script, and the claim ``order`` asks for if any, in one round trip shared
        with the finishes of the same moment; the finish's reply, the claim's given to its
        taker. The command is packed by :func:`gateway.store.coalescing.pack` (redis-py's own
        packing of a finish of 32 ends took three times as long).

        On a cluster the finish goes through redis-py and no claim rides (a round trip there is
        per slot). When the shared connection fails, the claim is not sent again (it may have
        run, and its leases would then be held until they expire): its taker hears None, and
        the finish goes alone through redis-py, which retries (an end already written answers
        STALE)."""
        if self._sharing is None:
            order.unanswered()
            return await self._call_alone(script_keys, head, ends)
        sha = self._scripts.sha("finish")
        finish = ("EVALSHA", sha, len(script_keys.words), script_keys, *head, ends)
        for _ in range(2):  # again once the scripts are loaded, if Redis had lost them
            try:
                if order.pending is None:
                    (reply,) = await self._sharing.run([finish])
                    claimed = None
                else:
                    reply, claimed = await self._sharing.run([finish, order.command(self._scripts)])
            except (RedisConnectionError, RedisTimeoutError):
                order.unanswered()
                return await self._call_alone(script_keys, head, ends)
            await order.hand_over(self._scripts, self._redis, claimed)
            if not isinstance(reply, NoScriptError):
                break
            await self._scripts.load()  # Redis restarted or failed over
        if isinstance(reply, Exception):
            raise reply
        return await self._scripts.unwrap("finish", script_keys.words, reply)

    async def _call_alone(
        self, script_keys: Packed, head: tuple[int | str, ...], ends: Packed
    ) -> Reply:
        """The finish script through redis-py (which retries a failed connection)."""
        return await self._scripts.call("finish", script_keys.words, [*head, *ends.words])
