"""What every admin page shares: the session check, CSRF on every POST, scopes, rendering, and
errors shown as pages.

A page is an async function of a :class:`Visit` (the request, the services, the signed-in
principal, the form of a POST) returning a response; :meth:`Admin.page` wraps it:

- no valid session: a redirect to the sign-in page (for an htmx request, ``HX-Redirect``). A
  session is valid while its cookie is (signed, not expired), its key is still configured and
  may still read everything, and its id is still open in Redis (one round trip, nothing
  cached, so a sign-out or a revocation applies at the next request on every gateway);
- a POST without this session's CSRF token (form field ``csrf`` or header ``X-CSRF-Token``):
  403, before anything runs;
- a POST to a page that changes something, by a key without the ``admin`` scope: 403;
- a :class:`~gateway.core.errors.GatewayError` the services raise: an error page with its status.

Pages call the same services as the JSON API, never the store.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any
from urllib.parse import parse_qs, quote

from jinja2 import Environment
from pydantic import TypeAdapter, ValidationError
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from gateway.admin.nav import NAV
from gateway.admin.render import CSRF_FIELD, Count
from gateway.admin.session import Session, SessionCodec
from gateway.core.errors import (
    FieldProblem,
    Forbidden,
    GatewayError,
    InvalidRequest,
    PayloadTooLarge,
    Unauthorized,
    ValidationFailed,
)
from gateway.security.auth import Access, Principal
from gateway.services import Services
from sdk.wire.base import reason

PREFIX = "/admin"
SESSION_COOKIE = "jobgate_session"
LOGIN_COOKIE = "jobgate_login"
CSRF_HEADER = "x-csrf-token"
FORM_TYPE = "application/x-www-form-urlencoded"
STATIC_VERSION = "8"  # bump when a static file changes, so browsers fetch it again
NOTICES = {
    "paused": "Queue paused: it accepts tasks but dispatches none.",
    "resumed": "Queue resumed: its tasks are dispatched again.",
    "cancelled": "Cancelled (a running task is asked to stop at its next heartbeat, and ends "
    "cancelled unless its attempt succeeds first).",
    "resubmitted": "{n:task} queued again; {skipped} skipped.",
    "job-created": "Job created.",
    "job-saved": "Job saved: the new schedule applies at once on every gateway.",
    "job-paused": "Job paused: it does not fire until resumed (it can still run now).",
    "job-resumed": "Job resumed: it fires on its schedule again.",
    "job-cloned": "Job cloned. The copy is paused: edit it, then resume it.",
    "job-deleted": "Job deleted.",
    "run-started": "Run started.",
    "run-stopped": "Stop requested (a running task stops at its next heartbeat).",
    "run-restarted": "A new run with the same args was started; the old one is kept.",
    "run-deleted": "Run deleted.",
    "endpoint-enabled": "Endpoint enabled: it gets tasks again.",
    "endpoint-disabled": "Endpoint disabled: it gets no new tasks (pushes in flight finish).",
    "settings-saved": "Settings saved: every gateway applies them within a second.",
    "unchanged": "Nothing was changed.",
    "purged": "{n:finished task} deleted.",
    "bulk-cancelled": "{n:task} cancelled; {requested:running task} asked to stop (each "
    "ends cancelled unless its attempt succeeds first); {skipped} had ended meanwhile.",
}
"""The messages a page shows after a change (``?notice=<name>``): fixed texts, so a link
cannot make the UI display words of someone else's choosing."""


@dataclass(frozen=True, slots=True)
class Form:
    """The fields of a POSTed form (every value of each, in order)."""

    fields: Mapping[str, list[str]] = field(default_factory=dict)

    def get(self, name: str) -> str | None:
        values = self.fields.get(name)
        return values[0] if values else None

    def getlist(self, name: str) -> list[str]:
        return list(self.fields.get(name, []))


async def read_form(request: Request, limit: int) -> Form:
    """A url-encoded form body, refused past ``limit`` bytes."""
    if request.headers.get("content-type", "").split(";")[0].strip() != FORM_TYPE:
        return Form()
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise PayloadTooLarge(f"the form is larger than {limit} bytes")
    try:
        return Form(parse_qs(body.decode(), keep_blank_values=True, strict_parsing=False))
    except UnicodeDecodeError as e:
        raise InvalidRequest("the form is not UTF-8") from e


@lru_cache(maxsize=32)
def _adapter(kind: Any) -> TypeAdapter[Any]:
    return TypeAdapter(kind)


def checked(kind: Any, name: str, value: str) -> Any:
    """``value`` validated as ``kind`` (e.g. ``QueueName``), or 400 naming the field."""
    try:
        return _adapter(kind).validate_python(value)
    except ValidationError as e:
        why = reason(e.errors()[0]) if e.errors() else "is not valid"
        raise InvalidRequest(f"{name}: {why}") from e


def safe_next(target: str | None) -> str:
    """Where to go after signing in: a path of the admin UI, never another site."""
    if target and target.startswith(PREFIX + "/") and "\\" not in target and "://" not in target:
        return target
    return f"{PREFIX}/queues"


