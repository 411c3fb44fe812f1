"""The events and triggers methods of :class:`~sdk.client.Client` and
:class:`~sdk.client.AsyncClient`: the calls of :mod:`sdk.api_events`, as two mixins the clients
inherit. A mixin only builds the call; the client's own ``_send`` executes it.

::

    client.put_trigger("welcome", event="user.created", task=send_welcome)
    client.send_event("user.created", {"user_id": 7}, id="signup-7")

A trigger's task gets the event as its keyword argument ``event`` (``{"id", "name",
"data"}``): ``@task(queue="mail") def send_welcome(event): ...``. docs/events.md is the guide.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from sdk import lazy

if TYPE_CHECKING:
    from sdk import api_events, api_jobs, wire
    from sdk.api import Call
    from sdk.api_jobs import NamedTask
    from sdk.wire import Event, EventCreate, EventPage, Trigger, TriggerCreate, TriggerList
else:  # loaded on first use, so that `from sdk import Client` stays light (sdk/lazy.py)
    api_events = lazy.module("sdk.api_events")
    api_jobs = lazy.module("sdk.api_jobs")
    wire = lazy.module("sdk.wire")

__all__ = ["AsyncEventMethods", "EventMethods"]

T = TypeVar("T")


def event_body(name: str, data: Mapping[str, Any] | None, event_id: str | None) -> EventCreate:
    return wire.EventCreate(name=name, data=dict(data or {}), id=event_id)


def trigger_body(
    event: str,
    task: NamedTask | str,
    queue: str | None,
    filter: Mapping[str, Any] | None,
    priority: int,
    description: str,
) -> TriggerCreate:
    """A trigger's body; ``task`` a task function (its queue and name) or a task name (then
    ``queue`` is needed)."""
    if isinstance(task, api_jobs.NamedTask):
        queue, task = queue or task.queue, task.name
    if queue is None:
        raise TypeError("give the trigger's queue, or a task function (@task) as task")
    return wire.TriggerCreate(
        event=event,
        queue=queue,
        task=task,
        filter=dict(filter or {}),
        priority=priority,
        description=description,
    )


class EventMethods:
    """Events and triggers with a blocking :class:`~sdk.client.Client`. Refusals raise
    :class:`~sdk.errors.ApiError` (``403`` a key whose ``events:`` scopes do not cover the
    name, ``404`` an unknown event, trigger or queue)."""

    def _send(self, call: Call[T]) -> T:
        raise NotImplementedError

    def send_event(
        self, name: str, data: Mapping[str, Any] | None = None, id: str | None = None
    ) -> Event:
        """Publish an event; returns it with the tasks it started, resumed and cancelled.
        Give ``id`` (your own: an order number, a webhook's delivery id) to make a retry safe:
        sending it again is the same event, and nothing is done twice."""
        return self._send(api_events.send_event(event_body(name, data, id)))

    def get_event(self, event_id: str) -> Event:
        return self._send(api_events.get_event(event_id))

    def list_events(
        self, name: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> EventPage:
        """One page of events, newest first (50 unless ``limit``, at most 500)."""
        return self._send(api_events.list_events(name, limit, cursor))

    def put_trigger(
        self,
        trigger_id: str,
        *,
        event: str,
        task: NamedTask | str,
        queue: str | None = None,
        filter: Mapping[str, Any] | None = None,
        priority: int = 0,
        description: str = "",
    ) -> Trigger:
        """Define (or replace) a trigger: each event named ``event`` whose data matches
        ``filter`` (equality of top-level fields) starts one ``task``."""
        body = trigger_body(event, task, queue, filter, priority, description)
        return self._send(api_events.put_trigger(trigger_id, body))

    def get_trigger(self, trigger_id: str) -> Trigger:
        return self._send(api_events.get_trigger(trigger_id))

    def list_triggers(self) -> TriggerList:
        return self._send(api_events.list_triggers())

    def delete_trigger(self, trigger_id: str) -> None:
        self._send(api_events.delete_trigger(trigger_id))


class AsyncEventMethods:
    """The asyncio twin of :class:`EventMethods`, for :class:`~sdk.client.AsyncClient`."""

    async def _send(self, call: Call[T]) -> T:
        raise NotImplementedError

    async def send_event(
        self, name: str, data: Mapping[str, Any] | None = None, id: str | None = None
    ) -> Event:
        return await self._send(api_events.send_event(event_body(name, data, id)))

    async def get_event(self, event_id: str) -> Event:
        return await self._send(api_events.get_event(event_id))

    async def list_events(
        self, name: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> EventPage:
        return await self._send(api_events.list_events(name, limit, cursor))

    async def put_trigger(
        self,
        trigger_id: str,
        *,
        event: str,
        task: NamedTask | str,
        queue: str | None = None,
        filter: Mapping[str, Any] | None = None,
        priority: int = 0,
        description: str = "",
    ) -> Trigger:
        body = trigger_body(event, task, queue, filter, priority, description)
        return await self._send(api_events.put_trigger(trigger_id, body))

    async def get_trigger(self, trigger_id: str) -> Trigger:
        return await self._send(api_events.get_trigger(trigger_id))

    async def list_triggers(self) -> TriggerList:
        return await self._send(api_events.list_triggers())

    async def delete_trigger(self, trigger_id: str) -> None:
        await self._send(api_events.delete_trigger(trigger_id))
