"""The queues page: depth by state, throughput over the last minutes, pause and resume.

A few queues show as cards; more as a compact table, searched by name, sorted by name or by a
state's size, 50 rows a page. Either way the page (and each live refresh) reads the rows in
view only (see ``gateway.services.overview``). Queue pickers of the other pages ask
``/queue-names`` for the names matching what was typed (not under ``/queues/``, where it would
hide the page of a queue named "names").
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from markupsafe import Markup, escape
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Route

from gateway.admin.charts import spark
from gateway.admin.pages.queue_home import unserved
from gateway.admin.web import PREFIX, Admin, Visit, checked
from gateway.services.overview import COUNTED_STATES, QueuePage, QueueSort
from sdk.wire import QueueName, QueuePolicyPatch, TaskState

WINDOWS = 10  # minutes of throughput shown
PAGE_SIZE = 50
CARDS_UP_TO = 8  # more queues than this (or a search) show as a table
SUGGESTIONS = 20
DEPTH_STATES = COUNTED_STATES[:4]
DONE_STATES = COUNTED_STATES[4:]
VIEW_FIELDS = ("q", "sort", "dir", "cursor")  # what the page's URL may carry, kept by pause


@dataclass(frozen=True, slots=True)
class View:
    """How the visitor asked to see the queues: search, order, page."""

    search: str | None
    sort: QueueSort
    descending: bool
    offset: int

    def query(self, **changes: str | int | None) -> str:
        """This view's query string, with some parameters changed (None drops one)."""
        values: dict[str, str | int | None] = {
            "q": self.search,
            "sort": None if self.sort is QueueSort.NAME else self.sort.value,
            "dir": "desc" if self.descending else None,
            "cursor": self.offset or None,
        }
        values.update(changes)
        return urlencode({k: v for k, v in values.items() if v is not None})

    def url(self, **changes: str | int | None) -> str:
        query = self.query(**changes)
        return f"{PREFIX}/queues" + (f"?{query}" if query else "")

    def sort_url(self, sort: str) -> str:
        """Order by ``sort``: counts biggest first, names A to Z; again to reverse."""
        if sort == self.sort.value:
            descending = not self.descending
        else:
            descending = sort != QueueSort.NAME.value
        return self.url(sort=sort, dir="desc" if descending else None, cursor=None)


def _view(get: dict[str, str | None]) -> View:
    sort = get.get("sort") or QueueSort.NAME.value
    cursor = get.get("cursor") or "0"
    return View(
        search=get.get("q"),
        sort=checked(QueueSort, "sort", sort),
        descending=get.get("dir") == "desc",
        offset=int(cursor) if cursor.isdigit() and len(cursor) < 7 else 0,
    )


async def queues(visit: Visit) -> Response:
    view = _view({name: visit.query(name) for name in VIEW_FIELDS})
    page = await visit.services.overview.page(
        search=view.search,
        sort=view.sort,
        descending=view.descending,
        offset=view.offset,
        limit=PAGE_SIZE,
        windows=WINDOWS,
    )
    cards = page.total <= CARDS_UP_TO and not view.search
    end = view.offset + len(page.rows)
    warnings = await _warnings(visit, page) if cards else {}
    return visit.render(
        "queues.html",
        "_queues.html",
        active="queues",
        page=page,
        view=view,
        cards=cards,
        rows=[(row, spark(row.throughput) if row.throughput else None) for row in page.rows],
        warnings=warnings,
        totals=await _totals(visit, page, cards),
        depth_states=DEPTH_STATES,
        done_states=DONE_STATES,
        windows=WINDOWS,
        previous_url=view.url(cursor=max(view.offset - PAGE_SIZE, 0) or None)
        if view.offset
        else None,
        next_url=view.url(cursor=end) if end < page.matched else None,
        shown_to=end,
        self_url=visit.here,
    )


async def _warnings(visit: Visit, page: QueuePage) -> dict[str, str]:
    """For each card with queued tasks, why nothing takes them, when nothing can."""
    found = {}
    for row in page.rows:
        queued = row.counts.get(TaskState.QUEUED, 0)
        if queued:
            endpoints = (await visit.services.queues.endpoints(row.name)).items
            reason = unserved(queued, endpoints)
            if reason:
                found[row.name] = reason
    return found


async def _totals(visit: Visit, page: QueuePage, cards: bool) -> dict[TaskState, int]:
    """Tasks in each state across every queue: the cards' own counts summed when every queue
    is a card, else the shared summaries (up to 10 s old, see ``services.overview``)."""
    if cards:
        return {s: sum(r.counts.get(s, 0) for r in page.rows) for s in COUNTED_STATES}
    return {s: await visit.services.overview.total(s) for s in COUNTED_STATES}


async def names(visit: Visit) -> Response:
    """``<option>``s of the queue names matching the ``queue`` typed so far, for a picker's
    ``<datalist>`` (htmx swaps them in)."""
    found = await visit.services.overview.suggest(visit.query("queue"), SUGGESTIONS)
    options = Markup("").join(Markup('<option value="{}">').format(escape(n)) for n in found)
    return HTMLResponse(options, headers={"Cache-Control": "no-store"})


async def _set_paused(visit: Visit, paused: bool) -> Response:
    queue = checked(QueueName, "queue", visit.path("queue"))
    await visit.services.queues.patch(queue, QueuePolicyPatch(paused=paused))
    back = _view({name: (visit.form.get(name) or "").strip() or None for name in VIEW_FIELDS})
    return visit.redirect(back.url(notice="paused" if paused else "resumed"))


async def pause(visit: Visit) -> Response:
    return await _set_paused(visit, True)


async def resume(visit: Visit) -> Response:
    return await _set_paused(visit, False)


def routes(admin: Admin) -> list[BaseRoute]:
    return [
        Route("/queues", admin.page(queues), methods=["GET"]),
        Route("/queue-names", admin.page(names), methods=["GET"]),
        Route("/queues/{queue}/pause", admin.page(pause, change=True), methods=["POST"]),
        Route("/queues/{queue}/resume", admin.page(resume, change=True), methods=["POST"]),
    ]
