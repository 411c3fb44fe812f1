"""Queues and endpoints: registration, policy changes, listing."""

from __future__ import annotations

import asyncio
import base64
import bisect
import secrets
from collections.abc import Callable

from ulid import ULID

from gateway.core.errors import EndpointNotFound, FieldProblem, ValidationFailed
from gateway.security.ssrf import check_endpoint_url
from gateway.services.catalog import CatalogService
from gateway.store.clock import Clock
from gateway.store.endpoint_records import EndpointRecord, StoredQueue
from gateway.store.queues import QueueStore
from gateway.store.records import to_datetime
from gateway.store.tasks import TaskStore
from sdk.wire import (
    Endpoint,
    EndpointCreate,
    EndpointCreated,
    EndpointList,
    EndpointPatch,
    Queue,
    QueueList,
    QueuePolicy,
    QueuePolicyPatch,
    SecretRotation,
)

DISABLED_BY_ADMIN = "disabled by an admin"


def new_signing_secret() -> str:
    """A Standard Webhooks secret: ``whsec_`` and 32 random bytes in base64."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


def overlap_end_ms(spec: SecretRotation, now_ms: int) -> int | None:
    """Until when a rotated secret's predecessor still signs; None for no overlap (dropped at
    once, not kept until ``now_ms``: another gateway's clock may lag a little behind)."""
    overlap_ms = round(spec.overlap * 1000)
    return now_ms + overlap_ms if overlap_ms > 0 else None


class QueueService:
    def __init__(
        self,
        queues: QueueStore,
        tasks: TaskStore,
        clock: Clock,
        *,
        allow_private_endpoints: bool,
        on_change: Callable[[str], None],
        catalog: CatalogService | None = None,
    ) -> None:
        self._catalog = catalog
        self._queues = queues
        self._tasks = tasks
        self._clock = clock
        self._allow_private = allow_private_endpoints
        self._on_change = on_change

    async def _view(self, stored: StoredQueue) -> Queue:
        endpoints = await self._queues.endpoints(stored.name)
        covered = {c for e in endpoints if e.record.enabled for c in e.record.capabilities}
        return Queue(
            name=stored.name,
            policy=stored.policy,
            created_at=to_datetime(stored.created_ms),
            counts=await self._tasks.counts(stored.name),
            unroutable=await self._tasks.unroutable(stored.name, covered),
        )

    async def put(self, name: str, policy: QueuePolicy) -> tuple[Queue, bool]:
        stored, created = await self._queues.put(name, policy, self._clock.now_ms())
        self._on_change(name)
        return await self._view(stored), created

    async def patch(self, name: str, patch: QueuePolicyPatch) -> Queue:
        # Only the fields given change, but each one given is stored whole, with its defaults:
        # {"circuit_breaker": {"open_for": 10}} stores failures and max_open_for too, which the
        # scripts read (exclude_unset would drop them, as it works at every depth).
        dumped = patch.model_dump(mode="json", exclude_none=True)
        fields = {k: v for k, v in dumped.items() if k in patch.model_fields_set}
        for field in ("rate_limit", "key_rate_limit", "key_concurrency", "redrive"):
            if fields.pop(f"remove_{field}", False):
                if field in fields:
                    raise ValidationFailed(
                        [FieldProblem(f"remove_{field}", f"cannot be given with {field}")]
                    )
                fields[field] = None
        stored = await self._queues.patch(name, fields, self._clock.now_ms())
        self._on_change(name)
        return await self._view(stored)

    async def get(self, name: str) -> Queue:
        return await self._view(await self._queues.require(name))

    async def list(self, *, limit: int, after: str | None = None) -> QueueList:
        """A page of queues in name order, those after ``after``: their policies in one round
        trip, then each one's counts and endpoints, the page's queues side by side."""
        names = await self._queues.names()
        start = bisect.bisect_right(names, after) if after is not None else 0
        page = names[start : start + limit]
        views = await asyncio.gather(*map(self._view, await self._queues.stored(page)))
        more = start + limit < len(names)
        return QueueList(items=list(views), next_cursor=page[-1] if more and page else None)

    async def delete(self, name: str, *, force: bool) -> None:
        task_ids = await self._queues.delete(name, force=force)
        await self._tasks.forget(name, task_ids)
        self._on_change(name)

    async def add_endpoint(self, queue: str, spec: EndpointCreate) -> EndpointCreated:
        await self._queues.require(queue)
        if spec.pull:
            if spec.url is not None:
                raise ValidationFailed([FieldProblem("url", "a pull endpoint has no url")])
        elif spec.url is None:
            raise ValidationFailed([FieldProblem("url", "is required unless pull is true")])
        else:
            try:
                await check_endpoint_url(spec.url, self._allow_private)
            except ValueError as e:
                raise ValidationFailed([FieldProblem("url", str(e))]) from e
        now = self._clock.now_ms()
        catalog = None
        if spec.tasks is not None and self._catalog is not None:
            catalog = self._catalog.encode(spec.tasks, now)
        secret = new_signing_secret()
        record = EndpointRecord(
            id=f"ep_{ULID()}",
            queue=queue,
            url=spec.url or "",
            pull=spec.pull,
            concurrency=spec.concurrency,
            capabilities=spec.capabilities,
            batch_size=spec.batch_size,
            secrets=[secret],
            created_ms=now,
        )
        await self._queues.add_endpoint(record, catalog)
        self._on_change(queue)
        return EndpointCreated(**record.to_wire().model_dump(), secret=secret)

    async def endpoints(self, queue: str) -> EndpointList:
        await self._queues.require(queue)
        found = await self._queues.endpoints(queue)
        now = self._clock.now_ms()
        return EndpointList(items=[e.record.to_wire(e.in_flight, e.health, now) for e in found])

    async def rotate_secret(
        self, queue: str, endpoint_id: str, spec: SecretRotation
    ) -> EndpointCreated:
        """A new signing secret for the endpoint, shown once; pushes carry signatures of both
        the new and the previous secret for ``spec.overlap`` seconds."""
        await self._queues.require(queue)
        secret = new_signing_secret()
        until = overlap_end_ms(spec, self._clock.now_ms())
        if not await self._queues.rotate_secret(queue, endpoint_id, secret, until):
            raise EndpointNotFound(endpoint_id)
        self._on_change(queue)
        wire = await self._endpoint(queue, endpoint_id)
        return EndpointCreated(**wire.model_dump(), secret=secret)

    async def set_enabled(self, queue: str, endpoint_id: str, patch: EndpointPatch) -> Endpoint:
        """Enable or disable an endpoint; a disabled one gets no new tasks."""
        await self._queues.require(queue)
        reason = None if patch.enabled else DISABLED_BY_ADMIN
        if not await self._queues.set_enabled(queue, endpoint_id, patch.enabled, reason):
            raise EndpointNotFound(endpoint_id)
        self._on_change(queue)
        return await self._endpoint(queue, endpoint_id)

    async def _endpoint(self, queue: str, endpoint_id: str) -> Endpoint:
        now = self._clock.now_ms()
        for found in await self._queues.endpoints(queue):
            if found.record.id == endpoint_id:
                return found.record.to_wire(found.in_flight, found.health, now)
        raise EndpointNotFound(endpoint_id)  # deleted meanwhile

    async def delete_endpoint(self, queue: str, endpoint_id: str) -> None:
        await self._queues.require(queue)
        if not await self._queues.delete_endpoint(queue, endpoint_id):
            raise EndpointNotFound(endpoint_id)
        self._on_change(queue)
