"""Ending attempts: results, errors, retries and cancels, each fenced by its lease."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.store import keys
from gateway.store.coalescing import Packed
from gateway.store.keys import QueueKeys
from gateway.store.notices import mark as mark_noticed
from gateway.store.scripts import Reply
from gateway.store.tasks.base import StoreBase
from gateway.store.tasks.leases import Carried, ClaimOrder, Fence
from sdk.wire import AttemptOutcome, FailureKind, TaskState


@dataclass(slots=True)
class Finish:
    """One attempt's end, as the dispatcher or a callback reports it. Never changed once made,
    but not ``frozen``, as :class:`~gateway.store.records.Lease`: the dispatcher makes one per
    task it pushed, 0.4 µs against 1.4 for the 10 fields set through ``object.__setattr__``
    (timeit)."""

    task_id: str
    token: str
    outcome: AttemptOutcome
    http_status: int | None = None
    text: str = ""  # the result JSON when succeeded, else the error text
    traceback: str = ""
    delay_ms: int = 0  # before the retry, when there is one
    warning: str = ""  # succeeded, with this warning
    # An infrastructure failure's kind (the redrive policy filters on it); expired and stalled
    # attempts are 'timeout' whatever is given.
    failure: FailureKind | None = None
    # The worker said the task itself failed (a marked answer, an error callback): the attempt
    # counts as the endpoint's success, never against its circuit breaker.
    task_failure: bool = False


@dataclass(slots=True)
class Finished:
    """What the finish script did with one attempt's end. When the fence held (``OK``) it also
    says, for metrics, which task it was (``name``, ``version``), when the attempt started and
    the task was created, and how its endpoint's circuit changed (``'open'``, ``'closed'``).
    Never changed once made, but not ``frozen``, as :class:`Finish` (one per task ended)."""

    fence: Fence
    state: TaskState | None = None
    due_ms: int | None = None
    name: str = ""
    version: str = ""
    started_ms: int = 0
    created_ms: int = 0
    circuit: str = ""
    endpoint_id: str = ""


@dataclass(frozen=True, slots=True)
class Ended:
    """What one finish call did: each end (:class:`Finished`, in order), whether ready tasks
    wait for room it freed (``ready``: a claim now may take some; otherwise none of these ends
    gives a claim anything new), and then whether no other gateway heard so (``alone``: at most
    one subscriber of the wake channel, this gateway's own; never said on a Redis Cluster,
    whose PUBLISH counts the subscribers of one node only), or whether another gateway surely
    heard (``shared``: two subscribers or more heard, so at least one was not this gateway;
    said on a cluster too, where the count is a lower bound)."""

    done: list[Finished]
    ready: bool = False
    alone: bool = False
    shared: bool = False


class CancelResult(StrEnum):
    CANCELLED = "CANCELLED"  # it was queued, scheduled or waiting: it ended cancelled now
    REQUESTED = "REQUESTED"  # it is running: asked to stop (the end of its attempt decides)
    FINISHED = "FINISHED"  # it had ended (its state says how)
    NOTASK = "NOTASK"
    NOQUEUE = "NOQUEUE"


@dataclass(frozen=True, slots=True)
class Cancel:
    """What the cancel script did with one task: its result and, when the task had ended
    (``FINISHED``), the state it ended in."""

    result: CancelResult
    state: TaskState | None = None


@functools.lru_cache(maxsize=4096)
def _finish_keys(queue: str) -> Packed:
    """The finish script's keys for ``queue``, packed once."""
    k = QueueKeys.of(queue)
    return Packed.of(
        (
            k.policy,
            k.meta,
            k.result,
            k.attempts,
            k.running,
            k.inflight,
            k.ready,
            k.scheduled,
            k.seq,
            k.endpoints,
            k.succeeded,
            k.failed,
            k.dead,
            k.cancelled,
            k.waiting,
            k.dependents,
            k.groups,
            k.outbox,
            k.stalls,
            k.health,
            k.notify,
            k.key_counts,
        )
    )


_END = b"$%d\r\n%b\r\n" * 9  # an end's nine bulk strings


