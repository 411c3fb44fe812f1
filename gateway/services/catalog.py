"""The task catalog: what endpoints report they serve, listings, and checking payloads.

For the routes: :meth:`CatalogService.put` (an endpoint reports its tasks again) and
:meth:`CatalogService.page` (``GET /v1/tasks``). For other services: :meth:`encode` (checks a
reported list when an endpoint is registered with one), :meth:`check_enqueue` (every enqueue),
and, for jobs, :meth:`validate` (a payload of one task name) and :meth:`served`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from gateway.caches.catalog import Catalog, CatalogedTask, CatalogView, compile_schema
from gateway.core.errors import DuplicateTaskName, EndpointNotFound, FieldProblem, ValidationFailed
from gateway.store.catalog import CatalogStore
from gateway.store.clock import Clock
from gateway.store.queues import QueueStore
from gateway.store.records import to_datetime
from sdk.wire import (
    CatalogEndpoint,
    CatalogEntry,
    CatalogPage,
    CatalogTask,
    EndpointCatalog,
    EndpointTasks,
    TaskCreate,
)

MAX_LIMIT = 500


def offset_of(cursor: str | None) -> int:
    """A listing's cursor (how many entries came before) as a number; 422 when it is not one
    this API gave out."""
    if cursor is None:
        return 0
    if not cursor.isdigit() or len(cursor) > 9:
        raise ValidationFailed([FieldProblem("cursor", "is not a cursor this API gave out")])
    return int(cursor)


class CatalogService:
    def __init__(
        self,
        catalog: Catalog,
        store: CatalogStore,
        queues: QueueStore,
        clock: Clock,
        *,
        on_change: Callable[[str], None],
    ) -> None:
        self._catalog = catalog
        self._store = store
        self._queues = queues
        self._clock = clock
        self._on_change = on_change

    # --- what endpoints report -----------------------------------------------------------

    def encode(self, tasks: Sequence[CatalogTask], now_ms: int, field: str = "tasks") -> str:
        """The stored form of a reported list; 422 naming each schema that is not a usable
        JSON Schema (``tasks.<i>.schema``), then 409 for a task name listed twice."""
        problems = []
        for i, task in enumerate(tasks):
            try:
                compile_schema(task.payload_schema)
            except ValueError as e:
                problems.append(FieldProblem(f"{field}.{i}.schema", str(e)))
        if problems:
            raise ValidationFailed(problems)
        first: dict[str, int] = {}
        for i, task in enumerate(tasks):
            if task.name in first:
                raise DuplicateTaskName(task.name, f"{field}.{first[task.name]}", f"{field}.{i}")
            first[task.name] = i
        listed = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tasks]
        return json.dumps({"at": now_ms, "tasks": listed}, separators=(",", ":"))

    async def put(self, queue: str, endpoint_id: str, body: EndpointTasks) -> EndpointCatalog:
        """Replace the tasks an endpoint reported (an empty list withdraws them all)."""
        await self._queues.require(queue)
        now = self._clock.now_ms()
        if not await self._store.put(queue, endpoint_id, self.encode(body.tasks, now)):
            raise EndpointNotFound(endpoint_id)
        self._on_change(queue)
        return EndpointCatalog(
            queue=queue, endpoint_id=endpoint_id, tasks=body.tasks, updated_at=to_datetime(now)
        )

    # --- checking payloads ---------------------------------------------------------------

    async def check_enqueue(self, queue: str, specs: Sequence[TaskCreate]) -> None:
        """422 naming every field of a payload that does not fit its cataloged schema
        (``tasks.<i>.payload.<path>``); names nobody reported pass unchecked, and so do tasks
        with ``pass_results`` (the worker completes their arguments with the results)."""
        view = await self._catalog.view(queue)
        if not view.tasks:
            return
        problems: list[FieldProblem] = []
        for i, spec in enumerate(specs):
            task = None if spec.pass_results else view.tasks.get(spec.name)
            if task is not None:
                problems.extend(task.problems(spec.payload, f"tasks.{i}.payload"))
        if problems:
            raise ValidationFailed(problems)

    async def validate(self, queue: str, name: str, payload: Any, field: str = "payload") -> None:
        """Raise ``ValidationFailed`` (fields ``<field>.<path>``) unless ``payload`` fits the
        schema cataloged for ``name`` in ``queue``; a name nobody reported passes."""
        task = (await self._catalog.view(queue)).tasks.get(name)
        if task is not None:
            problems = task.problems(payload, field)
            if problems:
                raise ValidationFailed(problems)

    async def served(self, queue: str, name: str) -> bool:
        """Whether some enabled endpoint of ``queue`` reported that it serves ``name``."""
        task = (await self._catalog.view(queue)).tasks.get(name)
        return task is not None and task.served

    # --- listing -------------------------------------------------------------------------

    async def page(
        self, queue: str | None, name: str | None, cursor: str | None, limit: int
    ) -> CatalogPage:
        """Cataloged names by queue, then name; read afresh (not from the cache)."""
        if queue is not None:
            await self._queues.require(queue)
            queues = [queue]
        else:
            queues = await self._queues.names()
        entries: list[CatalogEntry] = []
        for q in queues:
            view = await self._catalog.fresh(q)
            for task_name in sorted(view.tasks):
                if name is None or task_name == name:
                    entries.append(_entry(q, view.tasks[task_name], view))
        start = offset_of(cursor)
        end = start + limit
        return CatalogPage(
            items=entries[start:end], next_cursor=str(end) if end < len(entries) else None
        )


def _entry(queue: str, task: CatalogedTask, view: CatalogView) -> CatalogEntry:
    endpoints = []
    for endpoint_id in task.endpoints:
        record = view.endpoints.get(endpoint_id)
        if record is not None:
            endpoints.append(
                CatalogEndpoint(id=record.id, url=record.url or None, enabled=record.enabled)
            )
    return CatalogEntry.model_validate(
        {
            "queue": queue,
            "name": task.name,
            "schema": task.schema,
            "description": task.description,
            "endpoints": endpoints,
            "served": task.served,
            "schemas_differ": task.schemas_differ,
            "updated_at": to_datetime(task.updated_ms),
        }
    )
