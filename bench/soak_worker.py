"""The worker of bench/soak.py: an SDK ``Worker`` whose tasks log what ran, so the soak can tell
what each task did from outside the gateway.

Every run of a task body, and every run of a durable step's function, appends one JSON line to
the file named by ``SOAK_LOG`` (one file per worker process): ``{"e": "run" | "step", "id": task
id, "a": attempt, "k": task name, "s": step name, "p": pid}``. A line is written before the
body's answer or the step's record can reach the gateway, so a kill leaves at most one extra
run logged, never one missing; ``{"e": "recorded", ...}`` follows each step once ``ctx.step``
returned (the gateway answered that it recorded it). Each line has its time, ``t``.

Run as a push worker under uvicorn (``bench.soak_worker:worker``) or as a pull worker
(``jobgate worker --pull ... bench.soak_worker:worker``).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

from sdk import AsyncContext, Worker, task

LOG = os.environ.get("SOAK_LOG", os.devnull)
# The signing secrets of the worker's endpoints (one per queue), a JSON list; a pull worker
# receives no pushes and needs none.
SECRETS: list[str] = json.loads(os.environ.get("SOAK_SECRETS", "[]")) or ["whsec_" + "A" * 43 + "="]
QUEUE = "soak"
RUNS_QUEUE = "soak-runs"  # the job's runs and a share of durable tasks: short retention


def _note(**fields: Any) -> None:
    fields["p"] = os.getpid()
    fields["t"] = time.time()
    with open(LOG, "a") as log:  # one short line, appended atomically
        log.write(json.dumps(fields) + "\n")


def _step(task_id: str, name: str) -> str:
    _note(e="step", id=task_id, s=name)
    return name


async def _run(ctx: AsyncContext, n: int) -> dict[str, Any]:
    _note(e="run", id=ctx.id, a=ctx.attempt, k=ctx.name)
    return {"n": n, "attempt": ctx.attempt}


@task(queue=QUEUE, name="inline")
async def inline(n: int, ctx: AsyncContext) -> dict[str, Any]:
    """Answered in the push's own response."""
    return await _run(ctx, n)


@task(queue=QUEUE, name="fail_once")
async def fail_once(n: int, ctx: AsyncContext) -> dict[str, Any]:
    """Its first attempt raises; the retry succeeds."""
    answer = await _run(ctx, n)
    if ctx.attempt == 1:
        raise RuntimeError("the first attempt fails, as planned")
    return answer


@task(queue=QUEUE, name="beat")
async def beat(n: int, ctx: AsyncContext) -> dict[str, Any]:
    """Outlives the inline window: answered 202, kept alive by heartbeats, ended by callback."""
    answer = await _run(ctx, n)
    for i in range(4):
        await asyncio.sleep(0.35)
        await ctx.heartbeat(progress=(i + 1) / 4)
    return answer


async def _steps(ctx: AsyncContext, n: int) -> dict[str, Any]:
    answer = await _run(ctx, n)
    done = []
    for name in ("one", "two", "three"):
        done.append(await ctx.step(name, _step, ctx.id, name))
        _note(e="recorded", id=ctx.id, s=name)  # ctx.step returns once the gateway recorded it
    return {**answer, "steps": done}


@task(queue=QUEUE, name="steps")
async def steps(n: int, ctx: AsyncContext) -> dict[str, Any]:
    """Three durable steps: a retry replays the recorded ones."""
    return await _steps(ctx, n)


@task(queue=RUNS_QUEUE, name="short_steps")
async def short_steps(n: int, ctx: AsyncContext) -> dict[str, Any]:
    """The same on the short-retention queue, whose sweep must take its steps too."""
    return await _steps(ctx, n)


@task(queue=RUNS_QUEUE, name="tick")
async def tick(n: int, ctx: AsyncContext) -> dict[str, Any]:
    """The job's task."""
    return await _run(ctx, n)


TASKS = [inline, fail_once, beat, steps, short_steps, tick]
worker = Worker(tasks=TASKS, secret=SECRETS, heartbeat_interval=0.5, inline_window=0.5)
