"""Run the gateway under uvicorn or Hypercorn, on uvloop.

::

    serve(Settings())                          # blocks; Ctrl-C or SIGTERM stops it gracefully
    await serve_async(settings, shutdown=ev)   # in a running loop; returns once ``ev`` is set

The gateway listens on ``host:port`` over TCP. Without TLS it is served by uvicorn with
httptools (HTTP/1.1; :mod:`gateway.serving.tcp_server`), the cheapest per request. When ``certfile``
and ``keyfile`` are set it serves TLS only, under Hypercorn: HTTP/1.1 and HTTP/2 (ALPN) on TCP,
and HTTP/3 over QUIC (aioquic) on UDP ``quic_port`` (the TCP port number when unset); Hypercorn
then adds an ``alt-svc: h3=":<udp port>"; ma=3600`` header to every response so clients can
switch. ``JOBGATE_SERVER`` overrides the choice (Hypercorn without TLS serves h2c too; uvicorn
with TLS serves HTTPS/1.1 and no HTTP/3).

The sockets are bound before the app starts, so a port in use fails at once with a
:class:`ServerError` instead of after the app has connected to Redis, and port ``0`` (a free
port) is resolved before the app is built, so its callback URL names the real port.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import ssl
import sys
import threading
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar, cast

from hypercorn.app_wrappers import ASGIWrapper
from hypercorn.asyncio.run import worker_serve
from hypercorn.config import Config, Sockets
from hypercorn.typing import ASGIFramework
from hypercorn.utils import LifespanFailureError, LifespanTimeoutError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.app import create_app
from gateway.serving import gc_tuning
from gateway.serving.tcp_server import StartupFailed, serve_tcp
from gateway.settings import Settings
from sdk.wire.base import build_models

__all__ = ["Listening", "ServerError", "configure_logging", "run", "serve", "serve_async"]

T = TypeVar("T")

log = logging.getLogger(__name__)

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_LOG_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"
_WILDCARD_HOSTS = ("", "0.0.0.0", "::")
KEEP_ALIVE_TIMEOUT = 75.0
"""Seconds an idle keep-alive connection stays open (above the usual 60 s of load balancers)."""


class ServerError(Exception):
    """The gateway could not run: a port in use, a bad certificate, the app's lifespan failed."""


@dataclass(frozen=True)
class Listening:
    """Where a started gateway can be reached."""

    url: str
    """Base URL over TCP, e.g. ``http://127.0.0.1:8787``."""
    quic_port: int | None
    """UDP port of HTTP/3, or ``None`` without TLS."""


def configure_logging(level: str) -> None:
    """Send every log record at ``level`` or above to stderr (for the process's entry point)."""
    value = _log_level(level)
    logging.basicConfig(level=value, format=_LOG_FORMAT)
    # APScheduler logs each run of every job at INFO: several lines a second from the recoverer.
    logging.getLogger("apscheduler").setLevel(max(value, logging.WARNING))


