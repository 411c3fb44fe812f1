"""Dead letters: search by queue, name and owner; select some (or all that match) and queue
them again."""

from __future__ import annotations

from urllib.parse import urlencode

from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.admin.web import PREFIX, Admin, Form, Visit, checked
from gateway.core.errors import QueueNotFound
from gateway.services.operations import DeadLetterCursor
from sdk.wire import DeadLetterFilter, ResubmitRequest, TaskPage, TaskState

PAGE_SIZE = 50
FILTER_FIELDS = ("queue", "name", "owner")


def _filter(values: dict[str, str | None]) -> DeadLetterFilter:
    return DeadLetterFilter(**{k: v for k, v in values.items() if v})


async def dead_letters(visit: Visit) -> Response:
    given = {name: visit.query(name) for name in FILTER_FIELDS}
    f = _filter(given)
    cursor = visit.query("cursor")
    if cursor is not None:
        cursor = str(checked(DeadLetterCursor, "cursor", cursor))
    unknown = dead_total = None
    try:
        page = await visit.services.operations.dead_letters(f, PAGE_SIZE, cursor)
        dead_total = await visit.services.overview.total(TaskState.DEAD, f.queue)
    except QueueNotFound:  # a name typed in the picker
        page, unknown = TaskPage(items=[]), f.queue
    query = {k: v for k, v in given.items() if v}
    next_url = None
    if page.next_cursor is not None:
        next_url = f"{PREFIX}/deadletters?{urlencode({**query, 'cursor': page.next_cursor})}"
    return visit.render(
        "deadletters.html",
        "_deadletters.html",
        active="deadletters",
        picked=f.queue,
        picker_placeholder="all queues",
        filter=f,
        page=page,
        paged=cursor is not None,
        first_url=f"{PREFIX}/deadletters?{urlencode(query)}",
        next_url=next_url,
        self_url=visit.here,
        unknown_queue=unknown,
        dead_total=dead_total,
        status=404 if unknown else 200,
    )


def _request(form: Form) -> ResubmitRequest:
    """The selected ids, or with ``all``, every dead letter matching the form's filter."""
    if form.get("all"):
        f = _filter({name: (form.get(name) or "").strip() or None for name in FILTER_FIELDS})
        return ResubmitRequest(filter=f)
    return ResubmitRequest(ids=[i.upper() for i in form.getlist("ids")] or None)


async def resubmit(visit: Visit) -> Response:
    request = _request(visit.form)
    result = await visit.services.operations.resubmit(request)
    back = {name: visit.form.get(name) or "" for name in FILTER_FIELDS}
    query = urlencode(
        {
            **{k: v for k, v in back.items() if v},
            "notice": "resubmitted",
            "n": len(result.resubmitted),
            "skipped": len(result.skipped),
        }
    )
    return visit.redirect(f"{PREFIX}/deadletters?{query}")


def routes(admin: Admin) -> list[BaseRoute]:
    return [
        Route("/deadletters", admin.page(dead_letters), methods=["GET"]),
        Route("/deadletters/resubmit", admin.page(resubmit, change=True), methods=["POST"]),
    ]
