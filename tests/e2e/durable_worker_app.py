"""The worker process of the durable-execution e2e tests (tests/e2e/test_durable_e2e.py): an
SDK ``Worker`` under uvicorn whose tasks use ``ctx.step``, ``ctx.sleep`` and
``ctx.wait_for_event``, ``ctx.invoke`` and ``ctx.call``.

Every step function appends a line to ``<folder>/<step name>`` before it returns: the test
counts a step's runs by those files, not by the SDK's own bookkeeping. Environment as for
``tests.e2e.worker_app`` (``JOBGATE_WORKER_SECRET``, ``E2E_LOG``).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from sdk import AsyncContext, Context, Worker, task


def _mark(folder: str, name: str) -> int:
    """Append a line to the step's file; how many lines it has now."""
    path = Path(folder) / name
    with path.open("a") as f:
        f.write(f"{os.getpid()}\n")
    return len(path.read_text().splitlines())


async def _hang_once(folder: str, name: str) -> str:
    """A step whose first run hangs (the test SIGKILLs the worker meanwhile)."""
    if _mark(folder, name) == 1:
        await asyncio.sleep(120)
    return f"{name} done"


@task(queue="durable")
async def three_steps(folder: str, ctx: AsyncContext) -> dict[str, Any]:
    one = await ctx.step("one", _mark, folder, "one")
    two = await ctx.step("two", _mark, folder, "two")
    three = await ctx.step("three", _hang_once, folder, "three")
    return {"one": one, "two": two, "three": three, "attempt": ctx.attempt}


@task(queue="durable")
def three_steps_sync(folder: str, ctx: Context) -> dict[str, Any]:
    """The same in a plain function (a worker thread, the blocking context)."""
    pages = [ctx.step(ctx.step_name("page"), _mark, folder, "page") for _ in range(2)]
    last = ctx.step("last", _mark, folder, "last")
    return {"pages": pages, "last": last, "attempt": ctx.attempt}


@task(queue="durable")
async def sleeper(folder: str, seconds: float, ctx: AsyncContext) -> dict[str, Any]:
    before = await ctx.step("before", _mark, folder, "before")
    await ctx.sleep("nap", timedelta(seconds=seconds))
    after = await ctx.step("after", _mark, folder, "after")
    return {"before": before, "after": after, "attempt": ctx.attempt}


@task(queue="durable")
async def approval(folder: str, doc: int, timeout: float, ctx: AsyncContext) -> dict[str, Any]:
    """Waits for ``doc.approved`` of its doc (tests/e2e/test_waits_e2e.py)."""
    before = await ctx.step("before", _mark, folder, f"before-{doc}")
    got = await ctx.wait_for_event(
        "approved", event="doc.approved", match={"doc": doc}, timeout=timeout
    )
    return {"before": before, "event": got, "attempt": ctx.attempt}


@task(queue="durable")
def approval_sync(folder: str, doc: int, timeout: float, ctx: Context) -> dict[str, Any]:
    """The same in a plain function (the blocking context)."""
    before = ctx.step("before", _mark, folder, f"before-{doc}")
    got = ctx.wait_for_event("approved", event="doc.approved", match={"doc": doc}, timeout=timeout)
    return {"before": before, "event": got, "attempt": ctx.attempt}


@task(queue="durable")
async def chain_leaf(folder: str, ctx: AsyncContext) -> dict[str, Any]:
    """The grandchild of a chain of invokes (tests/e2e/test_invokes_e2e.py)."""
    return {"work": await ctx.step("work", _hang_once, folder, "leaf"), "attempt": ctx.attempt}


@task(queue="durable")
async def chain_mid(folder: str, ctx: AsyncContext) -> dict[str, Any]:
    before = await ctx.step("before", _mark, folder, "mid")
    leaf = await ctx.invoke("leaf", chain_leaf, folder, timeout=60)
    return {"before": before, "leaf": leaf}


@task(queue="durable")
def chain_top(folder: str, ctx: Context) -> dict[str, Any]:
    """The parent of a chain of invokes, in a plain function (the blocking context)."""
    before = ctx.step("before", _mark, folder, "top")
    mid = ctx.invoke("mid", chain_mid, folder, timeout=60)
    return {"before": before, "mid": mid}


@task(queue="durable")
async def caller(folder: str, url: str, timeout: float, ctx: AsyncContext) -> dict[str, Any]:
    """A durable HTTP call between two steps (tests/e2e/test_calls_e2e.py)."""
    before = await ctx.step("before", _mark, folder, "before")
    answer = await ctx.call("api", url, json={"amount": 3}, timeout=timeout)
    after = await ctx.step("after", _mark, folder, "after")
    return {"before": before, "answer": answer, "after": after}


worker = Worker(
    tasks=[
        three_steps,
        three_steps_sync,
        sleeper,
        approval,
        approval_sync,
        chain_leaf,
        chain_mid,
        chain_top,
        caller,
    ],
    secret=os.environ["JOBGATE_WORKER_SECRET"],
    inline_window=0.5,
    heartbeat_interval=0.2,
)
LOG = os.environ.get("E2E_LOG")


async def app(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] == "http" and scope["method"] == "POST" and LOG:
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        record = {
            "pid": os.getpid(),
            "attempt": headers.get("jobgate-attempt"),
            "lease": headers.get("jobgate-lease"),
            "callback": headers.get("jobgate-callback"),
            "t": time.time(),
        }
        with open(LOG, "a") as log:  # noqa: ASYNC230 - a test log line, appended atomically
            log.write(json.dumps(record) + "\n")
    await worker(scope, receive, send)
