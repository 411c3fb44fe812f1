"""Signing in with an API key, and out."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from gateway.admin.render import CSRF_FIELD
from gateway.admin.web import (
    LOGIN_COOKIE,
    PREFIX,
    SESSION_COOKIE,
    Admin,
    Visit,
    read_form,
    safe_next,
)
from gateway.auth import Access
from gateway.errors import GatewayError, Unauthorized
from gateway.services import Services

LOGIN_COOKIE_SECONDS = 3600


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
        if admin.codec.check(request.cookies.get(SESSION_COOKIE)) is not None:
            return RedirectResponse(safe_next(request.query_params.get("next")), 303)
        return _form(admin, request)

    async def sign_in(request: Request) -> Response:
        services: Services = request.state.services
        try:
            form = await read_form(request, services.max_body_bytes)
        except GatewayError as e:
            return _form(admin, request, error=e.detail, status=e.status)
        next_page = form.get("next")
        if not admin.codec.login_ok(request.cookies.get(LOGIN_COOKIE), form.get(CSRF_FIELD)):
            return _form(
                admin,
                request,
                error="The form expired or did not come from this page; sign in again.",
                status=403,
                next_page=next_page,
            )
        key = (form.get("api_key") or "").strip()
        try:
            principal = services.auth.authenticate(f"Bearer {key}")
        except Unauthorized:
            return _form(admin, request, error="Unknown API key.", status=401, next_page=next_page)
        if not principal.may(Access.READ):
            return _form(
                admin,
                request,
                error="This key may not read everything; the admin UI needs the 'read' or "
                "'admin' scope.",
                status=403,
                next_page=next_page,
            )
        response = RedirectResponse(safe_next(form.get("next")), status_code=303)
        admin.set_session(response, request, admin.codec.open(key))
        response.delete_cookie(LOGIN_COOKIE, path=f"{PREFIX}/login")
        return response

    async def sign_out(visit: Visit) -> Response:
        response = RedirectResponse(f"{PREFIX}/login", status_code=303)
        admin.end_session(response, visit.request)
        return response

    return [
        Route("/login", sign_in_form, methods=["GET"]),
        Route("/login", sign_in, methods=["POST"]),
        Route("/logout", admin.page(sign_out), methods=["POST"]),
    ]
