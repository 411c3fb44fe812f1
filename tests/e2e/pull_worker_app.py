"""The pull worker of the end-to-end tests, run as
``jobgate worker --pull ... tests.e2e.pull_worker_app:worker``.

Environment: ``E2E_SHUTDOWN`` (the shutdown policy; default finish).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from sdk import AsyncContext, Worker, task

SECRET = "whsec_" + "A" * 43 + "="  # pull workers receive no pushes: never checked


@task(queue="pulled", name="steps")
async def steps(count: int, pause: float, ctx: AsyncContext) -> dict[str, Any]:
    """Checkpoints and logs each step, outliving its lease unless heartbeats keep it."""
    for i in range(count):
        await ctx.log(f"step {i + 1} of {count}")
        await asyncio.sleep(pause)
        await ctx.checkpoint({"done": i + 1})
        await ctx.heartbeat(progress=(i + 1) / count)
    return {"steps": count, "attempt": ctx.attempt}


@task(queue="pulled", name="resumable")
async def resumable(ctx: AsyncContext) -> dict[str, Any]:
    """Checkpoints, then works for a minute; an attempt that finds the checkpoint ends at once."""
    resumed = ctx.previous_checkpoint
    if resumed is None:
        await ctx.checkpoint({"step": 1})
        await asyncio.sleep(60)
    return {"attempt": ctx.attempt, "resumed_from": resumed}


worker = Worker(
    tasks=[steps, resumable],
    secret=SECRET,
    heartbeat_interval=0.3,
    max_concurrency=2,
    shutdown=os.environ.get("E2E_SHUTDOWN", "finish"),  # type: ignore[arg-type]
    shutdown_timeout=5,
)
