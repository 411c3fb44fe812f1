"""Producer and admin clients: :class:`Client` (blocking) and :class:`AsyncClient`.

Both execute the request specs of :mod:`sdk.api`; they differ only in how a request is sent.
The operator methods (dead letters, running and scheduled tasks, cleaning) come from the mixins
of :mod:`sdk.client_ops`, the jobs and runs methods from those of :mod:`sdk.client_jobs`.
Every error answer raises :class:`~sdk.errors.ApiError`; network failures are httpx's
exceptions. :class:`Client` sends with the standard library's ``http.client`` on a keep-alive
pool (:mod:`sdk.blocking`), :class:`AsyncClient` with aiohttp (:mod:`sdk.sessions` says why).
Concurrent single enqueues may share batch requests (:mod:`sdk.coalescing`; ``linger`` and
``max_batch``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeVar

from pydantic import JsonValue

from sdk import api
from sdk.catalog import Described, catalog
from sdk.client_jobs import AsyncJobMethods, JobMethods
from sdk.client_ops import AsyncOperatorMethods, OperatorMethods
from sdk.coalescing import AsyncCoalescer, BlockingCoalescer
from sdk.errors import JobgateError
from sdk.telemetry.tracing import current_headers
from sdk.wire import (
    BatchItem,
    CatalogEntry,
    CatalogTask,
    Endpoint,
    EndpointCatalog,
    EndpointCreate,
    EndpointCreated,
    LogLine,
    NotifySecret,
    Queue,
    QueuePolicy,
    QueuePolicyPatch,
    Task,
    TaskCreate,
    TaskPage,
    TaskReceipt,
    TaskState,
)

if TYPE_CHECKING:
    import httpx

__all__ = ["AsyncClient", "Client"]

T = TypeVar("T")

DEFAULT_TIMEOUT = 10.0
MAX_BATCH = 100
"""Most single enqueues one coalesced batch request carries (``max_batch``)."""
WORKER_BATCH_SIZE = 32
"""Most tasks one push to an SDK worker carries when :meth:`Client.add_worker` is not told
otherwise. The gateway fills a push only from a backlog: a task that finds the endpoint with
room goes at once, alone, so batching costs an idle queue nothing. Pushes of 32 took about half
the CPU per task of one push each end to end (bench/RESULTS.md)."""
ENV_URL = "JOBGATE_URL"
ENV_API_KEY = "JOBGATE_API_KEY"


def _env_settings() -> tuple[str, str | None]:
    url = os.environ.get(ENV_URL)
    if not url:
        raise JobgateError(f"{ENV_URL} is not set: the gateway's URL, e.g. http://localhost:8080")
    return url, os.environ.get(ENV_API_KEY) or None


def _headers(api_key: str | None) -> dict[str, str]:
    headers = {"accept": "application/json", "user-agent": "jobgate-sdk"}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    return headers


def _policy(policy: QueuePolicy | None, fields: Mapping[str, Any]) -> QueuePolicy:
    if policy is None:
        return QueuePolicy.model_validate(fields)
    return QueuePolicy.model_validate({**policy.model_dump(), **fields}) if fields else policy


def _patch(patch: QueuePolicyPatch | None, fields: Mapping[str, Any]) -> QueuePolicyPatch:
    if patch is None:
        return QueuePolicyPatch.model_validate(fields)
    merged = {**patch.model_dump(exclude_unset=True), **fields}
    return QueuePolicyPatch.model_validate(merged) if fields else patch


def _task(name: str, payload: JsonValue, options: Mapping[str, Any]) -> TaskCreate:
    return TaskCreate.model_validate({"name": name, "payload": payload, **options})


def _endpoint(
    url: str | None,
    pull: bool,
    concurrency: int,
    capabilities: list[str] | None,
    batch_size: int,
    tasks: Sequence[CatalogTask] | None,
) -> EndpointCreate:
    return EndpointCreate(
        url=url,
        pull=pull,
        concurrency=concurrency,
        capabilities=capabilities or [],
        batch_size=batch_size,
        tasks=None if tasks is None else list(tasks),
    )


def _check_coalescing(linger: float | None, max_batch: int) -> None:
    if linger is not None and not 0 <= linger <= 1:
        raise ValueError(f"linger must be None or 0 to 1 seconds, not {linger!r}")
    if not 1 <= max_batch <= 1000:
        raise ValueError(f"max_batch must be 1 to 1000 (a batch request's limit), not {max_batch}")


def _worker_endpoint(
    queue: str,
    url: str,
    tasks: Iterable[Described],
    concurrency: int,
    capabilities: list[str] | None,
    batch_size: int,
) -> EndpointCreate:
    return _endpoint(url, False, concurrency, capabilities, batch_size, catalog(tasks, queue))


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
        headers = current_headers()  # the caller's span: the parent of what the gateway does
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


class Client(_Base, OperatorMethods, JobMethods):
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
    :meth:`run_job`, :meth:`list_runs`, ...) from :class:`~sdk.client_jobs.JobMethods`.
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
        self._coalescer = BlockingCoalescer(self._send, linger or 0.0, max_batch)

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

    # queues

    def put_queue(self, name: str, policy: QueuePolicy | None = None, **fields: Any) -> Queue:
        """Create or replace a queue's policy: ``policy``, with ``fields`` on top of it."""
        return self._send(api.put_queue(name, _policy(policy, fields)))

    def patch_queue(self, name: str, patch: QueuePolicyPatch | None = None, **fields: Any) -> Queue:
        """Change only the given policy fields, e.g. ``patch_queue("q", paused=True)``."""
        return self._send(api.patch_queue(name, _patch(patch, fields)))

    def get_queue(self, name: str) -> Queue:
        return self._send(api.get_queue(name))

    def list_queues(self) -> list[Queue]:
        return self._drive(api.list_queues())

    def delete_queue(self, name: str, *, force: bool = False) -> None:
        """Delete a queue and its tasks; ``force`` also when some are unfinished (lost)."""
        self._send(api.delete_queue(name, force))

    # endpoints

    def add_endpoint(
        self,
        queue: str,
        url: str | None = None,
        concurrency: int = 10,
        capabilities: list[str] | None = None,
        batch_size: int = 1,
        tasks: Sequence[CatalogTask] | None = None,
        *,
        pull: bool = False,
    ) -> EndpointCreated:
        """Register a worker URL; the answer holds its signing secret, shown this once.

        With ``batch_size`` above 1 the endpoint gets every push as a batch of up to that many
        tasks (an SDK :class:`~sdk.worker.Worker` serves both kinds). ``tasks``: the task
        catalog entries it serves (``Worker.catalog(queue)``); enqueues of those names are then
        checked against their schemas. ``pull=True`` (and no ``url``) registers a pull
        endpoint: its workers lease tasks (:meth:`lease`, ``Worker.pull``) instead.
        """
        body = _endpoint(url, pull, concurrency, capabilities, batch_size, tasks)
        return self._send(api.add_endpoint(queue, body))

    def add_worker(
        self,
        queue: str,
        url: str,
        tasks: Iterable[Described],
        concurrency: int = 10,
        capabilities: list[str] | None = None,
        batch_size: int = WORKER_BATCH_SIZE,
    ) -> EndpointCreated:
        """Register an SDK :class:`~sdk.worker.Worker` serving ``tasks`` at ``url`` as an
        endpoint of ``queue``: :meth:`add_endpoint` with the catalog of those of ``tasks`` that
        are ``queue``'s, and pushes of up to ``batch_size`` tasks (``WORKER_BATCH_SIZE``, 32)
        since a Worker takes batches. A backlog is sent in batches; a lone task at once, alone.
        For another kind of service use :meth:`add_endpoint` (one task per push by default)."""
        body = _worker_endpoint(queue, url, tasks, concurrency, capabilities, batch_size)
        return self._send(api.add_endpoint(queue, body))

    def lease(
        self, queue: str, endpoint_id: str, max_tasks: int = 1, wait: float = 30
    ) -> list[BatchItem]:
        """Lease up to ``max_tasks`` tasks for the pull endpoint, waiting up to ``wait`` seconds
        (at most 60) for one; each comes with its lease token and callback URL, as a push."""
        return self._send(api.lease(queue, endpoint_id, max_tasks, wait))

    def rotate_secret(
        self, queue: str, endpoint_id: str, overlap: float = 86_400
    ) -> EndpointCreated:
        """A new signing secret for the endpoint (in the answer, shown this once). For
        ``overlap`` seconds pushes are signed with the previous secret too: give the worker
        the new one meanwhile (``Worker(secret=[new, previous])`` accepts either)."""
        return self._send(api.rotate_secret(queue, endpoint_id, overlap))

    def put_endpoint_tasks(
        self, queue: str, endpoint_id: str, tasks: Sequence[CatalogTask]
    ) -> EndpointCatalog:
        """Report the tasks an endpoint serves (``Worker.catalog(queue)``), replacing the list
        it reported before; the endpoint keeps its id and secret."""
        return self._send(api.put_endpoint_tasks(queue, endpoint_id, tasks))

    def task_catalog(self, queue: str | None = None, name: str | None = None) -> list[CatalogEntry]:
        """The task catalog (``GET /v1/tasks``, every page): each task name endpoints serve,
        with its payload schema and endpoints; of one queue or one name when given."""
        return self._drive(api.task_catalog(queue, name))

    def list_endpoints(self, queue: str) -> list[Endpoint]:
        return self._send(api.list_endpoints(queue))

    def delete_endpoint(self, queue: str, endpoint_id: str) -> None:
        self._send(api.delete_endpoint(queue, endpoint_id))

    # tasks

    def enqueue(
        self,
        queue: str,
        name: str,
        payload: JsonValue = None,
        *,
        wait: float | None = None,
        **options: Any,
    ) -> Task:
        """Enqueue one task; ``options`` are :class:`~sdk.wire.TaskCreate` fields. With
        ``wait`` (seconds, at most 60), the answer comes once the task has finished (with its
        result) or the wait has run out: one request instead of an enqueue and a long poll."""
        return self.enqueue_task(queue, _task(name, payload, options), wait=wait)

    def enqueue_task(self, queue: str, task: TaskCreate, *, wait: float | None = None) -> Task:
        """:meth:`enqueue` of a request built already (``TaskFunction.create``); it may share
        a batch request with other threads' enqueues (not with ``wait``; see the class)."""
        if wait is None and self._coalesces:
            return self._coalescer.enqueue(queue, task)
        return self._send(api.enqueue(queue, task, wait))

    def enqueue_receipt(self, queue: str, task: TaskCreate) -> TaskReceipt:
        """:meth:`enqueue_task` answered with the task's id, state and ``deduplicated`` only
        (``Prefer: return=minimal``): what ``.delay()`` and ``.apply()`` send. It may share a
        batch request with other threads' enqueues, as :meth:`enqueue_task` does."""
        if self._coalesces:
            return self._coalescer.enqueue_receipt(queue, task)
        return self._send(api.enqueue_receipt(queue, task))

    def enqueue_batch(self, queue: str, tasks: list[TaskCreate]) -> list[Task]:
        """Enqueue up to 1000 tasks in one request: all are stored, or none."""
        return self._send(api.enqueue_batch(queue, tasks))

    def enqueue_batch_receipts(self, queue: str, tasks: list[TaskCreate]) -> list[TaskReceipt]:
        """:meth:`enqueue_batch` answered with a :class:`~sdk.wire.TaskReceipt` per task (id,
        state, ``deduplicated``): the gateway writes, and this client reads, about 700 bytes
        less per task."""
        return self._send(api.enqueue_batch_receipts(queue, tasks))

    def get_task(self, task_id: str, wait: float | None = None) -> Task:
        """A task; with ``wait``, the server holds the answer until it finishes (≤ 60 s)."""
        return self._send(api.get_task(task_id, wait))

    def list_tasks(
        self,
        queue: str,
        state: TaskState | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        owner: str | None = None,
    ) -> TaskPage:
        """One page of a queue's tasks in ``state`` (queued by default), of ``owner`` if given;
        pass the page's ``next_cursor`` as ``cursor`` for the next one."""
        return self._send(api.list_tasks(queue, state, limit, cursor, owner))

    def cancel(self, task_id: str) -> Task:
        """Cancel a task: at once if not running, else at its next heartbeat."""
        return self._send(api.cancel(task_id))

    def logs(self, task_id: str) -> list[LogLine]:
        return self._send(api.logs(task_id))

    def notify_secret(self, queue: str) -> str:
        """The secret that signs the queue's completion callbacks (:func:`sdk.verify_notice`)."""
        return self._send(api.notify_secret(queue))

    def rotate_notify_secret(self, queue: str, overlap: float = 86_400) -> NotifySecret:
        """A new secret for the queue's completion callbacks. For ``overlap`` seconds notices
        are signed with the previous secret too: give receivers the new one meanwhile
        (``verify_notice(body, headers, [new, previous])`` accepts either)."""
        return self._send(api.rotate_notify_secret(queue, overlap))

    def wait(self, task_id: str, timeout: float) -> Task:
        """Long-poll until the task has finished; :class:`~sdk.errors.TaskTimeout` if not."""
        return self._drive(api.wait(task_id, timeout))

    # lifecycle

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class AsyncClient(_Base, AsyncOperatorMethods, AsyncJobMethods):
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
        self._coalescer = AsyncCoalescer(self._send, linger or 0.0, max_batch)

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

    async def put_queue(self, name: str, policy: QueuePolicy | None = None, **fields: Any) -> Queue:
        return await self._send(api.put_queue(name, _policy(policy, fields)))

    async def patch_queue(
        self, name: str, patch: QueuePolicyPatch | None = None, **fields: Any
    ) -> Queue:
        return await self._send(api.patch_queue(name, _patch(patch, fields)))

    async def get_queue(self, name: str) -> Queue:
        return await self._send(api.get_queue(name))

    async def list_queues(self) -> list[Queue]:
        return await self._drive(api.list_queues())

    async def delete_queue(self, name: str, *, force: bool = False) -> None:
        """Delete a queue and its tasks; ``force`` also when some are unfinished (lost)."""
        await self._send(api.delete_queue(name, force))

    async def add_endpoint(
        self,
        queue: str,
        url: str | None = None,
        concurrency: int = 10,
        capabilities: list[str] | None = None,
        batch_size: int = 1,
        tasks: Sequence[CatalogTask] | None = None,
        *,
        pull: bool = False,
    ) -> EndpointCreated:
        body = _endpoint(url, pull, concurrency, capabilities, batch_size, tasks)
        return await self._send(api.add_endpoint(queue, body))

    async def add_worker(
        self,
        queue: str,
        url: str,
        tasks: Iterable[Described],
        concurrency: int = 10,
        capabilities: list[str] | None = None,
        batch_size: int = WORKER_BATCH_SIZE,
    ) -> EndpointCreated:
        """Register an SDK worker serving ``tasks`` at ``url``: :meth:`Client.add_worker`."""
        body = _worker_endpoint(queue, url, tasks, concurrency, capabilities, batch_size)
        return await self._send(api.add_endpoint(queue, body))

    async def lease(
        self, queue: str, endpoint_id: str, max_tasks: int = 1, wait: float = 30
    ) -> list[BatchItem]:
        """Lease up to ``max_tasks`` tasks for the pull endpoint, waiting up to ``wait`` seconds
        (at most 60) for one; each comes with its lease token and callback URL, as a push."""
        return await self._send(api.lease(queue, endpoint_id, max_tasks, wait))

    async def rotate_secret(
        self, queue: str, endpoint_id: str, overlap: float = 86_400
    ) -> EndpointCreated:
        return await self._send(api.rotate_secret(queue, endpoint_id, overlap))

    async def put_endpoint_tasks(
        self, queue: str, endpoint_id: str, tasks: Sequence[CatalogTask]
    ) -> EndpointCatalog:
        """Report the tasks an endpoint serves (``Worker.catalog(queue)``), replacing the list
        it reported before; the endpoint keeps its id and secret."""
        return await self._send(api.put_endpoint_tasks(queue, endpoint_id, tasks))

    async def task_catalog(
        self, queue: str | None = None, name: str | None = None
    ) -> list[CatalogEntry]:
        """The task catalog (``GET /v1/tasks``, every page): each task name endpoints serve,
        with its payload schema and endpoints; of one queue or one name when given."""
        return await self._drive(api.task_catalog(queue, name))

    async def list_endpoints(self, queue: str) -> list[Endpoint]:
        return await self._send(api.list_endpoints(queue))

    async def delete_endpoint(self, queue: str, endpoint_id: str) -> None:
        await self._send(api.delete_endpoint(queue, endpoint_id))

    async def enqueue(
        self,
        queue: str,
        name: str,
        payload: JsonValue = None,
        *,
        wait: float | None = None,
        **options: Any,
    ) -> Task:
        return await self.enqueue_task(queue, _task(name, payload, options), wait=wait)

    async def enqueue_task(
        self, queue: str, task: TaskCreate, *, wait: float | None = None
    ) -> Task:
        if wait is None and self._coalesces:
            return await self._coalescer.enqueue(queue, task)
        return await self._send(api.enqueue(queue, task, wait))

    async def enqueue_receipt(self, queue: str, task: TaskCreate) -> TaskReceipt:
        """Like :meth:`Client.enqueue_receipt`."""
        if self._coalesces:
            return await self._coalescer.enqueue_receipt(queue, task)
        return await self._send(api.enqueue_receipt(queue, task))

    async def enqueue_batch(self, queue: str, tasks: list[TaskCreate]) -> list[Task]:
        return await self._send(api.enqueue_batch(queue, tasks))

    async def enqueue_batch_receipts(
        self, queue: str, tasks: list[TaskCreate]
    ) -> list[TaskReceipt]:
        """Like :meth:`Client.enqueue_batch_receipts`."""
        return await self._send(api.enqueue_batch_receipts(queue, tasks))

    async def get_task(self, task_id: str, wait: float | None = None) -> Task:
        return await self._send(api.get_task(task_id, wait))

    async def list_tasks(
        self,
        queue: str,
        state: TaskState | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        owner: str | None = None,
    ) -> TaskPage:
        return await self._send(api.list_tasks(queue, state, limit, cursor, owner))

    async def cancel(self, task_id: str) -> Task:
        return await self._send(api.cancel(task_id))

    async def logs(self, task_id: str) -> list[LogLine]:
        return await self._send(api.logs(task_id))

    async def notify_secret(self, queue: str) -> str:
        return await self._send(api.notify_secret(queue))

    async def rotate_notify_secret(self, queue: str, overlap: float = 86_400) -> NotifySecret:
        return await self._send(api.rotate_notify_secret(queue, overlap))

    async def wait(self, task_id: str, timeout: float) -> Task:
        return await self._drive(api.wait(task_id, timeout))

    async def aclose(self) -> None:
        await self._coalescer.aclose()
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
