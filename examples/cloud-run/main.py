"""A Jobgate worker as a Google Cloud Run service (or a Cloud Run function deployed from
source): the SDK ``Worker`` is a plain ASGI app, served by uvicorn on ``$PORT``.

Environment: ``JOBGATE_WORKER_SECRET`` (the endpoint's signing secret; several,
comma-separated, while rotating it) and optionally ``JOBGATE_INLINE_WINDOW`` (seconds; default
240, under Cloud Run's default request timeout of 300 s). README.md beside this file has the
deploy notes; docs/workers.md ("Serverless functions") how leases map onto request timeouts.
"""

from __future__ import annotations

import asyncio
import os

from sdk import AsyncContext, Worker, task


@task(queue="cloud-run", name="word_count")
def word_count(text: str) -> int:
    """Short: answered inline."""
    return len(text.split())


@task(queue="cloud-run", name="report")
async def report(steps: int, ctx: AsyncContext, pause: float = 1.0) -> dict[str, int]:
    """Long: still answered inline (Cloud Run may throttle the CPU of an instance once its
    request is answered), its heartbeats keeping the lease — and so the push — alive."""
    for step in range(1, steps + 1):
        await asyncio.sleep(pause)  # the work of one step
        await ctx.heartbeat(progress=step / steps)
    return {"steps": steps}


app = Worker(
    tasks=[word_count, report],
    secret=os.environ["JOBGATE_WORKER_SECRET"].split(","),
    inline_window=float(os.environ.get("JOBGATE_INLINE_WINDOW", "240")),
    shutdown="requeue",  # Cloud Run gives 10 s between SIGTERM and SIGKILL
)
