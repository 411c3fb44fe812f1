"""The function of the Lambda time-limit e2e tests (tests/e2e/test_lambda_time_limit.py): an SDK
``Worker`` behind ``sdk.lambda_handler``, whose one task is a workflow of durable steps.

Each step appends a line to ``<folder>/start-<n>`` when it begins and to ``<folder>/effect-<n>``
when its work is done (its side effect): the test counts both in files, not by the SDK's
bookkeeping.

Run as a program (``python -m tests.e2e.lambda_function``), it is one sandbox of
:mod:`tests.e2e.lambda_front`: it imports what an invocation needs (Lambda's init phase, not
counted in the function's timeout), prints ``ready``, reads one invocation — a JSON line with the
event and the wall-clock ``deadline`` the front will kill it at — answers it on stdout, and
exits. ``LAMBDA_HANDOVER=1`` lets the handler follow the invocation's remaining time
(``follow_time_limit``); else it runs on until the front kills it.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

from sdk import AsyncContext, Worker, task
from sdk.lambda_handler import lambda_handler
from tests.e2e.durable_worker_app import _mark


async def _work(folder: str, n: int, seconds: float) -> int:
    _mark(folder, f"start-{n}")
    await asyncio.sleep(seconds)
    _mark(folder, f"effect-{n}")
    return n


@task(queue="lambda", name="workflow")
async def workflow(folder: str, steps: int, seconds: float, ctx: AsyncContext) -> dict[str, Any]:
    done = [await ctx.step(f"step-{n}", _work, folder, n, seconds) for n in range(1, steps + 1)]
    return {"steps": done, "attempt": ctx.attempt}


worker = Worker(
    tasks=[workflow],
    secret=os.environ["JOBGATE_WORKER_SECRET"],
    inline_window=120,  # every push is answered by its invocation, as behind a function URL
    time_limit_margin=0.3,
)
handler = lambda_handler(worker, follow_time_limit=os.environ.get("LAMBDA_HANDOVER") == "1")


class Invocation:
    """The Lambda context of one invocation, cut at the wall-clock ``deadline``."""

    function_name = "jobgate-workflow"
    aws_request_id = "00000000-0000-0000-0000-000000000000"

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.deadline - time.time()) * 1000))


def main() -> None:
    import sdk.sessions  # noqa: F401 - the callback client, loaded in the init phase

    print("ready", flush=True)
    order = json.loads(sys.stdin.readline())
    answer = handler(order["event"], Invocation(order["deadline"]))
    print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
