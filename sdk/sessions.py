"""The HTTP under the SDK's asyncio side: the producer's :class:`~sdk.client.AsyncClient` and a
worker's callbacks.

Both send through an :class:`AioSession`: one aiohttp ``ClientSession`` per client with a
keep-alive pool, made on first use (aiohttp needs the running loop). aiohttp was chosen by
measurement and by one failure (bench/sdk_client_cost.py, bench/RESULTS.md): httpx's own async
pool (httpcore) can keep a connection marked in use when a request is cancelled while it
connects (encode/httpcore#1093), until no callback finds a free connection; and httpx over the
httpx-aiohttp transport costs a producer about three times aiohttp's CPU per request. aiohttp
gives a cancelled request's connection back (closed) to its pool, which
tests/sdk/test_sdk_callback_cancellation.py checks.

Given an httpx transport (tests mount apps in process with ``httpx.ASGITransport``; a user may
bring a proxy's), a client sends through :class:`HttpxSession` instead. Either way the answer is
an :class:`Answer`, and network failures are httpx's exceptions (``httpx.TransportError`` and
its subclasses), as :mod:`sdk.errors` documents.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Protocol

import aiohttp
import httpx

from sdk.answers import POOL_SIZE, Answer, Params, Reply
from sdk.eager_body import EagerBodyRequest

__all__ = [
    "AioSession",
    "Answer",
    "HttpxSession",
    "Reply",
    "Session",
    "open_session",
    "transport_error",
]


class Session(Protocol):
    """Sends one request and reads its whole answer; ``timeout`` (seconds) bounds getting a
    connection and each read, as httpx's timeouts do."""

    async def request(
        self,
        method: str,
        url: str,
        *,
        params: Params | None = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float,
    ) -> Answer: ...

    async def aclose(self) -> None: ...


class AioSession:
    """aiohttp: one ``ClientSession`` with a keep-alive pool of ``pool_size`` connections."""

    def __init__(self, headers: Mapping[str, str] | None = None, pool_size: int = POOL_SIZE):
        self._headers = dict(headers or {})
        self._pool_size = pool_size
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(limit=self._pool_size)
        # A request's body goes out with its headers, in the same step (sdk.eager_body).
        self._session = aiohttp.ClientSession(
            connector=connector, headers=self._headers, request_class=EagerBodyRequest
        )
        return self._session

    async def request(
        self,
        method: str,
        url: str,
        *,
        params: Params | None = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float,
    ) -> Answer:
        session = self._session or self._open()
        try:
            async with session.request(
                method,
                url,
                params=params,
                data=content,
                headers=headers,
                timeout=_timeout(timeout),
                allow_redirects=False,
            ) as response:
                body = await response.read()
                return Reply(response.status, response.reason or "", body)
        except (aiohttp.ClientError, TimeoutError) as e:
            raise transport_error(e) from e

    @property
    def connections_in_use(self) -> int:
        """Connections lent to requests now (0 when none runs); for tests and diagnostics."""
        if self._session is None:
            return 0
        connector = self._session.connector
        return 0 if connector is None else len(getattr(connector, "_acquired", ()))

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


class HttpxSession:
    """httpx over a given transport: the seam for apps mounted in process and custom
    transports."""

    def __init__(
        self, transport: httpx.AsyncBaseTransport, headers: Mapping[str, str] | None = None
    ):
        self._http = httpx.AsyncClient(transport=transport, headers=headers)

    async def request(
        self,
        method: str,
        url: str,
        *,
        params: Params | None = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float,
    ) -> Answer:
        return await self._http.request(
            method, url, params=params, content=content, headers=headers, timeout=timeout
        )

    async def aclose(self) -> None:
        await self._http.aclose()


@functools.lru_cache(maxsize=64)  # a few values: a client's timeout, plus its long-polls' waits
def _timeout(seconds: float) -> aiohttp.ClientTimeout:
    """httpx's meaning of a timeout: for getting a connection (from the pool, or a new one) and
    for each read; no bound on the whole request."""
    return aiohttp.ClientTimeout(total=None, connect=seconds, sock_read=seconds)


def open_session(
    transport: httpx.AsyncBaseTransport | None, headers: Mapping[str, str] | None = None
) -> Session:
    """An :class:`AioSession`, or an :class:`HttpxSession` over ``transport`` if one is given."""
    if transport is None:
        return AioSession(headers)
    return HttpxSession(transport, headers)


def transport_error(error: aiohttp.ClientError | TimeoutError) -> httpx.TransportError:
    """The httpx exception that stands for an aiohttp failure (the SDK's errors are httpx's)."""
    message = str(error) or type(error).__name__
    if isinstance(error, aiohttp.ConnectionTimeoutError):
        return httpx.ConnectTimeout(message)
    if isinstance(error, TimeoutError):  # aiohttp's socket read timeout included
        return httpx.ReadTimeout(message)
    if isinstance(error, aiohttp.ClientConnectorError):
        return httpx.ConnectError(message)
    if isinstance(error, aiohttp.InvalidURL):
        return httpx.UnsupportedProtocol(message)
    if isinstance(error, aiohttp.ServerDisconnectedError | aiohttp.ClientResponseError):
        return httpx.RemoteProtocolError(message)
    if isinstance(error, aiohttp.ClientPayloadError):
        return httpx.ReadError(message)
    return httpx.NetworkError(message)