class Admin:
    """The admin UI's shared parts: the session codec and the templates."""

    def __init__(self, codec: SessionCodec, env: Environment, *, https: bool) -> None:
        self.codec = codec
        self.env = env
        self._https = https

    def secure(self, request: Request) -> bool:
        """Whether cookies get ``Secure``: served over https, or behind an https public URL."""
        return self._https or request.url.scheme == "https"

    def html(
        self, request: Request, template: str, context: dict[str, Any], status: int = 200
    ) -> HTMLResponse:
        base = {
            "request": request,
            "nav": NAV,
            "prefix": PREFIX,
            "static": f"{PREFIX}/static",
            "static_version": STATIC_VERSION,
            "principal": None,
            "can_change": False,
            "csrf": "",
            "active": "",
            "notice": None,
        }
        body = self.env.get_template(template).render({**base, **context})
        return HTMLResponse(body, status_code=status)

    def set_session(self, response: Response, request: Request, token: str) -> None:
        response.set_cookie(
            SESSION_COOKIE,
            token,
            max_age=self.codec.ttl,
            path=PREFIX,
            secure=self.secure(request),
            httponly=True,
            samesite="strict",
        )

    def end_session(self, response: Response, request: Request) -> None:
        response.delete_cookie(
            SESSION_COOKIE, path=PREFIX, secure=self.secure(request), httponly=True
        )

    def page(
        self, handler: Callable[[Visit], Awaitable[Response]], *, change: bool = False
    ) -> Callable[[Request], Awaitable[Response]]:
        """A route endpoint running ``handler`` for a signed-in visitor; ``change`` marks a
        page whose POST changes something (the ``admin`` scope is needed)."""

        async def endpoint(request: Request) -> Response:
            services: Services = request.state.services
            found = await self.visitor(request, services)
            if found is None:
                return self._to_sign_in(request)
            session, principal = found
            visit = Visit(self, request, services, principal, session)
            try:
                if request.method == "POST":
                    visit.form = await read_form(request, services.max_body_bytes)
                    given = visit.form.get(CSRF_FIELD) or request.headers.get(CSRF_HEADER)
                    if not self.codec.csrf_ok(session.session_id, given):
                        raise Forbidden("missing or wrong CSRF token: reload the page")
                    if change:
                        principal.require(Access.ADMIN)
                return await handler(visit)
            except GatewayError as e:
                return visit.error(e)
            except ValidationError as e:  # a model built from a form or query
                problems = [
                    FieldProblem(".".join(str(p) for p in err["loc"]) or "form", reason(err))
                    for err in e.errors()
                ]
                return visit.error(ValidationFailed(problems))

        endpoint.__name__ = handler.__name__
        return endpoint

    async def visitor(
        self, request: Request, services: Services
    ) -> tuple[Session, Principal] | None:
        """The request's session and who opened it, or None when it has no valid session."""
        session = self.codec.check(request.cookies.get(SESSION_COOKIE))
        if session is None:
            return None
        try:
            principal = services.auth.authenticate(f"Bearer {session.api_key}")
        except Unauthorized:
            return None  # the key was removed
        if not principal.may(Access.READ):
            return None  # the key lost its scope
        if not await services.sessions.alive(session.api_key, session.session_id):
            return None  # signed out, or ended by an admin
        return session, principal

    def _to_sign_in(self, request: Request) -> Response:
        target = request.url.path
        if request.url.query:
            target += "?" + request.url.query
        if request.headers.get("hx-request"):  # a live refresh: send the whole page there
            target = request.headers.get("hx-current-url") or target
        login = f"{PREFIX}/login?next={quote(safe_next(_path_of(target)), safe='')}"
        if request.headers.get("hx-request"):
            return Response(status_code=401, headers={"HX-Redirect": login})
        return RedirectResponse(login, status_code=303)


def _path_of(url: str) -> str:
    """The path and query of a URL (htmx sends the page's full URL)."""
    if "://" in url:
        rest = url.split("://", 1)[1]
        return "/" + rest.split("/", 1)[1] if "/" in rest else "/"
    return url


@dataclass
class Visit:
    """One request of a signed-in visitor."""

    admin: Admin
    request: Request
    services: Services
    principal: Principal
    session: Session
    form: Form = field(default_factory=Form)

    @property
    def can_change(self) -> bool:
        return self.principal.may(Access.ADMIN)

    @property
    def partial(self) -> bool:
        """Whether htmx asked for the live part of the page only."""
        return bool(self.request.headers.get("hx-request"))

    @property
    def here(self) -> str:
        """This page's path and query: what its live parts poll."""
        url = self.request.url
        return url.path + ("?" + url.query if url.query else "")

    def query(self, name: str) -> str | None:
        """A query parameter; empty counts as absent (a blank filter field)."""
        value = self.request.query_params.get(name, "").strip()
        return value or None

    def path(self, name: str) -> str:
        return str(self.request.path_params[name])

    def number(self, name: str) -> int:
        value = self.query(name)
        return int(value) if value is not None and value.isdigit() and len(value) < 10 else 0

    def notice(self) -> str | None:
        text = NOTICES.get(self.query("notice") or "")
        if text is None:
            return None
        return text.format(
            n=Count(self.number("n")),
            skipped=Count(self.number("skipped")),
            requested=Count(self.number("requested")),
        )

    def render(
        self,
        template: str,
        partial: str | None = None,
        *,
        status: int = 200,
        **context: Any,
    ) -> HTMLResponse:
        """The page, or only its live ``partial`` when htmx asked for it."""
        chosen = partial if partial is not None and self.partial else template
        return self.admin.html(
            self.request,
            chosen,
            {
                "principal": self.principal,
                "can_change": self.can_change,
                "csrf": self.admin.codec.csrf_token(self.session.session_id),
                "notice": self.notice(),
                **context,
            },
            status,
        )

    def redirect(self, url: str) -> Response:
        """After a POST: see the result with a GET (303)."""
        return RedirectResponse(url, status_code=303)

    def error(self, e: GatewayError) -> Response:
        return self.render("error.html", status=e.status, title=e.title, detail=e.detail or e.title)
