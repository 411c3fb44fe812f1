"""The access log: one line per HTTP request, on the ``gateway.access`` logger.

::

    GET /v1/queues/mail/tasks 200 3.2ms id=5f0c9a1e2b7d4c38

Method, path (percent-encoded; never the query string), status, duration until the response
ended, and a request id: the client's ``X-Request-Id`` when it sends a short one, else a fresh
one; either way the response carries it back in ``X-Request-Id``, so a user can find the line of
a request.
Headers are never logged, so neither API keys nor lease tokens reach the log.

The app factory adds this middleware only when ``access_log`` is on: off, it costs nothing.
"""

from __future__ import annotations

import logging
import re
import secrets
import time
from urllib.parse import quote

from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("gateway.access")

REQUEST_ID_HEADER = b"x-request-id"
_CLIENT_ID = re.compile(rb"^[A-Za-z0-9._:-]{1,64}$")
_PATH_SAFE = "/:@!$&'()*+,;=~"  # and letters, digits, _.-: a path cannot break the line


class AccessLog:
    """ASGI middleware: logs each HTTP request once its response has been sent (or failed)."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        request_id = _request_id(scope)
        started = time.perf_counter()
        status = 500  # what the client gets when the app fails before it answers

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", ()), (REQUEST_ID_HEADER, request_id)]
            await send(message)

        try:
            await self._app(scope, receive, send_with_id)
        finally:
            took = (time.perf_counter() - started) * 1000
            log.info(
                "%s %s %d %.1fms id=%s",
                scope["method"],
                quote(scope["path"], safe=_PATH_SAFE),
                status,
                took,
                request_id.decode(),
            )


def _request_id(scope: Scope) -> bytes:
    for name, value in scope["headers"]:
        if name == REQUEST_ID_HEADER and _CLIENT_ID.match(value):
            return bytes(value)
    return secrets.token_hex(8).encode()
