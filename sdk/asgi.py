"""The ASGI of the worker, without a framework: the types of the protocol, an answer, and the
lifespan protocol.

A worker serves three things (:class:`~sdk.worker.Worker`): POST pushes, the hot path; GET (and
HEAD) of any path, which describes it; and the lifespan. That needs no routing, middleware or
request objects, so no web framework is imported (Starlette's application alone cost a worker's
cold start about as much as the rest of its machinery: bench/RESULTS.md, "Cold start").
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from contextlib import AbstractAsyncContextManager
from typing import Any

__all__ = ["Message", "Receive", "Response", "Scope", "Send", "serve_lifespan"]

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class Response:
    """An answer: ``status``, ``headers`` (plus content-type and content-length, as Starlette's
    ``Response`` adds them) and ``body``, sent as the two ASGI messages."""

    __slots__ = ("body", "raw_headers", "status_code")

    def __init__(
        self,
        status: int,
        body: bytes | str = b"",
        headers: Mapping[str, str] | None = None,
        media_type: str | None = None,
    ) -> None:
        self.status_code = status
        self.body = body.encode() if isinstance(body, str) else body
        raw = [
            (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()
        ]
        if media_type is not None:
            raw.append((b"content-type", media_type.encode("latin-1")))
        if status >= 200 and status not in (204, 304):
            raw.append((b"content-length", str(len(self.body)).encode("latin-1")))
        self.raw_headers = raw

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        await send({"type": "http.response.body", "body": self.body})


async def serve_lifespan(
    lifespan: Callable[[], AbstractAsyncContextManager[None]], receive: Receive, send: Send
) -> None:
    """Run ``lifespan`` through the ASGI lifespan protocol: entered at ``lifespan.startup``,
    left at ``lifespan.shutdown``; a failure is reported to the server (which then stops), as
    Starlette reports it."""
    await receive()  # lifespan.startup
    context = lifespan()
    try:
        await context.__aenter__()
    except BaseException as e:
        log.exception("the worker's lifespan failed to start")
        await send({"type": "lifespan.startup.failed", "message": repr(e)})
        raise
    await send({"type": "lifespan.startup.complete"})
    await receive()  # lifespan.shutdown
    try:
        await context.__aexit__(None, None, None)
    except BaseException as e:
        log.exception("the worker's lifespan failed to end")
        await send({"type": "lifespan.shutdown.failed", "message": repr(e)})
        raise
    await send({"type": "lifespan.shutdown.complete"})
