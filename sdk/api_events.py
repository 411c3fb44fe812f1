"""The gateway's events and triggers routes as request specs: the same kind of
:class:`~sdk.api.Call` as :mod:`sdk.api`, executed by :mod:`sdk.client_events`. Nothing here
does I/O."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sdk.api import Call, nothing, reads, segment
from sdk.wire import Event, EventCreate, EventPage, Trigger, TriggerCreate, TriggerList

if TYPE_CHECKING:
    from sdk.answers import Params


def send_event(event: EventCreate) -> Call[Event]:
    """``POST /v1/events``: 201 for a new event, 200 for an id sent before (the same event)."""
    return Call("POST", "/v1/events", reads(Event), body=event)


def get_event(event_id: str) -> Call[Event]:
    return Call("GET", f"/v1/events/{segment(event_id)}", reads(Event))


def list_events(
    name: str | None = None, limit: int | None = None, cursor: str | None = None
) -> Call[EventPage]:
    """``GET /v1/events``: one page of events, newest first, of one name or all."""
    given = {"name": name, "limit": limit, "cursor": cursor}
    params: Params = {key: value for key, value in given.items() if value is not None}
    return Call("GET", "/v1/events", reads(EventPage), params=params)


def _trigger(trigger_id: str) -> str:
    return f"/v1/triggers/{segment(trigger_id)}"


def put_trigger(trigger_id: str, trigger: TriggerCreate) -> Call[Trigger]:
    return Call("PUT", _trigger(trigger_id), reads(Trigger), body=trigger)


def get_trigger(trigger_id: str) -> Call[Trigger]:
    return Call("GET", _trigger(trigger_id), reads(Trigger))


def list_triggers() -> Call[TriggerList]:
    return Call("GET", "/v1/triggers", reads(TriggerList))


def delete_trigger(trigger_id: str) -> Call[None]:
    return Call("DELETE", _trigger(trigger_id), nothing)
