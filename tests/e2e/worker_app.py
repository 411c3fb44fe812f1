"""The worker process of the end-to-end tests: an SDK ``Worker`` under uvicorn.

Run as ``uvicorn tests.e2e.worker_app:app``. Environment: ``JOBGATE_WORKER_SECRET`` (the
endpoint's signing secret), ``E2E_LOG`` (a file where every push received is appended as a
JSON line, with its headers, before the task runs) and ``E2E_INLINE_WINDOW`` (seconds a push
waits for its task before the answer is 202; default 0.5).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from typing import Any

from pydantic import JsonValue

from sdk import AsyncContext, Fail, Warn, Worker, task


@task(queue="e2e")
def echo(value: JsonValue) -> JsonValue:
    return value


@task(queue="e2e")
async def slow(seconds: float, ctx: AsyncContext) -> dict[str, Any]:
    """Checkpoints, then works long enough to be killed; resumes from the checkpoint."""
    resumed = ctx.previous_checkpoint
    await ctx.checkpoint({"step": 1, "attempt": ctx.attempt})
    await ctx.log(f"attempt {ctx.attempt} started")
    if resumed is None:
        await asyncio.sleep(1.0)  # past the inline window: the push was answered 202
        await ctx.heartbeat(progress=0.5)
        await asyncio.sleep(seconds)
    return {"attempt": ctx.attempt, "resumed_from": resumed}


@task(queue="e2e")
async def long_inline(seconds: float) -> str:
    """Outlasts the worker's inline window, so it answers 202 and calls back."""
    await asyncio.sleep(seconds)
    return "called back"


@task(queue="e2e")
async def hold(seconds: float, ctx: AsyncContext) -> int:
    """The first attempt holds its push (answered inline, given a long enough inline window)
    for ``seconds``, or until a POST to ``/release``; later attempts answer at once."""
    if ctx.attempt == 1:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(RELEASED.wait(), seconds)
    return ctx.attempt


@task(queue="e2e")
def partial(rows: int) -> Warn:
    """Succeeds with a warning (answered inline: the jobgate-warning header)."""
    return Warn(f"{rows} rows skipped: ünïcode", result={"rows": rows})


@task(queue="e2e")
async def report(ctx: AsyncContext, rows: int, label: str = "daily") -> dict[str, Any]:
    """Writes a report of ``rows`` rows, logging a line for each."""
    for i in range(rows):
        await ctx.log(f"{label}: row {i + 1} of {rows}")
    return {"rows": rows, "label": label}


@task(queue="e2e")
async def raises(seconds: float = 0.0) -> None:
    """Fails by design, after ``seconds`` (past the inline window: by the error callback)."""
    await asyncio.sleep(seconds)
    raise ValueError("failed by design")


@task(queue="e2e")
def add(x: int, y: int) -> int:
    """A link of a chain: ``x`` is the previous link's result."""
    return x + y


@task(queue="e2e")
async def scale(x: int, factor: int, ctx: AsyncContext) -> int:
    """A link of a chain that takes a context: the result still comes first."""
    return x * factor


@task(queue="e2e")
def collect(values: list[Any], label: str) -> dict[str, Any]:
    """A chord's callback: the group's results, in order."""
    return {"label": label, "values": values}


@task(queue="e2e")
def refuse(x: int) -> int:
    """Fails at once, not retried: breaks a chain."""
    raise Fail(f"refused {x} by design")


worker = Worker(
    tasks=[echo, slow, long_inline, hold, partial, report, raises, add, scale, collect, refuse],
    secret=os.environ["JOBGATE_WORKER_SECRET"],
    inline_window=float(os.environ.get("E2E_INLINE_WINDOW", "0.5")),
    heartbeat_interval=0.2,
)
LOG = os.environ.get("E2E_LOG")


RELEASED = asyncio.Event()  # set by a POST to /release: held first attempts end


async def app(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] == "http" and scope["path"] == "/release":
        RELEASED.set()
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    if scope["type"] == "http" and scope["method"] == "POST" and LOG:
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        record = {
            "pid": os.getpid(),
            "id": headers.get("webhook-id"),
            "attempt": headers.get("jobgate-attempt"),
            "lease": headers.get("jobgate-lease"),
            "callback": headers.get("jobgate-callback"),
            "t": time.time(),
        }
        with open(LOG, "a") as log:  # noqa: ASYNC230 - a test log line, appended atomically
            log.write(json.dumps(record) + "\n")
    await worker(scope, receive, send)
