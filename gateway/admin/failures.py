"""Errors under ``/admin`` that no page answered: an unknown path, a method a path lacks, a
missing static file, an exception a page let through.

They are answered here, inside the admin mount, so the answer passes through
:class:`~gateway.admin.headers.SecurityHeaders` like every page (the app-wide handlers of
``gateway.api.problems`` answer outside it, with problem+json for API clients). The page names
the status only: it never repeats the request's path or method, which a crafted link chooses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from gateway.admin.web import Admin
from gateway.api.problems import known_error, on_disconnect
from gateway.core.errors import Unavailable

TITLES = {404: "Not found", 405: "Method not allowed"}
DETAILS = {
    404: "There is no such page in the admin UI.",
    405: "This page does not take that kind of request.",
}
KEPT_HEADERS = ("allow",)  # a 405 names the methods the path has


def handlers(admin: Admin) -> Mapping[Any, Any]:
    """The exception handlers of the admin mount, rendering ``error.html``."""

    def page(request: Request, status: int, title: str, detail: str) -> Response:
        return admin.html(request, "error.html", {"title": title, "detail": detail}, status=status)

    async def on_http_exception(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        status = exc.status_code
        title = TITLES.get(status, "Error")
        response = page(request, status, title, DETAILS.get(status, title))
        for name, value in (exc.headers or {}).items():
            if name.lower() in KEPT_HEADERS:
                response.headers[name] = value
        return response

    async def on_exception(request: Request, exc: Exception) -> Response:
        known = known_error(request, exc)  # logged as the API's are
        response = page(request, known.status, known.title, known.detail or known.title)
        if isinstance(known, Unavailable):
            response.headers["retry-after"] = str(known.retry_after)
        return response

    return {
        HTTPException: on_http_exception,
        ClientDisconnect: on_disconnect,  # nobody is left to read a page
        Exception: on_exception,
    }
