"""A request target with a fragment (``#``) is refused: 400, for every route.

A client never sends a fragment (RFC 9112, section 3.2: a target is a path and a query), and a
server that quietly drops one would act on another resource than the one written:
``PUT /v1/queues/a#b`` would create queue ``a``. Servers hand a target to the app differently:
h11-based ones (Hypercorn) split it at its first ``?`` and keep a ``#`` in ``raw_path`` or
``query_string``; uvicorn's httptools parser drops the fragment, so the gateway's uvicorn
protocol (:mod:`gateway.serving.tcp_server`) hands it over the same way as h11. A ``#`` a client
meant as a character travels percent-encoded (``%23``) and is not refused here.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.api.problems import gateway_problem
from gateway.core.errors import InvalidRequest

FRAGMENT = b"#"


def has_fragment(scope: Scope) -> bool:
    """Whether the request target, as the server handed it, holds a ``#``."""
    return FRAGMENT in (scope.get("raw_path") or b"") or FRAGMENT in scope["query_string"]


class RefuseFragments:
    """ASGI middleware: a request whose target holds a ``#`` gets a 400 problem document."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and has_fragment(scope):
            refusal = InvalidRequest(
                "the request target holds a '#' (a fragment, which a request never carries); "
                "percent-encode it as %23 if it is part of a name"
            )
            await gateway_problem(refusal)(scope, receive, send)
            return
        await self._app(scope, receive, send)
