"""An HTTP ``SERVER`` span for each API request, child of the request's ``traceparent``.

The app factory adds this middleware only when tracing exports (:class:`~gateway.telemetry.
tracing.Tracing`): off, requests pay nothing. The span is current while the route runs, so the
spans a route starts (an enqueue's) are its children. Its name is the method and the matched
route (``POST /v1/queues/{queue}/tasks``), never the raw path, so names stay few.

Worker callbacks (``/v1/callbacks/{queue}/{task_id}/<kind>``) also carry messaging attributes
naming the task: the callbacks that end an attempt (``result``, ``error``, ``release``) are the
``settle`` operation. The worker sends them with its own span's context, so they sit under the
worker's span in the task's trace.

The probes (``/healthz``, ``/readyz``) are not traced: they come every few seconds and say
nothing about tasks.
"""

from __future__ import annotations

from typing import Any

from opentelemetry import context, trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.telemetry.tracing import PROPAGATOR, SYSTEM, Tracing
from sdk.wire import HEADER_TRACEPARENT, HEADER_TRACESTATE

UNTRACED = frozenset({"/healthz", "/readyz"})
CALLBACKS = "/v1/callbacks/"
SETTLE = frozenset({"result", "error", "release"})
_WANTED = {
    HEADER_TRACEPARENT.encode(): HEADER_TRACEPARENT,
    HEADER_TRACESTATE.encode(): HEADER_TRACESTATE,
}


class ServerSpans:
    """ASGI middleware: one server span per HTTP request."""

    def __init__(self, app: ASGIApp, tracing: Tracing) -> None:
        self._app = app
        self._tracing = tracing

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in UNTRACED:
            await self._app(scope, receive, send)
            return
        incoming = {
            _WANTED[name]: value.decode("latin-1")
            for name, value in scope["headers"]
            if name in _WANTED
        }
        if not self._tracing.follows(incoming.get(HEADER_TRACEPARENT)):
            # Sampling left the caller's trace out: no span, but what the route starts (an
            # enqueue) must see that parent, and stay out too.
            token = context.attach(PROPAGATOR.extract(incoming))
            try:
                await self._app(scope, receive, send)
            finally:
                context.detach(token)
            return
        method = scope["method"]
        span = self._tracing.start_span(
            method,
            SpanKind.SERVER,
            {
                "http.request.method": method,
                "url.path": scope["path"],
                "url.scheme": scope.get("scheme", "http"),
            },
            PROPAGATOR.extract(incoming),
        )
        status = 500  # what the client gets when the app fails before it answers

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        with trace.use_span(span, end_on_exit=True, record_exception=True):
            try:
                await self._app(scope, receive, send_status)
            finally:
                _describe(span, scope, method, status)


def _describe(span: trace.Span, scope: Scope, method: str, status: int) -> None:
    span.set_attribute("http.response.status_code", status)
    if status >= 500:
        span.set_attribute("error.type", str(status))
        span.set_status(Status(StatusCode.ERROR))
    route = _route(scope)
    if route is None:
        return
    span.update_name(f"{method} {route}")
    span.set_attribute("http.route", route)
    params: dict[str, Any] = scope.get("path_params", {})
    if route.startswith(CALLBACKS) and "task_id" in params:
        kind = route.rpartition("/")[2]
        span.set_attribute("messaging.system", SYSTEM)
        span.set_attribute("messaging.operation.name", kind)
        if kind in SETTLE:
            span.set_attribute("messaging.operation.type", "settle")
        span.set_attribute("messaging.destination.name", str(params.get("queue", "")))
        span.set_attribute("messaging.message.id", str(params["task_id"]).upper())


def _route(scope: Scope) -> str | None:
    """The path template of the route that served the request (Starlette records it in the
    scope), or None when none matched (a 404). Inside a mount (the admin UI), the mount's
    path and the route's."""
    route = scope.get("route")
    if not isinstance(route, Route):
        return None
    return f"{scope.get('root_path', '')}{route.path}"
