"""The queue and endpoint methods of :class:`~sdk.client.Client` and its asyncio twin.

Queues (create or replace, change, read, list, delete), their endpoints (push and pull
endpoints, SDK workers, leases, signing secrets, the tasks an endpoint serves) and the task
catalog: the calls of :mod:`sdk.api`, as two mixins the clients inherit. A mixin only builds
the call; the client's own ``_send`` (``_drive`` for several requests) executes it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from sdk import lazy

if TYPE_CHECKING:
    from sdk import api, wire
    from sdk import catalog as catalogs
    from sdk.catalog import Described
    from sdk.wire import (
        BatchItem,
        CatalogEntry,
        CatalogTask,
        Endpoint,
        EndpointCatalog,
        EndpointCreate,
        EndpointCreated,
        Queue,
        QueuePolicy,
        QueuePolicyPatch,
    )

else:  # loaded on first use, so that `from sdk import Client` stays light (sdk/lazy.py)
    api = lazy.module("sdk.api")
    catalogs = lazy.module("sdk.catalog")
    wire = lazy.module("sdk.wire")

__all__ = ["AsyncQueueMethods", "QueueMethods"]

T = TypeVar("T")

WORKER_BATCH_SIZE = 32
"""Most tasks one push to an SDK worker carries when :meth:`Client.add_worker` is not told
otherwise. The gateway fills a push only from a backlog: a task that finds the endpoint with
room goes at once, alone, so batching costs an idle queue nothing. Pushes of 32 took about half
the CPU per task of one push each end to end (bench/RESULTS.md)."""


def _policy(policy: QueuePolicy | None, fields: Mapping[str, Any]) -> QueuePolicy:
    if policy is None:
        return wire.QueuePolicy.model_validate(fields)
    return wire.QueuePolicy.model_validate({**policy.model_dump(), **fields}) if fields else policy


def _patch(patch: QueuePolicyPatch | None, fields: Mapping[str, Any]) -> QueuePolicyPatch:
    if patch is None:
        return wire.QueuePolicyPatch.model_validate(fields)
    merged = {**patch.model_dump(exclude_unset=True), **fields}
    return wire.QueuePolicyPatch.model_validate(merged) if fields else patch


def _endpoint(
    url: str | None,
    pull: bool,
    concurrency: int,
    capabilities: list[str] | None,
    batch_size: int,
    tasks: Sequence[CatalogTask] | None,
) -> EndpointCreate:
    return wire.EndpointCreate(
        url=url,
        pull=pull,
        concurrency=concurrency,
        capabilities=capabilities or [],
        batch_size=batch_size,
        tasks=None if tasks is None else list(tasks),
    )


def _worker_endpoint(
    queue: str,
    url: str,
    tasks: Iterable[Described],
    concurrency: int,
    capabilities: list[str] | None,
    batch_size: int,
) -> EndpointCreate:
    return _endpoint(
        url, False, concurrency, capabilities, batch_size, catalogs.catalog(tasks, queue)
    )


class QueueMethods:
    """Queues and their endpoints with a blocking :class:`~sdk.client.Client`."""

    def _send(self, call: api.Call[T]) -> T:
        raise NotImplementedError

    def _drive(self, plan: api.Plan[T]) -> T:
        raise NotImplementedError

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


class AsyncQueueMethods:
    """The asyncio twin of :class:`QueueMethods`, for :class:`~sdk.client.AsyncClient`."""

    async def _send(self, call: api.Call[T]) -> T:
        raise NotImplementedError

    async def _drive(self, plan: api.Plan[T]) -> T:
        raise NotImplementedError

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
