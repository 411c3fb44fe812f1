"""The worker: an ASGI app that receives pushes from the gateway and runs task functions.

::

    worker = Worker(tasks=[send_welcome, resize_image], secret="whsec_...")
    # uvicorn my_module:worker   (or hypercorn, or mount it in any Starlette/FastAPI app)

A push carries one task, or — for an endpoint registered with ``batch_size`` above 1 — a batch
of them (a ``PushBatch``, marked by the ``jobgate-batch`` header; see :mod:`sdk.pushes`). The
whole request is refused, and nothing runs, with:

- 401 (problem) when no secret verifies its signature (for a batch: over the whole body);
- 400 (problem) when its body or jobgate headers are malformed.

Otherwise each task gets, in order of checks (:mod:`sdk.runner`):

- 503 with Retry-After (``busy_retry_after``) when ``max_concurrency`` tasks already run here,
  inline or in the background, or the worker is shutting down (busy: the gateway retries without
  spending an attempt); a batch fills the free slots in order, and only the tasks beyond them
  get 503;
- 404 when no task function has its name;
- 422 when its payload is not ``{"args": [...], "kwargs": {...}}`` fitting the function;
- else the task runs: its verdict (:mod:`sdk.outcomes`) when it ends within ``inline_window``
  seconds, else 202 and callbacks (heartbeats, then result or error) to its callback URL under
  its lease. The tasks of a batch all start at once and share one inline window.

A single push is answered with its task's status; a batch with 200 and a ``BatchAnswer`` holding
each task's status (and result, or error and retry delay), in the batch's order.

On SIGTERM, ASGI servers (uvicorn, hypercorn) stop accepting connections, let the requests in
flight end, then run the lifespan's shutdown: there the worker follows its ``shutdown`` policy
for the tasks still running — ``finish`` them (for up to ``shutdown_timeout`` seconds, then
``requeue`` the rest), ``requeue`` them (handed back to the queue at once, no attempt spent), or
``fail`` them (not retried). See :mod:`sdk.runner` and ``docs/workers.md``.

Mounted inside another app, the host must run :meth:`Worker.lifespan` in its own lifespan, so
that running tasks are finished (or handed back) and the callback client is closed on shutdown.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, Unpack

from sdk.asgi import Receive, Response, Scope, Send, serve_lifespan
from sdk.catalog import catalog
from sdk.errors import SignatureError
from sdk.outcomes import Refusal
from sdk.pushes import JSON, read_push, response_of
from sdk.wire import (
    HEADER_BATCH,
    HEADER_CALLBACK,
    HEADER_LEASE,
    HEADER_TRACEPARENT,
    HEADER_TRACESTATE,
    CatalogTask,
)

if TYPE_CHECKING:
    from sdk.client import AsyncClient
    from sdk.pull import PullWorker
    from sdk.runner import RunnerOptions
    from sdk.tasks import TaskFunction

__all__ = ["Worker"]


class Worker:
    """An ASGI app serving ``tasks`` to the gateway, by single or batch pushes alike.

    ``secret`` is the endpoint's signing secret, or several while one is being rotated.
    ``inline_window``: how long a push waits for its tasks (all of a batch's at once) before
    answering 202 for those still running and reporting them through callbacks.
    ``heartbeat_interval``: seconds between automatic heartbeats of tasks running in the
    background (default: a third of the time left on the lease).
    ``max_concurrency``: tasks running here at once (inline or in the background); tasks pushed
    beyond it are answered 503 with ``Retry-After: busy_retry_after`` (seconds, default 1).
    ``shutdown``: what the lifespan's end does with tasks still running: ``"finish"`` (the
    default) waits up to ``shutdown_timeout`` seconds (default 20) for them, then hands back the
    rest; ``"requeue"`` stops them and hands them back to the queue at once, without spending
    an attempt; ``"fail"`` stops them and fails them, not retried.
    ``time_limit``: seconds a push may run here before the platform cuts it (a function's or
    a request's timeout), if it does; with it (or run as a Lambda function,
    :mod:`sdk.lambda_handler`), a durable step that would not fit in the time left, less
    ``time_limit_margin`` seconds (default 1), hands the task over to a fresh attempt instead
    of running (:class:`~sdk.errors.HandOver`: no attempt spent; docs/durable.md).
    ``callback_timeout``, ``final_retry_delays``: how callbacks are sent and the final one
    retried; callbacks go over aiohttp (:mod:`sdk.sessions`). ``transport``: an httpx
    transport to send them through instead (tests mount a fake gateway in process).
    ``meter_provider``: where the worker's metrics go (:mod:`sdk.telemetry.metrics`); by
    default the application's global OpenTelemetry provider, a no-op unless it set one.
    """

    def __init__(
        self,
        tasks: Iterable[TaskFunction[Any, Any]],
        secret: str | Sequence[str],
        **options: Unpack[RunnerOptions],
    ) -> None:
        # The worker's machinery is loaded here, when a worker is built: a program that only
        # imports Worker (a producer sharing a tasks module with its worker) never loads it.
        from sdk.runner import Runner
        from sdk.signatures import Verifier

        self.runner = Runner(tasks, **options)
        self._verifier = Verifier(secret)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Plain ASGI, no framework (sdk.asgi): POST is a push, GET or HEAD of any path describes
        # the worker, other methods get 405. An error escaping here reaches the server, which
        # answers 500.
        kind = scope["type"]
        if kind == "http":
            method = scope["method"]
            if method == "POST":
                body = await _read_body(receive)
                if body is not None:
                    response = await self._answer(body, _headers(scope))
                    await response(scope, receive, send)
                return
            if method in ("GET", "HEAD"):
                await self._describe()(scope, receive, send)
                return
            await _NOT_ALLOWED(scope, receive, send)
        elif kind == "lifespan":
            await serve_lifespan(self.lifespan, receive, send)
        elif kind == "websocket":
            await send({"type": "websocket.close", "code": 1000})

    @property
    def tasks(self) -> dict[str, TaskFunction[Any, Any]]:
        """The task functions served, by name."""
        return self.runner.tasks

    def catalog(self, queue: str | None = None) -> list[CatalogTask]:
        """The task catalog entries of the functions served (of ``queue``'s only, when given):
        each name with its payload's JSON Schema, derived from the type hints
        (:mod:`sdk.catalog`). Report them when registering the endpoint
        (``Client.add_endpoint(queue, url, tasks=worker.catalog(queue))``) or later
        (``Client.put_endpoint_tasks``)."""
        return catalog(self.tasks.values(), queue)

    @property
    def running(self) -> int:
        """Tasks running here now."""
        return self.runner.running

    def lifespan(self, app: object = None) -> AbstractAsyncContextManager[None]:
        """Accept tasks; at exit, end running tasks and close the callback client."""
        return self._lifespan()

    @asynccontextmanager
    async def _lifespan(self) -> AsyncIterator[None]:
        self.runner.open()
        try:
            yield
        finally:
            await self.runner.close()

    def pull(
        self,
        client: AsyncClient,
        queue: str,
        endpoint_id: str,
        *,
        max_tasks: int = 10,
        wait: float = 30.0,
    ) -> PullWorker:
        """Serve the tasks by pulling rather than by pushes: a :class:`~sdk.pull.PullWorker`
        leasing from ``queue`` for the pull endpoint ``endpoint_id``, with this worker's tasks
        and options. ``await worker.pull(client, queue, endpoint_id).run(stop_event)``."""
        from sdk.pull import PullWorker

        return PullWorker(self, client, queue, endpoint_id, max_tasks=max_tasks, wait=wait)

    async def shutdown(self) -> None:
        """Refuse new tasks (503), and follow the ``shutdown`` policy for the running ones."""
        await self.runner.shutdown()

    def _describe(self) -> Response:
        tasks = json.dumps({"tasks": sorted(self.tasks)}, separators=(",", ":"))
        return Response(200, tasks, media_type=JSON)

    async def _answer(self, body: bytes, headers: dict[str, str]) -> Response:
        """The answer to a push request: verified, read, run."""
        try:
            self._verifier.verify_lowered(body, headers)
        except SignatureError as e:
            self.runner.metrics.processed(None, "dropped")
            return response_of(Refusal(401, "Invalid signature", str(e)))
        push = read_push(body, headers)
        if isinstance(push, Refusal):
            return response_of(push)
        return push.answer(await self.runner.run(push.deliveries))


_NOT_ALLOWED = Response(
    405, "Method Not Allowed", {"allow": "GET, HEAD, POST"}, media_type="text/plain; charset=utf-8"
)


async def _read_body(receive: Receive) -> bytes | None:
    """The request body, or None when the client went away before sending all of it."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":  # http.disconnect
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


# The headers a push is read by (signature, batch marker, lease, callback, trace context).
_PUSH_HEADERS = frozenset(
    name.encode()
    for name in (
        "webhook-id",
        "webhook-timestamp",
        "webhook-signature",
        HEADER_BATCH,
        HEADER_LEASE,
        HEADER_CALLBACK,
        HEADER_TRACEPARENT,
        HEADER_TRACESTATE,
    )
)


def _headers(scope: Scope) -> dict[str, str]:
    """The headers a push is read by, by (lower-case, per ASGI) name; the first of repeated
    ones."""
    headers: dict[str, str] = {}
    for name, value in scope["headers"]:
        if name in _PUSH_HEADERS:
            headers.setdefault(name.decode("latin-1"), value.decode("latin-1"))
    return headers