def serve(settings: Settings) -> None:
    """Run the gateway until SIGINT or SIGTERM, then shut it down gracefully."""
    configure_logging(settings.log_level)
    gc_tuning.tune(settings.gc_threshold)
    run(serve_async(settings, on_ready=lambda _listening: gc_tuning.freeze_startup()))


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on uvloop where it is installed (Linux and macOS): the gateway spends
    less CPU per request and per push on it (bench/RESULTS.md, "HTTP server")."""
    if sys.platform != "win32":
        try:
            import uvloop
        except ImportError:  # pragma: no cover - uvloop comes with uvicorn[standard]
            pass
        else:
            return uvloop.run(main)
    return asyncio.run(main)


async def serve_async(
    settings: Settings,
    shutdown: asyncio.Event | None = None,
    *,
    on_ready: Callable[[Listening], None] | None = None,
) -> None:
    """Serve the gateway until ``shutdown`` is set (or, when ``None``, until SIGINT/SIGTERM).

    ``on_ready`` is called once the app has started (Redis connected, loops running) and the
    sockets accept connections. Raises :class:`ServerError` when the server cannot start.
    """
    config = _hypercorn_config(settings)
    sockets = _bind(config)
    app: _StartupSignal | None = None
    try:
        bound = settings.model_copy(update={"port": _tcp_port(sockets)})
        listening = Listening(_base_url(bound), _quic_port(sockets))
        gateway = create_app(bound)
        build_models()  # before the startup heap is frozen, not at each model's first request
        app = _StartupSignal(gateway, partial(on_ready, listening) if on_ready else None)
        with _until_signalled(shutdown) as stop:

            async def stopping() -> None:
                await stop.wait()
                # Pull long polls answer now with what they have, rather than be cut off when
                # the server's grace for requests in flight runs out.
                gateway.state.pull_waiters.close()

            if _server_of(settings) == "uvicorn":
                await serve_tcp(
                    app,
                    [*sockets.secure_sockets, *sockets.insecure_sockets],
                    stopping,
                    keep_alive=KEEP_ALIVE_TIMEOUT,
                    certfile=settings.certfile,
                    keyfile=settings.keyfile,
                )
                if app.failure is not None:
                    raise ServerError(f"the gateway could not shut down cleanly: {app.failure}")
            else:
                # Starlette's ASGI types are looser than Hypercorn's TypedDicts; same protocol.
                wrapped = ASGIWrapper(cast(ASGIFramework, app))
                # hypercorn.asyncio.serve(), with the sockets bound above (as its run() does).
                await worker_serve(wrapped, config, sockets=sockets, shutdown_trigger=stopping)
    except StartupFailed:
        assert app is not None
        raise ServerError(
            f"the gateway could not start: {app.failure or 'unknown error'}"
        ) from None
    except (LifespanFailureError, LifespanTimeoutError) as e:
        doing = "shut down cleanly" if app is not None and app.started else "start"
        raise ServerError(f"the gateway could not {doing}: {_reason(e)}") from None
    finally:
        # Once serving, the sockets are Hypercorn's: its servers close the TCP ones, and its QUIC
        # endpoints keep theirs (closing one under a live transport would confuse the loop).
        if app is None or not app.started:
            for sock in (*sockets.secure_sockets, *sockets.insecure_sockets, *sockets.quic_sockets):
                sock.close()


def _log_level(level: str) -> int:
    value = logging.getLevelName(level.upper())
    if not isinstance(value, int):
        raise ServerError(f"unknown log level {level!r}: use debug, info, warning or error")
    return value


def _server_of(settings: Settings) -> str:
    """``uvicorn`` or ``hypercorn``: what ``JOBGATE_SERVER`` says, or for ``auto`` uvicorn on
    plain TCP and Hypercorn with TLS (for HTTP/2 and HTTP/3)."""
    if settings.server != "auto":
        return settings.server
    return "hypercorn" if settings.certfile is not None else "uvicorn"


def _hypercorn_config(settings: Settings) -> Config:
    config = Config()
    config.bind = [_address(settings.host, settings.port)]
    # Log through the logging tree (see configure_logging), not handlers of Hypercorn's own.
    config.errorlog = logging.getLogger("hypercorn.error")
    # The app writes its own access log when asked to (gateway/api/access_log.py).
    config.accesslog = None
    # Hypercorn closes a connection after 1,000 requests by default, and over HTTP/2 it does so
    # with streams still in flight, which clients see as failed requests (bench/RESULTS.md).
    config.keep_alive_max_requests = 1_000_000
    # Hypercorn closes an idle connection after 5 s, as long as httpx keeps one in its pool: a
    # request sent as the server closes it fails ("Server disconnected"). Servers should outlast
    # their clients' and load balancers' idle timeouts (60 s for most of them), so idle
    # connections are closed by the client side.
    config.keep_alive_timeout = KEEP_ALIVE_TIMEOUT
    if (settings.certfile is None) != (settings.keyfile is None):
        raise ServerError("TLS needs both JOBGATE_CERTFILE and JOBGATE_KEYFILE")
    if settings.certfile is not None and settings.keyfile is not None:
        config.certfile = str(settings.certfile)
        config.keyfile = str(settings.keyfile)
        if _server_of(settings) == "hypercorn":
            quic_port = settings.port if settings.quic_port is None else settings.quic_port
            config.quic_bind = [_address(settings.host, quic_port)]
        _check_tls(config)
    return config


def _check_tls(config: Config) -> None:
    try:
        config.create_ssl_context()
    except (OSError, ssl.SSLError) as e:
        raise ServerError(f"cannot load the TLS certificate or key: {e}") from None


def _bind(config: Config) -> Sockets:
    """Bind (and listen on) every socket; connections made before the app is up wait."""
    try:
        _try_binds(config.bind, socket.SOCK_STREAM)
        _try_binds(config.quic_bind, socket.SOCK_DGRAM)
        sockets = config.create_sockets()
    except OSError as e:
        binds = ", ".join(config.bind + config.quic_bind)
        raise ServerError(f"cannot listen on {binds}: {e.strerror or e}") from None
    for sock in (*sockets.secure_sockets, *sockets.insecure_sockets):
        sock.listen(config.backlog)
    return sockets


def _try_binds(binds: list[str], kind: int) -> None:
    """Raise the ``OSError`` binding would (a port in use, an unknown address), with the socket
    closed: Hypercorn's ``create_sockets`` leaves its socket open when its bind fails."""
    for bind in binds:
        host, _, port = bind.replace("[", "").replace("]", "").rpartition(":")
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, kind) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, int(port)))


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _tcp_port(sockets: Sockets) -> int:
    port: int = (sockets.secure_sockets or sockets.insecure_sockets)[0].getsockname()[1]
    return port


