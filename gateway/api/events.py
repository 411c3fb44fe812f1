"""Routes for events (publish with an ``events:<pattern>`` scope, read with ``read``) and
triggers (admin to change, read to list): docs/events.md."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from gateway.api.routing import Call, Link, Operation, Param, Reply
from gateway.security.auth import Access
from gateway.services.events import EventService
from gateway.services.tasks import OffsetCursor
from gateway.services.triggers import TriggerService
from sdk.wire import (
    Event,
    EventCreate,
    EventId,
    EventName,
    EventPage,
    Trigger,
    TriggerCreate,
    TriggerId,
    TriggerList,
)


def _events(call: Call) -> EventService:
    events: EventService = call.services.events
    return events


def _triggers(call: Call) -> TriggerService:
    triggers: TriggerService = call.services.triggers
    return triggers


def _trigger_id(call: Call) -> str:
    return str(TRIGGER.parse(call.path("trigger")))


async def publish_event(call: Call) -> Reply:
    spec: EventCreate = call.body
    if call.principal is not None:
        call.principal.require(Access.PUBLISH, spec.name)
    event, new = await _events(call).publish(spec)
    return Reply(event, 201 if new else 200)


async def list_events(call: Call) -> BaseModel:
    return await _events(call).page(call.param(NAME), call.param(CURSOR), call.param(LIMIT))


async def get_event(call: Call) -> BaseModel:
    return await _events(call).get(str(EVENT_ID.parse(call.path("event_id"))))


async def put_trigger(call: Call) -> Reply:
    trigger, created = await _triggers(call).put(_trigger_id(call), call.body)
    return Reply(trigger, 201 if created else 200)


async def list_triggers(call: Call) -> BaseModel:
    return await _triggers(call).list()


async def get_trigger(call: Call) -> BaseModel:
    return await _triggers(call).get(_trigger_id(call))


async def delete_trigger(call: Call) -> None:
    await _triggers(call).delete(_trigger_id(call))


EVENT_ID = Param("event_id", "path", "Event id.", EventId, True)
TRIGGER = Param("trigger", "path", "Trigger id.", TriggerId, True)
NAME = Param("name", "query", "Only events of this name.", EventName)
LIMIT = Param("limit", "query", "Page size.", Annotated[int, Field(ge=1, le=500)], default=50)
CURSOR = Param("cursor", "query", "The next_cursor of the previous page.", OffsetCursor)

TRIGGER_LINKS = tuple(
    Link(name, target, {"trigger": "$request.path.trigger"})
    for name, target in (("GetTrigger", "get_trigger"), ("DeleteTrigger", "delete_trigger"))
)

OPERATIONS = [
    Operation(
        "POST",
        "/v1/events",
        "Publish an event",
        "events",
        Access.PUBLISH,
        publish_event,
        body=EventCreate,
        response=Event,
        status=201,
        also=(200,),
        description="201 for a new event, 200 for an id sent before: the same event, whose "
        "first name and data stand and whose tasks are not made twice. Each trigger of the "
        "name whose filter matches starts one task (started); waits on it resume and "
        "cancel_on entries cancel. Needs an events:<pattern> scope matching the name (403 "
        "otherwise) or admin. An unanswered publish (a timeout, a dropped connection) is safe "
        "to send again with the same id.",
        links=(Link("GetEvent", "get_event", {"event_id": "$response.body#/id"}),),
    ),
    Operation(
        "GET",
        "/v1/events",
        "List events, newest first",
        "events",
        Access.READ,
        list_events,
        response=EventPage,
        params=(NAME, LIMIT, CURSOR),
        description="Events within the event retention, each with the tasks it touched.",
    ),
    Operation(
        "GET",
        "/v1/events/{event_id}",
        "Get an event and the tasks it touched",
        "events",
        Access.READ,
        get_event,
        response=Event,
        params=(EVENT_ID,),
        errors=(404,),
    ),
    Operation(
        "PUT",
        "/v1/triggers/{trigger}",
        "Define or replace a trigger",
        "triggers",
        Access.ADMIN,
        put_trigger,
        body=TriggerCreate,
        response=Trigger,
        status=201,
        also=(200,),
        params=(TRIGGER,),
        errors=(404,),
        description="201 when new, 200 when replaced. The queue must be registered (404 "
        "otherwise). Every gateway uses the change within a second.",
        links=TRIGGER_LINKS,
    ),
    Operation(
        "GET",
        "/v1/triggers",
        "List triggers",
        "triggers",
        Access.READ,
        list_triggers,
        response=TriggerList,
    ),
    Operation(
        "GET",
        "/v1/triggers/{trigger}",
        "Get a trigger",
        "triggers",
        Access.READ,
        get_trigger,
        response=Trigger,
        params=(TRIGGER,),
        errors=(404,),
    ),
    Operation(
        "DELETE",
        "/v1/triggers/{trigger}",
        "Delete a trigger",
        "triggers",
        Access.ADMIN,
        delete_trigger,
        status=204,
        params=(TRIGGER,),
        errors=(404,),
        description="Tasks it started stay in their queues.",
    ),
]
