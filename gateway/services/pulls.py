"""Pull leases: a worker that cannot receive HTTP asks for tasks (``POST .../leases``).

A lease request claims with the same script as the push dispatcher (``lua/claim.lua``), passing
its pull endpoint, so queue concurrency, the rate limit, the endpoint's concurrency, its
capabilities, singletons and priority order hold exactly as for pushes. The tasks it gets are
recorded as accepted at once, as a push answered 202 is: from then on heartbeats, stalls and the
lease's expiry work as for an accepted push, and the worker reports through the same callbacks,
fenced by the lease token. The answer is the body a batch push would carry (``PushBatch``, made
by the pusher's own functions), so a pull worker reads what a push worker reads.

When nothing can be leased and the request may wait, it waits in its endpoint's line of
:class:`~gateway.services.pull_waiters.PullWaiters` for a wake-up (an enqueue here or, over
pub/sub, on any gateway; an attempt's end freeing room while tasks wait; a policy or endpoint
change), so an idle long poll sends no Redis command while it waits, and a wake-up wakes as many
polls as there are new tasks, oldest first (that module says how none is missed). An empty
queue waits for a wake-up alone; a full one, or one without room on the endpoint, also
re-checks at most every :data:`RECHECK` seconds (for a message lost on the way); a
rate-limited one at the time the bucket allows. Closing the waiters (the gateway shutting
down) ends every wait at once: each poll answers with what it has.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Awaitable, Callable

from gateway.caches.directory import Directory
from gateway.core.errors import EndpointNotFound, FieldProblem, QueueNotFound, ValidationFailed
from gateway.dispatch.pusher import batch_body
from gateway.services.pull_waiters import PullWaiters, Turn
from gateway.store.clock import Clock
from gateway.store.records import Lease
from gateway.store.tasks import Claim, ClaimStatus, TaskStore
from sdk.wire import LeaseRequest

RECHECK = 1.0
"""Seconds between re-checks of a poll whose queue or endpoint is full (or paused)."""


async def _never() -> bool:
    return False


class PullService:
    def __init__(
        self,
        tasks: TaskStore,
        directory: Directory,
        clock: Clock,
        waiters: PullWaiters,
        callback_base: str,
    ) -> None:
        self._tasks = tasks
        self._directory = directory
        self._clock = clock
        self._waiters = waiters
        self._callback_base = callback_base

    async def lease(
        self, queue: str, request: LeaseRequest, gone: Callable[[], Awaitable[bool]] = _never
    ) -> str:
        """Up to ``request.max_tasks`` tasks leased to the pull endpoint, waiting up to
        ``request.wait`` seconds for the first; the ``PushBatch`` JSON (maybe no tasks).
        ``gone()`` tells whether the worker has left: after a wait, nothing is claimed for a
        poll nobody reads any more (its tasks would sit leased until their lease ran out)."""
        await self._check_endpoint(queue, request.endpoint_id)
        deadline = time.monotonic() + request.wait
        with self._waiters.turn(queue, request.endpoint_id, request.max_tasks) as turn:
            first = True
            while True:
                if not first and await gone():
                    return batch_body([], self._callback_base)
                first = False
                turn.claiming()
                claim = await self._tasks.claim(
                    queue,
                    request.max_tasks,
                    secrets.token_hex(16),
                    self._clock.now_ms(),
                    endpoint_id=request.endpoint_id,
                )
                if claim.leases:
                    turn.took(more=not claim.settled)
                    await self._accept(queue, claim.leases)
                    return batch_body(claim.leases, self._callback_base)
                if claim.status is ClaimStatus.NOQUEUE:
                    raise QueueNotFound(queue)
                left = deadline - time.monotonic()
                if left <= 0 or self._waiters.closed.is_set():
                    return batch_body([], self._callback_base)
                await self._pause(claim, left, turn)

    async def _pause(self, claim: Claim, left: float, turn: Turn) -> None:
        """Wait, sending nothing to Redis, until the claim may go otherwise (module docstring)."""
        timeout = left
        if claim.retry_at_ms is not None:
            timeout = min(timeout, max(0, claim.retry_at_ms - self._clock.now_ms()) / 1000)
        if claim.status is ClaimStatus.RATE and not claim.held:
            # The queue's bucket refills at its own pace: no wake-up is for this poll.
            await turn.sleep(timeout, self._waiters.closed)
            return
        if claim.status is not ClaimStatus.EMPTY:
            timeout = min(timeout, RECHECK)
        await turn.wait(timeout)

    async def _check_endpoint(self, queue: str, endpoint_id: str) -> None:
        view = await self._directory.view(queue, endpoint_id)
        if view is None:
            raise QueueNotFound(queue)
        endpoint = view.endpoints.get(endpoint_id)
        if endpoint is None:
            raise EndpointNotFound(endpoint_id)
        if not endpoint.pull:
            reason = "is a push endpoint: the gateway pushes its tasks, they cannot be leased"
            raise ValidationFailed([FieldProblem("endpoint_id", reason)])

    async def _accept(self, queue: str, leases: list[Lease]) -> None:
        """Record the tasks as accepted, as a 202 answer to a push is: the worker has them."""
        await self._tasks.accept_many(
            queue, [(lease.task_id, lease.token) for lease in leases], self._clock.now_ms()
        )
