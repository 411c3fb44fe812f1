"""The task catalog: what endpoints report they serve, listings, and checking payloads.

For the routes: :meth:`CatalogService.put` (an endpoint reports its tasks again) and
:meth:`CatalogService.page` (``GET /v1/tasks``). For other services: :meth:`encode` (checks a
reported list when an endpoint is registered with one), :meth:`check_enqueue` (every enqueue:
its payloads, and its names when the queue's policy refuses names no endpoint reported), and, for
jobs, :meth:`validate` (a payload of one task name, and the name) and :meth:`served`.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Collection, Sequence
from typing import Any

from gateway.caches.catalog import Catalog, CatalogedTask, CatalogView, compile_schema
from gateway.core.errors import (
    DuplicateTaskName,
    EndpointNotFound,
    FieldProblem,
    UnknownTaskName,
    ValidationFailed,
)
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
    UnknownTasks,
)

MAX_LIMIT = 500
CLOSEST = 3
"""Most cataloged names a refusal of an unknown name suggests."""
CUTOFF = 0.6
"""How alike (:class:`difflib.SequenceMatcher` ratio) a suggested name must be."""
LISTED = 5
"""Most cataloged names a refusal lists when none comes close."""


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

    async def check_enqueue(
        self, queue: str, specs: Sequence[TaskCreate], unknown_tasks: UnknownTasks
    ) -> None:
        """422 naming every field of a payload that does not fit its cataloged schema
        (``tasks.<i>.payload.<path>``); tasks with ``pass_results`` pass (the worker completes
        their arguments with the results). A name nobody reported passes when the queue's
        policy accepts unknown names or nothing is cataloged; else it is refused
        (:class:`UnknownTaskName`, ``tasks.<i>.name``, with the closest cataloged names)."""
        view = await self._catalog.view(queue)
        if not view.tasks:
            return
        refuse = unknown_tasks is UnknownTasks.REFUSE
        problems: list[FieldProblem] = []
        unknown = False
        for i, spec in enumerate(specs):
            task = view.tasks.get(spec.name)
            if task is None:
                if refuse:
                    problems.append(unknown_name(queue, spec.name, f"tasks.{i}.name", view.tasks))
                    unknown = True
            elif not spec.pass_results:
                problems.extend(task.problems(spec.payload, f"tasks.{i}.payload"))
        if unknown:
            raise UnknownTaskName(problems, refusing(queue))
        if problems:
            raise ValidationFailed(problems)

    async def validate(
        self,
        queue: str,
        name: str,
        payload: Any,
        field: str = "payload",
        *,
        unknown_tasks: UnknownTasks = UnknownTasks.ACCEPT,
        name_field: str = "name",
    ) -> None:
        """Raise ``ValidationFailed`` (fields ``<field>.<path>``) unless ``payload`` fits the
        schema cataloged for ``name`` in ``queue``. A name nobody reported passes, unless
        ``unknown_tasks`` refuses it while the queue's catalog holds other names
        (:class:`UnknownTaskName`, field ``name_field``), as :meth:`check_enqueue` does."""
        view = await self._catalog.view(queue)
        task = view.tasks.get(name)
        if task is None:
            if view.tasks and unknown_tasks is UnknownTasks.REFUSE:
                problem = unknown_name(queue, name, name_field, view.tasks)
                raise UnknownTaskName([problem], refusing(queue))
            return
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


def closest(name: str, names: Collection[str], count: int = CLOSEST) -> list[str]:
    """The cataloged names most like ``name``, best first, by :mod:`difflib`'s ratio (as
    :func:`difflib.get_close_matches`, from :data:`CUTOFF`). Dotted names are compared by their
    last part when ``name`` has no module part or the same one, so a shared ``tasks.`` does not
    make every name look alike, and a bare function name (``greet``, a common slip for the
    SDK's ``module.function`` names) finds ``tasks.greet``; case does not count."""
    lowered = name.lower()
    prefix, _, tail = lowered.rpartition(".")
    scored: list[tuple[float, str]] = []
    for known in names:
        other = known.lower()
        other_prefix, _, other_tail = other.rpartition(".")
        if not prefix or prefix == other_prefix:
            matcher = difflib.SequenceMatcher(None, tail, other_tail)
        else:
            matcher = difflib.SequenceMatcher(None, lowered, other)
        if matcher.real_quick_ratio() >= CUTOFF and matcher.quick_ratio() >= CUTOFF:
            ratio = matcher.ratio()
            if ratio >= CUTOFF:
                scored.append((-ratio, known))
    return [known for _, known in sorted(scored)[:count]]


def unknown_name(queue: str, name: str, field: str, names: Collection[str]) -> FieldProblem:
    """The problem of a task name no endpoint of ``queue`` reported, which names the closest
    reported ones, or some of them when none comes close."""
    reason = f"no endpoint of queue '{queue}' reported a task named '{name}'"
    near = closest(name, names)
    if near:
        return FieldProblem(field, f"{reason}; did you mean {' or '.join(map(_quoted, near))}?")
    listed = ", ".join(map(_quoted, sorted(names)[:LISTED]))
    more = f" and {len(names) - LISTED} more" if len(names) > LISTED else ""
    return FieldProblem(
        field, f"{reason}; they reported {listed}{more} (GET /v1/tasks?queue={queue})"
    )


def refusing(queue: str) -> str:
    """The detail of an :class:`UnknownTaskName` refusal."""
    return (
        f"queue '{queue}' refuses task names no endpoint of it reported (its policy's "
        "unknown_tasks is 'refuse'; 'accept' lets them through)"
    )


def _quoted(name: str) -> str:
    return f"'{name}'"
