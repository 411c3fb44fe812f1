"""Pull leases: a worker that cannot receive HTTP asks for tasks (``POST .../leases``).

A lease request claims with the same script as the push dispatcher (``lua/claim.lua``), passing
its pull endpoint, so queue concurrency, the rate limit, the endpoint's concurrency, its
capabilities, singletons and priority order hold exactly as for pushes. The tasks it gets are
recorded as accepted at once, as a push answered 202 is: from then on heartbeats, stalls and the
lease's expiry work as for an accepted push, and the worker reports through the same callbacks,
fenced by the lease token. The answer is the body a batch push would carry (``PushBatch``, made
by the pusher's own functions), so a pull worker reads what a push worker reads.

When nothing can be leased and the request may wait, it waits on :class:`PullWaiters` — the
wake-ups the dispatcher gets (an enqueue here or, over pub/sub, on another gateway; a finished
attempt; a policy or endpoint change) — so an idle long poll sends no Redis command while it
waits. An empty queue waits for a wake-up alone; a full one, or one without room on the
endpoint, re-checks at most every :data:`RECHECK` seconds (room freed through another gateway
sends no wake-up); a rate-limited one at the time the bucket allows. Closing the waiters (the
gateway shutting down) ends every wait at once: each poll answers with what it has.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterator

from gateway.clock import Clock
from gateway.directory import Directory
from gateway.dispatch.pusher import batch_body
from gateway.errors import EndpointNotFound, FieldProblem, QueueNotFound, ValidationFailed
from gateway.store.records import Lease
from gateway.store.tasks import ClaimStatus, TaskStore
from sdk.wire import LeaseRequest

RECHECK = 1.0
"""Seconds between re-checks of a poll whose queue or endpoint is full (or paused)."""


async def _never() -> bool:
    return False


class PullWaiters:
    """The long polls waiting for work, by queue: woken where the dispatcher is woken."""

    def __init__(self) -> None:
        self._waiting: defaultdict[str, set[asyncio.Event]] = defaultdict(set)
        self.closed = asyncio.Event()

    def waiting(self, queue: str) -> int:
        """Polls of ``queue`` watching for a wake-up now."""
        return len(self._waiting.get(queue, ()))

    def wake(self, queue: str) -> None:
        """There may be work on ``queue`` (new tasks, or room freed)."""
        for event in self._waiting.get(queue, ()):
            event.set()

    def wake_all(self) -> None:
        """There may be work anywhere (wake-ups may have been lost)."""
        for events in self._waiting.values():
            for event in events:
                event.set()

    def close(self) -> None:
        """End every wait now and any later one at once (the gateway is shutting down)."""
        self.closed.set()
        self.wake_all()

    @contextlib.contextmanager
    def watch(self, queue: str) -> Iterator[asyncio.Event]:
        """An event set by the next wake-up of ``queue``. Watch first, then claim, so a task
        enqueued between the two is not missed."""
        event = asyncio.Event()
        self._waiting[queue].add(event)
        try:
            yield event
        finally:
            events = self._waiting[queue]
            events.discard(event)
            if not events:
                del self._waiting[queue]


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
        with self._waiters.watch(queue) as woken:
            first = True
            while True:
                if not first and await gone():
                    return batch_body([], self._callback_base)
                first = False
                woken.clear()
                claim = await self._tasks.claim(
                    queue,
                    request.max_tasks,
                    secrets.token_hex(16),
                    self._clock.now_ms(),
                    endpoint_id=request.endpoint_id,
                )
                if claim.leases:
                    await self._accept(queue, claim.leases)
                    return batch_body(claim.leases, self._callback_base)
                if claim.status is ClaimStatus.NOQUEUE:
                    raise QueueNotFound(queue)
                left = deadline - time.monotonic()
                if left <= 0 or self._waiters.closed.is_set():
                    return batch_body([], self._callback_base)
                await self._pause(claim.status, claim.retry_at_ms, left, woken, held=claim.held)

    async def _pause(
        self,
        status: ClaimStatus,
        retry_at_ms: int | None,
        left: float,
        woken: asyncio.Event,
        *,
        held: bool = False,
    ) -> None:
        """Wait, sending nothing to Redis, until the claim may go otherwise (module docstring)."""
        timeout = left
        awaited = woken
        if retry_at_ms is not None:
            timeout = min(timeout, max(0, retry_at_ms - self._clock.now_ms()) / 1000)
        if status is ClaimStatus.RATE and not held:
            awaited = self._waiters.closed  # the bucket refills at its own pace
        elif status is not ClaimStatus.EMPTY:
            timeout = min(timeout, RECHECK)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(awaited.wait(), timeout)

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
