"""The worker process of the metrics tests: an SDK ``Worker`` under uvicorn, serving ``ok``,
``flaky`` (asks for a retry on its first attempt) and ``doomed`` (fails for good).

Run as ``uvicorn tests.e2e.metrics_worker_app:app``. ``JOBGATE_WORKER_SECRETS``: a JSON list of
the endpoint secrets it accepts (a push signed with any other is refused 401).
"""

from __future__ import annotations

import json
import os

from sdk import Context, Fail, Retry, Worker, task


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


app = Worker(
    tasks=[ok, flaky, doomed],
    secret=json.loads(os.environ["JOBGATE_WORKER_SECRETS"]),
    inline_window=5,
)
