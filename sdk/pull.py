"""The pull worker: the same task functions as a push :class:`~sdk.worker.Worker`, for machines
the gateway cannot reach (behind NAT, laptops, batch nodes). It asks for tasks instead::

    worker = Worker(tasks=[send_welcome], secret="unused-by-pull", max_concurrency=8)
    async with AsyncClient.from_env() as client:
        await worker.pull(client, "mail", "ep_...").run(stop_event)

    # or: jobgate worker --pull --queue mail --endpoint ep_... my_module:worker

The endpoint is registered with ``pull: true`` (no URL). The loop leases at most as many tasks
as it has free slots (``max_concurrency``, capped by ``max_tasks`` per request) with a long poll
(``POST /v1/queues/{queue}/leases``, ``wait`` seconds), hands them to the worker's
:class:`~sdk.runner.Runner` (:meth:`~sdk.runner.Runner.run_detached`), and when every slot is
taken waits for one to free (an event, no polling). Each task then runs exactly as a push
answered 202 does: automatic heartbeats keep its lease, the context's checkpoints, logs and
cancellation are the same callbacks, and its end is reported by the result or error callback.

The gateway being unreachable (or answering 5xx or 429) is logged and retried after a pause
that doubles up to :data:`MAX_BACKOFF`; an answer that no retry can fix (the key may not lease
from the queue, no such queue or endpoint, a push endpoint) ends :meth:`PullWorker.run` with
its :class:`~sdk.errors.ApiError`.

Setting the stop event (the CLI sets it on SIGTERM or SIGINT) stops leasing — a long poll under
way is abandoned; the gateway claims nothing for a poll whose client left — and then the
worker's ``shutdown`` policy applies to the tasks still running (finish, requeue or fail,
through :meth:`~sdk.runner.Runner.close`).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Iterable
from typing import Any, Protocol

import httpx

from sdk.client import AsyncClient
from sdk.errors import ApiError
from sdk.pushes import Delivery
from sdk.runner import Runner
from sdk.tasks import TaskFunction
from sdk.wire import BatchItem

__all__ = ["PullWorker"]

log = logging.getLogger(__name__)

MIN_BACKOFF = 0.5
MAX_BACKOFF = 30.0
"""Seconds between tries while the gateway cannot be reached: from MIN, doubling up to MAX."""

DEFAULT_MAX_TASKS = 10


class _Serving(Protocol):
    @property
    def runner(self) -> Runner: ...


def _retryable(error: Exception) -> bool:
    if isinstance(error, ApiError):
        return error.status >= 500 or error.status in (408, 429)
    return isinstance(error, httpx.TransportError)


class PullWorker:
    """Leases tasks of ``queue`` for the pull endpoint ``endpoint_id`` and runs them.

    ``worker_or_tasks``: a :class:`~sdk.worker.Worker` (its tasks and options are used) or the
    task functions themselves (then ``options`` are :class:`~sdk.runner.Runner`'s).
    ``max_tasks``: most tasks one lease request asks for (also bounded by the free slots).
    ``wait``: seconds each long poll may wait on the gateway (at most 60).
    """

    def __init__(
        self,
        worker_or_tasks: _Serving | Iterable[TaskFunction[Any, Any]],
        client: AsyncClient,
        queue: str,
        endpoint_id: str,
        *,
        max_tasks: int = DEFAULT_MAX_TASKS,
        wait: float = 30.0,
        **options: Any,
    ) -> None:
        if isinstance(worker_or_tasks, Iterable):
            self.runner = Runner(worker_or_tasks, **options)
        else:
            self.runner = worker_or_tasks.runner
        if not 1 <= max_tasks <= 100:
            raise ValueError("max_tasks must be between 1 and 100")
        if not 0 <= wait <= 60:
            raise ValueError("wait must be between 0 and 60 seconds")
        self.client = client
        self.queue = queue
        self.endpoint_id = endpoint_id
        self.max_tasks = max_tasks
        self.wait = wait
        self.leased = 0  # tasks leased so far

    async def run(self, stop: asyncio.Event) -> None:
        """Lease and run tasks until ``stop`` is set; then apply the shutdown policy."""
        self.runner.open()
        try:
            await self._loop(stop)
        finally:
            await self.runner.close()

    async def _loop(self, stop: asyncio.Event) -> None:
        backoff = MIN_BACKOFF
        while not stop.is_set():
            wanted = self._wanted()
            if wanted == 0:
                await _first(stop, self.runner.slot_freed)
                continue
            try:
                items = await _unless_stopped(
                    stop, self.client.lease(self.queue, self.endpoint_id, wanted, self.wait)
                )
            except Exception as e:
                if not _retryable(e):
                    log.error("leasing from queue %s refused: %s", self.queue, e)
                    raise
                log.warning(
                    "leasing from queue %s failed (%s); retrying in %gs", self.queue, e, backoff
                )
                await _first(stop, timeout=backoff)
                backoff = min(backoff * 2, MAX_BACKOFF)
                continue
            backoff = MIN_BACKOFF
            if items:
                self.leased += len(items)
                await self.runner.run_detached([_delivery(item) for item in items])

    def _wanted(self) -> int:
        """Tasks to ask for now: the free slots, at most ``max_tasks``. Clears ``slot_freed``
        first, so a slot freed after this count wakes the wait that follows."""
        self.runner.slot_freed.clear()
        free = self.runner.free_slots()
        return self.max_tasks if math.isinf(free) else max(0, min(int(free), self.max_tasks))


def _delivery(item: BatchItem) -> Delivery:
    return Delivery(item, item.lease, item.callback)


async def _unless_stopped(stop: asyncio.Event, lease: Any) -> list[BatchItem] | None:
    """The lease's answer, or None when ``stop`` is set first (the request is then dropped)."""
    leasing = asyncio.ensure_future(lease)
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({leasing, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        if not leasing.done():
            leasing.cancel()
            await asyncio.gather(leasing, return_exceptions=True)
    if leasing.cancelled():
        return None
    result: list[BatchItem] = leasing.result()
    return result


async def _first(*events: asyncio.Event, timeout: float | None = None) -> None:
    """Wait until any of ``events`` is set, or ``timeout`` seconds."""
    waits = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
