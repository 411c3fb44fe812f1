"""The worker: an ASGI app that receives pushes from the gateway and runs task functions.

::

    worker = Worker(tasks=[send_welcome, resize_image], secret="whsec_...")
    # uvicorn my_module:worker   (or hypercorn, or mount it in any Starlette/FastAPI app)

A push is answered, in order of checks:

- 401 (problem) when no secret verifies its signature — the task does not run;
- 400 (problem) when its body or jobgate headers are malformed;
- 503 with Retry-After when ``max_concurrency`` tasks already run here (busy, no attempt spent);
- 404 (problem) when no task function has its name;
- 422 (problem) when its payload is not ``{"args": [...], "kwargs": {...}}`` fitting the function;
- else the task runs: its verdict inline (:mod:`sdk.outcomes`) when it ends within
  ``inline_window`` seconds, else 202 and callbacks (heartbeats, then result or error).

Mounted inside another app, the host must run :meth:`Worker.lifespan` in its own lifespan, so
that running tasks are finished (or handed back) and the callback client is closed on shutdown.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from sdk.attempt import Attempt
from sdk.callbacks import FINAL_RETRY_DELAYS, CallbackChannel
from sdk.errors import SignatureError
from sdk.outcomes import Stop, Verdict
from sdk.signatures import Verifier
from sdk.tasks import TaskFunction
from sdk.wire import (
    HEADER_CALLBACK,
    HEADER_LEASE,
    PROBLEM_CONTENT_TYPE,
    FieldError,
    Problem,
    PushBody,
    TaskArgs,
)

__all__ = ["Worker"]

log = logging.getLogger(__name__)


def problem(
    status: int, title: str, detail: str | None = None, errors: list[FieldError] | None = None
) -> Response:
    body = Problem(title=title, status=status, detail=detail, errors=errors)
    content = body.model_dump_json(exclude_none=True)
    return Response(content, status_code=status, media_type=PROBLEM_CONTENT_TYPE)


def field_errors(error: ValidationError, prefix: str = "") -> list[FieldError]:
    return [
        FieldError(field=".".join([prefix, *map(str, e["loc"])]).strip("."), reason=e["msg"])
        for e in error.errors(include_url=False)
    ]


def answer(verdict: Verdict | None) -> Response:
    if verdict is None:
        return problem(409, "Lease lost", "the task was dispatched again; this attempt stopped")
    media_type = "application/json"
    return Response(verdict.body, verdict.status, verdict.headers, media_type=media_type)


class Worker:
    """An ASGI app serving ``tasks`` to the gateway.

    ``secret`` is the endpoint's signing secret, or several while one is being rotated.
    ``inline_window``: how long a push waits for its task before answering 202 and reporting
    through callbacks. ``heartbeat_interval``: seconds between automatic heartbeats of tasks
    running in the background (default: a third of the time left on the lease).
    ``max_concurrency``: tasks running here at once before pushes are answered 503 (busy).
    ``shutdown_grace``: seconds the lifespan waits at shutdown for background tasks to end,
    before it stops them and hands them back to the gateway as retryable errors.
    ``transport``: the callback client's transport (tests, proxies).
    """

    def __init__(
        self,
        tasks: Iterable[TaskFunction[Any, Any]],
        secret: str | Sequence[str],
        *,
        inline_window: float = 5.0,
        heartbeat_interval: float | None = None,
        max_concurrency: int | None = None,
        shutdown_grace: float = 30.0,
        callback_timeout: float = 10.0,
        final_retry_delays: Sequence[float] = FINAL_RETRY_DELAYS,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.tasks: dict[str, TaskFunction[Any, Any]] = {}
        for fn in tasks:
            if fn.name in self.tasks:
                raise ValueError(f"two task functions are named {fn.name!r}")
            self.tasks[fn.name] = fn
        self.inline_window = inline_window
        self.heartbeat_interval = heartbeat_interval
        self.max_concurrency = max_concurrency
        self.shutdown_grace = shutdown_grace
        self._verifier = Verifier(secret)
        self._callback_timeout = callback_timeout
        self._final_retry_delays = tuple(final_retry_delays)
        self._transport = transport
        self._http: httpx.AsyncClient | None = None
        self._attempts: set[Attempt] = set()
        self._supervisors: set[asyncio.Task[None]] = set()
        self.app = Starlette(
            routes=[
                Route("/{path:path}", self._push, methods=["POST"]),
                Route("/{path:path}", self._describe, methods=["GET"]),
            ],
            lifespan=self.lifespan,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)

    @property
    def running(self) -> int:
        """Tasks running here now."""
        return len(self._attempts)

    def lifespan(self, app: object = None) -> AbstractAsyncContextManager[None]:
        """Open the callback client; at exit, end running tasks and close it."""
        return self._lifespan()

    @asynccontextmanager
    async def _lifespan(self) -> AsyncIterator[None]:
        self._client()
        try:
            yield
        finally:
            await self.shutdown()
            if self._http is not None:
                await self._http.aclose()
                self._http = None

    async def shutdown(self) -> None:
        """Wait ``shutdown_grace`` for background tasks, then stop the rest and report them."""
        if self._supervisors:
            await asyncio.wait(self._supervisors, timeout=self.shutdown_grace)
        for attempt in list(self._attempts):
            log.warning("task %s stopped by shutdown, handed back", attempt.push.id)
            attempt.stop(Stop.SHUTDOWN)
        if self._supervisors:
            await asyncio.wait(self._supervisors)

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            timeout = httpx.Timeout(self._callback_timeout)
            self._http = httpx.AsyncClient(timeout=timeout, transport=self._transport)
        return self._http

    async def _describe(self, request: Request) -> Response:
        return JSONResponse({"tasks": sorted(self.tasks)})

    async def _push(self, request: Request) -> Response:
        body = await request.body()
        try:
            self._verifier.verify(body, request.headers)
        except SignatureError as e:
            return problem(401, "Invalid signature", str(e))
        try:
            push = PushBody.model_validate_json(body)
        except ValidationError as e:
            return problem(400, "Invalid push body", errors=field_errors(e))
        if request.headers.get("webhook-id") != push.id:
            return problem(400, "Invalid push", "webhook-id differs from the task id")
        lease = request.headers.get(HEADER_LEASE)
        callback = request.headers.get(HEADER_CALLBACK)
        if not lease or not callback:
            detail = f"the {HEADER_LEASE} and {HEADER_CALLBACK} headers are required"
            return problem(400, "Missing headers", detail)
        if self.max_concurrency is not None and self.running >= self.max_concurrency:
            return Response(status_code=503, headers={"retry-after": "1"})
        fn = self.tasks.get(push.name)
        if fn is None:
            return problem(404, "Unknown task", f"this worker has no task named {push.name!r}")
        try:
            call = TaskArgs.model_validate(push.payload if push.payload is not None else {})
        except ValidationError as e:
            detail = 'the payload must be {"args": [...], "kwargs": {...}}'
            return problem(422, "Invalid payload", detail, field_errors(e, "payload"))
        channel = CallbackChannel(
            self._client(), callback, lease, push.lease_expires_at, self._final_retry_delays
        )
        attempt = Attempt(fn, push, channel, self.heartbeat_interval)
        try:
            args, kwargs = fn.signature.layout(call.args, call.kwargs, attempt.context())
        except TypeError as e:
            return problem(422, "Arguments do not fit the task", str(e))
        return await self._run(attempt, args, kwargs)

    async def _run(self, attempt: Attempt, args: list[Any], kwargs: dict[str, Any]) -> Response:
        attempt.start(args, kwargs)
        self._attempts.add(attempt)
        window = self.inline_window if attempt.fn.inline else 0.0
        try:
            finished = await attempt.finished_within(window)
        except asyncio.CancelledError:  # the push went away: carry on, report by callback
            self._supervise(attempt)
            raise
        if finished:
            self._attempts.discard(attempt)
            return answer(attempt.verdict())
        self._supervise(attempt)
        return Response(status_code=202)

    def _supervise(self, attempt: Attempt) -> None:
        supervisor = asyncio.create_task(attempt.supervise())
        self._supervisors.add(supervisor)

        def done(task: asyncio.Task[None]) -> None:
            self._supervisors.discard(task)
            self._attempts.discard(attempt)
            if not task.cancelled() and task.exception() is not None:
                log.error("task %s: supervision failed", attempt.push.id, exc_info=task.exception())

        supervisor.add_done_callback(done)
