"""Events: the recent events, newest first, searchable by name and by id, each with the tasks it
started, resumed and cancelled (docs/events.md). Read through the events service, like
``GET /v1/events``."""

from __future__ import annotations

from urllib.parse import urlencode

from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.admin.web import PREFIX, Admin, Visit, checked
from gateway.core.errors import EventNotFound
from gateway.services.tasks import OffsetCursor
from sdk.wire import EventId, EventName, EventPage

PAGE_SIZE = 50


async def events(visit: Visit) -> Response:
    name = visit.query("name")
    if name is not None:
        name = str(checked(EventName, "name", name))
    event_id = visit.query("id")
    cursor = visit.query("cursor")
    if cursor is not None:
        cursor = str(checked(OffsetCursor, "cursor", cursor))
    next_url = None
    if event_id is not None:  # one event, by its id
        event_id = str(checked(EventId, "id", event_id))
        try:
            page = EventPage(items=[await visit.services.events.get(event_id)])
        except EventNotFound:
            page = EventPage(items=[])
    else:
        page = await visit.services.events.page(name, cursor, PAGE_SIZE)
        if page.next_cursor is not None:
            query = {**({"name": name} if name else {}), "cursor": page.next_cursor}
            next_url = f"{PREFIX}/events?{urlencode(query)}"
    first = f"{PREFIX}/events" + (f"?{urlencode({'name': name})}" if name else "")
    return visit.render(
        "events.html",
        "_events.html",
        active="events",
        page=page,
        name=name,
        event_id=event_id,
        paged=cursor is not None,
        first_url=first,
        next_url=next_url,
        self_url=visit.here,
    )


def routes(admin: Admin) -> list[BaseRoute]:
    return [Route("/events", admin.page(events), methods=["GET"])]
