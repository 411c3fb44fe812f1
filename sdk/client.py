"""Producer and admin clients: :class:`Client` (blocking) and :class:`AsyncClient`.

Both execute the request specs of :mod:`sdk.api`; they differ only in how a request is sent,
which is all this module holds. Their methods come from mixins, a blocking and an asyncio one
for each part of the API: queues and endpoints from :mod:`sdk.client_queues`, tasks from
:mod:`sdk.client_tasks`, the operator methods (dead letters, running and scheduled tasks,
cleaning) from :mod:`sdk.client_ops`, the jobs and runs methods from :mod:`sdk.client_jobs`.
Every error answer raises :class:`~sdk.errors.ApiError`; network failures are httpx's
exceptions. :class:`Client` sends with the standard library's ``http.client`` on a keep-alive
pool (:mod:`sdk.blocking`), :class:`AsyncClient` with aiohttp (:mod:`sdk.sessions` says why).
Concurrent single enqueues may share batch requests (:mod:`sdk.coalescing`; ``linger`` and
``max_batch``).
"""

from __future__ import annotations

import os
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeVar

from sdk import lazy
from sdk.client_events import AsyncEventMethods, EventMethods
from sdk.client_jobs import AsyncJobMethods, JobMethods
from sdk.client_ops import AsyncOperatorMethods, OperatorMethods
from sdk.client_queues import WORKER_BATCH_SIZE as WORKER_BATCH_SIZE
from sdk.client_queues import AsyncQueueMethods, QueueMethods
from sdk.client_tasks import AsyncTaskMethods, TaskMethods
from sdk.errors import JobgateError

if TYPE_CHECKING:
    import httpx

    from sdk import api, coalescing
    from sdk.telemetry import tracing
else:  # loaded on first use, so that `from sdk import Client` stays light (sdk/lazy.py)
    coalescing = lazy.module("sdk.coalescing")
    tracing = lazy.module("sdk.telemetry.tracing")

__all__ = ["AsyncClient", "Client"]

T = TypeVar("T")

DEFAULT_TIMEOUT = 10.0
MAX_BATCH = 100
"""Most single enqueues one coalesced batch request carries (``max_batch``)."""
ENV_URL = "JOBGATE_URL"
ENV_API_KEY = "JOBGATE_API_KEY"


def _env_settings() -> tuple[str, str | None]:
    url = os.environ.get(ENV_URL)
    if not url:
        raise JobgateError(
            f"{ENV_URL} is not set: the gateway's URL, e.g. http://127.0.0.1:8787, "
            "where `jobgate dev` serves"
        )
    return url, os.environ.get(ENV_API_KEY) or None


def _headers(api_key: str | None) -> dict[str, str]:
    headers = {"accept": "application/json", "user-agent": "jobgate-sdk"}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    return headers


def _check_coalescing(linger: float | None, max_batch: int) -> None:
    if linger is not None and not 0 <= linger <= 1:
        raise ValueError(f"linger must be None or 0 to 1 seconds, not {linger!r}")
    if not 1 <= max_batch <= 1000:
        raise ValueError(f"max_batch must be 1 to 1000 (a batch request's limit), not {max_batch}")


class _Base:
    def __init__(
        self, url: str, api_key: str | None, timeout: float, linger: float | None, max_batch: int
    ) -> None:
        _check_coalescing(linger, max_batch)
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.linger = linger
        self.max_batch = max_batch
        self._headers = _headers(api_key)

    @property
    def _coalesces(self) -> bool:
        return self.linger is not None and self.max_batch > 1

    def _request_args(self, call: api.Call[Any]) -> dict[str, Any]:
        headers = (
            tracing.current_headers()
        )  # the caller's span: the parent of what the gateway does
        if call.body is not None:
            headers["content-type"] = "application/json"
        if call.headers:
            headers.update(call.headers)
        return {
            "params": call.params,
            "content": call.content(),
            "headers": headers or None,
            "timeout": self.timeout + call.wait,
        }

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"


