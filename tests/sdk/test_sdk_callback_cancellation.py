"""Callbacks cancelled mid-request leave the worker's callback pool usable (issue 19, item 6 A).

httpx's async pool (httpcore) kept a connection counted as in use when a request was cancelled
while it connected (encode/httpcore#1093): after enough of them every callback waited for a
free connection until it timed out, leases expired and tasks were pushed again. Here a real
worker's task cancels its own heartbeats at random moments, a thousand times, against a fake
gateway over loopback. Then the whole pool must be free: as many heartbeats as it has
connections must be in flight at once (the gateway answers none until all have arrived), and
no connection may be left in use.
"""

from __future__ import annotations

import asyncio
import contextlib
import random

from sdk import AsyncContext, Worker, task
from sdk.answers import POOL_SIZE
from sdk.sessions import AioSession
from tests.sdk.fakes import SECRET, FakeGateway, Serve
from tests.support import serve as serve_app

CANCELLED = 1000  # heartbeats cancelled in flight; httpx leaked one in 20 to 50 of them
CALLBACK_TIMEOUT = 10.0


async def test_cancelled_callbacks_leave_no_connection_in_use(serve: Serve) -> None:
    gateway = FakeGateway(delay=0.002)  # answers come late: cancels hit every phase
    rng = random.Random(19)
    in_use: list[int] = []

    @task("default", name="beats")
    async def beats(ctx: AsyncContext) -> int:
        for _ in range(CANCELLED):
            beat = asyncio.create_task(ctx.heartbeat())
            await asyncio.sleep(rng.uniform(0, 0.0015))  # mostly while it connects or sends
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat
        # One leaked connection leaves a heartbeat of these waiting for a free one, and the
        # others for it, until the callback timeout: the task fails instead of answering.
        # (Those report progress: the gateway may still be answering cancelled ones.)
        gateway.hold = asyncio.Barrier(POOL_SIZE)
        try:
            await asyncio.gather(*(ctx.heartbeat(progress=0.5) for _ in range(POOL_SIZE)))
        finally:
            gateway.hold = None
        session = worker.runner._http
        assert isinstance(session, AioSession)
        in_use.append(session.connections_in_use)  # none: no callback runs now
        return POOL_SIZE

    worker = Worker(
        tasks=[beats],
        secret=SECRET,
        inline_window=0,
        heartbeat_interval=60,
        callback_timeout=CALLBACK_TIMEOUT,
        final_retry_delays=(),
    )
    async with serve_app(gateway.app()) as url, serve(worker) as push:
        push.gateway = url
        response = await push("beats")
        assert response.status_code == 202
        # Bound: the cancel loop (1000 x at most 1.5 ms of sleep, plus the requests), then
        # at most a callback timeout for the pool's worth of heartbeats.
        final = await gateway.first_of("result", "error", within=30 + 2 * CALLBACK_TIMEOUT)
    assert final.kind == "result", final.body
    assert in_use == [0]
