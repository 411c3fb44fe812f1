"""A :class:`~sdk.worker.Worker` as an AWS Lambda function, behind a function URL or API
Gateway (REST v1, HTTP API v2), through Mangum (``pip install 'jobgate[lambda]'``)::

    worker = Worker(tasks=[resize], secret=os.environ["JOBGATE_WORKER_SECRET"],
                    inline_window=840)   # answer inline: see docs/workers.md, "Serverless"
    handler = lambda_handler(worker)     # the function's handler: "module.handler"

Mangum turns each event into one ASGI request and the answer into the event's response. What
this module adds, and why:

- **The lifespan runs around every invocation** (Mangum's ``lifespan="on"``): the worker opens
  its callback client when the invocation starts and, when it ends, follows its ``shutdown``
  policy for any task still running, so nothing is left running in a function that Lambda
  freezes once it has answered (a task still running then would be frozen mid-way, and its
  heartbeats with it). With ``"finish"`` (the default) the invocation waits for such a task up
  to ``shutdown_timeout``, then hands it back.
- **One event loop for the process**, made here and set as the current loop only while an
  invocation runs. Mangum runs every request on ``asyncio.get_event_loop()``, which on Python
  3.12+ warns (3.14: raises) when no loop is set, and which in a test process may be a loop
  another test has closed.
- **Problem answers stay text.** Mangum base64-encodes every body whose type is not in its text
  list, and ``application/problem+json`` (401, 404, 422, 503 answers) is not: API Gateway REST
  would then hand the gateway base64 instead of the problem unless binary media types were set
  up. It is added to the list.

- **The invocation's time limit is known** (``follow_time_limit``, on by default): each
  invocation sets the worker's :attr:`~sdk.runner.Runner.invocation_ends` from the context's
  ``get_remaining_time_in_millis()``, so a durable step that would not fit in the time left
  hands the task over to a fresh invocation (:class:`~sdk.errors.HandOver`) rather than being
  killed by Lambda's timeout half-way, which would spend an attempt (docs/durable.md).

Bodies reach the worker as the exact bytes that were signed: Mangum decodes base64 bodies
(``isBase64Encoded``, as function URLs and HTTP APIs send binary or unknown types) and encodes
text bodies as UTF-8, which is what the gateway sent. Header names arrive in any case (REST v1
keeps the sender's); they are compared lowercased.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from mangum import Mangum
from mangum.adapter import DEFAULT_TEXT_MIME_TYPES
from mangum.types import LambdaContext, LambdaEvent

from sdk.wire import PROBLEM_CONTENT_TYPE
from sdk.worker import Worker

__all__ = ["LambdaHandler", "lambda_handler"]

TEXT_TYPES = [*DEFAULT_TEXT_MIME_TYPES, PROBLEM_CONTENT_TYPE]
"""Answer types returned as text rather than base64: Mangum's, and problem documents."""


class LambdaHandler:
    """The Lambda handler of one worker: call it with the event and the context."""

    def __init__(
        self, worker: Worker, *, api_gateway_base_path: str = "/", follow_time_limit: bool = True
    ) -> None:
        self.worker = worker
        self.follow_time_limit = follow_time_limit
        self._loop = asyncio.new_event_loop()
        with _current(self._loop):
            self._adapter = Mangum(
                worker,
                lifespan="on",
                api_gateway_base_path=api_gateway_base_path,
                text_mime_types=TEXT_TYPES,
            )

    def __call__(self, event: LambdaEvent, context: LambdaContext) -> dict[str, Any]:
        if self._loop.is_closed():
            self._loop = asyncio.new_event_loop()
        runner = self.worker.runner
        remaining = getattr(context, "get_remaining_time_in_millis", None)
        if self.follow_time_limit and remaining is not None:
            runner.invocation_ends = time.monotonic() + remaining() / 1000
        try:
            with _current(self._loop):
                return self._adapter(event, context)
        finally:
            runner.invocation_ends = None

    def close(self) -> None:
        """Close the event loop (for tests and local runs; Lambda just ends the process)."""
        self._loop.close()


@contextmanager
def _current(loop: asyncio.AbstractEventLoop) -> Iterator[None]:
    """``loop`` as the thread's current event loop for the block, and none after."""
    asyncio.set_event_loop(loop)
    try:
        yield
    finally:
        asyncio.set_event_loop(None)


def lambda_handler(
    worker: Worker, *, api_gateway_base_path: str = "/", follow_time_limit: bool = True
) -> LambdaHandler:
    """The AWS Lambda handler serving ``worker`` (see the module docstring).

    ``api_gateway_base_path``: a custom domain's base path mapping to strip from request paths
    (Mangum's option); the worker serves every path, so it only matters when other routes
    share the function. ``follow_time_limit``: hand a task with durable steps over to a fresh
    invocation when its next step would not fit in the invocation's remaining time (less the
    worker's ``time_limit_margin``).
    """
    return LambdaHandler(
        worker, api_gateway_base_path=api_gateway_base_path, follow_time_limit=follow_time_limit
    )
