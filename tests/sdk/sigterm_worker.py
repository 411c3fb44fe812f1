"""The worker process of the SIGTERM test: ``uvicorn tests.sdk.sigterm_worker:worker``.

One task, ``endless``, logs a line once it runs (so the test knows it started) and then waits
for ever; the worker answers 202 at once and, on SIGTERM, hands running tasks back
(``shutdown="requeue"``). Environment: ``SIGTERM_WORKER_SECRET``, the signing secret.
"""

from __future__ import annotations

import asyncio
import os

from sdk import AsyncContext, Worker, task


@task("default", name="endless")
async def endless(ctx: AsyncContext) -> None:
    await ctx.log("started")
    await asyncio.Event().wait()


worker = Worker(
    tasks=[endless],
    secret=os.environ["SIGTERM_WORKER_SECRET"],
    inline_window=0,
    heartbeat_interval=60,
    shutdown="requeue",
    shutdown_timeout=60,
)