class Client(_Base, QueueMethods, TaskMethods, OperatorMethods, JobMethods, EventMethods):
    """A blocking client of the gateway's API.

    ``Client(url, api_key)``, or :meth:`from_env` (``JOBGATE_URL``, ``JOBGATE_API_KEY``).
    ``timeout`` bounds each request; long-polls get their wait on top. Use it as a context
    manager, or call :meth:`close`. It is safe to share between threads; enqueues from several
    threads may share batch requests of up to ``max_batch`` tasks: with ``linger=0`` (the
    default) those that find another enqueue of their queue in flight, sent when it returns;
    with ``linger`` seconds (at most 1) all that come within it of the first; ``linger=None``
    turns that off (:mod:`sdk.coalescing`).
    The operator methods (:meth:`dead_letters`, :meth:`resubmit`, :meth:`scheduled`,
    :meth:`running`, :meth:`clean`) are inherited from
    :class:`~sdk.client_ops.OperatorMethods`; the jobs and runs methods (:meth:`create_job`,
    :meth:`run_job`, :meth:`list_runs`, ...) from :class:`~sdk.client_jobs.JobMethods`; the
    events and triggers methods (:meth:`send_event`, :meth:`put_trigger`, ...) from
    :class:`~sdk.client_events.EventMethods`.
    """

    def __init__(
        self,
        url: str,
        api_key: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
        linger: float | None = 0.0,
        max_batch: int = MAX_BATCH,
    ) -> None:
        # on first use: `import sdk` stays light (docs/architecture.md)
        from sdk.blocking import open_blocking_session

        super().__init__(url, api_key, timeout, linger, max_batch)
        self._http = open_blocking_session(self.url, self._headers, transport)
        self._coalescer = coalescing.BlockingCoalescer(self._send, linger or 0.0, max_batch)

    @classmethod
    def from_env(
        cls,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        linger: float | None = 0.0,
        max_batch: int = MAX_BATCH,
    ) -> Client:
        url, api_key = _env_settings()
        return cls(url, api_key, timeout=timeout, linger=linger, max_batch=max_batch)

    def _send(self, call: api.Call[T]) -> T:
        response = self._http.request(call.method, call.path, **self._request_args(call))
        return call.answer(response)

    def _drive(self, plan: api.Plan[T]) -> T:
        try:
            call = next(plan)
            while True:
                call = plan.send(self._send(call))
        except StopIteration as done:
            result: T = done.value
            return result

    # lifecycle

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class AsyncClient(
    _Base,
    AsyncQueueMethods,
    AsyncTaskMethods,
    AsyncOperatorMethods,
    AsyncJobMethods,
    AsyncEventMethods,
):
    """The asyncio twin of :class:`Client`: the same methods, awaitable.

    It sends over aiohttp (one session and keep-alive pool per client, opened on first use);
    ``transport``, an httpx transport, makes it send through httpx over that instead (tests
    mount an app with ``httpx.ASGITransport``). Concurrent enqueues may share batch requests
    of up to ``max_batch`` tasks, as :class:`Client`'s do (``linger``; :mod:`sdk.coalescing`).
    """

    def __init__(
        self,
        url: str,
        api_key: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx.AsyncBaseTransport | None = None,
        linger: float | None = 0.0,
        max_batch: int = MAX_BATCH,
    ) -> None:
        from sdk.sessions import open_session  # on first use, as in Client

        super().__init__(url, api_key, timeout, linger, max_batch)
        self._http = open_session(transport, self._headers)
        self._coalescer = coalescing.AsyncCoalescer(self._send, linger or 0.0, max_batch)

    @classmethod
    def from_env(
        cls,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        linger: float | None = 0.0,
        max_batch: int = MAX_BATCH,
    ) -> AsyncClient:
        url, api_key = _env_settings()
        return cls(url, api_key, timeout=timeout, linger=linger, max_batch=max_batch)

    async def _send(self, call: api.Call[T]) -> T:
        response = await self._http.request(
            call.method, self.url + call.path, **self._request_args(call)
        )
        return call.answer(response)

    async def _drive(self, plan: api.Plan[T]) -> T:
        try:
            call = next(plan)
            while True:
                call = plan.send(await self._send(call))
        except StopIteration as done:
            result: T = done.value
            return result

    async def aclose(self) -> None:
        await self._coalescer.aclose()
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
