"""The hello example's tasks: the worker runs them, the producer enqueues them.

Both scripts import this module, so a task's name (``tasks.greet``: module and function) is
the same on both sides.
"""

from __future__ import annotations

import asyncio

from sdk import AsyncContext, task


@task(queue="hello")
def greet(name: str) -> str:
    """A quick task: its result goes back in the answer to the push."""
    return f"Hello, {name}!"


@task(queue="hello")
async def slow_count(n: int, ctx: AsyncContext) -> int:
    """A long task: it outlives the push, so it reports progress with heartbeats.

    Each heartbeat extends the task's lease; without them the gateway would take the task back
    when the lease expires and run it again.
    """
    for i in range(1, n + 1):
        await asyncio.sleep(1)
        await ctx.heartbeat(progress=i / n)
    return n
