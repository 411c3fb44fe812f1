"""The hottest route without Starlette's router: ``POST /v1/queues/{queue}/tasks``.

A single enqueue is the request producers send most. Starlette's router tries each route's
pattern in turn until one matches, then runs the endpoint inside its exception middleware and
its request/response adapters. :class:`DirectRoute`, the innermost of the app's middleware,
matches that one route first, with the route's own pattern (a Starlette :class:`Route`, so the
path parameters and ``scope["route"]`` come out as the router makes them), runs the same
endpoint (:func:`gateway.api.routing.endpoint`) and turns what it raises into the same answers
through the same handler table (:data:`gateway.api.problems.EXCEPTION_HANDLERS`); the endpoint
raises nothing the table does not take (an unknown error comes out of it as a 500
``GatewayError``: :func:`gateway.api.problems.answered_inside`), so no exception goes on to the
server, which would close the client's connection. Every
other request goes on to the router untouched. It took the gateway's CPU per enqueue from 295 to
251 µs on a loaded machine (bench/RESULTS.md, "Gateway CPU per enqueue").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.api.problems import EXCEPTION_HANDLERS
from gateway.api.routing import Operation, endpoint

Handler = Callable[[Request, Exception], Awaitable[Response]]


class DirectRoute:
    """ASGI middleware: requests for ``operation`` go straight to its endpoint."""

    def __init__(self, app: ASGIApp, operation: Operation) -> None:
        self._app = app
        self._endpoint = endpoint(operation)
        self._route = Route(operation.path, self._endpoint, methods=[operation.method])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            match, child = self._route.matches(scope)
            if match is Match.FULL:
                scope.update(child)
                scope["route"] = self._route
                await self._answer(scope, receive, send)
                return
        await self._app(scope, receive, send)

    async def _answer(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive, send)
        try:
            response = await self._endpoint(request)
        except Exception as e:
            handler = _handler(e)
            if handler is None:
                raise
            response = await handler(request, e)
        await response(scope, receive, send)


def _handler(exc: Exception) -> Handler | None:
    """The handler Starlette's exception middleware would pick: by the exception's classes,
    nearest first; ``Exception`` itself is the server error middleware's (a 500), not its."""
    for cls in type(exc).__mro__:
        if cls is Exception:
            return None
        if cls in EXCEPTION_HANDLERS:
            return EXCEPTION_HANDLERS[cls]
    return None
