"""The claim a round trip carries: an enqueue's (:mod:`.enqueue`) or a finish's (:mod:`.finish`)
own round trip may take the claim script along, right after its own script, for an idle
dispatcher (:meth:`gateway.dispatch.dispatcher.Dispatcher.offer`), which is handed the claim's
answer as soon as it is read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from redis.asyncio import Redis
from redis.exceptions import NoScriptError

from gateway.store.keys import QueueKeys
from gateway.store.scripts import Arg, Reply, Scripts
from gateway.store.tasks.leases import Claim, claim_args, claim_keys, read_claim, with_results


@dataclass(frozen=True, slots=True)
class ClaimOrder:
    """A push claim an enqueue carries in its own round trip (:meth:`Enqueuing.enqueue_batch`):
    the claim script, run right after the enqueue script, for up to ``count`` tasks with lease
    tokens from ``seed``, at the time ``now_ms()`` tells when the round trip is sent (not the
    enqueue's own, read before its records were built: a claim's time stored earlier than it
    ran would let a rate bucket refill early). ``take`` is called once, as soon as the claim's
    answer is read and whatever the enqueue's own outcome: with the :class:`Claim`, or None when
    no answer came (the claim may or may not have run)."""

    count: int
    seed: str
    now_ms: Callable[[], int]
    take: Callable[[Claim | None], None]


class Carried:
    """The claim a round trip carries (an enqueue's, a finish's), until its taker has been
    given an answer, or none."""

    def __init__(self, queue: str, claim: ClaimOrder | None) -> None:
        self.queue = queue
        self.now_ms = 0  # the claim's time, when sent
        self.pending = claim

    def answered(self, claim: Claim) -> None:
        if self.pending is not None:
            take, self.pending = self.pending.take, None
            take(claim)

    def unanswered(self) -> None:
        """No answer came (the round trip failed) or none will: the taker hears None."""
        if self.pending is not None:
            take, self.pending = self.pending.take, None
            take(None)

    def command(self, scripts: Scripts) -> tuple[Arg, ...]:
        """The claim script's EVALSHA for the pending order, its time read now (when the round
        trip is sent)."""
        assert self.pending is not None
        claiming = claim_keys(QueueKeys.of(self.queue))
        self.now_ms = self.pending.now_ms()
        arguments = claim_args(self.pending.count, self.pending.seed, self.now_ms)
        return ("EVALSHA", scripts.sha("claim"), len(claiming), *claiming, *arguments)

    async def hand_over(self, scripts: Scripts, redis: Redis, claimed: Reply) -> None:
        """Give the claim that rode along to its taker, once it ran (a NOSCRIPT answer means it
        did not: it may ride again when the round trip is sent again)."""
        if self.pending is None or claimed is None or isinstance(claimed, NoScriptError):
            return
        if isinstance(claimed, Exception):
            self.unanswered()
            return
        reply = await scripts.unwrap("claim", claim_keys(QueueKeys.of(self.queue)), claimed)
        self.answered(await with_results(redis, read_claim(self.queue, reply, self.now_ms)))
