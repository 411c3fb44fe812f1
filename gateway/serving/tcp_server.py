"""The gateway's plain TCP server: uvicorn with httptools, on sockets bound beforehand.

:mod:`gateway.serving.server` chooses it for HTTP/1.1 (``JOBGATE_SERVER=uvicorn``, the default
without TLS) because it costs the gateway about a third less CPU per request than Hypercorn
(bench/RESULTS.md, "HTTP server"); Hypercorn stays for HTTP/2 and HTTP/3 over TLS. Signals are
the caller's (``stopping`` returns once the server should stop), never uvicorn's own handlers,
which would re-raise the signal after a clean shutdown and kill the process with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, cast

import uvicorn
from starlette.types import ASGIApp
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

GRACE_SECONDS = 3.0
"""How long requests in flight may run on once the server is told to stop (Hypercorn's
default grace too): long polls answer at once (``PullWaiters.close``), pushes are not
requests to this server."""


class StartupFailed(Exception):
    """The app's lifespan startup failed; uvicorn has already logged the traceback."""


class _OneWritePerTurn:
    """A connection's transport whose writes of one turn of the event loop go out as one.

    uvicorn writes a response's head and its body separately: two system calls and two TCP
    segments per answer, where one does (a single enqueue went from 258 to 225 µs of the
    gateway's CPU on a loaded machine; bench/RESULTS.md, "Gateway CPU per enqueue"). Writes
    are kept in order and sent at the next turn of the loop; closing sends what is kept
    first. Everything else is the transport's own.
    """

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._kept: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._kept:
            self._loop.call_soon(self._send)
        self._kept.append(bytes(data))

    def _send(self) -> None:
        if self._kept:
            data, self._kept = b"".join(self._kept), []
            if not self._transport.is_closing():  # else the client is gone: nobody to read it
                self._transport.write(data)

    def close(self) -> None:
        self._send()
        self._transport.close()

    def abort(self) -> None:
        self._kept = []
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class _Protocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, but a fragment in the target reaches the app, and the
    writes of one turn of the loop go out as one (:class:`_OneWritePerTurn`).

    httptools' URL parser drops a fragment, so ``PUT /v1/queues/a#b`` would reach the app as
    ``PUT /v1/queues/a``. When the target holds a ``#``, the scope gets it split at its first
    ``?`` as h11-based servers split it, ``#`` kept, and the app refuses it
    (:mod:`gateway.api.target`). Other targets are left as uvicorn made them.
    """

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(cast(asyncio.Transport, _OneWritePerTurn(transport, self.loop)))

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        # The request's ASGI task is made above but first runs when this parser callback
        # returns to the loop, so it sees the scope as changed here.
        if b"#" in self.url and "raw_path" in self.scope:
            raw_path, _, query = self.url.partition(b"?")
            self.scope["raw_path"] = raw_path
            self.scope["query_string"] = query


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # the caller handles SIGINT and SIGTERM (gateway.serving.server._until_signalled)


async def serve_tcp(
    app: ASGIApp,
    sockets: list[socket.socket],
    stopping: Callable[[], Awaitable[None]],
    *,
    keep_alive: float,
    certfile: Path | None = None,
    keyfile: Path | None = None,
) -> None:
    """Serve ``app`` on ``sockets`` (bound and listening) until ``stopping()`` returns, then
    let requests in flight finish for up to :data:`GRACE_SECONDS` and run the lifespan's end.
    Raises :class:`StartupFailed` when the lifespan startup fails."""
    config = uvicorn.Config(
        app,
        loop="none",  # the running loop: the caller chose it (uvloop, gateway.serving.server.run)
        http=_Protocol,  # httptools, a fragment kept
        ws="none",
        lifespan="on",
        log_config=None,  # log through the logging tree the caller set up
        access_log=False,  # the app writes its own (gateway/api/access_log.py)
        proxy_headers=False,  # as Hypercorn: X-Forwarded-* are not trusted by default
        server_header=False,
        timeout_keep_alive=int(keep_alive),
        timeout_graceful_shutdown=int(GRACE_SECONDS),
        ssl_certfile=str(certfile) if certfile else None,
        ssl_keyfile=str(keyfile) if keyfile else None,
    )
    server = _Server(config)

    async def stop_when_told() -> None:
        await stopping()
        server.should_exit = True

    watcher = asyncio.create_task(stop_when_told())
    try:
        await server.serve(sockets=sockets)
    except SystemExit:  # uvicorn's way to say the startup failed
        raise StartupFailed from None
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