def _quic_port(sockets: Sockets) -> int | None:
    if not sockets.quic_sockets:
        return None
    port: int = sockets.quic_sockets[0].getsockname()[1]
    return port


def _base_url(settings: Settings) -> str:
    scheme = "https" if settings.certfile else "http"
    host = "localhost" if settings.host in _WILDCARD_HOSTS else settings.host
    return f"{scheme}://{_address(host, settings.port)}"


@contextmanager
def _until_signalled(shutdown: asyncio.Event | None) -> Iterator[asyncio.Event]:
    """``shutdown``, or when ``None`` an event set by SIGINT/SIGTERM while the block runs."""
    if shutdown is not None:
        yield shutdown
        return
    stop = asyncio.Event()
    if threading.current_thread() is not threading.main_thread():  # no signals here
        yield stop
        return

    def on_signal() -> None:
        if stop.is_set():
            log.warning("already shutting down: waiting for requests in flight to finish")
        stop.set()

    loop = asyncio.get_running_loop()
    for sig in _SIGNALS:
        loop.add_signal_handler(sig, on_signal)
    try:
        yield stop
    finally:
        for sig in _SIGNALS:
            loop.remove_signal_handler(sig)


def _reason(error: LifespanFailureError | LifespanTimeoutError) -> str:
    if isinstance(error, LifespanTimeoutError):
        return "the app's lifespan timed out"
    # Starlette reports a failed lifespan from inside its ``except`` block, so the app's own
    # exception is the context of Hypercorn's; its message only holds the formatted traceback.
    cause = error.__context__
    if cause is not None:
        return f"{type(cause).__name__}: {cause}".splitlines()[0]
    lines = [line for line in str(error).splitlines() if line.strip()]
    return lines[-1].strip(" '\"") if lines else "unknown error"


class _StartupSignal:
    """Wraps an ASGI app; calls ``on_startup`` once its lifespan startup has completed, and
    keeps why its lifespan failed (``failure``: the exception's type and first line)."""

    def __init__(self, app: ASGIApp, on_startup: Callable[[], None] | None) -> None:
        self._app = app
        self._on_startup = on_startup
        self.started = False
        self.failure: str | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self._app(scope, receive, send)
            return

        async def watch(message: Message) -> None:
            await send(message)
            if message["type"] == "lifespan.startup.complete":
                self.started = True
                if self._on_startup is not None:
                    self._on_startup()

        try:
            await self._app(scope, receive, watch)
        except Exception as e:
            self.failure = f"{type(e).__name__}: {e}".splitlines()[0]
            raise
