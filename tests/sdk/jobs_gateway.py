"""A real gateway with a real SDK worker, both in this process over loopback, for the tests of
the jobs methods and commands: queue ``Q`` served by a worker of ``resize`` and ``report``
(registered with their catalog), and ``HELD``, paused, whose runs stay pending."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from gateway.app import create_app
from gateway.settings import ApiKey, Settings
from sdk import AsyncClient, AsyncContext, Worker, task
from sdk.catalog import catalog
from tests.support import bind, serve

ADMIN = "sdk-jobs-admin-key-0123"
READER = "sdk-jobs-reader-key-0123"
Q = "images"
HELD = "held"


@task(Q)
async def resize(ctx: AsyncContext, size: int, path: str = "a.png") -> dict[str, int]:
    await ctx.log(f"resized {path} to {size}")
    return {"size": size}


@task(Q)
def report(days: int) -> None:
    """A second cataloged task, so the catalog has two pages of one."""


@asynccontextmanager
async def jobs_gateway(redis_url: str) -> AsyncIterator[str]:
    """The gateway's URL; ``ADMIN`` is the key of "alice", ``READER`` a read-only one."""
    sock = bind()
    settings = Settings(
        redis_url=redis_url,
        port=sock.getsockname()[1],
        api_keys=[
            ApiKey(key=ADMIN, scopes=["admin"], name="alice"),
            ApiKey(key=READER, scopes=["read"], name="auditor"),
        ],
        allow_private_endpoints=True,
    )
    worker_sock = bind()
    worker_url = f"http://127.0.0.1:{worker_sock.getsockname()[1]}/"
    async with serve(create_app(settings), sock) as url, AsyncClient(url, ADMIN) as admin:
        # Q accepts names no endpoint reported, so the tests can define jobs of tasks nobody
        # serves (shown as not served); test_unknown_task_names has the default's refusals.
        await admin.put_queue(Q, unknown_tasks="accept")
        await admin.put_queue(HELD, paused=True)
        tasks = catalog([resize, report], Q)
        endpoint = await admin.add_endpoint(Q, worker_url, tasks=tasks)
        worker = Worker(tasks=[resize, report], secret=endpoint.secret)
        async with serve(worker, worker_sock):
            yield url
