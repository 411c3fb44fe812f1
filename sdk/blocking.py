"""The HTTP under the SDK's blocking :class:`~sdk.client.Client`.

It sends through a :class:`BlockingSession`: the standard library's ``http.client`` on a small
pool of keep-alive connections, taken by one request at a time (threads may share the client).
Chosen by measurement (bench/sdk_client_cost.py, bench/RESULTS.md "Producer (issue 20)"): about
a fifth of httpx's CPU per request and half of urllib3's, with no dependency. A connection comes
back to the pool only after its answer was read whole; any failure or interruption
(``KeyboardInterrupt`` included) closes it instead, so nothing half-read is ever reused and
nothing stays lent out. An idle connection the server has closed meanwhile (its keep-alive ran
out) is noticed before reuse and dropped. HTTPS verifies certificates as httpx does (certifi's
roots, or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``).

Given an httpx transport (tests mount apps or mock routes), or when a proxy is configured in the
environment (``HTTP_PROXY``/``HTTPS_PROXY``, which httpx honours), the client sends through
:class:`HttpxBlockingSession` instead. Either way the answer is a :class:`~sdk.answers.Reply`
(or an ``httpx.Response``), and network failures are httpx's exceptions, as :mod:`sdk.errors`
documents.
"""

from __future__ import annotations

import http.client
import select
import socket
import ssl
import threading
import urllib.request
from collections.abc import Mapping
from typing import Protocol
from urllib.parse import urlencode, urlsplit

import httpx

from sdk.answers import POOL_SIZE, Answer, Params, Reply

__all__ = [
    "BlockingSession",
    "HttpxBlockingSession",
    "SyncSession",
    "blocking_error",
    "open_blocking_session",
]


class SyncSession(Protocol):
    """Sends one request (``path`` relative to the client's URL) and reads its whole answer;
    ``timeout`` (seconds) bounds connecting and each read."""

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Params | None = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float,
    ) -> Answer: ...

    def close(self) -> None: ...


class BlockingSession:
    """``http.client`` connections to one gateway, at most ``pool_size`` kept idle."""

    def __init__(
        self, url: str, headers: Mapping[str, str] | None = None, pool_size: int = POOL_SIZE
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise httpx.UnsupportedProtocol(f"not an http(s) URL: {url!r}")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._prefix = parts.path.rstrip("/")
        self._headers = dict(headers or {})
        self._pool_size = pool_size
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._tls: ssl.SSLContext | None = None

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Params | None = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float,
    ) -> Answer:
        target = self._prefix + path
        if params:
            target += "?" + urlencode(params)
        sent = {**self._headers, **headers} if headers else self._headers
        conn = self._take(timeout)
        connected = conn.sock is not None
        try:
            if not connected:
                conn.connect()
                connected = True
            conn.request(method, target, body=content, headers=sent)
            response = conn.getresponse()
            body = response.read()
        except BaseException as e:  # an interrupted exchange leaves the connection unusable
            conn.close()
            if isinstance(e, OSError | http.client.HTTPException):
                raise blocking_error(e, connected) from e
            raise
        if response.will_close:
            conn.close()
        else:
            self._give(conn)
        return Reply(response.status, response.reason, body)

    def _take(self, timeout: float) -> http.client.HTTPConnection:
        """An idle connection still open, or a new (unconnected) one; set to ``timeout``."""
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                conn = self._new(timeout)
                return conn
            if conn.sock is not None and not _readable(conn.sock):
                conn.timeout = timeout
                conn.sock.settimeout(timeout)
                return conn
            conn.close()  # closed by the server while idle (or it sent something unasked)

    def _new(self, timeout: float) -> http.client.HTTPConnection:
        if self._https:
            if self._tls is None:  # httpx's defaults: certifi's roots, SSL_CERT_FILE/_DIR
                self._tls = httpx.create_ssl_context()
            return http.client.HTTPSConnection(
                self._host, self._port, timeout=timeout, context=self._tls
            )
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _give(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._idle) < self._pool_size:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def _readable(sock: socket.socket) -> bool:
    """Whether an idle connection has something to read: the server's close, as a rule."""
    try:
        ready, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):  # closed meanwhile
        return True
    return bool(ready)


class HttpxBlockingSession:
    """httpx: for a given transport, and where the environment configures a proxy."""

    def __init__(
        self,
        url: str,
        headers: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._http = httpx.Client(base_url=url, headers=headers, transport=transport)

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Params | None = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float,
    ) -> Answer:
        return self._http.request(
            method, path, params=params, content=content, headers=headers, timeout=timeout
        )

    def close(self) -> None:
        self._http.close()


def _proxied(url: str) -> bool:
    """Whether the environment sends requests to ``url`` through a proxy (as httpx reads it)."""
    parts = urlsplit(url)
    proxies = urllib.request.getproxies()
    if not (proxies.get(parts.scheme) or proxies.get("all")):
        return False
    return not urllib.request.proxy_bypass(parts.netloc)


def open_blocking_session(
    url: str, headers: Mapping[str, str] | None, transport: httpx.BaseTransport | None
) -> SyncSession:
    """A :class:`BlockingSession`, or httpx over ``transport`` (or a configured proxy)."""
    if transport is None and not _proxied(url):
        return BlockingSession(url, headers)
    return HttpxBlockingSession(url, headers, transport)


def blocking_error(
    error: OSError | http.client.HTTPException, connected: bool
) -> httpx.TransportError:
    """The httpx exception that stands for an ``http.client`` or socket failure; ``connected``:
    whether the connection was up (a timeout then is a read timeout)."""
    message = str(error) or type(error).__name__
    if isinstance(error, TimeoutError):
        return httpx.ReadTimeout(message) if connected else httpx.ConnectTimeout(message)
    if not connected:
        return httpx.ConnectError(message)
    if isinstance(error, http.client.RemoteDisconnected | ConnectionResetError):
        return httpx.RemoteProtocolError(message)
    if isinstance(error, http.client.HTTPException):
        return httpx.RemoteProtocolError(message)
    if isinstance(error, ConnectionError):
        return httpx.WriteError(message)
    return httpx.NetworkError(message)
