"""Triggers: defining them (``/v1/triggers``), and the consumer that starts their tasks.

A trigger names an event, a queue, a task name and an optional filter. For each accepted
event of its name whose data matches the filter, :class:`TriggerStarts` enqueues one task,
whose id is derived from the event and the trigger (:func:`trigger_task_id`): a second try, by
this gateway, another or the recoverer, is the enqueue of an id that exists, a no-op, so each
(event, trigger) makes exactly one task, on one Redis or across a Cluster's slots.

The task's payload is ``{"kwargs": {"event": {"id", "name", "data"}}}``: an SDK ``@task``
function takes the event as its keyword argument ``event``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from pydantic import JsonValue

from gateway.caches.triggers import TriggerCache
from gateway.core.errors import GatewayError, QueueNotFound, TaskExists, TriggerNotFound
from gateway.core.ids import derived_id
from gateway.services.event_types import AcceptedEvent, Touched
from gateway.services.tasks import TaskService
from gateway.store.clock import Clock
from gateway.store.queues import QueueStore
from gateway.store.triggers import TriggerStore, trigger_view
from sdk.wire import TaskCreate, Trigger, TriggerCreate, TriggerList

log = logging.getLogger(__name__)


def trigger_task_id(event: AcceptedEvent, trigger_id: str) -> str:
    """The id of the task ``trigger_id`` starts for ``event``: a ULID whose time is the
    event's accepted ms and whose random bits are the first 80 of
    sha256(event id + "\\n" + trigger id)."""
    return derived_id(event.accepted_ms, event.id, trigger_id)


def event_payload(event: AcceptedEvent) -> dict[str, JsonValue]:
    """The payload of a trigger's task: the event as the keyword argument ``event``."""
    return {"kwargs": {"event": {"id": event.id, "name": event.name, "data": event.data}}}


def canonical(value: JsonValue) -> str:
    """A JSON value as one text per value: keys sorted, a whole float written as the integer
    it is (1.0 and 1 are the same JSON number)."""

    def whole(v: Any) -> Any:
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, dict):
            return {k: whole(x) for k, x in v.items()}
        if isinstance(v, list):
            return [whole(x) for x in v]
        return v

    return json.dumps(whole(value), sort_keys=True, separators=(",", ":"))


def matches(filter: dict[str, JsonValue], data: dict[str, JsonValue]) -> bool:
    """Whether ``data`` has each of the filter's top-level fields, equal to the filter's."""
    return all(key in data and canonical(data[key]) == canonical(v) for key, v in filter.items())


class TriggerService:
    """Defining, reading and deleting triggers (admin)."""

    def __init__(
        self, store: TriggerStore, cache: TriggerCache, queues: QueueStore, clock: Clock
    ) -> None:
        self._store = store
        self._cache = cache
        self._queues = queues
        self._clock = clock

    async def put(self, trigger_id: str, spec: TriggerCreate) -> tuple[Trigger, bool]:
        """Create or replace the trigger; returns it and whether it is new. Its queue must be
        registered (404 otherwise)."""
        if await self._queues.get(spec.queue) is None:
            raise QueueNotFound(spec.queue)
        now = self._clock.now_ms()
        before = await self._store.get(trigger_id)
        definition = {
            **spec.model_dump(mode="json"),
            "created_ms": now if before is None else before["created_ms"],
            "updated_ms": now,
        }
        await self._store.put(trigger_id, definition)
        self._cache.forget()
        return trigger_view(trigger_id, definition), before is None

    async def get(self, trigger_id: str) -> Trigger:
        found = await self._store.get(trigger_id)
        if found is None:
            raise TriggerNotFound(trigger_id)
        return trigger_view(trigger_id, found)

    async def list(self) -> TriggerList:
        found = await self._store.all()
        return TriggerList(items=[trigger_view(i, d) for i, d in sorted(found.items())])

    async def delete(self, trigger_id: str) -> None:
        if not await self._store.delete(trigger_id):
            raise TriggerNotFound(trigger_id)
        self._cache.forget()


class TriggerStarts:
    """The consumer that starts each matching trigger's task for an event (idempotent: the
    task ids are derived, so a second call finds the tasks of the first)."""

    def __init__(self, triggers: TriggerCache, tasks: TaskService) -> None:
        self._triggers = triggers
        self._tasks = tasks

    async def consume(self, event: AcceptedEvent) -> list[Touched]:
        wanted = [
            t for t in await self._triggers.for_event(event.name) if matches(t.filter, event.data)
        ]
        started = await asyncio.gather(*(self._start(event, t) for t in wanted))
        return [touched for touched in started if touched is not None]

    async def _start(self, event: AcceptedEvent, trigger: Trigger) -> Touched | None:
        """Enqueue the trigger's task; None when the gateway refuses it for good (its queue is
        gone, the task catalog refuses its payload: a 4xx), which is logged and not tried
        again. Anything else (Redis unreachable) raises: the event stays pending, and its
        repeat or the recoverer tries again."""
        task_id = trigger_task_id(event, trigger.id)
        spec = TaskCreate(
            id=task_id, name=trigger.task, payload=event_payload(event), priority=trigger.priority
        )
        try:
            await self._tasks.enqueue(trigger.queue, [spec], batch=False)
        except TaskExists:
            pass  # made by an earlier try: the same task
        except GatewayError as e:
            if e.status >= 500:
                raise
            log.warning(
                "trigger %s made no task for event %s: %s", trigger.id, event.id, e.detail or e
            )
            return None
        return Touched(trigger.queue, task_id, "started", trigger.id)
