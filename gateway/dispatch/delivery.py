"""Pushing what the dispatcher claimed, and recording each answer.

The dispatcher (:mod:`gateway.dispatch.dispatcher`) hands :meth:`Deliverer.deliver` the leases
a claim took for one endpoint. They go one per push, or in batches when the endpoint takes them
(:mod:`gateway.dispatch.pusher`); each answer is read by the table
(:mod:`gateway.dispatch.verdict`) and written: the ends of attempts through the dispatcher's
finish coalescer (a finish may carry a claim: ``Dispatcher._finish_many``), acceptances (202)
through this one's own.

Every answer is recorded, 202 included (the endpoint accepted the attempt: from then on its
lease running out counts against the endpoint), and no push waits past its lease, heartbeats
included (:meth:`Deliverer._within_lease`): a live gateway always sees how its push ended
before the lease runs out, so a lease that runs out with the push unanswered means the gateway
holding it died or lost Redis, which is no fault of the endpoint.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from gateway.caches.directory import Directory, QueueView
from gateway.core.backoff import retry_delay_ms
from gateway.dispatch.batching import Coalescer
from gateway.dispatch.lease_watch import LeaseWatch, Watched
from gateway.dispatch.pusher import Pusher
from gateway.dispatch.verdict import Answer, Verdict, judge
from gateway.store.clock import Clock
from gateway.store.endpoint_records import EndpointRecord
from gateway.store.records import Lease
from gateway.store.tasks import Fence, Finish, Finished, TaskStore
from sdk.wire import AttemptOutcome, FailureKind

log = logging.getLogger("gateway.dispatch.dispatcher")  # its lines keep the name they had

T = TypeVar("T")
LEASE_OVER = Answer(None, failure="no answer before the lease ran out", kind=FailureKind.TIMEOUT)
RETRIED_WITH_BACKOFF = frozenset({AttemptOutcome.ERROR, AttemptOutcome.BUSY})


class Deliverer:
    """Pushes the leases a dispatcher claimed and records their answers."""

    def __init__(
        self,
        tasks: TaskStore,
        directory: Directory,
        pusher: Pusher,
        clock: Clock,
        rng: random.Random,
        finishes: Coalescer[Finish, Finished],
        on_finished: Callable[[str, Finished], None],
    ) -> None:
        self._tasks = tasks
        self._directory = directory
        self._pusher = pusher
        self._clock = clock
        self._rng = rng
        self._on_finished = on_finished
        self._watch = LeaseWatch(tasks, clock)
        self._finishes = finishes
        self._accepts = Coalescer[tuple[str, str], Fence](self._accept_many)

    def close(self) -> None:
        """Stop the lease watch (the dispatcher has stopped)."""
        self._watch.close()

    async def deliver(self, queue: str, endpoint_id: str, leases: list[Lease]) -> None:
        """Push the leases one by one, or in batches when the endpoint takes them."""
        try:
            view = await self._directory.view(queue, endpoint_id)
            endpoint = view.endpoints.get(endpoint_id) if view else None
            if view is None or endpoint is None:
                # Deleted between claim and push: give the tasks back untouched.
                gone = Verdict(AttemptOutcome.GONE, None, "endpoint was removed")
                await self._record(queue, [(lease, gone, 0) for lease in leases])
                return
            size = endpoint.batch_size
            if size == 1:
                pushes = [self._push_one(lease, endpoint, view) for lease in leases]
            else:
                chunks = (leases[i : i + size] for i in range(0, len(leases), size))
                pushes = [self._push_batch(chunk, endpoint, view) for chunk in chunks]
            if len(pushes) == 1:
                # In this task: gather would make a task of it, whose first step waits a turn
                # of the loop behind whatever was scheduled meanwhile (a lone enqueue's answer).
                await pushes[0]
            else:
                await asyncio.gather(*pushes)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("pushes to endpoint %s failed; their leases will expire", endpoint_id)

    async def _push_one(self, lease: Lease, endpoint: EndpointRecord, view: QueueView) -> None:
        push = self._pusher.push(lease, endpoint, view.policy.push_timeout)
        answer = await self._within_lease(push, [lease])
        await self._settle([lease], [answer or LEASE_OVER], view)

    async def _push_batch(
        self, leases: list[Lease], endpoint: EndpointRecord, view: QueueView
    ) -> None:
        push = self._pusher.push_batch(leases, endpoint, view.policy.push_timeout)
        answers = await self._within_lease(push, leases) or [LEASE_OVER] * len(leases)
        await self._settle(leases, answers, view)

    async def _within_lease(self, push: Awaitable[T], leases: list[Lease]) -> T | None:
        """The push's answer, or None when its leases ran out first (then the push is cut).

        The push keeps its own timeout (the queue's ``push_timeout``). At the end of the lease
        (less a margin) the current expiries are read once: heartbeats may have extended them,
        and the wait goes on to the new end; otherwise the push is given up. The push runs in
        the calling task, watched by the dispatcher's one lease watch (:class:`LeaseWatch`: no
        task, timer or closure of its own: this is the hot path); a lease found over cancels
        the task, and that cancellation is told apart from any other as ``asyncio.timeout``
        does (``Task.uncancel``).
        """
        watched = Watched(leases)
        self._watch.add(watched, min(lease.expires_ms for lease in leases))
        try:
            return await push
        except asyncio.CancelledError:
            if not watched.was_cut():
                raise  # not (only) the watch's cancellation
            if watched.failed is not None:
                raise watched.failed from None
            return None
        finally:
            self._watch.ended(watched)

    async def _settle(
        self, leases: Sequence[Lease], answers: Sequence[Answer], view: QueueView
    ) -> None:
        """Read each task's answer by the table and record them, a push's answers together (one
        submission each for ends and acceptances, one wake-up: no task or future per task)."""
        ends: list[tuple[Lease, Verdict, int]] = []
        accepted: list[tuple[str, str]] = []
        backoff = view.policy.backoff
        for lease, answer in zip(leases, answers, strict=True):
            verdict = judge(answer)
            if verdict.outcome is None:
                accepted.append((lease.task_id, lease.token))
                continue
            delay = 0
            if verdict.outcome in RETRIED_WITH_BACKOFF:
                delay = retry_delay_ms(lease.attempt, backoff, self._rng, verdict.requested_delay)
            ends.append((lease, verdict, delay))
        queue = leases[0].queue
        if not accepted:
            await self._record(queue, ends)
            return
        # Accepted: the worker calls back. Losing this record costs little (the lease running
        # out would then not count against the endpoint): no shield, no retry. Both kinds are
        # queued for writing before any await (see _record).
        accepting = self._accepts.submit(queue, accepted)
        written = self._write(queue, ends) if ends else None
        try:
            await accepting
        except asyncio.CancelledError:
            if written is not None:
                written.cancel()  # the write goes on; its outcome is dropped, not left unread
            raise
        except Exception:
            log.warning("recording that %d task(s) were accepted failed", len(accepted))
        if written is not None:
            self._ended(queue, await written)

    async def _record(self, queue: str, ends: Sequence[tuple[Lease, Verdict, int]]) -> None:
        """Record the ends of attempts: (lease, verdict, retry delay in ms) each."""
        self._ended(queue, await self._write(queue, ends))

    def _write(
        self, queue: str, ends: Sequence[tuple[Lease, Verdict, int]]
    ) -> asyncio.Future[list[Finished]]:
        """Queue the ends for writing now, before the caller awaits anything: shutting down
        (cancelling it) cannot lose an answer the worker already gave. Shielded so the write's
        result still arrives."""
        finishes = [
            Finish(  # positional, in the fields' order (keywords cost more)
                lease.task_id,
                lease.token,
                verdict.outcome,
                verdict.http_status,
                verdict.text,
                verdict.traceback,
                delay_ms,
                verdict.warning,
                verdict.failure,
                verdict.task_failure,
            )
            for lease, verdict, delay_ms in ends
            if verdict.outcome is not None
        ]
        return asyncio.shield(self._finishes.submit(queue, finishes))

    def _ended(self, queue: str, done: Sequence[Finished]) -> None:
        for end in done:
            self._on_finished(queue, end)

    async def _accept_many(self, queue: str, accepted: list[tuple[str, str]]) -> list[Fence]:
        return await self._tasks.accept_many(queue, accepted, self._clock.now_ms())
