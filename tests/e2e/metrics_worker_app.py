"""The worker process of the metrics tests: an SDK ``Worker`` under uvicorn, serving ``ok``,
``flaky`` (asks for a retry on its first attempt) and ``doomed`` (fails for good).

Pushes to a path under ``/unmarked/`` are answered without the ``jobgate-task-failure`` marker,
as by a worker that does not mark its task failures: such an error counts against the endpoint.

Run as ``uvicorn tests.e2e.metrics_worker_app:app``. ``JOBGATE_WORKER_SECRETS``: a JSON list of
the endpoint secrets it accepts (a push signed with any other is refused 401).
"""

from __future__ import annotations

import json
import os
from typing import Any

from sdk import Context, Fail, Retry, Worker, task
from sdk.wire import HEADER_TASK_FAILURE


@task(queue="m1", name="ok")
def ok(value: int) -> int:
    return value


@task(queue="m1", name="flaky")
def flaky(ctx: Context) -> int:
    if ctx.attempt == 1:
        raise Retry(0)
    return ctx.attempt


@task(queue="m2", name="doomed")
def doomed() -> None:
    raise Fail("this task always fails")


worker = Worker(
    tasks=[ok, flaky, doomed],
    secret=json.loads(os.environ["JOBGATE_WORKER_SECRETS"]),
    inline_window=5,
)


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if not scope.get("path", "").startswith("/unmarked/"):
        return await worker(scope, receive, send)

    async def unmarked(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            marker = HEADER_TASK_FAILURE.encode()
            message = {
                **message,
                "headers": [(k, v) for k, v in message["headers"] if k.lower() != marker],
            }
        await send(message)

    await worker(scope, receive, unmarked)
