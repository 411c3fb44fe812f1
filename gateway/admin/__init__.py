"""The admin web UI at ``/admin``: server-rendered pages (Jinja2) refreshed live with htmx.

:func:`admin_mount` makes the mount the app factory adds to its routes. Pages call the same
services as the JSON API (``request.state.services``), never the store. See ``docs/admin.md``.

Imports api (its problem pages), services, security, settings and core, never the store;
only the app factory imports it.
"""

from __future__ import annotations

from pathlib import Path

from starlette.middleware import Middleware
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from gateway.admin.failures import handlers
from gateway.admin.headers import SecurityHeaders
from gateway.admin.pages import SECTIONS
from gateway.admin.render import environment
from gateway.admin.session import SessionCodec, signing_key
from gateway.admin.web import PREFIX, Admin
from gateway.settings import Settings

STATIC = Path(__file__).parent / "static"


async def _home(request: Request) -> Response:
    return RedirectResponse(f"{PREFIX}/queues", status_code=303)


def session_codec(settings: Settings) -> SessionCodec:
    """The codec of session cookies: the app factory hands it to the mount and to the sessions
    service (which files sessions in Redis by the key fingerprints it makes)."""
    keys = [k.key for k in settings.api_keys]
    secret = settings.session_secret.get_secret_value() if settings.session_secret else None
    return SessionCodec(signing_key(secret, keys), keys, settings.session_ttl)


def admin_mount(settings: Settings, codec: SessionCodec) -> Mount:
    https = bool(settings.certfile) or (settings.public_url or "").startswith("https://")
    admin = Admin(codec, environment(), https=https)
    routes = [
        Route("/", _home, methods=["GET"]),
        Mount("/static", app=StaticFiles(directory=STATIC), name="admin-static"),
    ]
    for section in SECTIONS:
        routes += section(admin)
    # Errors are answered inside the mount, so they get the security headers too.
    middleware = [
        Middleware(SecurityHeaders),
        Middleware(ExceptionMiddleware, handlers=handlers(admin)),
    ]
    return Mount(PREFIX, routes=routes, middleware=middleware)
