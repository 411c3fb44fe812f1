"""Signing in with an API key, and out.

A sign-in form can be sent once (its nonce is spent by the attempt), and attempts from one
client address are slowed down after a few (``gateway.services.sessions``): past
them the form answers 429 with ``Retry-After`` without looking at the key. A key that exists
but may not read everything gets the very answer an unknown key gets.
"""

from __future__ import annotations

import contextlib

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from gateway.admin.render import CSRF_FIELD
from gateway.admin.web import (
    LOGIN_COOKIE,
    PREFIX,
    Admin,
    Visit,
    read_form,
    safe_next,
)
from gateway.core.errors import GatewayError, Unauthorized
from gateway.security.auth import Access
from gateway.services import Services
from gateway.services.sessions import retry_after

LOGIN_COOKIE_SECONDS = 3600
EXPIRED = "The form expired or did not come from this page; sign in again."
UNKNOWN = "Unknown API key."


def _form(
    admin: Admin,
    request: Request,
    *,
    error: str | None = None,
    status: int = 200,
    next_page: str | None = None,
) -> Response:
    """The sign-in form, tied to a fresh nonce cookie (its CSRF token is the nonce signed)."""
    nonce = admin.codec.new_nonce()
    response = admin.html(
        request,
        "login.html",
        {
            "csrf": admin.codec.login_token(nonce),
            "next": safe_next(next_page or request.query_params.get("next")),
            "error": error,
            "active": "login",
        },
        status,
    )
    response.set_cookie(
        LOGIN_COOKIE,
        nonce,
        max_age=LOGIN_COOKIE_SECONDS,
        path=f"{PREFIX}/login",
        secure=admin.secure(request),
        httponly=True,
        samesite="strict",
    )
    return response


def routes(admin: Admin) -> list[BaseRoute]:
    async def sign_in_form(request: Request) -> Response:
        if await admin.visitor(request, request.state.services) is not None:
            return RedirectResponse(safe_next(request.query_params.get("next")), 303)
        return _form(admin, request)

    async def sign_in(request: Request) -> Response:
        services: Services = request.state.services
        try:
            form = await read_form(request, services.max_body_bytes)
        except GatewayError as e:
            return _form(admin, request, error=e.detail, status=e.status)
        next_page = form.get("next")
        nonce = request.cookies.get(LOGIN_COOKIE)
        if nonce is None or not admin.codec.login_ok(nonce, form.get(CSRF_FIELD)):
            return _form(admin, request, error=EXPIRED, status=403, next_page=next_page)
        host = request.client.host if request.client else ""
        attempt = await services.sessions.attempt(nonce, host)
        if attempt.spent:
            return _form(admin, request, error=EXPIRED, status=403, next_page=next_page)
        if attempt.waits:
            wait = retry_after(attempt)
            response = _form(
                admin,
                request,
                error=f"Too many sign-in attempts from your address: try again in {wait} s.",
                status=429,
                next_page=next_page,
            )
            response.headers["retry-after"] = str(wait)
            return response
        key = (form.get("api_key") or "").strip()
        principal = None
        with contextlib.suppress(Unauthorized):
            principal = services.auth.authenticate(f"Bearer {key}")
        # A key that may not read everything is answered exactly as an unknown one, so the
        # answer does not tell that a narrower key is real.
        if principal is None or not principal.may(Access.READ):
            return _form(admin, request, error=UNKNOWN, status=401, next_page=next_page)
        await services.sessions.signed_in(host)
        token, session = admin.codec.issue(key)
        await services.sessions.opened(key, session.session_id)
        response = RedirectResponse(safe_next(next_page), status_code=303)
        admin.set_session(response, request, token)
        response.delete_cookie(LOGIN_COOKIE, path=f"{PREFIX}/login")
        return response

    async def sign_out(visit: Visit) -> Response:
        await visit.services.sessions.end(visit.session.api_key, visit.session.session_id)
        response = RedirectResponse(f"{PREFIX}/login", status_code=303)
        admin.end_session(response, visit.request)
        return response

    return [
        Route("/login", sign_in_form, methods=["GET"]),
        Route("/login", sign_in, methods=["POST"]),
        Route("/logout", admin.page(sign_out), methods=["POST"]),
    ]
