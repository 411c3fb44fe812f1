"""The one place where errors become RFC 9457 problem documents."""

from __future__ import annotations

import logging

from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from gateway.core.errors import GatewayError, Unavailable, ValidationFailed
from gateway.store.failures import as_gateway_error
from sdk.wire import PROBLEM_CONTENT_TYPE, FieldError, Problem

log = logging.getLogger(__name__)


def problem_response(
    status: int,
    title: str,
    detail: str | None = None,
    errors: list[FieldError] | None = None,
    headers: dict[str, str] | None = None,
    problem_type: str = "about:blank",
) -> Response:
    problem = Problem(type=problem_type, title=title, status=status, detail=detail, errors=errors)
    return Response(
        problem.model_dump_json(exclude_none=True),
        status_code=status,
        media_type=PROBLEM_CONTENT_TYPE,
        headers=headers,
    )


def gateway_problem(exc: GatewayError) -> Response:
    errors = None
    if isinstance(exc, ValidationFailed):
        errors = [FieldError(field=e.field, reason=e.reason) for e in exc.errors]
    headers = {"Retry-After": str(exc.retry_after)} if isinstance(exc, Unavailable) else None
    if exc.status == 401:
        headers = {"WWW-Authenticate": "Bearer"}
    return problem_response(exc.status, exc.title, exc.detail, errors, headers, exc.problem_type)


async def on_gateway_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, GatewayError)
    return gateway_problem(exc)


async def on_http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    titles = {404: "Not found", 405: "Method not allowed"}
    detail = exc.detail if exc.status_code not in titles else f"{request.method} {request.url.path}"
    return problem_response(
        exc.status_code,
        titles.get(exc.status_code, "HTTP error"),
        detail,
        headers=dict(exc.headers or {}),
    )


async def on_disconnect(request: Request, exc: Exception) -> Response:
    """The client went away before its request's body was read (a worker stopped mid-callback):
    nothing failed here, so no traceback. Status 499 ("client closed request") is for the
    access log; nobody is left to read it."""
    log.info("client disconnected during %s %s", request.method, request.url.path)
    return problem_response(499, "Client closed request", "the client disconnected")


def known_error(request: Request, exc: Exception) -> GatewayError:
    """What a client is told of an exception no route handled: a Redis failure as such (logged
    as a warning), anything else as an internal error (logged with its traceback)."""
    if isinstance(exc, GatewayError):
        return exc
    known = as_gateway_error(exc)
    if known is not None:
        log.warning("%s %s: %s", request.method, request.url.path, exc)
        return known
    log.exception("unhandled error in %s %s", request.method, request.url.path)
    return GatewayError("the gateway failed; the error is logged")


async def on_unexpected(request: Request, exc: Exception) -> Response:
    return gateway_problem(known_error(request, exc))


def answered_inside(exc: Exception) -> bool:
    """Whether a handler of :data:`EXCEPTION_HANDLERS` other than the catch-all takes ``exc``
    (by its classes, as Starlette's exception middleware looks). The catch-all (``Exception``)
    is Starlette's outermost middleware's: it answers, then raises the exception on to the
    server, and uvicorn closes the client's connection after the answer. So routes raise
    :func:`known_error`'s error instead of an exception only the catch-all would take."""
    for cls in type(exc).__mro__:
        if cls is Exception:
            return False
        if cls in EXCEPTION_HANDLERS:
            return True
    return False


EXCEPTION_HANDLERS = {
    GatewayError: on_gateway_error,
    HTTPException: on_http_exception,
    ClientDisconnect: on_disconnect,
    Exception: on_unexpected,
}