def _finish_words(finishes: Sequence[Finish]) -> Packed:
    """The finish script's nine arguments per end (lua/finish.lua), packed in RESP here at one
    format per end: :func:`gateway.store.coalescing.pack` takes a word at a time (a type test,
    an encode, a format each), 2.3 µs per end of a batch of 32 against 0.9 (timeit)."""
    words: list[str] = []
    resp: list[bytes] = []
    for f in finishes:
        end = (
            f.task_id,
            f.token,
            f.outcome.value,
            "" if f.http_status is None else str(f.http_status),
            f.text,
            f.warning if f.outcome is AttemptOutcome.SUCCEEDED else f.traceback,
            str(f.delay_ms),
            "" if f.failure is None else f.failure.value,
            "1" if f.task_failure else "",
        )
        words += end
        a, b, c, d, e, g, h, i, j = map(str.encode, end)
        # fmt: off
        resp.append(_END % (
            len(a), a, len(b), b, len(c), c, len(d), d, len(e), e,
            len(g), g, len(h), h, len(i), i, len(j), j,
        ))
        # fmt: on
    return Packed(tuple(words), b"".join(resp))


# Lookups by value rather than the enums' calls (each end of a finish reads both).
_FENCES: dict[str, Fence] = {fence.value: fence for fence in Fence}
_STATES: dict[str, TaskState] = {state.value: state for state in TaskState}


def _finished(reply: list[Any]) -> Finished:
    fence = _FENCES.get(reply[0]) or Fence(reply[0])
    if fence is Fence.OK:
        return Finished(  # positional, in the fields' order (keywords cost more)
            fence,
            _STATES.get(reply[1]) or TaskState(reply[1]),
            int(reply[2]) if reply[2] else None,  # due_ms
            reply[3],  # name
            reply[4],  # version
            int(reply[5]),  # started_ms
            int(reply[6]),  # created_ms
            reply[7],  # circuit
            reply[8],  # endpoint_id
        )
    if fence is Fence.STALE:
        return Finished(fence, TaskState(reply[1]))
    return Finished(fence)


class Finishing(StoreBase):
    """Ends attempts and cancels tasks."""

    async def finish(self, queue: str, finish: Finish, now_ms: int) -> Finished:
        (done,) = await self.finish_many(queue, [finish], now_ms)
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
            ends = _finish_words(finishes)
            replies = await self._finish_shared(_finish_keys(queue), head, ends, order)
        finally:
            order.unanswered()
        ready = alone = shared = False
        while len(replies) > len(finishes):  # markers after the ends
            marker = replies.pop()
            if marker[0] == "NOTICE":  # a completion callback notice was recorded
                await mark_noticed(self._redis, queue, now_ms)
            elif marker[0] == "READY":
                ready = True
                heard = int(marker[1])
                alone = self._sharing is not None and heard <= 1  # not on a cluster
                shared = heard >= 2
        return Ended([_finished(reply) for reply in replies], ready, alone, shared)

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

    async def cancel(self, queue: str, task_id: str, now_ms: int) -> CancelResult:
        return (await self.cancel_task(queue, task_id, now_ms)).result

    async def cancel_task(self, queue: str, task_id: str, now_ms: int) -> Cancel:
        """Cancel one task (cancel.lua): what the script did, read from its reply alone."""
        k = QueueKeys.of(queue)
        reply = await self._scripts.call(
            "cancel",
            [
                k.meta,
                k.ready,
                k.scheduled,
                k.cancelled,
                k.policy,
                k.seq,
                k.waiting,
                k.dependents,
                k.groups,
                k.outbox,
                k.failed,
                k.dead,
                k.notify,
                k.key_counts,
            ],
            [task_id, now_ms, keys.DONE_CHANNEL_PREFIX, queue, keys.WAKE_CHANNEL],
        )
        result = CancelResult(reply[0])
        if result is CancelResult.CANCELLED and len(reply) > 1:  # a notice was recorded
            await mark_noticed(self._redis, queue, now_ms)
        if result is CancelResult.FINISHED:
            return Cancel(result, TaskState(reply[1]))
        return Cancel(result)
